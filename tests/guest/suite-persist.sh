#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Persistence across a guest reboot: "write" in one boot, "check" in the next (same NVDIMM file).
source /tests/lib.sh
PHASE=$1
# Same job and seed in both boots, so fio can verify in the second what the first wrote.
JOB=(--name=persist --filename=/dev/rpmem0 --direct=1 --ioengine=psync --rw=write --bs=64k
     --size=100% --verify=crc32c --verify_fatal=1 --randseed=4242 --output-format=terse)

test_write() {
    load_rust_pmem
    fio "${JOB[@]}" --do_verify=0 >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio write"; }
    unload_module rust_pmem
}
test_check() {
    load_rust_pmem
    fio "${JOB[@]}" --verify_only=1 >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "contents changed across reboot"; }
    unload_module rust_pmem
    kernel_clean
}
# The same for the NVMe namespace through rust_nvme_mq (rmmod shuts the controller down with
# CC.SHN before the guest powers off).
NVME_JOB=(--name=persist --filename=/dev/rnvme0n1 --direct=1 --ioengine=psync --rw=write
          --bs=64k --size=100% --verify=crc32c --verify_fatal=1 --randseed=4343 --output-format=terse)
test_nvme_write() {
    insmod $MODDIR/rust_nvme_mq.ko
    wait_dev /dev/rnvme0n1
    fio "${NVME_JOB[@]}" --do_verify=0 >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio write"; }
    unload_module rust_nvme_mq
}
test_nvme_check() {
    insmod $MODDIR/rust_nvme_mq.ko
    wait_dev /dev/rnvme0n1
    fio "${NVME_JOB[@]}" --verify_only=1 >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "contents changed across reboot"; }
    unload_module rust_nvme_mq
    kernel_clean
}
case "$PHASE" in
    write)
        t pmem_persist_reboot_write test_write
        t nvme_persist_reboot_write test_nvme_write ;;
    check)
        t pmem_contents_survive_reboot test_check
        t nvme_contents_survive_reboot test_nvme_check ;;
    *) echo "usage: $0 write|check"; exit 2 ;;
esac

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Persistence across a guest reboot: "write" in one boot, "check" in the next (same NVDIMM and
# NVMe image files). For NVMe, rmmod shuts the controller down with CC.SHN before power-off.
source /tests/lib.sh
suite_help "$@"
PHASE=$1

# persist MODULE DEVICE SEED write|check: write the whole device with checksummed blocks, or
# verify what the previous boot wrote (same job and seed, so fio recomputes the same data).
persist() {
    local module=$1 dev=$2 seed=$3 phase=$4 mode
    local job=(--name=persist --filename="$dev" --direct=1 --ioengine=psync --rw=write --bs=64k
               --size=100% --verify=crc32c --verify_fatal=1 --randseed="$seed" --output-format=terse)
    case $phase in
        write) mode=--do_verify=0 ;;
        check) mode=--verify_only=1 ;;
    esac
    insmod "$MODDIR/$module.ko"
    wait_dev "$dev"
    fio "${job[@]}" "$mode" >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio $phase on $dev"; }
    unload_module "$module"
    [[ $phase == write ]] || kernel_clean
}

test_pmem_persist_reboot_write() { persist rust_pmem /dev/rpmem0 4242 write; }
test_nvme_persist_reboot_write() { persist rust_nvme_mq /dev/rnvme0n1 4343 write; }
test_pmem_contents_survive_reboot() { persist rust_pmem /dev/rpmem0 4242 check; }
test_nvme_contents_survive_reboot() { persist rust_nvme_mq /dev/rnvme0n1 4343 check; }

case "$PHASE" in
    write)
        t pmem_persist_reboot_write
        t nvme_persist_reboot_write ;;
    check)
        t pmem_contents_survive_reboot
        t nvme_contents_survive_reboot ;;
    *) echo "usage: $0 write|check"; exit 2 ;;
esac

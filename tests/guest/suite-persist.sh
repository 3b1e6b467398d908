#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Persistence across a guest reboot: "write SEED" in one boot, "check SEED" in the next (same
# NVDIMM and NVMe image files). For NVMe, rmmod shuts the controller down with CC.SHN before
# power-off. SEED (a positive integer, a new one for each run: scripts/run-tests.sh takes it
# from the clock) makes the data this run's: what an earlier run left in the images does not
# verify.
source /tests/lib.sh
suite_help "$@"
PHASE=$1
SEED=${2:-}
[[ $SEED =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 write|check SEED (a positive integer)"; exit 2; }

# persist MODULE DEVICE SEED write|check: write the whole device, or verify what the previous
# boot wrote, byte for byte: every block holds SEED and its own offset (fio's verify_pattern
# with %o), 16 bytes repeated. (A checksum verify would not do: fio's crc32c accepts any
# self-consistent block, an earlier run's too, whatever --randseed.)
persist() {
    local module=$1 dev=$2 seed=$3 phase=$4 mode
    local job=(--name=persist --filename="$dev" --direct=1 --ioengine=psync --rw=write --bs=64k
               --size=100% --verify=pattern --verify_pattern="0x$(printf %016x "$seed")%o"
               --verify_fatal=1 --output-format=terse)
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

test_pmem_persist_reboot_write() { persist rust_pmem /dev/rpmem0 "$SEED" write; }
test_nvme_persist_reboot_write() { persist rust_nvme_mq /dev/rnvme0n1 $((SEED + 1)) write; }
test_pmem_contents_survive_reboot() { persist rust_pmem /dev/rpmem0 "$SEED" check; }
test_nvme_contents_survive_reboot() { persist rust_nvme_mq /dev/rnvme0n1 $((SEED + 1)) check; }

case "$PHASE" in
    write)
        t pmem_persist_reboot_write
        t nvme_persist_reboot_write ;;
    check)
        t pmem_contents_survive_reboot
        t nvme_contents_survive_reboot ;;
    *) echo "usage: $0 write|check SEED"; exit 2 ;;
esac

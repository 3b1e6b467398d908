#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Persistence across a guest reboot: "write SEED" in one boot, "check SEED" in the next (same
# NVDIMM and NVMe image files). For NVMe, rmmod shuts the controller down with CC.SHN before
# power-off. SEED (a positive integer, a new one for each run: scripts/run-tests.sh takes it
# from the clock) makes the data this run's: what an earlier run left in the images does not
# verify.
#
# What the next boot can and cannot show: QEMU keeps both devices' data in host files (the
# NVDIMM is a shared mapping of pmem.img: the guest's stores are in the host's page cache at
# once; the NVMe's image is written by QEMU, and QEMU flushes it when it exits). So data read
# back in the next boot shows the drivers wrote it to the device at the right offsets, not
# that they flushed it: a driver whose flush does nothing passes that boot too. The flush is
# checked where it can be seen: the write boot fsyncs each disk (the block layer's count of
# completed flushes must rise), and for NVMe scripts/run-tests.sh checks in QEMU's trace of the
# write boot that a Flush command reached the controller after the last write
# (nvme_persist_flush_reached_controller). The NVDIMM has no flush hint addresses, so its flush
# is a CPU barrier in the guest that no host-side check sees (rust_pmem's FUA/write-cache
# settings are compared with nd_pmem's in suite-pmem-flush.sh).
source /tests/lib.sh
suite_help "$@"
PHASE=$1
SEED=${2:-}
[[ $SEED =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 write|check SEED (a positive integer)"; exit 2; }

# flushes DISK: flush requests the block layer completed on DISK (/sys/block/DISK/stat, field 16).
flushes() { awk '{ print $16 }' "/sys/block/$1/stat"; }

# persist MODULE DEVICE SEED write|check: write the whole device, or verify what the previous
# boot wrote, byte for byte: every block holds SEED and its own offset (fio's verify_pattern
# with %o), 16 bytes repeated. (A checksum verify would not do: fio's crc32c accepts any
# self-consistent block, an earlier run's too, whatever --randseed.)
# write: fio ends with an fsync of the disk, which must reach the driver as a flush request;
# then the driver is reloaded (nothing of the data can stay in it) and the data verified.
persist() {
    local module=$1 dev=$2 seed=$3 phase=$4 before
    local job=(--name=persist --filename="$dev" --direct=1 --ioengine=psync --rw=write --bs=64k
               --size=100% --verify=pattern --verify_pattern="0x$(printf %016x "$seed")%o"
               --verify_fatal=1 --output-format=terse)
    echo "seed $seed"
    insmod "$MODDIR/$module.ko"
    wait_dev "$dev"
    if [[ $phase == write ]]; then
        before=$(flushes "${dev#/dev/}")
        fio "${job[@]}" --do_verify=0 --end_fsync=1 >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio write on $dev"; }
        echo "flush requests completed on $dev: $before before the write, $(flushes "${dev#/dev/}") after its fsync"
        (($(flushes "${dev#/dev/}") > before)) || fail "the fsync after the write sent no flush request to $dev"
        unload_module "$module"
        insmod "$MODDIR/$module.ko"
        wait_dev "$dev"
    fi
    fio "${job[@]}" --verify_only=1 >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio verify on $dev ($phase)"; }
    unload_module "$module"
}

test_pmem_persist_reboot_write() { persist rust_pmem /dev/rpmem0 "$SEED" write; }
test_nvme_persist_reboot_write() { persist rust_nvme_mq /dev/rnvme0n1 $((SEED + 1)) write; }
test_pmem_data_reads_back_next_boot() { persist rust_pmem /dev/rpmem0 "$SEED" check; }
test_nvme_data_reads_back_next_boot() { persist rust_nvme_mq /dev/rnvme0n1 $((SEED + 1)) check; }

case "$PHASE" in
    write)
        t pmem_persist_reboot_write
        t nvme_persist_reboot_write ;;
    check)
        t pmem_data_reads_back_next_boot
        t nvme_data_reads_back_next_boot ;;
    *) echo "usage: $0 write|check SEED"; exit 2 ;;
esac

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe controller shutdown, checked from the device's side on the host: the boot runs with
# scripts/guest.sh --trace (QEMU's NVMe trace events) and tests/host/nvme-shutdown-trace.sh reads
# the trace after the guest has powered off (see scripts/run-tests.sh).
#   poweroff: rust_nvme_mq stays bound; /init powers off (busybox poweroff -f: the reboot system
#             call, kernel_power_off() -> device_shutdown() -> the PCI shutdown callback)
#   rmmod:    rust_nvme_mq is unloaded before the power-off (unbind)
# Here, the guest side: the driver binds and writes reach the disk.
source /tests/lib.sh
suite_help "$@"
source /tests/nvme-lib.sh
MODE=${1:?usage: suite-nvme-shutdown.sh poweroff|rmmod}

bind_and_write() {
    load_nvme
    # Writes left in the controller's cache (no flush) are what a clean shutdown is for. They
    # read back (the driver serves this boot; the shutdown itself is checked from QEMU's trace).
    # tests/host/nvme-shutdown-trace.sh finds these writes (LBAs 4736 to 12927) in QEMU's trace.
    head -c $((64 * 64 * 1024)) /dev/urandom >/tmp/pattern
    dd if=/tmp/pattern of=$DEV bs=64k seek=37 oflag=direct status=none
    cmp <(dd if=$DEV bs=64k skip=37 count=64 iflag=direct status=none) /tmp/pattern || fail "the written blocks do not read back"
    # poweroff: reads still in flight when the power-off starts (the shutdown waits for them).
    if [[ ${1:-} == reading ]]; then
        dd if=$DEV of=/dev/null bs=4k count=20000 iflag=direct status=none </dev/null >/dev/null 2>&1 &
    fi
}

test_nvme_shutdown_rmmod_unbind() {
    unload_nvme
    [[ ! -e /sys/module/rust_nvme_mq ]] || fail "rust_nvme_mq still loaded"
}

test_nvme_shutdown_bound_write() { bind_and_write reading; }
test_nvme_shutdown_rmmod_write() { bind_and_write; }

case $MODE in
    poweroff) t nvme_shutdown_bound_write ;;
    rmmod)
        t nvme_shutdown_rmmod_write
        t nvme_shutdown_rmmod_unbind
        ;;
    *) fail "unknown mode $MODE" ;;
esac

# SPDX-License-Identifier: GPL-2.0
# Helpers for the rust_nvme_mq guest suites: load/unload the driver, read its per-queue counters.

DEV=/dev/rnvme0n1
STATS=/sys/kernel/debug/rust_nvme_mq/rnvme0/queues
NCPU=$(nproc)
[[ -d /sys/kernel/debug/rust_nvme_mq || -e /sys/kernel/debug/block ]] || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true

load_nvme() { # a failed test may have left it loaded
    umount /mnt/n 2>/dev/null || true
    [[ ! -e /sys/module/rust_nvme_mq ]] || unload_module rust_nvme_mq
    insmod "$MODDIR/rust_nvme_mq.ko" "$@"; wait_dev $DEV; }
unload_nvme() { unload_module rust_nvme_mq; [[ ! -e $DEV ]] || fail "$DEV still there after rmmod"; }
# qstat QID COLUMN: a counter of I/O queue QID (columns: see the header line of $STATS).
qstat() {
    awk -v q="$1" -v col="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
        $1 == q { print $c }' "$STATS"
}
sum_col() { awk -v col="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    /^[0-9]/ { s += $c } END { print s + 0 }' "$STATS"; }

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
# rust_bdf: the PCI address of the controller rust_nvme_mq is bound to.
rust_bdf() { basename "$(ls -d /sys/bus/pci/drivers/rust_nvme_mq/0000:* | head -n1)"; }
# rnvme_major: the major number of the rnvme class's device numbers (empty when not registered).
rnvme_major() { awk '$2 == "rnvme" { print $1 }' /proc/devices; }
unload_nvme() { unload_module rust_nvme_mq; [[ ! -e $DEV ]] || fail "$DEV still there after rmmod"; }
# qstat QID COLUMN: a counter of I/O queue QID (columns: see the header line of $STATS).
qstat() {
    awk -v q="$1" -v col="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
        $1 == q { print $c }' "$STATS"
}
sum_col() { awk -v col="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    /^[0-9]/ { s += $c } END { print s + 0 }' "$STATS"; }
# batched [refused]: requests blk-mq handed to the driver in batches (queue_rqs), or of them
# those no queue took (requeued)
batched() { local f=/sys/kernel/debug/rust_nvme_mq/rnvme0/batched
    [[ -r $f ]] || fail "$f missing"
    if [[ ${1:-} == refused ]]; then awk '{ print $2 }' "$f"; else awk '{ print $1 }' "$f"; fi; }
# disk_ios: requests the block layer completed on rnvme0n1 (reads + writes + discards in
# /sys/block/rnvme0n1/stat), counted apart from the driver. One per command for loads without
# flushes (an fsync's empty preflush request counts as a write there, its flush apart).
disk_ios() { awk '{ print $1 + $5 + $12 }' /sys/block/rnvme0n1/stat; }
# hang_watch SECONDS: if the calling test still runs after SECONDS, put in the kernel log (at
# error level, so the console shows it; no kernel report, so no verdict changes) the tasks in
# D state and this suite's tools (fio, nvme, bash) with where they wait, the disk's requests
# in flight, the controller's state and the driver's last messages since klog_mark (the
# console shows errors only), so that a hang that ends in the boot's deadline shows where it
# stopped (the host prints the console's tail). Through the kernel log, not a write to the
# console's tty: the kernel prints without waiting for the serial port's interrupt, which a
# write to the tty waits for. The watcher ends when the test does.
hang_watch() {
    local test=$BASHPID
    (
        sleep "$1"
        kill -0 "$test" 2>/dev/null || exit 0
        {
            echo "the test still runs after $1 s; waiting tasks:"
            for p in /proc/[0-9]*; do
                st=$(awk '{ print $3 }' "$p/stat" 2>/dev/null) || continue
                comm=$(cat "$p/comm" 2>/dev/null) || continue
                [[ $st == D || $comm =~ ^(fio|nvme|bash)$ ]] || continue
                echo "${p#/proc/} $comm $st $(cat "$p/wchan" 2>/dev/null)"
                [[ $st != D ]] || head -n 8 "$p/stack" 2>/dev/null | sed 's/^/  /'
            done
            echo "in flight (rnvme0n1): $(cat /sys/block/rnvme0n1/inflight 2>/dev/null || echo no disk)"
            echo "controller state: $(cat /sys/block/rnvme0n1/device/state 2>/dev/null || echo none)"
            echo "the driver's last messages:"
            klog | grep -aE "rnvme[0-9]|rust_nvme_mq" | grep -v rblk-watchdog | tail -n 12
        } | while IFS= read -r line; do echo "<3>rblk-watchdog: $line" >/dev/kmsg; done
    ) &
}

# all_completed: every command the driver submitted it completed (its own counters), checked
# against counts it does not keep: the block layer has no request of rnvme0n1 in flight
# (/sys/block/rnvme0n1/inflight), and it completed no more requests than the driver completed
# commands (both count from the load, when the disk is made; a request is one command or more:
# retries, requeues, and the flushes the disk's stat leaves out).
all_completed() {
    local done
    done=$(sum_col completed)
    expect_eq "all completed (the driver's counters)" "$done" "$(sum_col submitted)"
    expect_eq "requests in flight (the block layer's count)" "$(awk '{ print $1 + $2 }' /sys/block/rnvme0n1/inflight)" 0
    (($(disk_ios) <= done)) || fail "the block layer completed $(disk_ios) requests, the driver only $done commands"
}

# home_queue CMD...: run CMD (I/O at queue depth 1, pinned to one CPU), print the queue that
# took 64 or more of its commands: that CPU's home queue.
home_queue() {
    local q before=() home=""
    for q in $(seq 1 "$(grep -cE '^[0-9]' "$STATS")"); do before[$q]=$(qstat $q submitted); done
    "$@" >/dev/null 2>&1 || { echo "home_queue: '$*' failed" >&2; return 1; }
    for q in $(seq 1 "$(grep -cE '^[0-9]' "$STATS")"); do
        [[ $(($(qstat $q submitted) - ${before[$q]})) -lt 64 ]] || home=$q
    done
    [[ -n $home ]] || { cat "$STATS" >&2; echo "home_queue: no queue took the commands of '$*'" >&2; return 1; }
    echo "$home"
}

# snap_counters: remember each queue's submitted, overflow_in and overflow_out counters and
# disk_ios, for check_lending.
snap_counters() {
    local q
    SNAP_SUB=() SNAP_IN=() SNAP_OUT=()
    for q in $(seq 1 "$(grep -cE '^[0-9]' "$STATS")"); do
        SNAP_SUB[$q]=$(qstat $q submitted)
        SNAP_IN[$q]=$(qstat $q overflow_in)
        SNAP_OUT[$q]=$(qstat $q overflow_out)
    done
    SNAP_IOS=$(disk_ios)
}

# check_lending HOME: since snap_counters, one CPU whose home queue is HOME submitted all I/O.
# So every command another queue took was lent to it by HOME. The overflow counters (counted
# in queue_rq) are checked against what they cannot be derived from: each queue's own count of
# commands written to it, and the block layer's count of completed requests. Sets LENT to the
# number of lent commands.
check_lending() {
    local home=$1 q sub in out total=0
    LENT=0
    for q in $(seq 1 "$(grep -cE '^[0-9]' "$STATS")"); do
        sub=$(($(qstat $q submitted) - ${SNAP_SUB[$q]}))
        in=$(($(qstat $q overflow_in) - ${SNAP_IN[$q]}))
        out=$(($(qstat $q overflow_out) - ${SNAP_OUT[$q]}))
        total=$((total + sub))
        if [[ $q == "$home" ]]; then
            expect_eq "overflow_in of the home queue $home" "$in" 0
        else
            expect_eq "overflow_in of queue $q = commands written to it" "$in" "$sub"
            expect_eq "overflow_out of queue $q (not the home queue)" "$out" 0
            LENT=$((LENT + sub))
        fi
    done
    expect_eq "overflow_out of the home queue $home = commands on the other queues" \
        "$(($(qstat $home overflow_out) - ${SNAP_OUT[$home]}))" "$LENT"
    expect_eq "commands written to the queues = requests the block layer completed" \
        "$total" "$(($(disk_ios) - SNAP_IOS))"
    echo "home queue $home, $total commands, $LENT lent to other queues"
}

# wait_exit PID SECONDS: wait until PID has exited, at most SECONDS (busybox tail has no --pid).
wait_exit() {
    local i
    for i in $(seq "$2"); do kill -0 "$1" 2>/dev/null || return 0; sleep 1; done
    kill -0 "$1" 2>/dev/null && { kill "$1"; return 1; }
    return 0
}

# fio_verify NAME [EXTRA...]: write and verify 64 MiB (random 4 KiB writes, crc32c), 4 loops
# unless told; fio's output goes to stdout.
fio_verify() {
    local name=$1
    shift
    fio --name="$name" --filename=$DEV --direct=1 --ioengine=io_uring --iodepth=16 \
        --rw=randwrite --bs=4k --size=64m --verify=crc32c --verify_fatal=1 --do_verify=1 \
        --loops=4 "$@"
}

# fio_bg NAME [EXTRA...]: fio_verify in the background; sets FIO_PID and FIO_NAME.
fio_bg() {
    local name=$1
    fio_verify "$@" >/tmp/$name.out 2>&1 &
    FIO_PID=$! FIO_NAME=$name
}

# fio_until_stopped NAME: in the background, fio_verify with one loop after another until
# fio_stop, so that the I/O lasts as long as the events under it take, however slow the
# kernel (a debug kernel takes several times as long); stops at the first fio that fails.
# Sets FIO_PID and FIO_NAME like fio_bg.
fio_until_stopped() {
    local name=$1
    rm -f "/tmp/$name.stop"
    (while [ ! -e "/tmp/$name.stop" ]; do fio_verify "$name" --loops=1 || exit; done) \
        >/tmp/$name.out 2>&1 &
    FIO_PID=$! FIO_NAME=$name
}

# fio_stop: have fio_until_stopped end after the fio that is running (its verify included).
fio_stop() { touch "/tmp/$FIO_NAME.stop"; }

# fio_done [SECONDS]: wait (300 s unless told) for fio_bg's fio to finish, and fail unless it
# succeeded (its output then shown).
fio_done() {
    wait_exit $FIO_PID "${1:-300}" || fail "fio did not finish"
    wait $FIO_PID || { cat "/tmp/$FIO_NAME.out"; fail "fio saw errors"; }
}

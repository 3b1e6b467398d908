#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rust_nvme_mq poll queues (poll_queues=N): polled I/O (io_uring IOPOLL, pvsync2 RWF_HIPRI)
# runs on queue pairs created without interrupts and is reaped by the blk-mq poll callback.
# QEMU's NVMe with 4 I/O queue pairs: boot with --smp 4. Every test loads the driver itself
# and leaves it unloaded.
set -uo pipefail  # not -e: `t` reports a failed test and the suite goes on
. /tests/lib.sh
suite_help "$@"
. /tests/nvme-lib.sh

NPOLL=2

# The queue ids of the poll (1) or interrupt-driven (0) queues, from the `poll` column.
queues_of_kind() {
    awk -v want="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "poll") c = i; next }
        $c == want { print $1 }' "$STATS"
}
# kind_sum KIND COLUMN: a counter summed over the poll (1) or interrupt-driven (0) queues.
kind_sum() {
    awk -v want="$1" -v col="$2" 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "poll") p = i; if ($i == col) c = i }; next }
        $p == want { s += $c } END { print s + 0 }' "$STATS"
}
# Interrupts of the I/O queues' vectors (every rust_nvme_mq vector but the first, the admin
# queue's), summed over the CPUs.
io_irqs() {
    grep rust_nvme_mq /proc/interrupts | tail -n +2 |
        awk -v n="$NCPU" '{ for (i = 2; i <= n + 1; i++) s += $i } END { print s + 0 }'
}

# A fio job with verification; the remaining arguments are added (engine, --hipri, ...).
fio_job() {
    fio --name=poll --filename=$DEV --direct=1 --rw=randwrite --bs=4k --size=16m \
        --verify=crc32c --verify_fatal=1 --do_verify=1 --group_reporting \
        --output-format=terse "$@" >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio $*"; }
}

# polled_job_on_poll_queues FIO_ARGS...: run a polled verifying job and check that it ran on
# the poll queues only, every request reaped by polling, and no I/O vector interrupted.
polled_job_on_poll_queues() {
    local irq_before irq_after poll_sub_before irq_sub_before polled_before sub polled
    irq_before=$(io_irqs)
    poll_sub_before=$(kind_sum 1 submitted)
    irq_sub_before=$(kind_sum 0 submitted)
    polled_before=$(kind_sum 1 polled)
    fio_job "$@" --hipri  # --hipri is an engine option: after --ioengine
    irq_after=$(io_irqs)
    cat "$STATS"
    sub=$(($(kind_sum 1 submitted) - poll_sub_before))
    polled=$(($(kind_sum 1 polled) - polled_before))
    echo "polled job: $sub commands on poll queues, $polled reaped by polling, I/O vector interrupts $irq_before -> $irq_after"
    [[ $sub -ge 8192 ]] || fail "only $sub commands went to the poll queues (16 MiB written and read in 4 KiB)"
    expect_eq "commands on interrupt-driven queues during the polled job" "$(($(kind_sum 0 submitted) - irq_sub_before))" 0
    expect_eq "commands reaped by polling" "$polled" "$sub"
    expect_eq "I/O vector interrupts during the polled job" "$irq_after" "$irq_before"
    all_completed
}

test_io_poll_attribute() {
    klog_mark
    load_nvme poll_queues=$NPOLL
    klog | grep rust_nvme_mq
    klog | grep -q "$NPOLL of the I/O queues are poll queues" || fail "no message about the poll queues"
    expect_eq "poll_queues parameter" "$(param rust_nvme_mq poll_queues)" $NPOLL
    expect_eq "io_poll with poll_queues=$NPOLL" "$(cat /sys/block/rnvme0n1/queue/io_poll)" 1
    cat "$STATS"
    expect_eq "poll queues in debugfs" "$(queues_of_kind 1 | wc -l)" $NPOLL
    expect_eq "interrupt-driven queues in debugfs" "$(queues_of_kind 0 | wc -l)" $((4 - NPOLL))
    expect_eq "blk-mq contexts (one per CPU + one per poll queue)" \
        "$(ls /sys/block/rnvme0n1/mq | wc -l)" $((NCPU + NPOLL))
    # The poll queues have no vector: the admin queue's plus one per interrupt-driven queue.
    expect_eq "MSI-X vectors" "$(grep -c rust_nvme_mq /proc/interrupts)" $((4 - NPOLL + 1))
    unload_nvme
    load_nvme
    expect_eq "poll_queues default" "$(param rust_nvme_mq poll_queues)" 0
    expect_eq "io_poll with poll_queues=0" "$(cat /sys/block/rnvme0n1/queue/io_poll)" 0
    expect_eq "poll queues in debugfs" "$(queues_of_kind 1 | wc -l)" 0
    expect_eq "blk-mq contexts (one per CPU)" "$(ls /sys/block/rnvme0n1/mq | wc -l)" "$NCPU"
    unload_nvme
}

# io_uring with IOPOLL (--hipri), one job per CPU so that every poll context is used.
test_io_uring_hipri_verify() {
    load_nvme poll_queues=$NPOLL
    polled_job_on_poll_queues --ioengine=io_uring --iodepth=16 --numjobs=$NCPU \
        --offset_increment=16m --cpus_allowed=0-$((NCPU - 1)) --cpus_allowed_policy=split
    local q
    for q in $(queues_of_kind 1); do
        [[ $(qstat "$q" polled) -gt 0 ]] || fail "poll queue $q was not used"
    done
    unload_nvme
}

# pvsync2 with RWF_HIPRI: kernel 7.3 polls only asynchronous direct I/O (block/fops.c sets
# REQ_POLLED in __blkdev_direct_IO_async only; synchronous polling was removed in 5.16), so
# the flag is accepted and ignored: the job must verify, on the interrupt-driven queues, with
# nothing left waiting on a poll queue that nobody polls.
test_pvsync2_hipri_verify() {
    load_nvme poll_queues=$NPOLL
    local poll_before irq_before
    poll_before=$(kind_sum 1 submitted)
    irq_before=$(kind_sum 0 submitted)
    fio_job --ioengine=pvsync2 --hipri --numjobs=2 --offset_increment=16m
    cat "$STATS"
    expect_eq "pvsync2 --hipri commands on poll queues" "$(($(kind_sum 1 submitted) - poll_before))" 0
    [[ $(($(kind_sum 0 submitted) - irq_before)) -ge 16384 ]] || fail "pvsync2 --hipri did not run on the interrupt-driven queues"
    all_completed
    unload_nvme
}

# Without --hipri the same job stays on the interrupt-driven queues.
test_unpolled_stays_on_irq_queues() {
    load_nvme poll_queues=$NPOLL
    local before irq_before
    before=$(kind_sum 1 submitted)
    irq_before=$(io_irqs)
    fio_job --ioengine=io_uring --iodepth=16
    cat "$STATS"
    expect_eq "commands on poll queues without --hipri" "$(($(kind_sum 1 submitted) - before))" 0
    [[ $(io_irqs) -gt $irq_before ]] || fail "interrupt-driven I/O raised no interrupt"
    unload_nvme
}

# Tiny queues (3 commands each), one polled job of depth 16 on CPU 0: with overflow=1 its
# requests spill to the other poll queue, never to an interrupt-driven one; with overflow=0
# they wait for their own poll queue.
test_poll_overflow() {
    local ov home
    for ov in 1 0; do
        load_nvme poll_queues=$NPOLL io_queue_depth=4 overflow=$ov
        # CPU 0's poll queue: the one that takes its polled reads at queue depth 1.
        home=$(home_queue fio --name=home --filename=$DEV --direct=1 --ioengine=io_uring --hipri \
            --iodepth=1 --rw=randread --bs=4k --size=256k --cpus_allowed=0)
        snap_counters
        polled_job_on_poll_queues --ioengine=io_uring --iodepth=16 --cpus_allowed=0
        expect_eq "overflow into interrupt-driven queues (overflow=$ov)" "$(kind_sum 0 overflow_in)" 0
        expect_eq "overflow out of interrupt-driven queues (overflow=$ov)" "$(kind_sum 0 overflow_out)" 0
        # Against each queue's own submissions and the block layer's count.
        check_lending "$home"
        if [[ $ov == 1 ]]; then
            [[ $LENT -gt 0 ]] || fail "no overflow between the poll queues with overflow=1"
        else
            expect_eq "overflow with overflow=0" "$(kind_sum 1 overflow_in)" 0
        fi
        unload_nvme
    done
}

# Lost polled commands: the timeout resets the controller, which recreates the poll queues
# without interrupts; the requeued requests complete by polling, fio sees no error.
test_poll_queue_reset() {
    klog_mark
    load_nvme poll_queues=$NPOLL io_timeout=1
    local k=/sys/kernel/debug/rust_nvme_mq/rnvme0
    # Each job reads back and verifies every 256 blocks it writes, and the rest at its end
    # (size-based: a time-based job leaves blocks unverified when its time is up): a requeued
    # request that was dropped or answered with other data fails the verify. randrepeat=0:
    # data of this run (with fio's fixed default seed a dropped write leaves an earlier run's
    # identical block, which verifies).
    fio --name=load --filename=$DEV --direct=1 --ioengine=io_uring --hipri --iodepth=16 \
        --rw=randwrite --bs=4k --size=32m --numjobs=2 --offset_increment=32m \
        --verify=crc32c --verify_fatal=1 --verify_backlog=256 --randrepeat=0 --output-format=terse \
        >/tmp/fio.out 2>&1 &
    local pid=$!
    wait_io rnvme0n1
    echo 1 >$k/lose_commands
    wait $pid || { cat /tmp/fio.out; fail "polled fio saw errors across the reset"; }
    fio_verified /tmp/fio.out
    klog | grep -E "timed out, aborting|resetting the controller|reset done" || true
    klog | grep -q "controller reset done" || fail "no controller reset"
    cat "$STATS"
    all_completed
    # After the reset, polled I/O still runs without interrupts.
    polled_job_on_poll_queues --ioengine=io_uring --iodepth=16 --numjobs=2 --offset_increment=16m
    unload_nvme
}

expect_poll_rejected() { # VALUE PATTERN
    [[ ! -e /sys/module/rust_nvme_mq ]] || unload_module rust_nvme_mq
    klog_mark
    local out
    if out=$(insmod "$MODDIR/rust_nvme_mq.ko" "poll_queues=$1" 2>&1); then
        rmmod rust_nvme_mq
        fail "insmod poll_queues=$1 succeeded"
    fi
    echo "insmod poll_queues=$1 said: $out"
    klog | grep -E "$2" || fail "no clear message matching '$2' in dmesg"
    [[ ! -d /sys/module/rust_nvme_mq ]] || fail "rust_nvme_mq stayed loaded"
    [[ ! -e $DEV ]] || fail "$DEV appeared"
}

# 4 queue pairs: at least one must stay interrupt-driven.
test_poll_queues_rejected() {
    expect_poll_rejected 4 "poll_queues=4 needs at least 5 I/O queue pairs \(one interrupt-driven\), the controller grants 4"
    expect_poll_rejected 100000 "poll_queues=100000 needs at least 100001 I/O queue pairs"
    expect_poll_rejected -1 "invalid for parameter .poll_queues"
    expect_poll_rejected banana "invalid for parameter .poll_queues"
    # The controller still works afterwards.
    load_nvme poll_queues=3
    expect_eq "poll queues with poll_queues=3" "$(queues_of_kind 1 | wc -l)" 3
    fio_job --ioengine=io_uring --hipri --iodepth=8
    unload_nvme
}

# rmmod after polled I/O: the final counters show every command completed.
test_rmmod_after_polled_io() {
    load_nvme poll_queues=$NPOLL
    fio_job --ioengine=io_uring --hipri --iodepth=32 --numjobs=2 --offset_increment=16m
    klog_mark
    unload_nvme
    # The removal log: a header line with the debugfs columns, then one line per queue.
    klog | sed -n 's/.*rnvme0 queues at removal: //p' >/tmp/removal-columns
    klog | sed -n 's/.*rnvme0 \([0-9][0-9 ]*\)$/\1/p' >/tmp/removal-rows
    cat /tmp/removal-columns /tmp/removal-rows
    grep -q '^queue submitted completed' /tmp/removal-columns || fail "no counter header at removal"
    expect_eq "queue lines at removal" "$(wc -l </tmp/removal-rows)" 4
    awk 'NR == FNR { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["submitted"] != $c["completed"] { bad = 1 } END { exit bad }' \
        /tmp/removal-columns /tmp/removal-rows ||
        fail "a queue had commands not completed at removal"
}

t io_poll_attribute
t io_uring_hipri_verify
t pvsync2_hipri_verify
t unpolled_stays_on_irq_queues
t poll_overflow
t poll_queue_reset
t poll_queues_rejected
t rmmod_after_polled_io
t_kernel_clean kernel_clean

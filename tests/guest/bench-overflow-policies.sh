#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rust_nvme_mq overflow policies on N vCPUs (N I/O queues of 15 slots, io_queue_depth=16), one
# boot, on a controller whose commands take a fixed time and run in parallel (scripts/guest.sh
# --nvme-null NS): the overflow bench's skew and deep loads spread over the CPUs, each with
# overflow off, the linear scan (overflow_scan=1) and the bounded search, alternating in every
# round. Wall clock (the device sets the pace):
#   skew_*  3 readers (iodepth 8) on CPU0, one on each other CPU: CPU0 needs 24 slots, has 15;
#   deep_*  one deep reader (iodepth 64) on CPU0, one shallow reader (iodepth 4) on each other
#           CPU.
# Run with --smp 8 (issue 30's many-CPU guest) or --smp 4 (the overflow bench's size).
# With $MODDIR/rust_nvme_mq_base.ko (scripts/run-bench.sh --base-ko, or copied beside the
# modules) the bounded search of that build too, as skew_base and deep_base, in every round.
# Output as bench-overflow.sh: chunked "BENCH" fio JSON (per reader), "STAT" CPU ticks,
# "QUEUES" debugfs counters.
#
# Usage: bench-overflow-policies.sh [ROUNDS] [RUNTIME_S]
set -euo pipefail
source /tests/lib.sh
source /tests/bench-lib.sh

ROUNDS=${1:-3}
RUNTIME=${2:-6}
RAMP=${RAMP:-1}
DEPTH=16
DEV=/dev/rnvme0n1
NCPU=$(nproc)
((NCPU >= 4)) || { echo "bench-overflow-policies: needs 4 or more vCPUs (scripts/guest.sh --smp N), has $NCPU" >&2; exit 2; }

common=(--filename=$DEV --direct=1 --ioengine=io_uring --rw=randread --bs=4k --time_based
        --runtime="$RUNTIME" --ramp_time="$RAMP" --norandommap --randrepeat=1)

skew_jobs=($(reader r0a 0 8) $(reader r0b 0 8) $(reader r0c 0 8))
deep_jobs=($(reader deep0 0 64))
for c in $(seq 1 $((NCPU - 1))); do
    skew_jobs+=($(reader "r$c" "$c" 8))
    deep_jobs+=($(reader "shallow$c" "$c" 4))
done

echo "bench: overflow on $NCPU vCPUs, $ROUNDS rounds of $RUNTIME s" >&2
for round in $(seq "$ROUNDS"); do
    nvme_run skew_off overflow=0 -- "${skew_jobs[@]}"
    nvme_run skew_scan overflow=1 overflow_scan=1 -- "${skew_jobs[@]}"
    nvme_run skew_on overflow=1 -- "${skew_jobs[@]}"
    [[ ! -f $MODDIR/rust_nvme_mq_base.ko ]] ||
        NVME_KO=rust_nvme_mq_base.ko nvme_run skew_base overflow=1 -- "${skew_jobs[@]}"
    nvme_run deep_off overflow=0 -- "${deep_jobs[@]}"
    nvme_run deep_scan overflow=1 overflow_scan=1 -- "${deep_jobs[@]}"
    nvme_run deep_on overflow=1 -- "${deep_jobs[@]}"
    [[ ! -f $MODDIR/rust_nvme_mq_base.ko ]] ||
        NVME_KO=rust_nvme_mq_base.ko nvme_run deep_base overflow=1 -- "${deep_jobs[@]}"
done
kernel_clean
echo "bench: done"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rust_nvme_mq overflow, one boot with 4 vCPUs on a controller whose commands take a fixed time
# and run in parallel (QEMU null-aio with latency-ns: scripts/guest.sh --nvme-null NS), so the
# throughput of a reader is the number of its commands in flight / latency. Wall clock (the device
# sets the pace). Each round runs, in this order, with rust_nvme_mq io_queue_depth=16 (15 slots
# per queue) and 4 I/O queues unless said otherwise:
#   scale_lo / scale_hi  one reader per CPU, iodepth 4 / 15, overflow=0: total IOPS must grow
#                        with the commands in flight (x3.75) if the guest CPU is not the limit;
#   skew_off / skew_on   (a) 6 equal readers (iodepth 8), 3 pinned on CPU0, one on each other
#                        CPU: CPU0 needs 24 slots, its queue has 15; overflow=0 / 1;
#   deep_off / deep_on   (b) one deep reader (iodepth 64) on CPU0, one shallow reader
#                        (iodepth 4) on each other CPU; overflow=0 / 1;
#   fewq_off / fewq_on   (c) nr_io_queues=2: 2 readers (iodepth 8) on each CPU of the queue
#                        that serves CPU0 (32 requests for 15 slots), one reader (iodepth 4) on
#                        the first CPU of the other queue; overflow=0 / 1.
# Output: chunked "BENCH" fio JSON (per reader), "STAT" CPU ticks, "QUEUES" debugfs counters.
#
# Usage: bench-overflow.sh [ROUNDS] [RUNTIME_S]
set -euo pipefail
source /tests/lib.sh
source /tests/bench-lib.sh

ROUNDS=${1:-3}
RUNTIME=${2:-6}
RAMP=${RAMP:-1}     # fio ramp_time (the host passes RAMP=500ms in icount mode)
DEPTH=16                 # io_queue_depth: 15 commands per queue
DEV=/dev/rnvme0n1
NCPU=$(nproc)
((NCPU == 4)) || { echo "bench-overflow: needs 4 vCPUs (scripts/guest.sh --smp 4), has $NCPU" >&2; exit 2; }

common=(--filename=$DEV --direct=1 --ioengine=io_uring --rw=randread --bs=4k --time_based
        --runtime="$RUNTIME" --ramp_time="$RAMP" --norandommap --randrepeat=1)

# irq_cpus: the CPU list of each I/O queue's vector (the admin vector, the first, skipped).
irq_cpus() {
    local irq
    awk '/rust_nvme_mq/ { sub(":", "", $1); print $1 }' /proc/interrupts | tail -n +2 |
        while read -r irq; do cat "/proc/irq/$irq/smp_affinity_list"; done
}

run() { # CONFIG OVERFLOW [MODULE PARAMS...] -- FIO JOBS...
    local cfg=$1 overflow=$2
    shift 2
    nvme_run "$cfg" overflow="$overflow" "$@"
}

# (c): which CPUs share CPU0's queue when there are 2 queues?
insmod "$MODDIR/rust_nvme_mq.ko" io_queue_depth=$DEPTH nr_io_queues=2
wait_dev $DEV
mapfile -t QCPUS < <(irq_cpus)
unload_module rust_nvme_mq
echo "INFO fewq 0 I/O queue vectors' CPUs: ${QCPUS[*]}"
SHARED=() OTHER=
for l in "${QCPUS[@]}"; do
    cpus=($(expand_cpus "$l"))
    if [[ " ${cpus[*]} " == *" 0 "* ]]; then SHARED=("${cpus[@]}"); else OTHER=${OTHER:-${cpus[0]}}; fi
done
if ((${#SHARED[@]} < 2)) || [[ -z $OTHER ]]; then
    echo "bench-overflow: expected 2 queues over 4 CPUs with CPU0 sharing its queue, got '${QCPUS[*]}'; assuming CPUs 0,1 | 2,3" >&2
    SHARED=(0 1) OTHER=2
fi
fewq_jobs=()
for c in "${SHARED[@]}"; do fewq_jobs+=($(reader "r${c}a" "$c" 8) $(reader "r${c}b" "$c" 8)); done
fewq_jobs+=($(reader "light$OTHER" "$OTHER" 4))
echo "INFO fewq 0 readers: 2 x iodepth 8 on each of CPUs ${SHARED[*]} (one queue), iodepth 4 on CPU $OTHER"

skew_jobs=($(reader r0a 0 8) $(reader r0b 0 8) $(reader r0c 0 8)
           $(reader r1 1 8) $(reader r2 2 8) $(reader r3 3 8))
deep_jobs=($(reader deep0 0 64) $(reader shallow1 1 4) $(reader shallow2 2 4) $(reader shallow3 3 4))
scale_lo=() scale_hi=()
for c in 0 1 2 3; do scale_lo+=($(reader "r$c" $c 4)); scale_hi+=($(reader "r$c" $c 15)); done

echo "bench: overflow, $ROUNDS rounds of $RUNTIME s" >&2
for round in $(seq "$ROUNDS"); do
    run scale_lo 0 -- "${scale_lo[@]}"
    run scale_hi 0 -- "${scale_hi[@]}"
    run skew_off 0 -- "${skew_jobs[@]}"
    run skew_on 1 -- "${skew_jobs[@]}"
    run deep_off 0 -- "${deep_jobs[@]}"
    run deep_on 1 -- "${deep_jobs[@]}"
    run fewq_off 0 nr_io_queues=2 -- "${fewq_jobs[@]}"
    run fewq_on 1 nr_io_queues=2 -- "${fewq_jobs[@]}"
done
kernel_clean
echo "bench: done"

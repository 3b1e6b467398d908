#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Polled vs interrupt-driven I/O on rust_nvme_mq, one boot: the driver is loaded once with
# poll_queues=1, and one fio io_uring 4k randread job at iodepth 1 on CPU 0 runs without
# (poll_irq) and with --hipri (poll_hipri, IOPOLL on the poll queue). Configurations
# alternate in every round; results go out as chunked "BENCH" lines plus "STAT" and "QUEUES"
# lines (bench-lib.sh). Boot with 2 vCPUs: the driver then has one interrupt-driven queue per
# CPU and one poll queue (QEMU's NVMe has 4 queue pairs); the host's `make bench` runs it under
# icount.
#
# Usage: bench-poll.sh [ROUNDS] [RUNTIME_S]
set -euo pipefail
case "${1:-}" in
    -h|--help) sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
source /tests/lib.sh
source /tests/bench-lib.sh

ROUNDS=${1:-3}
RUNTIME=${2:-1}
RAMP=${RAMP:-1}     # fio ramp_time (the host passes RAMP=500ms in icount mode)
DEV=/dev/rnvme0n1
STATS=/sys/kernel/debug/rust_nvme_mq/rnvme0/queues
[[ -d /sys/kernel/debug/rust_nvme_mq ]] || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true

insmod "$MODDIR/rust_nvme_mq.ko" poll_queues=1
wait_dev $DEV
[[ $(cat /sys/block/rnvme0n1/queue/io_poll) == 1 ]] || { echo "bench: $DEV does not support polling" >&2; exit 1; }
# Polled commands reaped by polling, summed over the poll queues.
polled() { awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "polled") c = i; next } { s += $c } END { print s + 0 }' "$STATS"; }

echo "bench: poll vs interrupt, $(nproc) vCPUs, 1 job x iodepth 1 on CPU 0, $ROUNDS rounds of $RUNTIME s" >&2
for round in $(seq "$ROUNDS"); do
    for cfg in poll_irq poll_hipri; do
        extra=()
        [[ $cfg == poll_hipri ]] && extra=(--hipri)
        before=$(polled)
        bench_fio $cfg "$round" --name=lat --filename=$DEV --direct=1 --ioengine=io_uring \
            --rw=randread --bs=4k --iodepth=1 --cpus_allowed=0 --time_based --runtime="$RUNTIME" \
            --ramp_time="$RAMP" --norandommap --randrepeat=1 "${extra[@]}"
        # The polled run must really have been polled, the other one not.
        n=$(($(polled) - before))
        if [[ $cfg == poll_hipri && $n == 0 ]] || [[ $cfg == poll_irq && $n != 0 ]]; then
            echo "bench: $cfg: $n commands reaped by polling" >&2
            exit 1
        fi
        echo "INFO $cfg $round $n commands reaped by polling"
        queues $cfg "$round"
    done
done
unload_module rust_nvme_mq
kernel_clean
echo "bench: done"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe CPU cost, one boot: rust_nvme_mq vs the C nvme driver on QEMU's emulated NVMe (raw image),
# fio io_uring 4k randread, JOBS jobs x iodepth 16 (the same load for both drivers, default
# queue depths); and the same load through io_uring passthrough on the generic devices
# (/dev/rng0n1, C's /dev/ng0n1: fio io_uring_cmd), for passthrough vs the block path.
# Configurations alternate in every round; results go out as chunked "BENCH" lines plus a
# "STAT" line of CPU ticks per run (bench-lib.sh).
#
# Usage: bench-nvme.sh [ROUNDS] [RUNTIME_S] [JOBS]
# The host's `make bench` boots this with 1 vCPU under QEMU's icount: the one vCPU is kept
# busy by JOBS jobs, so guest time is that vCPU's instructions and 1e9 / IOPS the
# instructions per I/O; the STAT line gives the idle share to check that (bench/report.py
# divides the busy share only). With more vCPUs job i is pinned to CPU i mod nproc.
set -euo pipefail
source /tests/lib.sh
source /tests/bench-lib.sh

ROUNDS=${1:-3}
RUNTIME=${2:-3}
RAMP=${RAMP:-1}     # fio ramp_time (the host passes RAMP=500ms in icount mode)
NCPU=$(nproc)
JOBS=${3:-$((NCPU > 4 ? NCPU : 4))}
IODEPTH=16
RUST_DEV=/dev/rnvme0n1
C_DEV=/dev/nvme0n1

attach() { # CONFIG -> prints the device
    case $1 in
        nvme_rust) insmod "$MODDIR/rust_nvme_mq.ko"; wait_dev $RUST_DEV; echo $RUST_DEV ;;
        nvme_c) modprobe nvme; wait_dev $C_DEV; echo $C_DEV ;;
        nvme_rust_pt) insmod "$MODDIR/rust_nvme_mq.ko"; wait_dev $RUST_DEV; wait_chr /dev/rng0n1; echo /dev/rng0n1 ;;
        nvme_c_pt) modprobe nvme; wait_dev $C_DEV; wait_chr /dev/ng0n1; echo /dev/ng0n1 ;;
    esac
}
detach() {
    case $1 in
        nvme_rust*) unload_module rust_nvme_mq ;;
        nvme_c*) unload_module nvme ;;
    esac
}

jobs=()
for i in $(seq 0 $((JOBS - 1))); do
    jobs+=(--name=job$i)
    ((NCPU == 1)) || jobs+=(--cpus_allowed=$((i % NCPU)))
done
echo "bench: nvme CPU cost, $NCPU vCPUs, $JOBS jobs x iodepth $IODEPTH, $ROUNDS rounds of $RUNTIME s" >&2
for round in $(seq "$ROUNDS"); do
    for cfg in nvme_rust nvme_c nvme_rust_pt nvme_c_pt; do
        dev=$(attach $cfg)
        engine=(--direct=1 --ioengine=io_uring)
        [[ $cfg != *_pt ]] || engine=(--ioengine=io_uring_cmd --cmd_type=nvme)
        # Global options first: fio applies them to every job that follows.
        bench_fio $cfg "$round" --filename=$dev "${engine[@]}" --rw=randread \
            --bs=4k --iodepth=$IODEPTH --time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
            --norandommap --randrepeat=1 --group_reporting "${jobs[@]}"
        [[ $cfg == nvme_rust ]] && queues $cfg "$round"
        detach $cfg
    done
done
kernel_clean
echo "bench: done"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe CPU cost, one boot: rust_nvme_mq vs the C nvme driver on QEMU's emulated NVMe, fio
# 4k randread, JOBS jobs x iodepth 16, the same load and the same queue settings for both
# drivers; configurations alternate in every round. Results go out as chunked "BENCH" lines,
# a "STAT" line of CPU ticks per run (bench-lib.sh) and an "INFO <config> <round> setup ..."
# line per run with what the two sides must share: scheduler, hardware queues, iostats,
# nomerges, the controller's shadow doorbells (offered, used).
#
# Usage: bench-nvme.sh [ROUNDS] [RUNTIME_S] [JOBS]
# Configurations: $CONFIGS (default: every one below), each DRIVER_VARIANT:
#   DRIVER   rust (rust_nvme_mq, /dev/rnvme0n1), c (nvme, /dev/nvme0n1) or base (rust_nvme_mq
#            from $MODDIR/rust_nvme_mq_base.ko: a build of another commit, for before/after
#            in one boot; scripts/run-bench.sh --base-ko puts it there)
#   VARIANT  none        block path, io_uring, scheduler none
#            deadline    block path, io_uring, scheduler mq-deadline
#            none_b8     block path, scheduler none, fio submitting and reaping 8 at a time
#                        (iodepth_batch_submit=8, iodepth_batch_complete_min=8): plugged
#                        submissions, where commit_rqs/queue_rqs come into play
#            pt          io_uring passthrough on the generic device (/dev/rng0n1, /dev/ng0n1),
#                        fio io_uring_cmd (the disk's scheduler set to none; it is bypassed)
# The host's `make bench` boots this under QEMU's icount with a null-co namespace (commands
# complete at once, the vCPU stays busy), so 1e9 / IOPS x busy share = instructions per I/O.
# With more vCPUs job i is pinned to CPU i mod nproc.
set -euo pipefail
source /tests/lib.sh
source /tests/bench-lib.sh

ROUNDS=${1:-3}
RUNTIME=${2:-3}
RAMP=${RAMP:-1}     # fio ramp_time (the host passes RAMP=500ms in icount mode)
NCPU=$(nproc)
JOBS=${3:-$((NCPU > 4 ? NCPU : 4))}
IODEPTH=16
CONFIGS=${CONFIGS:-"rust_none c_none rust_deadline c_deadline rust_pt c_pt rust_none_b8 c_none_b8"}

disk_of() { case $1 in rust_*|base_*) echo rnvme0n1 ;; c_*) echo nvme0n1 ;; esac; }
ctrl_of() { case $1 in rust_*|base_*) echo /dev/rnvme0 ;; c_*) echo /dev/nvme0 ;; esac; }
sched_of() { case $1 in *_deadline) echo mq-deadline ;; *) echo none ;; esac; }

attach() { # CONFIG -> prints the device fio uses
    local disk
    disk=$(disk_of "$1")
    case $1 in
        rust_*) insmod "$MODDIR/rust_nvme_mq.ko" ;;
        base_*) insmod "$MODDIR/rust_nvme_mq_base.ko" ;;
        c_*) modprobe nvme ;;
    esac
    wait_dev "/dev/$disk"
    set_sched "$disk" "$(sched_of "$1")"
    case $1 in
        rust_pt|base_pt) wait_chr /dev/rng0n1; echo /dev/rng0n1 ;;
        c_pt) wait_chr /dev/ng0n1; echo /dev/ng0n1 ;;
        *) echo "/dev/$disk" ;;
    esac
}
detach() {
    case $1 in
        rust_*|base_*) unload_module rust_nvme_mq ;;
        c_*) unload_module nvme ;;
    esac
}
set_sched() { # DISK SCHED: set it and check it took (the one in brackets)
    local f=/sys/block/$1/queue/scheduler
    echo "$2" >"$f" || { echo "bench: cannot set scheduler $2 on $1 (offered: $(cat "$f"))" >&2; return 1; }
    [[ $(cat "$f") == *"[$2]"* ]] || { echo "bench: $1's scheduler is '$(cat "$f")', not $2" >&2; return 1; }
}
# setup_info CONFIG ROUND: what both sides of a ratio must share, as one INFO line: the disk's
#   queue settings (queue_setup), dbbuf_offered (the controller's OACS bit 8, from Identify
#   Controller), dbbuf_used (C uses shadow doorbells when offered; rust_nvme_mq has no Doorbell
#   Buffer Config support, so never).
setup_info() {
    local oacs offered used
    oacs=$(nvme id-ctrl "$(ctrl_of "$1")" 2>/dev/null | sed -n 's/^oacs *: *//p')
    [[ -n $oacs ]] || { echo "bench: no OACS from nvme id-ctrl $(ctrl_of "$1")" >&2; return 1; }
    offered=$(((oacs >> 8) & 1))
    used=0
    [[ $1 == rust_* || $1 == base_* ]] || used=$offered
    echo "INFO $1 $2 setup $(queue_setup "$(disk_of "$1")") dbbuf_offered=$offered dbbuf_used=$used" \
        "vcpus=$NCPU jobs=$JOBS iodepth=$IODEPTH"
}

jobs=()
for i in $(seq 0 $((JOBS - 1))); do
    jobs+=(--name=job$i)
    ((NCPU == 1)) || jobs+=(--cpus_allowed=$((i % NCPU)))
done
echo "bench: nvme CPU cost, $NCPU vCPUs, $JOBS jobs x iodepth $IODEPTH, $ROUNDS rounds of $RUNTIME s: $CONFIGS" >&2
for round in $(seq "$ROUNDS"); do
    for cfg in $CONFIGS; do
        dev=$(attach "$cfg")
        engine=(--direct=1 --ioengine=io_uring)
        [[ $cfg != *_pt ]] || engine=(--ioengine=io_uring_cmd --cmd_type=nvme)
        [[ $cfg != *_b8 ]] || engine+=(--iodepth_batch_submit=8 --iodepth_batch_complete_min=8)
        setup_info "$cfg" "$round"
        # Global options first: fio applies them to every job that follows.
        bench_fio "$cfg" "$round" --filename="$dev" "${engine[@]}" --rw=randread \
            --bs=4k --iodepth=$IODEPTH --time_based --runtime="$RUNTIME" --ramp_time="$RAMP" \
            --norandommap --randrepeat=1 --group_reporting "${jobs[@]}"
        [[ $cfg != rust_none ]] || queues "$cfg" "$round"
        detach "$cfg"
    done
done
kernel_clean
echo "bench: done"

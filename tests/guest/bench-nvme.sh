#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe benchmark, one boot (use --smp 4):
#  A. rust_nvme_mq vs the C nvme driver: fio io_uring 4k randread, one job per CPU;
#  B. the reference's scenario: one reader per CPU (each pinned), reader 0 submitting far more
#     than a queue holds, small io_queue_depth; rust_nvme_mq overflow=0 vs overflow=1.
# Configurations alternate in every round; results go out as chunked "BENCH" lines (lib.sh emit).
set -euo pipefail
source /tests/lib.sh

ROUNDS=${1:-5}
RUNTIME=${2:-8}
NCPU=$(nproc)
SMALL_DEPTH=8       # io_queue_depth for part B: 7 commands per queue
HEAVY_IODEPTH=64    # reader 0: far more than its queue holds
READER_IODEPTH=8    # the other readers
RUST_DEV=/dev/rnvme0n1

load_rust() { insmod "$MODDIR/rust_nvme_mq.ko" "$@"; wait_dev $RUST_DEV; }

common=(--direct=1 --ioengine=io_uring --rw=randread --bs=4k --time_based --runtime="$RUNTIME"
        --ramp_time=1 --norandommap --randrepeat=0 --output-format=json)

run_a() { # CONFIG
    local dev
    case $1 in
        nvme_rust) load_rust; dev=$RUST_DEV ;;
        nvme_c) modprobe nvme; wait_dev /dev/nvme0n1; dev=/dev/nvme0n1 ;;
    esac
    emit "$1" "$round" "$(fio --name=a --filename=$dev "${common[@]}" --iodepth=16 \
        --numjobs="$NCPU" --group_reporting)"
    case $1 in
        nvme_rust) unload_module rust_nvme_mq ;;
        nvme_c) unload_module nvme ;;
    esac
}

run_b() { # CONFIG (ovf_off|ovf_on)
    local overflow=0 jobs=() i depth
    [[ $1 == ovf_on ]] && overflow=1
    load_rust io_queue_depth=$SMALL_DEPTH overflow=$overflow
    for i in $(seq 0 $((NCPU - 1))); do
        depth=$READER_IODEPTH
        ((i == 0)) && depth=$HEAVY_IODEPTH
        jobs+=(--name=reader$i --cpus_allowed=$i --iodepth=$depth)
    done
    emit "$1" "$round" "$(fio --filename=$RUST_DEV "${common[@]}" "${jobs[@]}")"
    cat /sys/kernel/debug/rust_nvme_mq/rnvme0/queues >&2 || true
    unload_module rust_nvme_mq
}

echo "bench: filling the namespace once" >&2
load_rust
fio --name=fill --filename=$RUST_DEV --direct=1 --ioengine=io_uring --iodepth=16 --rw=write \
    --bs=128k --size=100% --output-format=terse >/dev/null
unload_module rust_nvme_mq

for round in $(seq "$ROUNDS"); do
    run_a nvme_rust
    run_a nvme_c
    run_b ovf_off
    run_b ovf_on
done
kernel_clean
echo "bench: done"

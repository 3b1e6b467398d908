#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# pmem benchmark, one boot: rust_pmem nowait=0/1, C nd_pmem nowait=0/1 (reference patch), brd,
# and both pmem drivers at nowait=1 with fio submitting and reaping 8 at a time (*_b8:
# iodepth_batch_submit=8, iodepth_batch_complete_min=8: plugged submissions, queue_rqs).
# Configurations alternate (A B C D E, A B C D E, ...) for ROUNDS rounds; every fio result is
# printed as numbered "BENCH <config> <round> <chunk> <text>" lines for the host to summarise,
# with the CPU time of the run as a "STAT" line (bench-lib.sh). Under QEMU's icount the run
# time is guest instructions (10^9 per second, over all vCPUs), so 1e9 / IOPS is the number of
# guest instructions per I/O. An "INFO <config> <round> setup ..." line per run records the
# queue settings both sides of a ratio share (scheduler, hardware queues, iostats, nomerges).
set -euo pipefail
source /tests/lib.sh
source /tests/bench-lib.sh

ROUNDS=${1:-5}
RUNTIME=${2:-8}
RAMP=${RAMP:-1}     # fio ramp_time (the host passes RAMP=500ms in icount mode)
JOBS=$(nproc)
IODEPTH=32
# $CONFIGS (space-separated) picks some of them, e.g. for a profile.
read -ra CONFIGS <<<"${CONFIGS:-rust_nowait0 rust_nowait1 c_nowait0 c_nowait1 brd rust_nowait1_b8 c_nowait1_b8}"

# Only one of rust_pmem and nd_pmem is loaded at a time, so the loaded one binds the NVDIMM's
# namespace (nowait is a load-time parameter); check that it really did.
bound_to() { expect_eq "driver of namespace0.0" "$(driver_of namespace0.0)" "$1" >&2; }
attach() { # CONFIG -> prints the device
    case $1 in
        rust_nowait0) load_rust_pmem nowait=0; bound_to rust_pmem; echo /dev/rpmem0 ;;
        rust_nowait1|rust_nowait1_b8) load_rust_pmem nowait=1; bound_to rust_pmem; echo /dev/rpmem0 ;;
        c_nowait0) modprobe nd_pmem nowait=0; wait_dev /dev/pmem0; bound_to nd_pmem; echo /dev/pmem0 ;;
        c_nowait1|c_nowait1_b8) modprobe nd_pmem nowait=1; wait_dev /dev/pmem0; bound_to nd_pmem; echo /dev/pmem0 ;;
        brd)
            modprobe brd rd_nr=1 rd_size=$((PMEM_BYTES / 1024))
            wait_dev /dev/ram0
            fill /dev/ram0 >&2
            echo /dev/ram0 ;;
    esac
}
detach() {
    case $1 in
        rust_*) unload_module rust_pmem ;;
        c_*) unload_module nd_pmem ;;
        brd) unload_module brd ;;
    esac
}
fill() {
    fio --name=fill --filename="$1" --direct=1 --ioengine=io_uring --iodepth=16 --rw=randwrite \
        --bs=64k --size=100% --output-format=terse >/dev/null
}

load_rust_pmem
PMEM_BYTES=$(bytes_of rpmem0)
echo "bench: filling the persistent memory ($((PMEM_BYTES >> 20)) MiB) once by randwrite" >&2
fill /dev/rpmem0
unload_module rust_pmem

# setup_info CONFIG ROUND DEV: the queue settings of DEV's disk (queue_setup), as one INFO line.
setup_info() {
    echo "INFO $1 $2 setup $(queue_setup "$(basename "$3")") vcpus=$(nproc) jobs=$JOBS iodepth=$IODEPTH"
}

for round in $(seq "$ROUNDS"); do
    for cfg in "${CONFIGS[@]}"; do
        dev=$(attach "$cfg")
        batch=()
        [[ $cfg != *_b8 ]] || batch=(--iodepth_batch_submit=8 --iodepth_batch_complete_min=8)
        setup_info "$cfg" "$round" "$dev"
        bench_fio "$cfg" "$round" --name=bench --filename="$dev" --direct=1 --ioengine=io_uring \
            --iodepth=$IODEPTH "${batch[@]}" --rw=randread --bs=4k --numjobs="$JOBS" --group_reporting \
            --time_based --runtime="$RUNTIME" --ramp_time="$RAMP" --norandommap --randrepeat=1
        detach "$cfg"
    done
done
kernel_clean
echo "bench: done"

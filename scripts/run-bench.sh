#!/usr/bin/env bash
# `make bench`: run the benchmarks, one guest boot per part, and write results/.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

DEFAULT_CPU=max,-erms,-fsrm # TCG runs `rep movsb` byte by byte: without ERMS copy_mc uses memcpy, without FSRM (QEMU 10's max has it) memcpy is no rep movsb
DEFAULT_LATENCY_NS=100000000 # null-aio command latency of the overflow part (see docs/benchmarks.md)
PARTS_ALL=(pmem nvme overflow poll overflow_model)

usage() {
    cat <<USAGE
Usage: $0 [--part pmem|nvme|overflow|poll|overflow_model|all]... [--mode icount|wall] [--rounds N] [--runtime S]
          [--latency-ns NS] [--cpu MODEL] [--results DIR] [--no-prepare] [--help]

Parts (each is one guest boot; its configurations alternate in every round, and every ratio
is computed within a round, then reported as the median [min-max] over the rounds):
  pmem      2 vCPUs, fio io_uring 4k randread, 2 jobs x iodepth 32: rust_pmem nowait=0/1, the
            C nd_pmem with the reference nowait patch nowait=0/1, brd of the same size.
  nvme      CPU cost of rust_nvme_mq vs the C nvme driver on QEMU's emulated NVMe (raw image),
            4 jobs x iodepth 16: 1 vCPU kept busy in icount mode (4 vCPUs, one job each, in
            wall mode).
  overflow  rust_nvme_mq overflow=0 vs 1 on an NVMe whose commands take --latency-ns each and
            run in parallel (QEMU null-aio), 4 vCPUs, io_queue_depth=16: (a) uneven equal
            readers, (b) one deep reader + shallow ones, (c) nr_io_queues=2; always wall clock.
  poll      rust_nvme_mq poll_queues=1, 2 vCPUs: one io_uring 4k randread job at iodepth 1 on
            CPU 0, interrupt-driven vs polled (--hipri): IOPS and mean latency ratios.
  overflow_model  no guest: the host model of the overflow policy at 16-256 queues
            (tools/overflow-model/bench.sh, docs/overflow-model.md): overflow_model_* keys.

  --mode icount  (default) QEMU -icount shift=0,sleep=off for pmem, nvme and poll: guest time counts
                 guest instructions (1 ns each, all vCPUs in turn), so IOPS and instructions per
                 I/O do not depend on the host's load and repeat to ~0.1%.
  --mode wall    real time (TCG); figures move by ~30% with the host's load.
  --rounds N     rounds per part (default 3 in icount mode, 5 in wall mode; overflow 3)
  --runtime S    fio seconds per run (default: icount 2 guest seconds for pmem, 1 for nvme;
                 wall 8; overflow 6)
  --latency-ns   null-aio latency for the overflow part (default $DEFAULT_LATENCY_NS)
  --cpu MODEL    QEMU CPU model (default $DEFAULT_CPU; \$RBLK_CPU also sets it)
  --results DIR  where bench.json, the charts and the logs go (default results/)
  --no-prepare   use out/env (\$RBLK_OUT/env) as it is: no rebuild of kernel or modules

Writes DIR/bench.json, DIR/<part>.png and the raw guest logs DIR/bench-<part>.log, and prints
the tables and ratios. No pass/fail: ratios are printed next to their targets.
USAGE
}

MODE=icount ROUNDS="" RUNTIME="" LATENCY_NS=$DEFAULT_LATENCY_NS CPU=${RBLK_CPU:-$DEFAULT_CPU}
PREPARE=1 PARTS=() RESULTS=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --part) need_arg "$@"
            if [[ $2 == all ]]; then PARTS=("${PARTS_ALL[@]}")
            elif [[ " ${PARTS_ALL[*]} " == *" $2 "* ]]; then PARTS+=("$2")
            else die "unknown part '$2' (pmem, nvme, overflow, poll, overflow_model or all)"; fi
            shift ;;
        --mode) need_arg "$@"; [[ $2 == icount || $2 == wall ]] || die "--mode is icount or wall, not '$2'"
            MODE=$2; shift ;;
        --rounds) need_arg "$@"; ROUNDS=$2; shift ;;
        --runtime) need_arg "$@"; RUNTIME=$2; shift ;;
        --latency-ns) need_arg "$@"; LATENCY_NS=$2; shift ;;
        --cpu) need_arg "$@"; CPU=$2; shift ;;
        --results) need_arg "$@"; RESULTS=$2; shift ;;
        --no-prepare) PREPARE=0 ;;
        -h|--help) usage; exit 0 ;;
        *) unknown_arg "$1" ;;
    esac
    shift
done
((${#PARTS[@]})) || PARTS=("${PARTS_ALL[@]}")
[[ -z "$ROUNDS" || "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer"
[[ -z "$RUNTIME" || "$RUNTIME" =~ ^[1-9][0-9]*$ ]] || die "--runtime must be a positive integer (seconds)"
[[ "$LATENCY_NS" =~ ^[1-9][0-9]*$ ]] || die "--latency-ns must be a positive integer"
((${ROUNDS:-3} >= 3)) || echo "run-bench: note: fewer than 3 rounds; the medians are not the ones bench.json promises" >&2

TOP=$(cd "$(dirname "$0")/.." && pwd)
RESULTS=${RESULTS:-$TOP/results}
mkdir -p "$RESULTS"
OUT=${RBLK_OUT:-$TOP/out}
if ((PREPARE)); then
    "$TOP/scripts/prepare.sh" --no-builtin || die "scripts/prepare.sh failed (kernel, modules or guest tools), see above"
else
    [[ -f "$OUT/env" ]] || die "--no-prepare but $OUT/env does not exist: run scripts/prepare.sh first"
fi

start_all=$(date +%s)
for part in "${PARTS[@]}"; do
    if [[ $part == overflow_model ]]; then # no guest
        "$TOP/tools/overflow-model/bench.sh" --results "$RESULTS" || die "the overflow model failed"
        continue
    fi
    gargs=() mode=$MODE ramp=1
    case $part in
        pmem) smp=2; rounds=${ROUNDS:-3}; runtime=${RUNTIME:-2}
            [[ $MODE == wall ]] && { rounds=${ROUNDS:-5}; runtime=${RUNTIME:-8}; } ;;
        # NVMe under icount: ~25 s of host time per guest second (every doorbell and completion
        # leaves the translated code), so 1 s runs.
        nvme) smp=1; rounds=${ROUNDS:-3}; runtime=${RUNTIME:-1}
            # Without icount one vCPU is just slow; use one per queue as the driver is meant to.
            [[ $MODE == wall ]] && { smp=4; rounds=${ROUNDS:-5}; runtime=${RUNTIME:-8}; } ;;
        # 2 vCPUs: one interrupt-driven queue per CPU plus one poll queue.
        poll) smp=2; rounds=${ROUNDS:-3}; runtime=${RUNTIME:-1}
            [[ $MODE == wall ]] && { rounds=${ROUNDS:-5}; runtime=${RUNTIME:-5}; } ;;
        overflow) smp=4; rounds=${ROUNDS:-3}; runtime=${RUNTIME:-6}; mode=wall
            gargs+=(--nvme-null "$LATENCY_NS") ;;
    esac
    # Under icount a guest second is 10^9 instructions (~6 s of host time): a short ramp will do.
    [[ $mode == icount ]] && { gargs+=(--icount); ramp=500ms; }
    log="$RESULTS/bench-$part.log"
    echo "run-bench: $part part ($mode, CPU $CPU), $smp vCPUs, $rounds rounds of $runtime s -> $log" >&2
    s=$(date +%s)
    RBLK_CPU=$CPU "$TOP/scripts/guest.sh" --smp "$smp" "${gargs[@]}" --timeout 3600 --log "$log" \
        -- "RAMP=$ramp bash /tests/bench-$part.sh $rounds $runtime" >/dev/null ||
        die "the $part guest run failed (status $?); its console log is $log"
    echo "run-bench: $part part took $(($(date +%s) - s)) s" >&2
    # Debian's python3 has python3-matplotlib (installed by setup-host.sh) for the charts.
    /usr/bin/python3 "$TOP/bench/report.py" "$log" --part "$part" --mode "$mode" \
        --latency-ns "$LATENCY_NS" --results "$RESULTS" || die "bench/report.py failed on $log"
done
echo "run-bench: all parts took $(($(date +%s) - start_all)) s; results in $RESULTS" >&2

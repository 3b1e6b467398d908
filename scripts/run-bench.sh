#!/usr/bin/env bash
# `make bench`: run the benchmarks in one guest boot each and write results/.
set -euo pipefail

usage() {
    cat <<USAGE
Usage: $0 [--part pmem|nvme|all] [--rounds N] [--runtime S] [--help]

pmem part (2 vCPUs): rust_pmem nowait=0/1, C nd_pmem (with the reference nowait patch)
nowait=0/1 and brd of the same size.
nvme part (4 vCPUs): rust_nvme_mq vs the C nvme driver, and the reference's overflow scenario
(one reader per CPU, reader 0 with far more I/O in flight than a queue holds, io_queue_depth=8)
with overflow=0 vs overflow=1.
Each part is one guest boot; its configurations alternate over N rounds (default 5) of
S-second fio io_uring 4k randread runs (default 8). Prints tables and ratios; writes
results/bench.json, results/<part>.png and the raw logs results/bench-<part>.log.
Ratios, not absolute numbers, are meaningful under TCG.
USAGE
}
ROUNDS=5
RUNTIME=8
PARTS=(pmem nvme)
while [[ $# -gt 0 ]]; do
    case "$1" in
        --part) [[ $2 == all ]] || PARTS=("$2"); shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --runtime) RUNTIME=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
TOP=$(cd "$(dirname "$0")/.." && pwd)
RESULTS="$TOP/results"
mkdir -p "$RESULTS"
declare -A SMP=([pmem]=2 [nvme]=4)
"$TOP/scripts/prepare.sh" --no-builtin
for part in "${PARTS[@]}"; do
    [[ -n "${SMP[$part]:-}" ]] || { echo "run-bench: unknown part $part" >&2; exit 2; }
    echo "run-bench: $part part, ${SMP[$part]} vCPUs, $ROUNDS rounds of $RUNTIME s" >&2
    "$TOP/scripts/guest.sh" --smp "${SMP[$part]}" --timeout 3600 --log "$RESULTS/bench-$part.log" \
        -- "bash /tests/bench-$part.sh $ROUNDS $RUNTIME" >/dev/null
    # Debian's python3 has python3-matplotlib (installed by setup-host.sh) for the charts.
    /usr/bin/python3 "$TOP/bench/report.py" "$RESULTS/bench-$part.log" --part "$part" --results "$RESULTS"
done

#!/usr/bin/env bash
# `make bench`: run the benchmarks in one guest boot each and write results/.
set -euo pipefail

usage() {
    cat <<USAGE
Usage: $0 [--rounds N] [--runtime S] [--help]

pmem part: rust_pmem nowait=0/1, C nd_pmem (with the reference nowait patch) nowait=0/1 and brd,
alternated over N rounds (default 5) of S-second fio io_uring 4k randread runs (default 8).
Prints the table and the ratios; writes results/bench.json, results/pmem.png and the raw log
results/bench-pmem.log. Ratios, not absolute numbers, are meaningful under TCG.
USAGE
}
ROUNDS=5
RUNTIME=8
while [[ $# -gt 0 ]]; do
    case "$1" in
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
"$TOP/scripts/prepare.sh" --no-builtin
"$TOP/scripts/guest.sh" --smp 2 --timeout 3600 --log "$RESULTS/bench-pmem.log" \
    -- "bash /tests/bench-pmem.sh $ROUNDS $RUNTIME" >/dev/null
python3 "$TOP/bench/report.py" "$RESULTS/bench-pmem.log" --part pmem --results "$RESULTS"

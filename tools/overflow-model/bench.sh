#!/usr/bin/env bash
# `make bench` part overflow_model: run the host model of rust_nvme_mq's overflow and merge its
# figures at 256 queues into bench.json.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--results DIR] [--markdown FILE] [--help]

Builds tools/overflow-model (cargo, no dependencies, into \$RBLK_OUT/overflow-model), prints
its figures for 16, 64 and 256 queues (every load, overflow off, the linear scan and the
bounded search), and merges into DIR/bench.json (default results/; other keys are kept):
  overflow_model_locks_mean_256, overflow_model_locks_p99_256   queue locks per overflowing
      submission, mean and 99th percentile, the bounded search, worst load at 256 queues
  overflow_model_fairness_256        max/min per-reader IOPS (equal iodepth), worst load
  overflow_model_home_keep_256       home readers' IOPS / theirs with overflow off, worst load
  the same four with _linear appended: the linear scan
  overflow_model_policy              hash and length of rust_nvme_mq/policy.rs as compiled in
  --markdown FILE  also write the figures as a Markdown table to FILE
USAGE
}

TOP=$(cd "$(dirname "$0")/../.." && pwd)
RESULTS=$TOP/results MARKDOWN=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --results) need_arg "$@"; RESULTS=$2; shift ;;
        --markdown) need_arg "$@"; MARKDOWN=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        *) unknown_arg "$1" ;;
    esac
    shift
done
OUT=${RBLK_OUT:-$TOP/out}
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null || die "no cargo in PATH (scripts/setup-host.sh installs it)"
CARGO_TARGET_DIR="$OUT/overflow-model" cargo build --release --offline --quiet \
    --manifest-path "$TOP/tools/overflow-model/Cargo.toml" || die "tools/overflow-model does not build"
MODEL="$OUT/overflow-model/release/overflow-model"

"$MODEL" --table || die "the model failed"
[[ -z $MARKDOWN ]] || { "$MODEL" --markdown >"$MARKDOWN" || die "the model failed (--markdown)"; }
keys=$("$MODEL" --keys) || die "the model failed (--keys)"
policy=$("$MODEL" --policy-hash) || die "the model failed (--policy-hash)"
mkdir -p "$RESULTS"
/usr/bin/python3 - "$RESULTS/bench.json" "$policy" "$keys" <<'EOF' || die "could not merge into $RESULTS/bench.json"
import json, sys
from pathlib import Path
path, policy, keys = Path(sys.argv[1]), sys.argv[2], sys.argv[3].splitlines()
results = json.loads(path.read_text()) if path.exists() else {}
for line in keys:
    key, value = line.split()
    results[key] = float(value) if "." in value else int(value)
h, n = policy.split()
results["overflow_model_policy"] = f"rust_nvme_mq/policy.rs FNV-1a {h}, {n} bytes"
path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
print(f"overflow_model: wrote {len(keys) + 1} keys into {path}")
EOF
echo "$keys"

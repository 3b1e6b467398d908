#!/usr/bin/env bash
# Host test: the model of rust_nvme_mq's overflow (tools/overflow-model), built with the
# driver's own policy code, meets the targets of the bounded search at 256 queues.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--help]

Builds tools/overflow-model (cargo, no dependencies, into \$RBLK_OUT/overflow-model) and
checks, printing "PASS name" / "FAIL name" lines:
  overflow_model_same_policy   the model compiled rust_nvme_mq/policy.rs as it is (the hash
                               of the source it embeds is the file's), and the driver's
                               queueset.rs includes that file and submits through its
                               bounded search (policy::lenders) unless overflow_scan (the
                               linear scan, for comparison; off by default) is set
  overflow_model_locks_256     bounded search at 256 queues, worst load: mean queue locks per
                               overflowing submission <= 2, p99 <= 4
  overflow_model_fairness_256  max/min per-reader IOPS (readers of equal iodepth) <= 1.10
  overflow_model_home_keep_256 home readers keep >= 0.90 of their IOPS with overflow off
The linear scan's figures are printed beside each. Takes ~10-20 s.
USAGE
}
help_or_no_args "$@"

TOP=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${RBLK_OUT:-$TOP/out}
export PATH="$HOME/.cargo/bin:$PATH"
CHECKS=(overflow_model_same_policy overflow_model_locks_256 overflow_model_fairness_256
        overflow_model_home_keep_256)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail_all() { # REASON: every check fails, with the reason
    local c
    for c in "${CHECKS[@]}"; do echo "FAIL $c ($1)"; done
    exit 0
}

command -v cargo >/dev/null || fail_all "no cargo in PATH (scripts/setup-host.sh installs it)"
if ! CARGO_TARGET_DIR="$OUT/overflow-model" cargo build --release --offline --quiet \
    --manifest-path "$TOP/tools/overflow-model/Cargo.toml" >"$tmp/build.out" 2>&1; then
    sed 's/^/    | /' "$tmp/build.out" | head -n 40 >&2
    fail_all "tools/overflow-model does not build"
fi
MODEL="$OUT/overflow-model/release/overflow-model"

# The same policy source: the model's embedded copy hashes like the file on disk, and the
# driver includes that file and uses its bounded search.
want=$(python3 - "$TOP/rust_nvme_mq/policy.rs" <<'EOF'
import sys
h = 0xcbf29ce484222325
data = open(sys.argv[1], "rb").read()
for b in data:
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
print(f"{h:016x} {len(data)}")
EOF
)
got=$("$MODEL" --policy-hash)
why=()
[[ $got == "$want" ]] || why+=("the model embeds policy source '$got', rust_nvme_mq/policy.rs is '$want'")
grep -qE '^#\[path = "\.\./\.\./\.\./rust_nvme_mq/policy\.rs"\]$' "$TOP/tools/overflow-model/src/main.rs" \
    || why+=("tools/overflow-model/src/main.rs does not include ../../../rust_nvme_mq/policy.rs")
# queueset.rs: the policy file as its module, and the submission path through it (the linear
# scan only with overflow_scan, off by default).
python3 - "$TOP/rust_nvme_mq/queueset.rs" "$TOP/rust_nvme_mq.rs" <<'EOF' || why+=("rust_nvme_mq/queueset.rs does not include policy.rs as a module, or its submit (place, place_elsewhere) does not go through policy::lenders, or the overflow_scan parameter is not off by default")
import re, sys
src = open(sys.argv[1]).read()
ok = re.search(r'#\[path = "policy\.rs"\]\s*mod policy;', src)
# `submit` rings the doorbells around `place`, which tries the home queue, then
# `place_elsewhere` the others (also for a `queue_rqs` batch): the path is these bodies.
bodies = re.findall(r'fn (?:submit|place|place_elsewhere)\((.*?)\n    }\n', src, re.S)
body = "\n".join(bodies)
# Once the home queue refused: the linear scan under `if self.scan`, else the lenders.
bounded = re.search(r'if self\.scan \{.*?\} else \{.*?\blenders\(', body, re.S)
bounded = bounded and re.search(r'use policy::\{[^}]*\blenders\b', src)
default = re.search(r'overflow_scan: bool \{\s*default: false,', open(sys.argv[2]).read())
sys.exit(0 if ok and bounded and default else 1)
EOF
if ((${#why[@]} == 0)); then
    echo "PASS overflow_model_same_policy ($got: rust_nvme_mq/policy.rs)"
else
    echo "FAIL overflow_model_same_policy (${why[*]})"
fi

rc=0
"$MODEL" --check >"$tmp/check.out" 2>"$tmp/check.err" || rc=$?
if ((rc != 0)); then
    sed 's/^/    | /' "$tmp/check.err" | head -n 20 >&2
    for c in "${CHECKS[@]:1}"; do echo "FAIL $c (the model failed: exit status $rc)"; done
    exit 0
fi
for c in "${CHECKS[@]:1}"; do
    grep -E "^(PASS|FAIL) $c( |$)" "$tmp/check.out" || echo "FAIL $c (the model printed no result for it)"
done

#!/usr/bin/env bash
# Build the kernel at every patch of the series, and run checkpatch on each (not part of make test).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
log() { echo "$PROG: $*" >&2; }

usage() {
    cat <<USAGE
Usage: $0 [--jobs N] [--from K] [--build DIR] TREE [BASE]

Checks out every commit BASE..HEAD of the kernel git tree TREE (made by scripts/dev-tree.sh;
BASE defaults to base-7.3.4) in order, and at each one:
  - builds bzImage and modules with the project's kernel configuration plus the Rust
    samples the series touches (CONFIG_SAMPLES_RUST, the misc device sample), rnull
    included, with Rust warnings as errors (KRUSTFLAGS=-Dwarnings);
  - runs the kernel's scripts/checkpatch.pl --strict on the commit and counts what it
    reports (shown at the end; it does not stop the run).
Stops at the first commit that does not build, naming it, with the end of its build log.
At the end the Rust doctests of the last commit are built too (CONFIG_RUST_KERNEL_DOCTESTS),
and TREE is back on the branch or commit it was on.

  --jobs N    make -j N (default: the number of CPUs)
  --from K    start at the K-th commit (1 = the first after BASE); the build directory
              must then hold the build of commit K-1 or earlier of this series
  --build DIR the O= build directory, kept between runs so a rerun only rebuilds what
              changed (default: TREE/../series-build). Configured on first use from the
              project's kernel configuration (scripts/build-kernel.sh --configure-only).

The first commit builds everything the series touches on top of a full kernel build
(~30 min on 2 CPUs from an empty DIR); each later one only what it changed.
USAGE
}

JOBS=$(nproc)
FROM=1
BUILD=
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --jobs) need_arg "$@"; JOBS=$2; shift 2 ;;
        --from) need_arg "$@"; FROM=$2; shift 2 ;;
        --build) need_arg "$@"; BUILD=$2; shift 2 ;;
        -*) usage_error "unknown option '$1'" ;;
        *) break ;;
    esac
done
[[ $# -ge 1 && $# -le 2 ]] || usage_error "need TREE and at most BASE (got $# arguments)"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || usage_error "--jobs takes a number of jobs, not '$JOBS'"
[[ "$FROM" =~ ^[1-9][0-9]*$ ]] || usage_error "--from takes a commit number (1 or more), not '$FROM'"
TOP=$(cd "$(dirname "$0")/.." && pwd)
TREE=$(cd "$1" && pwd)
BASE=${2:-base-7.3.4}
BUILD=${BUILD:-$(dirname "$TREE")/series-build}
export PATH=$HOME/.cargo/bin:$PATH

git -C "$TREE" rev-parse --verify -q "$BASE^{commit}" >/dev/null ||
    die "$TREE is not a git tree with a commit '$BASE' (make one with scripts/dev-tree.sh)"
[[ -z "$(git -C "$TREE" status --porcelain --untracked-files=no)" ]] ||
    die "$TREE has uncommitted changes to tracked files: commit or stash them first"
mapfile -t COMMITS < <(git -C "$TREE" rev-list --reverse "$BASE..HEAD")
((${#COMMITS[@]} > 0)) || die "no commits between $BASE and HEAD in $TREE"
((FROM <= ${#COMMITS[@]})) || die "--from $FROM: the series has only ${#COMMITS[@]} commits"
ORIG=$(git -C "$TREE" symbolic-ref -q --short HEAD || git -C "$TREE" rev-parse HEAD)
restore() { git -C "$TREE" checkout -q "$ORIG" || log "could not check $TREE out at $ORIG again"; }
trap restore EXIT

# The project's configuration, plus what the series touches that it does not build.
EXTRA=(--enable SAMPLES --enable SAMPLES_RUST --module SAMPLE_RUST_MISC_DEVICE --module BLK_DEV_RUST_NULL)
mkdir -p "$BUILD"
if [[ ! -f "$BUILD/.config" ]]; then
    main=$("$TOP/scripts/build-kernel.sh" --configure-only | tail -n 1) ||
        die "scripts/build-kernel.sh --configure-only failed (above): no configuration to start from"
    [[ -f "$main/.config" ]] || die "no .config in $main after scripts/build-kernel.sh --configure-only"
    cp "$main/.config" "$BUILD/.config"
fi
"$TREE/scripts/config" --file "$BUILD/.config" "${EXTRA[@]}" --disable RUST_KERNEL_DOCTESTS
MAKE=(make -s -C "$TREE" O="$BUILD" LLVM="$RBLK_LLVM" -j"$JOBS" KRUSTFLAGS=-Dwarnings)
"${MAKE[@]}" olddefconfig >"$BUILD/check-series-config.log" 2>&1 ||
    die "make olddefconfig failed in $BUILD (log: $BUILD/check-series-config.log)"
grep -qx CONFIG_SAMPLE_RUST_MISC_DEVICE=m "$BUILD/.config" ||
    die "the Rust misc device sample could not be enabled in $BUILD/.config"

start=$(date +%s)
report=$BUILD/check-series.txt
mkdir -p "$BUILD/checkpatch"
((FROM > 1)) || : >"$report"
for ((i = FROM; i <= ${#COMMITS[@]}; i++)); do
    c=${COMMITS[i - 1]}
    subject=$(git -C "$TREE" log -1 --format=%s "$c")
    git -C "$TREE" checkout -q --detach "$c"
    t0=$(date +%s)
    if ! "${MAKE[@]}" bzImage modules >"$BUILD/check-series-build.log" 2>&1; then
        grep -E 'error|warning' -A5 "$BUILD/check-series-build.log" | head -n 40 >&2 || true
        die "commit $i/${#COMMITS[@]} ($c, \"$subject\") does not build (log: $BUILD/check-series-build.log)"
    fi
    out=$BUILD/checkpatch/$(printf %03d "$i").txt
    git -C "$TREE" format-patch -1 --stdout "$c" >"$out.patch"
    (cd "$TREE" && scripts/checkpatch.pl --strict --no-tree --terse --show-types "$out.patch") >"$out" 2>&1 || true
    # --terse prints nothing at all for a clean patch.
    counts=$(grep -oE '^total: [0-9]+ errors, [0-9]+ warnings, [0-9]+ checks' "$out" ||
        echo "total: 0 errors, 0 warnings, 0 checks")
    printf '%3d %4ds  %s  %s\n' "$i" "$(($(date +%s) - t0))" "$counts" "$subject" | tee -a "$report"
    grep -E ': (ERROR|WARNING|CHECK):' "$out" | sed 's/^/      /' >>"$report" || true
done
log "all ${#COMMITS[@]} commits build ($((i - FROM)) built now, in $(($(date +%s) - start)) s)"

# The documentation examples of the whole series, once, at its last commit.
git -C "$TREE" checkout -q --detach "${COMMITS[-1]}"
"$TREE/scripts/config" --file "$BUILD/.config" --enable RUST_KERNEL_DOCTESTS
"${MAKE[@]}" olddefconfig >>"$BUILD/check-series-config.log" 2>&1 || die "make olddefconfig failed in $BUILD"
t0=$(date +%s)
"${MAKE[@]}" bzImage modules >"$BUILD/check-series-build.log" 2>&1 ||
    die "the Rust doctests of the last commit do not build (log: $BUILD/check-series-build.log)"
log "Rust doctests of the last commit built in $(($(date +%s) - t0)) s"
"$TREE/scripts/config" --file "$BUILD/.config" --disable RUST_KERNEL_DOCTESTS
log "checkpatch --strict per commit (and every report line): $report"
grep -E '^ *[0-9]+ ' "$report" | grep -vE 'total: 0 errors, 0 warnings, 0 checks' || log "checkpatch: nothing in any commit"
log "total $(($(date +%s) - start)) s"

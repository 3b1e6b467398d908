#!/usr/bin/env bash
# Regenerate kernel/patches/ from a kernel git tree whose commits since BASE are the series.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 KERNEL_GIT_TREE BASE [START_NUMBER]

Writes "git format-patch BASE..HEAD" of KERNEL_GIT_TREE into kernel/patches/, numbered from
START_NUMBER (default 1). Existing patch files with numbers >= START_NUMBER are replaced.
USAGE
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
esac
[[ $# -ge 2 && $# -le 3 ]] || usage_error "need KERNEL_GIT_TREE and BASE (got $# arguments)"
TOP=$(cd "$(dirname "$0")/.." && pwd)
tree=$1 base=$2 start=${3:-1}
# Check the tree and BASE before the old files go: a wrong argument must not leave the series
# deleted.
git -C "$tree" rev-parse --verify -q "$base^{commit}" >/dev/null ||
    die "$tree is not a git tree with a commit '$base' (see the usage: KERNEL_GIT_TREE BASE)"
[[ "$start" =~ ^[1-9][0-9]*$ ]] || usage_error "START must be a patch number (1 or more), not '$start'"
for p in "$TOP"/kernel/patches/[0-9][0-9][0-9][0-9]-*.patch; do
    [[ -e "$p" ]] || continue
    n=$(basename "$p" | cut -c1-4)
    ((10#$n >= start)) && rm -f "$p"
done
git -C "$tree" format-patch -q --zero-commit --no-signature --start-number "$start" \
    -o "$TOP/kernel/patches" "$base..HEAD"
ls "$TOP/kernel/patches"

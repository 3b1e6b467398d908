#!/usr/bin/env bash
# Regenerate kernel/patches/ from a kernel git tree whose commits since BASE are the series.
set -euo pipefail
# Never fail silently: name the command that failed under set -e.
trap 'echo "${0##*/}: line $LINENO: command failed (exit $?): $BASH_COMMAND" >&2' ERR

usage() {
    cat <<USAGE
Usage: $0 KERNEL_GIT_TREE BASE [START_NUMBER]

Writes "git format-patch BASE..HEAD" of KERNEL_GIT_TREE into kernel/patches/, numbered from
START_NUMBER (default 1). Existing patch files with numbers >= START_NUMBER are replaced.
USAGE
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    -*) echo "export-patches: unknown option '$1'" >&2; usage >&2; exit 2 ;;
esac
[[ $# -ge 2 && $# -le 3 ]] || { echo "export-patches: need KERNEL_GIT_TREE and BASE (got $# arguments)" >&2; usage >&2; exit 2; }
TOP=$(cd "$(dirname "$0")/.." && pwd)
tree=$1 base=$2 start=${3:-1}
for p in "$TOP"/kernel/patches/[0-9][0-9][0-9][0-9]-*.patch; do
    [[ -e "$p" ]] || continue
    n=$(basename "$p" | cut -c1-4)
    ((10#$n >= start)) && rm -f "$p"
done
git -C "$tree" format-patch -q --zero-commit --no-signature --start-number "$start" \
    -o "$TOP/kernel/patches" "$base..HEAD"
ls "$TOP/kernel/patches"

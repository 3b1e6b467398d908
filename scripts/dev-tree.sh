#!/usr/bin/env bash
# Make a kernel git tree whose commits are the patch series, for editing the series.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 DIR [--help]

Copies the pristine linux-source-7.3 tree (scripts/fetch-kernel.sh) to DIR, commits it as
"base 7.3.4" (tag base-7.3.4) and applies kernel/patches/*.patch with git am, one commit each,
on branch "series". Edit the series there (new commits, git rebase -i), then write it back with
scripts/export-patches.sh DIR base-7.3.4. DIR must not exist. Takes ~2 min and ~1.5 GB.
USAGE
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
    "") usage_error "need the directory to create" ;;
esac
[[ $# -eq 1 ]] || usage_error "need exactly one DIR (got $# arguments)"
TOP=$(cd "$(dirname "$0")/.." && pwd)
DIR=$1
[[ ! -e "$DIR" ]] || { echo "dev-tree: $DIR already exists; choose a new directory" >&2; exit 1; }
SRC=$("$TOP/scripts/fetch-kernel.sh") || { echo "dev-tree: could not get the kernel source (above)" >&2; exit 1; }

git_() { git -C "$DIR" -c user.name="${GIT_AUTHOR_NAME:-dev}" -c user.email="${GIT_AUTHOR_EMAIL:-dev@localhost}" "$@"; }
cp -a "$SRC" "$DIR"
rm -f "$DIR/.rblk-unpacked"
git_ init -q -b series
# Debian's top-level .gitignore ignores everything outside debian/: add by force.
git_ add -A -f
git_ commit -q -m "base $(make -s -C "$DIR" kernelversion)"
git_ tag base-7.3.4
for p in "$TOP"/kernel/patches/*.patch; do
    [[ -e "$p" ]] || continue
    git_ am -q "$p" || { git_ am --abort || true; echo "dev-tree: $(basename "$p") does not apply with git am" >&2; exit 1; }
done
echo "dev-tree: $DIR: $(git_ rev-list --count base-7.3.4..HEAD) patches on base-7.3.4 (new files need git add -f)"

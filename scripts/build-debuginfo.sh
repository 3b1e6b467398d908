#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Build the modules once more with debug information, in a copy of the sources, for
# bench/insn_blocks.py --lines (an exact profile summed by source line).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<EOF
Usage: scripts/build-debuginfo.sh DIR [--help]

Copies the drivers' sources (Kbuild, rust_pmem.rs, rust_nvme_mq.rs, rust_nvme_mq/, tests/modules/)
to DIR and builds them there against the kernel of out/env (scripts/prepare.sh) with rustc's -g.
Debug information does not change the code LLVM generates, so DIR/rust_nvme_mq.ko has the same
instructions as the module built by 'make' (insn_blocks.py --lines checks it, function by
function) and tells the source line, with its inline chain, of each of them:

  bench/insn_blocks.py LOG --dumps PREFIX --config rust_none --func rust_nvme_mq \\
      --ko rust_nvme_mq.ko --lines DIR/rust_nvme_mq.ko

DIR must not exist. Takes ~15 s.
EOF
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    "") usage_error "DIR is missing" ;;
    -*) unknown_arg "$1" ;;
esac
[[ $# -eq 1 ]] || unknown_arg "$2"
dir=$1
[[ ! -e $dir ]] || die "$dir exists: give a new directory"
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -f $root/out/env ]] || die "no $root/out/env: run scripts/prepare.sh (or make test) first"
# shellcheck source=/dev/null
source "$root/out/env"
[[ -f ${KBUILD:-}/vmlinux ]] || die "no kernel build at '${KBUILD:-}' (out/env): run scripts/prepare.sh"

mkdir -p "$dir/tests"
cp -r "$root/Kbuild" "$root/rust_pmem.rs" "$root/rust_nvme_mq.rs" "$root/rust_nvme_mq" "$dir/"
cp -r "$root/tests/modules" "$dir/tests/"
make -C "$KBUILD" M="$(cd "$dir" && pwd)" LLVM="$RBLK_LLVM" KRUSTFLAGS=-g modules >"$dir/build.log" 2>&1 ||
    die "the build with debug information failed (last lines of $dir/build.log:
$(tail -5 "$dir/build.log"))"
"llvm-readelf$RBLK_LLVM" -S "$dir/rust_nvme_mq.ko" | grep -q '\.debug_line' ||
    die "$dir/rust_nvme_mq.ko has no line information: KRUSTFLAGS=-g did not reach rustc"
echo "$PROG: $dir/rust_nvme_mq.ko and $dir/rust_pmem.ko, with debug information"

#!/usr/bin/env bash
# Set up everything a guest run needs: host tools, both kernels, the modules and guest tools.
set -euo pipefail
shopt -s inherit_errexit

usage() {
    cat <<USAGE
Usage: $0 [--no-builtin] [--help]

Installs missing host packages, builds (incrementally) the kernel and, unless --no-builtin, the
variant with the drivers built in, builds rust_pmem.ko / rust_nvme_mq.ko and the guest test
tools, and writes the paths to \$RBLK_OUT/env (default out/env) as shell variables:
KBUILD, KBUILD_BUILTIN, GUEST_DIR, IMAGES.
USAGE
}
BUILTIN=1
for a in "$@"; do
    case "$a" in
        --no-builtin) BUILTIN=0 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

TOP=$(cd "$(dirname "$0")/.." && pwd)
OUT=${RBLK_OUT:-$TOP/out}
IMAGES=${RBLK_IMAGES:-/var/tmp/rust-blk-images}
export PATH="$HOME/.cargo/bin:$PATH"
mkdir -p "$OUT" "$IMAGES"
step() { echo "prepare: $*" >&2; }
timed() {
    local s
    s=$(date +%s)
    "$@" || { step "FAILED: $*"; return 1; }
    step "  ($(($(date +%s) - s)) s)"
}

step "host packages and tools"
timed "$TOP/scripts/setup-host.sh" >&2
step "kernel (first build ~15-20 min on 2 cores, then incremental)"
KBUILD=$(timed "$TOP/scripts/build-kernel.sh" | tail -n1) || exit 1
KBUILD_BUILTIN=
if [[ $BUILTIN == 1 ]]; then
    step "kernel with the drivers built in"
    KBUILD_BUILTIN=$(timed "$TOP/scripts/build-kernel.sh" --builtin | tail -n1) || exit 1
fi
step "out-of-tree modules"
timed make -s -C "$KBUILD" M="$TOP" LLVM=-19 modules >&2
step "guest tools"
GUEST_DIR="$OUT/guest"
rm -rf "$GUEST_DIR"
mkdir -p "$GUEST_DIR/bin"
cp -r "$TOP"/tests/guest/. "$GUEST_DIR"/
gcc -static -O2 -Wall -o "$GUEST_DIR/bin/nowait_read" "$TOP/tests/tools/nowait_read.c"

cat >"$OUT/env" <<ENV
KBUILD=$KBUILD
KBUILD_BUILTIN=$KBUILD_BUILTIN
GUEST_DIR=$GUEST_DIR
IMAGES=$IMAGES
ENV
step "ready ($OUT/env)"

#!/usr/bin/env bash
# Set up everything a guest run needs: host tools, both kernels, the modules and guest tools.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
shopt -s inherit_errexit

usage() {
    cat <<USAGE
Usage: $0 [--no-builtin] [--debug | --no-debug] [--help]

Installs missing host packages, builds (incrementally) the kernel and, unless --no-builtin, the
variant with the drivers built in, builds rust_pmem.ko / rust_nvme_mq.ko and the guest test
tools, and writes the paths to \$RBLK_OUT/env (default out/env) as shell variables:
KBUILD, KBUILD_BUILTIN, KBUILD_DEBUG, GUEST_DIR, IMAGES. The modules built for a kernel
are copied to \$RBLK_OUT/modules-<build dir name>/.

  --no-builtin  skip the kernel with the drivers built in
  --debug       also build the debug kernel (lockdep, KASAN, DMA-API debugging; first build
                ~30 min) and the modules for it. Without --debug, a debug kernel that was
                built before is brought up to date (incrementally); if there is none,
                KBUILD_DEBUG is left empty.
  --no-debug    leave the debug kernel alone (not built, not brought up to date; KBUILD_DEBUG
                empty), as \`make test\` does: its suites run with \`make test-debug\`
USAGE
}
BUILTIN=1
DEBUG=0
for a in "$@"; do
    case "$a" in
        --no-builtin) BUILTIN=0 ;;
        --debug) DEBUG=1 ;;
        --no-debug) DEBUG=-1 ;;
        -h|--help) usage; exit 0 ;;
        *) unknown_arg "$a" ;;
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
KBUILD_DEBUG=
# Asked for, or built once before (make test-debug) and not refused (--no-debug): then keep it
# current, incrementally, so that its suites test this tree.
if [[ $DEBUG == 1 ]] || { [[ $DEBUG == 0 ]] &&
    [[ -f "$("$TOP/scripts/build-kernel.sh" --debug --print-dir 2>/dev/null || echo /nonexistent)/.rblk-built" ]]; }; then
    step "debug kernel (first build ~30 min on 2 cores, then incremental)"
    KBUILD_DEBUG=$(timed "$TOP/scripts/build-kernel.sh" --debug | tail -n1) || exit 1
fi

# modules_for KBUILD: build both drivers against one kernel build. The main kernel builds in the
# checkout (as `make` does); another kernel builds in a copy, so objects never mix.
modules_for() {
    local kbuild=$1 src=$TOP dest
    dest="$OUT/modules-$(basename "$kbuild")"
    if [[ "$kbuild" != "$KBUILD" ]]; then
        src="$OUT/src-$(basename "$kbuild")"
        mkdir -p "$src"
        rsync -a --delete --exclude=/out/ --exclude=/.git/ --include='*/' --include='Kbuild' \
            --include='*.rs' --exclude='*' --prune-empty-dirs "$TOP"/ "$src"/
    fi
    make -s -C "$kbuild" M="$src" LLVM="$RBLK_LLVM" modules >&2 ||
        { step "FAILED: modules against $kbuild"; return 1; }
    make -s -C "$kbuild" M="$src/tests/modules" LLVM="$RBLK_LLVM" modules >&2 ||
        { step "FAILED: test modules (tests/modules) against $kbuild"; return 1; }
    rm -rf "$dest"
    mkdir -p "$dest"
    cp "$src"/*.ko "$src"/tests/modules/*.ko "$dest"/
}
step "out-of-tree modules"
timed modules_for "$KBUILD" || exit 1
if [[ -n "$KBUILD_DEBUG" ]]; then
    step "out-of-tree modules for the debug kernel"
    timed modules_for "$KBUILD_DEBUG" || exit 1
fi
step "guest tools"
GUEST_DIR="$OUT/guest"
rm -rf "$GUEST_DIR"
mkdir -p "$GUEST_DIR/bin"
cp -r "$TOP"/tests/guest/. "$GUEST_DIR"/
mkdir -p "$GUEST_DIR/udev"
cp "$TOP"/udev/*.rules "$GUEST_DIR/udev/"
gcc -static -O2 -Wall -o "$GUEST_DIR/bin/nowait_read" "$TOP/tests/tools/nowait_read.c"
gcc -static -O2 -Wall -o "$GUEST_DIR/bin/odd_dio" "$TOP/tests/tools/odd_dio.c"
gcc -static -O2 -Wall -o "$GUEST_DIR/bin/nvme_passthru" "$TOP/tests/tools/nvme_passthru.c"
gcc -static -O2 -Wall -o "$GUEST_DIR/bin/nvme_io_passthru" "$TOP/tests/tools/nvme_io_passthru.c"
gcc -static -O2 -Wall -o "$GUEST_DIR/bin/nvme_submit_io" "$TOP/tests/tools/nvme_submit_io.c"
gcc -static -O2 -Wall -o "$GUEST_DIR/bin/nvme_uring" "$TOP/tests/tools/nvme_uring.c"
gcc -static -O2 -Wall -o "$GUEST_DIR/bin/dax_file" "$TOP/tests/tools/dax_file.c"

cat >"$OUT/env" <<ENV
KBUILD=$KBUILD
KBUILD_BUILTIN=$KBUILD_BUILTIN
KBUILD_DEBUG=$KBUILD_DEBUG
GUEST_DIR=$GUEST_DIR
IMAGES=$IMAGES
ENV
step "ready ($OUT/env)"

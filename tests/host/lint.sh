#!/usr/bin/env bash
# Host test: the drivers are rustfmt-clean and clippy-clean against the built kernel.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--help]

Runs tests/host/structure.sh first (the drivers' module graph, module table and function
lengths; no kernel needed), then checks the drivers with the kernel's own settings:
"make rustfmtcheck" (rustfmt with the kernel's .rustfmt.toml) and a clippy build (Kbuild's CLIPPY=1) of a copy of the driver
sources in a temporary directory, so the checkout's modules are left alone. Needs the kernel
built (scripts/build-kernel.sh). Prints "PASS name" / "FAIL name" per check, with the
offending lines on failure.
USAGE
}
help_or_no_args "$@"

TOP=$(cd "$(dirname "$0")/../.." && pwd)
"$TOP/tests/host/structure.sh"
KDIR=$("$TOP/scripts/build-kernel.sh" --print-dir)
[[ -f "$KDIR/vmlinux" ]] || { echo "lint: no kernel built in $KDIR: run scripts/build-kernel.sh first" >&2; exit 1; }
export PATH="$HOME/.cargo/bin:$PATH"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if make -s -C "$TOP" KDIR="$KDIR" rustfmtcheck >"$tmp/fmt.out" 2>&1; then
    echo "PASS drivers_rustfmt_clean"
else
    echo "FAIL drivers_rustfmt_clean"
    head -n 40 "$tmp/fmt.out" | sed 's/^/    | /'
fi

cp -a "$TOP/Kbuild" "$TOP"/*.rs "$TOP/rust_nvme_mq" "$tmp/"
if make -C "$KDIR" M="$tmp" LLVM="$RBLK_LLVM" CLIPPY=1 modules >"$tmp/clippy.out" 2>&1 \
    && ! grep -qE '^(warning|error)' "$tmp/clippy.out"; then
    echo "PASS drivers_clippy_clean"
else
    echo "FAIL drivers_clippy_clean"
    grep -E -A8 '^(warning|error)' "$tmp/clippy.out" | head -n 60 | sed 's/^/    | /'
fi

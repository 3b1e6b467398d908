#!/usr/bin/env bash
# Host test: the fresh-machine path. Runs the fetch and configure steps of the kernel build
# against an empty temporary cache (what a new machine has) and checks that they produce a
# patched, configured tree. The full build is not repeated here.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--keep] [--help]

Runs scripts/build-kernel.sh --configure-only with RBLK_CACHE set to a new empty directory:
fetch-kernel.sh downloads and unpacks linux-source-7.3, the patch series is applied, the
drivers are installed in the tree, and the main and debug configurations are made. Checks the
result and prints "PASS name" / "FAIL name" lines. Takes 1-3 minutes (a 167 MB download).

  --keep   keep the temporary cache (its path is printed) instead of deleting it
USAGE
}
KEEP=0
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --keep) KEEP=1 ;;
    "") ;;
    *) unknown_arg "$1" ;;
esac

TOP=$(cd "$(dirname "$0")/../.." && pwd)
cache=$(mktemp -d /var/tmp/rust-blk-cold.XXXXXX)
if [[ $KEEP == 0 ]]; then trap 'rm -rf "$cache"' EXIT; else echo "cold-path: cache kept in $cache" >&2; fi

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; shift; printf '    | %s\n' "$@"; }

# check_config BUILD OPTION...: every OPTION (CONFIG_X=v) is in BUILD/.config.
check_config() {
    local build=$1 missing=()
    shift
    for o in "$@"; do grep -qx "$o" "$build/.config" || missing+=("$o"); done
    ((${#missing[@]} == 0)) || { echo "missing in $build/.config: ${missing[*]}"; return 1; }
}

# cold_configure NAME [build-kernel.sh options]: configure one variant from the empty cache;
# sets BUILD to its build directory, or prints the FAIL line and returns 1.
BUILD=
cold_configure() {
    local name=$1 s out
    shift
    s=$(date +%s)
    if ! out=$(RBLK_CACHE="$cache" "$TOP/scripts/build-kernel.sh" --configure-only "$@" 2>"$cache/$name.err"); then
        fail "$name" "build-kernel.sh --configure-only $* failed after $(($(date +%s) - s)) s:" \
            "$(tail -n 15 "$cache/$name.err")"
        return 1
    fi
    BUILD=$(tail -n 1 <<<"$out")
    echo "cold-path: $name: $(($(date +%s) - s)) s" >&2
    case "$BUILD" in
        "$cache"/build/*) ;;
        *) fail "$name" "build directory '$BUILD' is not in the temporary cache"; return 1 ;;
    esac
}

if cold_configure cold_fetch_and_configure; then
    tree=$(ls -d "$cache"/tree/*/ | head -n 1)
    why=$(
        [[ -f "$cache/src/linux-source-7.3/.rblk-unpacked" ]] || echo "no unpacked source"
        [[ -f "$tree/rust/kernel/block/mq.rs" ]] || echo "no patched tree"
        [[ -f "$tree/drivers/block/rust_blk/rust_pmem.rs" ]] || echo "drivers not installed in the tree"
        grep -q 'rust_blk/Kconfig' "$tree/drivers/block/Kconfig" || echo "Kconfig not hooked"
        grep -q 'rust_blk/' "$tree/drivers/block/Makefile" || echo "Makefile not hooked"
        # The tree is staged with hard links to the source: hooking the drivers must not
        # change the pristine source (scripts/dev-tree.sh copies it as the series' base).
        ! grep -q 'rust_blk' "$cache/src/linux-source-7.3/drivers/block/Makefile" \
            "$cache/src/linux-source-7.3/drivers/block/Kconfig" ||
            echo "installing the drivers into the tree changed the pristine source's drivers/block"
        check_config "$BUILD" CONFIG_RUST=y CONFIG_BLK_DEV_PMEM=m CONFIG_BLK_DEV_NVME=m \
            CONFIG_LIBNVDIMM=y CONFIG_PCI_MSI=y || true
        [[ ! -e "$BUILD/vmlinux" ]] || echo "--configure-only built a kernel"
    )
    if [[ -z "$why" ]]; then pass cold_fetch_and_configure; else fail cold_fetch_and_configure "$why"; fi
fi
# The debug variant reuses the source and tree fetched above, like a fresh `make test-debug`.
if cold_configure cold_configure_debug --debug; then
    if why=$(check_config "$BUILD" CONFIG_PROVE_LOCKING=y CONFIG_KASAN=y CONFIG_KASAN_INLINE=y \
        CONFIG_DMA_API_DEBUG=y CONFIG_INTEL_IOMMU=y CONFIG_RUST=y); then
        pass cold_configure_debug
    else
        fail cold_configure_debug "$why"
    fi
fi

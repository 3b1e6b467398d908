#!/usr/bin/env bash
# Drop the project's drivers into a kernel tree as drivers/block/rust_blk and wire up Kconfig/Makefile.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 KERNEL_TREE

Copies Kconfig, Kbuild and the driver sources to KERNEL_TREE/drivers/block/rust_blk/ and adds
them to drivers/block/Kconfig and drivers/block/Makefile (idempotent). The drivers are then
selected with CONFIG_BLK_DEV_RUST_PMEM / CONFIG_BLK_DEV_RUST_NVME_MQ (y or m).
USAGE
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
esac
[[ $# -eq 1 ]] || usage_error "need exactly one KERNEL_TREE (got $# arguments)"

TOP=$(cd "$(dirname "$0")/.." && pwd)
TREE=$1
DEST="$TREE/drivers/block/rust_blk"
[[ -f "$TREE/drivers/block/Kconfig" ]] || { echo "install-in-tree: $TREE is not a kernel tree" >&2; exit 1; }

mkdir -p "$DEST"
cp "$TOP"/Kconfig "$TOP"/Kbuild "$TOP"/rust_pmem.rs "$TOP"/rust_nvme_mq.rs "$DEST"/
# The modules of the rust_nvme_mq crate (rust_nvme_mq/*.rs, found by rustc next to the root);
# replaced as a whole so a file removed here does not linger in the tree.
rm -rf "$DEST/rust_nvme_mq"
mkdir -p "$DEST/rust_nvme_mq"
cp "$TOP"/rust_nvme_mq/*.rs "$DEST/rust_nvme_mq/"
# The in-tree Makefile is the Kbuild file; a plain copy keeps one source of truth.
grep -q 'drivers/block/rust_blk/Kconfig' "$TREE/drivers/block/Kconfig" ||
    sed -i 's|^source "drivers/block/rnull/Kconfig"|&\n\nsource "drivers/block/rust_blk/Kconfig"|' "$TREE/drivers/block/Kconfig"
grep -q 'drivers/block/rust_blk/Kconfig' "$TREE/drivers/block/Kconfig" ||
    { echo "install-in-tree: could not hook drivers/block/Kconfig" >&2; exit 1; }
# A new file, not an append: the tree may be a copy made with hard links (scripts/build-kernel.sh
# stages it with cp -al), whose files are the pristine source's; `>>` would change that too
# (as `sed -i` above does not: it writes a new file).
if ! grep -q 'rust_blk/' "$TREE/drivers/block/Makefile"; then
    { cat "$TREE/drivers/block/Makefile" && echo 'obj-y				+= rust_blk/'; } >"$TREE/drivers/block/Makefile.rblk" &&
        mv "$TREE/drivers/block/Makefile.rblk" "$TREE/drivers/block/Makefile" ||
        { echo "install-in-tree: could not hook drivers/block/Makefile" >&2; exit 1; }
fi
echo "install-in-tree: installed into $DEST"

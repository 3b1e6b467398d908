#!/usr/bin/env bash
# Download Debian's linux-source-7.3 package and unpack a pristine tree into the cache.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--cached] [--help]

Fetches linux-source-7.3 (any 7.3.x) from Debian's trixie-backports suite and unpacks it to
\$RBLK_CACHE/src/linux-<version> (default cache: /var/cache/rust-blk). Prints the tree's path.

  --cached   only print the path of an already unpacked tree; fail if there is none
USAGE
}
CACHED_ONLY=0
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --cached) CACHED_ONLY=1 ;;
    "") ;;
    *) unknown_arg "$1" ;;
esac

CACHE=${RBLK_CACHE:-/var/cache/rust-blk}
PKG=linux-source-7.3
LIST=/etc/apt/sources.list.d/rust-blk-trixie-backports.list

# Reuse an unpacked tree if there is one.
# (A fresh machine has no $CACHE/src yet: that is "no tree", not an error.)
existing=
if [[ -d "$CACHE/src" ]]; then
    existing=$(find "$CACHE/src" -maxdepth 1 -name 'linux-source-7.3*' -type d | sort -V | tail -n1)
fi
if [[ -n "$existing" && -f "$existing/.rblk-unpacked" ]]; then
    echo "$existing"
    exit 0
fi
if [[ $CACHED_ONLY == 1 ]]; then
    echo "fetch-kernel: no unpacked kernel tree in $CACHE/src yet (run scripts/fetch-kernel.sh)" >&2
    exit 1
fi
mkdir -p "$CACHE/src" "$CACHE/deb"

if [[ ! -f "$LIST" ]]; then
    echo "deb http://deb.debian.org/debian trixie-backports main" >"$LIST"
    # Never let the newer suite's packages win over bookworm's.
    cat >/etc/apt/preferences.d/rust-blk-trixie-backports <<PREF
Package: *
Pin: release n=trixie-backports
Pin-Priority: 100
PREF
fi
apt-get update -qq -o Dir::Etc::sourcelist="$LIST" -o Dir::Etc::sourceparts=- \
    -o APT::Get::List-Cleanup=0 >&2
cd "$CACHE/deb"
if ! apt-get download -qq "$PKG" >&2; then
    echo "fetch-kernel: ERROR: package $PKG is not available from trixie-backports any more." >&2
    echo "fetch-kernel: this project needs a 7.3.x kernel source; see docs/host-setup.md, 'The kernel source'." >&2
    exit 1
fi
deb=$(ls -t "$CACHE"/deb/${PKG}_*.deb | head -n1)
ver=$(dpkg-deb -f "$deb" Version)
case "$ver" in
    7.3*) ;;
    *) echo "fetch-kernel: ERROR: $PKG has version $ver, need 7.3.x" >&2; exit 1 ;;
esac
tmp=$(mktemp -d "$CACHE/deb/x.XXXX")
dpkg-deb -x "$deb" "$tmp"
tar -C "$CACHE/src" -xf "$tmp"/usr/src/${PKG}.tar.xz
rm -rf "$tmp"
tree="$CACHE/src/$PKG"
touch "$tree/.rblk-unpacked"
echo "$tree"

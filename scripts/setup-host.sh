#!/usr/bin/env bash
# Install the host packages and Rust tools needed to build the kernel and run the QEMU guest.
set -euo pipefail
# Never fail silently: name the command that failed under set -e.
trap 'echo "${0##*/}: line $LINENO: command failed (exit $?): $BASH_COMMAND" >&2' ERR

usage() {
    cat <<USAGE
Usage: $0 [--help]

Installs (only what is missing): clang/lld/llvm 19, kernel build tools, QEMU, the guest tools
(fio, nvme-cli, e2fsprogs, util-linux, kmod, busybox), rust-src and a pinned bindgen-cli.
USAGE
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    "") ;;
    *) echo "setup-host: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
esac

BINDGEN_VERSION=0.73.2
PKGS=(clang-19 lld-19 llvm-19 libclang-19-dev flex bison bc libelf-dev libssl-dev cpio kmod make
      qemu-system-x86 fio nvme-cli ndctl e2fsprogs util-linux busybox-static python3-matplotlib rsync
      xz-utils gcc libc6-dev)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup-host: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export PATH="$HOME/.cargo/bin:$PATH"
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
    echo "setup-host: rustup component add rust-src"
    rustup component add rust-src
fi
if ! command -v bindgen >/dev/null || [[ "$(bindgen --version | awk '{print $2}')" != "$BINDGEN_VERSION" ]]; then
    echo "setup-host: cargo install bindgen-cli $BINDGEN_VERSION (takes ~3 min)"
    cargo install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION"
fi
echo "setup-host: ok"

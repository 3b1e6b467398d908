#!/usr/bin/env bash
# `make run`: build what is missing, boot QEMU with an NVDIMM and an NVMe, load both drivers, do I/O.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--shell] [--help]

Prepares the kernel and modules (first time: installs packages and builds the kernel), then
boots the guest, loads rust_pmem (nowait=1) and rust_nvme_mq and runs a short fio. With
--shell, boots to an interactive shell instead (modules in /lib/modules/extra; the C drivers
with modprobe; exit with poweroff -f).
USAGE
}
SHELL_MODE=0
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --shell) SHELL_MODE=1 ;;
    "") ;;
    *) unknown_arg "$1" ;;
esac
TOP=$(cd "$(dirname "$0")/.." && pwd)
"$TOP/scripts/prepare.sh" --no-builtin
if [[ $SHELL_MODE == 1 ]]; then
    exec "$TOP/scripts/guest.sh" --timeout 86400
fi
exec "$TOP/scripts/guest.sh" --smp 2 --timeout 900 -- 'bash /tests/demo.sh'

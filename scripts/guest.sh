#!/usr/bin/env bash
# Boot the project's kernel in QEMU with the standard NVDIMM + NVMe and run one guest command.
set -euo pipefail

usage() {
    cat <<USAGE
Usage: $0 [--builtin] [--smp N] [--timeout S] [--append ARGS] [--log FILE] -- 'GUEST COMMAND'

Uses the kernels and guest tools recorded by scripts/prepare.sh (out/env). The guest gets
an NVDIMM of \$RBLK_PMEM_SIZE (default 256M) backed by \$IMAGES/pmem.img, kept between boots,
and an NVMe of \$RBLK_NVME_SIZE (default 256M) with 4 I/O queue pairs backed by
\$IMAGES/nvme.img. Without a command the guest drops to a shell. Exits with the guest
command's status.
USAGE
}
TOP=$(cd "$(dirname "$0")/.." && pwd)
OUT=${RBLK_OUT:-$TOP/out}
BUILTIN=0
SMP=2
TIMEOUT=1200
APPEND=
LOG=
while [[ $# -gt 0 ]]; do
    case "$1" in
        --builtin) BUILTIN=1 ;;
        --smp) SMP=$2; shift ;;
        --timeout) TIMEOUT=$2; shift ;;
        --append) APPEND=$2; shift ;;
        --log) LOG=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) break ;;
    esac
    shift
done
CMD=${*:-}
[[ -f "$OUT/env" ]] || { echo "guest: run scripts/prepare.sh first" >&2; exit 1; }
# shellcheck source=/dev/null
source "$OUT/env"
kbuild=$KBUILD
[[ $BUILTIN == 1 ]] && kbuild=$KBUILD_BUILTIN
[[ -n "$kbuild" ]] || { echo "guest: no built-in kernel; run scripts/prepare.sh" >&2; exit 1; }

initrd=$(mktemp "$OUT/initrd.XXXXXX.cpio.gz")
trap 'rm -f "$initrd"' EXIT
extra=()
[[ $BUILTIN == 1 ]] || extra=(--extra-modules "$TOP")
"$TOP/scripts/make-initramfs.sh" --build "$kbuild" --out "$initrd" "${extra[@]}" \
    --guest-dir "$GUEST_DIR" --cmd "$CMD" >&2
args=(--kernel "$kbuild/arch/x86/boot/bzImage" --initrd "$initrd" --smp "$SMP" --mem 2G
      --pmem-img "$IMAGES/pmem.img" --pmem-size "${RBLK_PMEM_SIZE:-256M}"
      --nvme-img "$IMAGES/nvme.img" --nvme-size "${RBLK_NVME_SIZE:-256M}" --nvme-queues 4
      --timeout "$TIMEOUT")
# Keep the console for test output; the tests read kernel messages with dmesg.
args+=(--append "loglevel=4 ${APPEND}")
[[ -n "$LOG" ]] && args+=(--log "$LOG")
exec "$TOP/scripts/qemu-run.sh" "${args[@]}"

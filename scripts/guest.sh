#!/usr/bin/env bash
# Boot the project's kernel in QEMU with the standard NVDIMM + NVMe and run one guest command.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--builtin | --debug] [--smp N] [--icount] [--nvme-null LATENCY_NS | --nvme-null-co] [--nvme-dbcs on|off] [--labelled] [--nvme-subsys] [--virtio-pmem] [--pcie-port] [--timeout S]
          [--init-deadline S] [--append ARGS] [--log FILE] [--trace EVENTS] -- 'GUEST COMMAND'

Uses the kernels and guest tools recorded by scripts/prepare.sh (out/env). The guest gets
an NVDIMM of \$RBLK_PMEM_SIZE (default 256M) backed by \$IMAGES/pmem.img, kept between boots,
and an NVMe of \$RBLK_NVME_SIZE (default 256M) with \$RBLK_NVME_QUEUES (default 4) I/O
queue pairs backed by \$IMAGES/nvme.img. Without a command the guest drops to a shell. Exits
with the guest command's status.

  --builtin   boot the kernel with both drivers built in (KBUILD_BUILTIN)
  --debug     boot the debug kernel (KBUILD_DEBUG: lockdep, KASAN, DMA-API debugging) on q35
              behind QEMU's emulated Intel IOMMU
  --icount    guest time counts instructions (QEMU -icount shift=0,sleep=off): fio's IOPS
              become I/Os per 10^9 guest instructions; deterministic. The CPU model is
              \$RBLK_CPU (default max; the benchmarks use max,-erms,-fsrm)
  --labelled  add a second NVDIMM of 128M with a label area, backed by \$IMAGES/pmem-labelled.img
              (kept between boots like pmem.img): its region holds namespaces made with
              ndctl create-namespace, stored in the labels
  --nvme-subsys
              the NVMe controller is in an NVMe subsystem (Namespace Attachment works) with a
              second namespace, nsid 2, of 16M backed by \$IMAGES/nvme-ns2.img, detached at boot
  --virtio-pmem
              add a virtio-pmem-pci device of 128M backed by \$IMAGES/vpmem.img: an asynchronous
              nvdimm region (its flush is a request to the host)
  --pcie-port the NVMe controller sits behind a PCIe root port (QEMU id rp0, with Advanced Error
              Reporting) on q35; the guest injects errors by printing "RBLK-HMP
              pcie_aer_inject_error rp0 ERROR" on the console (scripts/qemu-run.sh --pcie-port)
  --nvme-null LATENCY_NS
              the NVMe namespace is QEMU's null-aio (no image): each command takes
              LATENCY_NS of host time, many in parallel, reads return zeros
  --nvme-null-co
              the NVMe namespace is QEMU's null-co (no image): commands complete at once,
              reads return zeros; with --icount the vCPUs stay busy (CPU-cost benchmarks)
  --nvme-dbcs on|off
              offer the controller's shadow doorbells (Doorbell Buffer Config) or not
              (QEMU's default: on; the C driver uses them, rust_nvme_mq does not)
  --trace EVENTS
              QEMU trace events to record (comma-separated, see qemu-system-x86_64 -trace
              help) into FILE.trace next to the --log FILE (needs --log); read it after this
              script returns, e.g. the NVMe controller's view of a shutdown:
              pci_nvme_del_sq,pci_nvme_del_cq,pci_nvme_mmio_shutdown_set
  --timeout S wall-clock limit for the whole boot (default 1200)
  --init-deadline S
              wall-clock limit for the kernel to start the initramfs's /init (default 300;
              a debug kernel gets there in ~20 s under TCG). A guest stuck in early boot is
              ended then and this script exits with 120
USAGE
}
TOP=$(cd "$(dirname "$0")/.." && pwd)
OUT=${RBLK_OUT:-$TOP/out}
BUILTIN=0
DEBUG=0
ICOUNT=0
LABELLED=0
NVME_SUBSYS=0
VPMEM=0
PCIE_PORT=0
NVME_NULL=
NVME_NULL_CO=0
NVME_DBCS=
SMP=2
TIMEOUT=1200
INIT_DEADLINE=300
APPEND=
LOG=
TRACE=
while [[ $# -gt 0 ]]; do
    case "$1" in
        --builtin) BUILTIN=1 ;;
        --debug) DEBUG=1 ;;
        --icount) ICOUNT=1 ;;
        --labelled) LABELLED=1 ;;
        --nvme-subsys) NVME_SUBSYS=1 ;;
        --virtio-pmem) VPMEM=1 ;;
        --pcie-port) PCIE_PORT=1 ;;
        --nvme-null-co) NVME_NULL_CO=1 ;;
        --smp|--timeout|--init-deadline|--append|--log|--nvme-null|--nvme-dbcs|--trace)
            need_arg "$@"
            case "$1" in
                --smp) SMP=$2 ;;
                --timeout) TIMEOUT=$2 ;;
                --init-deadline) INIT_DEADLINE=$2 ;;
                --append) APPEND=$2 ;;
                --log) LOG=$2 ;;
                --nvme-null) NVME_NULL=$2 ;;
                --nvme-dbcs) NVME_DBCS=$2 ;;
                --trace) TRACE=$2 ;;
            esac
            shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -*) usage_error "unknown option '$1'" ;;
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
[[ $DEBUG == 1 ]] && kbuild=${KBUILD_DEBUG:-}
[[ -n "$kbuild" ]] || { echo "guest: the requested kernel variant is not built; run scripts/prepare.sh (--debug for the debug kernel)" >&2; exit 1; }

initrd=$(mktemp "$OUT/initrd.XXXXXX.cpio.gz")
trap 'rm -f "$initrd"' EXIT
extra=()
[[ $BUILTIN == 1 ]] || extra=(--extra-modules "$OUT/modules-$(basename "$kbuild")")
"$TOP/scripts/make-initramfs.sh" --build "$kbuild" --out "$initrd" "${extra[@]}" \
    --guest-dir "$GUEST_DIR" --cmd "$CMD" >&2
args=(--kernel "$kbuild/arch/x86/boot/bzImage" --initrd "$initrd" --smp "$SMP" --mem 2G
      --pmem-img "$IMAGES/pmem.img" --pmem-size "${RBLK_PMEM_SIZE:-256M}"
      --nvme-img "$IMAGES/nvme.img" --nvme-size "${RBLK_NVME_SIZE:-256M}" --nvme-queues "${RBLK_NVME_QUEUES:-4}"
      --timeout "$TIMEOUT" --init-deadline "$INIT_DEADLINE")
[[ $DEBUG == 1 ]] && args+=(--iommu)
[[ $ICOUNT == 1 ]] && args+=(--icount)
[[ $LABELLED == 1 ]] && args+=(--lpmem-img "$IMAGES/pmem-labelled.img" --lpmem-size 128M)
[[ -n "$NVME_NULL" ]] && args+=(--nvme-null "$NVME_NULL")
[[ $NVME_NULL_CO == 1 ]] && args+=(--nvme-null-co)
[[ -n "$NVME_DBCS" ]] && args+=(--nvme-dbcs "$NVME_DBCS")
[[ $NVME_SUBSYS == 1 ]] && args+=(--nvme-ns2-img "$IMAGES/nvme-ns2.img")
[[ $VPMEM == 1 ]] && args+=(--vpmem-img "$IMAGES/vpmem.img")
[[ $PCIE_PORT == 1 ]] && args+=(--pcie-port)
# Keep the console for test output; the tests read kernel messages with dmesg.
args+=(--append "loglevel=4 ${APPEND}")
[[ -n "$LOG" ]] && args+=(--log "$LOG")
[[ -n "$TRACE" ]] && args+=(--trace "$TRACE")
# Not exec: the EXIT trap deletes the initramfs (38 MB each boot) when QEMU is done.
rc=0
"$TOP/scripts/qemu-run.sh" "${args[@]}" || rc=$?
exit "$rc"

#!/usr/bin/env bash
# Boot the project's kernel + initramfs in QEMU with an NVDIMM and/or an NVMe controller, stream the
# serial console, and return the guest command's exit status (from its "RBLK-EXIT <n>" line).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

DEFAULT_SMP=2
DEFAULT_MEM=2G
DEFAULT_TIMEOUT=600                   # seconds
DEFAULT_PMEM_SIZE=1G
DEFAULT_NVME_SIZE=1G
MEM_SLOTS=2                           # hotplug slots for -m (each NVDIMM takes one)
VPMEM_SIZE=128M                       # size of the virtio-pmem device (--vpmem-img)
LABEL_SIZE=128K                       # label area of the labelled NVDIMM (--lpmem-img)
NVME_SERIAL=rblk0001
NVME_ID=nv0                           # --pcie-port: the NVMe controller's QEMU id (for pcie_aer_inject_error)
ROOT_PORT_ID=rp0                      # --pcie-port: the PCIe root port's QEMU id
DEFAULT_STALL_DUMP=300                # seconds of console silence before FILE.stall is written
KILL_GRACE=10                         # seconds between SIGTERM and SIGKILL to QEMU on timeout
TAIL_LINES=40                         # console lines repeated after a timeout / missing status
TAIL_POLL=0.2                         # seconds: how often the console follower checks QEMU is alive
EXIT_TIMEOUT=124                      # our status when the guest timed out without a status line
EXIT_NO_STATUS=125                    # our status when QEMU ended without a status line
EXIT_NO_INIT=120                      # our status when the guest did not reach /init in time
EXIT_TIMER_STALL=121                  # our status when a vCPU stopped taking interrupts
INIT_MARKER="rblk-init: started"      # the first console line of scripts/make-initramfs.sh's /init
KERNEL_ARGS_BASE="console=ttyS0 panic=-1 loglevel=7"
IMG_DIR=${RBLK_IMAGES:-/var/tmp/rust-blk-images}
QEMU_BIN=${RBLK_QEMU:-qemu-system-x86_64}

usage() {
    cat <<USAGE
Usage: $0 --kernel BZIMAGE --initrd FILE [--smp N] [--mem SIZE]
          [--pmem-img PATH] [--pmem-size SIZE] [--lpmem-img PATH --lpmem-size SIZE]
          [--nvme-img PATH] [--nvme-size SIZE] [--nvme-queues N]
          [--nvme-null LATENCY_NS | --nvme-null-co] [--nvme-dbcs on|off] [--nvme-ns2-img PATH]
          [--vpmem-img PATH] [--icount] [--iommu] [--pcie-port]
          [--append 'EXTRA KERNEL ARGS'] [--timeout SECONDS] [--init-deadline SECONDS]
          [--log FILE] [--trace EVENTS] [--help]

Boots QEMU (machine pc,nvdimm=on; TCG with -cpu max, or KVM with -cpu host if RBLK_ACCEL=kvm),
streams the serial console to stdout and to the log file, and exits with the status from the
guest's "RBLK-EXIT <n>" line (see scripts/make-initramfs.sh --cmd). Without that line: $EXIT_TIMEOUT
if the timeout hit (QEMU is killed, the last $TAIL_LINES console lines are repeated), $EXIT_NO_INIT if
--init-deadline passed before the guest's /init started (QEMU is killed), $EXIT_TIMER_STALL if a vCPU
stopped taking interrupts (see RBLK_STALL_DUMP below; QEMU is killed), else
$EXIT_NO_STATUS (guest panicked, QEMU failed to start, ...).

  --smp N             vCPUs (default $DEFAULT_SMP)
  --mem SIZE          guest RAM (default $DEFAULT_MEM); SIZEs take K/M/G/T suffixes (powers of
                      1024), a bare number means MiB
  --pmem-img PATH     NVDIMM backing file (default $IMG_DIR/pmem0.img when only --pmem-size given)
  --pmem-size SIZE    NVDIMM size (default $DEFAULT_PMEM_SIZE when only --pmem-img given)
  --lpmem-img PATH    a second NVDIMM with a $LABEL_SIZE label area (label-size=), so that its region
                      holds namespaces described by labels (ndctl create-namespace); the label
                      area is the last $LABEL_SIZE of the file. Needs --lpmem-size
  --lpmem-size SIZE   size of the labelled NVDIMM's file, label area included
  --nvme-img PATH     NVMe namespace raw image (default $IMG_DIR/nvme0.img when only
                      --nvme-size/--nvme-queues given)
  --nvme-size SIZE    NVMe image size (default $DEFAULT_NVME_SIZE)
  --nvme-queues N     controller's max_ioqpairs (default: --smp); the guest gets min(vCPUs, N)
  --nvme-null NS      back the NVMe namespace with QEMU's null-aio driver instead of an image:
                      every command takes NS nanoseconds of host time and many run in
                      parallel; reads return zeros, writes are dropped (--nvme-size sets the
                      size, --nvme-img is ignored). For queue-depth benchmarks, in wall time.
  --nvme-null-co      back the NVMe namespace with QEMU's null-co driver: every command
                      completes at once in QEMU's I/O path, reads return zeros, writes are
                      dropped. Unlike --nvme-null it mixes with --icount: the guest's CPU stays
                      busy, so guest instructions per I/O are the driver's CPU cost
  --nvme-dbcs on|off  the controller's Doorbell Buffer Config (shadow doorbells, OACS bit 8);
                      QEMU's default is on. The C driver uses it when offered, rust_nvme_mq
                      does not: the CPU-cost benchmark turns it off for both
  --nvme-ns2-img PATH the NVMe controller joins an NVMe subsystem (nvme-subsys, so that it
                      supports Namespace Attachment) and gets a second namespace, nsid 2,
                      backed by PATH (16M, created if missing), detached at boot; needs --nvme-img
  --vpmem-img PATH    a virtio-pmem-pci device of $VPMEM_SIZE backed by PATH (created if missing, kept):
                      an asynchronous nvdimm region, whose flush is a request to the host.
                      Needs --pmem-img or --pmem-size (the memory hotplug setup)
  --icount            count guest time in instructions: -icount shift=0,sleep=off (1 guest ns
                      per instruction, all vCPUs round robin on one host thread; time jumps
                      over idle periods). Deterministic CPU cost; not with --nvme-null
  --iommu             machine q35 with QEMU's emulated Intel IOMMU (intel_iommu=on added to
                      the command line): every device DMA goes through IOMMU mappings
  --pcie-port         machine q35, the NVMe controller (id $NVME_ID) behind a PCIe root port (id
                      $ROOT_PORT_ID, which has Advanced Error Reporting; QEMU's NVMe has none: an
                      error injected there is only noted in its Device Status), and QEMU's human
                      monitor open to the guest's error injections: a console line
                      "RBLK-HMP pcie_aer_inject_error ARGS" is sent to the monitor as
                      "pcie_aer_inject_error ARGS" (no other command is), its answer logged
                      on stderr
  --append ARGS       extra kernel command line, after "$KERNEL_ARGS_BASE"
  --timeout SECONDS   wall-clock limit for the whole boot (default $DEFAULT_TIMEOUT)
  --init-deadline S   wall-clock limit for the kernel to start /init, seen as the console line
                      "$INIT_MARKER" of this project's initramfs (default: none). A kernel
                      that stops early in boot is then ended within S seconds, not at --timeout
  --log FILE          console log (default: a temporary file, deleted at exit); the guest's
                      second serial port (ttyS1) is written to FILE.results
  --trace EVENTS      enable QEMU's trace events EVENTS (comma-separated names or patterns,
                      see '$QEMU_BIN -trace help'; e.g. pci_nvme_del_sq,pci_nvme_mmio_shutdown_set)
                      and write them to FILE.trace next to the --log FILE (needs --log), one
                      line per event, in the order the device saw them; complete once this
                      script returns (QEMU has exited)

Images are created (sparse, truncate) when missing and KEPT across boots, so data persistence can
be tested; an existing image smaller than the requested size is grown (data kept), a larger one is
used as is. Delete the file to start from zeros. The NVDIMM image is flock'ed while QEMU runs, so
two runs cannot share one by accident. Environment: RBLK_IMAGES (image dir, default
/var/tmp/rust-blk-images), RBLK_ACCEL=kvm, RBLK_CPU (TCG CPU model, default max),
RBLK_QEMU (QEMU binary), RBLK_QEMU_PLUGIN (a TCG plugin and its arguments, given to -plugin;
used by the instruction-count profile, tools/insn-count), RBLK_HMP_SOCK (where QEMU's human
monitor listens; default a temporary path), RBLK_STALL_DUMP (seconds, default $DEFAULT_STALL_DUMP,
0: never): once the console of a boot with --log FILE has been silent that long, or shows a
sign of a hang (a hung-task or RCU stall report, a test suite's hang_watch; up to 3 times a
boot), QEMU's state goes to FILE.stall (the monitor's info status, cpus, registers and lapic of
each vCPU twice 5 s apart, and every QEMU thread's stack from gdb, if installed): whether a hung
guest waits in its own code, with its vCPUs halted, or QEMU is stuck under it. If the dump
shows a vCPU halted with interrupts on that waits for an interrupt its APIC does not give it,
both times (its timer run out and never raised, or an end of interrupt lost; if RCU's stall
report named a CPU's timer, that CPU: scripts/timer-stall.sh), QEMU is ended then
($EXIT_TIMER_STALL): the guest waits on that CPU (seen under TCG during PCI function resets).
With a terminal on stdin it is handed to the guest console (Ctrl-A X quits QEMU).
USAGE
}

log() { echo "qemu-run: $*" >&2; }
to_bytes() {  # SIZE with K/M/G/T (binary) suffix -> bytes; a bare number means MiB, as in QEMU -m
    local v=${1%iB}; v=${v%B}
    [[ "$v" =~ ^[0-9]+[KkMmGgTt]?$ ]] || die "bad size '$1'"
    [[ "$v" =~ [0-9]$ ]] && v="${v}M"
    numfmt --from=iec "${v^^}"
}

KERNEL="" INITRD="" SMP=$DEFAULT_SMP MEM=$DEFAULT_MEM TIMEOUT=$DEFAULT_TIMEOUT LOG="" INIT_DEADLINE=""
PMEM_IMG="" PMEM_SIZE="" LPMEM_IMG="" LPMEM_SIZE="" NVME_IMG="" NVME_SIZE="" NVME_QUEUES="" APPEND="" IOMMU=0
NVME_NULL="" NVME_NULL_CO=0 NVME_DBCS="" ICOUNT=0 NVME_NS2_IMG= TRACE="" VPMEM_IMG="" PCIE_PORT=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --kernel) need_arg "$@"; KERNEL=$2; shift 2 ;;
        --initrd) need_arg "$@"; INITRD=$2; shift 2 ;;
        --smp) need_arg "$@"; SMP=$2; shift 2 ;;
        --mem) need_arg "$@"; MEM=$2; shift 2 ;;
        --pmem-img) need_arg "$@"; PMEM_IMG=$2; shift 2 ;;
        --pmem-size) need_arg "$@"; PMEM_SIZE=$2; shift 2 ;;
        --lpmem-img) need_arg "$@"; LPMEM_IMG=$2; shift 2 ;;
        --lpmem-size) need_arg "$@"; LPMEM_SIZE=$2; shift 2 ;;
        --nvme-img) need_arg "$@"; NVME_IMG=$2; shift 2 ;;
        --nvme-size) need_arg "$@"; NVME_SIZE=$2; shift 2 ;;
        --nvme-queues) need_arg "$@"; NVME_QUEUES=$2; shift 2 ;;
        --iommu) IOMMU=1; shift ;;
        --pcie-port) PCIE_PORT=1; shift ;;
        --nvme-null) need_arg "$@"; NVME_NULL=$2; shift 2 ;;
        --nvme-null-co) NVME_NULL_CO=1; shift ;;
        --nvme-dbcs) need_arg "$@"; NVME_DBCS=$2; shift 2 ;;
        --nvme-ns2-img) need_arg "$@"; NVME_NS2_IMG=$2; shift 2 ;;
        --vpmem-img) need_arg "$@"; VPMEM_IMG=$2; shift 2 ;;
        --icount) ICOUNT=1; shift ;;
        --append) [[ $# -ge 2 ]] || usage_error "--append needs an argument"; APPEND=$2; shift 2 ;;
        --timeout) need_arg "$@"; TIMEOUT=$2; shift 2 ;;
        --init-deadline) need_arg "$@"; INIT_DEADLINE=$2; shift 2 ;;
        --log) need_arg "$@"; LOG=$2; shift 2 ;;
        --trace) need_arg "$@"; TRACE=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) unknown_arg "$1" ;;
    esac
done
[[ -n "$KERNEL" && -n "$INITRD" ]] || usage_error "--kernel and --initrd are required"
[[ -f "$KERNEL" ]] || die "kernel $KERNEL not found"
[[ -f "$INITRD" ]] || die "initrd $INITRD not found"
[[ "$SMP" =~ ^[1-9][0-9]*$ ]] || die "--smp must be a positive integer"
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer (seconds)"
[[ -z "$INIT_DEADLINE" || "$INIT_DEADLINE" =~ ^[1-9][0-9]*$ ]] || die "--init-deadline must be a positive integer (seconds)"
[[ -z "$NVME_QUEUES" || "$NVME_QUEUES" =~ ^[1-9][0-9]*$ ]] || die "--nvme-queues must be a positive integer"
[[ -z "$NVME_NULL" || "$NVME_NULL" =~ ^[0-9]+$ ]] || die "--nvme-null takes a latency in nanoseconds (an integer), not '$NVME_NULL'"
# null-aio's latency runs on QEMU's real-time clock while icount's guest time follows instructions:
# mixed, the device's pace would depend on the host's speed again.
[[ -n "$NVME_NULL" && $ICOUNT == 1 ]] && die "--nvme-null and --icount do not mix (the device latency is host time, icount's clock is guest instructions)"
[[ -z "$NVME_NS2_IMG" || -z "$NVME_NULL" ]] || die "--nvme-ns2-img and --nvme-null do not mix"
[[ $NVME_NULL_CO == 0 || -z "$NVME_NULL" ]] || die "--nvme-null and --nvme-null-co are two backends: choose one"
[[ $NVME_NULL_CO == 0 || -z "$NVME_NS2_IMG" ]] || die "--nvme-ns2-img and --nvme-null-co do not mix"
[[ -z "$NVME_DBCS" || "$NVME_DBCS" == on || "$NVME_DBCS" == off ]] || die "--nvme-dbcs takes on or off, not '$NVME_DBCS'"
[[ $PCIE_PORT == 0 || -z "$NVME_NS2_IMG" ]] || die "--pcie-port and --nvme-ns2-img do not mix (the port takes the controller alone)"
[[ $PCIE_PORT == 0 ]] || command -v python3 >/dev/null || die "--pcie-port needs python3 on the host (it talks to QEMU's monitor socket)"
[[ -z "$TRACE" || -n "$LOG" ]] || die "--trace needs --log (the trace is written next to the log)"
[[ -z "$TRACE" || "$TRACE" =~ ^[A-Za-z0-9_*,]+$ ]] || die "--trace takes comma-separated event names or patterns, not '$TRACE'"
command -v "$QEMU_BIN" >/dev/null || die "$QEMU_BIN not found (scripts/setup-host.sh installs it)"
# The tests and the bench baselines are for one QEMU series (scripts/setup-host.sh pins it): any
# other is a loud stop, not a quiet change of results. RBLK_QEMU (your own binary) skips this.
if [[ -z "${RBLK_QEMU:-}" ]]; then
    want=$(sed -n 's/^QEMU_SERIES=//p' "$(dirname "$0")/setup-host.sh")
    have=$("$QEMU_BIN" --version | awk 'NR == 1 {print $4}')
    [[ "$have" == "$want".* ]] || die "$QEMU_BIN is QEMU $have, the project pins $want.x (run scripts/setup-host.sh)"
fi
MIB=$((1024 * 1024))
mem_mib=$(($(to_bytes "$MEM") / MIB))
((mem_mib > 0)) || die "--mem $MEM is less than 1 MiB"

# prepare_image PATH SIZE_BYTES: create sparse or grow; never shrink or clear.
prepare_image() {
    local path=$1 want=$2 have
    mkdir -p "$(dirname "$path")"
    if [[ ! -e "$path" ]]; then
        truncate -s "$want" "$path"; log "created $path ($want bytes)"
    else
        have=$(stat -c %s "$path")
        if ((have < want)); then truncate -s "$want" "$path"; log "grew $path from $have to $want bytes"
        elif ((have > want)); then log "note: $path is $have bytes (> requested $want), used as is"; fi
    fi
}

ACCEL=(-accel tcg -cpu "${RBLK_CPU:-max}")
[[ "${RBLK_ACCEL:-tcg}" == kvm ]] && ACCEL=(-accel kvm -cpu host)
MACHINE=pc
((IOMMU == 0 && PCIE_PORT == 0)) || MACHINE=q35
QEMU=("$QEMU_BIN" "${ACCEL[@]}" -machine "$MACHINE,nvdimm=on" -smp "$SMP"
      -nodefaults -display none -serial mon:stdio -net none -no-reboot
      -kernel "$KERNEL" -initrd "$INITRD")
((ICOUNT == 0)) || QEMU+=(-icount shift=0,sleep=off)
[[ -z "${RBLK_QEMU_PLUGIN:-}" ]] || QEMU+=(-plugin "$RBLK_QEMU_PLUGIN")
if ((IOMMU)); then
    # Before the other PCI devices, so that all of them sit behind it. No interrupt remapping
    # (that needs a split irqchip, which TCG does not have).
    QEMU+=(-device intel-iommu,intremap=off)
    APPEND="intel_iommu=on iommu.strict=1${APPEND:+ $APPEND}"
fi

# add_mem_image PATH BYTES: one memory-backed image (NVDIMM or virtio-pmem) of the guest: made
# or grown, flock'ed while QEMU runs (QEMU maps the file shared: a second guest on the same file
# would corrupt it), and counted in maxmem. The first one uses the slot MEM_SLOTS starts with,
# every further one adds a slot.
IMAGE_LOCKS=()
add_mem_image() {
    local path=$1 bytes=$2 fd
    prepare_image "$path" "$bytes"
    exec {fd}<"$path"
    flock -n "$fd" || die "$path is in use by another qemu-run"
    ((${#IMAGE_LOCKS[@]} == 0)) || MEM_SLOTS=$((MEM_SLOTS + 1))
    IMAGE_LOCKS+=("$fd")
    maxmem_mib=$((maxmem_mib + bytes / MIB))
}

if [[ -n "$PMEM_IMG" || -n "$PMEM_SIZE" ]]; then
    PMEM_IMG=${PMEM_IMG:-$IMG_DIR/pmem0.img}
    if [[ -z "$PMEM_SIZE" && -e "$PMEM_IMG" ]]; then pmem_bytes=$(stat -c %s "$PMEM_IMG")
    else pmem_bytes=$(to_bytes "${PMEM_SIZE:-$DEFAULT_PMEM_SIZE}"); fi
    ((pmem_bytes % MIB == 0)) || die "pmem size must be a multiple of 1 MiB"
    maxmem_mib=$mem_mib
    add_mem_image "$PMEM_IMG" "$pmem_bytes"
    # shellcheck disable=SC2054  # commas are QEMU option syntax
    nvdimms=(-object "memory-backend-file,id=mem1,share=on,mem-path=$PMEM_IMG,size=$pmem_bytes"
             -device nvdimm,id=nv1,memdev=mem1)
    if [[ -n "$LPMEM_IMG" ]]; then
        [[ -n "$LPMEM_SIZE" ]] || die "--lpmem-img needs --lpmem-size"
        lpmem_bytes=$(to_bytes "$LPMEM_SIZE")
        ((lpmem_bytes % MIB == 0)) || die "lpmem size must be a multiple of 1 MiB"
        add_mem_image "$LPMEM_IMG" "$lpmem_bytes"
        # shellcheck disable=SC2054  # commas are QEMU option syntax
        nvdimms+=(-object "memory-backend-file,id=mem2,share=on,mem-path=$LPMEM_IMG,size=$lpmem_bytes"
                  -device "nvdimm,id=nv2,memdev=mem2,label-size=$LABEL_SIZE")
    fi
    if [[ -n "$VPMEM_IMG" ]]; then
        vpmem_bytes=$(to_bytes "$VPMEM_SIZE")
        add_mem_image "$VPMEM_IMG" "$vpmem_bytes"
        # shellcheck disable=SC2054  # commas are QEMU option syntax
        nvdimms+=(-object "memory-backend-file,id=vmem1,share=on,mem-path=$VPMEM_IMG,size=$vpmem_bytes"
                  -device virtio-pmem-pci,memdev=vmem1,id=vpmem1)
    fi
    QEMU+=(-m "${mem_mib}M,slots=$MEM_SLOTS,maxmem=${maxmem_mib}M" "${nvdimms[@]}")
else
    [[ -z "$VPMEM_IMG" ]] || die "--vpmem-img needs --pmem-img or --pmem-size too"
    [[ -z "$LPMEM_IMG" ]] || die "--lpmem-img needs --pmem-img or --pmem-size (the unlabelled NVDIMM) too"
    QEMU+=(-m "${mem_mib}M")
fi

NVME_PROPS="serial=$NVME_SERIAL,max_ioqpairs=${NVME_QUEUES:-$SMP}${NVME_DBCS:+,dbcs=$NVME_DBCS}"
# QEMU's human monitor: for the error injections of --pcie-port, the stall dump, and a person
# looking into a stuck guest (RBLK_HMP_SOCK).
HMP_SOCK=${RBLK_HMP_SOCK:-$(mktemp -u "${TMPDIR:-/tmp}/qemu-run.hmp.XXXXXX")}
QEMU+=(-monitor "unix:$HMP_SOCK,server=on,wait=off")
if ((PCIE_PORT)); then
    QEMU+=(-device "pcie-root-port,id=$ROOT_PORT_ID,chassis=1,slot=1,x-speed=5")
    NVME_PROPS="id=$NVME_ID,bus=$ROOT_PORT_ID,$NVME_PROPS"
fi
if [[ -n "$NVME_NULL" ]]; then
    QEMU+=(-blockdev "driver=null-aio,node-name=nvnull,size=$(to_bytes "${NVME_SIZE:-$DEFAULT_NVME_SIZE}"),latency-ns=$NVME_NULL,read-zeroes=on"
           -device "nvme,drive=nvnull,$NVME_PROPS")
elif [[ $NVME_NULL_CO == 1 ]]; then
    QEMU+=(-blockdev "driver=null-co,node-name=nvnull,size=$(to_bytes "${NVME_SIZE:-$DEFAULT_NVME_SIZE}"),read-zeroes=on"
           -device "nvme,drive=nvnull,$NVME_PROPS")
elif [[ -n "$NVME_IMG" || -n "$NVME_SIZE" || -n "$NVME_QUEUES" ]]; then
    NVME_IMG=${NVME_IMG:-$IMG_DIR/nvme0.img}
    prepare_image "$NVME_IMG" "$(to_bytes "${NVME_SIZE:-$DEFAULT_NVME_SIZE}")"
    # discard=unmap: a Dataset Management deallocate punches the range out of the image, so the
    # namespace keeps the promise of its DLFEAT (deallocated blocks read as zeroes); without it
    # QEMU ignores the deallocate and the blocks keep their data.
    QEMU+=(-drive "file=$NVME_IMG,if=none,id=nvm,format=raw,discard=unmap")
    if [[ -n "$NVME_NS2_IMG" ]]; then
        prepare_image "$NVME_NS2_IMG" "$((16 * MIB))"
        # Fixed identifiers (tests compare what the drivers show in sysfs with these).
        NS1_IDS="uuid=6a1f3c52-0b7e-4d59-9c1a-2e4f6a8b0c11,nguid=0123456789abcdef0011223344556601,eui64=0x0011223344556601"
        NS2_IDS="uuid=6a1f3c52-0b7e-4d59-9c1a-2e4f6a8b0c22,eui64=0x0011223344556602"
        QEMU+=(-drive "file=$NVME_NS2_IMG,if=none,id=nvm2,format=raw,discard=unmap"
               -device "nvme-subsys,id=nvsubsys,nqn=rblk-subsys"
               -device "nvme,id=nvctrl,subsys=nvsubsys,$NVME_PROPS"
               -device "nvme-ns,drive=nvm,bus=nvctrl,nsid=1,$NS1_IDS"
               -device "nvme-ns,drive=nvm2,bus=nvctrl,nsid=2,detached=on,$NS2_IDS")
    else
        QEMU+=(-device "nvme,drive=nvm,$NVME_PROPS")
    fi
fi
QEMU+=(-append "$KERNEL_ARGS_BASE${APPEND:+ $APPEND}")
if [[ -n "$TRACE" ]]; then
    # The log backend of Debian's QEMU writes enabled events to the -trace file= (flushed at
    # exit); a fresh file per boot.
    rm -f "$LOG.trace"
    IFS=, read -ra trace_events <<<"$TRACE"
    for ev in "${trace_events[@]}"; do QEMU+=(-trace "enable=$ev"); done
    QEMU+=(-trace "file=$LOG.trace")
fi

if [[ -z "$LOG" ]]; then
    LOG=$(mktemp "${TMPDIR:-/tmp}/qemu-run.XXXXXX.log"); KEEP_LOG=0
else
    mkdir -p "$(dirname "$LOG")"; KEEP_LOG=1
fi
: >"$LOG"
# The guest's second serial port (ttyS1) goes to LOG.results: the test suites write their
# PASS/FAIL reports there as well (tests/guest/lib.sh), where no kernel output can split them.
rm -f "$LOG.results"
QEMU+=(-serial "file:$LOG.results")

# QEMU runs under `timeout` (which enforces the deadline even if this script is killed), writes the
# console to the log file, and `tail` follows the file to stdout until QEMU is gone.
# --foreground keeps QEMU in our process group, so it can read the terminal when there is one.
TPID="" TAILPID="" WATCHPID="" RELAYPID="" STALLPID="" TIMER_STALL_FLAG="" STTY_SAVED="" NO_INIT_FLAG=""
# Hand the terminal to the guest only when it is ours (foreground); otherwise QEMU would stop on
# SIGTTIN. Any other stdin is not forwarded.
GUEST_STDIN=/dev/null
if [[ -t 0 ]] && [[ "$(ps -o tpgid= -p $$ | tr -d ' ')" == "$(ps -o pgid= -p $$ | tr -d ' ')" ]]; then
    GUEST_STDIN=/dev/stdin
    STTY_SAVED=$(stty -g 2>/dev/null || true)
fi
# shellcheck disable=SC2317  # invoked by trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    if [[ -n "$TPID" ]] && kill -0 "$TPID" 2>/dev/null; then
        # timeout(1) passes SIGTERM on to QEMU; SIGKILL both if QEMU does not go in time.
        local qpids=()
        mapfile -t qpids < <(pgrep -P "$TPID" || true)
        kill -TERM "$TPID" 2>/dev/null || true
        for _ in $(seq "$KILL_GRACE"); do kill -0 "$TPID" 2>/dev/null || break; sleep 1; done
        kill -KILL "$TPID" "${qpids[@]}" 2>/dev/null || true
    fi
    if [[ -n "$TAILPID" ]]; then kill "$TAILPID" 2>/dev/null || true; fi
    if [[ -n "$WATCHPID" ]]; then kill "$WATCHPID" 2>/dev/null || true; fi
    if [[ -n "$RELAYPID" ]]; then kill "$RELAYPID" 2>/dev/null || true; fi
    if [[ -n "$STALLPID" ]]; then kill "$STALLPID" 2>/dev/null || true; fi
    rm -f "$HMP_SOCK"
    if [[ -n "$NO_INIT_FLAG" ]]; then rm -f "$NO_INIT_FLAG"; fi
    if [[ -n "$TIMER_STALL_FLAG" ]]; then rm -f "$TIMER_STALL_FLAG"; fi
    if [[ -n "$STTY_SAVED" ]]; then stty "$STTY_SAVED" 2>/dev/null || true; fi
    [[ "$KEEP_LOG" == 1 ]] || rm -f "$LOG" "$LOG.results"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

start=$EPOCHREALTIME
timeout --foreground --kill-after="$KILL_GRACE" "$TIMEOUT" "${QEMU[@]}" <"$GUEST_STDIN" >>"$LOG" 2>&1 &
TPID=$!
tail -n +1 -s "$TAIL_POLL" -F --pid="$TPID" "$LOG" 2>/dev/null &
TAILPID=$!
# watch_init: end QEMU if the guest's /init has not started INIT_DEADLINE seconds after launch
# (a kernel stuck in early boot would otherwise hold the whole --timeout).
watch_init() {
    local waited=0
    # Not this subshell's to hold: the image locks must go with QEMU, not with a sleep here.
    local fd
    for fd in "${IMAGE_LOCKS[@]}"; do exec {fd}<&-; done
    while kill -0 "$TPID" 2>/dev/null; do
        grep -qaF "$INIT_MARKER" "$LOG" && return 0
        if ((waited >= INIT_DEADLINE)); then
            : >"$NO_INIT_FLAG"
            end_qemu
            return 0
        fi
        sleep 1
        waited=$((waited + 1))
    done
}
# hmp COMMAND: the monitor's answer to COMMAND (its lines after the echoed command, prompt lines
# left out; "(no answer)" if none); fails if the monitor cannot be reached.
hmp() {
    python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
def until_prompt():
    buf = b""
    while not buf.endswith(b"(qemu) "):
        data = s.recv(65536)
        if not data:
            break
        buf += data
    return buf.decode(errors="replace")
until_prompt()
s.sendall(sys.argv[2].encode() + b"\n")
lines = [l.rstrip() for l in until_prompt().replace("\r", "\n").split("\n")]
print("\n".join(l for l in lines[1:] if l and not l.startswith("(qemu)")) or "(no answer)")
' "$HMP_SOCK" "$1" 2>&1
}
# hmp_relay: pass the guest's error injections (console lines "RBLK-HMP pcie_aer_inject_error
# ARGS") to QEMU's monitor, one at a time, in the order the guest printed them; log each answer.
hmp_relay() {
    local fd line cmd reply
    for fd in "${IMAGE_LOCKS[@]}"; do exec {fd}<&-; done
    while IFS= read -r line; do
        line=${line%$'\r'}
        [[ $line =~ ^RBLK-HMP\ (pcie_aer_inject_error(\ [-A-Za-z0-9_.:]+)+)$ ]] || continue
        cmd=${BASH_REMATCH[1]}
        reply=$(hmp "$cmd") || reply="monitor not reached: $reply"
        log "monitor: $cmd: ${reply//$'\n'/ / }"
    done < <(tail -n +1 -s "$TAIL_POLL" -F --pid="$TPID" "$LOG" 2>/dev/null)
}
# HANG_SIGNS: what a guest prints when it is hung (the kernel's hung-task and RCU stall reports,
# the test suites' hang_watch): stall_dump looks at QEMU then, without waiting for silence (a
# hung-task report every 2 min keeps the console from falling silent).
HANG_SIGNS='blocked for more than|rcu: INFO: rcu_[a-z]+ detected stalls|rblk-watchdog: the test still runs after'
# stall_dump: once the console has been silent for STALL_DUMP seconds, or shows a new hang sign
# (at most STALL_DUMPS times in a boot), write QEMU's state to LOG.stall (see the usage). Only
# looks, unless a vCPU waits for an interrupt its APIC will not give it (timer-stall.sh): then
# QEMU is ended. Otherwise the boot goes on to its end or its deadline.
STALL_DUMPS=3
stall_dump() {
    local fd size last_size=-1 silent=0 signs seen=0 dumps=0 why qpid cpu cmd
    for fd in "${IMAGE_LOCKS[@]}"; do exec {fd}<&-; done
    while kill -0 "$TPID" 2>/dev/null && ((dumps < STALL_DUMPS)); do
        sleep 10
        size=$(stat -c %s "$LOG" 2>/dev/null) || return 0
        if [[ $size != "$last_size" ]]; then
            last_size=$size silent=0
            signs=$(grep -caE "$HANG_SIGNS" "$LOG") || true
            ((signs > seen)) || continue
            seen=$signs
            why="the console shows a hang: $(grep -aoE "$HANG_SIGNS" "$LOG" | tail -n 1)"
        else
            silent=$((silent + 10))
            # Once per silent spell.
            ((silent >= STALL_DUMP && silent - 10 < STALL_DUMP)) || continue
            why="the console was silent for $silent s"
        fi
        dumps=$((dumps + 1))
        qpid=$(pgrep -P "$TPID" | head -n 1) || return 0
        {
            echo "qemu-run: $why ($(date -u '+%F %T UTC')); QEMU pid $qpid"
            for cmd in "info status" "info cpus" "info registers -a"; do
                echo "=== $cmd"
                hmp "$cmd" || echo "(monitor not reached)"
            done
            for ((cpu = 0; cpu < SMP; cpu++)); do
                echo "=== info lapic $cpu"
                hmp "info lapic $cpu" || echo "(monitor not reached)"
            done
            # Whether the guest's timers still run: an armed APIC timer counts down, and a
            # guest whose ticks come re-arms it.
            sleep 5
            for ((cpu = 0; cpu < SMP; cpu++)); do
                echo "=== info lapic $cpu, 5 s later"
                hmp "info lapic $cpu" | grep -E '^(Timer|ISR|IRR|LVTT)' || echo "(monitor not reached)"
            done
            echo "=== QEMU's threads (gdb)"
            if command -v gdb >/dev/null; then
                timeout 120 gdb -batch -p "$qpid" -ex 'thread apply all bt' 2>&1 |
                    grep -vE '^\[(New|Thread debugging)|^Using host libthread' || true
            else
                echo "(gdb is not installed)"
            fi
        } >"$LOG.stall" 2>&1
        log "$why: QEMU's state is in $LOG.stall"
        if cpu=$("$(dirname "$0")/timer-stall.sh" "$LOG"); then
            echo "$cpu" >"$TIMER_STALL_FLAG"
            end_qemu
            return 0
        fi
    done
}
# end_qemu: SIGTERM to QEMU (through timeout(1)), SIGKILL after KILL_GRACE seconds.
end_qemu() {
    local qpids=()
    mapfile -t qpids < <(pgrep -P "$TPID" || true)
    kill -TERM "$TPID" 2>/dev/null || true
    sleep "$KILL_GRACE"
    kill -KILL "$TPID" "${qpids[@]}" 2>/dev/null || true
}
if ((PCIE_PORT)); then
    hmp_relay &
    RELAYPID=$!
fi
STALL_DUMP=${RBLK_STALL_DUMP:-$DEFAULT_STALL_DUMP}
[[ "$STALL_DUMP" =~ ^[0-9]+$ ]] || die "RBLK_STALL_DUMP must be a number of seconds (0: never)"
if ((KEEP_LOG && STALL_DUMP > 0)); then
    rm -f "$LOG.stall"
    TIMER_STALL_FLAG=$(mktemp -u "${TMPDIR:-/tmp}/qemu-run.timerstall.XXXXXX")
    stall_dump &
    STALLPID=$!
fi
if [[ -n "$INIT_DEADLINE" ]]; then
    NO_INIT_FLAG=$(mktemp "${TMPDIR:-/tmp}/qemu-run.noinit.XXXXXX")
    rm -f "$NO_INIT_FLAG"
    watch_init &
    WATCHPID=$!
fi
trc=0
wait "$TPID" || trc=$?
TPID=""
if [[ -n "$WATCHPID" ]]; then
    kill "$WATCHPID" 2>/dev/null || true
    wait "$WATCHPID" 2>/dev/null || true
    WATCHPID=""
fi
wait "$TAILPID" 2>/dev/null || true
TAILPID=""
if [[ -n "$RELAYPID" ]]; then
    kill "$RELAYPID" 2>/dev/null || true
    wait "$RELAYPID" 2>/dev/null || true
    RELAYPID=""
fi
if [[ -n "$STALLPID" ]]; then
    kill "$STALLPID" 2>/dev/null || true
    wait "$STALLPID" 2>/dev/null || true
    STALLPID=""
fi
if [[ -n "$STTY_SAVED" ]]; then stty "$STTY_SAVED" 2>/dev/null || true; fi
elapsed=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
where=""
[[ "$KEEP_LOG" == 1 ]] && where=" (log: $LOG)"

status=$(tr -d '\r' <"$LOG" | sed -n 's/^RBLK-EXIT \([0-9]\{1,3\}\)$/\1/p' | tail -n 1)
# timeout(1): 124 = deadline hit (QEMU ended on SIGTERM), 137 = QEMU needed SIGKILL.
timed_out=0
[[ $trc == 124 || $trc == 137 ]] && timed_out=1
if [[ -n "$status" ]]; then
    ((timed_out)) && log "warning: guest reported its status but QEMU had to be killed at the timeout"
    log "guest exit status $status after $elapsed s$where"
    exit "$status"
fi
if [[ -n "$NO_INIT_FLAG" && -e "$NO_INIT_FLAG" ]]; then
    echo "qemu-run: the guest's /init did not start within $INIT_DEADLINE s (no '$INIT_MARKER' line; the kernel stopped in early boot)$where" >&2
    rc=$EXIT_NO_INIT
elif [[ -n "$TIMER_STALL_FLAG" && -s "$TIMER_STALL_FLAG" ]]; then
    echo "qemu-run: vCPU $(cat "$TIMER_STALL_FLAG") stopped taking interrupts (halted with interrupts on; its APIC timer run out and never raised, or an end of interrupt lost: $LOG.stall); QEMU ended after $elapsed s$where" >&2
    rc=$EXIT_TIMER_STALL
elif ((timed_out)); then
    echo "qemu-run: TIMEOUT after $TIMEOUT s$where" >&2
    rc=$EXIT_TIMEOUT
else
    echo "qemu-run: no RBLK-EXIT line (QEMU exit status $trc after $elapsed s)$where" >&2
    rc=$EXIT_NO_STATUS
fi
echo "qemu-run: last $TAIL_LINES console lines:" >&2
tail -n "$TAIL_LINES" "$LOG" | tr -d '\r' >&2
exit "$rc"

#!/usr/bin/env bash
# Whether a silent guest waits for a timer interrupt that one vCPU no longer takes, from its
# console log and the QEMU state qemu-run.sh dumped next to it (LOG.stall).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 LOG [--help]

LOG is a boot's console log; LOG.stall is what qemu-run.sh wrote there once the console was
silent (RBLK_STALL_DUMP). Prints the CPU number and exits 0 if the kernel reported a CPU's
timer missing on the console (RCU's "Possible timer handling issue on cpu=N", the last one)
and, in both looks at its local APIC 5 s apart, that vCPU was halted with interrupts enabled
(RFL bit 9), its APIC timer had run out (current_count 0) and no interrupt was pending (IRR)
or in service (ISR): the CPU waits for an interrupt nothing will send, and work queued on it
(the RCU grace-period kthread's timer, the task the guest waits for) never runs. Exits 1,
printing nothing, otherwise; 2 if LOG or LOG.stall cannot be read.
USAGE
}
case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    "") usage_error "give the console log (LOG; its dump is LOG.stall)" ;;
esac
[[ $# == 1 ]] || unknown_arg "$2"
LOG=$1
[[ -r $LOG && -r $LOG.stall ]] || { echo "timer-stall: cannot read $LOG and $LOG.stall" >&2; exit 2; }

cpu=$(tr -d '\r' <"$LOG" | sed -n 's/.*Possible timer handling issue on cpu=\([0-9]\{1,4\}\) .*/\1/p' | tail -n 1)
[[ -n $cpu ]] || exit 1
awk -v cpu="$cpu" '
    /^=== / { section = $0; next }
    section == "=== info registers -a" && $0 == "CPU#" cpu { regs = 1; next }
    section == "=== info registers -a" && /^CPU#/ { regs = 0 }
    # RFL is hex; IF is its bit 9, the second lowest bit of its third hex digit from the right.
    regs && /^RIP=/ {
        rfl = $2; sub(/^RFL=/, "", rfl)
        digit = index("0123456789abcdef", tolower(substr(rfl, length(rfl) - 2, 1))) - 1
        halted = / HLT=1/ && int(digit / 2) % 2 == 1
    }
    section == "=== info lapic " cpu || section == "=== info lapic " cpu ", 5 s later" {
        if (/^Timer/ && $NF == "0") expired++
        if (/^(ISR|IRR)\t* \(none\)/) idle++
    }
    END { exit !(halted && expired == 2 && idle == 4) }' "$LOG.stall" || exit 1
echo "$cpu"

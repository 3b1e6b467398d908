#!/usr/bin/env bash
# Whether a silent guest waits for a timer interrupt that one vCPU no longer takes, from its
# console log and the QEMU state qemu-run.sh dumped next to it (LOG.stall).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 LOG [--help]

LOG is a boot's console log; LOG.stall is what qemu-run.sh wrote there once the guest looked
hung (RBLK_STALL_DUMP). Prints the number of a vCPU that waits for an interrupt its local APIC
will not give it, and exits 0, if in both looks at the APICs 5 s apart that vCPU was halted
with interrupts enabled (RFL bit 9) and either
  - its APIC timer had run out (initial_count > 0, current_count 0, LVTT not masked) with no
    interrupt pending (IRR) or in service (ISR): the timer's interrupt was never raised; or
  - a vector was in service (ISR): its end of interrupt was never written (Linux writes it
    before it handles the interrupt and never halts inside a handler), so every interrupt of
    that priority or lower waits behind it.
Work queued on that CPU (the RCU grace-period kthread's timer, the task the guest waits for)
never runs. When the kernel reported a CPU's timer missing on the console (RCU's "Possible
timer handling issue on cpu=N", the last one), only that vCPU counts. Exits 1, printing
nothing, otherwise; 2 if LOG or LOG.stall cannot be read.
USAGE
}
case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    "") usage_error "give the console log (LOG; its dump is LOG.stall)" ;;
esac
[[ $# == 1 ]] || unknown_arg "$2"
LOG=$1
[[ -r $LOG && -r $LOG.stall ]] || { echo "timer-stall: cannot read $LOG and $LOG.stall" >&2; exit 2; }

named=$(tr -d '\r' <"$LOG" | sed -n 's/.*Possible timer handling issue on cpu=\([0-9]\{1,4\}\) .*/\1/p' | tail -n 1)
# One line per vCPU stuck in both looks, its number.
stuck=$(awk '
    /^=== / {
        section = $0
        look = ""
        if (match(section, /^=== info lapic [0-9]+/)) {
            cpu = substr(section, 16, RLENGTH - 15)
            look = cpu (section ~ /5 s later$/ ? ",2" : ",1")
        }
        next
    }
    section == "=== info registers -a" && /^CPU#[0-9]+$/ { cpu = substr($0, 5); next }
    # RFL is hex; IF is its bit 9, the second lowest bit of its third hex digit from the right.
    section == "=== info registers -a" && /^RIP=/ {
        rfl = $2; sub(/^RFL=/, "", rfl)
        digit = index("0123456789abcdef", tolower(substr(rfl, length(rfl) - 2, 1))) - 1
        waits[cpu] = / HLT=1/ && int(digit / 2) % 2 == 1
    }
    look != "" && /^LVTT\t/ { masked[look] = / masked / }
    look != "" && /^Timer\t/ {
        init = $0; sub(/.*initial_count = /, "", init); sub(/ .*/, "", init)
        expired[look] = init + 0 > 0 && $NF == "0"
    }
    look != "" && /^ISR\t/ { isr[look] = $0 !~ /\(none\)/ }
    look != "" && /^IRR\t/ { irr[look] = $0 !~ /\(none\)/ }
    function lost(l) {
        return (l in isr) && (isr[l] || (expired[l] && !masked[l] && !irr[l]))
    }
    END {
        for (c in waits)
            if (waits[c] && lost(c ",1") && lost(c ",2"))
                print c
    }' "$LOG.stall" | sort -n)
if [[ -n $named ]]; then
    grep -qx "$named" <<<"$stuck" || exit 1
    echo "$named"
else
    [[ -n $stuck ]] || exit 1
    head -n 1 <<<"$stuck"
fi

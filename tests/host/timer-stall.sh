#!/usr/bin/env bash
# Host test: scripts/timer-stall.sh names the vCPU of a real timer stall and nothing else.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--help]

Runs scripts/timer-stall.sh on two real stalls and on copies changed in one respect each.
tests/host/fixtures/timer-stall: vCPU 1 halted with its APIC timer run out and never raised;
tests/host/fixtures/timer-stall-eoi: vCPU 1 halted with the timer's vector in service (its end
of interrupt lost), the timer's interrupt and a device's pending behind it (see the READMEs).
Both count with or without RCU's report naming the CPU. Must not count: the report naming a
vCPU whose timer runs, interrupts off on the vCPU, a timer still counting, an interrupt
pending (about to be taken), only one look at the APIC, no report and the timer stopped
(an idle CPU with nothing to wait for), an end of interrupt written between the looks. Needs
no kernel. Prints "PASS name" / "FAIL name" lines.
USAGE
}
help_or_no_args "$@"

TOP=$(cd "$(dirname "$0")/../.." && pwd)
FIX=$TOP/tests/host/fixtures/timer-stall
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# variant NAME CONSOLE_SED STALL_SED: a copy of the fixture ($FIX) with each sed script applied.
variant() {
    sed "$2" "$FIX/console.log" >"$tmp/$1.log"
    sed "$3" "$FIX/console.log.stall" >"$tmp/$1.log.stall"
}
# expect NAME WANT: timer-stall.sh on variant NAME prints WANT (a CPU number) and exits 0, or,
# with WANT empty, prints nothing and exits 1.
expect() {
    local out rc=0
    out=$("$TOP/scripts/timer-stall.sh" "$tmp/$1.log" 2>&1) || rc=$?
    if [[ -n $2 && $rc == 0 && $out == "$2" ]] || [[ -z $2 && $rc == 1 && -z $out ]]; then
        echo "PASS timer_stall_$1"
    else
        echo "FAIL timer_stall_$1"
        echo "    | want ${2:-no stall (exit 1, nothing printed)}; got exit $rc, output '$out'"
    fi
}

variant seen '' ''
expect seen 1
variant without_rcu_report '/Possible timer handling issue/d' ''
expect without_rcu_report 1
variant timer_stopped_without_rcu_report '/Possible timer handling issue/d' \
    '/^=== info lapic 1/,/^=== info lapic 2/s/initial_count = 234052 current_count = 0$/initial_count = 0 current_count = 0/'
expect timer_stopped_without_rcu_report ''
variant other_cpu_named 's/on cpu=1 /on cpu=2 /' ''
expect other_cpu_named ''
# vCPU 1's RIP line is the second in the registers (the dump lists CPU#0..3 in order).
variant interrupts_off '' '/^CPU#1$/,/^CPU#2$/s/RFL=00000246/RFL=00000046/'
expect interrupts_off ''
variant timer_counting '' '/^=== info lapic 1, 5 s later$/,$s/current_count = 0$/current_count = 1234/'
expect timer_counting ''
variant interrupt_pending '' '/^=== info lapic 1$/,/^=== info lapic 2$/s/^IRR\t (none)$/IRR\t 236/'
expect interrupt_pending ''
variant one_look '' '/^=== info lapic 1, 5 s later$/,$d'
expect one_look ''

FIX=$TOP/tests/host/fixtures/timer-stall-eoi
variant eoi_lost '' ''
expect eoi_lost 1
variant eoi_lost_without_rcu_report '/Possible timer handling issue/d' ''
expect eoi_lost_without_rcu_report 1
variant eoi_lost_interrupts_off '' '/^CPU#1$/,/^CPU#2$/s/RFL=00000246/RFL=00000046/'
expect eoi_lost_interrupts_off ''
# The second look finds the vector no longer in service and the timer counting again.
variant eoi_written_later '' '/^=== info lapic 1, 5 s later$/,$s/^ISR\t 236$/ISR\t (none)/;/^=== info lapic 1, 5 s later$/,$s/^IRR\t 34 236$/IRR\t (none)/;/^=== info lapic 1, 5 s later$/,$s/current_count = 0$/current_count = 5678/'
expect eoi_written_later ''

#!/usr/bin/env bash
# Host test: a guest that does not reach /init in time is ended at guest.sh's --init-deadline
# (exit 120, with the reason), not at the boot's --timeout, and no initramfs is left behind.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--help]

Needs scripts/prepare.sh to have run (out/env). Boots the main kernel with --init-deadline 3
and --timeout 300, the kernel told to start "sleep 600" from the initramfs instead of its
/init (rdinit=), so that /init never starts however fast the kernel boots (the clang-22 kernel
reaches /init in under 3 s on an idle host), and checks that guest.sh exits 120 within 60 s,
says why on stderr, leaves no initrd.*.cpio.gz in the output directory and no lock on the
NVDIMM image (the next boot can start at once).
Then boots it again the same way with --init-deadline 200, --timeout 45 and RBLK_STALL_DUMP=10,
and checks that qemu-run wrote QEMU's state for the silent console next to the log (the
monitor's answers, the local APIC of each vCPU, and gdb's stacks of QEMU's threads with the
vCPUs halted in qemu_wait_io_event). Last, boots a guest that reports a hang the way the test
suites' hang_watch does while its console keeps printing for 40 s, and checks that qemu-run
dumped QEMU's state at the report and let the boot end with the command's status.
Prints "PASS name" / "FAIL name" lines.
USAGE
}
help_or_no_args "$@"

TOP=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${RBLK_OUT:-$TOP/out}
[[ -f "$OUT/env" ]] || { echo "boot-deadline: $OUT/env is missing: run scripts/prepare.sh first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

before=$(find "$OUT" -maxdepth 1 -name 'initrd.*.cpio.gz' | wc -l)
s=$(date +%s)
rc=0
"$TOP/scripts/guest.sh" --init-deadline 3 --timeout 300 --append "rdinit=/usr/bin/sleep -- 600" \
    --log "$tmp/console.log" -- true \
    >/dev/null 2>"$tmp/stderr" || rc=$?
took=$(($(date +%s) - s))
after=$(find "$OUT" -maxdepth 1 -name 'initrd.*.cpio.gz' | wc -l)
# The next boot must find the NVDIMM image free at once (qemu-run flocks it while QEMU runs).
# shellcheck source=/dev/null
img=$(source "$OUT/env" && echo "$IMAGES/pmem.img")
locked=0
flock -n "$img" true || locked=1

if [[ $rc == 120 && $took -lt 60 ]] && grep -q "did not start within 3 s" "$tmp/stderr"; then
    echo "PASS boot_stuck_before_init_ends_at_deadline"
else
    echo "FAIL boot_stuck_before_init_ends_at_deadline"
    echo "    | guest.sh exited $rc after $took s (want 120 in < 60 s, with the reason on stderr):"
    tail -n 5 "$tmp/stderr" | sed 's/^/    | /'
fi
if [[ $after -le $before ]]; then
    echo "PASS boot_leaves_no_initramfs"
else
    echo "FAIL boot_leaves_no_initramfs"
    echo "    | $OUT holds $after initrd.*.cpio.gz after the boot, $before before"
fi
if [[ $locked == 0 ]]; then
    echo "PASS boot_releases_image_lock"
else
    echo "FAIL boot_releases_image_lock"
    echo "    | $img is still locked after guest.sh returned (held by pid: $(fuser "$img" 2>/dev/null || true))"
fi

# A console that stays silent: its QEMU state is dumped (qemu-run's RBLK_STALL_DUMP) while the
# boot goes on to its --timeout.
rc=0
RBLK_STALL_DUMP=10 "$TOP/scripts/guest.sh" --init-deadline 200 --timeout 45 \
    --append "rdinit=/usr/bin/sleep -- 600" --log "$tmp/silent.log" -- true \
    >/dev/null 2>"$tmp/silent.stderr" || rc=$?
stall=$tmp/silent.log.stall
missing=()
grep -q "^VM status: running" "$stall" 2>/dev/null || missing+=("the monitor's 'VM status: running'")
[[ $(grep -c "^dumping local APIC state for CPU" "$stall" 2>/dev/null) -ge 2 ]] ||
    missing+=("the local APIC of both vCPUs")
grep -q "in qemu_wait_io_event" "$stall" 2>/dev/null || missing+=("a halted vCPU thread's stack (qemu_wait_io_event)")
if [[ $rc == 124 && ${#missing[@]} == 0 ]] && grep -q "QEMU's state is in $stall" "$tmp/silent.stderr"; then
    echo "PASS boot_silent_console_dumps_qemu_state"
else
    echo "FAIL boot_silent_console_dumps_qemu_state"
    echo "    | guest.sh exited $rc (want 124, the timeout); $stall lacks: ${missing[*]:-nothing}"
    tail -n 3 "$tmp/silent.stderr" | sed 's/^/    | /'
fi

# A guest that reports a hang while its console keeps printing (as a hung-task report every
# 2 min does): QEMU's state is dumped at the report, not after a silence, and, with no vCPU
# waiting for an interrupt, the boot goes on to its end.
rc=0
"$TOP/scripts/guest.sh" --timeout 150 --log "$tmp/sign.log" -- \
    'echo "<3>rblk-watchdog: the test still runs after 1 s; waiting tasks:" >/dev/kmsg; for i in $(seq 40); do echo "tick $i"; sleep 1; done' \
    >/dev/null 2>"$tmp/sign.stderr" || rc=$?
stall=$tmp/sign.log.stall
if [[ $rc == 0 ]] && grep -q "^dumping local APIC state for CPU" "$stall" 2>/dev/null &&
    grep -q "the console shows a hang: rblk-watchdog: the test still runs after: QEMU's state is in $stall" "$tmp/sign.stderr"; then
    echo "PASS boot_hang_sign_dumps_qemu_state"
else
    echo "FAIL boot_hang_sign_dumps_qemu_state"
    echo "    | guest.sh exited $rc (want 0, the command's); $stall $([[ -s $stall ]] && echo written || echo missing)"
    tail -n 3 "$tmp/sign.stderr" | sed 's/^/    | /'
fi

#!/usr/bin/env bash
# The project's test command: build what is needed, run the guest suites, summarise.
set -euo pipefail

usage() {
    cat <<USAGE
Usage: $0 [--help]

Runs every test: host setup and kernel builds (incremental), then guest boots under QEMU
(main suite, persistence across a reboot, built-in kernel). Prints one line per test,
"PASS <name>" or "FAIL <name>", and ends with "N passed, N failed". Logs: out/logs/.
Exits non-zero if any test failed.
USAGE
}
[[ "${1:-}" == "--help" || "${1:-}" == "-h" ]] && { usage; exit 0; }

TOP=$(cd "$(dirname "$0")/.." && pwd)
OUT=${RBLK_OUT:-$TOP/out}
LOGS="$OUT/logs"
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log
passed=0
failed=0
result() { # PASS|FAIL NAME
    echo "$1 $2"
    if [[ $1 == PASS ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
finish() {
    echo "$passed passed, $failed failed"
    [[ $failed == 0 ]]
}

start=$(date +%s)
if "$TOP/scripts/prepare.sh" 2>&1 | tee "$LOGS/prepare.log" | grep --line-buffered -E '^prepare:' >&2; then
    result PASS build_kernels_and_modules
else
    tail -n 30 "$LOGS/prepare.log"
    result FAIL build_kernels_and_modules
    finish
    exit 1
fi
echo "test: prepared in $(($(date +%s) - start)) s" >&2

# boot NAME [guest.sh options] -- CMD: run one guest session and collect its PASS/FAIL lines.
boot() {
    local name=$1 s rc
    shift
    s=$(date +%s)
    "$TOP/scripts/guest.sh" --log "$LOGS/$name.log" "$@" >/dev/null 2>"$LOGS/$name.stderr" && rc=0 || rc=$?
    echo "test: boot $name: exit $rc in $(($(date +%s) - s)) s (log: $LOGS/$name.log)" >&2
    local lines
    touch "$LOGS/$name.log"
    lines=$(tr -d '\r' <"$LOGS/$name.log" | grep -aE '^(PASS|FAIL) [a-z0-9_]+$' || true)
    if [[ -z "$lines" ]]; then
        result FAIL "guest_${name}_ran"
        tail -n 30 "$LOGS/$name.stderr" "$LOGS/$name.log" | sed 's/^/    | /'
        return
    fi
    while read -r verdict test; do
        result "$verdict" "$test"
        if [[ $verdict == FAIL ]]; then
            tr -d '\r' <"$LOGS/$name.log" | sed -n "/^FAIL $test\$/,/^\(PASS\|FAIL\) /p" | grep '^    |' || true
        fi
    done <<<"$lines"
    [[ $rc == 0 ]] || result FAIL "guest_${name}_exit_status"
}

boot main --smp 2 -- 'bash /tests/suite-main.sh'
boot persist_write -- 'bash /tests/suite-persist.sh write'
boot persist_check -- 'bash /tests/suite-persist.sh check'
boot nvme --smp 4 -- 'bash /tests/suite-nvme.sh'
boot builtin --builtin --append 'rust_pmem.nowait=1' -- 'bash /tests/suite-builtin.sh'

echo "test: total $(($(date +%s) - start)) s" >&2
finish

#!/usr/bin/env bash
# Host test: every script in scripts/ answers --help with its usage and refuses a bad argument
# with a message that names it, without doing any work.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--help]

For each scripts/*.sh and tests/host/*.sh but the library scripts/lib.sh: "--help" must exit 0 and print "Usage:"; "--no-such-option" must exit
non-zero within ${LIMIT:-20} s and say on stderr which argument was wrong. Prints one
"PASS name" / "FAIL name" line per script.
USAGE
}
help_or_no_args "$@"

TOP=$(cd "$(dirname "$0")/../.." && pwd)
LIMIT=20
BAD=--no-such-option
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for script in "$TOP"/scripts/*.sh "$TOP"/tests/host/*.sh; do
    # scripts/lib.sh is a library the others source, not a command (not executable).
    [[ -x "$script" ]] || continue
    name=$(basename "$script" .sh | tr '-' '_')
    why=""
    # A wrong answer must not start real work, so both calls run under a short timeout and
    # with a private cache and output directory.
    if ! RBLK_CACHE="$tmp/cache" RBLK_OUT="$tmp/out" timeout "$LIMIT" "$script" --help \
        >"$tmp/help.out" 2>"$tmp/help.err" </dev/null; then
        why="--help exited non-zero"
    elif ! grep -q '^Usage:' "$tmp/help.out"; then
        why="--help printed no 'Usage:' line on stdout"
    fi
    rc=0
    RBLK_CACHE="$tmp/cache" RBLK_OUT="$tmp/out" timeout "$LIMIT" "$script" "$BAD" \
        >"$tmp/bad.out" 2>"$tmp/bad.err" </dev/null || rc=$?
    if [[ -z "$why" ]]; then
        if [[ $rc == 0 ]]; then
            why="$BAD was accepted (exit 0)"
        elif [[ $rc == 124 ]]; then
            why="$BAD did not fail within $LIMIT s (it started working)"
        elif ! grep -q -- "$BAD" "$tmp/bad.err"; then
            why="$BAD failed (exit $rc) but stderr does not name the argument: $(head -n 2 "$tmp/bad.err" | tr '\n' ' ')"
        fi
    fi
    if [[ -z "$why" ]]; then
        echo "PASS script_cli_$name"
    else
        echo "FAIL script_cli_$name"
        echo "    | $(basename "$script"): $why"
    fi
done

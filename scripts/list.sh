#!/usr/bin/env bash
# Print, as Markdown, lists that are generated from their source instead of kept by hand.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 patches|tests [--help]

  patches   the kernel patch series: one line per kernel/patches/*.patch, its number and
            subject (the commit message in the file says why and how each API stays safe)
  tests     the guest suites (tests/guest/suite-*.sh): each suite's header comment and the
            tests it registers, in order ("t NAME" runs test_NAME; "t_kernel_clean NAME" is
            the shared kernel-log check). scripts/run-tests.sh says which boot runs which
            suite; the host-side tests are tests/host/*.sh (each says what it checks in --help).
USAGE
}
case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    patches | tests) [[ $# == 1 ]] || unknown_arg "$2" ;;
    "") usage_error "say what to list: patches or tests" ;;
    *) unknown_arg "$1" ;;
esac
TOP=$(cd "$(dirname "$0")/.." && pwd)

list_patches() {
    local p n subject
    for p in "$TOP"/kernel/patches/*.patch; do
        [[ -e $p ]] || die "no patches in $TOP/kernel/patches"
        # The Subject header may be folded over several lines (RFC 5322): join them.
        subject=$(sed -n '/^Subject: /,/^[^ ]/p' "$p" | sed '$d' | tr -d '\n' |
            sed -E 's/^Subject: (\[PATCH[^]]*\] )?//; s/  +/ /g')
        [[ -n $subject ]] || die "$(basename "$p") has no Subject: line"
        n=$(basename "$p" | cut -d- -f1)
        echo "$((10#$n)). \`$subject\` ([patch](../kernel/patches/$(basename "$p")))"
    done
}

list_tests() {
    local f
    for f in "$TOP"/tests/guest/suite-*.sh; do
        echo "### $(basename "$f")"
        echo
        # The header comment (after the shebang and SPDX lines), then every registered test.
        sed -n '2,/^[^#]/p' "$f" | grep '^#' | grep -v SPDX | sed -E 's/^# ?//'
        echo
        # shellcheck disable=SC2016 # the backquotes are Markdown
        grep -oE '^\s*([a-z]+\) *)?t(_kernel_clean)? [a-z0-9_]+' "$f" |
            sed -E 's/^\s*([a-z]+\) *)?//; s/^t ([a-z0-9_]+)/- `\1`/; s/^t_kernel_clean ([a-z0-9_]+)/- `\1` (kernel log check)/'
        echo
    done
}

"list_$1"

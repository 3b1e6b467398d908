# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# What every host script (scripts/*.sh, tests/host/*.sh) shares; a library to source, not a
# command. Source it right after `set -euo pipefail`:
#   source "$(dirname "$0")/lib.sh"                   # from scripts/
#   source "$(dirname "$0")/../../scripts/lib.sh"     # from tests/host/
# It sets the ERR trap and defines, for messages that say what failed and why:
#   die MESSAGE            "<script>: ERROR: MESSAGE" on stderr, exit 1 (the work failed)
#   usage_error MESSAGE    "<script>: MESSAGE" and the script's usage on stderr, exit 2 (a wrong
#                          command line; the script defines usage(), which prints "Usage: ...")
#   unknown_arg ARG        usage_error "unknown argument 'ARG'"
#   need_arg OPTION "$@"   an option that takes a value has one (call it with the remaining
#                          arguments, the option first)
#   help_or_no_args "$@"   for a script without arguments: --help prints the usage, exit 0;
#                          anything else is a usage error

# The LLVM toolchain the kernel and the modules are built with (make LLVM=$RBLK_LLVM): the
# major version of rustc's own LLVM, so that CONFIG_RUST_INLINE_HELPERS can inline the kernel's
# C helpers into Rust code (both sides' bitcode must come from one LLVM). build-kernel.sh checks
# the two agree; setup-host.sh installs clang$RBLK_LLVM, lld$RBLK_LLVM and llvm$RBLK_LLVM.
RBLK_LLVM=-22

# The script's name in messages: build-kernel for scripts/build-kernel.sh.
PROG=${0##*/}
PROG=${PROG%.sh}

# Never fail silently: name the command that failed under set -e.
trap 'echo "${0##*/}: line $LINENO: command failed (exit $?): $BASH_COMMAND" >&2' ERR

die() {
    echo "$PROG: ERROR: $*" >&2
    exit 1
}

usage_error() {
    echo "$PROG: $*" >&2
    usage >&2
    exit 2
}

unknown_arg() { usage_error "unknown argument '$1'"; }

need_arg() { [[ $# -ge 2 && -n "$2" ]] || usage_error "$1 needs an argument"; }

help_or_no_args() {
    case "${1:-}" in
        -h | --help) usage; exit 0 ;;
        "") ;;
        *) unknown_arg "$1" ;;
    esac
    [[ $# -le 1 ]] || unknown_arg "$2"
}

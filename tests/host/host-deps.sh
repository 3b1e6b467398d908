#!/usr/bin/env bash
# Host test: what the host setup installs is installable on this machine, and covers every host
# command the project's scripts call. Catches image drift (a preinstalled package that conflicts
# with the list) and a command missing from the list, on any machine, even one that has it all.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--help]

Two checks, each printing "PASS name" or "FAIL name" with the reason:
  host_setup_installable   scripts/setup-host.sh --check: apt-get install -s of setup-host's
                           whole package list against the machine's current packages (no
                           errors, removals or downgrades) and the QEMU pin; changes nothing
                           but apt's lists
  host_commands_provided   every command that scripts/*.sh, tests/host/*.sh and .ci/run call
                           (parsed with shfmt, not grepped), and every host binary that
                           make-initramfs.sh copies into the guest, is a shell builtin or
                           function, comes from a package in setup-host's list, from a Debian
                           package of priority required/important (on every Debian image), from
                           setup-host's Rust tools, or is one of BASE_CMDS below (the image's
                           own, per the machine's env description)
Takes ~5 s. Needs shfmt (in setup-host's list).
USAGE
}
help_or_no_args "$@"

TOP=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
# The machine image's own tools that are not Debian packages (git under /usr/local, CPython).
BASE_CMDS=(git python3)

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; shift; printf '    | %s\n' "$@"; }

if out=$("$TOP/scripts/setup-host.sh" --check 2>&1); then
    pass host_setup_installable
else
    fail host_setup_installable "scripts/setup-host.sh --check failed:" "$out"
fi

# The command words of one script (shfmt's JSON on stdin, its path as the argument): "NAME
# FILE:LINE" each, builtins and the script's own functions left out, and those of scripts/lib.sh
# (LIB_FUNCS) in a script that sources it (a `source` or `.` whose path ends in lib.sh): shfmt
# parses each file alone. With --funcs as a second argument: the functions the script defines.
PARSE='
import json, os, sys
WRAPPERS = {"timeout", "setsid", "nice", "xargs", "exec", "env", "flock", "timed", "command"}
funcs, calls = set(), []
def lits(node):
    # every literal piece of a word, quoted or not
    if isinstance(node, dict):
        if node.get("Type") == "Lit":
            yield node["Value"]
        for v in node.values():
            yield from lits(v)
    elif isinstance(node, list):
        for v in node:
            yield from lits(v)
def lit(word):
    parts = (word or {}).get("Parts") or []
    if len(parts) == 1 and parts[0].get("Type") == "Lit":
        return parts[0]["Value"]
    return None
def walk(node):
    if isinstance(node, dict):
        t = node.get("Type")
        if t == "FuncDecl":
            funcs.add(node["Name"]["Value"])
        if t == "CallExpr" and node.get("Args"):
            words = [lit(a) for a in node["Args"]]
            line = node["Pos"]["Line"]
            if words[0] in ("source", ".") and len(node["Args"]) > 1 and \
                    "".join(lits(node["Args"][1])).endswith("lib.sh"):
                funcs.update(os.environ.get("LIB_FUNCS", "").split())
            i = 0
            while i < len(words) and words[i] is not None:
                calls.append((words[i], line))
                if words[i] not in WRAPPERS:
                    break
                # the wrapped command: the next word that is not an option or a number
                i += 1
                while i < len(words) and words[i] is not None and (
                        words[i].startswith("-") or words[i][:1].isdigit() or words[i] == "-v"):
                    i += 1
        for v in node.values():
            walk(v)
    elif isinstance(node, list):
        for v in node:
            walk(v)
walk(json.load(sys.stdin))
if sys.argv[2:] == ["--funcs"]:
    print("\n".join(sorted(funcs)))
    sys.exit(0)
if sys.argv[1] == "scripts/lib.sh":
    funcs.add("usage")  # each script that sources the library defines its usage()
for name, line in calls:
    if name not in funcs and "=" not in name:
        print(name, sys.argv[1] + ":" + str(line))
'
# commands FILE...: what PARSE prints for each file.
commands() {
    local f lib_funcs
    lib_funcs=$(shfmt --to-json <"$TOP/scripts/lib.sh" | python3 -c "$PARSE" scripts/lib.sh --funcs)
    [[ -n "$lib_funcs" ]] || { echo "host-deps: no functions found in scripts/lib.sh" >&2; return 1; }
    for f in "$@"; do
        shfmt --to-json <"$f" | LIB_FUNCS="$lib_funcs" python3 -c "$PARSE" "${f#"$TOP"/}"
    done
}

mapfile -t listed < <("$TOP/scripts/setup-host.sh" --list)
declare -A IN_LIST=() CARGO=() BASE=()
for p in "${listed[@]}"; do
    case "$p" in cargo:*) CARGO[${p#cargo:}]=1 ;; *) IN_LIST[$p]=1 ;; esac
done
for c in "${BASE_CMDS[@]}"; do BASE[$c]=1; done
declare -A SEEN=()
problems=()
# check NAME WHERE: where NAME comes from; appends to problems if nowhere allowed.
check() {
    local name=$1 where=$2 path pkg prio
    [[ -z "${SEEN[$name]:-}" ]] || return 0
    SEEN[$name]=1
    case "$(type -t "$name" || true)" in builtin|keyword) return 0 ;; esac
    [[ -z "${BASE[$name]:-}" ]] || return 0
    if [[ -n "${CARGO[$name]:-}" ]]; then
        return 0
    fi
    case "$name" in */*|.*|*'$'*|'['|'[[') return 0 ;; esac
    if ! path=$(command -v "$name"); then
        problems+=("$name ($where): not on this machine, and setup-host does not say where it comes from")
        return 0
    fi
    if [[ "$path" == "$HOME/.cargo/bin/"* ]]; then
        problems+=("$name ($where): from ~/.cargo/bin, not among setup-host's Rust tools (CARGO_CMDS)")
        return 0
    fi
    # dpkg knows the path as installed (merged /usr: /bin/x is /usr/bin/x).
    pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null ||
        dpkg -S "/usr$path" 2>/dev/null || dpkg -S "${path#/usr}" 2>/dev/null || true)
    pkg=${pkg%%:*}
    pkg=${pkg%%,*}
    if [[ -z "$pkg" ]]; then
        problems+=("$name ($where): $path belongs to no Debian package and is not in BASE_CMDS")
        return 0
    fi
    [[ -z "${IN_LIST[$pkg]:-}" ]] || return 0
    prio=$(dpkg-query -W -f='${Priority} ${Essential}' "$pkg" 2>/dev/null || true)
    case "$prio" in required*|important*|*yes) return 0 ;; esac
    problems+=("$name ($where): from package $pkg (priority ${prio% *}), which setup-host does not install")
}

if ! command -v shfmt >/dev/null; then
    fail host_commands_provided "shfmt is not installed (scripts/setup-host.sh installs it)"
    exit 0
fi
cd "$TOP"
while read -r name where; do
    check "$name" "$where"
done < <(commands scripts/*.sh tests/host/*.sh .ci/run)
# The host binaries make-initramfs copies into every guest.
tools=$(sed -n '/^HOST_TOOLS=(/,/^)/p' scripts/make-initramfs.sh | sed '1d;$d')
for t in $tools; do check "$t" "scripts/make-initramfs.sh HOST_TOOLS"; done
if ((${#problems[@]} == 0)); then
    pass host_commands_provided
else
    fail host_commands_provided "${problems[@]}"
fi

#!/usr/bin/env bash
# Install the host packages and Rust tools needed to build the kernel and run the QEMU guest.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--check | --list] [--help]

Installs (only what is missing): clang/lld/llvm ${RBLK_LLVM#-} (bookworm-security), kernel build
tools, QEMU $QEMU_SERIES from $QEMU_SUITE, the guest tools (fio, nvme-cli, ndctl, e2fsprogs,
util-linux, kmod, busybox, udev), rust-src and bindgen-cli $BINDGEN_VERSION. Works on top of whatever the machine image already
has: it first asks apt, without changing anything, whether the whole list can be installed
beside the installed packages, and stops with apt's reason if not. Fails when the QEMU it
finds is not the pinned series. Before its first install it records the machine's package list
in $STATE/dpkg-before-setup-host.txt (scripts/rehearse-fresh.sh uses it to go back).

  --check   only that question to apt (an apt-get install -s of the list against the
            machine's current packages) and the QEMU pin; installs and changes nothing
            but apt's package lists
  --list    print the packages (one per line) and the commands that come from rustup/cargo
            (lines "cargo:NAME"), then exit
USAGE
}

# Why QEMU 10.0 from bookworm-backports (docs/host-setup.md, "the QEMU pin"): the machine image ships
# qemu-utils 10.0 from there, and bookworm's QEMU 7.2 cannot be installed beside it.
QEMU_SUITE=bookworm-backports
QEMU_SERIES=10.0
QEMU_PKGS=(qemu-system-x86 qemu-system-common qemu-system-data qemu-utils seabios)
BINDGEN_VERSION=0.73.2
PKGS=("clang$RBLK_LLVM" "lld$RBLK_LLVM" "llvm$RBLK_LLVM" "libclang$RBLK_LLVM-dev"
      flex bison bc libelf-dev libssl-dev cpio kmod make
      qemu-system-x86 qemu-utils fio nvme-cli ndctl e2fsprogs util-linux busybox-static
      python3-matplotlib rsync xz-utils gcc libc6-dev shfmt patch psmisc linux-perf udev gdb)
# Commands the scripts take from the Rust toolchain rather than from a Debian package.
CARGO_CMDS=(rustup cargo rustc rustfmt bindgen)
STATE=${RBLK_STATE:-/var/lib/rust-blk}
LIST=/etc/apt/sources.list.d/rust-blk-$QEMU_SUITE.list
PREF=/etc/apt/preferences.d/rust-blk-qemu

MODE=install
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --check) MODE=check ;;
    --list) printf '%s\n' "${PKGS[@]}"; printf 'cargo:%s\n' "${CARGO_CMDS[@]}"; exit 0 ;;
    "") ;;
    *) unknown_arg "$1" ;;
esac
[[ $# -le 1 ]] || usage_error "one option at most (got: $*)"

# The QEMU suite and the pin: QEMU's packages come from $QEMU_SUITE, series $QEMU_SERIES only.
# Everything else stays with bookworm (the suite's default priority, 100, never wins).
apt_sources() {
    [[ $EUID == 0 ]] || die "must run as root to add $LIST (apt sources)"
    if [[ ! -f "$LIST" ]]; then
        echo "deb http://deb.debian.org/debian $QEMU_SUITE main" >"$LIST"
    fi
    cat >"$PREF.tmp" <<PIN
# rust-blk (scripts/setup-host.sh): QEMU $QEMU_SERIES from $QEMU_SUITE, nothing else.
Package: ${QEMU_PKGS[*]}
Pin: release n=$QEMU_SUITE
Pin-Priority: 990
PIN
    mv "$PREF.tmp" "$PREF"
    apt-get update -qq >&2 || die "apt-get update failed (network, or a broken source in /etc/apt)"
}

# The candidate of each QEMU package must be the pinned series, or the pin has gone stale
# (the suite moved on): say so rather than install something the benches were not measured on.
check_qemu_candidates() {
    local p cand
    for p in qemu-system-x86; do
        cand=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
        [[ "$cand" == 1:"$QEMU_SERIES"[.+]* ]] ||
            die "apt offers $p '$cand', not QEMU $QEMU_SERIES.x from $QEMU_SUITE: the suite or the" \
                "machine image changed; re-measure the benches on the new QEMU before moving the pin" \
                "(QEMU_SERIES in scripts/setup-host.sh)"
    done
}

# simulate: would installing the whole list work beside what is installed now? An
# apt-get install -s of every package: exit 0, nothing removed, nothing downgraded.
simulate() {
    local out rc=0 problems
    out=$(LC_ALL=C apt-get install -s --no-install-recommends "${PKGS[@]}" 2>&1) || rc=$?
    # apt's own errors and unmet relations, removals, and downgrades ("Inst pkg [old] (new ...)"
    # with new < old): each is a change to the machine image this script must not make.
    problems=$(
        grep -E '^E:|(Depends|PreDepends|Breaks|Conflicts):|^Remv ' <<<"$out" || true
        grep -E '^Inst [^ ]+ \[[^]]+\] \(' <<<"$out" | while read -r _ pkg old new _; do
            old=${old#[} old=${old%]} new=${new#(}
            if dpkg --compare-versions "$new" lt "$old"; then echo "downgrade of $pkg: $old -> $new"; fi
        done
    )
    [[ $rc == 0 && -z "$problems" ]] && return 0
    echo "setup-host: apt cannot install the package list beside this machine's packages (apt-get install -s exit $rc):" >&2
    sed 's/^/setup-host:   /' <<<"${problems:-$(tail -n 5 <<<"$out")}" >&2
    return 1
}

# The QEMU the guests will run: the pinned series, or a loud stop.
check_qemu_installed() {
    local v
    v=$(qemu-system-x86_64 --version 2>/dev/null | awk 'NR == 1 {print $4}') || true
    [[ "$v" == "$QEMU_SERIES".* ]] ||
        die "qemu-system-x86_64 is '${v:-missing}', the project pins QEMU $QEMU_SERIES.x from $QEMU_SUITE"
}

if [[ $MODE == check ]]; then
    apt_sources
    check_qemu_candidates
    simulate || die "the install would fail (above); nothing was changed"
    if command -v qemu-system-x86_64 >/dev/null; then check_qemu_installed; fi
    echo "setup-host: check ok (${#PKGS[@]} packages installable, QEMU candidate $QEMU_SERIES.x)"
    exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# qemu-utils is in the list because the image may already ship it: it must be the pinned
# series too (qemu-system-common Breaks a different one).
if ((${#missing[@]})); then
    apt_sources
    check_qemu_candidates
    simulate || die "not installing: apt would fail or change the machine's packages (above)"
    mkdir -p "$STATE"
    [[ -f "$STATE/dpkg-before-setup-host.txt" ]] ||
        dpkg-query -W -f='${db:Status-Abbrev} ${Package}=${Version}\n' | awk '$1 ~ /^ii/ {print $2}' |
        sort >"$STATE/dpkg-before-setup-host.txt"
    echo "setup-host: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install ${missing[*]} failed"
fi
check_qemu_installed

export PATH="$HOME/.cargo/bin:$PATH"
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
    echo "setup-host: rustup component add rust-src"
    rustup component add rust-src
fi
if ! command -v bindgen >/dev/null || [[ "$(bindgen --version | awk '{print $2}')" != "$BINDGEN_VERSION" ]]; then
    echo "setup-host: cargo install bindgen-cli $BINDGEN_VERSION (takes ~3 min)"
    cargo install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION"
fi
echo "setup-host: ok (QEMU $(qemu-system-x86_64 --version | awk 'NR == 1 {print $4}'))"

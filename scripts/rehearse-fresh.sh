#!/usr/bin/env bash
# Put this machine back to its image's state (what setup-host installed goes, the kernel cache is
# moved aside), then run CI's command on a clean clone: the first `make test` of a new user.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 --yes [--no-run] [--help]

Destructive, for a developer's machine (run as root):
 1. packages: every package that is not in $STATE/dpkg-before-setup-host.txt (the list
    setup-host wrote before its first install) is purged, every package whose version changed
    since is put back to the recorded version, and the apt sources and pins setup-host and
    fetch-kernel added are removed;
 2. Rust: the rust-src component and cargo's bindgen-cli are removed;
 3. caches: \$RBLK_CACHE (default /var/cache/rust-blk) and the disk images
    (/var/tmp/rust-blk-images) are moved aside to <path>.aside-<time> (delete them yourself);
 4. unless --no-run: git clone of this checkout's HEAD into /var/tmp/rust-blk-fresh-<time>,
    then "bash .ci/run" there, its output in that directory's ci.log, and the times of host
    setup, kernel builds and tests printed at the end.

  --yes     required: this removes packages and moves caches
  --no-run  stop after step 3
USAGE
}
STATE=${RBLK_STATE:-/var/lib/rust-blk}
CACHE=${RBLK_CACHE:-/var/cache/rust-blk}
IMAGES=${RBLK_IMAGES:-/var/tmp/rust-blk-images}
YES=0
RUN=1
for a in "$@"; do
    case "$a" in
        --yes) YES=1 ;;
        --no-run) RUN=0 ;;
        -h|--help) usage; exit 0 ;;
        *) unknown_arg "$a" ;;
    esac
done
log() { echo "rehearse-fresh: $*" >&2; }
((YES == 1)) || usage_error "--yes is required (this removes packages and moves caches)"
[[ $EUID == 0 ]] || die "must run as root (it removes packages)"
BEFORE="$STATE/dpkg-before-setup-host.txt"
[[ -s "$BEFORE" ]] || die "$BEFORE is missing: setup-host never installed anything here, so there is no image state to go back to"
TOP=$(cd "$(dirname "$0")/.." && pwd)
stamp=$(date +%Y%m%d-%H%M%S)

# 1. packages
declare -A WAS=()
while IFS='=' read -r p v; do WAS[$p]=$v; done <"$BEFORE"
extra=() changed=()
while IFS='=' read -r p v; do
    if [[ -z "${WAS[$p]:-}" ]]; then extra+=("$p")
    elif [[ "${WAS[$p]}" != "$v" ]]; then changed+=("$p=${WAS[$p]}"); fi
done < <(dpkg-query -W -f='${db:Status-Abbrev} ${Package}=${Version}\n' | awk '$1 ~ /^ii/ {print $2}')
rm -f /etc/apt/sources.list.d/rust-blk-*.list /etc/apt/preferences.d/rust-blk-*
apt-get update -qq || die "apt-get update failed"
export DEBIAN_FRONTEND=noninteractive
if ((${#extra[@]})); then
    log "purging ${#extra[@]} packages installed since the image: ${extra[*]}"
    apt-get purge -y -qq "${extra[@]}" >/dev/null || die "apt-get purge failed"
fi
if ((${#changed[@]})); then
    log "putting back the image's versions: ${changed[*]}"
    apt-get install -y -qq --allow-downgrades --no-install-recommends "${changed[@]}" >/dev/null ||
        die "could not reinstall ${changed[*]} (no longer in the archive?)"
fi
now=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}=${Version}\n' | awk '$1 ~ /^ii/ {print $2}' | sort)
if ! diff -q <(sort "$BEFORE") <(echo "$now") >/dev/null; then
    log "note: the package list still differs from the image's (< image, > now):"
    diff <(sort "$BEFORE") <(echo "$now") | grep '^[<>]' | head -n 20 >&2 || true
fi

# 2. Rust
export PATH="$HOME/.cargo/bin:$PATH"
if rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
    log "rustup component remove rust-src"
    rustup component remove rust-src
fi
if command -v bindgen >/dev/null; then
    log "cargo uninstall bindgen-cli"
    cargo uninstall -q bindgen-cli
fi

# 3. caches
for d in "$CACHE" "$IMAGES"; do
    if [[ -e "$d" ]]; then
        log "moving $d aside to $d.aside-$stamp"
        mv "$d" "$d.aside-$stamp"
    fi
done
((RUN == 1)) || { log "machine reset (--no-run)"; exit 0; }

# 4. the first run of a new user
clone=/var/tmp/rust-blk-fresh-$stamp
git clone -q "$TOP" "$clone"
log "bash .ci/run in $clone (HEAD $(git -C "$clone" rev-parse --short HEAD)), log in $clone/ci.log"
s=$(date +%s)
rc=0
(cd "$clone" && bash .ci/run) >"$clone/ci.log" 2>&1 || rc=$?
log "exit $rc after $(($(date +%s) - s)) s: $(tail -n 1 "$clone/ci.log")"
grep -E '^test: host setup:|^prepare: |^test: prepared in|^test: total' "$clone/ci.log" | sed 's/^/    /' >&2 || true
exit "$rc"

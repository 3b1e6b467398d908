#!/usr/bin/env bash
# Build the project's kernel: pristine 7.3 source + kernel/patches + kernel/config.fragment.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 [--builtin | --debug] [--configure-only] [--print-dir] [--help]

Builds bzImage and modules with LLVM=$RBLK_LLVM (scripts/lib.sh) into a cache outside the
checkout and prints the build directory on the last line of stdout.

  --print-dir print the build directory (no building) and exit
  --builtin   build the variant with rust_pmem and rust_nvme_mq built into the kernel
              (the project's sources dropped into drivers/block/rust_blk by
              scripts/install-in-tree.sh and enabled through Kconfig)
  --debug     build the debug variant: kernel/config.fragment plus kernel/config.debug.fragment
              (lockdep, KASAN, DMA-API debugging, debug objects, Intel IOMMU)
  --configure-only
              fetch, patch and configure, but do not build (the cold-path test uses this)

Cache layout (\$RBLK_CACHE, default /var/cache/rust-blk):
  src/linux-source-7.3      pristine source (scripts/fetch-kernel.sh)
  tree/<version>            patched source; refreshed by content, so only the files a patch
                            change really touches get a new mtime and rebuild
  build/<version>-<cfg>     O= build directory, keyed by kernel version + config fragment hash
                            (+ "-builtin" or "-debug"); incremental across runs
USAGE
}

BUILTIN=0
DEBUG=0
PRINT_DIR=0
CONFIGURE_ONLY=0
for a in "$@"; do
    case "$a" in
        --builtin) BUILTIN=1 ;;
        --debug) DEBUG=1 ;;
        --print-dir) PRINT_DIR=1 ;;
        --configure-only) CONFIGURE_ONLY=1 ;;
        -h|--help) usage; exit 0 ;;
        *) unknown_arg "$a" ;;
    esac
done

TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${RBLK_CACHE:-/var/cache/rust-blk}
export PATH="$HOME/.cargo/bin:$PATH"
JOBS=${JOBS:-$(nproc)}
log() { echo "build-kernel: $*" >&2; }
[[ $BUILTIN == 0 || $DEBUG == 0 ]] || usage_error "--builtin and --debug are separate variants; choose one"

FRAG="$TOP/kernel/config.fragment"
DEBUG_FRAG="$TOP/kernel/config.debug.fragment"
fragments() { # the fragment files of this variant, in order
    echo "$FRAG"
    [[ $DEBUG == 0 ]] || echo "$DEBUG_FRAG"
}
build_dir() { # VERSION
    local d
    d="$CACHE/build/$1-$( (fragments | xargs cat; echo "LLVM=$RBLK_LLVM") | sha256sum | cut -c1-12)"
    [[ $BUILTIN == 1 ]] && d="$d-builtin"
    [[ $DEBUG == 1 ]] && d="$d-debug"
    echo "$d"
}
series_hash() {
    (cat "$TOP"/kernel/patches/*.patch 2>/dev/null; cat "$TOP"/Kconfig "$TOP"/Kbuild "$TOP"/scripts/install-in-tree.sh
     find "$TOP" -path "$TOP/out" -prune -o -name '*.rs' -print | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-16
}
if [[ $PRINT_DIR == 1 ]]; then
    src=$("$TOP/scripts/fetch-kernel.sh" --cached) || die "no kernel source in $CACHE yet: run 'make kernel'"
    build_dir "$(make -s -C "$src" kernelversion)"
    exit 0
fi

# CONFIG_RUST_INLINE_HELPERS links the C helpers' bitcode into the Rust code: clang and rustc
# must share one LLVM major version, or the link fails far into the build.
rustc_llvm=$(rustc -vV 2>/dev/null | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[[ "-$rustc_llvm" == "$RBLK_LLVM" ]] ||
    die "rustc's LLVM is '${rustc_llvm:-unknown}' (rustc -vV) but the kernel is built with" \
        "LLVM=$RBLK_LLVM: set RBLK_LLVM in scripts/lib.sh to rustc's LLVM major version"
command -v "clang$RBLK_LLVM" >/dev/null ||
    die "clang$RBLK_LLVM is not installed: run scripts/setup-host.sh"

# One build at a time per patched tree: concurrent runs (make test while a developer rebuilds)
# would corrupt each other's objects. The debug variant has its own tree and lock, so its long
# build does not hold up the others.
lock="$CACHE/.build.lock"
[[ $DEBUG == 0 ]] || lock="$CACHE/.build-debug.lock"
mkdir -p "$CACHE"
exec 9>"$lock"
if ! flock -n 9; then
    log "waiting for another build-kernel.sh to finish (lock $lock)"
    flock 9
fi

SRC=$("$TOP/scripts/fetch-kernel.sh") || die "scripts/fetch-kernel.sh could not provide the kernel source (its message is above)"
VER=$(make -s -C "$SRC" kernelversion) || die "cannot read the kernel version of $SRC"
TREE="$CACHE/tree/$VER"
[[ $DEBUG == 0 ]] || TREE="$TREE-debug"

# 1. Patched tree, refreshed by content.
series_hash=$(series_hash)
if [[ ! -f "$TREE/.rblk-series" || "$(cat "$TREE/.rblk-series")" != "$series_hash" ]]; then
    log "preparing patched tree $TREE (series $series_hash)"
    mkdir -p "$CACHE/tree"
    stage="$CACHE/tree/.stage-$(basename "$TREE")"
    rm -rf "$stage"
    cp -al "$SRC" "$stage"
    for p in "$TOP"/kernel/patches/*.patch; do
        [[ -e "$p" ]] || continue
        log "  applying $(basename "$p")"
        patch -s -p1 -d "$stage" --no-backup-if-mismatch <"$p" || { log "ERROR: patch $(basename "$p") does not apply"; exit 1; }
    done
    "$TOP/scripts/install-in-tree.sh" "$stage" >&2 || die "scripts/install-in-tree.sh $stage failed"
    mkdir -p "$TREE"
    # -c: compare by content; no -t: files that differ get a fresh mtime, the rest keep theirs.
    rsync -rlc --delete --exclude=/.rblk-series "$stage"/ "$TREE"/
    rm -rf "$stage"
    # A new file, not a rewrite: a tree copied with hard links (cp -al) must not change the
    # original's marker.
    echo "$series_hash" >"$TREE/.rblk-series.tmp" && mv "$TREE/.rblk-series.tmp" "$TREE/.rblk-series"
fi

# 2. Configuration.
BUILD=$(build_dir "$VER")
# seed_from: a finished build to start a new configuration's build from (timestamps kept), so
# that kbuild rebuilds only what the changed options touch instead of the whole kernel: the
# newest build of this variant under an older configuration, else (for the built-in variant)
# the modular build of this configuration. Nothing on a fresh machine.
seed_from() {
    local suffix="" d best=""
    [[ $BUILTIN == 1 ]] && suffix="-builtin"
    [[ $DEBUG == 1 ]] && suffix="-debug"
    for d in "$CACHE/build/$VER"-????????????"$suffix"; do
        [[ -f "$d/vmlinux" && -f "$d/.rblk-built" && "$d" != "$BUILD" ]] || continue
        [[ -z "$best" || "$d/vmlinux" -nt "$best/vmlinux" ]] && best=$d
    done
    if [[ -z "$best" && $BUILTIN == 1 ]]; then
        d=$(BUILTIN=0 DEBUG=0 build_dir "$VER")
        [[ -f "$d/vmlinux" ]] && best=$d
    fi
    echo "$best"
}
if [[ ! -d "$BUILD" ]]; then
    base=$(seed_from)
    if [[ -n "$base" ]]; then
        log "seeding $BUILD from $base"
        rm -rf "$BUILD.tmp"
        cp -a "$base" "$BUILD.tmp" && rm -f "$BUILD.tmp/.rblk-built" && mv "$BUILD.tmp" "$BUILD"
    fi
fi
mkdir -p "$BUILD"
MAKE=(make -s -C "$TREE" O="$BUILD" LLVM="$RBLK_LLVM" -j"$JOBS")

want_config() {
    # Print the fragment's settings, plus the built-in drivers for the --builtin variant.
    fragments | xargs grep -hE '^CONFIG_'
    if [[ $BUILTIN == 1 ]]; then
        echo CONFIG_BLK_DEV_RUST_PMEM=y
        echo CONFIG_BLK_DEV_RUST_NVME_MQ=y
    fi
}

want_hash=$(want_config | sha256sum | cut -c1-16)
if [[ ! -f "$BUILD/.config" || "$(cat "$BUILD/.rblk-config" 2>/dev/null)" != "$want_hash" ]]; then
    log "configuring $BUILD"
    "${MAKE[@]}" tinyconfig >"$BUILD/config.log" 2>&1 || { tail -n 20 "$BUILD/config.log" >&2; die "make tinyconfig failed in $BUILD"; }
    for _ in 1 2; do
        while IFS='=' read -r key val; do
            name=${key#CONFIG_}
            case "$val" in
                y) "$TREE/scripts/config" --file "$BUILD/.config" --enable "$name" ;;
                m) "$TREE/scripts/config" --file "$BUILD/.config" --module "$name" ;;
                n) "$TREE/scripts/config" --file "$BUILD/.config" --disable "$name" ;;
                *) "$TREE/scripts/config" --file "$BUILD/.config" --set-val "$name" "$val" ;;
            esac
        done < <(want_config)
        "${MAKE[@]}" olddefconfig >>"$BUILD/config.log" 2>&1 || { tail -n 20 "$BUILD/config.log" >&2; die "make olddefconfig failed in $BUILD"; }
    done
    bad=0
    while IFS='=' read -r key val; do
        case "$val" in
            n) grep -qx "$key=[ym]" "$BUILD/.config" && { log "ERROR: $key is set but the fragment wants it off"; bad=1; } ;;
            *) grep -qx "$key=$val" "$BUILD/.config" || { log "ERROR: $key=$val was dropped by olddefconfig (got: $(grep -E "^(# )?$key[= ]" "$BUILD/.config" || echo unset))"; bad=1; } ;;
        esac
    done < <(want_config)
    ((bad == 0)) || die "the configuration of $BUILD does not match the fragments (see above)"
    echo "$want_hash" >"$BUILD/.rblk-config"
fi
if [[ $CONFIGURE_ONLY == 1 ]]; then
    log "configured $BUILD (not built: --configure-only)"
    echo "$BUILD"
    exit 0
fi

# 3. Build, with progress on stderr.
log "building in $BUILD (log: $BUILD/build.log)"
start=$(date +%s)
make -C "$TREE" O="$BUILD" LLVM="$RBLK_LLVM" -j"$JOBS" bzImage modules >"$BUILD/build.log" 2>&1 &
pid=$!
# Progress: one line a minute with the number of build steps done so far.
while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && log "  ... $(($(date +%s) - start)) s, $(grep -cE '^  [A-Z]' "$BUILD/build.log") steps"
done
if ! wait "$pid"; then
    grep -E 'error|Error' -A5 "$BUILD/build.log" | head -n 60 >&2
    log "ERROR: kernel build failed (full log: $BUILD/build.log)"
    exit 1
fi
log "built in $(($(date +%s) - start)) s"
# Marks a build that completed once (prepare.sh keeps such a debug build current).
echo "$want_hash $series_hash" >"$BUILD/.rblk-built"
echo "$BUILD"

#!/usr/bin/env bash
# Build a plain gzip'd cpio initramfs for the QEMU guest: busybox, a few host tools with their
# libraries, the kernel's modules, the project's out-of-tree modules, the guest tests and an /init
# that runs one command, prints "RBLK-EXIT <status>" and powers off.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 --build BUILDDIR --out FILE.cpio.gz [--extra-modules DIR]... [--guest-dir DIR]
          [--cmd 'COMMAND'] [--help]

  --build DIR          kernel O= build directory (holds .config, Makefile, modules.order, source ->)
  --out FILE           initramfs to write (gzip'd newc cpio)
  --extra-modules DIR  every *.ko in DIR goes to /lib/modules/extra/ in the guest (load with
                       insmod /lib/modules/extra/NAME.ko; depmod indexes them too, so modprobe
                       NAME works); may be repeated
  --guest-dir DIR      copied to /tests in the guest (default: tests/guest of this checkout;
                       skipped with a note if the default does not exist)
  --cmd 'COMMAND'      command line the guest's /init runs with bash (stored in /rblk-cmd), after
                       which it prints "RBLK-EXIT <status>" on the console and powers off.
                       Empty or absent: /init starts an interactive shell on the console instead
                       (its exit status is reported the same way when it exits).

Guest layout: merged /usr like the host (/bin, /sbin, /lib, /lib64 are links into /usr); host
binaries (${HOST_TOOLS_DOC}) with all their libraries, busybox
applets for everything else; /lib/modules/<release>/ from modules_install + depmod, so
"modprobe nvme" works. /init mounts proc, sysfs, devtmpfs, debugfs, configfs, tmpfs /tmp and /run.

The output is two concatenated gzip members (the kernel unpacks both): a userland part cached in
\$RBLK_CACHE/initramfs (default /var/cache/rust-blk/initramfs; rebuilt when a host binary,
library or this script changes) and a per-run part (modules, tests, command), so a rerun takes
a few seconds.

Environment: RBLK_EXTRA_TOOLS="perf ..." adds host programs (with their libraries) to the
userland part (a separate cached part, keyed like the default one).
USAGE
}

# Host programs copied into the guest with their shared libraries. Names that are symlinks on the
# host (mkfs.ext4 -> mke2fs, insmod -> /bin/kmod, ...) stay symlinks in the guest.
HOST_TOOLS=(
    bash fio nvme ndctl
    mke2fs mkfs.ext4 e2fsck fsck.ext4 dumpe2fs blkid lsblk blkdiscard
    sha256sum md5sum dd taskset
    kmod insmod rmmod modprobe lsmod modinfo depmod
    udevadm
)
HOST_TOOLS_DOC="${HOST_TOOLS[*]}"
# More host programs for one purpose (e.g. perf for scripts/profile.sh), space-separated.
read -ra EXTRA_TOOLS <<<"${RBLK_EXTRA_TOOLS:-}"
HOST_TOOLS+=("${EXTRA_TOOLS[@]}")
# Plain files copied from the host's /etc when present.
HOST_ETC_FILES=(mke2fs.conf)
# Host files copied as they are: systemd's persistent-storage rules, which `udevadm test` runs
# in the guest (the C driver's /dev/disk/by-id links, compared with rust_nvme_mq's).
HOST_DATA_FILES=(/usr/lib/udev/rules.d/60-persistent-storage.rules)
BUSYBOX_BIN=${RBLK_BUSYBOX:-/bin/busybox}
GZIP_LEVEL_BASE=6                    # userland part: built rarely, cached
GZIP_LEVEL_RUN=6                     # per-run part: small
CACHE_DIR="${RBLK_CACHE:-/var/cache/rust-blk}/initramfs"
# Bumped when the layout of the cached userland part changes in a way its key would not see.
BASE_FORMAT=1

TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=""
OUT=""
EXTRA_DIRS=()
GUEST_DIR=""
GUEST_DIR_DEFAULT="$TOP/tests/guest"
CMD=""

log() { echo "make-initramfs: $*" >&2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --build) need_arg "$@"; BUILD=$2; shift 2 ;;
        --out) need_arg "$@"; OUT=$2; shift 2 ;;
        --extra-modules) need_arg "$@"; EXTRA_DIRS+=("$2"); shift 2 ;;
        --guest-dir) need_arg "$@"; GUEST_DIR=$2; shift 2 ;;
        --cmd) [[ $# -ge 2 ]] || die "--cmd needs an argument"; CMD=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) unknown_arg "$1" ;;
    esac
done
[[ -n "$BUILD" ]] || usage_error "--build is required"
[[ -n "$OUT" ]] || usage_error "--out is required"
BUILD=$(readlink -f "$BUILD")
[[ -f "$BUILD/.config" && -f "$BUILD/Makefile" ]] || die "$BUILD is not a kernel build directory"
[[ -f "$BUILD/include/config/kernel.release" ]] || die "$BUILD has no include/config/kernel.release (kernel not built?)"
KREL=$(cat "$BUILD/include/config/kernel.release")
for d in "${EXTRA_DIRS[@]}"; do [[ -d "$d" ]] || die "--extra-modules $d is not a directory"; done
if [[ -z "$GUEST_DIR" ]]; then
    if [[ -d "$GUEST_DIR_DEFAULT" ]]; then GUEST_DIR=$GUEST_DIR_DEFAULT
    else log "note: $GUEST_DIR_DEFAULT does not exist, no /tests in the guest"; fi
else
    [[ -d "$GUEST_DIR" ]] || die "--guest-dir $GUEST_DIR is not a directory"
fi
for t in "$BUSYBOX_BIN" cpio gzip ldd depmod make; do command -v "$t" >/dev/null || die "host tool $t not found"; done
ldd "$BUSYBOX_BIN" >/dev/null 2>&1 && die "$BUSYBOX_BIN is dynamically linked (install busybox-static)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rblk-initramfs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Canonical guest path of a host path: resolve the directory (so /lib/x -> /usr/lib/x on a
# merged-/usr host) but keep the last component (a symlink stays a symlink).
declare -A CANON_DIR=()
canon() {  # sets CANON to the canonical guest path of host path $1
    local d=${1%/*} b=${1##*/}
    [[ -n "$d" ]] || d=/
    [[ -n "${CANON_DIR[$d]:-}" ]] || CANON_DIR[$d]=$(readlink -f "$d")
    CANON="${CANON_DIR[$d]%/}/$b"
}

# ---- 1. Collect the userland: regular files to copy and symlinks to recreate.
declare -A SEEN=()
FILES=()      # canonical host paths of regular files to copy
LINKS=()      # "path<TAB>target" symlinks to recreate
# add_path HOSTPATH [ldd]: record a file (following a chain of symlinks); with "ldd" also the
# shared libraries and dynamic loader ldd resolves for it (ldd already lists the whole closure,
# so libraries themselves are not run through ldd again).
add_path() {
    local CANON p
    canon "$1"; p=$CANON
    [[ -n "${SEEN[$p]:-}" ]] && return 0
    SEEN[$p]=1
    if [[ -L "$p" ]]; then
        local target; target=$(readlink "$p")
        LINKS+=("$p"$'\t'"$target")
        case "$target" in /*) add_path "$target" "${2:-}" ;; *) add_path "${p%/*}/$target" "${2:-}" ;; esac
        return 0
    fi
    [[ -f "$p" ]] || die "$p does not exist"
    case "$p" in *glibc-hwcaps*) log "warning: $p is a CPU-specific library; the TCG guest CPU may lack its instructions" ;; esac
    FILES+=("$p")
    [[ "${2:-}" == ldd ]] || return 0
    local line lib deps=()
    mapfile -t deps < <(ldd "$p" 2>/dev/null || true)
    [[ ${#deps[@]} -gt 0 && "${deps[0]}" != *"not a dynamic executable"* ]] || return 0
    for line in "${deps[@]}"; do
        line=${line#"${line%%[![:space:]]*}"}
        lib=""
        case "$line" in
            *"=> not found"*) die "$p: missing library: $line" ;;
            *"=> /"*) lib=${line#*=> }; lib=${lib%% (*} ;;
            /*) lib=${line%% (*} ;;             # the dynamic loader
        esac
        if [[ -n "$lib" ]]; then add_path "$lib"; fi
    done
    return 0
}
for t in "${HOST_TOOLS[@]}"; do
    p=$(command -v "$t") || die "host tool $t not found (see scripts/setup-host.sh)"
    add_path "$p" ldd
done
for f in "${HOST_DATA_FILES[@]}"; do
    [[ -f "$f" ]] || die "host file $f not found (see scripts/setup-host.sh)"
    add_path "$f"
done
ETC_FILES=()
for f in "${HOST_ETC_FILES[@]}"; do [[ -f "/etc/$f" ]] && ETC_FILES+=("/etc/$f"); done

# ---- 2. The /init script (part of the cached userland).
cat >"$WORK/init" <<'INIT'
#!/bin/sh
# rust-blk guest init (generated by scripts/make-initramfs.sh).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=linux
# Without /dev/console in the archive the kernel starts us with no stdio: fix that first.
if ! [ -t 1 ]; then
    mount -t devtmpfs devtmpfs /dev 2>/dev/null
    exec </dev/console >/dev/console 2>&1
fi
mnt() { mkdir -p "$4"; mount -t "$1" -o "$3" "$2" "$4" || echo "rblk-init: WARNING: mount -t $1 $4 failed"; }
mnt proc proc nosuid,nodev,noexec /proc
echo "rblk-init: started at $(cut -d' ' -f1 /proc/uptime) s uptime"
mnt sysfs sysfs nosuid,nodev,noexec /sys
grep -q ' /dev devtmpfs ' /proc/mounts || mnt devtmpfs devtmpfs mode=0755,nosuid /dev
mnt debugfs debugfs nosuid,nodev,noexec /sys/kernel/debug
mnt configfs configfs nosuid,nodev,noexec /sys/kernel/config
mnt tmpfs tmpfs mode=1777,nosuid,nodev /tmp
mnt tmpfs tmpfs mode=0755,nosuid,nodev /run
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=0620 devpts /dev/pts 2>/dev/null || true
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm 2>/dev/null || true
# devtmpfs has no fd links; bash process substitution needs /dev/fd.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
[ -e /dev/stdin ] || ln -s /proc/self/fd/0 /dev/stdin
[ -e /dev/stdout ] || ln -s /proc/self/fd/1 /dev/stdout
[ -e /dev/stderr ] || ln -s /proc/self/fd/2 /dev/stderr
hostname rblk-guest
cd /

status=0
if [ -s /rblk-cmd ]; then
    echo "rblk-init: running /rblk-cmd at $(cut -d' ' -f1 /proc/uptime) s uptime"
    bash /rblk-cmd </dev/null || status=$?
else
    echo "rblk-init: no /rblk-cmd: interactive shell (exit it to power off)"
    setsid cttyhack sh -l || status=$?
fi
# Quiet the kernel console so no printk splits the status line, then report and power off.
dmesg -n 1 2>/dev/null || true
sync
# The kernel log after the last test of a suite (its end mark, tests/guest/lib.sh's run_test):
# what the suite's end logged (modules it left loaded, its last unloads), each line prefixed
# "RBLK-KLOG ", for the host's check (scripts/run-tests.sh: <boot>_shutdown_clean).
dmesg | awk '/\] rblk-test-end [a-z0-9_]+ [0-9]+$/ { n = NR } { l[NR] = $0 }
    END { if (n) for (i = n + 1; i <= NR; i++) print "RBLK-KLOG " l[i] }'
printf '\nRBLK-EXIT %d\n' "$status"
# The power-off's own warnings (the drivers' shutdown callbacks) go to the console from here:
# loglevel 5 prints KERN_WARNING and worse.
dmesg -n 5 2>/dev/null || true
poweroff -f
# poweroff -f does not return; if it does, init exits, the kernel panics (panic=-1 reboots, and
# QEMU's -no-reboot then stops).
sleep 5
INIT
chmod 755 "$WORK/init"

# ---- 3. Userland part: cached, keyed by the script, busybox and every copied file's identity.
key=$( {
    echo "format $BASE_FORMAT"
    sha256sum "$0" "$WORK/init" | cut -d' ' -f1
    stat -Lc '%n %s %Y' "$BUSYBOX_BIN" "${FILES[@]}" "${ETC_FILES[@]}"
    printf '%s\n' "${LINKS[@]}"
} | sha256sum | cut -c1-16)
BASE="$CACHE_DIR/base-$key.cpio.gz"
if [[ -s "$BASE" ]]; then
    log "userland: cached $BASE"
else
    log "userland: building $BASE (${#FILES[@]} files)"
    R="$WORK/base"
    mkdir -p "$R"/usr/{bin,sbin,lib,lib64} "$R"/{dev,proc,sys,tmp,run,root,etc,mnt}
    # The kernel opens /dev/console for /init before /init can mount devtmpfs.
    mknod -m 600 "$R/dev/console" c 5 1 2>/dev/null || log "warning: cannot mknod dev/console (not root?); /init reopens it"
    mknod -m 666 "$R/dev/null" c 1 3 2>/dev/null || true
    for d in bin sbin lib lib64; do ln -s "usr/$d" "$R/$d"; done
    for f in "${FILES[@]}"; do
        mkdir -p "$R$(dirname "$f")"
        cp -L --preserve=mode "$f" "$R$f"
    done
    for l in "${LINKS[@]}"; do
        path=${l%%$'\t'*}; target=${l#*$'\t'}
        [[ -e "$R$path" || -L "$R$path" ]] && continue
        mkdir -p "$R$(dirname "$path")"
        ln -s "$target" "$R$path"
    done
    cp "$BUSYBOX_BIN" "$R/usr/bin/busybox"
    # Busybox applets where no host binary of that name was copied (bin/X -> usr/bin/X etc.).
    while read -r applet; do
        case "$applet" in
            bin/*|sbin/*) applet="usr/$applet" ;;
        esac
        [[ -e "$R/$applet" || -L "$R/$applet" ]] && continue
        mkdir -p "$R/$(dirname "$applet")"
        ln -s /usr/bin/busybox "$R/$applet"
    done < <("$BUSYBOX_BIN" --list-full)
    for f in "${ETC_FILES[@]}"; do cp "$f" "$R$f"; done
    echo 'root:x:0:0:root:/root:/bin/bash' >"$R/etc/passwd"
    printf 'root:x:0:\ntty:x:5:\ndisk:x:6:\n' >"$R/etc/group"
    ln -s /proc/self/mounts "$R/etc/mtab"
    echo 'PS1="rblk-guest:\w# "' >"$R/etc/profile"
    cp "$WORK/init" "$R/init"
    mkdir -p "$CACHE_DIR"
    (cd "$R" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
        gzip -n -"$GZIP_LEVEL_BASE" >"$BASE.tmp.$$"
    mv -f "$BASE.tmp.$$" "$BASE"
    # Keep only the current userland part.
    find "$CACHE_DIR" -maxdepth 1 -name 'base-*.cpio.gz' ! -name "base-$key.cpio.gz" -mmin +1 -delete
    rm -rf "$R"
fi

# ---- 4. Per-run part: kernel modules, extra modules, tests, command.
S="$WORK/run"
mkdir -p "$S"
if grep -q '^CONFIG_MODULES=y' "$BUILD/.config"; then
    [[ -f "$BUILD/modules.order" ]] || die "$BUILD/modules.order missing (modules not built?)"
    make -s -C "$BUILD" modules_install INSTALL_MOD_PATH="$S" INSTALL_MOD_STRIP=1 LLVM="$RBLK_LLVM" \
        DEPMOD=/bin/true >"$WORK/modinst.log" 2>&1 ||
        { cat "$WORK/modinst.log" >&2; die "modules_install failed"; }
    # Newer kbuild may install under usr/lib/modules (KERNEL_MODULE_DIRECTORY); depmod wants lib/.
    if [[ -d "$S/usr/lib/modules" && ! -d "$S/lib/modules" ]]; then
        mkdir -p "$S/lib"; mv "$S/usr/lib/modules" "$S/lib/modules"; rmdir -p "$S/usr/lib" 2>/dev/null || true
    fi
    [[ -d "$S/lib/modules/$KREL" ]] || die "modules_install did not create lib/modules/$KREL"
    rm -f "$S/lib/modules/$KREL/build" "$S/lib/modules/$KREL/source"
    log "modules: $(find "$S/lib/modules/$KREL" -name '*.ko*' | wc -l) from $BUILD ($KREL)"
else
    mkdir -p "$S/lib/modules/$KREL"
fi
# Extra modules live in /lib/modules/<release>/extra (so depmod indexes them and "modprobe
# rust_pmem" works too) and /lib/modules/extra links there (the documented insmod path).
mkdir -p "$S/lib/modules/$KREL/extra"
ln -s "$KREL/extra" "$S/lib/modules/extra"
n_extra=0
for d in "${EXTRA_DIRS[@]}"; do
    n=0
    for ko in "$d"/*.ko; do
        [[ -f "$ko" ]] || continue
        cp "$ko" "$S/lib/modules/$KREL/extra/"; n=$((n + 1))
    done
    if [[ $n -gt 0 ]]; then log "extra modules: $n from $d"; else log "warning: no *.ko in --extra-modules $d"; fi
    n_extra=$((n_extra + n))
done
if grep -q '^CONFIG_MODULES=y' "$BUILD/.config"; then
    depmod -b "$S" "$KREL" || die "depmod failed"
fi
# Merged /usr: the userland part has lib -> usr/lib, so put everything under usr/lib here and
# never ship a real "lib" directory that would shadow the link.
mkdir -p "$S/usr"
mv "$S/lib" "$S/usr/lib"
if [[ -n "$GUEST_DIR" ]]; then
    mkdir -p "$S/tests"
    cp -a "$GUEST_DIR"/. "$S/tests/"
    log "tests: $GUEST_DIR -> /tests"
fi
if [[ -n "$CMD" ]]; then
    printf '%s\n' "$CMD" >"$S/rblk-cmd"
fi

# The kernel unpacks concatenated (individually compressed) cpio archives in order; later
# entries add to / override earlier ones.
mkdir -p "$(dirname "$OUT")"
{
    cat "$BASE"
    (cd "$S" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -n -"$GZIP_LEVEL_RUN"
} >"$OUT.tmp.$$"
mv -f "$OUT.tmp.$$" "$OUT"
log "wrote $OUT ($(du -h "$OUT" | cut -f1))"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# DAX on rust_pmem, on the labelled NVDIMM (guest.sh --labelled), in two boots:
#   write  make an fsdax namespace (rust_pmem binds its pfn device: a disk with a DAX device),
#          block I/O on it, ext4 mounted with -o dax=always, a file written through mmap
#   check  after the reboot: fsck clean, the file's contents are back, a bad block under the
#          file fails DAX reads until a recovery write clears it, and destroying the namespace
#          removes the disk
# The label area and the namespace stay in the NVDIMM's image between the boots. Each phase
# starts from the labels it finds: "write" destroys what other suites left in the region.
source /tests/lib.sh
suite_help "$@"

# SEED (a positive integer, a new one for each run: scripts/run-tests.sh takes it from the
# clock) makes the file's pattern this run's: a file an earlier run left does not verify.
usage() { echo "usage: $0 write|check SEED"; }
case "${1:-}" in
    write|check) PHASE=$1 ;;
    *) usage >&2; exit 2 ;;
esac
SEED=${2:-}
[[ $SEED =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }

MNT=/mnt/dax
NS_SIZE_MB=64
FILE=$MNT/pattern
FILE_BYTES=$((16 << 20))

# fsdax_disk REGION: the disk of the region's fsdax namespace, waiting up to 5 s for it (the
# pfn device is registered asynchronously when rust_pmem finds the namespace's info block).
fsdax_disk() {
    local i out disk
    for i in $(seq 50); do
        out=$(ndctl list -N -r "$1")
        disk=$(echo "$out" | grep -oE '"blockdev": ?"[^"]*"' | cut -d'"' -f4 || true)
        if [[ -n $disk ]]; then
            echo "$out" | grep -qE '"mode": ?"fsdax"' || fail "namespace is not in fsdax mode: $out"
            echo "$disk"
            return 0
        fi
        sleep 0.1
    done
    fail "no fsdax namespace with a disk in $1: $out"
}

# rust_pmem made DISK with a DAX device (its probe message).
expect_dax_disk() {
    [[ $1 == rpmem* ]] || fail "the fsdax namespace's disk is '$1', not rust_pmem's"
    wait_dev /dev/$1
    klog | grep -qE "$1: .*dax=true" || fail "rust_pmem did not report a DAX device for $1"
    expect_eq "queue/dax of $1" "$(cat /sys/block/$1/queue/dax)" 1
}

cached_kb() { awk '/^Cached:/ { print $2 }' /proc/meminfo; }

test_dax_fsdax_namespace_rust_pmem_disk() {
    local r seed pfn out disk
    r=$(labelled_region)
    insmod $MODDIR/rust_pmem.ko
    ndctl destroy-namespace all -r "$r" -f >&2 || true
    # ndctl configures the namespace seed and the pfn seed, then binds the pfn device through
    # every nd driver's bind file: the overrides make rust_pmem the one.
    seed=$(cat $ND/devices/$r/namespace_seed)
    pfn=$(cat $ND/devices/$r/pfn_seed)
    echo rust_pmem >$ND/devices/$seed/driver_override
    echo rust_pmem >$ND/devices/$pfn/driver_override
    out=$(ndctl create-namespace -r "$r" -m fsdax -s ${NS_SIZE_MB}M) || fail "create-namespace: $out"
    echo "$out"
    disk=$(fsdax_disk "$r")
    expect_dax_disk "$disk"
    expect_eq "driver of $pfn" "$(driver_of "$pfn")" rust_pmem
    # The disk is the data part: the info block and the struct pages are not in it.
    local size
    size=$(bytes_of "$disk")
    ((size > 0 && size < NS_SIZE_MB << 20)) ||
        fail "size of $disk is $size, want less than the namespace's ${NS_SIZE_MB} MiB"
    fio_verify /dev/$disk
    echo "$disk" >/tmp/dax-disk
}

test_dax_ext4_mmap_write_bypasses_page_cache() {
    local disk c0 c1 grew
    disk=$(cat /tmp/dax-disk)
    # DAX needs the filesystem block size to be the page size (mke2fs picks 1k for small disks).
    mkfs.ext4 -q -F -b 4096 /dev/$disk
    mkdir -p $MNT
    mount -o dax=always /dev/$disk $MNT
    c0=$(cached_kb)
    $TOOLS/dax_file write $FILE $FILE_BYTES $SEED
    c1=$(cached_kb)
    $TOOLS/dax_file statx $FILE || fail "statx: no STATX_ATTR_DAX on $FILE"
    grew=$((c1 - c0))
    echo "page cache grew by $grew kB writing $((FILE_BYTES >> 10)) kB with DAX" | tee -a /tmp/dax-notes
    ((grew < FILE_BYTES / 1024 / 4)) || fail "page cache grew by $grew kB: the file is cached"
    umount $MNT
    # Control: the same write without DAX fills the page cache, so the check above can tell.
    mount -o dax=never /dev/$disk $MNT
    if $TOOLS/dax_file statx $MNT/lost+found; then fail "DAX with dax=never"; fi
    c0=$(cached_kb)
    $TOOLS/dax_file write $MNT/control $FILE_BYTES 1
    c1=$(cached_kb)
    echo "page cache grew by $((c1 - c0)) kB writing $((FILE_BYTES >> 10)) kB without DAX" |
        tee -a /tmp/dax-notes
    ((c1 - c0 >= FILE_BYTES / 1024 / 2)) || fail "the control write did not fill the page cache"
    rm $MNT/control
    $TOOLS/dax_file check $FILE $FILE_BYTES $SEED
    umount $MNT
    e2fsck -fn /dev/$disk || fail "e2fsck found errors on $disk"
}

# The region is synchronous (an ACPI NVDIMM), so rust_pmem marks its DAX device synchronous and
# ext4 grants MAP_SYNC mappings; a store through one keeps the file intact. Control: the same
# file without DAX is refused (EOPNOTSUPP), so the check can tell.
test_dax_map_sync_granted() {
    local disk
    disk=$(cat /tmp/dax-disk)
    mount -o dax=always /dev/$disk $MNT
    $TOOLS/dax_file mapsync $FILE || fail "MAP_SYNC refused on $FILE"
    $TOOLS/dax_file check $FILE $FILE_BYTES $SEED || fail "a MAP_SYNC store changed the file"
    umount $MNT
    mount -o dax=never /dev/$disk $MNT
    local refused
    if refused=$($TOOLS/dax_file mapsync $FILE); then fail "MAP_SYNC granted with dax=never"; fi
    echo "dax=never: $refused" | tee -a /tmp/dax-notes
    umount $MNT
    e2fsck -fn /dev/$disk || fail "e2fsck found errors on $disk"
}

test_dax_rmmod_removes_fsdax_disk() {
    local disk
    disk=$(cat /tmp/dax-disk)
    unload_module rust_pmem
    wait_gone /dev/$disk
}

test_dax_ext4_mmap_data_survives_reboot() {
    local r disk
    r=$(find_labelled_region) || fail "no labelled region (boot with guest.sh --labelled)"
    insmod $MODDIR/rust_pmem.ko
    disk=$(fsdax_disk "$r")
    expect_dax_disk "$disk"
    e2fsck -fn /dev/$disk || fail "e2fsck found errors on $disk after the reboot"
    mkdir -p $MNT
    mount -o dax=always /dev/$disk $MNT
    $TOOLS/dax_file statx $FILE || fail "statx: no STATX_ATTR_DAX on $FILE"
    $TOOLS/dax_file check $FILE $FILE_BYTES $SEED || fail "the file's contents did not survive"
    $TOOLS/dax_file mapsync $FILE || fail "MAP_SYNC refused on $FILE after the reboot"
    $TOOLS/dax_file check $FILE $FILE_BYTES $SEED || fail "a MAP_SYNC store changed the file"
    umount $MNT
    echo "$disk" >/tmp/dax-disk
}

# A bad block under a DAX file: reads of that page fail with EIO (direct_access refuses known
# poison), the neighbouring page reads fine, and a whole-page write over it is a recovery write
# that clears the bad block and stores the data.
test_dax_bad_block_fails_read_recovery_write_clears() {
    local disk phys sector
    disk=$(cat /tmp/dax-disk)
    mount -o dax=always /dev/$disk $MNT
    phys=$($TOOLS/dax_file fiemap $FILE)
    sector=$((phys / 512))
    echo "$sector 8" >/sys/block/$disk/badblocks
    expect_eq "badblocks of $disk" "$(cat /sys/block/$disk/badblocks)" "$sector 8"
    if dd if=$FILE of=/dev/null bs=4096 count=1 2>/tmp/dd.err; then
        fail "read of the bad page succeeded"
    fi
    grep -q 'Input/output error' /tmp/dd.err || fail "read of the bad page: $(cat /tmp/dd.err), want EIO"
    dd if=$FILE of=/dev/null bs=4096 skip=1 count=1 || fail "read of the next page failed"
    head -c 4096 /dev/zero | tr '\0' '\253' >/tmp/page
    dd if=/tmp/page of=$FILE bs=4096 count=1 conv=notrunc || fail "recovery write failed"
    expect_eq "badblocks of $disk after the write" "$(cat /sys/block/$disk/badblocks)" ""
    dd if=$FILE of=/tmp/page.back bs=4096 count=1
    cmp /tmp/page /tmp/page.back || fail "the recovery write's data did not land"
    umount $MNT
    e2fsck -fn /dev/$disk || fail "e2fsck found errors on $disk"
}

test_dax_destroy_namespace_removes_disk() {
    local r disk
    r=$(find_labelled_region)
    disk=$(cat /tmp/dax-disk)
    # A failed test before may have left the filesystem mounted.
    if grep -q " $MNT " /proc/mounts; then umount $MNT; fi
    ndctl destroy-namespace all -r "$r" -f
    wait_gone /dev/$disk
    ndctl list -N -r "$r" | tee /tmp/list
    if grep -q '"blockdev"' /tmp/list; then fail "namespaces left after destroy-namespace"; fi
    unload_module rust_pmem
    modprobe -r nd_pmem 2>/dev/null || true
}

case $PHASE in
    write)
        t dax_fsdax_namespace_rust_pmem_disk
        t dax_ext4_mmap_write_bypasses_page_cache
        t dax_map_sync_granted
        t dax_rmmod_removes_fsdax_disk ;;
    check)
        t dax_ext4_mmap_data_survives_reboot
        t dax_bad_block_fails_read_recovery_write_clears
        t dax_destroy_namespace_removes_disk ;;
esac
t_kernel_clean no_kernel_warnings
# Measurements, for the log (not verdicts).
if [[ -e /tmp/dax-notes ]]; then sed "s/^/note: /" /tmp/dax-notes; fi
exit 0

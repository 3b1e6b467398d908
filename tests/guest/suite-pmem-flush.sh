#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rust_pmem's durability settings, against the C nd_pmem on the same regions. Boot with
# scripts/guest.sh --virtio-pmem (a virtio-pmem-pci device: an asynchronous region, whose flush
# is a request to the host), and --trace virtio_pmem_flush_request to see the C driver's flush
# requests reach the host (scripts/run-tests.sh checks that trace).
#  - the QEMU NVDIMM: queue/fua and queue/write_cache of rust_pmem's disk are what nd_pmem shows
#    for the same namespace (C: write cache always, FUA only with flush hints, nvdimm_has_flush);
#  - the virtio-pmem region: rust_pmem refuses it with a message (its queue_rq cannot wait for
#    the host's flush), the namespace stays free, and nd_pmem serves it, fsync included.
source /tests/lib.sh
suite_help "$@"

# region_of KIND: the region whose device path contains KIND (ACPI0012 for the NFIT NVDIMM,
# virtio for virtio-pmem).
region_of() {
    local r
    for r in $ND/devices/region*; do
        readlink -f "$r" | grep -q "$1" && { echo "${r##*/}"; return 0; }
    done
    return 1
}
# The io namespace of a label-less region N is namespaceN.0.
namespace_of() { local r; r=$(region_of "$1") || return 1; echo "namespace${r#region}.0"; }
# disk_of NAMESPACE: the block disk of the driver bound to NAMESPACE (waits for it).
disk_of() {
    local i
    for i in $(seq 50); do
        ls "$ND/devices/$1/block" 2>/dev/null | head -n 1 | grep . && return 0
        sleep 0.1
    done
    fail "no disk on $1 (driver: $(driver_of "$1"))"
}
unload_all() { unload_module rust_pmem 2>/dev/null || true; modprobe -r nd_pmem 2>/dev/null || true; }

test_pmem_flush_regions_present() {
    region_of ACPI0012 >/dev/null || fail "no NVDIMM region: $(ls $ND/devices)"
    region_of virtio >/dev/null || fail "no virtio-pmem region (boot with guest.sh --virtio-pmem): $(ls $ND/devices)"
}

test_pmem_flush_fua_and_write_cache_like_c() {
    local ns rust c disk
    ns=$(namespace_of ACPI0012)
    unload_all
    insmod "$MODDIR/rust_pmem.ko"
    disk=$(disk_of "$ns")
    rust="$(cat /sys/block/$disk/queue/fua) $(cat /sys/block/$disk/queue/write_cache)"
    unload_module rust_pmem
    modprobe nd_pmem
    disk=$(disk_of "$ns")
    c="$(cat /sys/block/$disk/queue/fua) $(cat /sys/block/$disk/queue/write_cache)"
    modprobe -r nd_pmem
    echo "fua write_cache: rust_pmem '$rust', nd_pmem '$c'"
    expect_eq "rust_pmem's fua and write_cache vs nd_pmem's on $ns" "$rust" "$c"
}

test_pmem_flush_async_region_refused() {
    local ns
    ns=$(namespace_of virtio)
    unload_all
    klog_mark
    insmod "$MODDIR/rust_pmem.ko"
    # The NVDIMM's namespace is bound; the virtio-pmem one is refused.
    disk_of "$(namespace_of ACPI0012)" >/dev/null
    # The refusal's message says rust_pmem has seen the namespace (insmod returns after the
    # synchronous probes anyway); only then does "not bound" mean refused.
    wait_klog "asynchronous region \(virtio-pmem\).*not binding"
    klog | grep "asynchronous region"
    expect_eq "driver of the virtio-pmem namespace $ns" "$(driver_of "$ns")" none
    # Asking for it explicitly is refused too.
    if echo "$ns" >/sys/bus/nd/drivers/rust_pmem/bind 2>/tmp/err; then fail "bind of $ns succeeded"; fi
    cat /tmp/err
    unload_module rust_pmem
}

# nd_pmem serves the virtio-pmem region: data written with an fsync reads back after a reload
# of nd_pmem; scripts/run-tests.sh checks in QEMU's trace that the fsync's flush reached the
# host (virtio_pmem_flush_request). (nd_pmem is bio-based: its flushes are not counted in
# /sys/block/DISK/stat.)
test_c_nd_pmem_serves_async_region() {
    local ns disk
    ns=$(namespace_of virtio)
    unload_all
    modprobe nd_pmem
    disk=$(disk_of "$ns")
    echo "nd_pmem: $ns -> $disk, fua $(cat /sys/block/$disk/queue/fua), write_cache $(cat /sys/block/$disk/queue/write_cache)"
    head -c $((16 * 4096)) /dev/urandom >/tmp/vpmem.data
    dd if=/tmp/vpmem.data of=/dev/$disk bs=4k conv=fsync status=none
    modprobe -r nd_pmem
    modprobe nd_pmem
    disk=$(disk_of "$ns")
    cmp <(dd if=/dev/$disk bs=4k count=16 iflag=direct status=none) /tmp/vpmem.data ||
        fail "what was written to $disk does not read back after a reload of nd_pmem"
    modprobe -r nd_pmem
}

t pmem_flush_regions_present
t pmem_flush_fua_and_write_cache_like_c
t pmem_flush_async_region_refused
t c_nd_pmem_serves_async_region

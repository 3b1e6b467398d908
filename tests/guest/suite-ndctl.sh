#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ndctl namespace management with rust_pmem, on a labelled NVDIMM (guest.sh --labelled): the
# namespaces that ndctl create-namespace writes to the labels get rust_pmem disks, and
# destroy-namespace removes them. The unlabelled NVDIMM's region0 is left alone.
source /tests/lib.sh
suite_help "$@"

# create_ns REGION SIZE: create a raw namespace for rust_pmem, print its disk name.
create_ns() {
    local seed out
    seed=$(cat $ND/devices/$1/namespace_seed)
    # ndctl enables the new namespace by trying every nd driver's bind file in turn (and loads
    # nd_pmem for it): the override on the seed makes rust_pmem the one that binds.
    echo rust_pmem >$ND/devices/$seed/driver_override
    out=$(ndctl create-namespace -r "$1" -m raw -s "$2") || fail "create-namespace: $out"
    echo "$out" >&2
    echo "$out" | grep -oE '"blockdev": ?"[^"]*"' | cut -d'"' -f4
}

test_ndctl_create_destroy_namespaces_rust_pmem() {
    local r a b
    r=$(labelled_region)
    insmod $MODDIR/rust_pmem.ko
    # Namespaces a previous, interrupted run left in the labels.
    ndctl destroy-namespace all -r "$r" -f || true
    a=$(create_ns "$r" 32M)
    [[ $a == rpmem* ]] || fail "first namespace's disk is '$a', not rust_pmem's"
    wait_dev /dev/$a
    b=$(create_ns "$r" 32M)
    [[ $b == rpmem*.* ]] || fail "second namespace's disk is '$b', want rpmem<region>.<n>"
    wait_dev /dev/$b
    expect_eq "size of $a" "$(bytes_of $a)" $((32 << 20))
    fio_verify /dev/$a
    fio_verify /dev/$b
    ndctl list -N -r "$r" | tee /tmp/list
    grep -qE "\"blockdev\": ?\"$a\"" /tmp/list || fail "ndctl list does not show $a"
    grep -qE "\"blockdev\": ?\"$b\"" /tmp/list || fail "ndctl list does not show $b"
    ndctl destroy-namespace all -r "$r" -f
    wait_gone /dev/$a
    wait_gone /dev/$b
    ndctl list -N -r "$r" | tee /tmp/list
    if grep -q '"blockdev"' /tmp/list; then fail "namespaces left after destroy-namespace"; fi
    unload_module rust_pmem
    modprobe -r nd_pmem 2>/dev/null || true
}

t ndctl_create_destroy_namespaces_rust_pmem
t_kernel_clean no_kernel_warnings

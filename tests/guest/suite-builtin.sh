#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The kernel with the drivers built in (Kconfig), booted with rust_pmem.nowait=1.
source /tests/lib.sh
suite_help "$@"

test_builtin_kernel_boots_with_drivers() {
    wait_dev /dev/rpmem0
    [[ -d /sys/module/rust_pmem ]] || fail "rust_pmem is not in the kernel"
    [[ ! -e /sys/module/rust_pmem/refcnt ]] || fail "rust_pmem is a loadable module, not built in"
    expect_eq "nowait from the command line" "$(param rust_pmem nowait)" Y
    [[ -d /sys/module/rust_nvme_mq ]] || fail "rust_nvme_mq is not in the kernel"
    $TOOLS/nowait_read /dev/rpmem0 >/dev/null || fail "RWF_NOWAIT read refused"
    fio_verify /dev/rpmem0 --size=32m
    kernel_clean
}
test_builtin_nvme_binds_and_verifies() {
    wait_dev /dev/rnvme0n1
    [[ ! -e /sys/module/rust_nvme_mq/refcnt ]] || fail "rust_nvme_mq is a loadable module"
    fio_verify /dev/rnvme0n1 --size=32m
    kernel_clean
}
t builtin_kernel_boots_with_drivers
t builtin_nvme_binds_and_verifies

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# PCIe Advanced Error Reporting: errors QEMU injects into the q35 root port (QEMU id rp0) above
# the NVMe controller, recovered by the AER core through the driver's error handlers (QEMU's
# NVMe has no AER capability of its own: an error injected there sends no message). Boot with scripts/guest.sh --pcie-port: the guest asks for an injection with a
# console line "RBLK-HMP pcie_aer_inject_error ..." that scripts/qemu-run.sh passes to QEMU's
# monitor. Every test loads the driver itself and leaves it unloaded.
#   bash /tests/suite-nvme-aer.sh        run every test
#   bash /tests/suite-nvme-aer.sh --help
# (No `set -e` here: `t` runs each test in a subshell with `set -euo pipefail` and reports it.)
. /tests/lib.sh
suite_help "$@"
. /tests/nvme-lib.sh

# inject ERROR PATTERN: have QEMU inject ERROR (a name of QEMU's pcie_aer_inject_error: RCVR is
# correctable, UNSUP uncorrectable and non-fatal, DLP uncorrectable and fatal, by the root
# port's severities) into the root port above the controller, and wait (60 s at most) for a
# kernel log line matching PATTERN, which says the kernel took it.
inject() {
    echo "RBLK-HMP pcie_aer_inject_error rp0 $1" >/dev/console
    wait_klog "$2" 60
}

# count PATTERN: the kernel log lines since the mark matching PATTERN (grep -E).
count() { klog | grep -cE "$1" || true; }

# recoveries N: wait (60 s at most) until the AER core has ended N recoveries since the mark.
recoveries() {
    local i
    for i in $(seq 600); do
        (($(count "device recovery (successful|failed)") >= $1)) && return 0
        sleep 0.1
    done
    fail "the AER core did not end recovery $1 within 60 s"
}

# errors_under_fio DISK: under fio on /dev/DISK (random writes, verified), the three kinds of
# error one after the other, each once fio's I/O flows: a correctable one (RCVR), a non-fatal
# uncorrectable one (UNSUP), a fatal one (DLP; the AER core then resets the link below the root
# port, and QEMU the controller). Waits for the AER core to finish each recovery, then for fio
# to finish (and verify) the loop it is in; checks what the AER core logged: one correctable
# error, both recoveries successful, no failed one and no I/O error.
errors_under_fio() {
    local disk=$1
    DEV=/dev/$disk fio_until_stopped aer
    wait_io "$disk"
    inject RCVR "severity=Correctable"
    wait_io "$disk"
    inject UNSUP "severity=Uncorrectable \\(Non-Fatal\\)"
    recoveries 1
    wait_io "$disk"
    inject DLP "severity=Uncorrectable \\(Fatal\\)"
    recoveries 2
    kill -0 $FIO_PID 2>/dev/null || fail "fio ended before the fatal error was recovered (see /tmp/aer.out)"
    wait_io "$disk"
    fio_stop
    fio_done
    klog | grep -E "nvme0|AER:|recovery" | tail -n 20
    expect_eq "correctable errors logged" "$(count 'severity=Correctable')" 1
    expect_eq "recoveries the AER core reports successful" "$(count 'device recovery successful')" 2
    ! klog | grep -iE "I/O error|recovery failed" || fail "errors in the kernel log"
}

# rust_nvme_mq: the non-fatal error is given to the driver (error_detected, normal channel),
# which has nothing to recover: the controller keeps running. For the fatal one the driver
# takes the controller out of service (error_detected, frozen channel: requests requeued), and
# after the link reset slot_reset restores the configuration space and brings the controller
# back. No command may wait for its timeout, and every request completes.
test_nvme_aer_recovery_under_io() {
    klog_mark
    load_nvme
    errors_under_fio rnvme0n1
    expect_eq "non-fatal errors given to the driver" "$(count 'rnvme0: non-fatal PCI error reported')" 1
    expect_eq "controller taken out of service for the link reset" "$(count 'rnvme0: PCI error recovery: controller disabled')" 1
    expect_eq "controller back after the link reset" "$(count 'rnvme0: PCI error recovery: controller back')" 1
    ! klog | grep -iE "rnvme0:.*(fail|timed out|abort|not completed|not back)" || fail "errors in the kernel log"
    all_completed
    unload_nvme
}

# The C driver, bound to the controller after rust_nvme_mq (which is how a user switches
# drivers), recovers from the same errors. It failed while rust_nvme_mq left the function
# enabled at its unbind: C's recovery then disabled its controller twice and its disk's queue
# stayed frozen after the link reset (fio blocked, nothing in flight).
test_c_nvme_aer_recovery_after_rust() {
    klog_mark
    modprobe nvme
    wait_dev /dev/nvme0n1
    errors_under_fio nvme0n1
    expect_eq "controllers C reset for the link reset" "$(count 'nvme nvme0: frozen state error detected')" 1
    rmmod nvme
}

t nvme_aer_recovery_under_io
t c_nvme_aer_recovery_after_rust
t_kernel_clean nvme_aer_no_kernel_warnings

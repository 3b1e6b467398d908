#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Check, from the NVMe controller's side, that the driver shut it down like the C driver: in the
# QEMU trace of a boot (scripts/guest.sh --trace "$NVME_SHUTDOWN_TRACE_EVENTS"), after the last
# controller enable, every I/O submission queue the driver created was deleted (Delete SQ), then
# every I/O completion queue (Delete CQ), and only then was CC.SHN set, with the controller
# still enabled until then. Prints PASS/FAIL lines named NAME_*.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

usage() {
    cat <<USAGE
Usage: $0 TRACE_FILE NAME

TRACE_FILE: QEMU's trace of one boot with at least the events
  $NVME_SHUTDOWN_TRACE_EVENTS
(scripts/guest.sh --trace writes it to LOG.trace). NAME prefixes the PASS/FAIL lines.
USAGE
}
NVME_SHUTDOWN_TRACE_EVENTS=pci_nvme_mmio_start_success,pci_nvme_create_sq,pci_nvme_del_sq,pci_nvme_del_cq,pci_nvme_mmio_shutdown_set,pci_nvme_mmio_stopped
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --events) echo "$NVME_SHUTDOWN_TRACE_EVENTS"; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
esac
[[ $# == 2 ]] || usage_error "need LOG.trace and NAME (got $# arguments)"
trace=$1 name=$2
if [[ ! -s "$trace" ]]; then
    echo "FAIL ${name}_trace_recorded"
    echo "    | no trace at $trace" >&2
    exit 0
fi
echo "PASS ${name}_trace_recorded"

# One verdict line per check; details on stderr.
awk -v name="$name" '
    function qid(s, key) {
        if (match(s, key "=[0-9]+")) return substr(s, RSTART + length(key) + 1, RLENGTH - length(key) - 1)
        return ""
    }
    { ev[NR] = $1; line[NR] = $0; if ($1 == "pci_nvme_mmio_start_success") last_enable = NR }
    END {
        if (!last_enable) { print "FAIL " name "_controller_enabled"; exit }
        ncreated = 0
        for (i = last_enable + 1; i <= NR; i++) {
            if (ev[i] == "pci_nvme_create_sq") { q = qid(line[i], "sqid"); created[q] = 1; ncreated++ }
            if (ev[i] == "pci_nvme_mmio_shutdown_set" && !shn) shn = i
            if (ev[i] == "pci_nvme_mmio_stopped" && !stopped) stopped = i
        }
        if (!shn) {
            print "FAIL " name "_cc_shn_set"
            print "    | no pci_nvme_mmio_shutdown_set after the last controller enable"
        } else if (stopped && stopped < shn) {
            print "FAIL " name "_cc_shn_set"
            print "    | the controller was disabled (CC.EN=0) before CC.SHN was set"
        } else {
            print "PASS " name "_cc_shn_set"
        }
        end = shn ? shn : NR
        bad = ""; first_cq = 0; last_sq = 0; nsq = 0; ncq = 0
        for (i = last_enable + 1; i < end; i++) {
            if (ev[i] == "pci_nvme_del_sq") { q = qid(line[i], "qid"); if (q == "") q = qid(line[i], "sqid"); dsq[q] = 1; nsq++; last_sq = i }
            if (ev[i] == "pci_nvme_del_cq") { q = qid(line[i], "cqid"); dcq[q] = 1; ncq++; if (!first_cq) first_cq = i }
        }
        for (q in created) {
            if (!(q in dsq)) bad = bad " SQ" q
            if (!(q in dcq)) bad = bad " CQ" q
        }
        if (ncreated == 0) {
            print "FAIL " name "_io_queues_deleted_before_shn"
            print "    | no I/O queue was created after the last controller enable"
        } else if (bad != "" || !shn) {
            print "FAIL " name "_io_queues_deleted_before_shn"
            print "    | not deleted before CC.SHN:" bad " (" ncreated " queues created)"
        } else if (first_cq && first_cq < last_sq) {
            print "FAIL " name "_io_queues_deleted_before_shn"
            print "    | a completion queue was deleted before the last submission queue"
        } else {
            print "PASS " name "_io_queues_deleted_before_shn"
            printf "    | %d I/O queues created, %d SQs and %d CQs deleted, then CC.SHN\n", ncreated, nsq, ncq
        }
    }' < <(grep -aoE 'pci_nvme_[a-z_]+( [^[:cntrl:]]*)?' "$trace" | sed 's/qemu-system.*//')

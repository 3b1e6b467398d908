#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Check, from the NVMe controller's side, that the driver shut it down like the C driver: in the
# QEMU trace of a boot (scripts/guest.sh --trace "$NVME_SHUTDOWN_TRACE_EVENTS"), after the last
# controller enable, every I/O submission queue the driver created was deleted (Delete SQ), then
# every I/O completion queue (Delete CQ), and only then was CC.SHN set, with the controller
# still enabled until then. Prints PASS/FAIL lines named NAME_*. First, that the trace is this
# boot's and holds its I/O: the writes the guest did (tests/guest/suite-nvme-shutdown.sh: 64
# writes of 64 KiB from byte offset 37 * 64 KiB, i.e. LBAs 4736 to 12927) are the only writes
# traced and cover that range exactly.
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
NVME_SHUTDOWN_TRACE_EVENTS=pci_nvme_write,pci_nvme_mmio_start_success,pci_nvme_create_sq,pci_nvme_del_sq,pci_nvme_del_cq,pci_nvme_mmio_shutdown_set,pci_nvme_mmio_stopped
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --events) echo "$NVME_SHUTDOWN_TRACE_EVENTS"; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
esac
[[ $# == 2 ]] || usage_error "need LOG.trace and NAME (got $# arguments)"
trace=$1 name=$2
# The guest's writes, in 512-byte LBAs (suite-nvme-shutdown.sh: dd bs=64k seek=37 count=64).
WRITE_FIRST=$((37 * 128)) WRITE_BLOCKS=$((64 * 128))
if [[ ! -s "$trace" ]]; then
    echo "FAIL ${name}_trace_has_the_writes"
    echo "    | no trace at $trace" >&2
    exit 0
fi
# pci_nvme_write lines: "... nsid 1 nlb N count BYTES lba 0xLBA"; every block the guest wrote is
# written once, no other block is.
writes=$(grep -aoE 'pci_nvme_write [^[:cntrl:]]*' "$trace" | sed 's/qemu-system.*//' | awk -v first="$WRITE_FIRST" -v n="$WRITE_BLOCKS" '
    function hex(s,   v, i) { v = 0; s = tolower(substr(s, 3))
        for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
        return v }
    { nlb = ""; lba = ""
      for (i = 1; i < NF; i++) { if ($i == "nlb") nlb = $(i + 1); if ($i == "lba") lba = $(i + 1) }
      if (nlb == "" || lba !~ /^0x/) { bad++; next }
      lba = hex(lba); cmds++
      for (b = lba; b < lba + nlb; b++) { if (b < first || b >= first + n) outside++; else if (seen[b]++) twice++ } }
    END { covered = 0; for (b in seen) covered++
          printf "%d write commands, %d of the %d blocks from LBA %d written, %d blocks written again, %d outside, %d lines unread\n",
              cmds, covered, n, first, twice + 0, outside + 0, bad + 0
          exit !(covered == n && !twice && !outside && !bad) }') && ok=1 || ok=0
if [[ $ok == 1 ]]; then
    echo "PASS ${name}_trace_has_the_writes"
else
    echo "FAIL ${name}_trace_has_the_writes"
fi
echo "    | $writes"

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

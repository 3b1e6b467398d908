#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVME_IOCTL_RESCAN (`nvme ns-rescan /dev/rnvme0`) on rust_nvme_mq. Boot with --nvme-subsys:
# the controller is in an NVMe subsystem with namespace 1 (the usual image) attached and
# namespace 2 (16M) detached, so that Namespace Attachment commands (through the admin
# passthrough) make namespaces come and go. Each test runs with `set -euo pipefail` (lib.sh's
# `t`); the suite itself does not stop at a failed test.
. /tests/lib.sh
suite_help "$@"
. /tests/nvme-lib.sh

CDEV=/dev/rnvme0
DEV2=/dev/rnvme0n2
# The namespace identity attributes of the C driver's disks that rust_nvme_mq has too.
NS_ATTRS="wwid uuid nguid eui csi nsid metadata_bytes"

# devno DEV: major:minor of a block device.
devno() { stat -c '%t:%T' "$1"; }

# attach_cmd SEL: Namespace Attachment (opcode 0x15) of namespace 2 to this controller through
# the admin passthrough: SEL 0 attaches, 1 detaches. The data is a controller list: a count
# (16 bit) and the controller ids.
attach_cmd() {
    local cntlid
    cntlid=$(nvme id-ctrl $CDEV -o json | sed -n 's/^[[:space:]]*"cntlid"[[:space:]]*:[[:space:]]*\([0-9]*\).*/\1/p')
    [[ -n $cntlid ]] || fail "no cntlid in nvme id-ctrl"
    {
        printf '\x01\x00'
        printf "\\x$(printf %02x $((cntlid & 255)))\\x$(printf %02x $((cntlid >> 8)))"
        head -c 4092 /dev/zero
    } >/tmp/ctrl-list
    nvme admin-passthru $CDEV --opcode=0x15 --namespace-id=2 --cdw10="$1" --data-len=4096 \
        --write --input-file=/tmp/ctrl-list
}

test_nvme_rescan_subsys_layout() {
    load_nvme
    [[ -b $DEV ]] || fail "no $DEV"
    [[ ! -e $DEV2 ]] || fail "$DEV2 exists, but namespace 2 should be detached at boot (--nvme-subsys?)"
    # The active namespace list (Identify CNS 2 through the passthrough): only namespace 1.
    nvme list-ns $CDEV | tee /tmp/active-ns
    expect_eq "active namespaces" "$(grep -c ':0x' /tmp/active-ns)" 1
    grep -q ':0x1$' /tmp/active-ns || fail "namespace 1 not active"
}

test_nvme_rescan_unchanged() {
    load_nvme
    local before
    before=$(devno $DEV)
    dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 status=none
    dd if=/tmp/pattern of=$DEV bs=1M oflag=direct status=none
    exec 3<$DEV
    klog_mark
    nvme ns-rescan $CDEV || fail "nvme ns-rescan failed"
    expect_eq "disk kept (same device number)" "$(devno $DEV)" "$before"
    [[ ! -e $DEV2 ]] || fail "$DEV2 appeared, namespace 2 is detached"
    cmp <(dd if=/proc/self/fd/3 bs=1M count=4 iflag=direct status=none) /tmp/pattern ||
        fail "reading through a file opened before the rescan"
    exec 3<&-
    if klog | grep -E "rnvme0n1|namespace gone"; then fail "the rescan touched namespace 1"; fi
    # Rescans during I/O: the I/O goes on and verifies (fio reads back and verifies every 256
    # blocks it writes, all through the time-based run).
    fio --name=r --filename=$DEV --direct=1 --rw=randwrite --bs=4k --iodepth=16 --ioengine=libaio \
        --size=32M --time_based --runtime=5 --verify=crc32c --verify_fatal=1 --verify_backlog=256 \
        --output-format=terse --output=/tmp/fio.out &
    local pid=$! i
    wait_io rnvme0n1
    for i in 1 2 3 4 5 6 7 8; do
        nvme ns-rescan $CDEV || fail "nvme ns-rescan $i during I/O failed"
        sleep 0.3
    done
    wait $pid || { cat /tmp/fio.out; fail "fio failed across rescans"; }
    fio_verified /tmp/fio.out $(((256 + 16) * 4))  # a backlog batch and the queue depth
    expect_eq "disk kept after rescans during I/O" "$(devno $DEV)" "$before"
    unload_nvme
}

test_nvme_rescan_attach_detach() {
    load_nvme
    klog_mark
    local before
    before=$(devno $DEV)
    attach_cmd 0 || fail "Namespace Attachment (attach) through the admin passthrough failed"
    # The controller has attached it and reports it (an asynchronous event, after which the
    # driver rescans by itself: nvme_rescan_aen); an explicit rescan finds the same.
    nvme ns-rescan $CDEV
    wait_dev $DEV2
    expect_eq "size of namespace 2" "$(bytes_of rnvme0n2)" $((16 * 1024 * 1024))
    [[ -e /sys/block/rnvme0n2/device ]] || fail "no device link for the new disk"
    expect_eq "new disk's parent" "$(readlink -f /sys/block/rnvme0n2/device)" \
        "$(readlink -f /sys/block/rnvme0n1/device)"
    expect_eq "NVME_IOCTL_ID of the new disk" "$(nvme get-ns-id $DEV2 | sed 's/.*namespace-id://; s/ //g')" 2
    dd if=/dev/urandom of=/tmp/p2 bs=1M count=2 status=none
    dd if=/tmp/p2 of=$DEV2 bs=1M oflag=direct status=none
    cmp <(dd if=$DEV2 bs=1M count=2 iflag=direct status=none) /tmp/p2 || fail "I/O on the new disk"
    expect_eq "namespace 1 kept" "$(devno $DEV)" "$before"
    # Rescan again: both stay.
    nvme ns-rescan $CDEV
    [[ -b $DEV2 ]] || fail "$DEV2 gone after a second rescan"
    # Detach with nvme-cli, then rescan: the disk goes, namespace 1 stays and works.
    local cntlid
    cntlid=$(nvme id-ctrl $CDEV -o json | sed -n 's/^[[:space:]]*"cntlid"[[:space:]]*:[[:space:]]*\([0-9]*\).*/\1/p')
    nvme detach-ns $CDEV --namespace-id=2 --controllers="$cntlid" || fail "nvme detach-ns failed"
    nvme ns-rescan $CDEV
    wait_gone $DEV2
    klog | grep -q "rnvme0n2: namespace gone" || fail "no removal message"
    expect_eq "namespace 1 kept" "$(devno $DEV)" "$before"
    fio_verify $DEV --size=16M
    # nvme-cli attach-ns, rescan: the disk is back with the data written before.
    nvme attach-ns $CDEV --namespace-id=2 --controllers="$cntlid" || fail "nvme attach-ns failed"
    nvme ns-rescan $CDEV
    wait_dev $DEV2
    cmp <(dd if=$DEV2 bs=1M count=2 iflag=direct status=none) /tmp/p2 || fail "data of namespace 2 after detach/attach"
    # Unloading with the added disk: both go.
    unload_nvme
    [[ ! -e $DEV2 ]] || fail "$DEV2 still there after rmmod"
    # Namespace 2 stays attached in the controller: a new probe finds it without a rescan.
    load_nvme
    wait_dev $DEV2
    attach_cmd 1 || fail "detach through the admin passthrough failed"
    nvme ns-rescan $CDEV
    wait_gone $DEV2
    unload_nvme
}

# c_ns_attrs DIR [QUIRKS]: the C driver's namespace identity attributes of nvme0n1 into DIR,
# loaded with nvme.quirks=QUIRKS.
c_ns_attrs() {
    local a
    mkdir -p "$1"
    modprobe nvme ${2:+quirks=$2}
    # The C driver probes asynchronously: longer than wait_dev's 5 s on the debug kernel.
    for a in $(seq 300); do [[ -b /dev/nvme0n1 ]] && break; sleep 0.1; done
    wait_dev /dev/nvme0n1
    for a in $NS_ATTRS; do cat /sys/block/nvme0n1/$a >"$1/$a" 2>/dev/null || echo absent >"$1/$a"; done
    unload_module nvme
    unload_module nvme_core 2>/dev/null || true
}

# same_as_c DIR: rnvme0n1's identity attributes equal the C driver's in DIR; each side has a
# value or says "absent" (two empty values are no comparison).
same_as_c() {
    local a ours
    for a in $NS_ATTRS; do
        ours=$(cat /sys/block/rnvme0n1/$a 2>/dev/null || echo absent)
        echo "$a: C '$(cat "$1/$a")', Rust '$ours'"
        [[ -n $(cat "$1/$a") ]] || fail "namespace 1 $a of the C driver ($1) is empty"
        [[ -n $ours ]] || fail "namespace 1 $a of rust_nvme_mq is empty"
        expect_eq "namespace 1 $a like C ($1)" "$ours" "$(cat "$1/$a")"
    done
}

# The namespace identity under the disk (what udev's by-id rules, lsblk -o WWN and multipath
# read), with the identifiers scripts/qemu-run.sh gives the namespaces in --nvme-subsys mode.
# Like the C driver, rust_nvme_mq ignores the identifiers of QEMU's controller by default
# (NVME_QUIRK_BOGUS_NID); with bogus_nid_quirk=0 (C: nvme.quirks=1b36:0010:^bogus_nid) it
# shows them: namespace 1 like the C driver's disk in both modes, namespace 2 (attached, then
# rescanned) with the values given to QEMU, namespace 1 unchanged by the rescan.
test_nvme_rescan_ns_identity() {
    c_ns_attrs /tmp/c-quirk
    c_ns_attrs /tmp/c-ids 1b36:0010:^bogus_nid
    load_nvme
    same_as_c /tmp/c-quirk
    expect_eq "namespace 1 wwid with the quirk" "$(cat /sys/block/rnvme0n1/wwid)" \
        "nvme.1b36-$(printf rblk0001 | od -An -tx1 | tr -d ' \n')-$(printf 'QEMU NVMe Ctrl' | od -An -tx1 | tr -d ' \n')-00000001"
    load_nvme bogus_nid_quirk=0
    same_as_c /tmp/c-ids
    expect_eq "namespace 1 wwid" "$(cat /sys/block/rnvme0n1/wwid)" "uuid.6a1f3c52-0b7e-4d59-9c1a-2e4f6a8b0c11"
    expect_eq "namespace 1 nguid" "$(cat /sys/block/rnvme0n1/nguid)" "01234567-89ab-cdef-0011-223344556601"
    expect_eq "namespace 1 eui" "$(cat /sys/block/rnvme0n1/eui)" "00 11 22 33 44 55 66 01"
    attach_cmd 0 || fail "attach through the admin passthrough failed"
    nvme ns-rescan $CDEV
    wait_dev $DEV2
    expect_eq "namespace 2 wwid" "$(cat /sys/block/rnvme0n2/wwid)" "uuid.6a1f3c52-0b7e-4d59-9c1a-2e4f6a8b0c22"
    expect_eq "namespace 2 uuid" "$(cat /sys/block/rnvme0n2/uuid)" "6a1f3c52-0b7e-4d59-9c1a-2e4f6a8b0c22"
    expect_eq "namespace 2 eui" "$(cat /sys/block/rnvme0n2/eui)" "00 11 22 33 44 55 66 02"
    expect_eq "namespace 2 nsid" "$(cat /sys/block/rnvme0n2/nsid)" 2
    [[ ! -e /sys/block/rnvme0n2/nguid ]] || fail "nguid shown for namespace 2, which has none (C hides it)"
    same_as_c /tmp/c-ids
    attach_cmd 1 || fail "detach through the admin passthrough failed"
    nvme ns-rescan $CDEV
    wait_gone $DEV2
    unload_nvme
}

# Asynchronous events: Namespace Attachment through the admin passthrough makes the controller
# report a namespace attribute change, and the driver rescans by itself: namespace 2's disk
# appears and goes without `nvme ns-rescan`, also after a controller reset (the request armed
# again). A temperature threshold below the controller's temperature (Set Features 4) is a
# SMART/health event, logged once however often it comes.
test_nvme_rescan_aen() {
    klog_mark
    load_nvme
    attach_cmd 0 || fail "attach through the admin passthrough failed"
    wait_dev $DEV2
    klog | grep -q "rnvme0: namespace attributes changed, rescanning" || fail "no event message"
    attach_cmd 1 || fail "detach through the admin passthrough failed"
    wait_gone $DEV2
    nvme reset $CDEV || fail "nvme reset failed"
    attach_cmd 0 || fail "attach after the reset failed"
    wait_dev $DEV2
    attach_cmd 1 || fail "detach after the reset failed"
    wait_gone $DEV2
    expect_eq "rescans by events" "$(klog | grep -c 'namespace attributes changed, rescanning')" 4
    local th
    for th in 300 301; do
        nvme set-feature $CDEV --feature-id=4 --value=$th >/dev/null || fail "set-feature 4 $th"
        sleep 1
    done
    nvme set-feature $CDEV --feature-id=4 --value=343 >/dev/null || fail "set-feature 4 back"
    klog | grep "SMART/health" || true
    expect_eq "temperature events logged" \
        "$(klog | grep -c 'SMART/health critical warning: temperature beyond a threshold')" 1
    fio_verify $DEV --size=8m
    unload_nvme
}

# Passthrough on two namespaces side by side, and a rescan, while an I/O passthrough command on
# namespace 2 hangs (lost with debugfs lose_commands): neither the rescan nor namespace 1's
# passthrough (NVME_IOCTL_SUBMIT_IO, the vectored ioctl: no bounce buffer) waits for it, as
# each ioctl reaches its namespace through the disk it came through and the list of namespaces
# is locked only to add or remove one. Checked by order, not time: both are done while the
# hung command is still outstanding (io_timeout=30: it would time out after 30 s, and be
# retried by a reset 30 s later); a controller reset then requeues it and it completes.
test_nvme_rescan_side_by_side() {
    load_nvme
    klog_mark
    local k=/sys/kernel/debug/rust_nvme_mq/rnvme0 hung others
    attach_cmd 0 || fail "attach through the admin passthrough failed"
    nvme ns-rescan $CDEV
    wait_dev $DEV2
    echo 1 >$k/lose_commands
    nvme io-passthru $DEV2 --opcode=2 --namespace-id=2 --cdw10=0 --cdw12=7 --data-len=4096 \
        --read --raw-binary >/tmp/hung.out 2>&1 &
    hung=$!
    wait_in_ioctl $hung
    expect_eq "commands still to lose (namespace 2's was lost)" "$(cat $k/lose_commands)" 0
    {
        nvme ns-rescan $CDEV && echo rescan done &&
            "$TOOLS/nvme_submit_io" $DEV 1 $((64 * 2048)) "$(blockdev --getsz $DEV)"
    } >/tmp/ns1.out 2>&1 &
    others=$!
    while kill -0 $others 2>/dev/null && kill -0 $hung 2>/dev/null; do sleep 0.1; done
    cat /tmp/ns1.out
    kill -0 $hung 2>/dev/null ||
        fail "the rescan and namespace 1's passthrough waited for namespace 2's hung command"
    wait $others || fail "the rescan or namespace 1's passthrough failed"
    grep -q "rescan done" /tmp/ns1.out || fail "no rescan"
    local want
    for want in "submit_write rc=0" "submit_read_data ok" "vec_write rc=0" "vec_read_data ok"; do
        grep -q "^$want" /tmp/ns1.out || fail "namespace 1's passthrough: no '$want'"
    done
    if klog | grep "timed out"; then fail "a command timed out"; fi
    [[ -b $DEV2 ]] || fail "$DEV2 gone"
    nvme reset $CDEV || fail "nvme reset"
    wait $hung || fail "namespace 2's command after the reset: $(cat /tmp/hung.out)"
    attach_cmd 1 || fail "detach through the admin passthrough failed"
    nvme ns-rescan $CDEV
    wait_gone $DEV2
    unload_nvme
}

t nvme_rescan_subsys_layout
t nvme_rescan_unchanged
t nvme_rescan_attach_detach
t nvme_rescan_ns_identity
t nvme_rescan_aen
t nvme_rescan_side_by_side
t_kernel_clean nvme_rescan_kernel_clean

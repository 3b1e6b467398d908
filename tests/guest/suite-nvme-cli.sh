#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# nvme-cli on rust_nvme_mq's controller character device /dev/rnvme0, compared with the C nvme
# driver's /dev/nvme0 on the same QEMU controller (serial rblk0001). Boot with --smp 2.
# The C driver's answers are taken first (C_DIR), then every test loads rust_nvme_mq itself
# and leaves it unloaded. Each test runs with `set -euo pipefail` (lib.sh's `t`); the suite
# itself does not stop at a failed test.
. /tests/lib.sh
suite_help "$@"
. /tests/nvme-lib.sh

CDEV=/dev/rnvme0
C_DIR=/tmp/c-nvme
R_DIR=/tmp/r-nvme

# collect DIR CTRLDEV NSDEV: what nvme-cli and nvme_passthru say about the controller and
# its namespace 1.
collect() {
    local dir=$1 dev=$2 ns=$3
    mkdir -p "$dir"
    nvme id-ns "$ns" -o json >"$dir/id-ns.json"
    nvme id-ns "$ns" >"$dir/id-ns.txt"
    nvme get-ns-id "$ns" >"$dir/ns-id.txt"
    nvme id-ctrl "$dev" -o json >"$dir/id-ctrl.json"
    nvme id-ctrl "$dev" >"$dir/id-ctrl.txt"
    nvme smart-log "$dev" -o json >"$dir/smart-log.json"
    nvme get-feature "$dev" -f 7 >"$dir/feature7.txt"
    "$TOOLS/nvme_passthru" "$dev" >"$dir/passthru.txt"
    local class=/sys/class/nvme/${dev#/dev/} a generic
    [[ -d $class ]] || class=/sys/class/rnvme/${dev#/dev/}
    for a in model serial firmware_rev; do
        cat "$class/$a" >"$dir/sysfs-$a"
    done
    # The controller's attributes ("absent" where there is none), and how the disk, its
    # generic device and the character device hang together in sysfs.
    for a in $CTRL_ATTRS; do
        cat "$class/$a" >"$dir/ctrl-$a" 2>/dev/null || echo absent >"$dir/ctrl-$a"
    done
    basename "$(readlink -f "/sys/block/${ns#/dev/}/device")" >"$dir/disk-device"
    basename "$(readlink -f "/sys/block/${ns#/dev/}/device/subsystem")" >"$dir/disk-device-class"
    cat "/sys/block/${ns#/dev/}/device/dev" >"$dir/disk-device-dev" 2>/dev/null || echo absent >"$dir/disk-device-dev"
    chr_number "$dev" >"$dir/chardev-dev"
    for generic in /sys/class/nvme-generic/ng*n1 /sys/class/misc/rng*n1; do
        [[ -e $generic ]] && break
    done
    basename "$(readlink -f "$generic/device")" >"$dir/generic-parent"
    # The namespace's identity attributes under the disk ("absent" where C hides one).
    for a in $NS_ATTRS; do
        cat "/sys/block/${ns#/dev/}/$a" >"$dir/ns-$a" 2>/dev/null || echo absent >"$dir/ns-$a"
    done
    ls "/sys/block/${ns#/dev/}" >"$dir/ns-ls"
}

# The C driver's controller attributes (drivers/nvme/host/sysfs.c) that mean something for a
# PCIe controller, which rust_nvme_mq's controller device has too.
CTRL_ATTRS="model serial firmware_rev cntlid transport subsysnqn address state numa_node
    queue_count sqsize kato cntrltype dctype quirks"

# The namespace identity attributes of the C driver's disks that rust_nvme_mq has too.
NS_ATTRS="wwid uuid nguid eui csi nsid metadata_bytes"

# json_num FILE KEY: the number of KEY in nvme-cli's JSON output (one key per line).
json_num() { sed -n "s/^[[:space:]]*\"$2\"[[:space:]]*:[[:space:]]*\"\{0,1\}\([0-9]*\).*/\1/p" "$1" | head -n1; }

test_nvme_cli_c_reference() {
    modprobe nvme
    wait_dev /dev/nvme0n1
    [[ -c /dev/nvme0 ]] || fail "no /dev/nvme0 from the C driver"
    collect "$C_DIR" /dev/nvme0 /dev/nvme0n1
    stat -c '%a %u' /dev/nvme0 >"$C_DIR.mode"
    cat "$C_DIR/feature7.txt" "$C_DIR/passthru.txt"
    hung_admin /dev/nvme0 2000 >"$C_DIR/aer.out" 2>&1 || true
    cat "$C_DIR/aer.out"
    unload_module nvme
    unload_module nvme_core 2>/dev/null || true
    [[ -s $C_DIR/id-ctrl.json ]] || fail "no id-ctrl from the C driver"
}

test_nvme_cli_chardev_node() {
    load_nvme
    [[ -c $CDEV ]] || fail "$CDEV is not a character device"
    ls -l "$CDEV"
    expect_eq "mode and owner like /dev/nvme0" "$(stat -c '%a %u' $CDEV)" "$(cat "$C_DIR.mode")"
    expect_eq "mode" "$(stat -c '%a %u' $CDEV)" "600 0"
    local bdf
    bdf=$(rust_bdf)
    expect_eq "sysfs parent of rnvme0" \
        "$(basename "$(readlink -f /sys/class/rnvme/rnvme0/device)")" "$bdf"
    # An open character device pins the module, as an open disk does.
    exec 7<>$CDEV
    if rmmod rust_nvme_mq 2>/dev/null; then fail "rmmod worked with $CDEV open"; fi
    exec 7>&-
    collect "$R_DIR" "$CDEV" "$DEV"
    unload_nvme
    wait_gone "$CDEV"
}

test_nvme_cli_id_ctrl_equal() {
    [[ -s $R_DIR/id-ctrl.txt && -s $C_DIR/id-ctrl.txt ]] || fail "missing id-ctrl output"
    grep -E "^(vid|sn|mn|fr|mdts|oacs|oncs|vwc|nn|sqes|cqes) " "$R_DIR/id-ctrl.txt"
    local fields
    fields=$(grep -c ' : ' "$R_DIR/id-ctrl.txt")
    [[ $fields -gt 60 ]] || fail "only $fields fields in nvme id-ctrl on $CDEV"
    diff "$C_DIR/id-ctrl.txt" "$R_DIR/id-ctrl.txt" || fail "nvme id-ctrl fields differ (above: < C, > Rust)"
    cmp "$C_DIR/id-ctrl.json" "$R_DIR/id-ctrl.json" || fail "nvme id-ctrl -o json differs"
    echo "$fields fields equal"
}

test_nvme_cli_id_ns_equal() {
    [[ -s $R_DIR/id-ns.txt && -s $C_DIR/id-ns.txt ]] || fail "missing id-ns output"
    grep -E "^(nsze|ncap|nuse|flbas|nlbaf|lbaf  0) " "$R_DIR/id-ns.txt"
    local fields
    fields=$(grep -c ' : ' "$R_DIR/id-ns.txt")
    [[ $fields -gt 20 ]] || fail "only $fields fields in nvme id-ns on $DEV"
    diff "$C_DIR/id-ns.txt" "$R_DIR/id-ns.txt" || fail "nvme id-ns fields differ (above: < C, > Rust)"
    cmp "$C_DIR/id-ns.json" "$R_DIR/id-ns.json" || fail "nvme id-ns -o json differs"
    echo "$fields fields equal"
    cat "$R_DIR/ns-id.txt"
    grep -q "namespace-id:1$" "$R_DIR/ns-id.txt" || fail "get-ns-id on $DEV: $(cat "$R_DIR/ns-id.txt")"
    [[ -s $R_DIR/ns-id.txt && -s $C_DIR/ns-id.txt ]] || fail "missing get-ns-id output"
    expect_eq "get-ns-id like the C driver" "$(sed 's/^r//' "$R_DIR/ns-id.txt")" "$(cat "$C_DIR/ns-id.txt")"
}

test_nvme_cli_disk_admin_passthru() {
    # The controller's ioctls on the namespace's block device too (as the C driver's).
    load_nvme
    "$TOOLS/nvme_passthru" $DEV >/tmp/disk-passthru.txt
    cat /tmp/disk-passthru.txt
    local k
    for k in identify_ctrl identify_8k identify_len_1001 identify_bad_addr admin_cmd_bad_arg \
        flags_set opcode_reserved get_features_7 get_features_7_64 set_features_7 unknown_ioctl; do
        expect_eq "$k on the disk" "$(line /tmp/disk-passthru.txt $k)" "$(line $R_DIR/passthru.txt $k)"
    done
    expect_eq "NVME_IOCTL_ID on the disk" "$(line /tmp/disk-passthru.txt ioctl_id)" "ioctl_id rc=1 errno=0"
    nvme smart-log $DEV -o json | grep -q '"temperature"' || fail "smart-log on $DEV"
    unload_nvme
}

test_nvme_cli_disk_open_across_unbind() {
    # A block device open when the controller goes: its ioctls fail with ENXIO (the disk's
    # driver data went with the unbind; nothing of the controller is kept for the opener), and
    # the last close frees the rest.
    load_nvme
    local bdf out
    bdf=$(rust_bdf)
    out=$("$TOOLS/nvme_passthru" --unbind $DEV /sys/bus/pci/drivers/rust_nvme_mq/unbind "$bdf")
    echo "$out"
    expect_eq "id" "$(grep ^ioctl_id <<<"$out")" "ioctl_id_after_unbind rc=-1 errno=ENXIO"
    expect_eq "identify" "$(grep ^identify <<<"$out")" "identify_after_unbind rc=-1 errno=ENXIO"
    echo "$bdf" >/sys/bus/pci/drivers/rust_nvme_mq/bind
    wait_dev $DEV
    nvme id-ns $DEV | grep -q "^nsze" || fail "id-ns after rebind"
    unload_nvme
}

test_nvme_cli_sysfs_identity() {
    local a
    for a in model serial firmware_rev; do
        echo "$a: '$(cat "$R_DIR/sysfs-$a")'"
        [[ -n $(tr -d ' \n' <"$R_DIR/sysfs-$a") ]] || fail "no $a in rust_nvme_mq's sysfs"
        [[ -n $(tr -d ' \n' <"$C_DIR/sysfs-$a") ]] || fail "no $a in the C driver's sysfs"
        cmp "$C_DIR/sysfs-$a" "$R_DIR/sysfs-$a" || fail "$a differs: C '$(cat "$C_DIR/sysfs-$a")'"
    done
    grep -q "^rblk0001 *$" "$R_DIR/sysfs-serial" || fail "serial"
}

# The namespace identity under the disk (what udev's by-id rules, lsblk -o WWN and multipath
# read), for a namespace without identifiers (QEMU's controller without nvme-ns gives none):
# each attribute present where C's is, with C's value, the wwid made of the controller's vendor,
# serial and model and the nsid. (suite-nvme-rescan.sh has namespaces with identifiers.)
# The controller as sysfs shows it, compared with the C driver on the same controller: the
# disk's `device` is the controller's device (rnvme0 as C's nvme0) in a class of its own
# (rnvme as C's nvme), whose `dev` is the controller's character device, which is also the
# parent of the namespace's generic device (rng0n1 as C's ng0n1), and whose attributes read as C's /sys/class/nvme/nvme0/ do.
test_nvme_ctrl_sysfs_like_c() {
    local a differ=()
    for a in $CTRL_ATTRS; do
        echo "$a: C '$(cat "$C_DIR/ctrl-$a")', rust_nvme_mq '$(cat "$R_DIR/ctrl-$a")'"
        [[ -n $(tr -d ' \n' <"$C_DIR/ctrl-$a") && $(cat "$C_DIR/ctrl-$a") != absent ]] ||
            fail "no $a from the C driver"
        cmp -s "$C_DIR/ctrl-$a" "$R_DIR/ctrl-$a" || differ+=("$a")
    done
    ((${#differ[@]} == 0)) || fail "attributes that differ from C's: ${differ[*]}"
    expect_eq "C: the disk's device" "$(cat "$C_DIR/disk-device")" nvme0
    expect_eq "the disk's device" "$(cat "$R_DIR/disk-device")" rnvme0
    expect_eq "C: its class" "$(cat "$C_DIR/disk-device-class")" nvme
    expect_eq "its class" "$(cat "$R_DIR/disk-device-class")" rnvme
    expect_eq "C: its dev is the controller's character device" \
        "$(cat "$C_DIR/disk-device-dev")" "$(cat "$C_DIR/chardev-dev")"
    expect_eq "its dev is the controller's character device" \
        "$(cat "$R_DIR/disk-device-dev")" "$(cat "$R_DIR/chardev-dev")"
    expect_eq "C: the generic device's parent" "$(cat "$C_DIR/generic-parent")" nvme0
    expect_eq "the generic device's parent" "$(cat "$R_DIR/generic-parent")" rnvme0
}

# udev_by_id DISK...: the /dev/disk/by-id links udev gives each DISK (`udevadm test` with
# systemd's 60-persistent-storage.rules and the project's udev/60-rust-nvme-mq.rules, installed
# in /etc/udev/rules.d as the README says), one per line, sorted.
udev_by_id() {
    local disk
    mkdir -p /etc/udev/rules.d /run/udev
    cp /tests/udev/*.rules /etc/udev/rules.d/
    for disk in "$@"; do
        udevadm test --action=add "/sys/class/block/$disk" 2>/dev/null | sed -n 's/^DEVLINKS=//p' |
            tr ' ' '\n' | grep '^/dev/disk/by-id/' || true
    done | sort
}

# mbr_one_partition DEV: an MBR with one Linux partition of 1 MiB at 1 MiB.
mbr_one_partition() {
    local entry
    # Entry 1: not active, CHS unused, type 0x83, first LBA 2048, 2048 sectors (little endian).
    entry='\x00\xfe\xff\xff\x83\xfe\xff\xff\x00\x08\x00\x00\x00\x08\x00\x00'
    dd if=/dev/zero of="$1" bs=512 count=1 oflag=direct status=none
    printf '%b' "$entry" | dd of="$1" bs=1 seek=446 conv=notrunc status=none
    printf '%b' '\x55\xaa' | dd of="$1" bs=1 seek=510 conv=notrunc status=none
    sync
}

# The /dev/disk/by-id links of a disk and its partition: with the project's udev rules,
# rust_nvme_mq's rnvme0n1 and rnvme0n1p1 get exactly the links systemd's rules give the C
# driver's nvme0n1 and nvme0n1p1 on the same controller (nvme-<wwid>,
# nvme-<model>_<serial>, nvme-<model>_<serial>_<nsid>, each with -part1), so an fstab entry
# by id survives a switch of drivers. Checked with Debian's udevadm.
test_nvme_udev_by_id_like_c() {
    load_nvme
    mbr_one_partition $DEV
    unload_nvme
    modprobe nvme
    wait_dev /dev/nvme0n1p1
    udev_by_id nvme0n1 nvme0n1p1 >/tmp/c-by-id
    unload_module nvme
    unload_module nvme_core 2>/dev/null || true
    load_nvme
    wait_dev ${DEV}p1
    udev_by_id rnvme0n1 rnvme0n1p1 >/tmp/r-by-id
    dd if=/dev/zero of=$DEV bs=512 count=1 oflag=direct status=none
    unload_nvme
    echo "C:"; cat /tmp/c-by-id
    echo "rust_nvme_mq:"; cat /tmp/r-by-id
    [[ $(grep -c . /tmp/c-by-id) -ge 4 ]] || fail "udev gave the C driver's disk and partition few by-id links"
    grep -q -- '-part1$' /tmp/c-by-id || fail "no by-id link of the C driver's partition"
    cmp -s /tmp/c-by-id /tmp/r-by-id || fail "rust_nvme_mq's by-id links are not C's"
}

# err_log_outcomes CTRL DISK: what the controller's and the disk's passthru_err_log_enabled do,
# one line per outcome, for comparing the drivers: their mode and default, what a write of
# each of several values leaves (or that it is refused), and, with both off and then both on,
# how many kernel log lines name the controller for a failed admin passthrough command (Get
# Log Page of a log the controller does not have) and the disk for a failed I/O passthrough
# command (a reserved opcode).
err_log_outcomes() {
    local ctrl=$1 disk=$2 which attr v
    local cattr=/sys/class/rnvme/$ctrl/passthru_err_log_enabled
    [[ -e $cattr ]] || cattr=/sys/class/nvme/$ctrl/passthru_err_log_enabled
    local dattr=/sys/block/$disk/passthru_err_log_enabled
    for which in ctrl disk; do
        attr=$cattr
        [[ $which == ctrl ]] || attr=$dattr
        [[ -e $attr ]] || { echo "$which: no $attr"; continue; }
        echo "$which mode=$(stat -c %a "$attr") default=$(cat "$attr")"
        for v in on 0 yes off bogus; do
            if echo "$v" >"$attr" 2>/dev/null; then
                echo "$which write $v: $(cat "$attr")"
            else
                echo "$which write $v: refused"
            fi
        done
    done
    for v in off on; do
        echo "$v" >"$cattr" && echo "$v" >"$dattr" || true
        klog_mark
        nvme get-log "/dev/$ctrl" --log-id=0xbf --log-len=512 >/dev/null 2>&1 || true
        nvme io-passthru "/dev/$disk" --opcode=0x7e --namespace-id=1 >/dev/null 2>&1 || true
        echo "logging $v: admin lines $(klog | grep -cE "(^|[]:] )$ctrl: .*cdw10=") I/O lines $(klog | grep -cE "(^|[]:] )$disk: .*cdw10=")"
        klog | grep -E "cdw10=" || true
    done
    echo off >"$cattr" && echo off >"$dattr" || true
}

# passthru_err_log_enabled on the controller and on the disk, as the C driver has them: mode
# 0644, off by default, a boolean as kstrtobool reads it (anything else refused); while on, a
# failed admin (controller) or I/O (disk) passthrough command is logged, naming the device, and
# while off it is not. The outcomes on rust_nvme_mq are the C driver's on the same controller.
test_nvme_passthru_err_log_like_c() {
    modprobe nvme
    wait_dev /dev/nvme0n1
    err_log_outcomes nvme0 nvme0n1 >/tmp/c-errlog
    unload_module nvme
    unload_module nvme_core 2>/dev/null || true
    load_nvme
    err_log_outcomes rnvme0 rnvme0n1 >/tmp/r-errlog
    unload_nvme
    echo "C:"; cat /tmp/c-errlog
    echo "rust_nvme_mq:"; cat /tmp/r-errlog
    grep -q "^logging on: admin lines 1 I/O lines 1$" /tmp/c-errlog ||
        fail "the C driver did not log one line for each failed command: the test's commands do not fail there"
    diff <(grep -v 'cdw10=' /tmp/c-errlog) <(grep -v 'cdw10=' /tmp/r-errlog) ||
        fail "passthru_err_log_enabled does not behave as the C driver's (above: < C, > rust_nvme_mq)"
}

test_nvme_cli_ns_identity() {
    local a hex
    for a in $NS_ATTRS; do
        echo "$a: C '$(cat "$C_DIR/ns-$a")', Rust '$(cat "$R_DIR/ns-$a")'"
        # Two empty values are no comparison: each side has a value, or says "absent".
        [[ -n $(cat "$C_DIR/ns-$a") ]] || fail "$a under the C driver's disk is empty"
        [[ -n $(cat "$R_DIR/ns-$a") ]] || fail "$a under rust_nvme_mq's disk is empty"
        expect_eq "$a under the disk" "$(cat "$R_DIR/ns-$a")" "$(cat "$C_DIR/ns-$a")"
    done
    hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
    expect_eq "wwid" "$(cat "$R_DIR/ns-wwid")" "nvme.1b36-$(hex rblk0001)-$(hex 'QEMU NVMe Ctrl')-00000001"
    expect_eq "nsid" "$(cat "$R_DIR/ns-nsid")" 1
}

test_nvme_cli_smart_log() {
    local k c r
    cat "$R_DIR/smart-log.json"
    for k in critical_warning temperature avail_spare spare_thresh percent_used \
        endurance_grp_critical_warning_summary media_errors num_err_log_entries; do
        c=$(json_num "$C_DIR/smart-log.json" "$k")
        r=$(json_num "$R_DIR/smart-log.json" "$k")
        [[ -n $r ]] || fail "no $k in the smart log from $CDEV"
        expect_eq "smart-log $k" "$r" "$c"
    done
    # Counters only grow between the C driver's and ours on the same controller.
    for k in data_units_read data_units_written host_read_commands host_write_commands \
        power_cycles power_on_hours; do
        c=$(json_num "$C_DIR/smart-log.json" "$k")
        r=$(json_num "$R_DIR/smart-log.json" "$k")
        [[ -n $r && -n $c ]] || fail "no $k in a smart log"
        [[ $r -ge $c ]] || fail "smart-log $k went back: C $c, Rust $r"
    done
    r=$(json_num "$R_DIR/smart-log.json" host_read_commands)
    c=$(json_num "$C_DIR/smart-log.json" host_read_commands)
    [[ $r -gt $c ]] || fail "host_read_commands did not count our probe's reads: C $c, Rust $r"
}

test_nvme_cli_get_feature_7() {
    cat "$R_DIR/feature7.txt"
    grep -q "Current value:0x" "$R_DIR/feature7.txt" || fail "no value from get-feature -f 7"
    diff "$C_DIR/feature7.txt" "$R_DIR/feature7.txt" || fail "get-feature -f 7 differs"
}

# line FILE CASE: the output line of case CASE in FILE. A missing line reads "CASE missing from
# FILE", which names the file: so the like-C comparisons (the same case's line in our driver's
# file and in the C driver's) fail when either side lacks it, even both.
line() { grep "^$2 " "$1" || echo "$2 missing from $1"; }

test_nvme_cli_bad_input() {
    cat "$R_DIR/passthru.txt"
    local f=$R_DIR/passthru.txt
    expect_eq identify "$(line $f identify_ctrl)" "identify_ctrl rc=0 errno=0"
    # More data than the controller writes: zeroes after its 4 KiB, nothing written beyond.
    expect_eq "no leak" "$(line $f identify_8k)" "identify_8k rc=0 errno=0 same=1 tail_nonzero=0"
    expect_eq "bounds" "$(line $f identify_8k_bounds)" "identify_8k_bounds rc=0 errno=0 untouched_after=1"
    expect_eq "odd length" "$(line $f identify_len_1001)" "identify_len_1001 rc=0 errno=0 same=1 untouched_after=1"
    expect_eq "1 GiB" "$(line $f identify_len_1g)" "identify_len_1g rc=-1 errno=EINVAL"
    expect_eq "4 GiB - 1" "$(line $f identify_len_4g)" "identify_len_4g rc=-1 errno=EINVAL"
    expect_eq "bad data address" "$(line $f identify_bad_addr)" "identify_bad_addr rc=-1 errno=EFAULT"
    expect_eq "bad command address" "$(line $f admin_cmd_bad_arg)" "admin_cmd_bad_arg rc=-1 errno=EFAULT"
    expect_eq "bad command64 address" "$(line $f admin64_cmd_bad_arg)" "admin64_cmd_bad_arg rc=-1 errno=EFAULT"
    expect_eq "flags" "$(line $f flags_set)" "flags_set rc=-1 errno=EINVAL"
    # Unknown opcodes: the controller's status (Invalid Command Opcode) as a positive result.
    expect_eq "reserved opcode" "$(line $f opcode_reserved)" "opcode_reserved rc=1 errno=0 sc=0x1"
    expect_eq "vendor opcode" "$(line $f opcode_vendor)" "opcode_vendor rc=1 errno=0 sc=0x1"
    expect_eq "set features 7" "$(line $f set_features_7)" "set_features_7 rc=-1 errno=EACCES"
    expect_eq "write data from a bad address" "$(line $f set_features_bad_addr)" "set_features_bad_addr rc=-1 errno=EFAULT"
    expect_eq "NVME_IOCTL_ID on the controller" "$(line $f ioctl_id)" "ioctl_id rc=-1 errno=ENOTTY"
    expect_eq "unknown ioctl" "$(line $f unknown_ioctl)" "unknown_ioctl rc=-1 errno=ENOTTY"
    expect_eq "unprivileged identify" "$(line $f unpriv_identify_ctrl)" "unpriv_identify_ctrl rc=0 errno=0 same=1"
    expect_eq "unprivileged log page" "$(line $f unpriv_smart_log)" "unpriv_smart_log rc=-1 errno=EACCES"
    expect_eq "unprivileged reset" "$(line $f unpriv_reset)" "unpriv_reset rc=-1 errno=EACCES"
    expect_eq "rescan" "$(line $f rescan)" "rescan rc=0 errno=0"
    expect_eq "unprivileged rescan" "$(line $f unpriv_rescan)" "unpriv_rescan rc=-1 errno=EACCES"
    expect_eq "unprivileged open" "$(line $f unpriv_open)" "unpriv_open rc=-1 errno=EACCES"
    grep -q "^get_features_7 rc=0 errno=0 result=0x" $f || fail "get features 7: $(line $f get_features_7)"
    expect_eq "64-bit result" "$(line $f get_features_7_64 | sed 's/result=0x0*/result=/; s/_64//')" \
        "$(line $f get_features_7 | sed 's/result=0x0*/result=/')"
}

test_nvme_cli_bad_input_like_c() {
    # The same cases on the C driver: every line agrees except where the C driver maps the
    # user buffer directly (it leaves bytes the controller did not write as they were), and
    # a length beyond the largest transfer, which we refuse (EINVAL) before touching the user
    # buffer while the C driver tries to map it (EFAULT with this small buffer).
    diff "$C_DIR/passthru.txt" "$R_DIR/passthru.txt" || true
    local k
    for k in identify_ctrl identify_bad_addr admin_cmd_bad_arg \
        admin64_cmd_bad_arg flags_set opcode_reserved opcode_vendor get_features_7 \
        get_features_7_64 set_features_7 set_features_bad_addr ioctl_id unknown_ioctl \
        unpriv_identify_ctrl unpriv_smart_log unpriv_reset unpriv_open rescan unpriv_rescan; do
        expect_eq "$k like the C driver" "$(line $R_DIR/passthru.txt $k)" "$(line $C_DIR/passthru.txt $k)"
    done
}

test_nvme_cli_reset_then_io() {
    klog_mark
    load_nvme
    dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 status=none
    dd if=/tmp/pattern of=$DEV bs=1M oflag=direct status=none
    nvme reset $CDEV || fail "nvme reset $CDEV failed"
    klog | grep -E "rnvme0: (resetting controller|controller reset)"
    klog | grep -q "rnvme0: controller reset done" || fail "no reset done message"
    cmp <(dd if=$DEV bs=1M count=4 iflag=direct status=none) /tmp/pattern || fail "data changed across the reset"
    dd if=/tmp/pattern of=$DEV bs=1M seek=8 oflag=direct status=none
    cmp <(dd if=$DEV bs=1M skip=8 count=4 iflag=direct status=none) /tmp/pattern || fail "I/O after the reset"
    nvme id-ctrl $CDEV | grep -E "^sn " | grep -q rblk0001 || fail "admin commands after the reset"
    # A reset during I/O: the I/O completes, and reads back what it wrote. Time-based (the
    # reset must fall inside it); fio reads back and verifies every 256 blocks it writes.
    fio --name=r --filename=$DEV --direct=1 --rw=randwrite --bs=4k --iodepth=8 --ioengine=libaio \
        --size=32M --time_based --runtime=4 --verify=crc32c --verify_fatal=1 --verify_backlog=256 \
        --output-format=terse --output=/tmp/fio.out &
    local pid=$!
    wait_io rnvme0n1
    nvme reset $CDEV || fail "nvme reset during I/O failed"
    wait $pid || { cat /tmp/fio.out; fail "fio failed across the reset"; }
    fio_verified /tmp/fio.out $(((256 + 16) * 4))  # a backlog batch and the queue depth
    unload_nvme
}

test_nvme_cli_open_across_unbind() {
    # A file open on the character device when the controller goes: its ioctls fail, nothing
    # else happens; closing it later frees what it held.
    load_nvme
    local bdf out
    bdf=$(rust_bdf)
    out=$("$TOOLS/nvme_passthru" --unbind $CDEV /sys/bus/pci/drivers/rust_nvme_mq/unbind "$bdf")
    echo "$out"
    [[ ! -e $CDEV ]] || fail "$CDEV still there after unbind"
    expect_eq "identify on the unbound controller" "$(grep ^identify <<<"$out")" \
        "identify_after_unbind rc=-1 errno=ENODEV"
    expect_eq "reset on the unbound controller" "$(grep ^reset <<<"$out")" \
        "reset_after_unbind rc=-1 errno=ENODEV"
    echo "$bdf" >/sys/bus/pci/drivers/rust_nvme_mq/bind
    wait_dev $DEV
    [[ -c $CDEV ]] || fail "$CDEV not back after bind"
    nvme id-ctrl $CDEV | grep -q rblk0001 || fail "id-ctrl after rebind"
    unload_nvme
}

# A user admin command that never completes: Asynchronous Event Request, which QEMU's controller
# holds until an event occurs (none does here). now_ms: uptime in milliseconds; ms_since START:
# milliseconds since now_ms said START.
hung_admin() { nvme admin-passthru "$1" --opcode=0x0c --timeout="$2"; }
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
ms_since() { echo $(($(now_ms) - $1)); }

# hung_admin_lost PID START LIMIT_MS WHEN: the hung command of PID (output in /tmp/aer.out,
# started at now_ms START) fails with EINTR, at most LIMIT_MS after it started (lost WHEN).
hung_admin_lost() {
    local pid=$1 start=$2 limit=$3 when=$4 rc=0 ms
    wait "$pid" || rc=$?
    ms=$(ms_since "$start")
    cat /tmp/aer.out
    echo "hung command: rc=$rc after $ms ms"
    [[ $rc != 0 ]] && grep -q "Interrupted system call" /tmp/aer.out \
        || fail "the hung command was not lost $when (no EINTR)"
    ((ms < limit)) || fail "the hung command outlived $when: $ms ms"
}

# The caller's timeout_ms: a hung admin command returns after it, not after admin_timeout, with
# EINTR (as the C driver's, which resets the controller); this driver resets the controller too,
# and the controller then serves I/O and admin commands.
test_nvme_cli_admin_timeout() {
    klog_mark
    load_nvme admin_timeout=30
    local start ms rc=0
    start=$(now_ms)
    hung_admin $CDEV 2000 >/tmp/aer.out 2>&1 || rc=$?
    ms=$(ms_since "$start")
    cat /tmp/aer.out
    echo "hung admin command with timeout_ms=2000: rc=$rc after $ms ms"
    [[ $rc != 0 ]] || fail "the hung command succeeded"
    grep -q "Interrupted system call" /tmp/aer.out || fail "not EINTR"
    [[ $(grep -c "Interrupted system call" "$C_DIR/aer.out") == 1 ]] \
        || fail "the C driver's answer differs: $(cat "$C_DIR/aer.out")"
    ((ms >= 2000 && ms < 10000)) || fail "returned after $ms ms, want the caller's 2000 ms"
    klog | grep -E "rnvme0: (admin command|controller reset)"
    klog | grep -q "rnvme0: admin command 0x0c timed out after 2000 ms: resetting the controller" \
        || fail "no timeout message"
    klog | grep -q "rnvme0: controller reset done" || fail "no reset"
    nvme id-ctrl $CDEV | grep -q rblk0001 || fail "admin command after the reset"
    fio_verify $DEV --size=8m
    unload_nvme
}

# While a user's admin command hangs (timeout 20 s), the driver's own admin commands do not wait
# for it: a rescan (Identify) returns at once, and an I/O command that times out (io_timeout=1)
# gets its Abort after 1 s and its reset after 2 s, which loses the hung command (EINTR then).
test_nvme_cli_admin_hung_no_block() {
    klog_mark
    load_nvme io_timeout=1 admin_timeout=30
    local k=/sys/kernel/debug/rust_nvme_mq/rnvme0 start ms pid
    head -c 4096 /dev/urandom >/tmp/known
    dd if=/tmp/known of=$DEV bs=4k seek=100 oflag=direct,sync status=none
    start=$(now_ms)
    hung_admin $CDEV 20000 >/tmp/aer.out 2>&1 &
    pid=$!
    wait_in_ioctl $pid
    local rescan
    rescan=$(now_ms)
    nvme ns-rescan $CDEV || fail "rescan with a hung admin command outstanding"
    ms=$(ms_since "$rescan")
    echo "rescan done in $ms ms with the hung command outstanding"
    ((ms < 5000)) || fail "the rescan waited $ms ms for the hung command"
    kill -0 $pid 2>/dev/null || fail "the hung command ended early: $(cat /tmp/aer.out)"
    echo 1 >$k/lose_commands
    dd if=$DEV of=/tmp/lost bs=4k count=1 skip=100 iflag=direct status=none \
        || fail "the lost read failed"
    ms=$(ms_since "$start")
    echo "lost read done (abort, reset) $ms ms after the hung command started"
    cmp /tmp/lost /tmp/known || fail "the lost read returned wrong data"
    ((ms < 12000)) || fail "the abort and reset waited $ms ms for the hung command"
    klog | grep -E "rnvme0: (command .* timed out|controller reset done)"
    klog | grep -q "timed out, aborting" || fail "no abort"
    hung_admin_lost $pid "$start" 15000 "in the reset"
    fio_verify $DEV --size=8m
    unload_nvme
}

# Unbinding the controller while a user's admin command hangs: the unbind does not wait for its
# timeout (the controller is shut down at once), the command fails with EINTR.
test_nvme_cli_admin_hung_unbind() {
    klog_mark
    load_nvme admin_timeout=30
    local bdf start ms pid
    bdf=$(rust_bdf)
    start=$(now_ms)
    hung_admin $CDEV 20000 >/tmp/aer.out 2>&1 &
    pid=$!
    wait_in_ioctl $pid
    echo "$bdf" >/sys/bus/pci/drivers/rust_nvme_mq/unbind
    ms=$(ms_since "$start")
    echo "unbind done $ms ms after the hung command started"
    ((ms < 8000)) || fail "the unbind waited $ms ms for the hung command"
    hung_admin_lost $pid "$start" 10000 "at the unbind"
    echo "$bdf" >/sys/bus/pci/drivers/rust_nvme_mq/bind
    wait_dev $DEV
    nvme id-ctrl $CDEV | grep -q rblk0001 || fail "id-ctrl after rebind"
    unload_nvme
}

# A probe that fails once its disks are added and its asynchronous events started
# (fail_probe_late=1) takes everything down again, as an unbind does: no disk, no character
# device, the controller not bound, and the module unloads (a disk left behind would hold it).
# Then a probe without the failure works.
test_nvme_cli_probe_fails_late() {
    [[ ! -e /sys/module/rust_nvme_mq ]] || unload_module rust_nvme_mq
    klog_mark
    insmod "$MODDIR/rust_nvme_mq.ko" fail_probe_late=1 || fail "insmod"
    klog | grep -q "fail_probe_late: failing the probe" || fail "the injected failure did not happen"
    klog | grep -q "rnvme0n1: .* blocks of" || fail "the probe added no disk before it failed"
    [[ ! -e $DEV ]] || fail "$DEV left behind"
    [[ ! -e /dev/rng0n1 && ! -e $CDEV ]] || fail "a character device left behind"
    if ls -d /sys/bus/pci/drivers/rust_nvme_mq/0000:* 2>/dev/null; then fail "still bound"; fi
    unload_module rust_nvme_mq || fail "rmmod after the failed probe"
    load_nvme
    dd if=$DEV of=/dev/null bs=1M count=4 iflag=direct status=none || fail "read after a new probe"
    unload_nvme
}

# lbs: the logical block size of rnvme0n1 as the block layer has it.
lbs() { cat /sys/block/rnvme0n1/queue/logical_block_size; }
# lbaf_in_use: the LBA format namespace 1 uses (low nibble of FLBAS), from the controller.
lbaf_in_use() { echo $(($(nvme id-ns $CDEV -n 1 -o json | json_num /dev/stdin flbas) & 15)); }

# Format NVM through the controller's admin passthrough, as nvme-cli's `format` sends it but
# without its rescan afterwards: the driver itself must revalidate the disk. QEMU's namespace
# offers LBA formats 0 (512 bytes), 1 (512 + 8 metadata bytes) and 4 (4096 bytes).
format_raw() { nvme admin-passthru "$1" --opcode=0x80 --namespace-id=1 --cdw10="$2" >/dev/null; }

test_nvme_cli_format_block_size() {
    load_nvme
    expect_eq "block size before" "$(lbs)" 512
    local sectors
    sectors=$(cat /sys/block/rnvme0n1/size)
    klog_mark
    format_raw $CDEV 4 || fail "Format NVM to LBA format 4 failed"
    expect_eq "LBA format in use" "$(lbaf_in_use)" 4
    expect_eq "block size after Format NVM to 4096-byte blocks" "$(lbs)" 4096
    expect_eq "physical block size" "$(cat /sys/block/rnvme0n1/queue/physical_block_size)" 4096
    expect_eq "capacity (sectors)" "$(cat /sys/block/rnvme0n1/size)" "$sectors"
    klog | grep -q "rnvme0n1: new format: [0-9]* blocks of 4096 bytes" || fail "no message about the new format"
    if dd if=/dev/zero of=$DEV bs=512 count=1 oflag=direct status=none 2>/dev/null; then
        fail "a 512-byte direct write went through on a 4096-byte-block disk"
    fi
    fio_verify $DEV --size=16m
    # Back with nvme-cli's own format (which also asks for a rescan), on the block device.
    nvme format $DEV --lbaf=0 --force >/dev/null || fail "nvme format --lbaf=0 failed"
    expect_eq "block size after nvme format --lbaf=0" "$(lbs)" 512
    fio_verify $DEV --size=16m --bs=512
    unload_nvme
}

test_nvme_cli_format_unusable_removes_disk() {
    load_nvme
    klog_mark
    # Metadata per block: the driver does not serve that format; the disk goes.
    format_raw $CDEV 1 || fail "Format NVM to LBA format 1 failed"
    wait_gone $DEV
    klog | grep -q "rnvme0n1: namespace not usable, removing its disk" || fail "no removal message"
    format_raw $CDEV 0 || fail "Format NVM back to LBA format 0 failed"
    nvme ns-rescan $CDEV
    wait_dev $DEV
    expect_eq "block size after the rescan" "$(lbs)" 512
    # The same through the disk's own ioctl: the disk cannot go from inside its ioctl; it is
    # emptied (capacity 0, no I/O reaches the namespace) until a rescan removes it.
    format_raw $DEV 1 || fail "Format NVM to LBA format 1 on the disk failed"
    expect_eq "capacity of the emptied disk" "$(cat /sys/block/rnvme0n1/size)" 0
    if dd if=$DEV of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null; then
        [[ $(dd if=$DEV bs=4k count=1 iflag=direct status=none | wc -c) == 0 ]] ||
            fail "a read of the emptied disk returned data"
    fi
    nvme ns-rescan $CDEV
    wait_gone $DEV
    format_raw $CDEV 0 || fail "Format NVM back to LBA format 0 failed"
    nvme ns-rescan $CDEV
    wait_dev $DEV
    fio_verify $DEV --size=8m
    unload_nvme
}

test_nvme_cli_format_under_io() {
    load_nvme
    # Another process reads and writes 4 KiB blocks all along; the format waits for its
    # requests in flight and holds the next ones back until the disk has the new format. (Its
    # data is not verified: the format erases what it wrote before; fio_verify below checks
    # the data path after the format.)
    fio --name=bg --filename=$DEV --direct=1 --ioengine=io_uring --iodepth=8 --rw=randrw \
        --bs=4k --size=64m --time_based --runtime=8 --output-format=terse >/tmp/bg.out 2>&1 &
    local bg=$!
    wait_io rnvme0n1
    format_raw $CDEV 4 || fail "Format NVM under I/O failed"
    expect_eq "block size after a format under I/O" "$(lbs)" 4096
    wait $bg || { cat /tmp/bg.out; fail "the other process's I/O failed across the format"; }
    awk -F';' '$1 == 3 { if ($5 != 0) exit 1 }' /tmp/bg.out || { cat /tmp/bg.out; fail "fio error across the format"; }
    fio_verify $DEV --size=16m
    format_raw $CDEV 0 || fail "Format NVM back to LBA format 0 failed"
    expect_eq "block size back" "$(lbs)" 512
    unload_nvme
}

test_nvme_cli_format_c_reference() {
    # The C driver on the same controller: the reference for the block size after a format.
    modprobe nvme
    wait_dev /dev/nvme0n1
    format_raw /dev/nvme0 4 || fail "Format NVM through the C driver failed"
    local c
    for _ in $(seq 50); do
        c=$(cat /sys/block/nvme0n1/queue/logical_block_size)
        [[ $c == 4096 ]] && break
        sleep 0.1
    done
    expect_eq "C driver's block size after Format NVM to LBA format 4" "$c" 4096
    format_raw /dev/nvme0 0 || fail "Format NVM back through the C driver failed"
    unload_module nvme
    unload_module nvme_core 2>/dev/null || true
}

t nvme_cli_c_reference
t nvme_cli_chardev_node
t nvme_cli_id_ctrl_equal
t nvme_cli_id_ns_equal
t nvme_cli_disk_admin_passthru
t nvme_cli_disk_open_across_unbind
t nvme_cli_sysfs_identity
t nvme_ctrl_sysfs_like_c
t nvme_udev_by_id_like_c
t nvme_passthru_err_log_like_c
t nvme_cli_ns_identity
t nvme_cli_smart_log
t nvme_cli_get_feature_7
t nvme_cli_bad_input
t nvme_cli_bad_input_like_c
t nvme_cli_reset_then_io
t nvme_cli_open_across_unbind
t nvme_cli_admin_timeout
t nvme_cli_admin_hung_no_block
t nvme_cli_admin_hung_unbind
t nvme_cli_format_c_reference
t nvme_cli_format_block_size
t nvme_cli_format_unusable_removes_disk
t nvme_cli_format_under_io
t nvme_cli_probe_fails_late
t_kernel_clean nvme_cli_kernel_clean

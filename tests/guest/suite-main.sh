#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Main guest suite: harness, module parameters, C reference drivers, rust_pmem.
source /tests/lib.sh
suite_help "$@"

# --- harness and module parameters -------------------------------------------------------

# The guest the harness booted: its kernel is the one the out-of-tree modules were built for,
# modprobe has its index, /init mounted what the suites use, and the test tools are there.
test_boot_to_init() {
    local m
    for m in rust_pmem rust_nvme_mq; do
        expect_eq "vermagic of $m.ko" "$(modinfo -F vermagic "$MODDIR/$m.ko" | cut -d' ' -f1)" "$(uname -r)"
    done
    [[ -s /lib/modules/$(uname -r)/modules.dep ]] || fail "no modules.dep for $(uname -r)"
    for m in "proc /proc" "sysfs /sys" "devtmpfs /dev" "debugfs /sys/kernel/debug" \
        "configfs /sys/kernel/config" "tmpfs /tmp"; do
        awk -v t="${m%% *}" -v p="${m#* }" '$3 == t && $2 == p { f = 1 } END { exit !f }' /proc/mounts ||
            fail "no ${m%% *} mounted on ${m#* }"
    done
    for m in nowait_read odd_dio nvme_passthru nvme_io_passthru dax_file; do
        [[ -x $TOOLS/$m ]] || fail "$TOOLS/$m is missing"
    done
}

test_rust_pmem_params_in_sysfs() {
    load_rust_pmem nowait=1
    expect_eq "nowait after nowait=1" "$(param rust_pmem nowait)" Y
    expect_eq "mode" "$(stat -c %a /sys/module/rust_pmem/parameters/nowait)" 444
    unload_module rust_pmem
    load_rust_pmem
    expect_eq "nowait default" "$(param rust_pmem nowait)" N
    unload_module rust_pmem
}

test_rust_nvme_mq_params_in_sysfs() {
    insmod $MODDIR/rust_nvme_mq.ko overflow=0 io_queue_depth=4 nr_io_queues=2
    expect_eq overflow "$(param rust_nvme_mq overflow)" N
    expect_eq io_queue_depth "$(param rust_nvme_mq io_queue_depth)" 4
    expect_eq nr_io_queues "$(param rust_nvme_mq nr_io_queues)" 2
    unload_module rust_nvme_mq
    insmod $MODDIR/rust_nvme_mq.ko
    expect_eq "overflow default" "$(param rust_nvme_mq overflow)" Y
    unload_module rust_nvme_mq
}

# insmod MODULE ARGS must fail, and the kernel log must say why (pattern).
expect_insmod_rejects() {
    local mod=$1 arg=$2 pattern=$3 out
    klog_mark
    if out=$(insmod "$MODDIR/$mod.ko" "$arg" 2>&1); then
        rmmod "$mod"
        fail "insmod $mod $arg succeeded"
    fi
    echo "insmod said: $out"
    klog | grep -E "$pattern" || fail "no clear message matching '$pattern' in dmesg"
    [[ ! -d /sys/module/$mod ]] || fail "$mod stayed loaded"
}

test_bad_params_rejected_with_message() {
    expect_insmod_rejects rust_pmem nowait=banana "invalid for parameter .nowait"
    expect_insmod_rejects rust_nvme_mq io_queue_depth=1 "io_queue_depth=1 is out of range"
    expect_insmod_rejects rust_nvme_mq overflow=maybe "invalid for parameter .overflow"
    expect_insmod_rejects rust_nvme_mq nr_io_queues=-1 "invalid for parameter .nr_io_queues"
}

test_c_nd_pmem_creates_pmem0() {
    modprobe nd_pmem
    wait_dev /dev/pmem0
    [[ $(bytes_of pmem0) -gt 0 ]] || fail "pmem0 has no capacity"
    dd if=/dev/pmem0 of=/dev/null bs=4k count=16 status=none
    unload_module nd_pmem
}

test_c_nvme_creates_nvme0n1_multiqueue() {
    modprobe nvme
    wait_dev /dev/nvme0n1
    local nq
    nq=$(ls /sys/block/nvme0n1/mq | wc -l)
    echo "nvme0n1 hardware queues: $nq"
    [[ $nq -ge 2 ]] || fail "want several hardware queues, got $nq"
    dd if=/dev/nvme0n1 of=/dev/null bs=4k count=16 iflag=direct status=none
    unload_module nvme
}

test_kunit_rust_pmem() {
    klog_mark
    load_rust_pmem
    unload_module rust_pmem
    klog | grep -E "rust_pmem|ok [0-9]+ " || true
    if klog | grep -E "not ok"; then fail "a KUnit case failed"; fi
    klog | grep -qE "ok [0-9]+ rust_pmem$" || fail "KUnit suite rust_pmem did not report ok"
}

# --- rust_pmem --------------------------------------------------------------------------

pmem_verify() { # NOWAIT
    load_rust_pmem nowait=$1
    fio_verify /dev/rpmem0
    unload_module rust_pmem
}

test_pmem_ext4_fsck_checksums() {
    load_rust_pmem
    mkfs.ext4 -q -F /dev/rpmem0
    mkdir -p /mnt/p
    mount -t ext4 /dev/rpmem0 /mnt/p
    for i in $(seq 8); do dd if=/dev/urandom of=/mnt/p/f$i bs=64k count=$((i * 4)) status=none; done
    mkdir /mnt/p/dir && cp /mnt/p/f3 /mnt/p/dir/copy
    (cd /mnt/p && sha256sum f* dir/copy) >/tmp/sums
    umount /mnt/p
    e2fsck -f -n /dev/rpmem0 || fail "fsck found problems"
    unload_module rust_pmem
    load_rust_pmem
    mount -t ext4 /dev/rpmem0 /mnt/p
    (cd /mnt/p && sha256sum -c /tmp/sums) || fail "checksums differ after remount"
    umount /mnt/p
    unload_module rust_pmem
}

# The end of the disk. The driver's own range check (ByteRange::of_request) cannot be reached
# from user space: the block layer stops every I/O at the capacity the driver sets (a write or
# read crossing it is cut short, one starting at it fails before queue_rq). So what is checked
# is what the driver decides: the capacity is the namespace's size, I/O ending exactly at the
# last sector reads back what was written, and I/O at or across the end fails or is cut
# short without touching the data before it.
test_pmem_out_of_range_fails_cleanly() {
    load_rust_pmem
    local size blocks out
    size=$(bytes_of rpmem0)
    expect_eq "capacity = size of $NS" "$size" "$(cat $ND/devices/$NS/size)"
    blocks=$((size / 4096))
    # The last two 4 KiB blocks, and the last sector alone.
    head -c 8192 /dev/urandom >/tmp/last
    dd if=/tmp/last of=/dev/rpmem0 bs=4k seek=$((blocks - 2)) oflag=direct status=none ||
        fail "write of the last two blocks failed"
    cmp <(dd if=/dev/rpmem0 bs=4k skip=$((blocks - 2)) iflag=direct status=none) /tmp/last ||
        fail "the last two blocks read back wrong"
    head -c 512 /dev/urandom >/tmp/sector
    dd if=/tmp/sector of=/dev/rpmem0 bs=512 seek=$((size / 512 - 1)) oflag=direct status=none ||
        fail "write of the last sector failed"
    dd if=/tmp/sector of=/tmp/last bs=512 seek=15 conv=notrunc status=none
    cmp <(dd if=/dev/rpmem0 bs=512 skip=$((size / 512 - 16)) iflag=direct status=none) /tmp/last ||
        fail "the last sector, or the sectors before it, read back wrong"
    # Starting at the end: refused, nothing read.
    if out=$(dd if=/dev/zero of=/dev/rpmem0 bs=4k seek=$blocks count=1 oflag=direct 2>&1); then
        fail "write past the end succeeded: $out"
    fi
    echo "write past the end: $out"
    expect_eq "bytes read at the end" "$(dd if=/dev/rpmem0 bs=4k skip=$blocks count=1 iflag=direct status=none | wc -c)" 0
    # Crossing the end: cut short at the end. The write stores its first 4 KiB in the last
    # block and reports the rest as failed; the block before it keeps its data.
    head -c 8192 /dev/urandom >/tmp/cross
    if out=$(dd if=/tmp/cross of=/dev/rpmem0 bs=8k seek=$(((blocks - 1) * 4096)) count=1 \
        oflag=direct,seek_bytes 2>&1); then
        fail "a write crossing the end succeeded in full: $out"
    fi
    echo "write crossing the end: $out"
    expect_eq "bytes an 8 KiB read from the last block gets" \
        "$(dd if=/dev/rpmem0 bs=8k skip=$(((blocks - 1) * 4096)) count=1 iflag=direct,skip_bytes status=none | wc -c)" 4096
    cmp <(dd if=/dev/rpmem0 bs=4k skip=$((blocks - 1)) iflag=direct status=none) <(head -c 4096 /tmp/cross) ||
        fail "the last block does not hold the first half of the write that crossed the end"
    cmp <(dd if=/dev/rpmem0 bs=4k skip=$((blocks - 2)) count=1 iflag=direct status=none) <(head -c 4096 /tmp/last) ||
        fail "the block before the last changed"
    unload_module rust_pmem
}

test_pmem_rwf_nowait_follows_param() {
    local out
    load_rust_pmem nowait=1
    out=$($TOOLS/nowait_read /dev/rpmem0) || fail "RWF_NOWAIT read refused with nowait=1: $out"
    unload_module rust_pmem
    load_rust_pmem nowait=0
    if out=$($TOOLS/nowait_read /dev/rpmem0); then fail "RWF_NOWAIT read accepted with nowait=0"; fi
    expect_eq "errno with nowait=0" "$out" EOPNOTSUPP
    unload_module rust_pmem
}

# The unlabelled NVDIMM has one io namespace; both drivers bind to it, one at a time.
NS=namespace0.0

# A driver loaded while the other one drives the namespace gets nothing, and the namespace
# cannot be bound to it behind the owner's back.
test_pmem_namespace_kept_by_nd_pmem() {
    modprobe nd_pmem
    wait_dev /dev/pmem0
    # insmod returns after the driver core offered rust_pmem every namespace of the nd bus
    # (driver_register probes synchronously: the nd bus asks for no asynchronous probing).
    insmod $MODDIR/rust_pmem.ko
    [[ ! -e /dev/rpmem0 ]] || fail "rust_pmem took the namespace nd_pmem drives"
    expect_eq "driver of $NS" "$(driver_of $NS)" nd_pmem
    if echo $NS 2>/dev/null >$ND/drivers/rust_pmem/bind; then
        fail "bound $NS to rust_pmem while nd_pmem drives it"
    fi
    [[ -b /dev/pmem0 && ! -e /dev/rpmem0 ]] || fail "a failed bind changed the disks"
    unload_module rust_pmem
    unload_module nd_pmem
}

# switch_to DRIVER DISK: unbind the namespace from its driver, bind it to DRIVER, wait for DISK.
switch_to() {
    local old
    old=$(driver_of $NS)
    [[ $old == none ]] || echo $NS >$ND/drivers/$old/unbind
    echo $NS >$ND/drivers/$1/bind
    wait_dev "$2"
    expect_eq "driver of $NS" "$(driver_of $NS)" "$1"
}

# Both drivers loaded: the namespace moves between them by sysfs unbind/bind, by
# driver_override with ndctl disable/enable-namespace, and both see the same data.
test_pmem_switch_by_binding_and_ndctl() {
    modprobe nd_pmem
    insmod $MODDIR/rust_pmem.ko
    dd if=/dev/urandom of=/tmp/pat bs=64k count=16 status=none
    switch_to rust_pmem /dev/rpmem0
    [[ ! -e /dev/pmem0 ]] || fail "pmem0 still there after unbinding nd_pmem"
    dd if=/tmp/pat of=/dev/rpmem0 bs=64k oflag=direct status=none
    switch_to nd_pmem /dev/pmem0
    wait_gone /dev/rpmem0
    dd if=/dev/pmem0 of=/tmp/back bs=64k count=16 iflag=direct status=none
    cmp /tmp/pat /tmp/back || fail "nd_pmem reads other data than rust_pmem wrote"
    dd if=/dev/urandom of=/tmp/pat bs=64k count=16 status=none
    dd if=/tmp/pat of=/dev/pmem0 bs=64k oflag=direct status=none

    # driver_override picks the driver that ndctl enable-namespace binds.
    echo rust_pmem >$ND/devices/$NS/driver_override
    ndctl disable-namespace $NS
    wait_gone /dev/pmem0
    expect_eq "driver after disable" "$(driver_of $NS)" none
    ndctl enable-namespace $NS
    wait_dev /dev/rpmem0
    expect_eq "driver after enable with override" "$(driver_of $NS)" rust_pmem
    dd if=/dev/rpmem0 of=/tmp/back bs=64k count=16 iflag=direct status=none
    cmp /tmp/pat /tmp/back || fail "rust_pmem reads other data than nd_pmem wrote"
    ndctl list -N >/tmp/list
    cat /tmp/list
    grep -qE '"blockdev": ?"rpmem0"' /tmp/list || fail "ndctl list does not show rpmem0"
    # The override keeps nd_pmem out even through sysfs.
    echo $NS >$ND/drivers/rust_pmem/unbind
    wait_gone /dev/rpmem0
    if echo $NS 2>/dev/null >$ND/drivers/nd_pmem/bind; then fail "nd_pmem bound despite the override"; fi
    echo nd_pmem >$ND/devices/$NS/driver_override
    ndctl enable-namespace $NS
    wait_dev /dev/pmem0
    expect_eq "driver with override nd_pmem" "$(driver_of $NS)" nd_pmem
    echo >$ND/devices/$NS/driver_override
    expect_eq "override cleared" "$(cat $ND/devices/$NS/driver_override)" "(null)"
    unload_module rust_pmem
    unload_module nd_pmem
    expect_eq "driver after unloading both" "$(driver_of $NS)" none
}

# The disk's bad block list: a read touching a listed sector fails with EIO although the
# media holds good data (so the media is not read), reads beside it work, and writing over
# listed sectors removes them from the list (only those) and stores the data.
test_pmem_badblocks_fail_reads_cleared_by_writes() {
    load_rust_pmem
    local bb=/sys/block/rpmem0/badblocks
    expect_eq "bad blocks at probe (QEMU reports no poison)" "$(cat $bb)" ""
    dd if=/dev/urandom of=/tmp/blk bs=4k count=4 status=none
    dd if=/tmp/blk of=/dev/rpmem0 bs=4k count=4 oflag=direct status=none
    echo "8 8" >$bb
    echo "24 4" >$bb
    expect_eq "list" "$(cat $bb | tr '\n' ' ')" "8 8 24 4 "
    if dd if=/dev/rpmem0 of=/dev/null bs=4k skip=1 count=1 iflag=direct 2>/tmp/err; then
        fail "read of a bad block succeeded"
    fi
    grep -q "Input/output error" /tmp/err || { cat /tmp/err; fail "no EIO"; }
    if dd if=/dev/rpmem0 of=/dev/null bs=16k count=1 iflag=direct 2>/dev/null; then
        fail "read overlapping a bad block succeeded"
    fi
    if dd if=/dev/rpmem0 of=/dev/null bs=512 skip=27 count=1 iflag=direct 2>/dev/null; then
        fail "read of the last sector of a bad range succeeded"
    fi
    dd if=/dev/rpmem0 of=/tmp/back bs=4k count=1 iflag=direct status=none
    head -c 4096 /tmp/blk >/tmp/blk0
    cmp /tmp/back /tmp/blk0 || fail "good block before the bad one reads wrong"
    dd if=/dev/rpmem0 of=/tmp/back bs=512 skip=28 count=4 iflag=direct status=none ||
        fail "read right after a bad range failed"
    # Write over the first range: it leaves the list, the second stays.
    dd if=/dev/urandom of=/tmp/new bs=4k count=1 status=none
    dd if=/tmp/new of=/dev/rpmem0 bs=4k seek=1 oflag=direct status=none || fail "write over a bad block failed"
    expect_eq "list after writing block 1" "$(cat $bb | tr '\n' ' ')" "24 4 "
    dd if=/dev/rpmem0 of=/tmp/back bs=4k skip=1 count=1 iflag=direct status=none ||
        fail "read after the write failed"
    cmp /tmp/back /tmp/new || fail "data written over a bad block reads wrong"
    # Writing part of a range clears that part only.
    dd if=/dev/zero of=/dev/rpmem0 bs=512 seek=24 count=2 oflag=direct status=none
    expect_eq "list after a partial write" "$(cat $bb | tr '\n' ' ')" "26 2 "
    unload_module rust_pmem
    # A new probe starts from the region's list again (empty here).
    load_rust_pmem
    expect_eq "bad blocks after reload" "$(cat $bb)" ""
    unload_module rust_pmem
}

test_pmem_rmmod_under_load_refused_no_loss() {
    load_rust_pmem nowait=1
    fio --name=load --filename=/dev/rpmem0 --direct=1 --ioengine=io_uring --iodepth=8 \
        --rw=randwrite --bs=4k --size=64m --verify=crc32c --verify_fatal=1 --do_verify=1 \
        --time_based=0 --loops=3 --output-format=terse >/tmp/load.out 2>&1 &
    local fio_pid=$! refused=0 i
    # Wait until fio has the disk open (the open pins the module).
    for i in $(seq 100); do
        [[ $(cat /sys/module/rust_pmem/refcnt) -gt 0 ]] && break
        sleep 0.1
    done
    [[ $(cat /sys/module/rust_pmem/refcnt) -gt 0 ]] || fail "fio never opened the disk"
    for i in 1 2 3; do
        if rmmod rust_pmem 2>/tmp/rmmod.err; then fail "rmmod succeeded while fio had the disk open"; fi
        refused=$((refused + 1))
        sleep 0.3
    done
    cat /tmp/rmmod.err
    wait $fio_pid || { cat /tmp/load.out; fail "fio failed or lost data while rmmod was attempted"; }
    unload_module rust_pmem
    [[ ! -d /sys/module/rust_pmem ]] || fail "module still loaded"
}

# tests/modules/rust_leak_test.ko leaks a disk, a misc device, a device class and a device of
# that class from safe code (`core::mem::forget`). When the module goes, after its exit or
# after a failed init, the kernel unregisters what it left (kernel patch "rust: module: undo the registrations a module
# leaves behind"): nothing of it stays registered, with calls into the freed module. And an
# init that fails after adding and deleting a disk (no leak) must not leave the partition
# scan's file to be closed after the module is freed (patch "block: close the partition
# scan's file before returning"). Before those patches the first case oopsed in bdev_open
# on opening /dev/rleak0 after rmmod, the other two in bdev_release as insmod returned.
leak_test_left() {
    local left=()
    [[ -e /sys/block/$1 ]] && left+=("/sys/block/$1")
    [[ -e /dev/$1 ]] && left+=("/dev/$1")
    [[ -e /sys/class/misc/rleak_misc ]] && left+=(/sys/class/misc/rleak_misc)
    [[ -e /dev/rleak_misc ]] && left+=(/dev/rleak_misc)
    [[ -e /sys/class/rleak ]] && left+=(/sys/class/rleak)
    [[ -e /dev/rleak_class0 ]] && left+=(/dev/rleak_class0)
    grep -qw rleak /proc/devices && left+=("rleak in /proc/devices")
    ((${#left[@]} == 0)) || fail "$2: still there: ${left[*]}"
}
test_leaked_registrations_undone_at_unload() {
    insmod "$MODDIR/rust_leak_test.ko" || fail "insmod rust_leak_test.ko failed"
    [[ -e /sys/block/rleak0 && -e /sys/class/misc/rleak_misc &&
        -e /sys/class/rleak/rleak_class0 ]] ||
        fail "the test module's disk, misc device and class device were not registered"
    wait_chr /dev/rleak_class0
    # The class device's file operations are the misc device's: open works.
    : </dev/rleak_class0 || fail "opening the leaked class device while its module is loaded failed"
    dd if=/dev/rleak0 of=/dev/null bs=4k count=1 iflag=direct status=none ||
        fail "reading the leaked disk while its module is loaded failed"
    rmmod rust_leak_test || fail "rmmod rust_leak_test failed"
    leak_test_left rleak0 "after rmmod"
    local what
    for what in disk "misc device" "device class" "class device"; do
        klog | grep -q "rust_leak_test: a $what was still registered when the module went" ||
            fail "no message about the leaked $what"
    done
    if dd if=/dev/rleak0 of=/dev/null bs=4k count=1 status=none 2>/dev/null; then
        fail "the leaked disk could still be read after rmmod"
    fi

    if insmod "$MODDIR/rust_leak_test.ko" fail_init=1 2>/tmp/insmod.err; then
        fail "insmod with fail_init=1 succeeded"
    fi
    leak_test_left rleak0 "after an init that failed after leaking"

    if insmod "$MODDIR/rust_leak_test.ko" drop_fail=1 2>/tmp/insmod.err; then
        fail "insmod with drop_fail=1 succeeded"
    fi
    leak_test_left rleak1 "after an init that failed after deleting its disk"
    [[ ! -d /sys/module/rust_leak_test ]] || fail "rust_leak_test is still loaded"
}

test_pmem_verify_nowait0() { pmem_verify 0; }
test_pmem_verify_nowait1() { pmem_verify 1; }

# A task's plugged requests reach the driver together (queue_rqs), which carries them out and
# ends them in one batch: with fio submitting 16 at a time, most requests come that way, and
# their data reads back. Submitted one at a time (no plug), none does. (The disk keeps no I/O
# statistics, like nd_pmem's: fio's requests are counted from its size, 32 MiB written and
# read back in 4 KiB blocks.)
test_pmem_batched_requests_verified() {
    load_rust_pmem nowait=1
    local f=/sys/kernel/debug/rust_pmem-rpmem0/batched ios=$((2 * 32 * 256)) one=- sixteen=-
    if [[ -r $f ]]; then
        one=$(cat $f)
        fio_verify /dev/rpmem0 --size=32m --iodepth=32 --iodepth_batch_submit=1 \
            --iodepth_batch_complete_min=1
        one=$(($(cat $f) - one)) sixteen=$(cat $f)
        fio_verify /dev/rpmem0 --size=32m --iodepth=32 --iodepth_batch_submit=16 \
            --iodepth_batch_complete_min=16
        sixteen=$(($(cat $f) - sixteen))
    fi
    unload_module rust_pmem
    [[ $one != - ]] || fail "$f missing"
    echo "$ios requests each: one at a time $one in batches, 16 at a time $sixteen"
    expect_eq "requests handed over in batches, one at a time" "$one" 0
    ((sixteen * 2 >= ios)) || fail "only $sixteen of $ios requests came in batches of 16"
}

t boot_to_init
t harness_kernel_report_fails_its_test
t rust_pmem_params_in_sysfs
t rust_nvme_mq_params_in_sysfs
t bad_params_rejected_with_message
t c_nd_pmem_creates_pmem0
t c_nvme_creates_nvme0n1_multiqueue
t kunit_rust_pmem
t pmem_verify_nowait0
t pmem_verify_nowait1
t pmem_batched_requests_verified
t pmem_ext4_fsck_checksums
t pmem_out_of_range_fails_cleanly
t pmem_rwf_nowait_follows_param
t pmem_namespace_kept_by_nd_pmem
t pmem_switch_by_binding_and_ndctl
t pmem_badblocks_fail_reads_cleared_by_writes
t pmem_rmmod_under_load_refused_no_loss
t leaked_registrations_undone_at_unload
t_kernel_clean no_kernel_warnings

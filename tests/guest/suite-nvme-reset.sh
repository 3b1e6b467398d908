#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rust_nvme_mq controller resets, suspend/resume and direct I/O limits (SGLs), on QEMU's NVMe
# (256 MiB image, serial rblk0001): boot with --smp 4. Every test loads the driver itself and
# leaves it unloaded.
#   bash /tests/suite-nvme-reset.sh        run every test
#   bash /tests/suite-nvme-reset.sh --help
# (No `set -e` here: `t` runs each test in a subshell with `set -euo pipefail` and reports it.)
. /tests/lib.sh
suite_help "$@"
. /tests/nvme-lib.sh

# The PCI function of the controller, and its command register (bit 1: memory space, bit 2:
# bus master), written through sysfs like `setpci COMMAND` does.
PCI_MEM=2
PCI_MASTER=4
bdf() { basename "$(ls -d /sys/bus/pci/devices/0000:* | while read -r d; do
    [[ $(cat "$d/class") == 0x010802 ]] && echo "$d"; done | head -n1)"; }
CFG=/sys/bus/pci/devices/$(bdf)/config
pci_cmd() { od -An -tu1 -j4 -N1 "$CFG" | tr -d ' '; }
set_pci_cmd() { # VALUE: the low byte of the command register
    printf "\\x$(printf %02x "$1")" | dd of="$CFG" bs=1 seek=4 count=1 conv=notrunc status=none
    expect_eq "command register after writing $1" "$(pci_cmd)" "$1"
}
pci_bit_clear() { set_pci_cmd $(($(pci_cmd) & ~$1)); }
pci_bit_set() { set_pci_cmd $(($(pci_cmd) | $1)); }

# queue_limits DISK: the limits direct I/O depends on.
queue_limits() {
    local f
    for f in dma_alignment virt_boundary_mask max_segments max_hw_sectors_kb max_segment_size; do
        echo "$f=$(cat /sys/block/$1/queue/$f)"
    done
}

load_c_nvme() { modprobe nvme; wait_dev /dev/nvme0n1; }
unload_c_nvme() { unload_module nvme; unload_module nvme_core 2>/dev/null || true; }

# Limits at least the C driver's on the same controller, which takes SGLs: no virtual boundary
# (segments of any length at any dword), transfers up to MDTS (QEMU: 7, 512 KiB), one segment
# per page of that plus one, segments of any size; equal to C's without an IOMMU. With
# sgl_threshold=0 SGLs are still used for what PRPs cannot describe, so the limits stay.
test_nvme_reset_queue_limits_like_c() {
    load_nvme
    queue_limits rnvme0n1 | tee /tmp/ours
    unload_nvme
    load_nvme sgl_threshold=0
    queue_limits rnvme0n1 >/tmp/ours-0
    unload_nvme
    load_c_nvme
    queue_limits nvme0n1 | tee /tmp/c
    unload_c_nvme
    local f ours c
    for f in dma_alignment virt_boundary_mask max_segments max_hw_sectors_kb max_segment_size; do
        expect_eq "$f with sgl_threshold=0" "$(grep "^$f=" /tmp/ours-0)" "$(grep "^$f=" /tmp/ours)"
        ours=$(sed -n "s/^$f=//p" /tmp/ours) c=$(sed -n "s/^$f=//p" /tmp/c)
        case $f in
        # Alignment and boundary: no stricter than C's.
        dma_alignment | virt_boundary_mask) [[ $ours -le $c ]] || fail "$f $ours, C: $c" ;;
        # Sizes: at least C's (equal without an IOMMU; behind one, C caps transfers at the
        # IOMMU's optimal mapping size, 128 KiB, and segments with them).
        *) [[ $ours -ge $c ]] || fail "$f $ours, C: $c" ;;
        esac
    done
    if [[ $(sed -n 's/^max_hw_sectors_kb=//p' /tmp/c) == 512 ]]; then
        expect_eq "limits equal to C's (no IOMMU)" "$(cat /tmp/ours)" "$(cat /tmp/c)"
    fi
    expect_eq "virt_boundary_mask (C: $(grep virt_ /tmp/c))" "$(grep virt_ /tmp/ours)" virt_boundary_mask=0
    expect_eq "max_hw_sectors_kb (C: $(grep max_hw /tmp/c))" "$(grep max_hw /tmp/ours)" max_hw_sectors_kb=512
}

# sgl_count: commands whose data went as an SGL, all queues.
sgl_count() { sum_col sgl; }
# disk_rw [DISK]: reads, sectors read, writes, sectors written the block layer completed on
# DISK (default rnvme0n1).
disk_rw() { awk '{ print $1, $3, $5, $7 }' /sys/block/${1:-rnvme0n1}/stat; }

# big_rw: read and write 512 KiB (MDTS) with O_DIRECT, page-aligned buffers; print the reads and
# writes the block layer completed for it, their sectors, and the SGL commands among them.
big_rw() {
    local before after sgl=$(sgl_count)
    before=($(disk_rw))
    dd if=$DEV of=/dev/null bs=512k count=1 iflag=direct status=none
    dd if=/dev/zero of=$DEV bs=512k count=1 seek=3 oflag=direct status=none
    after=($(disk_rw))
    echo "$((after[0] - before[0])) $((after[1] - before[1])) $((after[2] - before[2]))" \
        "$((after[3] - before[3])) $(($(sgl_count) - sgl))"
}

# A transfer up to MDTS goes out as one command: a 512 KiB O_DIRECT read and write are one
# request of 1024 sectors each. Which description it gets follows sgl_threshold: with 0, PRPs
# (the page-aligned buffer has no gaps); with 4096, SGLs (its segments average 4 KiB or more).
test_nvme_reset_mdts_unsplit() {
    local out
    load_nvme
    out=($(big_rw))
    expect_eq "reads, sectors, writes, sectors for a 512 KiB read and write" "${out[*]:0:4}" "1 1024 1 1024"
    unload_nvme
    load_nvme sgl_threshold=0
    out=($(big_rw))
    expect_eq "with sgl_threshold=0: requests and sectors" "${out[*]:0:4}" "1 1024 1 1024"
    expect_eq "with sgl_threshold=0: SGL commands" "${out[4]}" 0
    unload_nvme
    load_nvme sgl_threshold=4096
    out=($(big_rw))
    expect_eq "with sgl_threshold=4096: requests and sectors" "${out[*]:0:4}" "1 1024 1 1024"
    expect_eq "with sgl_threshold=4096: SGL commands" "${out[4]}" 2
    unload_nvme
}

# odd_dio DEV MISALIGN NVEC: O_DIRECT pwritev/preadv of NVEC x 512-byte vectors, each at
# MISALIGN bytes into its own page. dma_alignment 3: dword-aligned buffers work and the data
# reads back; 2-byte-aligned ones are refused with EINVAL and nothing else happens.
check_odd_dio() {
    local dev=$1 out
    out=$($TOOLS/odd_dio "$dev" 4 320) || true
    expect_eq "$dev: 320 x 512 bytes at page offset 4" "$out" ok
    out=$($TOOLS/odd_dio "$dev" 516 7) || true
    expect_eq "$dev: 7 x 512 bytes at page offset 516" "$out" ok
    out=$($TOOLS/odd_dio "$dev" 2 320) || true
    expect_eq "$dev: 320 x 512 bytes at page offset 2 (below dma_alignment)" "$out" "write EINVAL"
    out=$($TOOLS/odd_dio "$dev" 0 320) || true
    expect_eq "$dev: 320 x 512 bytes page aligned" "$out" ok
}

# odd_requests DISK: write and read back 320 vectors of 512 bytes, each at offset 4 of its own
# page (odd_dio); print the write and read requests the block layer completed on DISK for it.
odd_requests() {
    local disk=$1 before after out
    before=($(disk_rw $disk))
    out=$($TOOLS/odd_dio /dev/$disk 4 320) || true
    expect_eq "/dev/$disk: 320 x 512 bytes at page offset 4" "$out" ok
    after=($(disk_rw $disk))
    echo "$((after[2] - before[2])) $((after[0] - before[0]))"
}

# Buffers C's SGL path accepts (vectors at a dword offset, not page-sized) are taken in no more
# requests than C takes, as SGLs, and read back: 320 vectors of 512 bytes, each at offset 4
# of its own page, are 3 requests each way (at most 129 segments each), where PRPs (a page
# boundary) needed 320.
test_nvme_reset_odd_direct_io() {
    local ours c sgl
    load_nvme
    sgl=$(sgl_count)
    ours=$(odd_requests rnvme0n1)
    expect_eq "write and read requests for 320 odd vectors" "$ours" "3 3"
    expect_eq "SGL commands" $(($(sgl_count) - sgl)) 6
    check_odd_dio $DEV
    fio_verify $DEV --size=16m
    fio_verify $DEV --size=16m --bs=64k --iomem_align=4
    unload_nvme
    load_c_nvme
    c=($(odd_requests nvme0n1))
    # As few as C's (the same without an IOMMU; behind one, C's limits are smaller).
    [[ ${ours% *} -le ${c[0]} && ${ours#* } -le ${c[1]} ]] || fail "requests $ours, C: ${c[*]}"
    echo "write and read requests: $ours, C driver: ${c[*]}"
    check_odd_dio /dev/nvme0n1
    unload_c_nvme
}

# fault_during_fio NAME BIT then_on|left_off: fio with verify, BIT of the PCI command register
# cleared 2 s in (as a DMA fault or a stray config write would leave it) and, with then_on, set
# again a second later. Nothing completes meanwhile, the commands time out, the driver resets
# the controller, and fio must complete with no error and verify.
fault_during_fio() {
    local name=$1 bit=$2 how=$3
    klog_mark
    load_nvme io_timeout=2 admin_timeout=2
    fio_bg "$name"
    wait_io rnvme0n1
    pci_bit_clear "$bit"
    if [[ $how == then_on ]]; then
        sleep 1  # how long the fault lasts (not a wait for anything)
        pci_bit_set "$bit"
    fi
    fio_done
    klog | grep -E "rnvme0:" | tail -n 8
    klog | grep -q "rnvme0: controller reset done" || fail "no controller reset"
}

# System sleep while fio writes and verifies, through /sys/power/pm_test (the PM core runs the
# device callbacks, then waits pm_test_delay seconds instead of sleeping): "devices" stops after
# the devices' suspend callbacks, "platform" goes on through the late and noirq phases; the
# state is "freeze" (suspend to idle). Each cycle must shut the controller down (suspend) and
# bring it back (resume: a reset), and fio must finish with no error and its data verified,
# every command completed.
test_nvme_reset_suspend_resume() {
    local level n=0
    [[ -e /sys/power/pm_test ]] || fail "no /sys/power/pm_test (the kernel needs CONFIG_PM_DEBUG)"
    grep -qw freeze /sys/power/state || fail "no freeze in /sys/power/state: $(cat /sys/power/state)"
    echo 1 >/sys/module/suspend/parameters/pm_test_delay
    klog_mark
    load_nvme
    fio_bg suspend --loops=6
    for level in devices platform devices platform; do
        sleep 2
        kill -0 $FIO_PID 2>/dev/null || fail "fio ended before cycle $((n + 1))"
        echo $level >/sys/power/pm_test
        echo freeze >/sys/power/state || fail "suspend cycle $((n + 1)) ($level) failed"
        n=$((n + 1))
    done
    echo none >/sys/power/pm_test
    fio_done 600
    klog | grep -E "rnvme0:|PM: " | tail -n 12
    expect_eq "suspends of rnvme0" "$(klog | grep -c 'rnvme0: suspended, ')" $n
    expect_eq "resumes of rnvme0" "$(klog | grep -c 'rnvme0: resuming')" $n
    expect_eq "controller resets after resume" "$(klog | grep -c 'rnvme0: controller reset done')" $n
    ! klog | grep -iE "I/O error|rnvme0:.*(fail|timed out)" || fail "errors in the kernel log"
    cat "$STATS"
    all_completed
    expect_eq "in flight in the block layer" "$(awk '{ print $1 + $2 }' /sys/block/rnvme0n1/inflight)" 0
    unload_nvme
}

# Bus mastering off and back on a second later: every submitted command completes.
test_nvme_reset_bus_master_off_then_on() {
    fault_during_fio busmaster $PCI_MASTER then_on
    cat "$STATS"
    all_completed
    unload_nvme
}

# Bus mastering off and left off: only the driver's reset turns it on again.
test_nvme_reset_bus_master_left_off() {
    fault_during_fio busmaster_off $PCI_MASTER left_off
    klog | grep -q "bus mastering was off" || fail "the reset did not see bus mastering off"
    expect_eq "bus master bit after the reset" $(($(pci_cmd) & PCI_MASTER)) $PCI_MASTER
    unload_nvme
}

# Memory space decoding off and left off: the registers no longer answer (the abort fails),
# and the reset turns memory decoding on again before it enables the controller (C does it
# with pci_disable_device() + pci_enable_device_mem()).
test_nvme_reset_memory_space_left_off() {
    fault_during_fio memoff $PCI_MEM left_off
    klog | grep -q "memory decoding was off" || fail "the reset did not see memory decoding off"
    expect_eq "memory space bit after the reset" $(($(pci_cmd) & PCI_MEM)) $PCI_MEM
    unload_nvme
}

# A controller that does not come back: debugfs fail_resets (test-only fault injection) makes
# every reset attempt fail with the controller left disabled, a lost command starts the reset.
# The driver gives up after 3 attempts, fails what it held and removes the disk: fio ends with
# errors instead of hanging, no kernel warning, rmmod works, and the controller comes back on
# the next load.
test_nvme_reset_dead_controller_removed() {
    klog_mark
    load_nvme io_timeout=2 admin_timeout=2
    local k=/sys/kernel/debug/rust_nvme_mq/rnvme0 pid i
    fio --name=dead --filename=$DEV --direct=1 --ioengine=io_uring --iodepth=16 --rw=randread \
        --bs=4k --size=64m --time_based --runtime=600 --allow_file_create=0 >/tmp/dead.out 2>&1 &
    pid=$!
    wait_io rnvme0n1
    echo 1000 >$k/fail_resets
    echo 1 >$k/lose_commands
    for i in $(seq 120); do [[ -e /sys/block/rnvme0n1 ]] || break; sleep 1; done
    [[ ! -e /sys/block/rnvme0n1 ]] || fail "disk still there after ${i} s"
    echo "disk removed about ${i} s after the lost command"
    wait_exit $pid 60 || fail "fio hangs after the disk went away"
    if wait $pid; then fail "fio on a dead controller reported no error"; fi
    grep -E "error|err=" /tmp/dead.out | head -n 3
    klog | grep -E "rnvme0:" | tail -n 8
    expect_eq "reset attempts" "$(klog | grep -c 'controller reset attempt [0-9] of 3 failed')" 3
    klog | grep -q "did not come back after 3 reset attempts" || fail "no give-up message"
    [[ ! -b $DEV ]] || fail "$DEV still there"
    kernel_clean
    unload_module rust_nvme_mq
    load_nvme
    fio_verify $DEV --size=16m
    unload_nvme
}

# `nvme reset` (NVME_IOCTL_RESET) answers as C's nvme_reset_ctrl_sync(): ENETRESET when the
# controller is not live once the reset is over (debugfs fail_resets makes every attempt fail,
# so the driver gives up and the controller is dead), EBUSY when no reset can start (the
# controller is dead; also while a reset or a PCI function reset runs). rust_nvme_mq answered
# EIO to both before.
test_nvme_reset_ioctl_errors_like_c() {
    klog_mark
    load_nvme
    local k=/sys/kernel/debug/rust_nvme_mq/rnvme0 out
    echo 1000 >$k/fail_resets
    if out=$(nvme reset /dev/rnvme0 2>&1); then fail "nvme reset succeeded although every reset attempt fails"; fi
    echo "first: $out"
    grep -q "Network dropped connection on reset" <<<"$out" ||
        fail "a reset that left the controller dead: want ENETRESET, got: $out"
    klog | grep -q "did not come back after 3 reset attempts" || fail "no give-up message"
    if out=$(nvme reset /dev/rnvme0 2>&1); then fail "nvme reset of a dead controller succeeded"; fi
    echo "second: $out"
    grep -q "Device or resource busy" <<<"$out" || fail "a reset of a dead controller: want EBUSY, got: $out"
    unload_module rust_nvme_mq
}

# C's controller attributes `reset_controller` and `rescan_controller`
# (/sys/block/rnvme0n1/device/, the controller's device) while fio writes and verifies: each
# write returns once its reset or rescan is done (the controller is live again, the disk
# still there), no command waits for a timeout, fio verifies, every command completed.
test_nvme_ctrl_sysfs_writes_under_io() {
    local ctrl=/sys/block/rnvme0n1/device i
    klog_mark
    load_nvme
    [[ -f $ctrl/reset_controller && -f $ctrl/rescan_controller ]] ||
        fail "no reset_controller or rescan_controller on the controller's device"
    expect_eq "mode of reset_controller" "$(stat -c %a $ctrl/reset_controller)" 200
    fio_bg ctrlwrite --loops=4
    for i in 1 2; do
        wait_io rnvme0n1
        kill -0 $FIO_PID 2>/dev/null || fail "fio ended before reset $i"
        echo 1 >$ctrl/reset_controller || fail "reset $i through sysfs failed"
        expect_eq "state once reset $i returned" "$(cat $ctrl/state)" live
        echo 1 >$ctrl/rescan_controller || fail "rescan $i through sysfs failed"
        [[ -b $DEV ]] || fail "the disk went away in rescan $i"
    done
    fio_done
    expect_eq "resets done" "$(klog | grep -c 'rnvme0: controller reset done')" 2
    ! klog | grep -iE "I/O error|rnvme0:.*(fail|timed out|abort|not completed)" || fail "errors in the kernel log"
    all_completed
    unload_nvme
}

# Two resets of the PCI function (the sysfs `reset` attribute, as blktests' nvme/032, VFIO or
# another driver do it) while fio writes and verifies: the PCI core calls the driver's
# reset_prepare (controller disabled, the requests it held given back to the block layer) and
# reset_done (controller back at once) around each, so nothing waits for a timeout: fio
# completes with its data verified within the default timeouts, every command completed, no
# abort or timeout in the kernel log.
test_nvme_pci_function_reset_under_io() {
    local n reset=/sys/bus/pci/devices/$(bdf)/reset
    [[ -w $reset ]] || fail "no $reset: the function has no reset method"
    klog_mark
    load_nvme
    hang_watch 240
    fio_bg fnreset --loops=6
    for n in 1 2; do
        wait_io rnvme0n1
        kill -0 $FIO_PID 2>/dev/null || fail "fio ended before reset $n"
        echo 1 >"$reset" || fail "reset $n of the function failed"
    done
    fio_done
    klog | grep -E "rnvme0:|resetting" | tail -n 8
    expect_eq "function resets prepared" "$(klog | grep -c 'rnvme0: PCI function reset: controller disabled')" 2
    expect_eq "function resets done" "$(klog | grep -c 'rnvme0: PCI function reset: controller back')" 2
    ! klog | grep -iE "I/O error|rnvme0:.*(fail|timed out|abort|not completed)" || fail "errors in the kernel log"
    all_completed
    unload_nvme
}

# Function resets racing the driver's own controller resets (`nvme reset` on /dev/rnvme0,
# started 0 to 40 ms before each of 4 function resets) while fio writes and verifies: the
# function reset either takes a live controller out of service or joins the reset that runs,
# and comes back each time; no command waits for its timeout, fio verifies, every command
# completed. (`nvme reset` may fail when the controller is not live once its reset is over:
# a function reset holds it, as C's ENETRESET/EBUSY.)
test_nvme_pci_function_reset_races_controller_reset() {
    local i r reset=/sys/bus/pci/devices/$(bdf)/reset
    klog_mark
    load_nvme
    hang_watch 240
    fio_bg fnrace --loops=3
    # Each function reset 0 to 40 ms after the driver's reset began: before it, during it
    # (~30 ms under TCG) and after. Few of them: QEMU 10.0 under TCG aborts now and then as
    # the BAR goes away and comes back under I/O (iotlb_to_section; docs/tests.md).
    for i in 0 1 2 4; do
        wait_io rnvme0n1
        nvme reset /dev/rnvme0 2>/dev/null &
        r=$!
        sleep "0.0$i"
        echo 1 >"$reset" || fail "function reset after ${i}0 ms failed"
        wait $r || true
    done
    fio_done
    klog | grep -E "rnvme0:" | tail -n 12
    expect_eq "function resets done" "$(klog | grep -c 'rnvme0: PCI function reset: controller back')" 4
    ! klog | grep -iE "I/O error|rnvme0:.*(fail|timed out|abort|not completed|not back)" || fail "errors in the kernel log"
    all_completed
    unload_nvme
}

# What blktests' nvme/032 does, under fio: a reset of the function, at once the removal of the
# PCI device, then a rescan of the bus. The reset must not leave commands for the removal to
# wait for (without reset_prepare/reset_done the controller lost them: the removal waited for
# their timeout and failed them). Then the rescan binds the controller again and its disk
# verifies.
test_nvme_pci_reset_remove_rescan_under_io() {
    local addr pid i
    klog_mark
    load_nvme
    hang_watch 240
    addr=$(bdf)
    fio --name=rrr --filename=$DEV --direct=1 --ioengine=io_uring --iodepth=16 --rw=randread \
        --bs=4k --size=64m --time_based --runtime=8 --allow_file_create=0 >/tmp/rrr.out 2>&1 &
    pid=$!
    wait_io rnvme0n1
    echo 1 >/sys/bus/pci/devices/$addr/reset || fail "reset of the function failed"
    echo 1 >/sys/bus/pci/devices/$addr/remove || fail "remove of the device failed"
    [[ ! -e /sys/bus/pci/devices/$addr ]] || fail "$addr still there after remove"
    # Reads of the removed disk return nothing at once (its size is 0 now), so fio, as in
    # nvme/032, runs out its time; whether it reports an error is not this test's concern.
    wait_exit $pid 60 || fail "fio did not finish"
    wait $pid || true
    echo 1 >/sys/bus/pci/rescan
    for i in $(seq 50); do [[ -b $DEV ]] && break; sleep 0.2; done
    [[ -b $DEV ]] || fail "$DEV did not come back after the rescan"
    [[ $(rust_bdf) == "$addr" ]] || fail "rust_nvme_mq bound to '$(rust_bdf)', not $addr"
    klog | grep -E "rnvme0:" | tail -n 8
    expect_eq "function resets done" "$(klog | grep -c 'rnvme0: PCI function reset: controller back')" 1
    ! klog | grep -iE "rnvme0:.*(timed out|abort|not completed)" || fail "a command waited for its timeout"
    fio_verify $DEV --size=16m
    unload_nvme
}

t nvme_reset_queue_limits_like_c
t nvme_reset_odd_direct_io
t nvme_reset_mdts_unsplit
t nvme_reset_suspend_resume
t nvme_reset_bus_master_off_then_on
t nvme_reset_bus_master_left_off
t nvme_reset_memory_space_left_off
t nvme_reset_dead_controller_removed
t nvme_reset_ioctl_errors_like_c
t nvme_ctrl_sysfs_writes_under_io
t nvme_pci_function_reset_under_io
t nvme_pci_function_reset_races_controller_reset
t nvme_pci_reset_remove_rescan_under_io
t_kernel_clean nvme_reset_no_kernel_warnings
# For the record: the limits of both drivers on this controller (from the first test).
[[ ! -e /tmp/ours ]] || echo "queue limits rust_nvme_mq: $(tr '\n' ' ' </tmp/ours)"
[[ ! -e /tmp/c ]] || echo "queue limits C nvme: $(tr '\n' ' ' </tmp/c)"

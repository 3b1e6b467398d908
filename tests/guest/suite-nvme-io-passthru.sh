#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# I/O command passthrough (NVME_IOCTL_IO_CMD / IO64_CMD) on rust_nvme_mq: nvme-cli's read,
# write, flush and io-passthru on /dev/rnvme0n1 (and the controller /dev/rnvme0), checked
# against dd and against the C nvme driver's answers for the same commands on the same QEMU
# controller; edge cases with tests/tools/nvme_io_passthru.c; passthrough under fio verify.
# Boot with --smp 2. Each test runs with `set -euo pipefail` (lib.sh's `t`).
. /tests/lib.sh
suite_help "$@"
. /tests/nvme-lib.sh

CDEV=/dev/rnvme0
GEN=/dev/rng0n1
C_DIR=/tmp/c-io
R_DIR=/tmp/r-io
# The passthrough tests work on 1 MiB from 128 MiB on; fio (under load) below 64 MiB.
PT_OFF=$((128 * 1024 * 1024))

# collect DIR CTRL NS GEN: what nvme-cli, nvme_io_passthru, nvme_submit_io and nvme_uring
# answer on a controller, its namespace 1 and that namespace's generic device (the same
# commands for both drivers).
collect() {
    local dir=$1 ctrl=$2 ns=$3 gen=$4 bs lba
    mkdir -p "$dir"
    bs=$(blockdev --getss "$ns")
    lba=$((PT_OFF / bs))
    dd if=/dev/urandom of=/tmp/pat bs=64k count=1 status=none
    # nvme write, then dd reads it.
    nvme write "$ns" --start-block=$lba --block-count=$((65536 / bs - 1)) --data-size=65536 \
        --data=/tmp/pat >"$dir/write.txt" 2>&1
    dd if="$ns" bs=64k skip=$((PT_OFF / 65536)) count=1 iflag=direct status=none >"$dir/dd-after-write"
    # dd writes, nvme read and io-passthru (on the disk and on the controller) read it.
    dd if=/dev/urandom of=/tmp/pat2 bs=4k count=1 status=none
    dd if=/tmp/pat2 of="$ns" bs=4k seek=$((PT_OFF / 4096 + 64)) oflag=direct status=none
    nvme read "$ns" --start-block=$((lba + 262144 / bs)) --block-count=$((4096 / bs - 1)) \
        --data-size=4096 --data="$dir/read" >"$dir/read.txt" 2>&1
    nvme io-passthru "$ns" --opcode=2 --namespace-id=1 --cdw10=$((lba + 262144 / bs)) \
        --cdw12=$((4096 / bs - 1)) --data-len=4096 --read --raw-binary >"$dir/io-passthru" 2>"$dir/io-passthru.err"
    nvme io-passthru "$ctrl" --opcode=2 --namespace-id=1 --cdw10=$((lba + 262144 / bs)) \
        --cdw12=$((4096 / bs - 1)) --data-len=4096 --read --raw-binary >"$dir/io-passthru-ctrl" 2>"$dir/io-passthru-ctrl.err"
    nvme flush "$ns" --namespace-id=1 >"$dir/flush.txt" 2>&1
    # A reserved opcode: nvme-cli prints the controller's status.
    nvme io-passthru "$ns" --opcode=0x7e --namespace-id=1 >"$dir/bad-opcode.txt" 2>&1 || echo "exit $?" >>"$dir/bad-opcode.txt"
    "$TOOLS/nvme_io_passthru" "$ns" 1 $((lba + 524288 / bs)) >"$dir/tool.txt"
    # SUBMIT_IO and the vectored ioctl from 1 MiB further on (4 KiB, and 512 KiB after it).
    # (rust_nvme_mq only: its count of SGL commands around it.)
    if [[ -e $STATS ]]; then sum_col sgl >"$dir/sgl-before"; fi
    "$TOOLS/nvme_submit_io" "$ns" 1 $((lba + 1048576 / bs)) "$(blockdev --getsz "$ns")" >"$dir/submit.txt"
    if [[ -e $STATS ]]; then sum_col sgl >"$dir/sgl-after"; fi
    # io_uring passthrough on the generic device, from 4 MiB further on, interrupt-driven,
    # then polled from 5 MiB on (rust_nvme_mq: its polled completions around each; and a read
    # without data, which it refuses: C would send it).
    local extra=()
    [[ ! -e $STATS ]] || extra=(--no-data-read)
    # The disk's passthru_err_log_enabled on for that run: how many of its failed commands
    # the kernel logs naming the disk with the controller's LBA Out of Range status (sc 0x80).
    local disk=${ns#/dev/} logged
    lba_errors_logged() { dmesg | grep -cE "(^|[]:] )$disk: .*sc 0x80" || true; }
    echo on >"/sys/block/$disk/passthru_err_log_enabled"
    logged=$(lba_errors_logged)
    if [[ -e $STATS ]]; then sum_col polled >"$dir/polled-0"; fi
    "$TOOLS/nvme_uring" "$gen" 1 $((lba + 4194304 / bs)) "${extra[@]}" >"$dir/uring.txt"
    if [[ -e $STATS ]]; then sum_col polled >"$dir/polled-1"; fi
    echo off >"/sys/block/$disk/passthru_err_log_enabled"
    echo $(($(lba_errors_logged) - logged)) >"$dir/uring-errlog"
    "$TOOLS/nvme_uring" "$gen" 1 $((lba + 5242880 / bs)) --iopoll >"$dir/uring-poll.txt"
    if [[ -e $STATS ]]; then sum_col polled >"$dir/polled-2"; fi
}

# line FILE CASE: the output line of case CASE in FILE. A missing line reads "CASE missing from
# FILE", which names the file: so the like-C comparisons (the same case's line in our driver's
# file and in the C driver's) fail when either side lacks it, even both.
line() { grep "^$2 " "$1" || echo "$2 missing from $1"; }
# same_as_c WHAT FILE: FILE of R_DIR is FILE of C_DIR, and neither is empty.
same_as_c() {
    [[ -s $R_DIR/$2 ]] || fail "$1: no output from rust_nvme_mq ($R_DIR/$2)"
    [[ -s $C_DIR/$2 ]] || fail "$1: no output from the C driver ($C_DIR/$2)"
    expect_eq "$1 like C" "$(cat "$R_DIR/$2")" "$(cat "$C_DIR/$2")"
}

test_nvme_io_c_reference() {
    modprobe nvme poll_queues=1
    wait_dev /dev/nvme0n1
    wait_chr /dev/ng0n1
    collect "$C_DIR" /dev/nvme0 /dev/nvme0n1 /dev/ng0n1
    cat "$C_DIR"/*.txt
    unload_module nvme
    unload_module nvme_core 2>/dev/null || true
    [[ -s $C_DIR/tool.txt ]] || fail "no answers from the C driver"
}

test_nvme_io_rust_answers() {
    load_nvme poll_queues=1
    wait_chr $GEN
    klog_mark
    collect "$R_DIR" $CDEV $DEV $GEN
    cat "$R_DIR"/*.txt
    unload_nvme
}

test_nvme_io_write_then_dd() {
    cmp "$R_DIR/dd-after-write" /tmp/pat || fail "dd does not read what nvme write wrote"
    same_as_c "nvme write output" write.txt
}

test_nvme_io_dd_then_read() {
    cmp "$R_DIR/read" /tmp/pat2 || fail "nvme read does not return what dd wrote"
    cmp "$R_DIR/io-passthru" /tmp/pat2 || fail "io-passthru on the disk: not what dd wrote"
    cmp "$R_DIR/io-passthru-ctrl" /tmp/pat2 || fail "io-passthru on the controller: not what dd wrote"
    same_as_c "nvme read output" read.txt
    cmp "$C_DIR/io-passthru" "$C_DIR/read" || fail "C driver: io-passthru and read differ (test setup)"
}

test_nvme_io_flush_and_status_like_c() {
    same_as_c "nvme flush" flush.txt
    same_as_c "reserved opcode" bad-opcode.txt
    grep -qi "invalid" "$R_DIR/bad-opcode.txt" || fail "no invalid opcode status: $(cat $R_DIR/bad-opcode.txt)"
}

test_nvme_io_edge_cases() {
    local f=$R_DIR/tool.txt k
    cat "$f"
    expect_eq write "$(line $f write)" "write rc=0 errno=0"
    expect_eq read "$(line $f read)" "read rc=0 errno=0 same=1 untouched_after=1"
    expect_eq read64 "$(line $f read64)" "read64 rc=0 errno=0 same=1"
    expect_eq flush "$(line $f flush)" "flush rc=0 errno=0"
    expect_eq "LBA out of range" "$(line $f lba_out_of_range | sed 's/rc=[0-9]*/rc=N/')" "lba_out_of_range rc=N errno=0 sc=0x80"
    expect_eq "reserved opcode" "$(line $f opcode_reserved | sed 's/rc=[0-9]*/rc=N/')" "opcode_reserved rc=N errno=0 sc=0x1"
    expect_eq "bad data address" "$(line $f bad_addr)" "bad_addr rc=-1 errno=EFAULT"
    expect_eq "bad write data address" "$(line $f write_bad_addr)" "write_bad_addr rc=-1 errno=EFAULT"
    expect_eq "bad command address" "$(line $f bad_arg)" "bad_arg rc=-1 errno=EFAULT"
    expect_eq flags "$(line $f flags_set)" "flags_set rc=-1 errno=EINVAL"
    # Refused by both drivers: another namespace than the disk's, metadata (this namespace
    # has none). Refused by rust_nvme_mq only: a transfer that does not fit data_len (the C
    # driver maps 512 bytes and lets the controller fail it: status 0x400f on QEMU), more
    # than 256 KiB (C: EFAULT, it tries to map 1 GiB of this small buffer), an unprivileged
    # caller (C: allowed, the controller's effects log calls a read harmless).
    expect_eq "short buffer" "$(line $f len_short)" "len_short rc=-1 errno=EINVAL"
    expect_eq "1 GiB" "$(line $f len_1g)" "len_1g rc=-1 errno=EINVAL"
    expect_eq "other namespace" "$(line $f other_nsid)" "other_nsid rc=-1 errno=EINVAL"
    expect_eq metadata "$(line $f metadata)" "metadata rc=-1 errno=EINVAL"
    expect_eq "unprivileged" "$(line $f unpriv_read)" "unpriv_read rc=-1 errno=EACCES"
    diff "$C_DIR/tool.txt" "$f" || true
    for k in write read read64 flush lba_out_of_range opcode_reserved bad_addr write_bad_addr \
        bad_arg flags_set other_nsid metadata; do
        expect_eq "$k like the C driver" "$(line $f $k)" "$(line $C_DIR/tool.txt $k)"
    done
}

# NVME_IOCTL_SUBMIT_IO and NVME_IOCTL_IO64_CMD_VEC (tests/tools/nvme_submit_io.c): the user's
# memory is mapped into the request (buffers at dword offsets, vectors of odd sizes), described
# by SGLs; data reads back; bad input gets C's answer and changes nothing; root only.
test_nvme_io_submit_and_vec() {
    local f=$R_DIR/submit.txt k
    [[ -s $f ]] || fail "no answers from rust_nvme_mq (nvme_io_rust_answers)"
    cat "$f"
    for k in submit_write submit_read submit_read_512k after_bad_submit vec_write vec_read \
        submit_read_after_vec after_bad_vec; do
        expect_eq "$k" "$(line $f $k)" "$k rc=0 errno=0"
    done
    for k in submit_read_data after_bad_submit_data vec_read_data submit_read_after_vec_data \
        after_bad_vec_data; do
        expect_eq "$k" "$(line $f $k)" "$k ok"
    done
    expect_eq "one block over the largest transfer" "$(line $f submit_write_too_big)" "submit_write_too_big rc=-1 errno=EINVAL"
    expect_eq "flags" "$(line $f submit_flags)" "submit_flags rc=-1 errno=EINVAL"
    expect_eq "not a read or write" "$(line $f submit_opcode_flush)" "submit_opcode_flush rc=-1 errno=EINVAL"
    expect_eq "bad address" "$(line $f submit_bad_addr)" "submit_bad_addr rc=-1 errno=EFAULT"
    expect_eq "LBA out of range" "$(line $f submit_lba_out_of_range | sed 's/rc=[0-9]*/rc=N/')" "submit_lba_out_of_range rc=N errno=0 sc=0x80"
    expect_eq "bad vector array" "$(line $f vec_bad_iov)" "vec_bad_iov rc=-1 errno=EFAULT"
    expect_eq "bad buffer in a vector" "$(line $f vec_bad_buffer)" "vec_bad_buffer rc=-1 errno=EFAULT"
    # Different from C, which sends a read of 8 blocks without a data pointer (the controller
    # then writes to bus address 0; QEMU completes it): refused here.
    expect_eq "no vectors" "$(line $f vec_none)" "vec_none rc=-1 errno=EINVAL"
    # Different from C, which lets unprivileged callers read (nvme_cmd_allowed, the effects log).
    expect_eq "unprivileged SUBMIT_IO" "$(line $f unpriv_submit_read)" "unpriv_submit_read rc=-1 errno=EACCES"
    expect_eq "unprivileged vectored" "$(line $f unpriv_vec_read)" "unpriv_vec_read rc=-1 errno=EACCES"
    # (Not submit_read_512k: behind an IOMMU C's transfers stop at 128 KiB, EINVAL there.)
    for k in submit_write submit_read submit_read_data submit_write_too_big \
        submit_flags submit_opcode_flush submit_bad_addr after_bad_submit_data vec_write vec_read \
        vec_read_data vec_short vec_bad_iov vec_bad_buffer after_bad_vec_data; do
        expect_eq "$k like the C driver" "$(line $f $k | sed 's/rc=[0-9]* errno=0 sc/rc=N errno=0 sc/')" \
            "$(line $C_DIR/submit.txt $k | sed 's/rc=[0-9]* errno=0 sc/rc=N errno=0 sc/')"
    done
    # Mapped and described by SGLs (the bounce-buffer ioctls use PRPs): at least the
    # 9 commands that reached the controller with data.
    local sgl=$(($(cat $R_DIR/sgl-after) - $(cat $R_DIR/sgl-before)))
    [[ $sgl -ge 9 ]] || fail "only $sgl SGL commands for SUBMIT_IO and the vectored ioctl"
    echo "SGL commands: $sgl"
}

test_nvme_io_passthru_under_fio() {
    load_nvme
    local bs lba i fails=0
    bs=$(blockdev --getss $DEV)
    lba=$((PT_OFF / bs))
    # Size-based: fio writes 32 MiB, then reads all of it back and verifies it.
    fio --name=v --filename=$DEV --direct=1 --rw=randwrite --bs=4k --iodepth=16 \
        --ioengine=io_uring --size=32M --verify=crc32c --verify_fatal=1 --do_verify=1 \
        --output-format=terse --output=/tmp/fio.out &
    local pid=$!
    for i in $(seq 1 40); do
        dd if=/dev/urandom of=/tmp/p bs=8k count=1 status=none
        nvme write $DEV --start-block=$((lba + i * 16)) --block-count=$((8192 / bs - 1)) \
            --data-size=8192 --data=/tmp/p >/dev/null 2>&1 || { fails=$((fails + 1)); continue; }
        cmp <(dd if=$DEV bs=8k skip=$(((PT_OFF + i * 16 * bs) / 8192)) count=1 iflag=direct status=none) /tmp/p ||
            fails=$((fails + 1))
        nvme io-passthru $DEV --opcode=2 --namespace-id=1 --cdw10=$((lba + i * 16)) \
            --cdw12=$((8192 / bs - 1)) --data-len=8192 --read --raw-binary 2>/dev/null | cmp - /tmp/p ||
            fails=$((fails + 1))
        nvme flush $DEV --namespace-id=1 >/dev/null || fails=$((fails + 1))
    done
    wait $pid || { cat /tmp/fio.out; fail "fio verify failed with passthrough alongside"; }
    fio_verified /tmp/fio.out
    expect_eq "passthrough failures under load" $fails 0
    # The passthrough requests went through the I/O queues like the others.
    all_completed
    unload_nvme
}

# io_uring passthrough (NVME_URING_CMD_IO, _VEC) on /dev/rng0n1, with nvme_uring: data written
# and read back (one buffer, odd vectors, a buffer at an odd address), the answers to bad input
# those of the C driver's /dev/ng0n1 on the same controller and the region unchanged after
# them, interrupt-driven and polled; root only.
test_nvme_uring_answers_like_c() {
    local f k mode
    for mode in uring uring-poll; do
        f=$R_DIR/$mode.txt
        [[ -s $f ]] || fail "no io_uring answers from rust_nvme_mq ($mode)"
        echo "== $mode"
        cat "$f"
        for k in write read vec_write vec_read unaligned_read; do
            expect_eq "$mode $k" "$(line $f $k)" "$k res=0"
        done
        for k in read_data vec_read_data unaligned_read_data after_bad_data; do
            expect_eq "$mode $k" "$(line $f $k)" "$k ok"
        done
        for k in wrong_nsid flags metadata; do
            expect_eq "$mode $k" "$(line $f $k)" "$k res=EINVAL"
        done
        expect_eq "$mode shorter buffer than the blocks" "$(line $f short_buffer_write)" "short_buffer_write res=sc=0xf"
        expect_eq "$mode LBA out of range" "$(line $f lba_out_of_range)" "lba_out_of_range res=sc=0x80"
        expect_eq "$mode 64-byte SQEs" "$(line $f small_sqe)" "small_sqe res=EOPNOTSUPP"
        expect_eq "$mode more than the largest transfer" "$(line $f too_long)" "too_long res=EINVAL"
        # Different from C, which lets the unprivileged caller of a file opened for writing
        # read and write (nvme_cmd_allowed): root only here, like the other passthrough.
        expect_eq "$mode unprivileged read" "$(line $f unpriv_read)" "unpriv_read res=EACCES"
        expect_eq "$mode unprivileged write" "$(line $f unpriv_write)" "unpriv_write res=EACCES"
        # Not long_buffer_write: QEMU takes a buffer longer than the blocks as one SGL data
        # block and refuses it as several, which depends on how the pages lie (physically
        # contiguous pages are one segment for C, an IOMMU merges them): either way the
        # region is unchanged (after_bad_data).
        for k in write read read_data vec_write vec_read vec_read_data unaligned_read \
            unaligned_read_data wrong_nsid flags metadata short_buffer_write \
            bad_address_write bad_vector_write bad_vector_array bad_cmd_op lba_out_of_range \
            too_long small_sqe after_bad_data; do
            expect_eq "$mode $k like the C driver" "$(line $f $k)" "$(line $C_DIR/$mode.txt $k)"
        done
    done
    # Different from C, which sends it without a data pointer (the controller would write to
    # bus address 0).
    expect_eq "read without data" "$(line $R_DIR/uring.txt read_no_data)" "read_no_data res=EINVAL"
    # With the disk's passthru_err_log_enabled on, the command that failed with LBA Out of
    # Range is logged, naming the disk, as C logs it.
    expect_eq "io_uring commands logged failing with LBA Out of Range by the C driver" \
        "$(cat $C_DIR/uring-errlog)" 1
    expect_eq "io_uring commands logged failing with LBA Out of Range, like C" \
        "$(cat $R_DIR/uring-errlog)" "$(cat $C_DIR/uring-errlog)"
}

# The commands of an IORING_SETUP_IOPOLL ring go to the poll queue and are found by polling;
# the others are not.
test_nvme_uring_polled() {
    local p0 p1 p2
    read -r p0 <$R_DIR/polled-0
    read -r p1 <$R_DIR/polled-1
    read -r p2 <$R_DIR/polled-2
    echo "polled completions: $((p1 - p0)) during the interrupt-driven run, $((p2 - p1)) during the polled one"
    expect_eq "polled completions without IOPOLL" $((p1 - p0)) 0
    # 9 commands of the polled run reach the controller (5 good, 3 it refuses, the check).
    [[ $((p2 - p1)) -ge 9 ]] || fail "only $((p2 - p1)) polled completions for the IOPOLL ring"
}

# fio's io_uring_cmd engine on /dev/rng0n1 writes and verifies 32 MiB, interrupt-driven and
# polled (--hipri); fio on the block device then verifies what the passthrough wrote.
test_nvme_uring_fio_verify() {
    load_nvme poll_queues=1
    wait_chr $GEN
    local p0 p1 mode job at hipri
    p0=$(sum_col polled)
    for mode in irq poll; do
        job=(--name=u --rw=randwrite --bs=4k --iodepth=16 --size=32M --verify=crc32c
            --verify_fatal=1 --randseed=7 --output-format=terse)
        at=(--offset=0) hipri=()
        if [[ $mode == poll ]]; then at=(--offset=64M) hipri=(--hipri); fi
        fio "${job[@]}" "${at[@]}" --ioengine=io_uring_cmd --cmd_type=nvme "${hipri[@]}" \
            --filename=$GEN --do_verify=1 --output=/tmp/uring-$mode.out ||
            { cat /tmp/uring-$mode.out; fail "fio io_uring_cmd ($mode) failed"; }
        fio_verified /tmp/uring-$mode.out
        if [[ $mode == irq ]]; then p1=$(sum_col polled); fi
        # The same job, verify only, through the block device.
        fio "${job[@]}" "${at[@]}" --ioengine=io_uring --direct=1 --filename=$DEV \
            --verify_only=1 --output=/tmp/uring-$mode-blk.out ||
            { cat /tmp/uring-$mode-blk.out; fail "what io_uring_cmd ($mode) wrote does not verify on $DEV"; }
        echo "$mode: verified again through $DEV"
    done
    local p2
    p2=$(sum_col polled)
    echo "polled completions: $((p1 - p0)) interrupt-driven run, $((p2 - p1)) polled run"
    expect_eq "polled completions of the interrupt-driven run" $((p1 - p0)) 0
    # 8192 writes and 8192 verifying reads of the polled run (the block device's reads are not
    # polled).
    [[ $((p2 - p1)) -ge 16384 ]] || fail "only $((p2 - p1)) polled completions for fio --hipri"
    all_completed
    unload_nvme
}

# The controller is unbound while fio runs io_uring passthrough on /dev/rng0n1: the unbind
# finishes, fio gets errors (not a hang), the kernel warns of nothing; bound again, the generic
# device is back and verifies.
test_nvme_uring_unbind_under_io() {
    load_nvme poll_queues=1
    wait_chr $GEN
    local pci args
    pci=$(rust_bdf)
    [[ $pci == 0000:* ]] || fail "no PCI function bound to rust_nvme_mq (got '$pci')"
    args=(--name=u --filename=$GEN --ioengine=io_uring_cmd --cmd_type=nvme --rw=randrw --bs=4k
        --iodepth=32 --size=64M --time_based --runtime=30 --output-format=terse)
    fio "${args[@]}" --output=/tmp/ub-irq.out &
    local irq=$!
    fio "${args[@]}" --hipri --output=/tmp/ub-poll.out &
    local poll=$!
    # Passthrough requests are not in the disk's statistics: wait on the driver's counters.
    local start i
    start=$(sum_col submitted)
    for i in $(seq 300); do
        (($(sum_col submitted) >= start + 256)) && break
        sleep 0.1
    done
    (($(sum_col submitted) >= start + 256)) || fail "fio's passthrough did not start within 30 s"
    local t0=$SECONDS
    echo "$pci" >/sys/bus/pci/drivers/rust_nvme_mq/unbind
    echo "unbind took $((SECONDS - t0)) s"
    # Not the 30 s of an I/O timeout: the polled commands in flight were reaped by polling.
    ((SECONDS - t0 < 10)) || fail "the unbind took $((SECONDS - t0)) s"
    [[ ! -e $GEN ]] || fail "$GEN still there after the unbind"
    local rc_irq=0 rc_poll=0
    wait $irq || rc_irq=$?
    wait $poll || rc_poll=$?
    echo "fio after the unbind: exit $rc_irq (interrupt-driven), $rc_poll (polled)"
    tail -n 3 /tmp/ub-irq.out /tmp/ub-poll.out
    [[ $rc_irq -ne 0 && $rc_poll -ne 0 ]] || fail "fio did not see the device go"
    echo "$pci" >/sys/bus/pci/drivers/rust_nvme_mq/bind
    wait_dev $DEV
    wait_chr $GEN
    fio --name=v --filename=$GEN --ioengine=io_uring_cmd --cmd_type=nvme --rw=randwrite --bs=4k \
        --iodepth=8 --size=8M --verify=crc32c --verify_fatal=1 --do_verify=1 \
        --output-format=terse --output=/tmp/ub-after.out ||
        { cat /tmp/ub-after.out; fail "fio io_uring_cmd after the rebind failed"; }
    fio_verified /tmp/ub-after.out
    unload_nvme
}

t nvme_io_c_reference
t nvme_io_rust_answers
t nvme_io_write_then_dd
t nvme_io_dd_then_read
t nvme_io_flush_and_status_like_c
t nvme_io_edge_cases
t nvme_io_submit_and_vec
t nvme_uring_answers_like_c
t nvme_uring_polled
t nvme_uring_fio_verify
t nvme_uring_unbind_under_io
t nvme_io_passthru_under_fio
t_kernel_clean nvme_io_kernel_clean

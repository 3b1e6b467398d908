# SPDX-License-Identifier: GPL-2.0
# Helpers for the guest test suites: run a test function, print "PASS name" or "FAIL name".

MODDIR=/lib/modules/extra
TOOLS=/tests/bin

# A suite registers each test by its name, once: `t NAME` runs the function test_NAME (defined in
# the suite) in a subshell and prints "PASS NAME" or "FAIL NAME"; the test's output is shown only
# on failure. RBLK_ONLY="NAME..." (on the guest command line) runs those tests alone.
t() { run_test "$1" "test_$1"; }

# t_kernel_clean NAME: the last test of most suites: the kernel log holds no warning since
# /init started (kernel_clean, below). NAME is the suite's own (the host counts tests by name).
t_kernel_clean() { run_test "$1" kernel_clean; }

# run_test NAME FUNCTION: what t and t_kernel_clean do. The test's start is marked in the
# kernel log ("rblk-test-start NAME N"), and its end ("rblk-test-end NAME N") once it has
# settled (test_settle). Its window in the log opens at the end mark of the test before (what
# the suite did between two tests counts with the test it prepares; for the first test, at
# the kernel's "Run /init") and closes at its own end: a kernel report (BAD_KMSG) logged in
# the window fails the test, whatever the function returned. What comes after the last test's
# end the guest's /init prints for the host (scripts/run-tests.sh: <boot>_shutdown_clean).
RBLK_TEST_N=0
RBLK_LAST_END="Run /init as init process"
run_test() {
    local name=$1 func=$2 rc start reports out=/tmp/test.$BASHPID.out
    [[ -z ${RBLK_ONLY:-} || " $RBLK_ONLY " == *" $name "* ]] || return 0
    if ! declare -F "$func" >/dev/null; then
        report "FAIL $name" "    | no function $func: define it in the suite, or fix the name after t"
        return 0
    fi
    RBLK_TEST_N=$((RBLK_TEST_N + 1))
    start="rblk-test-start $name $RBLK_TEST_N"
    echo "$start" >/dev/kmsg
    # Not in a conditional context, so that `set -e` really applies inside the test.
    ( set -euo pipefail; "$func" ) >"$out" 2>&1
    rc=$?
    test_settle "$out" >>"$out"
    reports=$(klog_since "${RBLK_LAST_END:-$start}" | grep -aE "$BAD_KMSG" | selftest_filter || true)
    RBLK_LAST_END="rblk-test-end $name $RBLK_TEST_N"
    echo "$RBLK_LAST_END" >/dev/kmsg
    if [[ -n $reports ]]; then
        printf 'the kernel reported a problem during this test:\n%s\n' "$(head -n 20 <<<"$reports")" >>"$out"
        rc=1
    fi
    if [[ $rc == 0 ]]; then
        report "PASS $name"
    else
        report "FAIL $name" "$(tail -n 25 "$out" | sed 's/^/    | /')"
    fi
}

# report LINE [DETAILS]: a test's report, on the console and on the results port
# (RBLK_RESULTS, the second serial port: scripts/qemu-run.sh writes it to LOG.results). The
# kernel writes to the console only, so there its messages can land inside a report line (a
# debug kernel's loglevel=8); the host reads the reports from the results port.
RBLK_RESULTS=${RBLK_RESULTS-/dev/ttyS1}
report() {
    printf '%s\n' "$@"
    [[ -n $RBLK_RESULTS ]] || return 0
    printf '%s\n' "$@" 2>/dev/null >>"$RBLK_RESULTS" || true
}

# test_settle OUT: before a test's kernel-log window closes, let what the test set going finish,
# so that a report it causes late is the test's own and not the next one's: the processes it
# left running that still hold its output file OUT open (background jobs: up to 30 s, then a
# note and the test's window closes anyway). No command is run when none is left: each costs
# ~40 ms under TCG. (A wait for a quiet kernel log as well cost 0.5 s per test, measured: 20
# empty tests took 13.4 s with it, 3.3 s without.)
test_settle() {
    local out=$1 i pid
    for ((i = 0; i < 300; i++)); do
        holders_of "$out"
        [[ -n $HOLDERS ]] || return 0
        sleep 0.1
    done
    echo "note: still running 30 s after the test ended (its window closes now):"
    for pid in $HOLDERS; do echo "    $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"; done
}

# holders_of FILE: set HOLDERS to the processes with FILE open but this shell (bash's -ef on
# every process's fds: no command run).
holders_of() {
    local fd pid
    HOLDERS=
    for fd in /proc/[0-9]*/fd/*; do
        [[ $fd -ef $1 ]] || continue
        pid=${fd#/proc/}
        pid=${pid%%/*}
        [[ $pid == "$BASHPID" || " $HOLDERS " == *" $pid "* ]] || HOLDERS+="${HOLDERS:+ }$pid"
    done
}

# The harness's own check that run_test fails a test during which the kernel logged a report,
# and only that test: a report written into the kernel log by the test itself, tagged
# RBLK-SELFTEST. Such lines are left out of every other check (selftest_filter; the host's
# check of the debug boots' console leaves out RBLK lines), so the report fails the inner test
# alone. Twice: written by the test function itself, and by a process the test left running
# that writes it 0.5 s after the function returned (a report coming late).
selftest_filter() { if [[ -n ${RBLK_SELFTEST_INNER:-} ]]; then cat; else grep -av RBLK-SELFTEST; fi; }
test_harness_kernel_report_fails_its_test() {
    local out warn
    selftest_warn() { echo "WARNING: CPU: 0 PID: $$ at RBLK-SELFTEST: a report written by selftest_warn" >/dev/kmsg; }
    selftest_late() { (sleep 0.5; echo "WARNING: CPU: 0 PID: $$ at RBLK-SELFTEST: a late report written by selftest_late" >/dev/kmsg) & }
    # The next test lasts longer than the late report takes to come: unless the harness waits
    # for it, it lands in this test's window.
    selftest_quiet() { sleep 1; }
    for warn in selftest_warn selftest_late; do
        # Each pair's windows open at a mark of its own (the outer shell does not see the end
        # marks of the inner tests, which run in this subshell).
        out=$(echo "rblk-selftest $warn" >/dev/kmsg
              RBLK_LAST_END="rblk-selftest $warn" RBLK_ONLY= RBLK_SELFTEST_INNER=1 RBLK_RESULTS=
              run_test harness_selftest_inner $warn
              run_test harness_selftest_next selftest_quiet)
        echo "$out"
        grep -qx 'FAIL harness_selftest_inner' <<<"$out" || fail "$warn: a test during which the kernel logged a WARNING passed"
        grep -q 'the kernel reported a problem during this test' <<<"$out" || fail "$warn: the failure does not say why"
        grep -q "WARNING: CPU: 0 PID.*written by $warn" <<<"$out" || fail "$warn: the failure does not show the kernel's report"
        grep -qx 'PASS harness_selftest_next' <<<"$out" || fail "$warn: the next test failed too: the report was not attributed to its own test"
    done
}

# suite_help "$@": right after sourcing this file, a suite's --help: how to run it and its
# header comment (the suites run in the guest; scripts/run-tests.sh shows each one's boot).
suite_help() {
    [[ ${1:-} == -h || ${1:-} == --help ]] || return 0
    echo "Usage: bash /tests/${0##*/} [ARGS]   (in the guest, as root; prints PASS/FAIL per test)"
    sed -n '3,/^[^#]/p' "$0" | grep '^#' | sed -E 's/^# ?//'
    exit 0
}

fail() { echo "assertion failed: $*"; exit 1; }

# expect_eq WHAT GOT WANT
expect_eq() { [[ "$2" == "$3" ]] || fail "$1: got '$2', want '$3'"; }

# wait_io DISK: wait until I/O reaches DISK (the requests it completed, in /sys/block/DISK/stat,
# rise by 16 or more): a load started in the background is running, not still starting (that
# takes seconds on the debug kernel), before a test pulls or resets the device under it.
wait_io() {
    local stat=/sys/block/$1/stat start i
    start=$(awk '{ print $1 + $5 }' "$stat")
    for i in $(seq 300); do
        (($(awk '{ print $1 + $5 }' "$stat") >= start + 16)) && return 0
        sleep 0.1
    done
    fail "no I/O reached $1 within 30 s of starting the load"
}

# The first disk of a driver appears asynchronously with udev-less devtmpfs; wait for it.
wait_dev() {
    local dev=$1 i
    for i in $(seq 50); do [[ -b $dev ]] && return 0; sleep 0.1; done
    fail "$dev did not appear"
}

# chr_number PATH: the device number of a device node, as sysfs writes it in `dev` (MAJOR:MINOR).
chr_number() { printf '%d:%d\n' "0x$(stat -c %t "$1")" "0x$(stat -c %T "$1")"; }

# wait_chr PATH: wait for a character device (a misc device's node appears asynchronously).
wait_chr() {
    local dev=$1 i
    for i in $(seq 50); do [[ -c $dev ]] && return 0; sleep 0.1; done
    fail "$dev did not appear"
}

# wait_gone PATH: a disk disappears asynchronously too.
wait_gone() {
    local i
    for i in $(seq 50); do [[ -e $1 ]] || return 0; sleep 0.1; done
    fail "$1 is still there"
}

# The nvdimm bus: rust_pmem and nd_pmem both drive namespaces; which one has a namespace is
# sysfs binding (driver_override, bind/unbind, ndctl enable/disable-namespace).
ND=/sys/bus/nd
# driver_of DEV: the nd driver bound to DEV (a namespace), "none" if unbound.
driver_of() {
    local link
    link=$(readlink "$ND/devices/$1/driver") || { echo none; return 0; }
    echo "${link##*/}"
}

# The region of the labelled NVDIMM: its namespaces are of type pmem (5), not io (4).
find_labelled_region() {
    local r
    for r in $ND/devices/region*; do
        [[ $(cat $r/nstype) == 5 ]] && { echo "${r##*/}"; return 0; }
    done
    return 1
}

# A fresh label area holds no index block, and libnvdimm then drives the DIMM label-less (one
# io namespace over the whole region). Write the index blocks once; they stay in the image.
labelled_region() {
    find_labelled_region && return 0
    ndctl disable-region all >&2
    # The unlabelled NVDIMM has no label area, so init-labels fails for that DIMM.
    ndctl init-labels all >&2 || true
    ndctl enable-region all >&2
    find_labelled_region || fail "no labelled region (boot with guest.sh --labelled)" >&2
}

load_rust_pmem() { insmod "$MODDIR/rust_pmem.ko" "$@"; wait_dev /dev/rpmem0; }
unload_module() { # NAME: rmmod, retrying while a closing opener still pins it
    local i
    for i in $(seq 50); do rmmod "$1" 2>/dev/null && return 0; sleep 0.1; done
    rmmod "$1"
}
param() { cat "/sys/module/$1/parameters/$2"; }
bytes_of() { echo $(($(cat /sys/block/$1/size) * 512)); }

# fio_verify DEV [EXTRA...]: write the whole device, then verify it. The data is a pattern drawn
# for this call (500 random bytes, then the block's offset: fio's verify_pattern with %o,
# repeated), so a block left from an earlier run, a block of another offset, and any 512-byte
# sector of a block in another's place (the pattern's period, 508 bytes, is not a sector's) all
# fail. (fio 3.33's crc32c verify, used before, accepts any block that matches its own
# checksum: a write that never reached the device verified when an earlier run had left a
# block there, whatever --randseed; seen with a rust_pmem that dropped 1 write in 8.) The
# pattern is shown when the verify fails.
fio_verify() {
    local dev=$1 pattern
    shift
    pattern=0x$(od -An -N500 -tx1 /dev/urandom | tr -d ' \n')
    fio --name=verify --filename="$dev" --direct=1 --ioengine=io_uring --iodepth=16 \
        --rw=randwrite --bs=4k --size=100% --verify=pattern --verify_pattern="$pattern%o" \
        --verify_fatal=1 --do_verify=1 --numjobs=1 --output-format=terse "$@" >/tmp/fio.out 2>&1 ||
        { cat /tmp/fio.out; echo "pattern: $pattern%o"; fail "fio verify on $dev"; }
}

# fio_verified FILE [UNVERIFIED_KIB]: fio's terse (v3) output in FILE (a line per job or group)
# shows no error and a verify phase that read back what the jobs wrote. Write jobs read only to
# verify, so KiB read (field 6) must equal KiB written (field 47), or fall short by at most
# UNVERIFIED_KIB: the last --verify_backlog batch of a time-based job, cut off by the clock.
fio_verified() {
    local err r w
    read -r err r w < <(awk -F';' '$1 == 3 { e += $5; r += $6; w += $47 } END { print e + 0, r + 0, w + 0 }' "$1")
    echo "fio: error $err, $w KiB written, $r KiB read back and verified"
    expect_eq "fio error" "$err" 0
    [[ $w -gt 0 ]] || fail "fio wrote nothing"
    [[ $r -gt 0 ]] || fail "fio verified nothing"
    [[ $r -le $w && $r -ge $((w - ${2:-0})) ]] || fail "fio verified $r KiB of the $w KiB it wrote"
}

# The kernel log is never cleared (`dmesg -c` would hide a warning from the checks): a test that
# looks for its own messages marks the log first (klog_mark) and reads what came after (klog).
# klog_mark: mark the current end of the kernel log ("rblk-mark N").
klog_mark() {
    local n
    n=$(($(cat /tmp/klog.mark 2>/dev/null || echo 0) + 1))
    echo "$n" >/tmp/klog.mark
    echo "rblk-mark $n" >/dev/kmsg
}
# wait_klog PATTERN [SECONDS]: wait until a line of klog matches PATTERN (grep -E), 10 s at most.
wait_klog() {
    local i
    for i in $(seq $((${2:-10} * 10))); do
        klog | grep -qE "$1" && return 0
        sleep 0.1
    done
    fail "no kernel message matching '$1' within ${2:-10} s"
}
# children_of PID: the processes whose parent is PID (the guest has no pgrep).
children_of() {
    local p stat rest
    for p in /proc/[0-9]*; do
        { read -r stat <"$p/stat"; } 2>/dev/null || continue
        rest=${stat##*) }  # after the command name: state, ppid, ...
        rest=${rest#* }
        [[ ${rest%% *} == "$1" ]] && echo "${p#/proc/}"
    done
    return 0
}
# wait_in_ioctl PID: wait until process PID, a child or a grandchild of it sleeps in the ioctl
# system call (16 on x86-64, the first field of /proc/PID/syscall): its command is with the
# driver.
wait_in_ioctl() {
    local i p c
    for i in $(seq 100); do
        for p in "$1" $(for c in $(children_of "$1"); do echo "$c"; children_of "$c"; done); do
            [[ $(cut -d' ' -f1 "/proc/$p/syscall" 2>/dev/null) == 16 ]] && return 0
        done
        sleep 0.1
    done
    fail "process $1 (or a child) is not waiting in an ioctl after 10 s"
}
# klog: the kernel log since the last klog_mark (all of it before the first mark).
klog() { klog_since "rblk-mark $(cat /tmp/klog.mark 2>/dev/null || echo 0)"; }
# klog_since TEXT: the kernel log after its last line that ends in "] TEXT". All of it when no
# line does: either TEXT was never logged, or the ring buffer has wrapped since and holds only
# newer messages.
#
# Its status is always 0: callers pipe it into `grep -q`, which exits at the first match, and
# the guest's awk writes line by line, so the lines after a match meet a closed pipe and awk
# dies of SIGPIPE; under `set -o pipefail` (run_test) that made `klog | grep -q X` fail although
# X was there (seen in nvme_nr_io_queues_2: "not 2 queues of 8" beside the very line).
klog_since() {
    dmesg | awk -v m="] $1" '{ l[NR] = $0 }
        length($0) >= length(m) && substr($0, length($0) - length(m) + 1) == m { s = NR }
        END { for (i = s + 1; i <= NR; i++) print l[i] }' || true
}

# Kernel messages that mean a test broke the kernel: checked during each test (run_test), by
# t_kernel_clean over the whole log, and by tests that call kernel_clean themselves. KASAN,
# lockdep, atomic-sleep and hung-task reports start with BUG:/WARNING:/INFO:; ODEBUG: is
# debug-objects; DMA-API debugging names the device and the driver's mistake.
BAD_KMSG='BUG:|WARNING:|Oops|Call Trace|KASAN:|ODEBUG:|DMA-API: [^ ]+ [^ ]+: |locking correctness validator|sleeping function called from invalid context|blocked for more than|detected stall|Kernel panic'
# Only messages from the moment the kernel runs /init count: under TCG the debug kernel has
# been seen to trip KASAN in its own early CPU setup (~0.004 s, once in several boots), before
# any of this project's code; such reports are shown as a note. (If the log no longer holds
# the "Run /init" line, its early part is gone too and the whole log counts.)
kernel_clean() {
    local log early
    log=$(dmesg)
    if grep -q 'Run /init as init process' <<<"$log"; then
        early=$(sed -n '/Run \/init as init process/q;p' <<<"$log" | grep -aE "$BAD_KMSG" || true)
        [[ -z $early ]] || printf 'note: reported during early boot, before /init (not counted):\n%s\n' "$early"
        log=$(sed -n '/Run \/init as init process/,$p' <<<"$log")
    fi
    if grep -aE "$BAD_KMSG" <<<"$log" | selftest_filter; then fail "kernel reported problems (above)"; fi
}

# emit CONFIG ROUND JSON: the console splits long lines, so send the fio JSON in numbered
# chunks "BENCH <config> <round> <chunk#> <text>"; the host joins them.
CHUNK=900
emit() {
    local i=0 chunk
    # The final newline makes `read` see the last chunk too.
    { printf '%s' "$3" | tr -d '\n' | tr -s ' ' | fold -w $CHUNK; echo; } | while IFS= read -r chunk; do
        [[ -n $chunk ]] || continue
        echo "BENCH $1 $2 $i $chunk"
        i=$((i + 1))
    done
}

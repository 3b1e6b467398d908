#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rust_nvme_mq overflow and lending on a QEMU NVMe whose commands each take a fixed time and run
# in parallel (null-aio, latency-ns; reads return zeros): boot with --smp 4 --nvme-null 100000000.
# With 100 ms per command the queues stay full however slow the guest is (the debug kernel
# included), so these outcomes follow from the driver's slot accounting, not from timing.
# Every test loads the driver itself and leaves it unloaded.
. /tests/lib.sh
suite_help "$@"
. /tests/nvme-lib.sh

RUNTIME=5

# deep_and_shallow OUT [MODULE PARAMS...]: one reader at iodepth 32 on CPU 0 and one at the
# queues' reserve depth (or $SHALLOW_DEPTH) on every other CPU, io_queue_depth=8 (7 slots a
# queue); writes "jobname;KiB read" lines to OUT (totals: finer than fio's whole-number IOPS)
# and leaves the driver loaded.
deep_and_shallow() {
    local out=$1 c reserve jobs=(--name=deep --cpus_allowed=0 --iodepth=32)
    shift
    load_nvme io_queue_depth=8 "$@"
    reserve=$(qstat 1 reserve)
    expect_eq "reserve of 7 slots" "$reserve" 2
    for c in $(seq 1 $((NCPU - 1))); do
        jobs+=(--name=shallow$c --cpus_allowed=$c --iodepth=${SHALLOW_DEPTH:-$reserve})
    done
    fio --filename=$DEV --direct=1 --ioengine=libaio --rw=randread --bs=4k --time_based \
        --runtime=$RUNTIME --norandommap --output-format=terse "${jobs[@]}" >/tmp/fio.out 2>&1 \
        || { cat /tmp/fio.out; fail "fio deep + shallow readers ($*)"; }
    cut -d';' -f3,6 /tmp/fio.out | tee "$out"
    cat "$STATS"
    all_completed
}

# The shallow readers keep 1 command each in flight, so each other queue has 6 free slots for
# the deep reader, which always wants more (32 against 7 + 3 x 6): the reserve (2) is what
# stops a lender at 5. Each lender lends exactly 5 at its most, never 6. (A count of refused
# borrows is no proof: the bounded search reads the lenders' counters first and mostly does
# not try a lender the reserve would refuse.)
test_nvme_lending_keeps_reserve() {
    ((NCPU >= 2)) || fail "needs 2 CPUs, the boot has $NCPU (boot with --smp 2 or more)"
    local slots=7 bad
    SHALLOW_DEPTH=1 deep_and_shallow /tmp/iops overflow=1
    [[ $(sum_col overflow_in) -gt 0 ]] || fail "the deep reader borrowed nothing"
    # Never lent more than the slots minus the reserve.
    bad=$(awk -v s=$slots 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["lent_max"] + $c["reserve"] > s { printf "%s ", $1 }' "$STATS")
    [[ -z $bad ]] || fail "queue(s) $bad lent into their reserve"
    # ...and up to it: every lender (a queue the deep reader did not overflow out of) lent
    # the slots minus the reserve at its most, though it had one more free.
    bad=$(awk -v s=$slots 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["overflow_out"] == 0 && $c["lent_max"] + $c["reserve"] != s { printf "%s ", $1 }' "$STATS")
    [[ -z $bad ]] || fail "queue(s) $bad never lent up to their reserve: the reserve did not decide"
    # The deep reader's home is the queue it overflowed out of; every other queue's own
    # requests always found a free slot.
    expect_eq "queues with overflow_out" "$(awk 'NR > 1 && $4 > 0' "$STATS" | wc -l)" 1
    bad=$(awk 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $c["overflow_out"] == 0 && $c["full_events"] > 0 { print $1 }' "$STATS")
    [[ -z $bad ]] || fail "shallow readers found their queue(s) $bad full"
    unload_nvme
}

# The seed's point: overflow must not starve the CPUs whose queue lends the slots. Each shallow
# reader keeps >= 90% of what it gets with overflow off; the deep reader gains >= 2x (7 own
# slots, plus 3 lendable of the 7 on each other queue: 16/7 = 2.3x at best).
test_nvme_deep_reader_starves_nobody() {
    ((NCPU >= 2)) || fail "needs 2 CPUs, the boot has $NCPU (boot with --smp 2 or more)"
    deep_and_shallow /tmp/iops.off overflow=0
    expect_eq "overflow with overflow=0" "$(sum_col overflow_in)" 0
    unload_nvme
    deep_and_shallow /tmp/iops.on overflow=1
    unload_nvme
    awk -F';' 'NR == FNR { off[$1] = $2; next }
        { keep = $2 / off[$1]; printf "%-9s overflow=0 %6d  overflow=1 %6d KiB  ratio %.2f\n", $1, off[$1], $2, keep }
        $1 == "deep" && keep < 2.0 { print "FAIL: the deep reader gained less than 2x"; bad = 1 }
        $1 != "deep" && keep < 0.9 { print "FAIL: " $1 " kept less than 90% of its throughput"; bad = 1 }
        END { exit bad }' /tmp/iops.off /tmp/iops.on || fail "lending starved a reader or did not help the deep one"
}

t nvme_lending_keeps_reserve
t nvme_deep_reader_starves_nobody
t_kernel_clean nvme_latency_no_kernel_warnings

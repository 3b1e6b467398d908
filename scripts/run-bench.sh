#!/usr/bin/env bash
# `make bench`: run the benchmarks, one guest boot per part, and write results/.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

DEFAULT_CPU=max,-erms,-fsrm # TCG runs `rep movsb` byte by byte: without ERMS copy_mc uses memcpy, without FSRM (QEMU 10's max has it) memcpy is no rep movsb
DEFAULT_LATENCY_NS=100000000 # null-aio command latency of the overflow part (see docs/benchmarks.md)
PARTS_ALL=(pmem nvme nvme2 nvme_raw overflow poll overflow_model)

usage() {
    cat <<USAGE
Usage: $0 [--part pmem|nvme|nvme2|nvme_raw|overflow|poll|overflow_model|all]... [--mode icount|wall] [--rounds N]
          [--runtime S] [--latency-ns NS] [--cpu MODEL] [--results DIR] [--no-prepare]
          [--profile HZ | --insn-profile] [--help]

Parts (each is one guest boot; its configurations alternate in every round, and every ratio
is computed within a round, then reported as the median [min-max] over the rounds):
  pmem      2 vCPUs, fio io_uring 4k randread, 2 jobs x iodepth 32: rust_pmem nowait=0/1, the
            C nd_pmem with the reference nowait patch nowait=0/1, brd of the same size; both
            pmem drivers at nowait=1 with fio batches of 8 (submit and reap).
  nvme      CPU cost of rust_nvme_mq vs the C nvme driver, the same scheduler on both sides:
            QEMU's NVMe on a null-co namespace (commands complete at once, so the vCPU stays
            busy) without shadow doorbells (dbcs=off: C would use them, rust_nvme_mq cannot),
            1 vCPU (one hardware queue each), 16 jobs x iodepth 16: block path with scheduler
            none, with mq-deadline, with fio batches of 8, and io_uring passthrough.
            (Wall mode: 4 vCPUs.)
  nvme2     the same, 2 vCPUs (two hardware queues each), scheduler none.
  nvme_raw  the same on the raw image (QEMU's I/O threads answer: the vCPU waits part of the
            time), none and mq-deadline: the second table.
  overflow  rust_nvme_mq overflow=0 vs 1 on an NVMe whose commands take --latency-ns each and
            run in parallel (QEMU null-aio), 4 vCPUs, io_queue_depth=16: (a) uneven equal
            readers, (b) one deep reader + shallow ones, (c) nr_io_queues=2; always wall clock.
  poll      rust_nvme_mq poll_queues=1, 2 vCPUs: one io_uring 4k randread job at iodepth 1 on
            CPU 0, interrupt-driven vs polled (--hipri): IOPS and mean latency ratios.
  overflow_model  no guest: the host model of the overflow policy at 16-256 queues
            (tools/overflow-model/bench.sh, docs/overflow-model.md): overflow_model_* keys.

  --mode icount  (default) QEMU -icount shift=0,sleep=off for pmem, nvme and poll: guest time counts
                 guest instructions (1 ns each, all vCPUs in turn), so IOPS and instructions per
                 I/O do not depend on the host's load and repeat to ~0.1%.
  --mode wall    real time (TCG); figures move by ~30% with the host's load.
  --rounds N     rounds per part (default 3 in icount mode, 5 in wall mode; overflow 3)
  --runtime S    fio seconds per run (default: icount 2 guest seconds for pmem, 1 for nvme;
                 wall 8; overflow 6)
  --latency-ns   null-aio latency for the overflow part (default $DEFAULT_LATENCY_NS)
  --cpu MODEL    QEMU CPU model (default $DEFAULT_CPU; \$RBLK_CPU also sets it)
  --results DIR  where bench.json, the charts and the logs go (default results/)
  --no-prepare   use out/env (\$RBLK_OUT/env) as it is: no rebuild of kernel or modules
  --jobs N       fio jobs of the nvme parts (default 16)
  --base-ko FILE  a rust_nvme_mq.ko built from another commit (against the same kernel), loaded
                 by the nvme parts' base_* configurations (e.g. --configs "base_none rust_none"):
                 the same load on the driver before and after a change, in one boot
  --configs "A B"  run only these configurations of the part (names as in its guest script)
  --profile HZ   profile instead of measuring (pmem and nvme* parts, icount): every fio run under
                 perf record -a -e cpu-clock -F HZ in the guest (Debian's perf copied into the
                 initramfs); bench/profile.py then writes DIR/profile-<part>.md, instructions
                 per I/O by function group and by function, each Rust config beside its C
                 twin. bench.json is not touched (sampling costs instructions too)
  --insn-profile exact instruction counts instead of samples (pmem and nvme* parts, icount):
                 QEMU runs the TCG plugin tools/insn-count, which counts every executed guest
                 instruction per translation block; each fio run is a window between two
                 sync(2) calls (the plugin's trigger, __x64_sys_sync). bench/insn_profile.py
                 writes DIR/insn-<part>.md: instructions per I/O by function and group, each
                 Rust config beside its C twin, with nothing lost to irq-off sections.
                 bench.json is not touched (the plugin slows QEMU, not the guest's count)

Writes DIR/bench.json, DIR/<part>.png and the raw guest logs DIR/bench-<part>.log, and prints
the tables and ratios. No pass/fail: ratios are printed next to their targets.
USAGE
}

MODE=icount ROUNDS="" RUNTIME="" LATENCY_NS=$DEFAULT_LATENCY_NS CPU=${RBLK_CPU:-$DEFAULT_CPU}
PREPARE=1 PARTS=() RESULTS="" PROFILE_HZ="" INSN=0 CONFIGS_ARG="" JOBS_ARG="" BASE_KO=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --part) need_arg "$@"
            if [[ $2 == all ]]; then PARTS=("${PARTS_ALL[@]}")
            elif [[ " ${PARTS_ALL[*]} " == *" $2 "* ]]; then PARTS+=("$2")
            else die "unknown part '$2' (${PARTS_ALL[*]} or all)"; fi
            shift ;;
        --mode) need_arg "$@"; [[ $2 == icount || $2 == wall ]] || die "--mode is icount or wall, not '$2'"
            MODE=$2; shift ;;
        --rounds) need_arg "$@"; ROUNDS=$2; shift ;;
        --runtime) need_arg "$@"; RUNTIME=$2; shift ;;
        --latency-ns) need_arg "$@"; LATENCY_NS=$2; shift ;;
        --cpu) need_arg "$@"; CPU=$2; shift ;;
        --results) need_arg "$@"; RESULTS=$2; shift ;;
        --no-prepare) PREPARE=0 ;;
        --base-ko) need_arg "$@"; [[ -f $2 ]] || die "--base-ko: no file $2"; BASE_KO=$(readlink -f "$2"); shift ;;
        --jobs) need_arg "$@"; [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer"
            JOBS_ARG=$2; shift ;;
        --configs) need_arg "$@"; [[ $2 =~ ^[a-z0-9_\ ]+$ ]] || die "--configs takes configuration names, not '$2'"
            CONFIGS_ARG=$2; shift ;;
        --profile) need_arg "$@"; [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--profile takes a sampling rate in Hz, not '$2'"
            PROFILE_HZ=$2; shift ;;
        --insn-profile) INSN=1 ;;
        -h|--help) usage; exit 0 ;;
        *) unknown_arg "$1" ;;
    esac
    shift
done
((${#PARTS[@]})) || PARTS=("${PARTS_ALL[@]}")
[[ -z "$ROUNDS" || "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer"
[[ -z "$RUNTIME" || "$RUNTIME" =~ ^[1-9][0-9]*$ ]] || die "--runtime must be a positive integer (seconds)"
[[ "$LATENCY_NS" =~ ^[1-9][0-9]*$ ]] || die "--latency-ns must be a positive integer"
((${ROUNDS:-3} >= 3)) || echo "run-bench: note: fewer than 3 rounds; the medians are not the ones bench.json promises" >&2

TOP=$(cd "$(dirname "$0")/.." && pwd)
RESULTS=${RESULTS:-$TOP/results}
mkdir -p "$RESULTS"
OUT=${RBLK_OUT:-$TOP/out}
if ((PREPARE)); then
    "$TOP/scripts/prepare.sh" --no-builtin || die "scripts/prepare.sh failed (kernel, modules or guest tools), see above"
else
    [[ -f "$OUT/env" ]] || die "--no-prepare but $OUT/env does not exist: run scripts/prepare.sh first"
fi
# shellcheck source=/dev/null
source "$OUT/env"
if ((!PREPARE)); then
    # The guest loads the modules prepare.sh installed, not what 'make' built since.
    for ko in rust_nvme_mq.ko rust_pmem.ko; do
        installed=$OUT/modules-$(basename "$KBUILD")/$ko
        if [[ -f $TOP/$ko && -f $installed ]] &&
            [[ $(sha256sum <"$TOP/$ko") != $(sha256sum <"$installed") ]]; then
            echo "run-bench: note: --no-prepare measures $installed (installed by scripts/prepare.sh), not $TOP/$ko, which differs from it" >&2
        fi
    done
fi

if [[ -n $BASE_KO ]]; then
    cp "$BASE_KO" "$OUT/modules-$(basename "$KBUILD")/rust_nvme_mq_base.ko" ||
        die "cannot put $BASE_KO beside the modules in $OUT/modules-$(basename "$KBUILD")"
fi
# insn_plugin PART: build the instruction-count plugin (host gcc) and print its -plugin argument:
#   dumps to $RESULTS/insn-PART.dump.N, one at each guest sync(2).
insn_plugin() {
    local so=$OUT/insn_count.so addr
    gcc -O2 -shared -fPIC -fvisibility=hidden -o "$so" "$TOP/tools/insn-count/insn_count.c" ||
        die "cannot build the QEMU plugin tools/insn-count/insn_count.c (gcc)"
    addr=$(awk '$3 == "__x64_sys_sync" { print $1 }' "$KBUILD/System.map")
    [[ -n $addr ]] || die "no __x64_sys_sync in $KBUILD/System.map: no trigger for the plugin"
    rm -f "$RESULTS/insn-$1.dump".*
    echo "file=$so,out=$RESULTS/insn-$1.dump,trigger=0x$addr"
}

start_all=$(date +%s)
for part in "${PARTS[@]}"; do
    if [[ $part == overflow_model ]]; then # no guest
        "$TOP/tools/overflow-model/bench.sh" --results "$RESULTS" || die "the overflow model failed"
        continue
    fi
    gargs=() mode=$MODE ramp=1 configs="" jobs=""
    case $part in
        pmem) smp=2; rounds=${ROUNDS:-3}; runtime=${RUNTIME:-2}
            [[ $MODE == wall ]] && { rounds=${ROUNDS:-5}; runtime=${RUNTIME:-8}; } ;;
        # NVMe under icount: ~25 s of host time per guest second (every doorbell and completion
        # leaves the translated code), so 1 s runs.
        nvme|nvme2|nvme_raw) smp=1; rounds=${ROUNDS:-3}; runtime=${RUNTIME:-1}
            gargs+=(--nvme-dbcs off)
            [[ $part == nvme_raw ]] || gargs+=(--nvme-null-co)
            # 16 jobs x iodepth 16 keep the vCPU(s) busy (93%, this accounting's ceiling) even on
            # a loaded host; with 4 jobs the vCPU waited for QEMU's I/O thread 14-31% of the time
            # (null-co, 1 vCPU) and at 2 vCPUs 4 or 8 jobs left 16-40% idle.
            jobs=16
            case $part in
                nvme2) smp=2; configs="rust_none c_none" ;;
                nvme_raw) configs="rust_none c_none rust_deadline c_deadline" ;;
                nvme) configs="rust_none c_none rust_deadline c_deadline rust_pt c_pt rust_none_b8 c_none_b8" ;;
            esac
            # Without icount one vCPU is just slow; use one per queue as the driver is meant to.
            [[ $MODE == wall ]] && { smp=4; rounds=${ROUNDS:-5}; runtime=${RUNTIME:-8}; } ;;
        # 2 vCPUs: one interrupt-driven queue per CPU plus one poll queue.
        poll) smp=2; rounds=${ROUNDS:-3}; runtime=${RUNTIME:-1}
            [[ $MODE == wall ]] && { rounds=${ROUNDS:-5}; runtime=${RUNTIME:-5}; } ;;
        overflow) smp=4; rounds=${ROUNDS:-3}; runtime=${RUNTIME:-6}; mode=wall
            gargs+=(--nvme-null "$LATENCY_NS") ;;
    esac
    # Under icount a guest second is 10^9 instructions (~6 s of host time): a short ramp will do.
    [[ $mode == icount ]] && { gargs+=(--icount); ramp=500ms; }
    [[ -z $CONFIGS_ARG ]] || configs=$CONFIGS_ARG
    [[ -z $JOBS_ARG || $part != nvme* ]] || jobs=$JOBS_ARG
    log="$RESULTS/bench-$part.log"
    if [[ -n $PROFILE_HZ ]]; then
        [[ $part == pmem || $part == nvme* ]] || die "--profile is for the pmem and nvme parts, not $part"
        [[ $mode == icount ]] || die "--profile needs --mode icount (samples then count instructions)"
        log="$RESULTS/profile-$part.log"
    fi
    plugin=""
    if ((INSN)); then
        [[ -z $PROFILE_HZ ]] || die "--profile and --insn-profile do not mix"
        [[ $part == pmem || $part == nvme* ]] || die "--insn-profile is for the pmem and nvme parts, not $part"
        [[ $mode == icount ]] || die "--insn-profile needs --mode icount"
        log="$RESULTS/insn-$part.log"
        plugin=$(insn_plugin "$part")
        ramp=0
    fi
    script=bench-$part.sh
    [[ $part != nvme* ]] || script=bench-nvme.sh
    echo "run-bench: $part part ($mode, CPU $CPU), $smp vCPUs, $rounds rounds of $runtime s -> $log" >&2
    s=$(date +%s)
    RBLK_CPU=$CPU RBLK_EXTRA_TOOLS=${PROFILE_HZ:+perf} RBLK_QEMU_PLUGIN=$plugin \
        "$TOP/scripts/guest.sh" --smp "$smp" "${gargs[@]}" --timeout 3600 --log "$log" \
        -- "RAMP=$ramp ${PROFILE_HZ:+PROFILE_HZ=$PROFILE_HZ }${plugin:+INSN_PROFILE=1 }${configs:+CONFIGS='$configs' }bash /tests/$script $rounds $runtime $jobs" >/dev/null ||
        die "the $part guest run failed (status $?); its console log is $log"
    echo "run-bench: $part part took $(($(date +%s) - s)) s" >&2
    if ((INSN)); then
        /usr/bin/python3 "$TOP/bench/insn_profile.py" "$log" --dumps "$RESULTS/insn-$part.dump" \
            --vmlinux-map "$KBUILD/System.map" --out "$RESULTS/insn-$part.md" ||
            die "bench/insn_profile.py failed on $log"
        continue
    fi
    if [[ -n $PROFILE_HZ ]]; then
        /usr/bin/python3 "$TOP/bench/profile.py" "$log" --hz "$PROFILE_HZ" --out "$RESULTS/profile-$part.md" ||
            die "bench/profile.py failed on $log"
        continue
    fi
    # Debian's python3 has python3-matplotlib (installed by setup-host.sh) for the charts.
    /usr/bin/python3 "$TOP/bench/report.py" "$log" --part "$part" --mode "$mode" \
        --latency-ns "$LATENCY_NS" --results "$RESULTS" || die "bench/report.py failed on $log"
done
echo "run-bench: all parts took $(($(date +%s) - start_all)) s; results in $RESULTS" >&2

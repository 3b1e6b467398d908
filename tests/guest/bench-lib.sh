# SPDX-License-Identifier: GPL-2.0
# Helpers shared by the guest benchmark scripts (bench-*.sh); source after /tests/lib.sh.
#
# Every measurement goes to the console as lines the host's bench/report.py reads:
#   BENCH <config> <round> <chunk#> <text>   fio's JSON output, in chunks (lib.sh emit)
#   STAT <config> <round> <user> <nice> <system> <idle> <iowait> <irq> <softirq> <steal>
#                                            /proc/stat "cpu" line (all CPUs, USER_HZ ticks),
#                                            difference over the fio run
#   QUEUES <config> <round> <line>           rust_nvme_mq's debugfs queue counters after a run
#   INFO <config> <round> <text>             anything else worth keeping (IRQ affinity, ...)
#   PROFILE <config> <round> <line>          with PROFILE_HZ set: `perf report` of the run (perf
#                                            record -a -e cpu-clock at PROFILE_HZ over fio)

cpu_ticks() { # -> the 8 first numbers of /proc/stat's "cpu" line
    local _cpu rest
    read -r _cpu rest </proc/stat
    set -- $rest
    echo "$1 $2 $3 $4 $5 $6 $7 $8"
}

# bench_fio CONFIG ROUND FIO-ARGS...: run fio (JSON output), emit its result and the CPU time
# the whole guest spent during the run. fails with fio's own output if fio fails.
bench_fio() {
    local cfg=$1 rnd=$2 before after json i
    shift 2
    local prof=()
    [[ -z ${PROFILE_HZ:-} ]] || prof=(perf record -q -a -e cpu-clock -F "$PROFILE_HZ" -o /tmp/perf.data --)
    # INSN_PROFILE (run-bench.sh --insn-profile): QEMU's instruction-count plugin dumps its
    # counts at each sync(2), so the fio run is the window between two of them.
    [[ -z ${INSN_PROFILE:-} ]] || { echo "INSNMARK $cfg $rnd"; sync; }
    before=($(cpu_ticks))
    if ! json=$("${prof[@]}" fio --output-format=json "$@" 2>/tmp/fio.err); then
        echo "bench: fio failed for $cfg (round $rnd): $(tail -n 5 /tmp/fio.err)" >&2
        return 1
    fi
    after=($(cpu_ticks))
    [[ -z ${INSN_PROFILE:-} ]] || { sync; module_symbols "$cfg" "$rnd"; }
    [[ -z ${PROFILE_HZ:-} ]] || profile_report "$cfg" "$rnd"
    local delta=()
    for i in 0 1 2 3 4 5 6 7; do delta+=($((after[i] - before[i]))); done
    echo "STAT $cfg $rnd ${delta[*]}"
    emit "$cfg" "$rnd" "$json"
}

# module_symbols CONFIG ROUND: the text symbols of the loaded modules ("KSYM" lines), for the
# instruction-count profile to name module addresses (they move with each load).
module_symbols() {
    awk -v c="$1" -v r="$2" '$2 ~ /^[tT]$/ && $4 ~ /^\[/ { print "KSYM", c, r, $1, $3, $4 }' /proc/kallsyms
}

# profile_report CONFIG ROUND: perf's samples of the run per symbol ("PROFILE" lines): samples,
# command, object, symbol. Under icount a cpu-clock sample falls every 1e9/PROFILE_HZ guest
# instructions.
profile_report() {
    local line
    perf report -i /tmp/perf.data --stdio --no-children --sort comm,dso,sym -n -F overhead,sample,comm,dso,sym \
        2>/dev/null | grep -v '^#' | grep -v '^$' | while IFS= read -r line; do
        echo "PROFILE $1 $2 $line"
    done
    rm -f /tmp/perf.data
}

# queue_setup DISK: the queue settings of DISK that both sides of a driver ratio must share, as
# "sched=... hwq=... iostats=... nomerges=..." (a bio-based disk has no hardware queues: hwq=0,
# and no scheduler: its scheduler file holds none without brackets, or nothing).
queue_setup() {
    local q=/sys/block/$1/queue hwq=0
    [[ ! -d /sys/block/$1/mq ]] || hwq=$(find "/sys/block/$1/mq" -mindepth 1 -maxdepth 1 -type d | wc -l)
    echo "sched=$(sed 's/.*\[\(.*\)\].*/\1/' $q/scheduler) hwq=$hwq iostats=$(cat $q/iostats)" \
        "nomerges=$(cat $q/nomerges)"
}

# nvme_run CONFIG MODULE-PARAMS... -- FIO-JOBS...: load rust_nvme_mq with io_queue_depth=$DEPTH
# and the parameters, run fio with the script's ${common[@]} options and the jobs on $DEV as
# round $round, print the queue counters, unload (the overflow benchmarks).
nvme_run() {
    local cfg=$1 params=()
    shift
    while [[ $1 != -- ]]; do params+=("$1"); shift; done
    shift
    insmod "$MODDIR/${NVME_KO:-rust_nvme_mq.ko}" io_queue_depth=$DEPTH "${params[@]}"
    wait_dev $DEV
    bench_fio "$cfg" "$round" "${common[@]}" "$@"
    queues "$cfg" "$round"
    unload_module rust_nvme_mq
}

# reader NAME CPU IODEPTH: the fio options of one reader job pinned to CPU.
reader() {
    echo "--name=$1 --cpus_allowed=$2 --iodepth=$3"
}

# queues CONFIG ROUND: print rust_nvme_mq's per-queue counters (whatever columns it has).
NVME_QUEUES_FILE=/sys/kernel/debug/rust_nvme_mq/rnvme0/queues
queues() {
    local line
    if [[ ! -r $NVME_QUEUES_FILE ]]; then
        echo "INFO $1 $2 no $NVME_QUEUES_FILE"
        return 0
    fi
    while IFS= read -r line; do echo "QUEUES $1 $2 $line"; done <$NVME_QUEUES_FILE
}

# expand_cpus LIST: "0-1,3" -> "0 1 3"
expand_cpus() {
    local part out=()
    for part in ${1//,/ }; do
        if [[ $part == *-* ]]; then out+=($(seq "${part%-*}" "${part#*-}"));
        else out+=("$part"); fi
    done
    echo "${out[*]}"
}

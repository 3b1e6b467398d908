#!/usr/bin/env python3
"""Instructions per submission of rust_nvme_mq, counted, per fio window (issue 30).

Reads a console log and the insn_count plugin's dumps of tests/guest/bench-overflow-policies.sh
run with INSN_PROFILE=1 (see docs/overflow-model.md#instructions-per-submission). For each
window (config, round): the instructions run in rust_nvme_mq outside its completion side (the
interrupt handler, reaping, reading completion entries, ending requests, unmapping), divided by
the number of `queue_rq` calls (executions of the block at the entry of the queue_rq callback),
and the calls per fio I/O (more than 1 when blk-mq retried requests a driver sent back with
BLK_STS_RESOURCE). Prints a Markdown table, one line per config (rounds summed).
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from insn_profile import Symbols, parse_log  # noqa: E402

# Completion-side symbols of rust_nvme_mq (substrings of the mangled names).
COMPLETION = ("4reap", "8read_cqe", "13handle_vector", "7Handler6handle", "15finish_deferred",
              "5unmap", "17complete_callback", "10Operations8complete", "19process_completions")
ENTRY = "17queue_rq_callback"


def window(dump, syms):
    """-> (submission-side instructions in rust_nvme_mq, queue_rq calls) of one dump."""
    entry = [a for a, n, _ in syms if ENTRY in n]
    if len(entry) != 1:
        sys.exit(f"insn_overflow: {len(entry)} symbols named *{ENTRY}* in the KSYM lines")
    modules = Symbols(syms)
    insns, calls = 0, 0
    for line in Path(dump).read_text().splitlines():
        vaddr, n, execs = line.split()
        addr = int(vaddr, 16)
        if addr == entry[0]:
            calls += int(execs)
        sym = modules.find(addr)
        # As insn_profile.window: farther than 1 MiB from a module symbol is not the module's.
        if sym is None or addr - sym[0] > 0x100000:
            continue
        _, name, mod = sym
        if mod != "[rust_nvme_mq]" or any(c in name for c in COMPLETION):
            continue
        insns += int(n) * int(execs)
    return insns, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--dumps", required=True, help="the plugin's dump prefix (PREFIX.N files)")
    args = ap.parse_args()
    marks, ios, ksyms = parse_log(args.log)
    dumps = sorted(Path(args.dumps).parent.glob(Path(args.dumps).name + ".*"),
                   key=lambda p: int(p.suffix[1:]))
    if len(dumps) < 2 * len(marks):
        sys.exit(f"insn_overflow: {len(marks)} windows but {len(dumps)} dumps in {args.dumps}.*")
    per = {}
    for k, key in enumerate(marks):
        if not ios.get(key):
            sys.exit(f"insn_overflow: no fio I/O count for {key}")
        insns, calls = window(dumps[2 * k + 1], ksyms.get(key, []))
        if not calls:
            sys.exit(f"insn_overflow: no queue_rq call counted in window {key}")
        agg = per.setdefault(key[0], [0, 0, 0])
        agg[0] += insns
        agg[1] += calls
        agg[2] += ios[key]
    print("| config | instructions per queue_rq call (submission side) | queue_rq calls per I/O | I/Os |")
    print("|---|---:|---:|---:|")
    for cfg, (insns, calls, n) in per.items():
        print(f"| {cfg} | {insns / calls:,.1f} | {calls / n:.3f} | {n:,} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn a profiled benchmark log (scripts/run-bench.sh --profile HZ) into a table of guest
instructions per I/O by function group and by function, each Rust configuration beside its C
twin (rust_X beside c_X; rust_nowaitN beside c_nowaitN).

The log has, per configuration and round, fio's JSON ("BENCH" lines), /proc/stat tick deltas
("STAT") and perf's samples per (command, object, symbol) ("PROFILE" lines, from
`perf record -a -e cpu-clock -F HZ`). Under QEMU's icount one guest nanosecond is one guest
instruction, so a sample falls every 1e9/HZ instructions, summed over the vCPUs; a function's
instructions per I/O = its share of the samples x all guest instructions per I/O (1e9 / IOPS).
Idle samples are a group of their own; the busy total is the sum of the other groups.

Caveat (the sampling clock is a timer interrupt, not an NMI): code that runs with interrupts
disabled is charged to where they are enabled again, e.g. `_raw_spin_unlock_irq*`,
`handle_softirqs`, the idle loop. Such samples are shown as their own group.

    profile.py LOG --hz HZ --out FILE.md
"""
import argparse
import json
import re
import sys
from pathlib import Path

# (group, test on (comm, dso, sym)); the first match wins.
KERNEL = "[kernel.kallsyms]"


def is_kernel(dso):
    return dso == KERNEL or dso.startswith("[") and dso.endswith("]") and dso != "[vdso]"


GROUPS = [
    ("idle", lambda c, d, s: c == "swapper" or re.search(r"idle|pv_native_safe_halt|default_idle|cpuidle|mwait", s)),
    ("profiler (perf itself)", lambda c, d, s: c.startswith("perf") or re.search(r"perf_|__perf", s)),
    ("irq-enable points (samples of irq-off code)",
     lambda c, d, s: re.search(r"_raw_spin_unlock_irq|_raw_spin_unlock_irqrestore|handle_softirqs|__do_softirq|"
                               r"irq_exit|local_irq_restore|arch_local_irq", s)),
    ("user space (fio, libc, vdso)", lambda c, d, s: not is_kernel(d)),
    ("driver: rust_nvme_mq", lambda c, d, s: d == "[rust_nvme_mq]"),
    ("driver: nvme (C)", lambda c, d, s: d in ("[nvme]", "[nvme_core]")),
    ("driver: rust_pmem", lambda c, d, s: d == "[rust_pmem]"),
    ("driver: nd_pmem (C)", lambda c, d, s: d in ("[nd_pmem]", "[libnvdimm]", "[nd_btt]")),
    ("brd", lambda c, d, s: d == "[brd]"),
    ("Rust kernel crate glue (vmlinux)", lambda c, d, s: s.startswith("_R") or s.startswith("rust_helper")),
    ("copy (memcpy, copy_mc, usercopy)", lambda c, d, s: re.search(r"memcpy|memmove|copy_mc|copy_user|"
                                                                    r"rep_movs|memset|clear_page", s)),
    ("mq-deadline scheduler", lambda c, d, s: re.search(r"^dd_|deadline|elv_|elevator", s)),
    ("blk-mq: tags", lambda c, d, s: re.search(r"sbitmap|blk_mq_get_tag|blk_mq_put_tag|__blk_mq_alloc_requests|"
                                               r"blk_mq_rq_ctx_init|blk_mq_get_new_requests|blk_mq_alloc_request|"
                                               r"__blk_mq_get_tag|blk_mq_free_request|__blk_mq_free_request", s)),
    ("blk-mq: submission and dispatch", lambda c, d, s: re.search(
        r"blk_mq_submit_bio|blk_mq_try_issue|__blk_mq_issue|blk_mq_dispatch|blk_mq_sched|blk_mq_run_hw|"
        r"blk_mq_flush_plug|blk_mq_plug|blk_add_timer|blk_mq_start_request|blk_mq_insert|blk_mq_request_issue|"
        r"blk_mq_commit|blk_mq_get_driver_tag|blk_mq_attempt_bio_merge|bio_split|__blk_mq_sched|"
        r"blk_mq_dispatch_queue_requests|blk_mq_dispatch_list|blk_mq_peek|blk_rq_|blk_execute_rq|"
        r"__submit_bio|submit_bio|blk_start_plug|blk_finish_plug|__blk_flush_plug|blk_attempt|blk_mq_bio_to", s)),
    ("blk-mq: completion and end", lambda c, d, s: re.search(
        r"blk_mq_end_request|__blk_mq_end_request|blk_update_request|blk_mq_complete|blk_mq_free|"
        r"blk_account|update_io_ticks|blk_mq_.*_batch|blk_complete|blk_mq_raise|blk_done|bio_endio|"
        r"blk_stat|__blk_mq_end|blk_mq_end", s)),
    ("block: direct I/O, bio, page pinning", lambda c, d, s: re.search(
        r"^bio_|__bio_|blkdev_|iov_iter|gup|pin_user|unpin_user|folio|page_|__blk_bios|bvec|iomap|"
        r"blk_rq_map|blk_rq_unmap|dio", s)),
    ("interrupt entry and handling", lambda c, d, s: re.search(
        r"interrupt|handle_irq|handle_edge|irq_chip|__irq_|^irq_|apic|msi|ack_|__common_interrupt|"
        r"handle_fasteoi|irqentry", s)),
    ("io_uring", lambda c, d, s: re.search(r"io_uring|^io_|^__io_|uring", s)),
    ("syscall entry, files", lambda c, d, s: re.search(
        r"syscall|entry_SYSCALL|__fget|fget|fput|__x64_sys|do_syscall|ret_from|restore_regs|"
        r"exit_to_user|switch_fpu|fpregs", s)),
    ("scheduler, timers, locks", lambda c, d, s: re.search(
        r"schedule|wake|hrtimer|timer|ktime|_raw_spin|mutex|rcu|lock|tick|clock|sched_|update_curr|"
        r"enqueue|dequeue|cpuacct|account", s)),
]


def group_of(comm, dso, sym):
    for name, test in GROUPS:
        if test(comm, dso, sym):
            return name
    return "other kernel"


def parse(log):
    chunks, profile, stats = {}, {}, {}
    line_re = re.compile(r"^PROFILE (\S+) (\d+)\s+([\d.]+)%\s+(\d+)\s+(\S+)\s+(\S+)\s+\[[^\]]*\]\s+(.*)$")
    for line in Path(log).read_text(errors="replace").splitlines():
        line = line.rstrip("\r")
        if line.startswith("BENCH "):
            _, cfg, rnd, num, text = line.split(" ", 4)
            chunks.setdefault((cfg, int(rnd)), {})[int(num)] = text
        elif line.startswith("STAT "):
            f = line.split()
            stats[(f[1], int(f[2]))] = [int(x) for x in f[3:11]]
        elif line.startswith("PROFILE "):
            m = line_re.match(line)
            if not m:
                continue
            cfg, rnd, _pct, samples, comm, dso, sym = m.groups()
            key = (cfg, int(rnd))
            profile.setdefault(key, []).append((comm, dso, sym.strip(), int(samples)))
    iops = {}
    for key, parts in chunks.items():
        jobs = json.loads("".join(parts[i] for i in sorted(parts)))["jobs"]
        iops[key] = sum(j["read"]["iops"] for j in jobs)
    return iops, profile, stats


def twin(cfg):
    return "c_" + cfg[5:] if cfg.startswith("rust_") else None


def short(sym):
    """A readable name for a (possibly Rust-mangled) symbol: the last identifiers of the path."""
    if not sym.startswith("_R"):
        return sym
    idents = re.findall(r"\d+([A-Za-z_][A-Za-z0-9_]*)", sym)
    idents = [i for i in idents if not re.match(r"^(Cs|Nt|Nv|Ns|NC|B\d)", i)]
    return "rust: " + "::".join(idents[-3:]) if idents else sym


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--hz", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    iops, profile, stats = parse(args.log)
    if not profile:
        sys.exit(f"profile: no PROFILE lines in {args.log} (perf missing in the guest? see the log)")
    # One round per configuration is enough for a profile; take the first.
    cfgs = sorted({c for c, _ in profile}, key=lambda c: (c.split("_", 1)[1] if "_" in c else c, c))
    per_cfg = {}
    for cfg in cfgs:
        rnd = min(r for c, r in profile if c == cfg)
        rows = profile[(cfg, rnd)]
        total = sum(s for *_, s in rows)
        ipio = 1e9 / iops[(cfg, rnd)]
        groups, funcs = {}, {}
        for comm, dso, sym, s in rows:
            v = s / total * ipio
            g = group_of(comm, dso, sym)
            groups[g] = groups.get(g, 0) + v
            name = f"{short(sym)} {dso}" if dso != KERNEL else short(sym)
            funcs[name] = funcs.get(name, 0) + v
        per_cfg[cfg] = {"ipio": ipio, "iops": iops[(cfg, rnd)], "samples": total, "groups": groups, "funcs": funcs,
                        "round": rnd}
    out = [f"# Instruction profile: {Path(args.log).name}", "",
           f"perf record -a -e cpu-clock -F {args.hz} in the guest under icount (a sample every "
           f"{1e9 / args.hz:,.0f} guest instructions); instructions per I/O = share of samples x 1e9 / IOPS. "
           "The sampling itself costs instructions (group 'profiler'); compare configurations with each other, "
           "not with the bench's figures. Written by bench/profile.py.", ""]
    pairs = [(c, twin(c)) for c in cfgs if twin(c) in per_cfg]
    for rust, c in pairs:
        R, C = per_cfg[rust], per_cfg[c]
        out += [f"## {rust} vs {c}", "",
                f"All instructions per I/O: {R['ipio']:,.0f} vs {C['ipio']:,.0f} "
                f"({R['samples']:,} vs {C['samples']:,} samples; IOPS {R['iops']:,.0f} vs {C['iops']:,.0f}).", "",
                f"| group | {rust} | {c} | Rust - C |", "|---|---:|---:|---:|"]
        names = sorted(set(R["groups"]) | set(C["groups"]), key=lambda g: -(R["groups"].get(g, 0) + C["groups"].get(g, 0)))
        busy_r = sum(v for g, v in R["groups"].items() if g != "idle")
        busy_c = sum(v for g, v in C["groups"].items() if g != "idle")
        for g in names:
            r, cc = R["groups"].get(g, 0), C["groups"].get(g, 0)
            out.append(f"| {g} | {r:,.0f} | {cc:,.0f} | {r - cc:+,.0f} |")
        out.append(f"| **busy (all but idle)** | **{busy_r:,.0f}** | **{busy_c:,.0f}** | **{busy_r - busy_c:+,.0f}** |")
        out += ["", f"Functions, instructions per I/O (top {args.top} of each side):", "",
                f"| function | {rust} | {c} |", "|---|---:|---:|"]
        top = sorted(set(R["funcs"]) | set(C["funcs"]), key=lambda f: -max(R["funcs"].get(f, 0), C["funcs"].get(f, 0)))
        for f in top[:2 * args.top]:
            out.append(f"| `{f}` | {R['funcs'].get(f, 0):,.0f} | {C['funcs'].get(f, 0):,.0f} |")
        out.append("")
    for cfg in cfgs:
        if any(cfg in p for p in pairs):
            continue
        P = per_cfg[cfg]
        out += [f"## {cfg}", "", f"All instructions per I/O: {P['ipio']:,.0f}", "", "| group | instr/IO |", "|---|---:|"]
        for g, v in sorted(P["groups"].items(), key=lambda x: -x[1]):
            out.append(f"| {g} | {v:,.0f} |")
        out.append("")
    Path(args.out).write_text("\n".join(out) + "\n")
    print("\n".join(out))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

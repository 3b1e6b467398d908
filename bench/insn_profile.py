#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Exact instruction profile of the bench's fio runs, from QEMU's insn_count plugin.

run-bench.sh --insn-profile boots the guest with tools/insn-count/insn_count.so, which counts
every guest instruction per translation block and dumps the counts at each sync(2). The guest
(tests/guest/bench-lib.sh, INSN_PROFILE=1) prints "INSNMARK <config> <round>", calls sync,
runs fio, calls sync again and prints the text symbols of the loaded modules ("KSYM" lines):
dump 2k is the start of the k-th window, dump 2k+1 its counts. A block is named by the symbol
whose address is the closest at or below its start (System.map for vmlinux, the KSYM lines for
modules); user-space blocks are counted together.

Unlike perf's cpu-clock samples, nothing here is attributed to an interrupt-enable point: code
run with interrupts off is counted where it runs.
"""

import argparse
import bisect
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile import group_of, short, twin  # noqa: E402

KERNEL_START = 0xFFFF800000000000


def parse_log(log):
    marks, chunks, ksyms = [], {}, {}
    for line in Path(log).read_text(errors="replace").splitlines():
        line = line.rstrip("\r")
        if line.startswith("INSNMARK "):
            _, cfg, rnd = line.split()
            marks.append((cfg, int(rnd)))
        elif line.startswith("BENCH "):
            _, cfg, rnd, num, text = line.split(" ", 4)
            chunks.setdefault((cfg, int(rnd)), {})[int(num)] = text
        elif line.startswith("KSYM "):
            _, cfg, rnd, addr, name, mod = line.split()
            ksyms.setdefault((cfg, int(rnd)), []).append((int(addr, 16), name, mod))
    ios = {}
    for key, parts in chunks.items():
        jobs = json.loads("".join(parts[i] for i in sorted(parts)))["jobs"]
        ios[key] = sum(j[d]["total_ios"] for j in jobs for d in ("read", "write"))
    return marks, ios, ksyms


class Symbols:
    def __init__(self, entries):
        entries = sorted(entries)
        self.addrs = [e[0] for e in entries]
        self.entries = entries

    def find(self, addr):
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.entries[i] if i >= 0 else None


def vmlinux_symbols(path):
    out = []
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tTwW":
            out.append((int(f[0], 16), f[2], "[kernel.kallsyms]"))
    return out


def window(dump, kernel, modules):
    """-> {(dso, symbol): instructions} of one dump file."""
    counts = {}
    for line in Path(dump).read_text().splitlines():
        vaddr, n, execs = line.split()
        addr, insns = int(vaddr, 16), int(n) * int(execs)
        if addr < KERNEL_START:
            key = ("user", "user space")
        else:
            sym = modules.find(addr) if modules.addrs and addr >= modules.addrs[0] else None
            if sym is None or addr - sym[0] > 0x100000:
                sym = kernel.find(addr)
            key = (sym[2], sym[1]) if sym else ("[kernel.kallsyms]", hex(addr))
        counts[key] = counts.get(key, 0) + insns
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--dumps", required=True, help="the plugin's dump prefix (PREFIX.N files)")
    ap.add_argument("--vmlinux-map", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    marks, ios, ksyms = parse_log(args.log)
    dumps = sorted(Path(args.dumps).parent.glob(Path(args.dumps).name + ".*"),
                   key=lambda p: int(p.suffix[1:]))
    # The guest syncs again at power-off, after the last window.
    if len(dumps) < 2 * len(marks):
        sys.exit(f"insn_profile: {len(marks)} windows in {args.log} but {len(dumps)} dumps "
                 f"(expected at least {2 * len(marks)})")
    kernel = Symbols(vmlinux_symbols(args.vmlinux_map))
    per = {}
    for k, key in enumerate(marks):
        if key not in ios or not ios[key]:
            sys.exit(f"insn_profile: no fio I/O count for {key}")
        counts = window(dumps[2 * k + 1], kernel, Symbols(ksyms.get(key, [])))
        agg = per.setdefault(key[0], {"ios": 0, "funcs": {}})
        agg["ios"] += ios[key]
        for fk, v in counts.items():
            agg["funcs"][fk] = agg["funcs"].get(fk, 0) + v
    lines = ["# Instructions per I/O, counted (QEMU insn_count plugin)", "",
             f"Log: `{args.log}`. Every guest instruction of each fio window, summed over the "
             "rounds and divided by fio's I/O count; no sampling, nothing moved to irq-enable points.", ""]
    # Each Rust configuration beside its C twin, and beside the driver before the change
    # (base_*, loaded from --base-ko) when that ran too.
    pairs = [(cfg, other) for cfg in sorted(per)
             for other in (twin(cfg), "base_" + cfg[5:] if cfg.startswith("rust_") else None)
             if other is not None and other in per]
    for cfg, other in pairs:
        base = other.startswith("base_")
        side, ratio = ("after - before", "before over after") if base else ("Rust - C", "C over Rust")
        a, b = per[cfg], per[other]
        fa = {k: v / a["ios"] for k, v in a["funcs"].items()}
        fb = {k: v / b["ios"] for k, v in b["funcs"].items()}
        ga, gb = {}, {}
        for src, dst in ((fa, ga), (fb, gb)):
            for (dso, sym), v in src.items():
                g = group_of("", dso, sym)
                dst[g] = dst.get(g, 0) + v
        lines += [f"## {cfg} vs {other}", "",
                  f"All instructions per I/O: {sum(fa.values()):,.1f} vs {sum(fb.values()):,.1f} "
                  f"({ratio} {sum(fb.values()) / sum(fa.values()):.3f}); I/Os {a['ios']:,} vs {b['ios']:,}.", "",
                  f"| group | {cfg} | {other} | {side} |", "|---|---:|---:|---:|"]
        for g in sorted(set(ga) | set(gb), key=lambda g: -(ga.get(g, 0) + gb.get(g, 0))):
            lines.append(f"| {g} | {ga.get(g, 0):,.1f} | {gb.get(g, 0):,.1f} | {ga.get(g, 0) - gb.get(g, 0):+,.1f} |")
        lines += ["", f"Functions, instructions per I/O (top {args.top} of each side):", "",
                  f"| function | module | {cfg} | {other} |", "|---|---|---:|---:|"]
        top = sorted(fa, key=lambda k: -fa[k])[:args.top] + sorted(fb, key=lambda k: -fb[k])[:args.top]
        seen = set()
        for k in sorted(set(top), key=lambda k: -max(fa.get(k, 0), fb.get(k, 0))):
            if k in seen:
                continue
            seen.add(k)
            lines.append(f"| `{short(k[1])}` | {k[0]} | {fa.get(k, 0):,.1f} | {fb.get(k, 0):,.1f} |")
        lines.append("")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

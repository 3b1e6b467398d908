#!/usr/bin/env python3
"""Figures of tests/guest/bench-overflow-policies.sh (issue 30): per overflow policy, medians
[min-max] over the rounds of one boot.

Policies: scan (overflow_scan=1, the linear scan), on (the bounded search), base (the bounded
search of rust_nvme_mq_base.ko, when the run had it); each against off (overflow=0) of the same
round. Figures: skew per-reader max/min and total IOPS on/off; deep, the lowest shallow reader
on/off and the deep reader on/off; queue locks per overflowing submission from the debugfs
counters: (home-full events + commands lent + borrow attempts refused) / home-full events.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import Part, iops, parse, ratios_overflow  # noqa: E402


def med(xs):
    xs = sorted(xs)
    n = len(xs)
    m = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return f"{m:.3f} [{xs[0]:.3f}-{xs[-1]:.3f}]"


def locks(lines):
    head = lines[0].split()
    col = {name: i for i, name in enumerate(head)}
    tot = {k: 0 for k in ("full_events", "overflow_out", "refused")}
    for line in lines[1:]:
        f = line.split()
        if len(f) != len(head):
            continue
        for k in tot:
            tot[k] += int(f[col[k]])
    if not tot["full_events"]:
        return None
    return (tot["full_events"] + tot["overflow_out"] + tot["refused"]) / tot["full_events"], \
        tot["overflow_out"] / tot["full_events"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    args = ap.parse_args()
    runs, stats, queues = parse(args.log)
    pols = [p for p in ("scan", "on", "base") if f"skew_{p}" in runs]
    if "skew_off" not in runs or not pols:
        sys.exit(f"overflow_policies: no skew_off/skew_<policy> runs in {args.log}")
    # The overflow bench's own figures (bench/report.py), with each policy's runs as its "_on".
    figs = {}
    for p in pols:
        named = {"skew_off": runs["skew_off"], "skew_on": runs[f"skew_{p}"]}
        if "deep_off" in runs and f"deep_{p}" in runs:
            named.update(deep_off=runs["deep_off"], deep_on=runs[f"deep_{p}"])
        figs[p] = ratios_overflow(Part(named, stats, "wall", 0))[0]

    def lockfig(cfg):
        vals = [locks(q) for q in queues.get(cfg, {}).values()]
        vals = [v for v in vals if v]
        if not vals:
            return "-"
        return (f"{min(v[0] for v in vals):.2f}-{max(v[0] for v in vals):.2f} "
                f"({min(v[1] for v in vals):.0%}-{max(v[1] for v in vals):.0%} placed)")

    def fig(key):
        return lambda p: med(figs[p][key]) if key in figs[p] else "-"

    off = med(figs[pols[0]]["nvme_skew_fairness_off"])
    print("| figure | " + " | ".join(pols) + " |")
    print("|---|" + "---:|" * len(pols))
    rows = [
        (f"skew: per-reader max/min (off: {off})", fig("nvme_skew_fairness_on")),
        ("skew: total IOPS on/off", fig("nvme_skew_aggregate_ratio")),
        ("skew: locks per overflowing submission", lambda p: lockfig(f"skew_{p}")),
        ("deep: lowest shallow reader on/off", fig("nvme_deep_shallow_keep")),
        ("deep: deep reader on/off", fig("nvme_deep_gain")),
        ("deep: locks per overflowing submission", lambda p: lockfig(f"deep_{p}")),
    ]
    for name, fn in rows:
        print(f"| {name} | " + " | ".join(fn(p) for p in pols) + " |")
    dev = {cfg: med([iops(j) for j in runs[cfg].values()]) for cfg in ("skew_off", "deep_off")}
    print(f"\nTotal IOPS with overflow off: skew {dev['skew_off']}, deep {dev['deep_off']}.")


if __name__ == "__main__":
    main()

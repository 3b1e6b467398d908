#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarise the "BENCH <config> <round> <chunk> <fio json text>" lines of a guest log.

Prints a per-configuration table (median and min-max over rounds) and the ratios between
configurations, each computed per round (A and B of the same round) and then reduced to median
[min-max]. Merges the results into results/bench.json and draws results/<part>.png.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

METRICS = [  # (key, header, function of the fio group result)
    ("iops", "IOPS", lambda j: j["read"]["iops"]),
    ("bw_mib", "BW MiB/s", lambda j: j["read"]["bw"] / 1024),
    ("usr_cpu", "usr %", lambda j: j["usr_cpu"]),
    ("sys_cpu", "sys %", lambda j: j["sys_cpu"]),
    ("ctx", "ctx", lambda j: j["ctx"]),
    ("slat_us", "slat avg us", lambda j: j["read"]["slat_ns"]["mean"] / 1000),
]

# (json key, label, numerator config, denominator config, metric, target text)
PMEM_RATIOS = [
    ("pmem_nowait_ratio", "Rust nowait=1 / nowait=0 IOPS", "rust_nowait1", "rust_nowait0", "iops", ">= 1.5"),
    ("pmem_rust_vs_c", "Rust / C pmem IOPS at nowait=1", "rust_nowait1", "c_nowait1", "iops", ">= 1.0"),
    ("pmem_rust_vs_brd", "Rust nowait=1 / brd IOPS", "rust_nowait1", "brd", "iops", ">= 0.9"),
    ("pmem_ctx_ratio", "Rust ctx nowait=0 / nowait=1", "rust_nowait0", "rust_nowait1", "ctx", "(higher = fewer switches)"),
    ("pmem_c_nowait_ratio", "C nowait=1 / nowait=0 IOPS", "c_nowait1", "c_nowait0", "iops", "(reference x1.49)"),
]


def parse(log):
    """Join the numbered chunks of each configuration and round into fio's JSON."""
    chunks = {}  # (config, round) -> {chunk number: text}
    for line in Path(log).read_text(errors="replace").splitlines():
        line = line.rstrip("\r")
        if not line.startswith("BENCH "):
            continue
        _, cfg, rnd, num, text = line.split(" ", 4)
        chunks.setdefault((cfg, int(rnd)), {})[int(num)] = text
    runs = {}  # config -> round -> fio group json
    for (cfg, rnd), parts in chunks.items():
        payload = "".join(parts[i] for i in sorted(parts))
        runs.setdefault(cfg, {})[rnd] = json.loads(payload)["jobs"][0]
    return runs


def spread(values):
    return statistics.median(values), min(values), max(values)


def fmt(m, lo, hi):
    return f"{m:10.2f} [{lo:.2f}-{hi:.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("log")
    ap.add_argument("--part", default="pmem")
    ap.add_argument("--results", default="results")
    args = ap.parse_args()
    runs = parse(args.log)
    if not runs:
        sys.exit("bench report: no BENCH lines in " + args.log)
    rounds = min(len(r) for r in runs.values())

    print(f"\n{args.part}: {rounds} rounds, median [min-max] per configuration")
    print(f"{'config':14}" + "".join(f"{h:>26}" for _, h, _ in METRICS))
    table = {}
    for cfg, per_round in runs.items():
        row = {}
        for key, _, get in METRICS:
            row[key] = spread([get(j) for j in per_round.values()])
        table[cfg] = row
        print(f"{cfg:14}" + "".join(f"{fmt(*row[k]):>26}" for k, _, _ in METRICS))

    out = Path(args.results)
    out.mkdir(exist_ok=True)
    bench_json = out / "bench.json"
    results = json.loads(bench_json.read_text()) if bench_json.exists() else {}
    results[f"{args.part}_table"] = {c: {k: v[0] for k, v in r.items()} for c, r in table.items()}
    results[f"{args.part}_rounds"] = rounds

    print(f"\n{args.part}: ratios, per round then median [min-max]")
    labels, medians, lows, highs = [], [], [], []
    for key, label, num, den, metric, target in PMEM_RATIOS:
        if num not in runs or den not in runs:
            continue
        get = dict((k, g) for k, _, g in METRICS)[metric]
        per_round = [get(runs[num][r]) / max(get(runs[den][r]), 1e-9)
                     for r in sorted(runs[num]) if r in runs[den]]
        m, lo, hi = spread(per_round)
        results[key] = round(m, 3)
        results[key + "_min"] = round(lo, 3)
        results[key + "_max"] = round(hi, 3)
        print(f"  {label:36} {m:7.2f}  [{lo:.2f}-{hi:.2f}]  target {target}")
        labels.append(label)
        medians.append(m)
        lows.append(m - lo)
        highs.append(hi - m)
    bench_json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"\nwrote {bench_json}")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no chart")
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    cfgs = list(table)
    ax1.bar(cfgs, [table[c]["iops"][0] for c in cfgs],
            yerr=[[table[c]["iops"][0] - table[c]["iops"][1] for c in cfgs],
                  [table[c]["iops"][2] - table[c]["iops"][0] for c in cfgs]], capsize=4)
    ax1.set_title(f"{args.part}: 4k randread IOPS (median, min-max; TCG)")
    ax1.tick_params(axis="x", rotation=30)
    ax2.barh(labels, medians, xerr=[lows, highs], capsize=4, color="tab:orange")
    ax2.axvline(1.0, color="grey", linewidth=0.8)
    ax2.set_title("ratios (median, min-max over rounds)")
    fig.tight_layout()
    png = out / f"{args.part}.png"
    fig.savefig(png, dpi=90)
    print(f"wrote {png}")


if __name__ == "__main__":
    main()

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


def read_bw_mib(job):
    return job["read"]["bw"] / 1024


def spread_of_readers(jobs):
    """max/min of the per-reader read bandwidth (1.0 for a single reader)."""
    bws = [read_bw_mib(j) for j in jobs]
    return max(bws) / max(min(bws), 1e-9)


METRICS = [  # (key, header, function of the list of fio jobs of one run)
    ("iops", "IOPS", lambda js: sum(j["read"]["iops"] for j in js)),
    ("bw_mib", "BW MiB/s", lambda js: sum(read_bw_mib(j) for j in js)),
    ("usr_cpu", "usr %", lambda js: statistics.mean(j["usr_cpu"] for j in js)),
    ("sys_cpu", "sys %", lambda js: statistics.mean(j["sys_cpu"] for j in js)),
    ("ctx", "ctx", lambda js: sum(j["ctx"] for j in js)),
    ("slat_us", "slat avg us", lambda js: statistics.mean(j["read"]["slat_ns"]["mean"] for j in js) / 1000),
    ("spread", "reader max/min", spread_of_readers),
]
METRIC = {key: get for key, _, get in METRICS}

# Per part: (json key, label, numerator config, denominator config or None, metric, target).
# With no denominator the value is the metric itself (median over rounds).
RATIOS = {
    "pmem": [
        ("pmem_nowait_ratio", "Rust nowait=1 / nowait=0 IOPS", "rust_nowait1", "rust_nowait0", "iops", ">= 1.5"),
        ("pmem_rust_vs_c", "Rust / C pmem IOPS at nowait=1", "rust_nowait1", "c_nowait1", "iops", ">= 1.0"),
        ("pmem_rust_vs_brd", "Rust nowait=1 / brd IOPS", "rust_nowait1", "brd", "iops", ">= 0.9"),
        ("pmem_ctx_ratio", "Rust ctx nowait=0 / nowait=1", "rust_nowait0", "rust_nowait1", "ctx", "(higher: fewer switches)"),
        ("pmem_c_nowait_ratio", "C nowait=1 / nowait=0 IOPS", "c_nowait1", "c_nowait0", "iops", "(reference x1.49)"),
        ("pmem_c_vs_brd", "C nowait=1 / brd IOPS", "c_nowait1", "brd", "iops", "(the C anchor)"),
    ],
    "nvme": [
        ("nvme_rust_vs_c", "Rust / C nvme IOPS", "nvme_rust", "nvme_c", "iops", ">= 1.0"),
        ("nvme_overflow_ratio", "overflow=1 / overflow=0 aggregate BW", "ovf_on", "ovf_off", "bw_mib", ">= 1.4"),
        ("nvme_fairness_overflow_on", "reader max/min, overflow=1", "ovf_on", None, "spread", "<= 1.10"),
        ("nvme_fairness_overflow_off", "reader max/min, overflow=0", "ovf_off", None, "spread", "(reference 1.39)"),
    ],
}


def parse(log):
    """Join the numbered chunks of each configuration and round into fio's jobs list."""
    chunks = {}  # (config, round) -> {chunk number: text}
    for line in Path(log).read_text(errors="replace").splitlines():
        line = line.rstrip("\r")
        if not line.startswith("BENCH "):
            continue
        _, cfg, rnd, num, text = line.split(" ", 4)
        chunks.setdefault((cfg, int(rnd)), {})[int(num)] = text
    runs = {}  # config -> round -> list of fio jobs
    for (cfg, rnd), parts in sorted(chunks.items()):
        payload = "".join(parts[i] for i in sorted(parts))
        runs.setdefault(cfg, {})[rnd] = json.loads(payload)["jobs"]
    return runs


def spread(values):
    return statistics.median(values), min(values), max(values)


def fmt(m, lo, hi):
    return f"{m:10.2f} [{lo:.2f}-{hi:.2f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("log")
    ap.add_argument("--part", choices=sorted(RATIOS), default="pmem")
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
        row = {key: spread([get(js) for js in per_round.values()]) for key, _, get in METRICS}
        table[cfg] = row
        print(f"{cfg:14}" + "".join(f"{fmt(*row[k]):>26}" for k, _, _ in METRICS))

    multi = {c: r for c, r in runs.items() if len(next(iter(r.values()))) > 1}
    for cfg, per_round in multi.items():
        names = [j["jobname"] for j in next(iter(per_round.values()))]
        print(f"\n{cfg}: per-reader read MiB/s, median [min-max] over rounds")
        for i, name in enumerate(names):
            m, lo, hi = spread([read_bw_mib(js[i]) for js in per_round.values()])
            print(f"  {name:10} {m:8.2f} [{lo:.2f}-{hi:.2f}]")

    out = Path(args.results)
    out.mkdir(exist_ok=True)
    bench_json = out / "bench.json"
    results = json.loads(bench_json.read_text()) if bench_json.exists() else {}
    results[f"{args.part}_table"] = {c: {k: round(v[0], 3) for k, v in r.items()} for c, r in table.items()}
    results[f"{args.part}_rounds"] = rounds

    print(f"\n{args.part}: ratios, per round then median [min-max]")
    labels, medians, lows, highs = [], [], [], []
    for key, label, num, den, metric, target in RATIOS[args.part]:
        if num not in runs or (den is not None and den not in runs):
            continue
        get = METRIC[metric]
        if den is None:
            values = [get(js) for js in runs[num].values()]
        else:
            values = [get(runs[num][r]) / max(get(runs[den][r]), 1e-9)
                      for r in sorted(runs[num]) if r in runs[den]]
        m, lo, hi = spread(values)
        results[key] = round(m, 3)
        results[key + "_min"] = round(lo, 3)
        results[key + "_max"] = round(hi, 3)
        print(f"  {label:40} {m:7.2f}  [{lo:.2f}-{hi:.2f}]  target {target}")
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

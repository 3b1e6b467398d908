#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarise a benchmark guest log (tests/guest/bench-*.sh) into tables, results/bench.json and
a chart per part.

The log has "BENCH <config> <round> <chunk> <fio json text>" lines (fio's JSON, chunked),
"STAT <config> <round> <8 /proc/stat cpu tick deltas>" lines and, for rust_nvme_mq, "QUEUES
<config> <round> <debugfs line>" lines. Every ratio is computed within one round (the
configurations alternate inside a round) and reduced to median [min-max] over the rounds.

    report.py LOG --part pmem|nvme|overflow|poll --mode icount|wall [--results DIR]
    report.py --compare A/bench.json B/bench.json ...   (determinism: every ratio side by side)
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

# Target per bench.json key: (comparison, value, text); comparison "ge"/"le", or None when the
# value is a reference only. The value may name another key (its measured median).
TARGETS = {
    "pmem_rust_vs_c": ("ge", 1.0, ">= 1.00"),
    "pmem_nowait_ratio": ("ge", "pmem_c_nowait_ratio", ">= C's gain (same boot)"),
    "pmem_c_nowait_ratio": (None, 1.49, "reference patch on hardware: 1.49"),
    "pmem_rust_vs_brd": ("ge", 0.9, ">= 0.90"),
    "pmem_c_vs_brd": (None, None, "the C anchor"),
    "pmem_ctx_ratio": (None, None, "fewer switches with nowait"),
    "nvme_rust_vs_c": ("ge", 1.0, ">= 1.00"),
    "nvme_pt_rust_vs_c": (None, None, "io_uring passthrough: C's cost over Rust's"),
    "nvme_pt_vs_block_rust": (None, None, "Rust: block path cost over passthrough's"),
    "nvme_pt_vs_block_c": (None, None, "C: block path cost over passthrough's"),
    "nvme_null_scaling": ("ge", 0.9, ">= 0.90 (device-bound)"),
    "nvme_skew_aggregate_ratio": ("ge", 1.3, ">= 1.30"),
    "nvme_skew_fairness_on": ("le", 1.10, "<= 1.10"),
    "nvme_skew_fairness_off": (None, 1.8, "~1.8 expected"),
    "nvme_deep_shallow_keep": ("ge", 0.90, ">= 0.90"),
    "nvme_deep_gain": ("ge", 2.0, ">= 2.00"),
    "nvme_fewq_aggregate_ratio": ("ge", 1.0, "> 1 (gain from the idle queue)"),
    "nvme_fewq_light_keep": ("ge", 0.90, ">= 0.90 (like (b))"),
}

RATIO_KEYS = list(TARGETS)


def parse(log):
    """-> runs {config: {round: fio jobs}}, stats {config: {round: tick deltas}}, queues."""
    chunks, stats, queues = {}, {}, {}
    for line in Path(log).read_text(errors="replace").splitlines():
        line = line.rstrip("\r")
        if line.startswith("BENCH "):
            _, cfg, rnd, num, text = line.split(" ", 4)
            chunks.setdefault((cfg, int(rnd)), {})[int(num)] = text
        elif line.startswith("STAT "):
            f = line.split()
            stats.setdefault(f[1], {})[int(f[2])] = [int(x) for x in f[3:11]]
        elif line.startswith("QUEUES "):
            _, cfg, rnd, text = line.split(" ", 3)
            queues.setdefault(cfg, {}).setdefault(int(rnd), []).append(text)
    runs = {}
    for (cfg, rnd), parts in sorted(chunks.items()):
        payload = "".join(parts[i] for i in sorted(parts))
        try:
            runs.setdefault(cfg, {})[rnd] = json.loads(payload)["jobs"]
        except (json.JSONDecodeError, KeyError) as e:
            sys.exit(f"bench report: {log}: the fio output of {cfg} round {rnd} is damaged ({e})")
    return runs, stats, queues


def busy_share(ticks):
    """user+nice+system+irq+softirq+steal over all ticks (idle and iowait are not busy)."""
    user, nice, system, idle, iowait, irq, softirq, steal = ticks
    total = sum(ticks)
    return (user + nice + system + irq + softirq + steal) / total if total else float("nan")


def iops(jobs):
    return sum(j["read"]["iops"] for j in jobs)


def reader_iops(jobs):
    return {j["jobname"]: j["read"]["iops"] for j in jobs}


def med(values):
    return statistics.median(values), min(values), max(values)


class Part:
    """Per-part metrics: per configuration per round, and ratios per round."""

    def __init__(self, runs, stats, mode, latency_ns):
        self.runs, self.stats, self.mode, self.latency_ns = runs, stats, mode, latency_ns

    def rounds(self, *cfgs):
        common = set.intersection(*(set(self.runs.get(c, {})) for c in cfgs))
        return sorted(common)

    def per_round(self, fn, *cfgs):
        """fn(round) for every round that has all cfgs."""
        return [fn(r) for r in self.rounds(*cfgs)]

    def instr_per_io(self, cfg, r, busy_only):
        """Guest instructions per I/O under icount: 1e9 guest ns per second / IOPS, times the
        busy share when idle time must not count (the NVMe CPU-cost part, 1 vCPU)."""
        v = 1e9 / max(iops(self.runs[cfg][r]), 1e-9)
        if busy_only and cfg in self.stats and r in self.stats[cfg]:
            v *= busy_share(self.stats[cfg][r])
        return v


def table(part, cfgs, extra=()):
    """Print per-configuration medians [min-max]; return {cfg: {metric: median}}."""
    metrics = [
        ("iops", "IOPS", lambda c, r, js: iops(js)),
        ("busy", "busy %", lambda c, r, js: 100 * busy_share(part.stats[c][r]) if r in part.stats.get(c, {}) else float("nan")),
        ("usr", "usr %", lambda c, r, js: statistics.mean(j["usr_cpu"] for j in js)),
        ("sys", "sys %", lambda c, r, js: statistics.mean(j["sys_cpu"] for j in js)),
        ("ctx", "ctx", lambda c, r, js: sum(j["ctx"] for j in js)),
        ("clat_us", "clat avg us", lambda c, r, js: statistics.mean(j["read"]["clat_ns"]["mean"] for j in js) / 1000),
    ] + list(extra)
    print(f"{'config':12}" + "".join(f"{h:>24}" for _, h, _ in metrics))
    out = {}
    for cfg in cfgs:
        if cfg not in part.runs:
            continue
        row = {}
        for key, _, fn in metrics:
            vals = [fn(cfg, r, js) for r, js in sorted(part.runs[cfg].items())]
            row[key] = med(vals)
        out[cfg] = {k: round(v[0], 3) for k, v in row.items()}
        cells = "".join(f"{v[0]:>11.1f} [{v[1]:.1f}-{v[2]:.1f}]".rjust(24) for v in row.values())
        print(f"{cfg:12}{cells}")
    return out


def ratios_pmem(p):
    def ratio(num, den, metric=iops):
        return lambda r: metric(p.runs[num][r]) / max(metric(p.runs[den][r]), 1e-9)

    def ctx(js):
        return sum(j["ctx"] for j in js)
    res = {
        "pmem_nowait_ratio": p.per_round(ratio("rust_nowait1", "rust_nowait0"), "rust_nowait1", "rust_nowait0"),
        "pmem_c_nowait_ratio": p.per_round(ratio("c_nowait1", "c_nowait0"), "c_nowait1", "c_nowait0"),
        "pmem_rust_vs_c": p.per_round(ratio("rust_nowait1", "c_nowait1"), "rust_nowait1", "c_nowait1"),
        "pmem_rust_vs_brd": p.per_round(ratio("rust_nowait1", "brd"), "rust_nowait1", "brd"),
        "pmem_c_vs_brd": p.per_round(ratio("c_nowait1", "brd"), "c_nowait1", "brd"),
        "pmem_ctx_ratio": p.per_round(ratio("rust_nowait0", "rust_nowait1", ctx), "rust_nowait0", "rust_nowait1"),
    }
    values = {}
    if p.mode == "icount":
        for key, cfg in (("pmem_instr_per_io_rust", "rust_nowait1"), ("pmem_instr_per_io_c", "c_nowait1"),
                         ("pmem_instr_per_io_rust_nowait0", "rust_nowait0"),
                         ("pmem_instr_per_io_c_nowait0", "c_nowait0"), ("pmem_instr_per_io_brd", "brd")):
            if cfg in p.runs:
                values[key] = [p.instr_per_io(cfg, r, False) for r in sorted(p.runs[cfg])]
    return res, values


# The NVMe CPU-cost part measures at full load: a run whose vCPU was busy less than this share of
# the time waited for QEMU's host threads (under icount that wait is skipped guest time, and
# the tick-sampled busy share cannot separate it), so it is reported and left out.
NVME_MIN_BUSY = 0.85


# io_uring passthrough on the generic devices, same load (optional in older results).
PT_CFGS = ("nvme_rust_pt", "nvme_c_pt")


def ratios_nvme(p):
    cfgs = ("nvme_rust", "nvme_c")
    values = {}
    if p.mode == "icount":
        def full_load(cfg, r):
            b = busy_share(p.stats.get(cfg, {}).get(r, [0] * 8))
            if b < NVME_MIN_BUSY:
                print(f"  round {r}: {cfg} was busy {100 * b:.0f}% < {100 * NVME_MIN_BUSY:.0f}%: not at full load "
                      f"(it waited for QEMU's host threads; a busy host?), left out")
                return False
            return True
        pt = all(c in p.runs for c in PT_CFGS)
        every = cfgs + (PT_CFGS if pt else ())
        valid = {r for r in p.rounds(*every) if all([full_load(c, r) for c in every])}

        def cost_ratio(a, b):  # cost of a over cost of b, per valid round
            return [p.instr_per_io(a, r, True) / p.instr_per_io(b, r, True) for r in sorted(valid)]
        # Busy guest instructions per I/O; the ratio is C's cost over Rust's (> 1: Rust cheaper).
        res = {"nvme_rust_vs_c": cost_ratio("nvme_c", "nvme_rust")}
        keys = [("nvme_instr_per_io_rust", "nvme_rust"), ("nvme_instr_per_io_c", "nvme_c")]
        if pt:
            res["nvme_pt_rust_vs_c"] = cost_ratio("nvme_c_pt", "nvme_rust_pt")
            res["nvme_pt_vs_block_rust"] = cost_ratio("nvme_rust", "nvme_rust_pt")
            res["nvme_pt_vs_block_c"] = cost_ratio("nvme_c", "nvme_c_pt")
            keys += [("nvme_instr_per_io_rust_pt", "nvme_rust_pt"), ("nvme_instr_per_io_c_pt", "nvme_c_pt")]
        for key, cfg in keys:
            values[key] = [p.instr_per_io(cfg, r, True) for r in sorted(valid)]
        if len(valid) < 3:
            print(f"  warning: only {len(valid)} of {len(p.rounds(*cfgs))} rounds at full load: rerun for a 3-round median")
    else:
        res = {"nvme_rust_vs_c": p.per_round(
            lambda r: iops(p.runs["nvme_rust"][r]) / iops(p.runs["nvme_c"][r]), *cfgs)}
    return res, values


def ratios_overflow(p):
    R = p.runs

    def agg(on, off):
        return p.per_round(lambda r: iops(R[on][r]) / iops(R[off][r]), on, off)

    def spread(cfg):
        return [max(v.values()) / max(min(v.values()), 1e-9) for v in map(reader_iops, R[cfg].values())]

    def keep(on, off, prefix):  # lowest per-reader on/off among the readers named prefix*
        def one(r):
            a, b = reader_iops(R[on][r]), reader_iops(R[off][r])
            return min(a[n] / max(b[n], 1e-9) for n in a if n.startswith(prefix))
        return p.per_round(one, on, off)

    def gain(on, off, name):
        return p.per_round(lambda r: reader_iops(R[on][r])[name] / max(reader_iops(R[off][r])[name], 1e-9), on, off)

    res = {}
    if "scale_hi" in R and "scale_lo" in R:
        # One reader per CPU at iodepth 15 vs 4: a device-bound run scales by 15/4.
        res["nvme_null_scaling"] = [x / (15 / 4) for x in agg("scale_hi", "scale_lo")]
    if "skew_on" in R and "skew_off" in R:
        res["nvme_skew_aggregate_ratio"] = agg("skew_on", "skew_off")
        res["nvme_skew_fairness_on"] = spread("skew_on")
        res["nvme_skew_fairness_off"] = spread("skew_off")
    if "deep_on" in R and "deep_off" in R:
        res["nvme_deep_shallow_keep"] = keep("deep_on", "deep_off", "shallow")
        res["nvme_deep_gain"] = gain("deep_on", "deep_off", "deep0")
    if "fewq_on" in R and "fewq_off" in R:
        res["nvme_fewq_aggregate_ratio"] = agg("fewq_on", "fewq_off")
        res["nvme_fewq_light_keep"] = keep("fewq_on", "fewq_off", "light")
    return res, {}


def ratios_poll(p):
    """Polled (io_uring --hipri on a poll queue) over interrupt-driven, per round: IOPS (> 1:
    polling faster) and mean completion latency (< 1: polling faster)."""
    cfgs = ("poll_hipri", "poll_irq")

    def clat(js):
        return statistics.mean(j["read"]["clat_ns"]["mean"] for j in js)

    res = {
        "poll_iops_ratio": p.per_round(lambda r: iops(p.runs["poll_hipri"][r]) / iops(p.runs["poll_irq"][r]), *cfgs),
        "poll_clat_ratio": p.per_round(lambda r: clat(p.runs["poll_hipri"][r]) / clat(p.runs["poll_irq"][r]), *cfgs),
    }
    values = {f"poll_clat_us_{c[5:]}": [clat(p.runs[c][r]) / 1000 for r in p.rounds(*cfgs)] for c in cfgs}
    return res, values


CONFIGS = {
    "pmem": ["rust_nowait0", "rust_nowait1", "c_nowait0", "c_nowait1", "brd"],
    "nvme": ["nvme_rust", "nvme_c", "nvme_rust_pt", "nvme_c_pt"],
    "overflow": ["scale_lo", "scale_hi", "skew_off", "skew_on", "deep_off", "deep_on", "fewq_off", "fewq_on"],
    "poll": ["poll_irq", "poll_hipri"],
}
PART_KEYS = {  # keys in bench.json each part writes (plus <key>_min, _max, _rounds, ...)
    "pmem": ["pmem_"],
    "nvme": ["nvme_rust_vs_c", "nvme_instr_per_io", "nvme_pt_"],
    "overflow": ["nvme_null_scaling", "nvme_skew", "nvme_deep", "nvme_fewq"],
    "poll": ["poll_"],
}
RATIOS = {"pmem": ratios_pmem, "nvme": ratios_nvme, "overflow": ratios_overflow, "poll": ratios_poll}


def target_value(key, results):
    cmp_, val, _ = TARGETS.get(key, (None, None, ""))
    if isinstance(val, str):
        val = results.get(val)
    return cmp_, val


def verdict(key, m, results):
    cmp_, val = target_value(key, results)
    if cmp_ is None or val is None:
        return ""
    ok = m >= val if cmp_ == "ge" else m <= val
    return "met" if ok else "NOT met"


def chart(path, title, left, ratios, results):
    """left: (title, {label: (median, lo, hi)}); ratios: {key: (median, lo, hi)} with targets."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no chart")
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 0.5 * max(len(ratios), len(left[1])) + 2.5))
    labels = list(left[1])
    vals = [left[1][k] for k in labels]
    ax1.barh(labels, [v[0] for v in vals], xerr=[[v[0] - v[1] for v in vals], [v[2] - v[0] for v in vals]],
             capsize=3)
    ax1.invert_yaxis()
    ax1.set_title(left[0], fontsize=10)
    keys = list(ratios)
    ms = [ratios[k][0] for k in keys]
    colors = []
    for k, m in zip(keys, ms):
        v = verdict(k, m, results)
        colors.append("tab:green" if v == "met" else "tab:red" if v else "tab:grey")
    ax2.barh(keys, ms, xerr=[[ratios[k][0] - ratios[k][1] for k in keys], [ratios[k][2] - ratios[k][0] for k in keys]],
             capsize=3, color=colors)
    for i, k in enumerate(keys):
        cmp_, val = target_value(k, results)
        if val is not None:
            ax2.plot([val, val], [i - 0.4, i + 0.4], color="black", linewidth=2)
            ax2.annotate(TARGETS[k][2], (val, i), xytext=(4, 6), textcoords="offset points", fontsize=7)
        ax2.annotate(f"{ms[i]:.3f}", (ms[i], i), xytext=(4, -10), textcoords="offset points", fontsize=7)
    ax2.invert_yaxis()
    ax2.axvline(1.0, color="grey", linewidth=0.6, linestyle=":")
    ax2.set_title("ratios: median [min-max] over rounds; black bar = target (green met, red not)", fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


def report(args):
    runs, stats, queues = parse(args.log)
    if not runs:
        sys.exit(f"bench report: no BENCH lines in {args.log} (did the guest run fail? see the log)")
    p = Part(runs, stats, args.mode, args.latency_ns)
    nrounds = min(len(v) for v in runs.values())
    print(f"\n{args.part} ({args.mode} mode): {nrounds} rounds, median [min-max] per configuration")
    extra = []
    if args.mode == "icount" and args.part in ("pmem", "nvme"):
        busy_only = args.part == "nvme"
        extra.append(("instr_io", "instr/I/O" + (" (busy)" if busy_only else ""),
                      lambda c, r, js: p.instr_per_io(c, r, busy_only)))
    if args.part == "overflow" and args.latency_ns:
        # Little's law: commands in flight = IOPS x latency.
        extra.append(("inflight", "in flight (IOPSxlat)", lambda c, r, js: iops(js) * args.latency_ns / 1e9))
    cfgs = [c for c in CONFIGS[args.part] if c in runs] + [c for c in runs if c not in CONFIGS[args.part]]
    tab = table(p, cfgs, extra)

    readers = {}
    for cfg in cfgs:
        first = next(iter(runs[cfg].values()))
        if len(first) > 1:
            print(f"\n{cfg}: per-reader IOPS, median [min-max] over rounds")
            for name in [j["jobname"] for j in first]:
                m = med([reader_iops(js)[name] for js in runs[cfg].values()])
                readers[f"{cfg} {name}"] = m
                print(f"  {name:10} {m[0]:9.1f} [{m[1]:.1f}-{m[2]:.1f}]")
    for cfg, per_round in queues.items():
        last = max(per_round)
        print(f"\n{cfg}: rust_nvme_mq queues after round {last}")
        for line in per_round[last]:
            print("  " + line)

    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    bench_json = out / "bench.json"
    results = json.loads(bench_json.read_text()) if bench_json.exists() else {}
    # Drop this part's keys from an earlier run (e.g. the other mode's instruction counts).
    for k in list(results):
        if any(k.startswith(o) for o in PART_KEYS[args.part]):
            del results[k]
    results[f"{args.part}_table"] = tab
    results[f"{args.part}_rounds"] = nrounds
    if args.part in ("pmem", "nvme"):
        results["bench_mode"] = args.mode
        results[f"{args.part}_mode"] = args.mode
    elif args.part == "poll":
        results["poll_mode"] = args.mode
    else:
        results["overflow_mode"] = f"wall, null-aio latency {args.latency_ns} ns"

    ratios, values = RATIOS[args.part](p)
    for key, vals in values.items():
        if vals:
            m = med(vals)
            results[key] = round(m[0], 1)
            print(f"  {key:34} {m[0]:9.1f} [{m[1]:.1f}-{m[2]:.1f}]")
    print(f"\n{args.part}: ratios per round, median [min-max]")
    meds = {}
    for key, vals in ratios.items():
        if not vals:
            continue
        m = med(vals)
        meds[key] = m
        results[key] = round(m[0], 4)
        results[key + "_min"] = round(m[1], 4)
        results[key + "_max"] = round(m[2], 4)
        results[key + "_rounds"] = [round(v, 4) for v in vals]
    for key, m in meds.items():
        print(f"  {key:28} {m[0]:7.3f} [{m[1]:.3f}-{m[2]:.3f}]  target {TARGETS.get(key, (0, 0, '-'))[2]}"
              f"  {verdict(key, m[0], results)}")
    bench_json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"\nwrote {bench_json}")

    if args.mode == "icount" and args.part in ("pmem", "nvme"):
        left = ("guest instructions per I/O (median, min-max)",
                {c: med([p.instr_per_io(c, r, args.part == "nvme") for r in runs[c]]) for c in cfgs})
    elif args.part == "overflow":
        left = ("per-reader IOPS (median, min-max)", readers)
    else:
        left = ("IOPS (median, min-max; wall clock, TCG)", {c: med([iops(js) for js in runs[c].values()]) for c in cfgs})
    chart(out / f"{args.part}.png", f"{args.part} ({results.get(args.part + '_mode', results.get('overflow_mode'))})",
          left, {k: v for k, v in meds.items() if k != "pmem_ctx_ratio"}, results)  # ~40: off scale


def compare(paths):
    """Every ratio of several bench.json files side by side, with the largest deviation from
    their median in percent."""
    sets = [json.loads(Path(p).read_text()) for p in paths]
    keys = [k for k in RATIO_KEYS + ["pmem_instr_per_io_rust", "pmem_instr_per_io_c", "nvme_instr_per_io_rust",
                                     "nvme_instr_per_io_c"] if any(k in s for s in sets)]
    print(f"{'key':32}" + "".join(f"{Path(p).parent.name:>14}" for p in paths) + f"{'max dev %':>11}")
    worst = 0.0
    for k in keys:
        vals = [s.get(k) for s in sets]
        nums = [v for v in vals if isinstance(v, (int, float))]
        dev = max(abs(v / statistics.median(nums) - 1) * 100 for v in nums) if nums else float("nan")
        worst = max(worst, dev)
        print(f"{k:32}" + "".join(f"{v:>14.4f}" if isinstance(v, (int, float)) else f"{'-':>14}" for v in vals)
              + f"{dev:>10.2f}%")
    print(f"largest deviation from the median: {worst:.2f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", nargs="?")
    ap.add_argument("--part", choices=sorted(RATIOS), default="pmem")
    ap.add_argument("--mode", choices=("icount", "wall"), default="icount",
                    help="how the guest ran: icount (time = guest instructions) or wall clock")
    ap.add_argument("--latency-ns", type=int, default=0, help="null-aio latency of the overflow part")
    ap.add_argument("--results", default="results")
    ap.add_argument("--compare", nargs="+", metavar="BENCH_JSON")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare)
    elif args.log:
        report(args)
    else:
        ap.error("give a LOG or --compare")


if __name__ == "__main__":
    main()

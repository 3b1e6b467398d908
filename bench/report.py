#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarise a benchmark guest log (tests/guest/bench-*.sh) into tables, results/bench.json and
a chart per part.

The log has "BENCH <config> <round> <chunk> <fio json text>" lines (fio's JSON, chunked),
"STAT <config> <round> <8 /proc/stat cpu tick deltas>" lines, "INFO <config> <round> setup
k=v ..." lines (the queue settings of the run: scheduler, hardware queues, iostats, nomerges,
shadow doorbells) and, for rust_nvme_mq, "QUEUES <config> <round> <debugfs line>" lines.
Every ratio is computed within one round (the configurations alternate inside a round) and
reduced to median [min-max] over the rounds; every driver ratio is printed with the setup of
both sides, and a difference in what the ratio does not name is reported as a warning.

    report.py LOG --part pmem|nvme|nvme2|nvme_raw|overflow|poll --mode icount|wall [--results DIR]
    report.py --compare A/bench.json B/bench.json ...   (determinism: every ratio side by side)
"""
import argparse
import datetime
import json
import subprocess
import statistics
import sys
from pathlib import Path

# Target per bench.json key: (comparison, value, text); comparison "ge"/"le", or None when the
# value is a reference only. The value may name another key (its measured median).
TARGETS = {
    "pmem_c_over_rust": ("ge", 0.97, ">= 0.97"),
    "pmem_c_over_rust_batched": ("ge", 1.0, ">= 1.00"),
    "pmem_nowait_ratio": ("ge", "pmem_c_nowait_ratio", ">= C's gain (same boot)"),
    "pmem_c_nowait_ratio": (None, 1.49, "reference patch on hardware: 1.49"),
    "pmem_rust_vs_brd": ("ge", 0.9, ">= 0.90"),
    "pmem_c_vs_brd": (None, None, "the C anchor"),
    "pmem_ctx_ratio": (None, None, "fewer switches with nowait"),
    "nvme_c_over_rust_none": ("ge", 1.0, ">= 1.00"),
    "nvme_c_over_rust_deadline": ("ge", 1.0, ">= 1.00"),
    "nvme_c_over_rust_none_2cpu": ("ge", 1.0, ">= 1.00"),
    "nvme_pt_c_over_rust": ("ge", 1.0, ">= 1.00"),
    "nvme_c_over_rust_batched": (None, None, "C's cost over Rust's, fio batches of 8"),
    "nvme_raw_c_over_rust_none": (None, None, "raw image (QEMU's I/O threads): second table"),
    "nvme_raw_c_over_rust_deadline": (None, None, "raw image (QEMU's I/O threads): second table"),
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
    global SETUP
    SETUP = {}
    for line in Path(log).read_text(errors="replace").splitlines():
        line = line.rstrip("\r")
        if line.startswith("INFO ") and len(line.split()) > 3 and line.split()[3] == "setup":
            f = line.split()
            SETUP.setdefault(f[1], {})[int(f[2])] = dict(kv.split("=", 1) for kv in f[4:] if "=" in kv)
        elif line.startswith("BENCH "):
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


# {config: {round: {setting: value}}} from the INFO setup lines of the log being reported.
SETUP = {}


def setup_of(cfg):
    """The settings of cfg, if every round had the same, else the differing values joined."""
    per = SETUP.get(cfg, {})
    out = {}
    for r in sorted(per):
        for k, v in per[r].items():
            out.setdefault(k, [])
            if v not in out[k]:
                out[k].append(v)
    return {k: "/".join(v) for k, v in out.items()}


def check_setup(key, a, b, named=()):
    """Print the setup of both sides of ratio key; warn on any difference not in named.
    -> {"a": {..}, "b": {..}, "differ": [settings that differ and are not named]}"""
    sa, sb = setup_of(a), setup_of(b)
    if not sa and not sb:
        print(f"  {key}: no setup lines in the log (an older guest script): sides not checked")
        return {}
    differ = sorted(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k) and k not in named)
    fields = sorted(set(sa) | set(sb))
    print(f"  {key}: {a} vs {b}: " + ", ".join(
        f"{k} {sa.get(k, '-')}" + ("" if sa.get(k) == sb.get(k) else f"/{sb.get(k, '-')}") for k in fields))
    if differ:
        print(f"  WARNING {key}: the sides differ in {', '.join(differ)}, which the ratio does not name")
    return {"a": sa, "b": sb, "differ": differ}


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

    def cost_c_over_rust(rust, c):  # instructions per I/O = 1e9 / IOPS: C's over Rust's = IOPS ratio
        return p.per_round(ratio(rust, c), rust, c)
    res = {
        "pmem_nowait_ratio": p.per_round(ratio("rust_nowait1", "rust_nowait0"), "rust_nowait1", "rust_nowait0"),
        "pmem_c_nowait_ratio": p.per_round(ratio("c_nowait1", "c_nowait0"), "c_nowait1", "c_nowait0"),
        "pmem_c_over_rust": cost_c_over_rust("rust_nowait1", "c_nowait1"),
        "pmem_rust_vs_brd": p.per_round(ratio("rust_nowait1", "brd"), "rust_nowait1", "brd"),
        "pmem_c_vs_brd": p.per_round(ratio("c_nowait1", "brd"), "c_nowait1", "brd"),
        "pmem_ctx_ratio": p.per_round(ratio("rust_nowait0", "rust_nowait1", ctx), "rust_nowait0", "rust_nowait1"),
    }
    if "rust_nowait1_b8" in p.runs and "c_nowait1_b8" in p.runs:
        res["pmem_c_over_rust_batched"] = cost_c_over_rust("rust_nowait1_b8", "c_nowait1_b8")
    print("\npmem: what the two sides of each driver ratio share (rust_pmem is blk-mq, nd_pmem bio-based: a"
          " bio-based disk has no hardware queues, no scheduler and no merging, so those differ by design)")
    setups = {}
    for key, a, b in (("pmem_c_over_rust", "rust_nowait1", "c_nowait1"),
                      ("pmem_c_over_rust_batched", "rust_nowait1_b8", "c_nowait1_b8")):
        if a in p.runs and b in p.runs:
            setups[key] = check_setup(key, a, b, named=("hwq", "sched", "nomerges"))
    values = {}
    if p.mode == "icount":
        for key, cfg in (("pmem_instr_per_io_rust", "rust_nowait1"), ("pmem_instr_per_io_c", "c_nowait1"),
                         ("pmem_instr_per_io_rust_nowait0", "rust_nowait0"),
                         ("pmem_instr_per_io_c_nowait0", "c_nowait0"), ("pmem_instr_per_io_brd", "brd"),
                         ("pmem_instr_per_io_rust_batched", "rust_nowait1_b8"),
                         ("pmem_instr_per_io_c_batched", "c_nowait1_b8")):
            if cfg in p.runs:
                values[key] = [p.instr_per_io(cfg, r, False) for r in sorted(p.runs[cfg])]
        for cfg in p.runs:
            b = [100 * busy_share(t) for t in p.stats.get(cfg, {}).values()]
            if b:
                values[f"pmem_busy_{cfg}"] = b
    return res, values, setups


# The NVMe CPU-cost parts measure at full load: a run whose vCPUs were busy less than this share
# of the time waited for QEMU's host threads (under icount that wait is skipped guest time, and
# the tick-sampled busy share cannot separate it), so its round is reported and left out of
# that ratio.
NVME_MIN_BUSY = 0.85

# Per NVMe part: the bench.json prefix and the driver ratios (key suffix, Rust config, C config,
# what the ratio names). Every ratio is C's busy instructions per I/O over Rust's (> 1: Rust
# cheaper), per round, over the rounds in which both sides were at full load.
NVME_PARTS = {
    # null-co namespace, 1 vCPU (one hardware queue each): the driver's own CPU cost.
    "nvme": ("nvme", [("c_over_rust_none", "rust_none", "c_none", "driver"),
                      ("c_over_rust_deadline", "rust_deadline", "c_deadline", "driver"),
                      ("pt_c_over_rust", "rust_pt", "c_pt", "driver, io_uring passthrough"),
                      ("c_over_rust_batched", "rust_none_b8", "c_none_b8", "driver, fio batches of 8")]),
    # null-co namespace, 2 vCPUs (two hardware queues each).
    "nvme2": ("nvme", [("c_over_rust_none_2cpu", "rust_none", "c_none", "driver")]),
    # the raw image: QEMU's I/O threads answer, the vCPU may wait (second table).
    "nvme_raw": ("nvme_raw", [("c_over_rust_none", "rust_none", "c_none", "driver"),
                              ("c_over_rust_deadline", "rust_deadline", "c_deadline", "driver")]),
}
NVME_SUFFIX = {"nvme": "", "nvme2": "_2cpu", "nvme_raw": ""}


def ratios_nvme(p, part):
    prefix, specs = NVME_PARTS[part]
    values, res, setups = {}, {}, {}

    def busy(cfg, r):
        return busy_share(p.stats.get(cfg, {}).get(r, [0] * 8))
    print(f"\n{part}: what the two sides of each ratio share")
    for suffix, rust, c, names in specs:
        if rust not in p.runs or c not in p.runs:
            continue
        key = f"{prefix}_{suffix}"
        setups[key] = check_setup(key, rust, c, named=("dbbuf_used",))
        rounds = p.rounds(rust, c)
        if p.mode != "icount":
            res[key] = [iops(p.runs[rust][r]) / iops(p.runs[c][r]) for r in rounds]
            continue
        kept = []
        for r in rounds:
            low = [f"{cfg} {100 * busy(cfg, r):.0f}%" for cfg in (rust, c) if busy(cfg, r) < NVME_MIN_BUSY]
            if low:
                print(f"  {key} round {r}: {', '.join(low)} busy < {100 * NVME_MIN_BUSY:.0f}%: not at full load"
                      " (waited for QEMU's host threads), left out")
            else:
                kept.append(r)
        res[key] = [p.instr_per_io(c, r, True) / p.instr_per_io(rust, r, True) for r in kept]
        # The same without the busy-share correction: plain IOPS, Rust's over C's, every round.
        res[key + "_iops"] = [iops(p.runs[rust][r]) / iops(p.runs[c][r]) for r in rounds]
        values[key + "_kept"] = f"{len(kept)}/{len(rounds)}"
        if len(kept) < 3:
            print(f"  warning: {key}: only {len(kept)} of {len(rounds)} rounds at full load: rerun for a 3-round median")
        if suffix.startswith("c_over_rust_none"):
            bs = [100 * busy(cfg, r) for r in kept for cfg in (rust, c)]
            if bs:
                values[f"{prefix}_busy_min_none{NVME_SUFFIX[part]}"] = round(min(bs), 1)
    if p.mode == "icount":
        for cfg in p.runs:
            values[f"{prefix}_instr_per_io{NVME_SUFFIX[part]}_{cfg}"] = [
                p.instr_per_io(cfg, r, True) for r in sorted(p.runs[cfg])]
    return res, values, setups


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
    return res, {}, {}


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
    return res, values, {}


NVME_CFGS = ["rust_none", "c_none", "rust_deadline", "c_deadline", "rust_pt", "c_pt", "rust_none_b8", "c_none_b8"]
CONFIGS = {
    "pmem": ["rust_nowait0", "rust_nowait1", "c_nowait0", "c_nowait1", "brd", "rust_nowait1_b8", "c_nowait1_b8"],
    "nvme": NVME_CFGS,
    "nvme2": NVME_CFGS,
    "nvme_raw": NVME_CFGS,
    "overflow": ["scale_lo", "scale_hi", "skew_off", "skew_on", "deep_off", "deep_on", "fewq_off", "fewq_on"],
    "poll": ["poll_irq", "poll_hipri"],
}
# Keys in bench.json each part writes, by prefix (an earlier run's keys of the part are dropped
# before the new ones go in). The NVMe parts share the "nvme_" prefix, so theirs are listed
# exactly (below, from NVME_PARTS); "legacy" keys are those of older bench versions.
PART_KEYS = {
    "pmem": ["pmem_"],
    "overflow": ["nvme_null_scaling", "nvme_skew", "nvme_deep", "nvme_fewq"],
    "poll": ["poll_"],
}
LEGACY_NVME_KEYS = ["nvme_rust_vs_c", "nvme_instr_per_io_rust", "nvme_instr_per_io_c", "nvme_pt_rust_vs_c",
                    "nvme_pt_vs_block_"]


def stale(part, key):
    """Is key one that an earlier run of part wrote (to be replaced by this run's)?"""
    if part not in NVME_PARTS:
        return any(key.startswith(o) for o in PART_KEYS[part])
    if part == "nvme" and any(key.startswith(k) for k in LEGACY_NVME_KEYS):
        return True
    if key in (f"{part}_table", f"{part}_rounds", f"{part}_mode"):
        return True
    prefix, specs = NVME_PARTS[part]
    sfx = NVME_SUFFIX[part]
    own = [f"{prefix}_{s[0]}" for s in specs] + [f"{prefix}_busy_min_none{sfx}"]
    mine = any(key == o or key.startswith(o + "_") for o in own) or key.startswith(f"{prefix}_instr_per_io{sfx}_")
    # The 1-vCPU part's names are prefixes of the 2-vCPU part's (nvme_c_over_rust_none[_2cpu]).
    return mine and (sfx != "" or "_2cpu" not in key)


RATIOS = {"pmem": ratios_pmem, "nvme": lambda p: ratios_nvme(p, "nvme"), "nvme2": lambda p: ratios_nvme(p, "nvme2"),
          "nvme_raw": lambda p: ratios_nvme(p, "nvme_raw"), "overflow": ratios_overflow, "poll": ratios_poll}


def git_head():
    """The commit of the checkout this script is in (with "+dirty" if it has changes)."""
    top = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(top), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(top), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


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
    if args.mode == "icount" and (args.part == "pmem" or args.part in NVME_PARTS):
        busy_only = args.part in NVME_PARTS
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
        if stale(args.part, k):
            del results[k]
    results[f"{args.part}_table"] = tab
    results[f"{args.part}_rounds"] = nrounds
    # Which drivers and when: bench.json gathers parts of several runs.
    results[f"{args.part}_measured"] = {"date": datetime.datetime.fromtimestamp(Path(args.log).stat().st_mtime,
                                                                              datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                                        "commit": args.commit or git_head()}
    if args.part == "pmem" or args.part in NVME_PARTS:
        results["bench_mode"] = args.mode
        results[f"{args.part}_mode"] = args.mode
    elif args.part == "poll":
        results["poll_mode"] = args.mode
    else:
        results["overflow_mode"] = f"wall, null-aio latency {args.latency_ns} ns"

    ratios, values, setups = RATIOS[args.part](p)
    for key, setup in setups.items():
        if setup:
            results[key + "_setup"] = {"rust": setup["a"], "c": setup["b"], "differ": setup["differ"]}
    for key, vals in values.items():
        if isinstance(vals, (str, int, float)):
            results[key] = vals
            print(f"  {key:34} {vals}")
        elif vals:
            m = med(vals)
            results[key] = round(m[0], 1)
            print(f"  {key:34} {m[0]:9.1f} [{m[1]:.1f}-{m[2]:.1f}]")
    print(f"\n{args.part}: ratios per round, median [min-max] (cost ratios: C's instructions per I/O over Rust's,"
          " > 1: Rust cheaper)")
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

    if args.mode == "icount" and (args.part == "pmem" or args.part in NVME_PARTS):
        left = ("guest instructions per I/O (median, min-max)",
                {c: med([p.instr_per_io(c, r, args.part in NVME_PARTS) for r in runs[c]]) for c in cfgs})
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
    keys = [k for k in RATIO_KEYS + ["pmem_instr_per_io_rust", "pmem_instr_per_io_c", "nvme_instr_per_io_rust_none",
                                     "nvme_instr_per_io_c_none"] if any(k in s for s in sets)]
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
    ap.add_argument("--commit", help="the commit whose drivers were measured (default: this checkout's HEAD)")
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

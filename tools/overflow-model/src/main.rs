// SPDX-License-Identifier: GPL-2.0

//! A discrete-event model of rust_nvme_mq's queue selection and lending (overflow), run on the
//! host with the driver's own policy code: `rust_nvme_mq/policy.rs` is compiled into this
//! program as it is (the `#[path]` module below), so the model's bounded search and reserve
//! rule are the driver's.
//!
//! The machine: `n` CPUs, one I/O queue each (the queue's interrupt goes to its CPU), 15 slots
//! per queue (io_queue_depth=16, as in the guest bench). The device runs every command it has
//! in parallel and completes it after a fixed service time (100 us, +-10% uniform jitter), like
//! QEMU's null-aio with latency-ns: a reader's throughput is its commands in flight / latency.
//! Readers are fio-like: each keeps `iodepth` requests and resubmits a request from its CPU as
//! soon as it completed. Each CPU is one serial server: a submission attempt costs
//! `SUBMIT_NS` plus `LOCK_NS` per queue lock taken plus `PEEK_NS` per queue whose counters were
//! read; a completion costs `COMPLETE_NS` on the CPU of the queue the command went to. A
//! request no queue takes stays on its CPU's dispatch list (blk-mq `BLK_STS_RESOURCE`) and is
//! retried when one of that CPU's requests completes, or after 3 ms when none is in flight.
//! Lock waits (contention) are not modelled: the lock costs are the uncontended ones, which
//! understates the linear scan's cost on a real many-CPU machine.
//!
//! Policies: `off` (overflow=0: the home queue only), `linear` (the scan of every queue in
//! turn, `policy::queue_order`) and `bounded` (the home queue, then `policy::lenders`: at most
//! `policy::TRIES` of `policy::PEEKS` queues looked at by their counters).
//!
//! Loads (every reader iodepth 8): `one_hot` CPU 0 runs 3 readers (24 requests for 15
//! slots), every other CPU one; `half_hot` the first half of the CPUs run 2 readers each (16
//! for 15), the others one; `all_hot` every CPU runs 2 readers (no queue has slots to lend);
//! `half_deep` (the guest bench's deep load, spread) the first half of the CPUs run one
//! reader of iodepth 32 each, the others one of iodepth 4 (what the reserve protects). The
//! home readers are the readers of the CPUs that are not hot (all readers for `all_hot`).
//!
//! Figures, over the submissions whose home queue refused ("overflowing"): queue locks taken
//! (the home queue's included) and queues probed (locked, or their counters read), mean and
//! 99th percentile; over the readers: fairness, the largest over the readers of equal iodepth
//! of max/min IOPS; home keep, the home readers' IOPS with the policy / with overflow off.
//! The counters a CPU reads without a lock are `STALE_NS` old (other CPUs' changes since are
//! not seen), so the bounded search sometimes locks a queue that no longer lends.

#[path = "../../../rust_nvme_mq/policy.rs"]
mod policy;

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt::Write as _;

/// The policy source compiled in, to show it is the driver's (`--policy-hash`).
const POLICY_SRC: &str = include_str!("../../../rust_nvme_mq/policy.rs");

const SLOTS: usize = 15;
const DEPTH: usize = 8;
/// The deep and shallow readers of `half_deep` (the guest bench's deep load, spread).
const DEEP: usize = 32;
const SHALLOW: usize = 4;
const LATENCY_NS: u64 = 100_000;
const JITTER: f64 = 0.10;
const SUBMIT_NS: u64 = 1_000;
const COMPLETE_NS: u64 = 500;
const LOCK_NS: u64 = 100;
const PEEK_NS: u64 = 50;
/// How old the counters are that a CPU reads without the lock (other CPUs' recent changes
/// are not seen yet).
const STALE_NS: u64 = 2_000;
const RESTART_NS: u64 = 3_000_000;
const WARMUP_NS: u64 = 5_000_000;
const END_NS: u64 = 35_000_000;

/// The targets of the bounded policy at 256 queues (issue 30).
const TARGET_LOCKS_MEAN: f64 = 2.0;
const TARGET_LOCKS_P99: usize = 4;
const TARGET_FAIRNESS: f64 = 1.10;
const TARGET_HOME_KEEP: f64 = 0.90;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    Off,
    Linear,
    Bounded,
}

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::Off => "off",
            Policy::Linear => "linear",
            Policy::Bounded => "bounded",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Load {
    OneHot,
    HalfHot,
    AllHot,
    HalfDeep,
}

const LOADS: [Load; 4] = [Load::OneHot, Load::HalfHot, Load::AllHot, Load::HalfDeep];

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::OneHot => "one_hot",
            Load::HalfHot => "half_hot",
            Load::AllHot => "all_hot",
            Load::HalfDeep => "half_deep",
        }
    }

    /// The readers on `cpu` of `n`: how many, their iodepth, and whether `cpu` is hot.
    fn readers(self, cpu: usize, n: usize) -> (usize, usize, bool) {
        match self {
            Load::OneHot if cpu == 0 => (3, DEPTH, true),
            Load::HalfHot if cpu < n / 2 => (2, DEPTH, true),
            Load::AllHot => (2, DEPTH, true),
            Load::HalfDeep if cpu < n / 2 => (1, DEEP, true),
            Load::HalfDeep => (1, SHALLOW, false),
            _ => (1, DEPTH, false),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Ev {
    /// A reader's request is handed to its CPU's dispatch list.
    Submit { cpu: usize, req: usize },
    /// The 3 ms rerun of a CPU's dispatch list.
    Timer { cpu: usize },
    /// The device completed `req` on `queue`: the interrupt on the queue's CPU.
    Complete { queue: usize, req: usize },
}

/// A queue as the lock sees it, and its counters as other CPUs read them without the lock.
struct Queue {
    free: Cell<usize>,
    submitted: Cell<u64>,
    completed: Cell<u64>,
    /// The counters' changes of the last `STALE_NS` (time, submitted, completed), and their
    /// values before those: what another CPU reading them without the lock sees.
    changes: RefCell<VecDeque<(u64, u64, u64)>>,
    seen: Cell<(u64, u64)>,
    /// Own requests that found the queue full (the driver's `full` counter): the seed.
    full: Cell<u64>,
}

impl Queue {
    /// The counters changed at `t`.
    fn note(&self, t: u64) {
        self.changes
            .borrow_mut()
            .push_back((t, self.submitted.get(), self.completed.get()));
        self.seen_at(t);
    }

    /// The counters as a CPU reading them at `t` sees them: as they were `STALE_NS` before.
    fn seen_at(&self, t: u64) -> (u64, u64) {
        let cut = t.saturating_sub(STALE_NS);
        let mut changes = self.changes.borrow_mut();
        while let Some(&(_, s, c)) = changes.front().filter(|e| e.0 <= cut) {
            self.seen.set((s, c));
            changes.pop_front();
        }
        self.seen.get()
    }
}

struct Cpu {
    busy_until: u64,
    pending: VecDeque<usize>,
    /// Requests of this CPU's context in flight (on any queue).
    in_flight: usize,
    timer: bool,
}

struct Req {
    reader: usize,
    cpu: usize,
}

/// What one run measured (after the warm-up).
struct Outcome {
    /// Completions per reader.
    done: Vec<u64>,
    /// Each reader's iodepth.
    depth: Vec<usize>,
    /// Whether each reader is a home reader.
    home: Vec<bool>,
    /// Histograms over overflowing submissions (the home queue refused): locks taken and
    /// queues probed (locked or counters read).
    locks: Vec<u64>,
    probes: Vec<u64>,
    /// Overflowing submissions that got a slot elsewhere.
    placed: u64,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Sim {
    policy: Policy,
    queues: Vec<Queue>,
    cpus: Vec<Cpu>,
    reqs: Vec<Req>,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    rng: u64,
    out: Outcome,
}

impl Sim {
    fn new(n: usize, load: Load, policy: Policy) -> Self {
        let queues = (0..n)
            .map(|_| Queue {
                free: Cell::new(SLOTS),
                submitted: Cell::new(0),
                completed: Cell::new(0),
                changes: RefCell::new(VecDeque::new()),
                seen: Cell::new((0, 0)),
                full: Cell::new(0),
            })
            .collect();
        let cpus = (0..n)
            .map(|_| Cpu {
                busy_until: 0,
                pending: VecDeque::new(),
                in_flight: 0,
                timer: false,
            })
            .collect();
        let mut sim = Sim {
            policy,
            queues,
            cpus,
            reqs: Vec::new(),
            events: BinaryHeap::new(),
            seq: 0,
            rng: 0x5eed ^ (n as u64) << 8,
            out: Outcome {
                done: Vec::new(),
                depth: Vec::new(),
                home: Vec::new(),
                locks: vec![0; n + 2],
                probes: vec![0; n + 2],
                placed: 0,
            },
        };
        for cpu in 0..n {
            let (readers, depth, hot) = load.readers(cpu, n);
            for _ in 0..readers {
                let reader = sim.out.done.len();
                sim.out.done.push(0);
                sim.out.depth.push(depth);
                sim.out.home.push(!hot || load == Load::AllHot);
                for _ in 0..depth {
                    let req = sim.reqs.len();
                    sim.reqs.push(Req { reader, cpu });
                    sim.push(reader as u64, Ev::Submit { cpu, req });
                }
            }
        }
        sim
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, ev)));
    }

    fn latency(&mut self) -> u64 {
        let u = (splitmix(&mut self.rng) >> 11) as f64 / (1u64 << 53) as f64;
        (LATENCY_NS as f64 * (1.0 - JITTER + 2.0 * JITTER * u)) as u64
    }

    fn run(mut self) -> Outcome {
        while let Some(Reverse((t, _, ev))) = self.events.pop() {
            if t >= END_NS {
                break;
            }
            let cpu = match ev {
                Ev::Submit { cpu, .. } | Ev::Timer { cpu } => cpu,
                Ev::Complete { queue, .. } => queue,
            };
            if self.cpus[cpu].busy_until > t {
                let at = self.cpus[cpu].busy_until;
                self.push(at, ev);
                continue;
            }
            let end = match ev {
                Ev::Submit { cpu, req } => {
                    self.cpus[cpu].pending.push_back(req);
                    self.dispatch(cpu, t)
                }
                Ev::Timer { cpu } => {
                    self.cpus[cpu].timer = false;
                    self.dispatch(cpu, t)
                }
                Ev::Complete { queue, req } => {
                    let q = &self.queues[queue];
                    q.free.set(q.free.get() + 1);
                    q.completed.set(q.completed.get() + 1);
                    q.note(t);
                    let Req { reader, cpu: owner } = self.reqs[req];
                    self.cpus[owner].in_flight -= 1;
                    if t >= WARMUP_NS {
                        self.out.done[reader] += 1;
                    }
                    let end = t + COMPLETE_NS;
                    self.push(end, Ev::Submit { cpu: owner, req });
                    end
                }
            };
            self.cpus[cpu].busy_until = end;
        }
        self.out
    }

    /// Run `cpu`'s dispatch list from time `t` until it is empty or a request finds no slot;
    /// returns when the CPU is done.
    fn dispatch(&mut self, cpu: usize, t: u64) -> u64 {
        let mut now = t;
        while let Some(&req) = self.cpus[cpu].pending.front() {
            let (placed, locks, peeks) = self.attempt(cpu, now);
            now += SUBMIT_NS + locks as u64 * LOCK_NS + peeks as u64 * PEEK_NS;
            // Overflowing: the home queue refused (one lock, and a search if any).
            let overflowing = locks > 1 || peeks > 0 || (placed.is_none() && locks == 1);
            if overflowing && t >= WARMUP_NS {
                let top = self.out.locks.len() - 1;
                self.out.locks[locks.min(top)] += 1;
                let probes = 1 + peeks.max(locks - 1);
                self.out.probes[probes.min(top)] += 1;
                if placed.is_some() {
                    self.out.placed += 1;
                }
            }
            match placed {
                Some(queue) => {
                    self.cpus[cpu].pending.pop_front();
                    self.cpus[cpu].in_flight += 1;
                    let at = now + self.latency();
                    self.push(at, Ev::Complete { queue, req });
                }
                None => {
                    if self.cpus[cpu].in_flight == 0 && !self.cpus[cpu].timer {
                        self.cpus[cpu].timer = true;
                        self.push(now + RESTART_NS, Ev::Timer { cpu });
                    }
                    break;
                }
            }
        }
        now
    }

    /// One submission from `cpu` (whose home queue is queue `cpu`) under the policy: the
    /// queue that took it, locks taken, queues whose counters were read.
    fn attempt(&self, cpu: usize, now: u64) -> (Option<usize>, usize, usize) {
        let n = self.queues.len();
        let home = cpu;
        let queues = &self.queues;
        let mut locks = 0;
        let peeks = Cell::new(0usize);
        // The lock and the lending rule (queue.rs `claim`, queueset.rs `origin`).
        let mut take = |q: usize| {
            locks += 1;
            let queue = &queues[q];
            let free = queue.free.get();
            let admits = if q == home {
                free > 0
            } else {
                free > policy::lend_reserve(SLOTS)
            };
            if admits {
                queue.free.set(free - 1);
                queue.submitted.set(queue.submitted.get() + 1);
                queue.note(now);
            } else if q == home {
                queue.full.set(queue.full.get() + 1);
            }
            admits
        };
        let placed = match self.policy {
            Policy::Off => core::iter::once(home).find(|&q| take(q)),
            Policy::Linear => policy::queue_order(home, n, true).find(|&q| take(q)),
            Policy::Bounded => {
                // As `QueueSet::submit`: the home queue, then the lenders found once it refused.
                core::iter::once(home).find(|&q| take(q)).or_else(|| {
                    let spare = |q: usize| {
                        peeks.set(peeks.get() + 1);
                        let (submitted, completed) = queues[q].seen_at(now);
                        policy::spare(SLOTS, submitted, completed)
                    };
                    policy::lenders(home, n, queues[home].full.get(), spare).find(|&q| take(q))
                })
            }
        };
        (placed, locks, peeks.get())
    }
}

/// The figures of one (queues, load, policy).
#[derive(Clone, Copy, Debug)]
struct Figures {
    locks_mean: f64,
    locks_p99: usize,
    probes_mean: f64,
    probes_p99: usize,
    /// Overflowing submissions per completed request, and the share of them placed.
    overflow_rate: f64,
    placed: f64,
    fairness: f64,
    home_keep: f64,
    kiops: f64,
}

fn mean_p99(hist: &[u64]) -> (f64, usize) {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return (0.0, 0);
    }
    let sum: u64 = hist.iter().enumerate().map(|(i, &c)| i as u64 * c).sum();
    let mut seen = 0;
    let mut p99 = 0;
    for (i, &c) in hist.iter().enumerate() {
        seen += c;
        if seen * 100 >= total * 99 {
            p99 = i;
            break;
        }
    }
    (sum as f64 / total as f64, p99)
}

fn figures(o: &Outcome, off: &Outcome) -> Figures {
    let (locks_mean, locks_p99) = mean_p99(&o.locks);
    let (probes_mean, probes_p99) = mean_p99(&o.probes);
    let overflowing: u64 = o.locks.iter().sum();
    let total: u64 = o.done.iter().sum();
    // Among the readers of each iodepth, the worst.
    let fairness = o
        .depth
        .iter()
        .map(|&d| {
            let of_d = || {
                o.done
                    .iter()
                    .zip(&o.depth)
                    .filter(|(_, &e)| e == d)
                    .map(|(&x, _)| x)
            };
            of_d().max().unwrap_or(0) as f64 / (of_d().min().unwrap_or(0) as f64).max(1.0)
        })
        .fold(1.0, f64::max);
    let home = |x: &Outcome| -> u64 {
        x.done
            .iter()
            .zip(&x.home)
            .filter(|(_, &h)| h)
            .map(|(d, _)| d)
            .sum()
    };
    Figures {
        locks_mean,
        locks_p99,
        probes_mean,
        probes_p99,
        overflow_rate: overflowing as f64 / total.max(1) as f64,
        placed: o.placed as f64 / overflowing.max(1) as f64,
        fairness,
        home_keep: home(o) as f64 / home(off).max(1) as f64,
        kiops: total as f64 / ((END_NS - WARMUP_NS) as f64 / 1e9) / 1e3,
    }
}

/// Every policy's figures for `n` queues under `load`: (policy, figures), `off` first.
fn model(n: usize, load: Load) -> Vec<(Policy, Figures)> {
    let off = Sim::new(n, load, Policy::Off).run();
    [Policy::Off, Policy::Linear, Policy::Bounded]
        .into_iter()
        .map(|p| {
            let o = if p == Policy::Off {
                None
            } else {
                Some(Sim::new(n, load, p).run())
            };
            (p, figures(o.as_ref().unwrap_or(&off), &off))
        })
        .collect()
}

/// FNV-1a 64 of the policy source compiled in.
fn policy_hash() -> u64 {
    POLICY_SRC.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn usage() -> String {
    "Usage: overflow-model [--queues N[,N...]] [--table|--markdown|--keys|--check] [--policy-hash] [--help]

Simulates rust_nvme_mq's overflow (queue selection and lending) with the driver's own policy
code (rust_nvme_mq/policy.rs) for N CPUs with one queue each (default 16,64,256), under four
loads (one_hot, half_hot, all_hot, half_deep), with overflow off, the linear scan and the bounded search.
  --table      one line of figures per queues/load/policy (default)
  --markdown   the same as a Markdown table (docs/overflow-model.md)
  --keys       KEY VALUE lines for results/bench.json: the worst load's figures at 256 queues
               (--queues is ignored)
  --check      PASS/FAIL lines overflow_model_* for the targets at 256 queues (--queues is
               ignored)
  --policy-hash  FNV-1a 64 (hex) of the policy source compiled in, and its length
"
    .to_string()
}

/// One (queues, load) and every policy's figures there.
type Row = (usize, Load, Vec<(Policy, Figures)>);

/// The figure of the worst load at `n` queues for `policy`, by `f`, largest being worst.
fn worst(all: &[Row], n: usize, policy: Policy, f: &dyn Fn(&Figures) -> f64) -> (f64, Load) {
    let mut w = (f64::MIN, Load::OneHot);
    for (q, l, v) in all {
        for (p, fig) in v {
            if *q == n && *p == policy && f(fig) > w.0 {
                w = (f(fig), *l);
            }
        }
    }
    w
}

fn main() {
    let mut sizes = vec![16usize, 64, 256];
    let mut mode = "table";
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--help" | "-h" => {
                print!("{}", usage());
                return;
            }
            "--queues" => {
                let v = args.next().unwrap_or_default();
                sizes = v
                    .split(',')
                    .filter_map(|s| s.parse().ok())
                    .filter(|&n| n >= 1)
                    .collect();
                if sizes.is_empty() {
                    eprintln!("overflow-model: --queues needs numbers >= 1, got '{v}'");
                    std::process::exit(2);
                }
            }
            "--table" => mode = "table",
            "--markdown" => mode = "markdown",
            "--keys" => mode = "keys",
            "--check" => mode = "check",
            "--policy-hash" => {
                println!("{:016x} {}", policy_hash(), POLICY_SRC.len());
                return;
            }
            _ => {
                eprintln!("overflow-model: unknown argument '{a}'\n{}", usage());
                std::process::exit(2);
            }
        }
    }
    if matches!(mode, "keys" | "check") {
        // Their figures are those at 256 queues.
        sizes = vec![256];
    }
    let all: Vec<_> = sizes
        .iter()
        .flat_map(|&n| LOADS.iter().map(move |&l| (n, l)))
        .map(|(n, l)| (n, l, model(n, l)))
        .collect();
    match mode {
        "table" => {
            for (n, l, v) in &all {
                for (p, f) in v {
                    println!(
                        "queues={n} load={} policy={} locks_mean={:.4} locks_p99={} probes_mean={:.2} probes_p99={} overflow_per_io={:.3} placed={:.3} fairness={:.3} home_keep={:.3} kiops={:.0}",
                        l.name(), p.name(), f.locks_mean, f.locks_p99, f.probes_mean, f.probes_p99,
                        f.overflow_rate, f.placed, f.fairness, f.home_keep, f.kiops
                    );
                }
            }
        }
        "markdown" => {
            let mut s = String::new();
            let _ = writeln!(s, "| queues | load | policy | locks/overflowing submission mean | p99 | queues probed mean | p99 | overflowing submissions per I/O | placed elsewhere | fairness max/min | home readers keep | total kIOPS |");
            let _ = writeln!(
                s,
                "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for (n, l, v) in &all {
                for (p, f) in v {
                    let _ = writeln!(
                        s,
                        "| {n} | {} | {} | {:.2} | {} | {:.2} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} |",
                        l.name(), p.name(), f.locks_mean, f.locks_p99, f.probes_mean, f.probes_p99,
                        f.overflow_rate, f.placed, f.fairness, f.home_keep, f.kiops
                    );
                }
            }
            print!("{s}");
        }
        "keys" => {
            for (p, suffix) in [(Policy::Bounded, ""), (Policy::Linear, "_linear")] {
                let (m, _) = worst(&all, 256, p, &|f| f.locks_mean);
                let (p99, _) = worst(&all, 256, p, &|f| f.locks_p99 as f64);
                let (fair, _) = worst(&all, 256, p, &|f| f.fairness);
                let (keep, _) = worst(&all, 256, p, &|f| -f.home_keep);
                println!("overflow_model_locks_mean_256{suffix} {m:.3}");
                println!("overflow_model_locks_p99_256{suffix} {p99:.0}");
                println!("overflow_model_fairness_256{suffix} {fair:.4}");
                println!("overflow_model_home_keep_256{suffix} {:.4}", -keep);
            }
        }
        _ => {
            let at = |p, f: &dyn Fn(&Figures) -> f64| worst(&all, 256, p, f);
            let (m, ml) = at(Policy::Bounded, &|f| f.locks_mean);
            let (p99, pl) = at(Policy::Bounded, &|f| f.locks_p99 as f64);
            let (lm, _) = at(Policy::Linear, &|f| f.locks_mean);
            let (lp99, _) = at(Policy::Linear, &|f| f.locks_p99 as f64);
            let ok = m <= TARGET_LOCKS_MEAN && p99 <= TARGET_LOCKS_P99 as f64;
            println!(
                "{} overflow_model_locks_256 (bounded, worst load: mean {m:.4} ({}) <= {TARGET_LOCKS_MEAN}, p99 {p99:.0} ({}) <= {TARGET_LOCKS_P99}; linear scan: mean {lm:.2}, p99 {lp99:.0})",
                if ok { "PASS" } else { "FAIL" }, ml.name(), pl.name()
            );
            let (fair, fl) = at(Policy::Bounded, &|f| f.fairness);
            let (lfair, _) = at(Policy::Linear, &|f| f.fairness);
            println!(
                "{} overflow_model_fairness_256 (bounded, worst load: max/min per-reader IOPS {fair:.3} ({}) <= {TARGET_FAIRNESS}; linear scan: {lfair:.3})",
                if fair <= TARGET_FAIRNESS { "PASS" } else { "FAIL" }, fl.name()
            );
            let (keep, kl) = at(Policy::Bounded, &|f| -f.home_keep);
            let (lkeep, _) = at(Policy::Linear, &|f| -f.home_keep);
            println!(
                "{} overflow_model_home_keep_256 (bounded, worst load: home readers keep {:.3} ({}) >= {TARGET_HOME_KEEP} of their overflow=0 IOPS; linear scan: {:.3})",
                if -keep >= TARGET_HOME_KEEP { "PASS" } else { "FAIL" }, -keep, kl.name(), -lkeep
            );
        }
    }
}

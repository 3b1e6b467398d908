// SPDX-License-Identifier: GPL-2.0

//! Which queues a request tries, and how many slots a queue lends: the queue set's overflow
//! policy as pure functions of plain numbers, free of kernel types, so that the host model
//! (`tools/overflow-model`, run by `make test` and `make bench`) compiles this very file and
//! simulates 16 to 256 queues with it.
//!
//! A request tries its home queue first. When that is full, the linear scan
//! ([`queue_order`]) tries every other queue in turn, each under its lock: with many queues
//! and all of them busy that is one lock round trip per queue for every submission. The
//! bounded search ([`tries`]) instead reads the counters of at most [`PEEKS`] other queues
//! without their locks, spread over the queues from a position that changes with every
//! search, and locks at most [`TRIES`] of them, those whose counters say they lend most
//! first. The counters may be stale: the lock decides, with the reserve rule, and a request
//! no queue takes goes back to blk-mq, which retries it.

/// How many other queues a bounded search looks at, by their counters (no lock).
pub(crate) const PEEKS: usize = 4;

/// How many of those a bounded search tries under their locks.
pub(crate) const TRIES: usize = 2;

/// How many of a queue's `slots` it keeps for requests of its own CPUs (those whose home it
/// is): a quarter, rounded up.
pub(crate) fn lend_reserve(slots: usize) -> usize {
    slots.div_ceil(4)
}

/// How many slots a queue of `slots` slots would lend, judged from its counters of commands
/// `submitted` and `completed` (read without the queue's lock, so possibly stale): the free
/// slots beyond its reserve.
pub(crate) fn spare(slots: usize, submitted: u64, completed: u64) -> usize {
    let in_flight = usize::try_from(submitted.saturating_sub(completed)).unwrap_or(usize::MAX);
    slots
        .saturating_sub(in_flight)
        .saturating_sub(lend_reserve(slots))
}

/// The linear scan: the order in which queues are tried for a request from `home`, the home
/// queue, then, with `overflow`, the others round robin.
pub(crate) fn queue_order(
    home: usize,
    nr_queues: usize,
    overflow: bool,
) -> impl Iterator<Item = usize> {
    let tries = if overflow { nr_queues } else { 1 };
    (0..tries).map(move |i| (home + i) % nr_queues.max(1))
}

/// A 64-bit mix of `x` (the SplitMix64 finalizer): consecutive values give unrelated results.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The queues a bounded search looks at for a request from `home`, out of `nr_queues`: at
/// most [`PEEKS`] others, evenly spaced around the queues from an offset that `seed` picks.
/// Every other queue when there are at most [`PEEKS`] of them.
pub(crate) fn peeks(home: usize, nr_queues: usize, seed: u64) -> impl Iterator<Item = usize> {
    let others = nr_queues.saturating_sub(1);
    let n = others.min(PEEKS);
    let step = others.checked_div(n).unwrap_or(0);
    let start = u64::try_from(others)
        .ok()
        .and_then(|o| mix(seed).checked_rem(o))
        .and_then(|s| usize::try_from(s).ok())
        .unwrap_or(0);
    (0..n).map(move |i| {
        let off = (start + i * step).checked_rem(others).unwrap_or(0);
        (home + 1 + off).checked_rem(nr_queues).unwrap_or(0)
    })
}

/// The queues a bounded search locks, best first: at most [`TRIES`].
#[derive(Clone, Copy)]
pub(crate) struct Lenders {
    /// Queue and its spare slots, most spare first.
    best: [Option<(usize, usize)>; TRIES],
    next: usize,
}

impl Iterator for Lenders {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let (q, _) = self.best.get(self.next).copied().flatten()?;
        self.next += 1;
        Some(q)
    }
}

/// The other queues a request from `home` tries when its home queue is full: of those
/// [`peeks`] looks at, the [`TRIES`] for which `spare` (how many slots queue `i` would lend,
/// by its counters) is largest, largest first (the first looked at among equals); none that
/// would lend nothing.
pub(crate) fn lenders(
    home: usize,
    nr_queues: usize,
    seed: u64,
    spare: impl Fn(usize) -> usize,
) -> Lenders {
    let mut best = [None; TRIES];
    for q in peeks(home, nr_queues, seed) {
        let s = spare(q);
        if s == 0 {
            continue;
        }
        // Insert into `best` after the entries that spare as much or more; the ones after it
        // move down one (the last off the end).
        let mut cand = Some((q, s));
        let mut shifting = false;
        for entry in best.iter_mut() {
            let Some(c) = cand else {
                break;
            };
            match *entry {
                Some((_, have)) if !shifting && have >= c.1 => {}
                _ => {
                    cand = entry.replace(c);
                    shifting = true;
                }
            }
        }
    }
    Lenders { best, next: 0 }
}

/// Where a bounded search is.
enum Stage {
    /// The home queue is next.
    Home,
    /// The home queue refused: look for lenders.
    Search,
    /// Trying the lenders found.
    Others(Lenders),
    Done,
}

/// The queues a request from `home` tries, in order, with the bounded search: see [`tries`].
pub(crate) struct Tries<S, F> {
    home: usize,
    nr_queues: usize,
    overflow: bool,
    seed: Option<S>,
    spare: F,
    stage: Stage,
}

impl<S: FnOnce() -> u64, F: Fn(usize) -> usize> Iterator for Tries<S, F> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        loop {
            match &mut self.stage {
                Stage::Home => {
                    self.stage = if self.overflow {
                        Stage::Search
                    } else {
                        Stage::Done
                    };
                    return Some(self.home);
                }
                Stage::Search => {
                    // Asked for once the home queue has refused, not before.
                    let seed = self.seed.take().map_or(0, |seed| seed());
                    self.stage =
                        Stage::Others(lenders(self.home, self.nr_queues, seed, &self.spare));
                }
                Stage::Others(l) => return l.next(),
                Stage::Done => return None,
            }
        }
    }
}

/// The queues a request from `home` (out of `nr_queues`) tries, with the bounded search: the
/// home queue, then, with `overflow`, the [`lenders`] found with the seed `seed` gives (called
/// once the home queue has refused, e.g. a counter of the home queue's refusals, so that each
/// search starts elsewhere) and `spare`, each queue's slots to lend by its counters.
pub(crate) fn tries<S: FnOnce() -> u64, F: Fn(usize) -> usize>(
    home: usize,
    nr_queues: usize,
    overflow: bool,
    seed: S,
    spare: F,
) -> Tries<S, F> {
    Tries {
        home,
        nr_queues,
        overflow,
        seed: Some(seed),
        spare,
        stage: Stage::Home,
    }
}

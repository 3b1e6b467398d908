// SPDX-License-Identifier: GPL-2.0

//! Which queues a request tries, and how many slots a queue lends: the queue set's overflow
//! policy as pure functions of plain numbers, free of kernel types, so that the host model
//! (`tools/overflow-model`, run by `make test` and `make bench`) compiles this very file and
//! simulates 16 to 256 queues with it.
//!
//! A request tries its home queue first. When that is full, the linear scan
//! ([`queue_order`]) tries every other queue in turn, each under its lock: with many queues
//! and all of them busy that is one lock round trip per queue for every submission. The
//! bounded search ([`lenders`]) instead reads the counters of at most [`PEEKS`] other queues
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
    // `mix(seed) % others` is below `others`, a `usize`.
    let start = u64::try_from(others)
        .ok()
        .and_then(|o| mix(seed).checked_rem(o))
        .map_or(0, |s| s as usize);
    (0..n).map(move |i| {
        let off = (start + i * step).checked_rem(others).unwrap_or(0);
        (home + 1 + off).checked_rem(nr_queues).unwrap_or(0)
    })
}

/// The queues a bounded search locks, best first: at most [`TRIES`].
#[derive(Clone, Copy)]
pub(crate) struct Lenders {
    /// Queue and its spare slots, most spare first; a spare of 0 is no entry.
    best: [(usize, usize); TRIES],
    next: usize,
}

impl Iterator for Lenders {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let &(q, spare) = self.best.get(self.next)?;
        self.next += 1;
        (spare > 0).then_some(q)
    }
}

/// The other queues a request from `home` tries when its home queue is full: of those
/// [`peeks`] looks at, the [`TRIES`] for which `spare` (how many slots queue `i` would lend,
/// by its counters) is largest, largest first (the first looked at among equals); none that
/// would lend nothing. `seed` picks where the search starts (e.g. a counter of the home
/// queue's refusals, so that each search starts elsewhere).
#[inline]
pub(crate) fn lenders(
    home: usize,
    nr_queues: usize,
    seed: u64,
    spare: impl Fn(usize) -> usize,
) -> Lenders {
    let mut best = [(0, 0); TRIES];
    for q in peeks(home, nr_queues, seed) {
        // Insert after the entries that spare as much or more; the ones after it move down
        // one (the last off the end). Empty entries spare 0: a candidate sparing 0 is kept
        // out by the strict comparison.
        let mut cand = (q, spare(q));
        let mut moving = false;
        for entry in best.iter_mut() {
            if moving || entry.1 < cand.1 {
                core::mem::swap(entry, &mut cand);
                moving = true;
            }
        }
    }
    Lenders { best, next: 0 }
}

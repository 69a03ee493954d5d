//! Queues driven to full and past it, against the rule every queue of the design documents
//! (docs/pipeline.md §10, §13; `nlb_top`'s event FIFO): a queue of `depth` entries takes an
//! entry while it holds fewer than `depth`, and drops the arriving entry otherwise (the
//! entries it holds stay, in order); each drop is reported (a flag set until read, or a count);
//! what is taken comes out oldest first, each entry once.
//!
//! A queue under test implements [`QueueUnderTest`] (an adapter over a device's registers, a
//! stream, a ring in host memory); [`overflow_run`] fills it to full and past it, empties it,
//! fills it exactly to full, and runs it near full at random, holding every entry taken, the
//! occupancy it reports and every drop report to a reference queue written from that rule.
//! The adapters of the punt, learn and inject queues and of the event FIFO are in
//! `verif/tests/rtl/queues.rs`; the DMA rings of the host interface take the same harness.

use crate::coverage::{self, Bins};
use rand::rngs::StdRng;
use rand::RngExt;
use std::collections::VecDeque;
use std::fmt::Debug;

/// How a queue reports the entries it dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drops {
    /// A flag: set by a drop, cleared by reading it (`punt_status.overflow`).
    Flag(bool),
    /// Entries dropped since the last report (a counter's increase, or pulses counted).
    Since(u64),
}

/// A bounded queue, seen from its producer and its consumer.
pub trait QueueUnderTest {
    /// What an entry holds (compared whole).
    type Item: Clone + PartialEq + Debug;
    /// Its name in messages and bins.
    fn name(&self) -> String;
    /// Entries it holds when full.
    fn depth(&self) -> usize;
    /// Makes the producer send one more entry toward the queue (`n` numbers the entries, so
    /// that they differ); returns the entry the queue must hold if it takes it (from an
    /// independent source: the golden model's pipeline, not the queue).
    fn offer(&mut self, n: u64) -> Result<Self::Item, String>;
    /// Entries held now as the queue reports them, `None` when it has no such report.
    fn occupancy(&mut self) -> Result<Option<usize>, String>;
    /// The drop report now (reading it may clear it).
    fn drops(&mut self) -> Result<Drops, String>;
    /// Takes entries from the head: one, or all the queue gives up at once; oldest first;
    /// none when empty.
    fn take(&mut self) -> Result<Vec<Self::Item>, String>;
}

/// The reference: the documented rule.
#[derive(Debug)]
struct Reference<T> {
    depth: usize,
    held: VecDeque<T>,
    /// Drops since the last report was read.
    dropped: u64,
}

impl<T: Clone + PartialEq + Debug> Reference<T> {
    fn offer(&mut self, item: T) -> bool {
        if self.held.len() < self.depth {
            self.held.push_back(item);
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

struct Run<'a, Q: QueueUnderTest> {
    q: &'a mut Q,
    r: Reference<Q::Item>,
    n: u64,
    bins: &'a mut Bins,
}

impl<Q: QueueUnderTest> Run<'_, Q> {
    fn fail(&self, what: String) -> String {
        format!(
            "{}: {what} (the reference holds {} of {}, {} dropped since the last report)",
            self.q.name(),
            self.r.held.len(),
            self.r.depth,
            self.r.dropped
        )
    }

    fn offer(&mut self) -> Result<(), String> {
        self.n += 1;
        let item = self.q.offer(self.n)?;
        let full = self.r.held.len() == self.r.depth;
        if !self.r.offer(item) {
            coverage::hit(
                self.bins,
                format!("{}: an entry offered while full", self.q.name()),
            );
        } else if self.r.held.len() == self.r.depth && !full {
            coverage::hit(self.bins, format!("{}: filled to its depth", self.q.name()));
        }
        Ok(())
    }

    fn take(&mut self) -> Result<(), String> {
        let got = self.q.take()?;
        if got.is_empty() && !self.r.held.is_empty() {
            return Err(self.fail("nothing taken from a queue holding entries".into()));
        }
        if got.is_empty() {
            coverage::hit(self.bins, format!("{}: taken while empty", self.q.name()));
        }
        for (k, g) in got.iter().enumerate() {
            let Some(want) = self.r.held.pop_front() else {
                return Err(self.fail(format!("entry {k} taken from an empty queue: {g:?}")));
            };
            if *g != want {
                return Err(self.fail(format!(
                    "entry taken out of order, duplicated or changed:\n  got      {g:?}\n  expected {want:?}"
                )));
            }
        }
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        if let Some(n) = self.q.occupancy()? {
            if n != self.r.held.len() {
                return Err(self.fail(format!("the queue reports {n} entries")));
            }
        }
        match self.q.drops()? {
            Drops::Flag(f) => {
                if f != (self.r.dropped > 0) {
                    return Err(self.fail(format!("overflow flag {f}")));
                }
                if f {
                    coverage::hit(self.bins, format!("{}: drop reported", self.q.name()));
                    // Reading cleared it.
                    if let Drops::Flag(true) = self.q.drops()? {
                        return Err(self.fail("overflow flag still set after its read".into()));
                    }
                }
            }
            Drops::Since(k) => {
                if k != self.r.dropped {
                    return Err(self.fail(format!("{k} drops reported")));
                }
                if k > 0 {
                    coverage::hit(self.bins, format!("{}: drop reported", self.q.name()));
                }
            }
        }
        self.r.dropped = 0;
        Ok(())
    }
}

/// Fills the queue past full and empties it, fills it exactly to full, then `steps` random
/// offers and takes near full; every take, occupancy and drop report checked against the
/// documented rule. Counts bins ("<name>: filled to its depth", "... an entry offered while
/// full", "... drop reported", "... taken while empty").
pub fn overflow_run<Q: QueueUnderTest>(
    q: &mut Q,
    rng: &mut StdRng,
    steps: usize,
    bins: &mut Bins,
) -> Result<(), String> {
    let depth = q.depth();
    let mut run = Run {
        r: Reference {
            depth,
            held: VecDeque::new(),
            dropped: 0,
        },
        q,
        n: 0,
        bins,
    };
    run.check()?;
    // Past full: a few extra entries, all dropped.
    let extra = rng.random_range(1..=8);
    for _ in 0..depth + extra {
        run.offer()?;
    }
    run.check()?;
    while !run.r.held.is_empty() {
        run.take()?;
    }
    run.take()?;
    run.check()?;
    // Exactly full: nothing dropped; then one more, dropped alone.
    for _ in 0..depth {
        run.offer()?;
    }
    run.check()?;
    run.offer()?;
    run.check()?;
    // Near full at random, taking as often as offering.
    for _ in 0..steps {
        if rng.random_bool(0.5) || run.r.held.is_empty() {
            run.offer()?;
        } else {
            run.take()?;
        }
        if rng.random_bool(0.25) {
            run.check()?;
        }
    }
    while !run.r.held.is_empty() {
        run.take()?;
    }
    run.check()
}

/// The bins [`overflow_run`] must hit for a queue named `name`.
pub fn required_bins(name: &str) -> Vec<String> {
    [
        "filled to its depth",
        "an entry offered while full",
        "drop reported",
        "taken while empty",
    ]
    .iter()
    .map(|b| format!("{name}: {b}"))
    .collect()
}

//! The three clocks: which stretches of time count as a stack *running*.
//!
//! * `stack`: a thread's current stack runs from its first event (or the
//!   switch onto it) until the thread switches away, or the trace ends.
//! * `gil`: one thread at a time; after an event of thread T, T's stack runs
//!   until the next event of any thread.
//! * `wall`: every stack always runs.
//!
//! `schemas/semantics.md` is the contract; the replay engine asks this module
//! only one question: how long did the stack run after this event, before the
//! next event of its segment (the replay's `SegmentClock`).

use serde::{Deserialize, Serialize};

/// Which stretches of time count as running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// Stacks on different threads run in parallel; a switched-out stack is paused.
    Stack,
    /// One thread runs at a time (an interpreter lock).
    Gil,
    /// Everything always runs; nothing is subtracted.
    Wall,
}

impl Clock {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Clock::Stack => "stack",
            Clock::Gil => "gil",
            Clock::Wall => "wall",
        }
    }
}

impl std::fmt::Display for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use mtrace_format::event::{raw_is_valid, raw_parts};
use mtrace_format::layout::EVENT_SIZE;

use crate::decode::{Batches, Decoded};

/// The `gil` clock's view of the whole trace: who ran when.
///
/// All events are merged into one sequence by (tick, thread id), each thread
/// keeping its own order; a *run* is a maximal stretch of that sequence from
/// one thread. After an event, its thread runs until the next event in the
/// sequence, so within a run a thread runs until its own next event and at
/// the end of its run until the next run's first event. Only run starts are
/// stored: memory grows with how often the running thread changes.
#[derive(Clone, Debug, Default)]
pub struct GilTimeline {
    runs: GilRuns,
    end_ns: u64,
}

/// The run starts of a [`GilTimeline`], which does not need the end of the
/// trace yet: they can be merged while the segment pass runs.
#[derive(Clone, Debug, Default)]
pub struct GilRuns(Vec<Run>);

#[derive(Clone, Copy, Debug)]
struct Run {
    tick: u64,
    tid: u64,
    ns: u64,
}

impl GilRuns {
    /// Merges every thread's events (a sequential pass: the clock is a
    /// global order by definition).
    pub fn build(decoded: &Decoded<'_>) -> GilRuns {
        let mut streams: Vec<_> = decoded
            .threads
            .iter()
            .map(|t| Ticks {
                batches: Batches::all(&decoded.file, &t.chunks),
                current: None,
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, s) in streams.iter_mut().enumerate() {
            if let Some(tick) = s.next() {
                heap.push(Reverse((tick, decoded.threads[i].tid.0, i)));
            }
        }
        let mut runs: Vec<Run> = Vec::new();
        while let Some(Reverse((tick, tid, i))) = heap.pop() {
            if runs.last().is_none_or(|r| r.tid != tid) {
                runs.push(Run {
                    tick,
                    tid,
                    ns: decoded.scale.ns(tick),
                });
            }
            // The thread keeps running while its events come before every
            // other thread's next one: take them without the heap (runs
            // are long, so the heap sees a run, not each event).
            let other = heap.peek().map(|Reverse((t, id, _))| (*t, *id));
            for next in streams[i].by_ref() {
                if other.is_some_and(|o| (next, tid) > o) {
                    heap.push(Reverse((next, tid, i)));
                    break;
                }
            }
        }
        GilRuns(runs)
    }
}

impl GilTimeline {
    /// The timeline of `runs` in a trace that ends at `end_ns`.
    pub fn new(runs: GilRuns, end_ns: u64) -> GilTimeline {
        GilTimeline { runs, end_ns }
    }

    /// A cursor for walking one thread's events forward in time.
    /// `hint`: a run at or before the thread's next event (0, or the
    /// [`GilCursor::position`] of a cursor that walked an earlier stretch of
    /// the same stack): the first event is then found by galloping from it
    /// rather than by a binary search of every run.
    pub fn cursor(&self, tid: u64, hint: usize) -> GilCursor<'_> {
        GilCursor {
            timeline: self,
            tid,
            run: None,
            hint,
        }
    }
}

/// Walks one thread's events through a [`GilTimeline`].
pub struct GilCursor<'g> {
    timeline: &'g GilTimeline,
    tid: u64,
    run: Option<usize>,
    hint: usize,
}

impl GilCursor<'_> {
    /// How long the thread ran after its event at (`tick`, `ns`), given that
    /// its own next event (or the end of its stretch) is at `next_own_ns`.
    /// Calls must come in the thread's event order.
    #[inline]
    pub fn run_after(&mut self, tick: u64, ns: u64, next_own_ns: u64) -> u64 {
        let runs = &self.timeline.runs.0;
        let key = (tick, self.tid);
        let mut i = match self.run {
            Some(i) => i,
            None => locate(runs, key, self.hint),
        };
        while runs.get(i + 1).is_some_and(|r| (r.tick, r.tid) <= key) {
            i += 1;
        }
        self.run = Some(i);
        let next_foreign = runs.get(i + 1).map_or(self.timeline.end_ns, |r| r.ns);
        next_own_ns.min(next_foreign).saturating_sub(ns)
    }
}

impl GilCursor<'_> {
    /// The run of the last event walked (or the hint): a hint for a cursor
    /// over a later stretch of the same stack.
    pub fn position(&self) -> usize {
        self.run.unwrap_or(self.hint)
    }
}

/// The last run starting at or before `key` (0 if none), searched forward
/// from `hint` by doubling steps, or over all runs if `hint` is past it.
fn locate(runs: &[Run], key: (u64, u64), hint: usize) -> usize {
    let at_or_before = |r: &Run| (r.tick, r.tid) <= key;
    if !runs.get(hint).is_some_and(at_or_before) {
        return runs.partition_point(at_or_before).saturating_sub(1);
    }
    let (mut lo, mut step) = (hint, 1);
    while runs.get(lo + step).is_some_and(at_or_before) {
        lo += step;
        step *= 2;
    }
    let end = (lo + step).min(runs.len());
    lo + runs[lo + 1..end].partition_point(at_or_before)
}

/// A thread's clamped event ticks, in order (what the other passes see).
struct Ticks<'a, 'd> {
    batches: Batches<'a, 'd>,
    current: Option<(&'a [u8], usize)>,
}

impl Iterator for Ticks<'_, '_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        loop {
            if let Some((raw, at)) = &mut self.current {
                if let Some(ev) = raw.get(*at..*at + EVENT_SIZE) {
                    *at += EVENT_SIZE;
                    let ev: &[u8; EVENT_SIZE] = ev.try_into().ok()?;
                    let (kind, tick, payload) = raw_parts(ev);
                    if raw_is_valid(kind, payload) {
                        return Some(self.batches.clamp(tick).0);
                    }
                    self.batches.damaged();
                }
                self.current = None;
            }
            let b = self.batches.next_batch()?;
            self.current = Some((b.raw, 0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galloping_from_any_hint_finds_what_a_binary_search_finds() {
        // Runs at ticks 0, 3, 6, ... with equal ticks for some threads.
        let runs: Vec<Run> = (0..500u64)
            .map(|i| Run {
                tick: i / 2 * 3,
                tid: i % 2 + 1,
                ns: i,
            })
            .collect();
        let search = |key: (u64, u64)| {
            runs.partition_point(|r| (r.tick, r.tid) <= key)
                .saturating_sub(1)
        };
        for tick in 0..800 {
            for tid in 1..=3 {
                let key = (tick, tid);
                let want = search(key);
                for hint in [
                    0,
                    1,
                    want / 2,
                    want.saturating_sub(1),
                    want,
                    want + 1,
                    499,
                    10_000,
                ] {
                    assert_eq!(locate(&runs, key, hint), want, "key {key:?} hint {hint}");
                }
            }
        }
        assert_eq!(locate(&[], (5, 1), 0), 0);
    }
}

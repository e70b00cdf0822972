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

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use mtrace_format::event::{raw_is_valid, raw_parts};
use mtrace_format::layout::EVENT_SIZE;
use mtrace_format::TickScale;

use crate::analysis::decode::{Batch, Batches, Decoded};

/// The `gil` clock's view of the whole trace: who ran when.
///
/// All events are merged into one sequence by (tick, thread id), each thread
/// keeping its own order; a *run* is a maximal stretch of that sequence from
/// one thread. After an event, its thread runs until the next event in the
/// sequence, so within a run a thread runs until its own next event and at
/// the end of its run until the next run's first event. Only run starts are
/// stored: memory grows with how often the running thread changes (12 bytes
/// a run).
#[derive(Clone, Debug)]
pub(crate) struct GilTimeline {
    runs: GilRuns,
    /// The key of every [`INDEX_EVERY`]-th run: where a cursor with no
    /// useful hint starts looking (see [`locate`]).
    index: Vec<(u64, u32)>,
    end_ns: u64,
    scale: TickScale,
}

/// Runs per entry of [`GilTimeline::index`]: a search ends in a block of
/// this many runs (a few cache lines of ticks), and the index is small
/// enough to stay in cache (12 bytes per 64 runs).
const INDEX_EVERY: usize = 64;

/// How far a cursor gallops from its hint before it asks the index.
const GALLOP_LIMIT: usize = 8;

/// The run starts of a [`GilTimeline`], which does not need the end of the
/// trace yet: they can be merged while the segment pass runs. Threads are
/// named by their index in [`Decoded::threads`], which lists them by
/// ascending id, so (tick, index) orders runs as (tick, thread id) does.
///
/// A streamed analysis merges runs step by step and drops those no stack
/// can still need ([`GilTimeline::prune_before`]): the held ones start at
/// run `base` of the trace. Indexes into them are local (`0` is `base`);
/// only a cursor's hint and position are run numbers of the trace, which
/// outlive a drop.
#[derive(Clone, Debug, Default)]
pub(crate) struct GilRuns {
    base: usize,
    ticks: Vec<u64>,
    threads: Vec<u32>,
    /// The thread of the last run merged, dropped or not.
    last_thread: Option<u32>,
}

impl GilRuns {
    fn len(&self) -> usize {
        self.ticks.len()
    }

    /// (tick, thread index) of held run `i`.
    #[inline(always)]
    fn key(&self, i: usize) -> Option<(u64, u32)> {
        Some((*self.ticks.get(i)?, *self.threads.get(i)?))
    }

    /// Merges every thread's events (a sequential pass: the clock is a
    /// global order by definition).
    pub(crate) fn build(decoded: &Decoded<'_>) -> GilRuns {
        let mut runs = GilRuns::default();
        GilMerge::new(decoded).extend(&mut runs, u64::MAX);
        // Held for the whole replay: without the slack of their doubling
        // (up to half of what they hold), which made the heap grow faster
        // than the runs do.
        runs.ticks.shrink_to_fit();
        runs.threads.shrink_to_fit();
        runs
    }
}

/// The merge of every thread's events into [`GilRuns`], which can stop at
/// a tick and go on from there (a streamed analysis merges a step at a
/// time).
pub(crate) struct GilMerge<'a, 'd> {
    streams: Vec<Ticks<'a, 'd>>,
    /// The next event of every thread not merged yet, by (tick, thread
    /// index): the index orders threads as their ids do.
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl<'a, 'd> GilMerge<'a, 'd> {
    /// Nothing merged yet.
    pub(crate) fn new(decoded: &'d Decoded<'a>) -> Self {
        let mut streams: Vec<_> = decoded
            .threads
            .iter()
            .map(|t| Ticks {
                batches: Batches::all(&decoded.file, t),
                current: None,
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, s) in streams.iter_mut().enumerate() {
            if let Some(tick) = s.next() {
                heap.push(Reverse((tick, i as u32)));
            }
        }
        GilMerge { streams, heap }
    }

    /// Merges into `runs` every event before tick `until`.
    fn extend(&mut self, runs: &mut GilRuns, until: u64) {
        let GilMerge { streams, heap } = self;
        while let Some(&Reverse((tick, i))) = heap.peek() {
            if tick >= until {
                break;
            }
            heap.pop();
            if runs.last_thread != Some(i) {
                runs.ticks.push(tick);
                runs.threads.push(i);
                runs.last_thread = Some(i);
            }
            // The thread keeps running while its events come before every
            // other thread's next one: take them without the heap (runs
            // are long, so the heap sees a run, not each event). Keys after
            // `last` wait: another thread's, or at or after `until`
            // (`until` is above 0 here).
            let last = (until - 1, u32::MAX);
            let last = heap.peek().map_or(last, |Reverse(key)| last.min(*key));
            for next in streams[i as usize].by_ref() {
                if (next, i) > last {
                    heap.push(Reverse((next, i)));
                    break;
                }
            }
        }
    }
}

impl GilTimeline {
    /// The timeline of `runs` in a trace that ends at `end_ns`, converting
    /// ticks with `scale`.
    pub(crate) fn new(runs: GilRuns, end_ns: u64, scale: TickScale) -> GilTimeline {
        GilTimeline {
            index: index(&runs),
            runs,
            end_ns,
            scale,
        }
    }

    /// A timeline to be merged step by step ([`GilTimeline::extend`]),
    /// whose end is not known yet ([`GilTimeline::set_end`]).
    pub(crate) fn streamed(scale: TickScale) -> GilTimeline {
        GilTimeline::new(GilRuns::default(), u64::MAX, scale)
    }

    /// Merges every event before tick `until` (see [`GilMerge`]). A
    /// thread's run is then known after any of its events before
    /// `until` whose run ends before it, or whose own next event does.
    pub(crate) fn extend(&mut self, merge: &mut GilMerge<'_, '_>, until: u64) {
        merge.extend(&mut self.runs, until);
        self.index = index(&self.runs);
    }

    /// Drops the runs that end at or before `tick`: only a walk from
    /// `tick` on can come (a cursor whose hint was dropped searches).
    pub(crate) fn prune_before(&mut self, tick: u64) {
        let runs = &mut self.runs;
        // The last run starting before `tick` is where a walk from it starts.
        let drop = runs.ticks.partition_point(|&t| t < tick).saturating_sub(1);
        if drop > 0 {
            runs.ticks.drain(..drop);
            runs.threads.drain(..drop);
            runs.base += drop;
            self.index = index(&self.runs);
        }
    }

    /// How many runs are held.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.runs.ticks.len()
    }

    /// The trace ends at `end_ns` (the last run lasts until then).
    pub(crate) fn set_end(&mut self, end_ns: u64) {
        self.end_ns = end_ns;
    }

    /// A cursor for walking the events of thread `thread` (its index in
    /// [`Decoded::threads`]) forward in time.
    /// `hint`: a run at or before the thread's next event (0, or the
    /// [`GilCursor::position`] of a cursor that walked an earlier stretch of
    /// the same stack): the first event is then found by galloping from it
    /// rather than by a binary search of every run.
    pub(crate) fn cursor(&self, thread: u32, hint: usize) -> GilCursor<'_> {
        GilCursor {
            timeline: self,
            thread,
            run: None,
            // A dropped run is no hint (`locate` searches the index).
            hint: hint.checked_sub(self.runs.base).unwrap_or(usize::MAX),
            next: NO_RUN,
            next_ns: self.end_ns,
        }
    }
}

/// Above every run's key, whatever its tick: thread indices are below
/// `u32::MAX`.
const NO_RUN: (u64, u32) = (u64::MAX, u32::MAX);

/// Walks one thread's events through a [`GilTimeline`] (`run` and `hint`
/// index the held runs).
pub(crate) struct GilCursor<'g> {
    timeline: &'g GilTimeline,
    thread: u32,
    run: Option<usize>,
    hint: usize,
    /// The key of the run after `run` ([`NO_RUN`] if none), and when it
    /// starts in ns (the end of the trace if none): a thread's events
    /// mostly come many to a run, and each of them needs only these.
    next: (u64, u32),
    next_ns: u64,
}

impl GilCursor<'_> {
    /// How long the thread ran after its event at (`tick`, `ns`), given that
    /// its own next event (or the end of its stretch) is at `next_own_ns`.
    /// Calls must come in the thread's event order.
    #[inline]
    pub(crate) fn run_after(&mut self, tick: u64, ns: u64, next_own_ns: u64) -> u64 {
        let key = (tick, self.thread);
        if self.run.is_none() || self.next <= key {
            self.find_run(key);
        }
        next_own_ns.min(self.next_ns).saturating_sub(ns)
    }

    /// Moves to the last run starting at or before `key`.
    fn find_run(&mut self, key: (u64, u32)) {
        let runs = &self.timeline.runs;
        let mut i = match self.run {
            Some(i) => i,
            None => locate(runs, &self.timeline.index, key, self.hint),
        };
        while runs.key(i + 1).is_some_and(|r| r <= key) {
            i += 1;
        }
        self.run = Some(i);
        (self.next, self.next_ns) = match runs.key(i + 1) {
            Some(next) => (next, self.timeline.scale.ns(next.0)),
            None => (NO_RUN, self.timeline.end_ns),
        };
    }
}

impl GilCursor<'_> {
    /// The run of the last event walked (or the hint): a hint for a cursor
    /// over a later stretch of the same stack.
    pub(crate) fn position(&self) -> usize {
        let base = self.timeline.runs.base;
        match self.run {
            Some(i) => base + i,
            None => self.hint.saturating_add(base),
        }
    }
}

/// The key of every [`INDEX_EVERY`]-th run of `runs`.
fn index(runs: &GilRuns) -> Vec<(u64, u32)> {
    (0..runs.len())
        .step_by(INDEX_EVERY)
        .filter_map(|i| runs.key(i))
        .collect()
}

/// The last run starting at or before `key` (0 if none): galloping
/// forward from `hint` while it is close, else through `index` (the
/// timeline's, of `runs`).
///
/// Each stack's first stretch has no hint (0), and half a million tasks
/// each galloping from the first run, or binary-searching millions of
/// runs, was a few dozen cache misses a task: most of the `gil` clock's
/// replay on a task-per-request trace. The index is searched in cache;
/// then one block of runs is.
fn locate(runs: &GilRuns, index: &[(u64, u32)], key: (u64, u32), hint: usize) -> usize {
    let at_or_before = |i: usize| runs.key(i).is_some_and(|r| r <= key);
    // First index in lo..hi whose run starts after `key` (runs are sorted).
    let first_after = |mut lo: usize, mut hi: usize| {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if at_or_before(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    };
    if at_or_before(hint) {
        let (mut lo, mut step) = (hint, 1);
        while step <= GALLOP_LIMIT {
            if !at_or_before(lo + step) {
                let end = (lo + step).min(runs.len());
                return first_after(lo + 1, end) - 1;
            }
            lo += step;
            step *= 2;
        }
    }
    // Blocks whose first run is at or before `key`: the answer is in the
    // last of them (the next block's first run is after it).
    let blocks = index.partition_point(|&k| k <= key);
    let Some(block) = blocks.checked_sub(1) else {
        return 0;
    };
    let lo = block * INDEX_EVERY;
    first_after(lo + 1, (lo + INDEX_EVERY).min(runs.len())) - 1
}

/// A thread's clamped event ticks, in order (what the other passes see).
struct Ticks<'a, 'd> {
    batches: Batches<'a, 'd>,
    current: Option<(Batch<'a>, usize)>,
}

impl Iterator for Ticks<'_, '_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        loop {
            if let Some((batch, at)) = &mut self.current {
                if let Some(ev) = batch.raw().get(*at..*at + EVENT_SIZE) {
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
            self.current = Some((b, 0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galloping_or_the_index_from_any_hint_finds_what_a_binary_search_finds() {
        // Runs at ticks 1, 4, 7, ... with equal ticks for some threads (keys
        // at tick 0 come before every run).
        let keys: Vec<(u64, u32)> = (0..500u64)
            .map(|i| (i / 2 * 3 + 1, (i % 2) as u32))
            .collect();
        let runs = GilRuns {
            ticks: keys.iter().map(|k| k.0).collect(),
            threads: keys.iter().map(|k| k.1).collect(),
            ..GilRuns::default()
        };
        let index = index(&runs);
        let search = |key: (u64, u32)| keys.partition_point(|&k| k <= key).saturating_sub(1);
        for tick in 0..800 {
            for thread in 0..=2 {
                let key = (tick, thread);
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
                    let got = locate(&runs, &index, key, hint);
                    assert_eq!(got, want, "key {key:?} hint {hint}");
                }
            }
        }
        assert_eq!(locate(&GilRuns::default(), &[], (5, 1), 0), 0);
    }

    #[test]
    fn pruned_runs_are_found_by_their_numbers_from_the_prune_point_on() {
        let keys: Vec<(u64, u32)> = (0..700u64)
            .map(|i| (i / 2 * 3 + 1, (i % 2) as u32))
            .collect();
        let search = |key: (u64, u32)| keys.partition_point(|&k| k <= key).saturating_sub(1);
        let runs = GilRuns {
            ticks: keys.iter().map(|k| k.0).collect(),
            threads: keys.iter().map(|k| k.1).collect(),
            ..GilRuns::default()
        };
        let scale = mtrace_format::ClockInfo {
            kind: mtrace_format::ClockKind::Tsc,
            start_tick: 0,
            start_unix_ns: 0,
            calib_ticks: 1,
            calib_ns: 1,
        }
        .scale();
        let mut timeline = GilTimeline::new(runs, u64::MAX, scale);
        let mut held = timeline.held();
        for prune in [0, 2, 3, 100, 101, 250, 251, 600, 1049, 2000] {
            timeline.prune_before(prune);
            assert!(timeline.held() <= held && timeline.held() >= 1);
            held = timeline.held();
            // The first run held starts before `prune` (or is the first).
            assert!(timeline.runs.ticks[0] < prune.max(2));
            for tick in prune..1100 {
                for thread in 0..=2 {
                    let key = (tick, thread);
                    let want = search(key);
                    for hint in [0, want.saturating_sub(3), want, 10_000] {
                        // Run numbers of the trace in and out.
                        let mut cursor = timeline.cursor(thread, hint);
                        cursor.run_after(tick, 0, u64::MAX);
                        let got = cursor.position();
                        assert_eq!(got, want, "prune {prune} key {key:?} hint {hint}");
                    }
                }
            }
        }
    }
}

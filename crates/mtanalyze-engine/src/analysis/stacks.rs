//! Stacks: every segment grouped by the stack it ran, the stacks the
//! options select, and [`Analysis`], which replays them one at a time.
//!
//! A stack's segments come from every thread it ran on; grouped in time
//! order they are everything its replay needs. Nothing is copied: a stack
//! is a range of 8-byte handles into the threads' segment lists.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::analysis::clock::GilTimeline;
use crate::analysis::cut::ThreadPass;
use crate::analysis::decode::{prefetch, Decoded, FunctionTable, Pos, ThreadChunks};
use crate::analysis::ends::{counting_ends, StackEnds};
use crate::analysis::frames::{Observer, Tally};
use crate::analysis::options::{wanted, AnalyzeError, AnalyzeOptions};
use crate::analysis::prepare::{decode_for, prepare, Decoding, Fuse, Prepared};
use crate::analysis::replay::{replay_stack, ReplayContext, StackTotals};
use crate::analysis::segment::{Segment, SegmentList, StackKey, RUNS_TO_END};
use crate::analysis::window::Span;
use crate::input::LoadedTrace;
use crate::threads;
use mtanalyze_model::report::Clock;
use mtanalyze_model::warnings::Warnings;

/// (thread pass, index in its segments).
pub(crate) type SegmentHandle = (u32, u32);
/// A stack and the range of its segments' handles.
pub(crate) type StackRange = (StackKey, std::ops::Range<usize>);

/// Orders every segment by stack, then time, without moving them: an
/// 8-byte (thread, index) handle per segment, grouped into one range per
/// stack, stacks in key order. Segments are most of the analyzer's heap,
/// so they are not copied. `threads`: the decoded trace's (ascending by
/// id, as own stacks are ordered).
///
/// Every stack gets a slot: own stacks by thread index, then logical ones
/// by id. The recorder numbers logical stacks densely, so a slot is
/// usually the id minus the smallest (no hashing, no sorting of keys);
/// sparse ids are numbered through a sorted list of them instead. A
/// counting sort by slot (stable, thread after thread) leaves every
/// stack's range as one sorted run per thread, which a stable sort merges
/// cheaply.
///
/// Also returns the [`BIGGEST_FIRST`] heaviest stacks (see
/// [`Analysis::biggest`]) as (weight, index in the ranges), weighed on the
/// way: from the stacks' handles that would be a random read of every
/// segment again.
pub(crate) fn group_by_stack(
    passes: &[ThreadPass],
    threads: &[ThreadChunks],
) -> (Vec<SegmentHandle>, Vec<StackRange>, Vec<(u64, usize)>) {
    let segments = || passes.iter().flat_map(|p| p.segments.iter());
    let total: usize = passes.iter().map(|p| p.segments.len()).sum();
    let logical = LogicalSlots::new(passes, total);
    let own_slots = passes.len();
    let slot = |s: &Segment| -> usize {
        if s.is_own() {
            s.thread as usize
        } else {
            own_slots + logical.slot(s.stack)
        }
    };
    // Counting sort by slot.
    let mut starts = vec![0usize; own_slots + logical.len() + 1];
    for s in segments() {
        starts[slot(s) + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut order: Vec<SegmentHandle> = vec![(0, 0); total];
    let mut weights = vec![0u64; starts.len() - 1];
    let mut next = starts.clone();
    for (t, p) in passes.iter().enumerate() {
        let chunks = threads.get(t).map_or(&[][..], |t| &t.chunks[..]);
        for (i, s) in p.segments.iter().enumerate() {
            let g = slot(s);
            order[next[g]] = (t as u32, i as u32);
            next[g] += 1;
            weights[g] += s.events(chunks);
        }
    }
    drop(next);
    // Merge each stack's per-thread runs by time (a thread's index orders
    // as its id does).
    // In pieces of many stacks, cut at stack boundaries: a slice per stack
    // was 16 bytes more per task, and as many jobs.
    let per_piece = total
        .div_ceil(64 * threads::current_num_threads())
        .max(1024);
    let mut pieces: Vec<(&mut [SegmentHandle], &[usize])> = Vec::new();
    let mut rest: &mut [SegmentHandle] = &mut order;
    let mut first = 0;
    for g in 1..starts.len() {
        if starts[g] - starts[first] >= per_piece || g == starts.len() - 1 {
            let (piece, tail) = rest.split_at_mut(starts[g] - starts[first]);
            pieces.push((piece, &starts[first..=g]));
            rest = tail;
            first = g;
        }
    }
    threads::for_each(pieces, |(piece, bounds)| {
        let base = bounds[0];
        let mut keyed = Vec::new();
        for w in bounds.windows(2) {
            let group = &mut piece[w[0] - base..w[1] - base];
            if group.len() > 1 {
                sort_by_time(passes, group, &mut keyed);
            }
        }
    });
    let mut biggest = Vec::new();
    let ranges = starts
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1] > w[0])
        .enumerate()
        .map(|(i, (slot, w))| {
            let key = match slot.checked_sub(own_slots) {
                None => StackKey::Own(threads.get(slot).map_or(0, |t| t.tid.0)),
                Some(l) => StackKey::Logical(logical.id(l)),
            };
            biggest.push((weights[slot], i));
            if biggest.len() == 2 * BIGGEST_FIRST {
                keep_biggest(&mut biggest);
            }
            (key, w[0]..w[1])
        })
        .collect();
    keep_biggest(&mut biggest);
    (order, ranges, biggest)
}

/// How many of the heaviest stacks [`Analysis::biggest`] lists.
pub(crate) const BIGGEST_FIRST: usize = 4096;

/// Keeps the [`BIGGEST_FIRST`] heaviest of `v`'s (weight, index) pairs.
fn keep_biggest(v: &mut Vec<(u64, usize)>) {
    if v.len() > BIGGEST_FIRST {
        v.select_nth_unstable_by(BIGGEST_FIRST, |a, b| b.cmp(a));
        v.truncate(BIGGEST_FIRST);
    }
}

/// Logical stack ids to dense slots, in id order.
enum LogicalSlots {
    /// Slot = id - the smallest id (ids dense enough that the unused slots
    /// cost less than a sorted list of them).
    Dense { min: u64, len: usize },
    /// Slot = position in the sorted, distinct ids.
    Sparse(Vec<u64>),
}

impl LogicalSlots {
    /// The slots of the logical stacks of `passes` (`total` segments).
    fn new(passes: &[ThreadPass], total: usize) -> LogicalSlots {
        let logical_ids = |p: &ThreadPass| {
            p.segments
                .iter()
                .filter(|s| !s.is_own())
                .map(|s| s.stack)
                .collect::<Vec<_>>()
        };
        let (min, max) = threads::map_collect(passes, |p| {
            p.segments
                .iter()
                .filter(|s| !s.is_own())
                .fold((u64::MAX, 0), |(lo, hi), s| {
                    (lo.min(s.stack), hi.max(s.stack))
                })
        })
        .into_iter()
        .fold((u64::MAX, 0), |a, b| (a.0.min(b.0), a.1.max(b.1)));
        if min > max {
            return LogicalSlots::Dense { min: 0, len: 0 };
        }
        let span = max - min;
        if span < 2 * total as u64 + 1024 {
            return LogicalSlots::Dense {
                min,
                len: span as usize + 1,
            };
        }
        let mut ids: Vec<u64> = if threads::parallel() {
            let mut ids: Vec<u64> = passes.par_iter().flat_map_iter(logical_ids).collect();
            ids.par_sort_unstable();
            ids
        } else {
            let mut ids: Vec<u64> = passes.iter().flat_map(logical_ids).collect();
            ids.sort_unstable();
            ids
        };
        ids.dedup();
        LogicalSlots::Sparse(ids)
    }

    /// Number of slots.
    fn len(&self) -> usize {
        match self {
            LogicalSlots::Dense { len, .. } => *len,
            LogicalSlots::Sparse(ids) => ids.len(),
        }
    }

    /// The slot of logical stack `id` (one of the ids it was made from).
    fn slot(&self, id: u64) -> usize {
        match self {
            LogicalSlots::Dense { min, .. } => (id - min) as usize,
            LogicalSlots::Sparse(ids) => ids.binary_search(&id).unwrap_or(0),
        }
    }

    /// The id of the logical stack in `slot`.
    fn id(&self, slot: usize) -> u64 {
        match self {
            LogicalSlots::Dense { min, .. } => min + slot as u64,
            LogicalSlots::Sparse(ids) => ids.get(slot).copied().unwrap_or(0),
        }
    }
}

/// Groups up to this long are sorted with each segment's key read once.
const SMALL_GROUP: usize = 8;

/// Groups up to this long are sorted with each segment's key read once
/// into a buffer: a small trace's stacks (a few dozen segments each, in a
/// short run per thread), whose keys were read again at every comparison.
/// Longer groups are a few long runs, one per thread, which a stable sort
/// merges in place, with no buffer as long as the group.
const KEYED_GROUP: usize = 1024;

/// A segment's place in its stack's time order (unique).
type TimeKey = (u64, u32, Pos);

/// Sorts one stack's handles by their segments' start: time, then thread
/// and position (unique). A short task's few segments are scattered in
/// memory: their keys are read once, not at every comparison (`keyed`:
/// a buffer for that, for groups up to [`KEYED_GROUP`]).
fn sort_by_time(
    passes: &[ThreadPass],
    g: &mut [SegmentHandle],
    keyed: &mut Vec<(TimeKey, SegmentHandle)>,
) {
    let key = |h: SegmentHandle| {
        let s = segment(passes, h);
        (s.start_tick, s.thread, s.start)
    };
    if g.len() > KEYED_GROUP {
        g.sort_by_key(|h| key(*h));
        return;
    }
    if g.len() > SMALL_GROUP {
        keyed.clear();
        keyed.extend(g.iter().map(|&h| (key(h), h)));
        keyed.sort_unstable();
        for (h, (_, sorted)) in g.iter_mut().zip(keyed.iter()) {
            *h = *sorted;
        }
        return;
    }
    let mut keyed = [((0, 0, Pos::default()), (0, 0)); SMALL_GROUP];
    for (k, &h) in keyed.iter_mut().zip(g.iter()) {
        *k = (key(h), h);
    }
    let keyed = &mut keyed[..g.len()];
    keyed.sort_unstable();
    for (h, (_, sorted)) in g.iter_mut().zip(keyed.iter()) {
        *h = *sorted;
    }
}

/// The segment behind a handle from [`group_by_stack`].
fn segment(passes: &[ThreadPass], (t, i): SegmentHandle) -> &Segment {
    &passes[t as usize].segments[i as usize]
}

/// A trace decoded and segmented, with the stacks the options select,
/// ready to replay stack by stack: [`crate::analyze`] replays them all in
/// parallel and sums; the timeline exports replay one at a time with an
/// [`Observer`] that keeps every frame.
pub(crate) struct Analysis<'a> {
    pub(crate) prep: Prepared<'a>,
    /// The report's clock.
    pub(crate) clock: Clock,
    /// The clock the stacks replay under ([`Prepared::replay_clock`]).
    pub(crate) replay_clock: Clock,
    gil: Option<GilTimeline>,
    order: Vec<SegmentHandle>,
    /// Selected stacks, own stacks by thread id, then logical ones by id.
    pub(crate) stacks: Vec<StackRange>,
    /// See [`Analysis::biggest`].
    biggest: Vec<(u64, usize)>,
    /// All stacks in the trace, selected or not.
    pub(crate) all_stacks: u64,
    /// See [`Prepared::first_mark_ns`].
    first_mark_ns: Option<u64>,
    /// Each woken logical stack's wake times (ns, ascending).
    wakes: FxHashMap<u64, Vec<u64>>,
    /// Where each selected stack's life ended, if an `end` says so.
    ends: StackEnds,
}

impl<'a> Analysis<'a> {
    /// Decodes and segments `trace` and selects the stacks `opts` asks for.
    pub(crate) fn new(trace: &'a LoadedTrace, opts: &AnalyzeOptions) -> Result<Self, AnalyzeError> {
        let decoding = decode_for(trace, Some(opts), None)?;
        Self::build(trace, decoding, opts, Fuse::No, &mut |_| {})
    }

    /// Segments the decoded `trace` and selects the stacks `opts` asks
    /// for. With `fuse`, the segment pass replays the own stacks it can
    /// (see [`prepare`] and [`Fuse`]); the engine finishes them instead of
    /// replaying them. `stage_done` is called as each stage ends (`cut`,
    /// `group`).
    pub(crate) fn build(
        trace: &'a LoadedTrace,
        decoding: Decoding<'a>,
        opts: &AnalyzeOptions,
        fuse: Fuse<'_>,
        stage_done: &mut dyn FnMut(&'static str),
    ) -> Result<Self, AnalyzeError> {
        let mut prep = prepare(trace, decoding, Some(opts), fuse, stage_done)?;
        let (clock, replay_clock) = (prep.clock, prep.replay_clock);
        let (order, all, biggest_of_all) = group_by_stack(&prep.passes, &prep.decoded.threads);
        // Which ends count is judged on every stack, selected or not.
        let ends = prep
            .passes
            .iter_mut()
            .map(|p| std::mem::take(&mut p.ends))
            .collect();
        let counting = {
            let passes = &prep.passes;
            counting_ends(
                ends,
                &prep.decoded.threads,
                prep.decoded.scale,
                all.len(),
                |id| {
                    all.binary_search_by_key(&StackKey::Logical(id), |(k, _)| *k)
                        .ok()
                },
                |i| order[all[i].1.clone()].iter().map(|&h| segment(passes, h)),
                &mut prep.warnings,
            )
        };
        // Own stacks the segment pass replayed left no segments behind.
        let fused = prep
            .passes
            .iter()
            .filter(|p| p.own_replay.is_some())
            .count();
        let all_stacks = (all.len() + fused) as u64;
        // The selected stacks, in place; the heaviest renumbered among
        // them as they are kept (by index: in the order `retain` visits).
        let mut stacks = all;
        let mut heaviest = biggest_of_all;
        heaviest.sort_unstable_by_key(|&(_, i)| i);
        let mut heaviest = heaviest.into_iter().peekable();
        let mut biggest = Vec::new();
        let (mut index, mut kept) = (0, 0);
        stacks.retain(|(k, range)| {
            let tids = || {
                order[range.clone()]
                    .iter()
                    .map(|&h| segment(&prep.passes, h).tid(&prep.decoded.threads))
            };
            let keep = wanted(k, tids, &prep.decoded.stack_names, opts);
            if let Some((w, _)) = heaviest.next_if(|&(_, i)| i == index) {
                if keep {
                    biggest.push((w, kept));
                }
            }
            index += 1;
            kept += keep as usize;
            keep
        });
        biggest.sort_unstable_by(|a, b| b.cmp(a));
        let ends = StackEnds::new(&counting, stacks.iter().map(|(k, _)| *k));
        drop(counting);
        let end_ns = prep.ns(prep.end_tick);
        let gil = prep
            .gil_runs
            .take()
            .map(|runs| GilTimeline::new(runs, end_ns, prep.decoded.scale));
        let first_mark_ns = prep.first_mark_ns();
        let mut wakes: FxHashMap<u64, Vec<u64>> = FxHashMap::default();
        for pass in &mut prep.passes {
            for (stack, tick) in std::mem::take(&mut pass.wakes) {
                wakes
                    .entry(stack)
                    .or_default()
                    .push(prep.decoded.scale.ns(tick));
            }
        }
        for times in wakes.values_mut() {
            times.sort_unstable();
        }
        stage_done("group");
        Ok(Analysis {
            first_mark_ns,
            wakes,
            ends,
            prep,
            clock,
            replay_clock,
            gil,
            order,
            stacks,
            biggest,
            all_stacks,
        })
    }

    /// The clock in use.
    pub(crate) fn clock(&self) -> Clock {
        self.clock
    }

    /// The decoded trace.
    pub(crate) fn decoded(&self) -> &Decoded<'a> {
        &self.prep.decoded
    }

    /// Every function, by dense index.
    pub(crate) fn functions(&self) -> &FunctionTable<'a> {
        &self.prep.functions
    }

    /// The end of the trace, ns from time zero.
    pub(crate) fn end_ns(&self) -> u64 {
        self.prep.ns(self.prep.end_tick)
    }

    /// Number of selected stacks.
    pub(crate) fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// Selected stack `i`.
    pub(crate) fn stack_key(&self, i: usize) -> Option<StackKey> {
        self.stacks.get(i).map(|(k, _)| *k)
    }

    /// The handles of selected stack `i`'s segments, in time order.
    fn handles(&self, i: usize) -> &[SegmentHandle] {
        self.stacks
            .get(i)
            .map_or(&[], |(_, range)| &self.order[range.clone()])
    }

    /// Replays selected stack `i` into `tally` (made by [`Analysis::new_tally`]),
    /// showing `observer` every frame and running stretch. The statistics
    /// come without the stack's id and name (see `pipeline.rs`).
    pub(crate) fn replay<O: Observer>(
        &self,
        i: usize,
        tally: &mut Tally,
        warnings: &mut Warnings,
        paths_root: u32,
        observer: &mut O,
    ) -> Option<StackTotals> {
        self.stacks.get(i)?;
        let ctx = ReplayContext {
            decoded: &self.prep.decoded,
            functions: &self.prep.functions,
            clock: self.replay_clock,
            gil: self.gil.as_ref(),
            end_tick: self.prep.end_tick,
            first_mark_ns: self.first_mark_ns,
        };
        // The segments through their handles: no list of them per stack
        // (half a million tasks would make half a million small vectors).
        let handles = self.handles(i);
        let nth = |j: usize| Some(segment(&self.prep.passes, *handles.get(j)?));
        let wakes = match self.stacks.get(i).map(|(k, _)| *k) {
            Some(StackKey::Logical(id)) => self.wakes.get(&id).map_or(&[][..], Vec::as_slice),
            _ => &[],
        };
        let ended = self.ends.of(i);
        Some(replay_stack(
            &ctx, wakes, ended, nth, tally, warnings, paths_root, observer,
        ))
    }

    /// Where selected stack `i` was on a thread: each of its segments as
    /// (thread id, start ns, end ns), in time order, clipped to the time
    /// window (segments outside it left out). Wall time on the thread,
    /// whatever the clock: under `gil` the stack ran only part of it.
    pub(crate) fn spans(&self, i: usize) -> Vec<(u64, u64, u64)> {
        let end_ns = self.end_ns();
        let window = self.prep.window;
        self.handles(i)
            .iter()
            .filter_map(|&h| {
                let s = segment(&self.prep.passes, h);
                let start = self.prep.ns(s.start_tick);
                let end = match s.end_tick {
                    RUNS_TO_END => end_ns,
                    tick => self.prep.ns(tick),
                }
                .max(start);
                let tid = s.tid(&self.prep.decoded.threads);
                window
                    .touches(start, end)
                    .then(|| (tid, window.clamp(start), window.clamp(end)))
            })
            .collect()
    }

    /// The times selected stack `i`'s task was woken (ns, ascending; empty
    /// for a thread's own stack or a trace without wakes).
    pub(crate) fn wakes_of(&self, i: usize) -> &[u64] {
        match self.stack_key(i) {
            Some(StackKey::Logical(id)) => self.wakes.get(&id).map_or(&[][..], Vec::as_slice),
            _ => &[],
        }
    }

    /// Starts loading what replaying selected stack `i` reads first: with
    /// `events`, the first events of its segments (the segments
    /// themselves must be loaded by then, or this waits for them), else
    /// the segments. A short task's replay is mostly waiting for these:
    /// [`crate::analyze`] asks for them a few stacks ahead.
    pub(crate) fn prefetch(&self, i: usize, events: bool) {
        for &h in self.handles(i) {
            let (t, j) = (h.0 as usize, h.1 as usize);
            let Some(pass) = self.prep.passes.get(t) else {
                continue;
            };
            if j >= pass.segments.len() {
                continue;
            }
            let s = &pass.segments[j];
            if !events {
                prefetch((s as *const Segment).cast());
                continue;
            }
            s.prefetch_first_read(&self.prep.decoded);
        }
    }

    /// How many event slots selected stack `i`'s segments span (events cut
    /// by damage are counted): to schedule big stacks first, and the
    /// exports' progress.
    pub(crate) fn stack_weight(&self, i: usize) -> u64 {
        self.handles(i)
            .iter()
            .map(|&h| {
                let s = segment(&self.prep.passes, h);
                s.events(&self.prep.decoded.threads[s.thread as usize].chunks)
            })
            .sum()
    }

    /// The heaviest selected stacks (at most [`BIGGEST_FIRST`]), heaviest
    /// first, as (weight, index): [`crate::analyze`] replays them first, one
    /// a job, so that the last stacks replayed are short ones and every
    /// worker finishes at about the same time.
    pub(crate) fn biggest(&self) -> &[(u64, usize)] {
        &self.biggest
    }

    /// Frees every segment once the stacks are replayed (they are most of
    /// the heap), keeping what the report still needs of the passes.
    pub(crate) fn drop_segments(&mut self) {
        for p in &mut self.prep.passes {
            p.segments = SegmentList::default();
        }
        self.order = Vec::new();
        for (_, range) in &mut self.stacks {
            *range = 0..0;
        }
    }

    /// An empty tally for this trace's functions.
    pub(crate) fn new_tally(&self, paths: bool) -> Tally {
        Tally::new(self.prep.functions.dense_len(), paths, self.prep.window)
    }
}

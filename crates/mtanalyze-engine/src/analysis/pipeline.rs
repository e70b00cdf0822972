//! The batch engines (see the planner's table in `plan.rs`):
//!
//! - [`batch`]: every segment cut (threads in parallel), grouped by
//!   stack, then every stack replayed, stacks in parallel: where the
//!   stream gave up (a stack run after an end that counted), and the
//!   reference the tests compare the stream with;
//! - [`sequential`]: the same one step after the other on the calling
//!   thread, with one tally for every stack of the trace (the own stacks
//!   the segment pass replays, then the others) kept in a [`Scratch`]
//!   from trace to trace: what a worker of [`crate::analyze_many`] does,
//!   where the traces, not their stacks, are what runs in parallel;
//! - [`numbered`]: [`sequential`] for a worker that sums its traces: it
//!   numbers every trace's functions as its sums number them (by name,
//!   file and line), so the tally it keeps counts every trace under the
//!   same numbers: its edges are numbered once for all the worker's
//!   traces, and a trace's rows reach the sums by index, without a
//!   lookup (see [`Scratch`]). Small traces of one program then cost
//!   about what the same events in one big trace cost.
//!
//! All three give the same report.

use std::sync::Mutex;

use rayon::prelude::*;

use crate::analysis::assemble::{assemble, fold_numbered, EdgeTotals, Rows, Source};
use crate::analysis::cut::OwnReplay;
use crate::analysis::decode::Numbering;
use crate::analysis::frames::{Acc, NoObserver, Tally};
use crate::analysis::options::{AnalyzeError, AnalyzeOptions, PathMode};
use crate::analysis::paths::{ROOT, STACK_LABEL};
use crate::analysis::prepare::{Decoding, Fuse};
use crate::analysis::replay::{StackReplay, StackTotals};
use crate::analysis::segment::StackKey;
use crate::analysis::stacks::Analysis;
use crate::analysis::window::Window;
use crate::input::LoadedTrace;
use crate::threads;
use mtanalyze_model::compact::CompactReport;
use mtanalyze_model::merge::Sums;
use mtanalyze_model::report::{StackName, StackStats};
use mtanalyze_model::warnings::Warnings;
use mtrace_format::StackKind;

/// The batch engine: every segment of the decoded `trace` cut, then
/// grouped by stack, then every stack replayed. `stage_done` is called as
/// each stage ends (`cut`, `group`, `replay`).
pub(crate) fn batch<'a>(
    trace: &'a LoadedTrace,
    decoding: Decoding<'a>,
    opts: &AnalyzeOptions,
    stage_done: &mut dyn FnMut(&'static str),
) -> Result<CompactReport, AnalyzeError> {
    let mut analysis = Analysis::build(trace, decoding, opts, Fuse::PerThread, stage_done)?;
    // Own stacks the segment pass replayed wait only for the end of the trace.
    let fused: Vec<(u64, OwnReplay)> = {
        let prep = &mut analysis.prep;
        prep.passes
            .iter_mut()
            .zip(&prep.decoded.threads)
            .filter_map(|(p, t)| Some((t.tid.0, p.own_replay.take()?)))
            .collect()
    };
    // One slot per selected stack, in id order, filled where it lies: the
    // totals of half a million tasks are never moved from vector to
    // growing vector, nor sorted.
    let mut totals: Vec<Option<StackTotals>> = Vec::new();
    totals.resize_with(analysis.stack_count(), || None);
    let (mut acc, mut warnings) = replay_stacks(&analysis, opts.paths, &mut totals);
    let end_ns = analysis.end_ns();
    let finished: Vec<_> = threads::map_collect(fused, |(tid, own)| {
        // Each thread replayed into its own tally (`Fuse::PerThread`).
        let mut tally = own.tally.unwrap_or_else(|| analysis.new_tally(false));
        let stats = StackReplay::resume(
            own.state,
            &mut tally,
            &mut NoObserver,
            analysis.replay_clock,
            end_ns,
            own.ends_at_ns,
        );
        (tally.into_acc(), (StackKey::Own(tid), stats), own.warnings)
    });
    let mut own: Vec<(StackKey, StackTotals)> = Vec::with_capacity(finished.len());
    for (a, stats, w) in finished {
        acc.merge(a);
        own.push(stats);
        warnings.merge(w);
    }
    stage_done("replay");
    Ok(report_of(
        trace,
        analysis,
        opts,
        acc,
        (totals, own, warnings),
        Rows::Made,
    ))
}

/// What a worker keeps from trace to trace for [`sequential`] and [`numbered`]:
/// one tally, whose tables then grow once, not per trace.
#[derive(Default)]
pub(crate) struct Scratch {
    tally: Option<Tally>,
    /// For traces whose rows are summed, not made.
    pub(crate) summed: SummedScratch,
}

/// What a worker that sums its traces keeps from trace to trace: a tally
/// whose functions are numbered as the worker's sums number them (see
/// [`Numbering`]), so that its edges keep their numbers from trace to
/// trace too, and what those edges summed so far. A trace then costs no
/// function table of its own, no renumbering of its edges and no lookup
/// of each function row and edge in the sums: the per-trace work that a
/// merge of many small traces does on top of one big trace's.
#[derive(Default)]
pub(crate) struct SummedScratch {
    /// The tally (`None` at first, or if an analysis that failed kept it).
    tally: Option<Tally>,
    /// What the tally's edges summed, by their numbers in it.
    edges: EdgeTotals,
    /// The functions the last trace counted in the tally, if it was
    /// folded into the sums (else the next trace clears the whole tally).
    last: Option<Vec<u32>>,
    /// `last`'s vector while a trace is analyzed (reused for its list;
    /// `last` is `None` until the trace is folded).
    last_taken: Option<Vec<u32>>,
    /// [`Numbering::met`].
    met: Vec<u32>,
    /// [`Numbering::trace`] of the last trace.
    trace: u32,
}

/// A worker's tally forgets its edges' numbers (their sums going to the
/// sums) when it numbers more than this many times the edges of the last
/// trace, plus [`EDGES_KEPT_SPARE`]: a trace's fold reads every edge the
/// tally numbers, so many traces of different programs would otherwise
/// read ever more edges per trace.
const EDGES_KEPT_PER_TRACE_EDGE: usize = 4;
/// See [`EDGES_KEPT_PER_TRACE_EDGE`].
const EDGES_KEPT_SPARE: usize = 4096;

impl Scratch {
    /// Adds what the worker's tally summed but has not yet added to `sums`
    /// (call it when the worker is done, before `sums` are read).
    pub(crate) fn flush(&mut self, sums: &mut Sums) {
        self.summed.edges.flush(sums);
        if let Some(t) = &mut self.summed.tally {
            t.forget_edges();
        }
    }
}

#[cfg(test)]
impl Scratch {
    /// How many edges the tally of a worker that sums its traces numbers
    /// (`None` before its first trace): none right after a trace whose
    /// fold made it forget them (see [`EDGES_KEPT_PER_TRACE_EDGE`]).
    pub(super) fn summed_edges_numbered(&self) -> Option<usize> {
        self.summed.tally.as_ref().map(Tally::edge_count)
    }
}

/// The sequential engine (see the module doc): the decoded `trace`
/// analyzed on the calling thread, one stage and one stack after the
/// other, every stack into `scratch`'s tally. The stages that split work
/// with rayon still do, in whatever pool the caller runs this in (a
/// worker of [`crate::analyze_many`]: a pool of one thread, so nothing
/// leaves the worker).
pub(crate) fn sequential<'a>(
    trace: &'a LoadedTrace,
    decoding: Decoding<'a>,
    opts: &AnalyzeOptions,
    scratch: &mut Scratch,
) -> Result<CompactReport, AnalyzeError> {
    let tally = scratch
        .tally
        .take()
        .unwrap_or_else(|| Tally::new(0, false, Window::ALL));
    let fuse = Fuse::Shared(Box::new(tally));
    let (mut analysis, mut tally) = build_shared(trace, decoding, opts, fuse)?;
    let replayed = replay_in(&mut analysis, &mut tally, opts.paths);
    let acc = tally.take_acc();
    scratch.tally = Some(tally);
    Ok(report_of(trace, analysis, opts, acc, replayed, Rows::Made))
}

impl SummedScratch {
    /// Readies the tally for the next trace and numbers that trace: the
    /// tally (cleared of the last trace's functions) and the numbering the
    /// trace must be decoded with, then given to [`numbered`].
    pub(crate) fn next_trace<'s>(&'s mut self, sums: &'s mut Sums) -> (Tally, Numbering<'s>) {
        let tally = match self.tally.take() {
            Some(mut t) => {
                t.clear_numbered(self.last.as_deref());
                t
            }
            None => {
                // A new tally numbers edges anew: what the old one numbered
                // goes to the sums first.
                self.edges.flush(sums);
                Tally::new(0, false, Window::ALL)
            }
        };
        // Until this trace is folded, the tally is not known to be clear.
        self.last_taken = self.last.take();
        if self.trace == u32::MAX {
            self.met.fill(0);
            self.trace = 0;
        }
        self.trace += 1;
        let numbering = Numbering {
            sums,
            met: &mut self.met,
            trace: self.trace,
        };
        (tally, numbering)
    }
}

/// The numbered engine (see the module doc), first half: the decoded
/// `trace` (decoded with `numbering`, from [`SummedScratch::next_trace`],
/// as is `tally`) cut and grouped as [`sequential`] does, its own stacks
/// replayed into the worker's tally under the sums' numbers. Then
/// [`numbered`].
pub(crate) fn build_numbered<'a>(
    trace: &'a LoadedTrace,
    decoding: Decoding<'a>,
    opts: &AnalyzeOptions,
    (tally, numbering): (Tally, Numbering<'_>),
) -> Result<(Analysis<'a>, Tally), AnalyzeError> {
    build_shared(
        trace,
        decoding,
        opts,
        Fuse::Numbered(Box::new(tally), numbering),
    )
}

/// The numbered engine, second half: the built `analysis` replayed into
/// `tally`, its statistics added to `sums` as trace `number` (its edges
/// to `scratch`'s, see [`SummedScratch`]).
pub(crate) fn numbered(
    trace: &LoadedTrace,
    (mut analysis, mut tally): (Analysis<'_>, Tally),
    opts: &AnalyzeOptions,
    scratch: &mut SummedScratch,
    sums: &mut Sums,
    number: u32,
) -> CompactReport {
    let mut last = scratch.last_taken.take().unwrap_or_default();
    let replayed = replay_in(&mut analysis, &mut tally, opts.paths);
    let edges = fold_numbered(
        &mut tally,
        analysis.functions(),
        sums,
        number,
        &mut scratch.edges,
    );
    if tally.edge_count() > EDGES_KEPT_PER_TRACE_EDGE * edges + EDGES_KEPT_SPARE {
        scratch.edges.flush(sums);
        tally.forget_edges();
    }
    last.clear();
    last.extend(analysis.functions().numbers());
    // The tally's sums go on to the next trace; this trace's warnings not.
    let left_open = tally.take_left_open();
    scratch.last = Some(last);
    scratch.tally = Some(tally);
    report_of(
        trace,
        analysis,
        opts,
        Acc {
            left_open,
            ..Acc::default()
        },
        replayed,
        Rows::Summed,
    )
}

/// [`Analysis::build`] with `fuse` (one tally every stack of the trace is
/// replayed into: `Fuse::Shared` or `Fuse::Numbered`) and that tally.
fn build_shared<'a>(
    trace: &'a LoadedTrace,
    decoding: Decoding<'a>,
    opts: &AnalyzeOptions,
    fuse: Fuse<'_>,
) -> Result<(Analysis<'a>, Tally), AnalyzeError> {
    let mut analysis = Analysis::build(trace, decoding, opts, fuse, &mut |_| {})?;
    // Both fusions leave their tally there (`prepare` keeps it).
    let tally = analysis
        .prep
        .tally
        .take()
        .unwrap_or_else(|| Tally::new(0, false, Window::ALL));
    Ok((analysis, tally))
}

/// What the replay of a trace's stacks gives: each selected stack's
/// statistics, the own stacks' (by key), the problems found.
type Replayed = (StackSlots, Vec<(StackKey, StackTotals)>, Warnings);

/// The report of a replayed `analysis` (`acc`: its summed statistics).
/// The segments are freed first: they are not needed for the rows.
fn report_of(
    trace: &LoadedTrace,
    mut analysis: Analysis<'_>,
    opts: &AnalyzeOptions,
    acc: Acc,
    (totals, own, warnings): Replayed,
    rows_to: Rows,
) -> CompactReport {
    analysis.drop_segments();
    let stacks = rows(&analysis, totals, own);
    let source = Source::of(analysis, opts);
    assemble(trace, source, opts, acc, stacks, warnings, rows_to)
}

/// The statistics of one selected stack (`None`: not replayed), by index.
type StackSlots = Vec<Option<StackTotals>>;

/// Replays every selected stack of `analysis` into `tally`, one after the
/// other, then finishes the own stacks the segment pass replayed into it:
/// each selected stack's statistics, the own stacks', and the problems
/// found.
fn replay_in(analysis: &mut Analysis<'_>, tally: &mut Tally, paths: PathMode) -> Replayed {
    tally.grow(analysis.functions().dense_len());
    let mut warnings = analysis.prep.decoded.warnings();
    let mut totals: StackSlots = Vec::new();
    totals.resize_with(analysis.stack_count(), || None);
    for (i, row) in totals.iter_mut().enumerate() {
        analysis.prefetch(i + SEGMENTS_AHEAD, false);
        analysis.prefetch(i + EVENTS_AHEAD, true);
        let root = match paths {
            PathMode::PerStack => STACK_LABEL | i as u32,
            _ => ROOT,
        };
        *row = analysis.replay(i, tally, &mut warnings, root, &mut NoObserver);
    }
    // The own stacks the segment pass replayed, suspended on this tally.
    let end_ns = analysis.end_ns();
    let mut own = Vec::new();
    let prep = &mut analysis.prep;
    for (p, t) in prep.passes.iter_mut().zip(&prep.decoded.threads) {
        let Some(o) = p.own_replay.take() else {
            continue;
        };
        let stats = StackReplay::resume(
            o.state,
            tally,
            &mut NoObserver,
            analysis.replay_clock,
            end_ns,
            o.ends_at_ns,
        );
        own.push((StackKey::Own(t.tid.0), stats));
        warnings.merge(o.warnings);
    }
    (totals, own, warnings)
}

/// The report's rows, in id order, from the totals of the selected stacks
/// (in id order, by [`Analysis::stack_key`]) and of the own stacks the
/// segment pass replayed (`own`, ascending by thread id), still unnamed.
fn rows(
    analysis: &Analysis<'_>,
    totals: Vec<Option<StackTotals>>,
    mut own: Vec<(StackKey, StackTotals)>,
) -> Vec<StackStats> {
    own.sort_unstable_by_key(|(k, _)| *k);
    let mut own = own.into_iter().peekable();
    let mut rows = Vec::with_capacity(totals.len() + own.len());
    let replayed = totals
        .into_iter()
        .enumerate()
        .filter_map(|(i, t)| Some((analysis.stack_key(i)?, t?)));
    for (key, t) in replayed {
        while let Some((k, o)) = own.next_if(|(k, _)| *k < key) {
            rows.push(o.into_row(k, StackName::default(), StackKind::Unspecified));
        }
        rows.push(t.into_row(key, StackName::default(), StackKind::Unspecified));
    }
    rows.extend(own.map(|(k, o)| o.into_row(k, StackName::default(), StackKind::Unspecified)));
    rows
}

/// A replay worker's tally and warnings (boxed: moved from stack to stack).
type Job = Box<(Tally, Warnings)>;

/// How many stacks ahead of the one replayed its segments are prefetched.
const SEGMENTS_AHEAD: usize = 4;
/// How many stacks ahead of the one replayed its first events are prefetched.
const EVENTS_AHEAD: usize = 2;

/// Replays every selected stack that has segments, in parallel, stack
/// `i`'s statistics into `rows[i]`; returns the summed statistics and the
/// problems found.
fn replay_stacks(
    analysis: &Analysis<'_>,
    paths: PathMode,
    rows: &mut [Option<StackTotals>],
) -> (Acc, Warnings) {
    let with_paths = paths != PathMode::Off;
    // A job's tally and warnings go from stack to stack by value (rayon's
    // fold): boxed, that is a pointer, not a few hundred bytes per stack.
    let replay_into = |mut job: Job, i: usize, row: &mut _| {
        // Stacks are replayed in id order within a job: load the segments
        // of the stacks a few ahead, and the events of the next ones.
        analysis.prefetch(i + SEGMENTS_AHEAD, false);
        analysis.prefetch(i + EVENTS_AHEAD, true);
        let root = match paths {
            PathMode::PerStack => STACK_LABEL | i as u32,
            _ => ROOT,
        };
        let (tally, warnings) = &mut *job;
        *row = analysis.replay(i, tally, warnings, root, &mut NoObserver);
        job
    };
    let new_job = || {
        let warnings = analysis.prep.decoded.warnings();
        Box::new((analysis.new_tally(with_paths), warnings))
    };
    // Biggest stacks first, each a job: the last stacks replayed are then
    // short ones, and all workers finish at about the same time. (The
    // fused own stacks have no segments, so they are not among these.)
    // With many stacks only the biggest need to go first: the rest are
    // many to a job, and sorting half a million short tasks bought nothing.
    let mut big: Vec<(usize, Option<StackTotals>)> =
        analysis.biggest().iter().map(|&(_, i)| (i, None)).collect();
    let merge = |(mut a, mut wa): (Acc, Warnings), (b, wb): (Acc, Warnings)| {
        a.merge(b);
        wa.merge(wb);
        (a, wa)
    };
    // One tally per worker thread for them, not one per stack: a tally is
    // O(functions), and a fold that splits to single stacks made 4096 of
    // them (20,000 functions: 5 GB zeroed for a 1 MB trace).
    let slots: Vec<Mutex<Option<Job>>> = (0..threads::current_num_threads())
        .map(|_| Mutex::new(None))
        .collect();
    let replay_big = |(i, row): &mut (usize, Option<StackTotals>)| {
        let slot = threads::current_thread_index().unwrap_or(0) % slots.len();
        // Each worker has its own slot: the lock is never contended, and
        // a panic elsewhere leaves nothing half-written in it.
        let mut held = slots[slot].lock().unwrap_or_else(|e| e.into_inner());
        let job = held.take().unwrap_or_else(new_job);
        *held = Some(replay_into(job, *i, row));
    };
    if threads::parallel() {
        big.par_iter_mut().with_max_len(1).for_each(replay_big);
    } else {
        big.iter_mut().for_each(replay_big);
    }
    let done_big = slots
        .into_iter()
        .filter_map(|s| s.into_inner().unwrap_or_else(|e| e.into_inner()))
        .map(|job| (job.0.into_acc(), job.1))
        .reduce(merge);
    let mut is_big = vec![false; rows.len()];
    for (i, row) in big {
        is_big[i] = true;
        rows[i] = row;
    }
    // The rest in id order, where their rows lie. Each fold job starts a
    // tally (O(functions)): with thousands of short stacks, every job takes
    // a run of them rather than one each. Jobs are no longer than that
    // either, so an idle worker always finds one to steal (rayon stops
    // splitting a range once it runs).
    let per_job = (rows.len() / (threads::current_num_threads() * 16)).max(1);
    let done_rest = if threads::parallel() {
        rows.par_iter_mut()
            .enumerate()
            .with_min_len(per_job)
            .with_max_len(per_job)
            .filter(|(i, _)| !is_big[*i])
            .fold(new_job, |job, (i, row)| replay_into(job, i, row))
            .map(|job| (job.0.into_acc(), job.1))
            .reduce_with(merge)
    } else {
        (!rows.is_empty()).then(|| {
            let job = rows
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| !is_big[*i])
                .fold(new_job(), |job, (i, row)| replay_into(job, i, row));
            (job.0.into_acc(), job.1)
        })
    };
    match (done_big, done_rest) {
        (Some(a), Some(b)) => merge(a, b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => (
            analysis.new_tally(with_paths).into_acc(),
            Warnings::default(),
        ),
    }
}

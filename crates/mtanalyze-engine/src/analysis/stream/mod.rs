//! The streamed analysis: the segment pass and the replay take turns in
//! steps of time, so a stack is replayed while its events are still in
//! cache, and its segments are dropped as soon as they are replayed.
//!
//! ```text
//! step:  every thread cut until its clock reaches T (whole chunks; threads in parallel)
//!        H = the lowest clock of a thread not done: no event still to read is before H
//!        `gil`: every thread's events before H merged into the runs; the runs before
//!        the earliest segment not replayed yet dropped
//!        each stack's closed segments that start before H (`gil`: whose switch away
//!        is before H) and before a segment of it still open on some thread, replayed
//!        in time order onto its suspended replay
//!        (stacks in lanes by id, one tally a lane, lanes in parallel)
//!        each stack's latest `end` before H judged as `ends.rs` judges it: if it
//!        counts, the stack is finished there and its row made; T = H + a step
//! last:  every thread's last segment runs to the end of the trace; every stack
//!        still alive finished there; own stacks (replayed by the segment pass,
//!        or under `gil` in the lanes, as logical ones) too
//! ```
//!
//! A task-per-request trace then holds only the stacks alive at a time,
//! not every segment of the trace (nor, under `gil`, every run); the
//! report's rows are made as stacks finish. Judging an end before the
//! whole trace is read assumes nothing later runs the stack again or ends
//! it again (a correct recorder never does); if something does, the
//! stream stops and [`crate::analyze`] starts over the batch way, whose
//! judgment sees everything. A function the metadata does not name is
//! numbered as a step's passes meet it (`FreshFunctions`).
//! A selection of stacks it makes as the batch does: a stack left out is
//! not replayed, but the times its end is judged against are kept; one
//! selected by thread (`--thread`: a thread that ran it is) is held, its
//! segments not replayed, until a selected thread runs it, or it finishes
//! left out.
//! Call paths it keeps as the batch does: each stack's replay grows its
//! own tree, which stays with the stack while it is set aside between
//! steps (its open frames point into it) and joins its tally's when the
//! stack finishes.
//! Losses it judges as the batch does: a thread restarts from a chunk's
//! snapshot after lost chunks, a pause, a `lost` mark or a damaged event,
//! and a stack paused when a thread's events ended at a mark ends at the
//! mark, which every thread read to its end tells before the horizon
//! passes it ([`first_final_mark`]). Reports are identical either way
//! (`tests/semantics.rs` compares them).
//!
//! This file drives the steps (cut, route, settle, finish); `lanes.rs`
//! holds the lanes: what each keeps of its stacks between steps, and how
//! it replays them and judges their ends.

use rustc_hash::FxHashMap;

use crate::analysis::assemble::{assemble, lived_in_window, path_label, Rows, Source};
use crate::analysis::clock::{GilMerge, GilTimeline};
use crate::analysis::cut::{FusedOwn, ThreadStream};
use crate::analysis::decode::{Decoded, FreshFunctions, FunctionTable, Pos};
use crate::analysis::frames::{Acc, NoObserver, Tally};
use crate::analysis::options::{own_stack_wanted, AnalyzeOptions, PathMode};
use crate::analysis::paths::{ROOT, STACK_LABEL};
use crate::analysis::prepare::{replay_clock, Clocks, Decoding, Prepared};
use crate::analysis::replay::{stack_kind, stack_name, ReplayContext, StackReplay};
use crate::analysis::segment::{Segment, StackKey};
use crate::analysis::window::Window;
use crate::input::LoadedTrace;
use mtanalyze_model::compact::CompactReport;
use mtanalyze_model::report::{Clock, StackName, StackRows, StackStats};
use mtanalyze_model::sink::StackSink;
use mtanalyze_model::warnings::Warnings;

mod lanes;

use lanes::{route, route_parts, Lane, PathLabels, Selection};

/// How many events a step reads, all threads together, on a trace of many
/// stacks: about a megabyte of events, still in cache when their stacks
/// are replayed, and few stacks started in a step to hold until it ends.
/// (A trace of few stacks takes longer steps: `plan.rs`.)
pub(crate) const STEP_EVENTS: u64 = 1 << 16;

/// How many events a step reads, at least, for each open frame the step
/// before it set aside: a step takes up each stack it runs and sets it
/// aside again, its open frames taken off its lane's running sum and put
/// back, so the steps grow with what that costs. (On CPython's asyncio
/// trace of 2,003 tasks alive at once, about 6,000 frames, steps of 65,536
/// events ran 10% more instructions than the batch way; steps of 262,144,
/// 1.4%, for 4% more memory. A task-per-request trace sets aside a few
/// hundred frames a step and keeps its steps, and the memory they hold.)
pub(crate) const STEP_EVENTS_PER_FRAME: u64 = 64;

/// What the planner decided for a stream: its steps, and where the own
/// stacks are replayed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamPlan {
    pub(crate) step: StepSize,
    /// Each thread's own stack is replayed by its segment pass, into a
    /// tally of the thread's own, when the clock is not `gil`; else (the
    /// tallies, one a thread, would not fit the memory the trace allows)
    /// in the lanes, as logical stacks are.
    pub(crate) own_in_passes: bool,
}

/// How many events a stream's steps read: at least `events`, and
/// `per_frame` for each open frame the step before set aside (see
/// [`STEP_EVENTS_PER_FRAME`]; 0: exactly `events`, as the tests that
/// compare small steps ask).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StepSize {
    pub(crate) events: u64,
    pub(crate) per_frame: u64,
}

/// Analyzes the decoded `trace` as a stream (see the module doc), as
/// `plan` says. A stream that meets what it cannot judge (a stack run
/// after its end) gives the decoded trace back ([`Streamed::GaveUp`]).
/// `stage_done` is called with `replay` once every step is done (the
/// stream has no other stage before `assemble`). With
/// `StackRows::Handed`, `sink` gets each stack's row, named, as its stack
/// finishes (rows handed before a stream gives up stay handed: the caller
/// tells the sink to start again).
pub(crate) fn analyze_streamed<'a>(
    trace: &'a LoadedTrace,
    decoding: Decoding<'a>,
    opts: &AnalyzeOptions,
    plan: StreamPlan,
    stage_done: &mut dyn FnMut(&'static str),
    sink: &mut dyn StackSink,
) -> Streamed<'a> {
    let Decoding {
        decoded,
        window,
        clock: asked,
    } = decoding;
    let clock = asked.unwrap_or(Clock::Stack);
    // As the batch replays (a one-thread `gil` trace under `stack`), so
    // that either engine gives one report.
    let clocks = Clocks {
        report: clock,
        replay: replay_clock(clock, &decoded),
    };
    let parts = match stream(decoded, clocks, window, plan, opts, sink) {
        Ok(parts) => parts,
        Err(GaveUp(decoded)) => {
            return Streamed::GaveUp(Decoding {
                decoded: *decoded,
                window,
                clock: asked,
            })
        }
        Err(GaveUpLate(prep)) => return Streamed::GaveUp(prep.into_decoding(asked)),
    };
    stage_done("replay");
    // Rows only counted were never held (the tests check it here: the
    // report would be the same, `assemble` drops them).
    debug_assert!(opts.stack_rows == StackRows::Kept || parts.rows.is_empty());
    let source = Source {
        prep: parts.prep,
        clock,
        all_stacks: parts.all_stacks,
        labels: parts.labels,
        rows_elsewhere: parts.rows_elsewhere,
    };
    Streamed::Done(assemble(
        trace,
        source,
        opts,
        parts.acc,
        parts.rows,
        parts.warnings,
        Rows::Made,
    ))
}

/// How a stream ended.
pub(crate) enum Streamed<'a> {
    /// The report.
    Done(CompactReport),
    /// The trace needs the batch analysis: here it is, decoded.
    GaveUp(Decoding<'a>),
}

/// Why [`stream`] stopped: during the steps (the decoded trace untouched)
/// or in the last one (the trace already prepared).
enum Stop<'a> {
    GaveUp(Box<Decoded<'a>>),
    GaveUpLate(Box<Prepared<'a>>),
}
use Stop::{GaveUp, GaveUpLate};

/// What a stream gives the report.
struct StreamedParts<'a> {
    prep: Prepared<'a>,
    /// The stack rows kept (unnamed, in no order).
    rows: Vec<StackStats>,
    /// The summed statistics.
    acc: Acc,
    /// The replays' warnings.
    warnings: Warnings,
    /// How many stacks the trace has.
    all_stacks: u64,
    /// Rows counted or handed instead of kept.
    rows_elsewhere: u64,
    /// The labels of per-stack call paths, by number.
    labels: Vec<String>,
}

/// The steps (see the module doc).
fn stream<'a>(
    mut decoded: Decoded<'a>,
    clocks: Clocks,
    window: Window,
    plan: StreamPlan,
    opts: &AnalyzeOptions,
    sink: &mut dyn StackSink,
) -> Result<StreamedParts<'a>, Stop<'a>> {
    let clock = clocks.replay;
    // The function table, apart from the trace: every pass and replay of
    // a step reads it, and between steps it takes in the ids the metadata
    // does not name that the step's passes met (`FreshFunctions`).
    let mut functions = std::mem::take(&mut decoded.functions);
    let mut fresh = FreshFunctions::new(&functions, None);
    let mut n_functions = functions.dense_len();
    let stack_rows = opts.stack_rows;
    let keep = stack_rows == StackRows::Kept;
    let with_paths = opts.paths != PathMode::Off;
    let n_lanes = crate::threads::current_num_threads().max(1) as u32;
    // Per-stack call paths are labelled by number: lane `k` numbers its
    // stacks `k`, `k + n + 1`... and own stacks take the numbers left
    // (`n`, `2n + 1`..., by thread).
    let own_label = |index: u32| n_lanes + (n_lanes + 1) * index;
    // The segment pass replays own stacks on the way, but under `gil`,
    // which needs every thread's events first, those the options leave
    // out, and where a tally a thread would not fit: then the lanes do,
    // as logical ones.
    let fused = |index: u32| {
        let tid = decoded.threads[index as usize].tid.0;
        let selected = own_stack_wanted(tid, opts);
        (plan.own_in_passes && clock != Clock::Gil && selected).then(|| FusedOwn {
            clock,
            paths_root: match opts.paths {
                PathMode::Off => None,
                PathMode::Merged => Some(ROOT),
                PathMode::PerStack => Some(STACK_LABEL | own_label(index)),
            },
        })
    };
    let mut out = RowsOut {
        stack_rows,
        sink,
        window: !window.is_all(),
        elsewhere: 0,
    };
    let mut threads: Vec<ThreadStream> = (0..decoded.threads.len() as u32)
        .map(|i| ThreadStream::new(&decoded, i, fused(i), n_functions, window))
        .collect();
    let mut lanes: Vec<Lane> = (0..n_lanes)
        .map(|lane| {
            let tally = Tally::new(n_functions, with_paths, window);
            let labels =
                (opts.paths == PathMode::PerStack).then(|| PathLabels::new(lane, n_lanes + 1));
            let selection = Selection {
                stacks: opts.stacks.clone(),
                threads: opts.threads.clone(),
            };
            Lane::new(tally, stack_rows, decoded.warnings(), labels, selection)
        })
        .collect();
    // One vector for every row, made for as many as the trace names (the
    // recorder names every task), but no more than it has events (a stack
    // runs from an event on): rows gathered per lane and joined at the end
    // would be held twice. (None if the rows are only counted: each
    // step's are dropped.)
    let events = decoded.events();
    let named = (decoded.stack_names.len() as u64).min(events) as usize;
    let room = if keep {
        named + decoded.threads.len()
    } else {
        0
    };
    let mut rows: Vec<StackStats> = Vec::with_capacity(room);
    let mut step = Step::new(&decoded, events, plan.step);
    let mut horizon = 0u64;
    let mut read = 0u64;
    let mut opens = FxHashMap::default();
    let mut first_mark_ns = None;
    // The `gil` clock's runs, merged up to the horizon before each replay,
    // and dropped once no stack can need them (`earliest`: the earliest
    // start of a segment not replayed yet).
    let mut gil = (clock == Clock::Gil).then(|| {
        let timeline = GilTimeline::streamed(decoded.scale);
        (timeline, GilMerge::new(&decoded))
    });
    let mut earliest = 0u64;
    // Step k's replay runs beside step k+1's segment pass: the lanes have
    // what the pass found up to step k in their inboxes, and the threads
    // go on from there.
    loop {
        let until = horizon.saturating_add(step.ticks);
        let ((), replay) = crate::threads::join(
            || {
                crate::threads::for_each(&mut threads, |t| {
                    t.cut_until(&decoded, &functions, &fresh, until)
                })
            },
            || {
                let opens = std::mem::take(&mut opens);
                let timeline = gil.as_mut().map(|(timeline, merge)| {
                    timeline.prune_before(earliest);
                    timeline.extend(merge, horizon);
                    &*timeline
                });
                let ctx = ReplayContext {
                    first_mark_ns,
                    ..context(&decoded, &functions, clock, timeline, u64::MAX)
                };
                crate::threads::try_for_each(&mut lanes, |lane| {
                    lane.step(&ctx, Some(horizon), &opens)
                })
            },
        );
        if replay.is_err() {
            // What the steps replayed is dropped; the decode is not (its
            // table keeps the functions numbered so far).
            drop(threads);
            fresh.fold_into(&mut functions);
            decoded.functions = functions;
            return Err(GaveUp(Box::new(decoded)));
        }
        // The ids the metadata does not name that the passes met: the
        // next step's replays count them, and the own stacks' replays
        // may meet them in the table.
        fresh.fold_into(&mut functions);
        if functions.dense_len() > n_functions {
            n_functions = functions.dense_len();
            lanes
                .iter_mut()
                .for_each(|l| l.work.tally.grow(n_functions));
            threads
                .iter_mut()
                .for_each(|t| t.grow_functions(n_functions));
        }
        out.take(&mut lanes, &mut rows);
        let now_read: u64 = threads.iter().map(|t| t.pass.events).sum();
        let set_aside = lanes.iter_mut().map(Lane::take_frames_set_aside).sum();
        step.adapt(now_read - read, set_aside);
        read = now_read;
        let next = threads.iter().filter_map(ThreadStream::floor).min();
        let Some(h) = next else { break };
        horizon = h;
        opens = open_segments(&threads);
        first_mark_ns = first_final_mark(&threads).map(|t| decoded.scale.ns(t));
        route(&mut threads, &decoded, &mut lanes);
        if gil.is_some() {
            earliest = threads
                .iter()
                .filter_map(|t| Some(t.open_segment()?.start_tick))
                .chain(lanes.iter().filter_map(Lane::earliest_segment))
                .fold(horizon, u64::min);
        }
    }
    // Every event read: the last segments run to the end of the trace.
    let mut passes: Vec<_> = threads.into_iter().map(|t| t.finish(&decoded)).collect();
    for (index, pass) in passes.iter_mut().enumerate() {
        route_parts(index, &decoded, pass, &mut lanes);
    }
    let mut timeline = gil.map(|(mut timeline, mut merge)| {
        timeline.extend(&mut merge, u64::MAX);
        timeline
    });
    decoded.functions = functions;
    let mut prep = Prepared::new(decoded, passes, Some(clocks), None, window, None);
    debug_assert_eq!(
        prep.functions.dense_len(),
        n_functions,
        "a function numbered late"
    );
    let end_ns = prep.ns(prep.end_tick);
    if let Some(t) = &mut timeline {
        t.set_end(end_ns);
    }
    let ctx = ReplayContext {
        first_mark_ns: prep.first_mark_ns(),
        ..context(
            &prep.decoded,
            &prep.functions,
            clock,
            timeline.as_ref(),
            prep.end_tick,
        )
    };
    let last = crate::threads::try_for_each(&mut lanes, |lane| lane.last_step(&ctx, end_ns));
    if last.is_err() {
        return Err(GaveUpLate(Box::new(prep)));
    }
    out.take(&mut lanes, &mut rows);
    let mut acc: Option<Acc> = None;
    let mut warnings = Warnings::default();
    let mut all_stacks = 0;
    let mut labels = Vec::new();
    let mut label = |n: u32, key: StackKey| {
        let n = n as usize;
        if labels.len() <= n {
            labels.resize(n + 1, String::new());
        }
        labels[n] = path_label(&prep.decoded, key);
    };
    for Lane { work, .. } in lanes {
        all_stacks += work.seen;
        warnings.merge(work.warnings);
        for (n, key) in work.labels.map(|l| l.given).unwrap_or_default() {
            label(n, key);
        }
        let a = work.tally.into_acc();
        match &mut acc {
            Some(sum) => sum.merge(a),
            None => acc = Some(a),
        }
    }
    let mut acc = acc.unwrap_or_else(|| Acc::new(n_functions, with_paths));
    // The own stacks, each on its thread's tally.
    let own: Vec<_> = prep
        .passes
        .iter_mut()
        .zip(&prep.decoded.threads)
        .filter_map(|(p, t)| Some((t.tid.0, p.own_replay.take()?)))
        .collect();
    if opts.paths == PathMode::PerStack {
        for (index, t) in prep.decoded.threads.iter().enumerate() {
            label(own_label(index as u32), StackKey::Own(t.tid.0));
        }
    }
    all_stacks += own.len() as u64;
    let finished: Vec<_> = crate::threads::map_collect(own, |(tid, own)| {
        let mut tally = own
            .tally
            .unwrap_or_else(|| Tally::new(n_functions, with_paths, window));
        let stats = StackReplay::resume(
            own.state,
            &mut tally,
            &mut NoObserver,
            clock,
            end_ns,
            own.ends_at_ns,
        );
        let key = StackKey::Own(tid);
        let kind = stack_kind(&prep.decoded, key);
        let row = stats.into_row(key, row_name(stack_rows, &prep.decoded, key), kind);
        (tally.into_acc(), row, own.warnings)
    });
    for (a, row, w) in finished {
        acc.merge(a);
        out.row(row, &mut rows);
        warnings.merge(w);
    }
    Ok(StreamedParts {
        prep,
        rows,
        acc,
        warnings,
        all_stacks,
        rows_elsewhere: out.elsewhere,
        labels,
    })
}

/// Where the rows go as their stacks finish (`AnalyzeOptions::stack_rows`).
struct RowsOut<'s> {
    stack_rows: StackRows,
    sink: &'s mut dyn StackSink,
    /// The report has a time window (which shows only the stacks that
    /// lived in it).
    window: bool,
    /// Rows counted or handed (of stacks the report shows).
    elsewhere: u64,
}

impl RowsOut<'_> {
    /// Takes the rows the lanes made in a step.
    fn take(&mut self, lanes: &mut [Lane], rows: &mut Vec<StackStats>) {
        for lane in lanes {
            match self.stack_rows {
                StackRows::Kept => rows.append(&mut lane.work.rows),
                _ => {
                    for row in lane.work.rows.drain(..) {
                        self.row(row, rows);
                    }
                }
            }
        }
    }

    /// Takes one row.
    fn row(&mut self, row: StackStats, rows: &mut Vec<StackStats>) {
        if self.stack_rows == StackRows::Kept {
            return rows.push(row);
        }
        // As `assemble` filters the rows it keeps.
        if self.window && !lived_in_window(&row) {
            return;
        }
        self.elsewhere += 1;
        if self.stack_rows == StackRows::Handed {
            // Named where it was made ([`row_name`]).
            self.sink.row(row);
        }
    }
}

/// The name stack `key`'s row is made with: the report's name
/// (`assemble.rs`) for a row handed over, which is named where it is made,
/// in parallel; none for a kept row (`assemble` names those in one pass
/// at the end) or a counted one.
pub(super) fn row_name(stack_rows: StackRows, decoded: &Decoded<'_>, key: StackKey) -> StackName {
    match stack_rows {
        StackRows::Handed => StackName::new(&stack_name(decoded, key)),
        StackRows::Kept | StackRows::Counted => StackName::default(),
    }
}

/// A replay context for the stream (`gil`: the `gil` clock's runs so far;
/// `end_tick`: the end of the trace once known; before, no segment that
/// runs to it is replayed), with no `lost` mark known yet.
fn context<'d, 'a>(
    decoded: &'d Decoded<'a>,
    functions: &'d FunctionTable<'a>,
    clock: Clock,
    gil: Option<&'d GilTimeline>,
    end_tick: u64,
) -> ReplayContext<'d, 'a> {
    ReplayContext {
        decoded,
        functions,
        clock,
        gil,
        end_tick,
        first_mark_ns: None,
    }
}

/// How far in ticks a step reads, adapted to read about the events asked for.
struct Step {
    ticks: u64,
    size: StepSize,
}

impl Step {
    /// Steps of about `size.events` of the trace's `total` events.
    fn new(decoded: &Decoded<'_>, total: u64, size: StepSize) -> Step {
        let size = StepSize {
            events: size.events.max(1),
            ..size
        };
        let h = decoded.file.header();
        // The recording's span over its events, else a millisecond.
        let span = h
            .end_tick
            .map(|e| e.saturating_sub(h.clock.start_tick))
            .filter(|&s| s > 0 && total > 0);
        let ticks = match span {
            Some(s) => ((s as u128 * size.events as u128) / total as u128) as u64,
            None => (h.clock.ticks_per_second() / 1000.0) as u64,
        };
        Step {
            ticks: ticks.max(1),
            size,
        }
    }

    /// A step read `read` events and set aside stacks with `frames` open
    /// frames: the next reads about as many as [`StepSize`] asks for them
    /// (within four times more or less ticks than this one).
    fn adapt(&mut self, read: u64, frames: u64) {
        let want = self
            .size
            .events
            .max(frames.saturating_mul(self.size.per_frame)) as u128;
        let scaled = self.ticks as u128 * want / (read.max(1) as u128);
        let lo = (self.ticks / 4).max(1) as u128;
        let hi = self.ticks.saturating_mul(4) as u128;
        self.ticks = scaled.clamp(lo, hi) as u64;
    }
}

/// A segment's place in its stack's time order (as `stacks.rs` sorts).
pub(super) type SegmentKey = (u64, u32, Pos);

pub(super) fn key(s: &Segment) -> SegmentKey {
    (s.start_tick, s.thread, s.start)
}

/// The earliest `lost` mark that ends a thread's events (ticks), among the
/// threads read to their end. A mark a thread read earlier may still be
/// followed by a restart, but that thread's floor is at the mark, so the
/// horizon is too: every mark before the horizon that ends a thread's
/// events is known, which is all a stack finished before it needs
/// ("Lost events", rule 3, in `schemas/semantics.md`).
fn first_final_mark(threads: &[ThreadStream]) -> Option<u64> {
    threads
        .iter()
        .filter(|t| t.floor().is_none())
        .filter_map(|t| t.pass.lost_at)
        .min()
}

/// The logical stacks some thread is on now, with the key of that segment.
fn open_segments(threads: &[ThreadStream]) -> FxHashMap<u64, SegmentKey> {
    let mut opens: FxHashMap<u64, SegmentKey> = FxHashMap::default();
    for s in threads.iter().filter_map(ThreadStream::open_segment) {
        if !s.is_own() {
            let k = key(s);
            opens
                .entry(s.stack)
                .and_modify(|o| *o = (*o).min(k))
                .or_insert(k);
        }
    }
    opens
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step reads about `events`, or `per_frame` for each frame the
    /// step before set aside if that is more, moving its ticks at most
    /// four times either way a step; 0 a frame keeps the steps as asked.
    #[test]
    fn steps_grow_with_the_frames_set_aside() {
        let size = StepSize {
            events: 1_000,
            per_frame: 10,
        };
        let mut step = Step { ticks: 400, size };
        // (events read, frames set aside, the next step's ticks, why)
        let turns = [
            (
                1_000,
                50,
                400,
                "500 events for 50 frames: the floor's 1,000",
            ),
            (1_000, 200, 800, "2,000 events for 200 frames"),
            (
                500,
                1_000,
                3_200,
                "20 times the events read: four times the ticks",
            ),
            (10_000, 0, 800, "a tenth: a quarter of the ticks"),
        ];
        for (read, frames, ticks, why) in turns {
            step.adapt(read, frames);
            assert_eq!(step.ticks, ticks, "{why}");
        }
        let exact = StepSize {
            per_frame: 0,
            ..size
        };
        let mut step = Step {
            ticks: 400,
            size: exact,
        };
        step.adapt(1_000, 1_000_000);
        assert_eq!(step.ticks, 400);
    }
}

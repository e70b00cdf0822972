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
//! judgment sees everything. So does whatever the stream does not handle:
//! call paths, stack selection, lost or damaged chunks, `lost` marks,
//! functions the metadata does not name. Reports are identical either way
//! (`tests/semantics.rs` compares them).

use rayon::prelude::*;
use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

use crate::analysis::assemble::{assemble, lived_in_window, Rows, Source};
use crate::analysis::clock::{GilMerge, GilTimeline};
use crate::analysis::cut::{NotStreamable, ThreadPass, ThreadStream};
use crate::analysis::decode::{Decoded, FunctionTable, Pos};
use crate::analysis::ends::{fits_end, ignore_end, replaces};
use crate::analysis::frames::{Acc, Leftover, NoObserver, Tally};
use crate::analysis::options::AnalyzeOptions;
use crate::analysis::paths::ROOT;
use crate::analysis::prepare::{Decoding, Prepared};
use crate::analysis::replay::{
    replay_one_segment, stack_name, ReplayContext, StackReplay, StackTotals, Suspended,
};
use crate::analysis::segment::{Segment, StackKey};
use crate::analysis::window::Window;
use crate::input::LoadedTrace;
use crate::model::compact::CompactReport;
use crate::model::report::{Clock, StackName, StackRows, StackStats};
use crate::model::sink::StackSink;
use crate::model::warnings::Warnings;

/// How many events a step reads, all threads together, by default: about
/// a megabyte of events, still in cache when their stacks are replayed.
/// (Larger steps, up to a million events, measured the same.)
pub(crate) const STEP_EVENTS: u64 = 1 << 16;

/// Analyzes the decoded `trace` as a stream (see the module doc), reading
/// about `step_events` events a step. The planner (`plan.rs`) sends only
/// what a stream can take (no call paths, no stack selection, every chunk
/// whole, tallies that fit); a stream that still meets what it cannot judge
/// (a stack run after its end, an unnamed function, a restart from a
/// snapshot) gives the decoded trace back ([`Streamed::GaveUp`]).
/// `stage_done` is called with `replay` once every step is done (the
/// stream has no other stage before `assemble`). With
/// `StackRows::Handed`, `sink` gets each stack's row, named, as its stack
/// finishes (rows handed before a stream gives up stay handed: the caller
/// tells the sink to start again).
pub(crate) fn analyze_streamed<'a>(
    trace: &'a LoadedTrace,
    decoding: Decoding<'a>,
    opts: &AnalyzeOptions,
    step_events: u64,
    stage_done: &mut dyn FnMut(&'static str),
    sink: &mut dyn StackSink,
) -> Streamed<'a> {
    let Decoding {
        decoded,
        window,
        clock: asked,
    } = decoding;
    let clock = asked.unwrap_or(Clock::Stack);
    let (prep, stacks, acc, warnings, all_stacks, rows_elsewhere) = match stream(
        decoded,
        clock,
        window,
        step_events.max(1),
        opts.stack_rows,
        sink,
    ) {
        Ok(done) => done,
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
    debug_assert!(opts.stack_rows == StackRows::Kept || stacks.is_empty());
    let source = Source {
        prep,
        clock,
        all_stacks,
        labels: Vec::new(),
        rows_elsewhere,
    };
    Streamed::Done(assemble(
        trace,
        source,
        opts,
        acc,
        stacks,
        warnings,
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

/// What a stream gives the report: the prepared trace, the stack rows
/// (unnamed, in no order), the summed statistics, the replays' warnings,
/// how many stacks the trace has and how many rows were counted or handed
/// instead of kept.
type StreamedParts<'a> = (Prepared<'a>, Vec<StackStats>, Acc, Warnings, u64, u64);

/// The steps (see the module doc).
fn stream<'a>(
    decoded: Decoded<'a>,
    clock: Clock,
    window: Window,
    step_events: u64,
    stack_rows: StackRows,
    sink: &mut dyn StackSink,
) -> Result<StreamedParts<'a>, Stop<'a>> {
    let keep = stack_rows == StackRows::Kept;
    let mut out = RowsOut {
        stack_rows,
        sink,
        window: !window.is_all(),
        elsewhere: 0,
    };
    let mut threads: Vec<ThreadStream> = (0..decoded.threads.len() as u32)
        .map(|i| ThreadStream::new(&decoded, i, clock, window))
        .collect();
    let n_functions = decoded.functions.dense_len();
    let mut lanes: Vec<Lane> = (0..rayon::current_num_threads().max(1))
        .map(|_| Lane::new(Tally::new(n_functions, false, window), stack_rows))
        .collect();
    // One vector for every row, made for as many as the trace names (the
    // recorder names every task), but no more than it has events (a stack
    // runs from an event on): rows gathered per lane and joined at the end
    // would be held twice. (None if the rows are only counted: each
    // step's are dropped.)
    let events: u64 = decoded
        .threads
        .iter()
        .flat_map(|t| &t.chunks)
        .map(|c| c.events as u64)
        .sum();
    let named = (decoded.stack_names.len() as u64).min(events) as usize;
    let room = if keep {
        named + decoded.threads.len()
    } else {
        0
    };
    let mut rows: Vec<StackStats> = Vec::with_capacity(room);
    let mut step = Step::new(&decoded, events, step_events);
    let mut horizon = 0u64;
    let mut read = 0u64;
    let mut opens = FxHashMap::default();
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
        let (cut, replay) = rayon::join(
            || {
                threads
                    .par_iter_mut()
                    .try_for_each(|t| t.cut_until(&decoded, until))
            },
            || {
                let opens = std::mem::take(&mut opens);
                let timeline = gil.as_mut().map(|(timeline, merge)| {
                    timeline.prune_before(earliest);
                    timeline.extend(merge, horizon);
                    &*timeline
                });
                let ctx = context(&decoded, &decoded.functions, clock, timeline, u64::MAX);
                lanes
                    .par_iter_mut()
                    .try_for_each(|lane| lane.step(&ctx, Some(horizon), &opens))
            },
        );
        if cut.is_err() || replay.is_err() {
            // What the steps replayed is dropped; the decode is not.
            drop(threads);
            return Err(GaveUp(Box::new(decoded)));
        }
        out.take(&mut lanes, &mut rows);
        let now_read: u64 = threads.iter().map(|t| t.pass.events).sum();
        step.adapt(now_read - read);
        read = now_read;
        let next = threads.iter().filter_map(ThreadStream::floor).min();
        let Some(h) = next else { break };
        horizon = h;
        opens = open_segments(&threads);
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
    let mut prep = Prepared::new(decoded, passes, Some(clock), None, window, None, None);
    let end_ns = prep.ns(prep.end_tick);
    if let Some(t) = &mut timeline {
        t.set_end(end_ns);
    }
    let ctx = context(
        &prep.decoded,
        &prep.functions,
        clock,
        timeline.as_ref(),
        prep.end_tick,
    );
    let last = lanes
        .par_iter_mut()
        .try_for_each(|lane| lane.last_step(&ctx, end_ns));
    if last.is_err() {
        return Err(GaveUpLate(Box::new(prep)));
    }
    out.take(&mut lanes, &mut rows);
    let mut acc: Option<Acc> = None;
    let mut warnings = Warnings::default();
    let mut all_stacks = 0;
    for Lane { work, .. } in lanes {
        all_stacks += work.seen;
        warnings.merge(work.warnings);
        let a = work.tally.into_acc();
        match &mut acc {
            Some(sum) => sum.merge(a),
            None => acc = Some(a),
        }
    }
    let mut acc = acc.unwrap_or_else(|| Acc::new(n_functions, false));
    // The own stacks, each on its thread's tally.
    let own: Vec<_> = prep
        .passes
        .iter_mut()
        .zip(&prep.decoded.threads)
        .filter_map(|(p, t)| Some((t.tid.0, p.own_replay.take()?)))
        .collect();
    all_stacks += own.len() as u64;
    let finished: Vec<_> = own
        .into_par_iter()
        .map(|(tid, own)| {
            let mut tally = own
                .tally
                .unwrap_or_else(|| Tally::new(n_functions, false, window));
            let stats = StackReplay::resume(
                own.state,
                &mut tally,
                &mut NoObserver,
                clock,
                end_ns,
                own.ends_at_ns,
            );
            let key = StackKey::Own(tid);
            let row = stats.into_row(key, row_name(stack_rows, &prep.decoded, key));
            (tally.into_acc(), row, own.warnings)
        })
        .collect();
    for (a, row, w) in finished {
        acc.merge(a);
        out.row(row, &mut rows);
        warnings.merge(w);
    }
    Ok((prep, rows, acc, warnings, all_stacks, out.elsewhere))
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
fn row_name(stack_rows: StackRows, decoded: &Decoded<'_>, key: StackKey) -> StackName {
    match stack_rows {
        StackRows::Handed => StackName::new(&stack_name(decoded, key)),
        StackRows::Kept | StackRows::Counted => StackName::default(),
    }
}

/// A replay context for the stream (`gil`: the `gil` clock's runs so far;
/// `end_tick`: the end of the trace once known; before, no segment that
/// runs to it is replayed).
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
    events: u64,
}

impl Step {
    /// Steps of about `events` of the trace's `total` events.
    fn new(decoded: &Decoded<'_>, total: u64, events: u64) -> Step {
        let h = decoded.file.header();
        // The recording's span over its events, else a millisecond.
        let span = h
            .end_tick
            .map(|e| e.saturating_sub(h.clock.start_tick))
            .filter(|&s| s > 0 && total > 0);
        let ticks = match span {
            Some(s) => ((s as u128 * events as u128) / total as u128) as u64,
            None => (h.clock.ticks_per_second() / 1000.0) as u64,
        };
        Step {
            ticks: ticks.max(1),
            events,
        }
    }

    /// A step read `read` events: the next reads about `self.events`
    /// (within four times more or less ticks than this one).
    fn adapt(&mut self, read: u64) {
        let want = self.events as u128;
        let scaled = self.ticks as u128 * want / (read.max(1) as u128);
        let lo = (self.ticks / 4).max(1) as u128;
        let hi = self.ticks.saturating_mul(4) as u128;
        self.ticks = scaled.clamp(lo, hi) as u64;
    }
}

/// Sorts a step's segments by stack, each stack's in time order. They
/// come thread after thread, each thread's in time order: a stable sort
/// by stack id ([`by_id`]) leaves every stack's as a run per thread,
/// which a short sort orders (most tasks have one to three).
fn by_stack(segments: &mut Vec<Segment>, scratch: &mut Vec<Segment>) {
    if !by_id(segments, scratch, |s| s.stack) {
        segments.sort_unstable_by_key(|s| (s.stack, key(s)));
        return;
    }
    let mut rest = &mut segments[..];
    while let Some(first) = rest.first() {
        let id = first.stack;
        let n = rest.iter().take_while(|s| s.stack == id).count();
        let (group, tail) = rest.split_at_mut(n);
        if n > 1 && !group.is_sorted_by_key(key) {
            group.sort_unstable_by_key(key);
        }
        rest = tail;
    }
}

/// Sorts `items` by `id`, stably, with a counting sort (`scratch`: room
/// for it): the ids of a step's stacks are dense. Returns false, leaving
/// `items` as they were, if the ids are too sparse for one.
fn by_id<T: Clone>(items: &mut Vec<T>, scratch: &mut Vec<T>, id: impl Fn(&T) -> u64) -> bool {
    let (Some(lo), Some(hi)) = (items.iter().map(&id).min(), items.iter().map(&id).max()) else {
        return true;
    };
    let span = hi - lo;
    if span > 4 * items.len() as u64 + 1024 {
        return false;
    }
    let mut starts = vec![0u32; span as usize + 2];
    for s in items.iter() {
        starts[(id(s) - lo) as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    scratch.clear();
    scratch.extend_from_slice(items);
    for s in items.iter() {
        let slot = &mut starts[(id(s) - lo) as usize];
        scratch[*slot as usize] = s.clone();
        *slot += 1;
    }
    std::mem::swap(items, scratch);
    true
}

/// A segment's place in its stack's time order (as `stacks.rs` sorts).
type SegmentKey = (u64, u32, Pos);

fn key(s: &Segment) -> SegmentKey {
    (s.start_tick, s.thread, s.start)
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

/// Hands what every thread's last step found to the lanes.
fn route(threads: &mut [ThreadStream], decoded: &Decoded<'_>, lanes: &mut [Lane]) {
    for (index, t) in threads.iter_mut().enumerate() {
        route_parts(index, decoded, &mut t.pass, lanes);
    }
}

/// Moves a pass's segments, wakes and ends to the lanes of their stacks.
fn route_parts(index: usize, decoded: &Decoded<'_>, pass: &mut ThreadPass, lanes: &mut [Lane]) {
    let tid = decoded.threads.get(index).map_or(0, |t| t.tid.0);
    let n = lanes.len() as u64;
    for s in std::mem::take(&mut pass.segments) {
        // Own stacks' segments (only under `gil`; else the segment pass
        // replays them): a lane by thread, all of a thread's to one.
        if s.is_own() {
            lanes[(s.thread as u64 % n) as usize].inbox.own.push(s);
        } else {
            lanes[(s.stack % n) as usize].inbox.segments.push(s);
        }
    }
    for (id, tick) in std::mem::take(&mut pass.wakes) {
        lanes[(id % n) as usize].inbox.wakes.push((id, tick));
    }
    for (id, tick) in std::mem::take(&mut pass.ends) {
        let end = End { tick, tid };
        lanes[(id % n) as usize].inbox.ends.push((id, end));
    }
}

/// An `end` event: when, and which thread recorded it (threads ascend
/// by id, so the id orders them as `ends.rs` meets them).
#[derive(Clone, Copy, Debug)]
struct End {
    tick: u64,
    tid: u64,
}

/// What a lane gets from one step's passes.
#[derive(Default)]
struct Inbox {
    segments: Vec<Segment>,
    /// Own stacks' segments, thread after thread, each's in time order.
    own: Vec<Segment>,
    wakes: Vec<(u64, u64)>,
    ends: Vec<(u64, End)>,
}

/// A logical stack between steps.
#[derive(Default)]
struct LiveStack {
    /// Its replay so far (`None`: no segment replayed yet).
    replay: Option<Suspended>,
    /// Closed segments not replayed yet, in no order.
    pending: Vec<Segment>,
    /// Its wakes (ns) the replay has not used (sorted before each use).
    wakes: Vec<u64>,
    /// Its latest end so far, not judged yet (ns, and the end).
    end: Option<(u64, End)>,
    /// The latest start and end of a replayed segment, ns.
    replayed_start_ns: Option<u64>,
    replayed_end_ns: u64,
    /// It is in its lane's `waiting` list.
    waiting: bool,
    /// Where its last segment left the `gil` clock's runs.
    gil_hint: usize,
}

impl LiveStack {
    fn ran(&self) -> bool {
        self.replay.is_some() || !self.pending.is_empty()
    }
}

/// The logical stacks whose ids fall in one lane: each replayed on the
/// lane's tally (a suspended replay's frames hold its tally's edge
/// numbers, so a stack stays in its lane).
struct Lane {
    stacks: FxHashMap<u64, LiveStack>,
    /// Own stacks (only under `gil`), by their thread's index.
    own: FxHashMap<u32, LiveStack>,
    /// Stacks with segments not replayed or an end not judged.
    waiting: Vec<u64>,
    inbox: Inbox,
    /// Room for sorting the inbox.
    scratch: Vec<Segment>,
    end_scratch: Vec<(u64, End)>,
    work: LaneWork,
}

/// What a lane's replays write to.
struct LaneWork {
    tally: Tally,
    /// Stacks finished by an end that counts: any later sign of them
    /// stops the stream.
    finished: IdSet,
    /// What becomes of the rows (which [`row_name`] names).
    stack_rows: StackRows,
    /// The rows of the stacks finished in this step (the caller takes
    /// them into one vector after each step).
    rows: Vec<StackStats>,
    warnings: Warnings,
    /// Stacks that ran.
    seen: u64,
}

/// What became of a stack in a step.
enum Settled {
    /// Finished by its end: its row is made.
    Finished,
    /// It has segments or an end for a later step.
    Waiting,
    /// Suspended until it runs again or the trace ends.
    Idle,
}

impl Lane {
    fn new(tally: Tally, stack_rows: StackRows) -> Lane {
        Lane {
            stacks: FxHashMap::default(),
            own: FxHashMap::default(),
            waiting: Vec::new(),
            inbox: Inbox::default(),
            scratch: Vec::new(),
            end_scratch: Vec::new(),
            work: LaneWork {
                tally,
                finished: IdSet::default(),
                stack_rows,
                rows: Vec::new(),
                warnings: Warnings::default(),
                seen: 0,
            },
        }
    }

    /// Stack `id`, made if new; an error if an end that counted finished it.
    fn live(&mut self, id: u64, what: &'static str) -> Result<&mut LiveStack, NotStreamable> {
        match self.stacks.entry(id) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) if self.work.finished.contains(id) => {
                let _ = e;
                Err(NotStreamable(what))
            }
            Entry::Vacant(e) => Ok(e.insert(LiveStack::default())),
        }
    }

    /// Takes in the inbox, then replays and judges what `horizon` (ticks;
    /// `None`: the end of the trace) allows, `opens` being the stacks
    /// threads are on. The inbox's segments and ends are sorted by stack:
    /// a stack that begins and ends within the step (most tasks) is
    /// replayed from them and never enters the map of live stacks.
    fn step(
        &mut self,
        ctx: &ReplayContext<'_, '_>,
        horizon: Option<u64>,
        opens: &FxHashMap<u64, SegmentKey>,
    ) -> Result<(), NotStreamable> {
        let scale = ctx.decoded.scale;
        let mut inbox = std::mem::take(&mut self.inbox);
        for &(id, tick) in &inbox.wakes {
            if let Ok(live) = self.live(id, "") {
                live.wakes.push(scale.ns(tick));
            }
        }
        by_stack(&mut inbox.segments, &mut self.scratch);
        // Stable: each stack's ends stay in thread order.
        if !by_id(&mut inbox.ends, &mut self.end_scratch, |e| e.0) {
            inbox.ends.sort_by_key(|&(id, _)| id);
        }
        let (mut segs, mut ends) = (&inbox.segments[..], &inbox.ends[..]);
        loop {
            let id = match (segs.first(), ends.first()) {
                (Some(s), Some(e)) => s.stack.min(e.0),
                (Some(s), None) => s.stack,
                (None, Some(e)) => e.0,
                (None, None) => break,
            };
            let n = segs.iter().take_while(|s| s.stack == id).count();
            let m = ends.iter().take_while(|e| e.0 == id).count();
            let (group, stack_ends) = (&segs[..n], &ends[..m]);
            (segs, ends) = (&segs[n..], &ends[m..]);
            let mut live = match self.stacks.remove(&id) {
                Some(live) => live,
                None if self.work.finished.contains(id) => {
                    return Err(NotStreamable(
                        "a stack ran or ended after an end that counted",
                    ));
                }
                None => LiveStack::default(),
            };
            self.work.seen += (!live.ran() && !group.is_empty()) as u64;
            for &(_, end) in stack_ends {
                self.work.take_end(&mut live, end, scale);
            }
            let was_waiting = std::mem::take(&mut live.waiting);
            let open = opens.get(&id).copied();
            match self.work.settle(ctx, id, &mut live, group, horizon, open) {
                Settled::Finished => continue,
                Settled::Waiting => {
                    live.waiting = true;
                    if !was_waiting {
                        self.waiting.push(id);
                    }
                }
                Settled::Idle => {}
            }
            if live.replay.is_some() || live.waiting || !live.wakes.is_empty() {
                self.stacks.insert(id, live);
            }
        }
        self.step_own(ctx, &inbox.own, horizon);
        inbox.segments.clear();
        inbox.own.clear();
        inbox.ends.clear();
        inbox.wakes.clear();
        self.inbox = inbox;
        // Stacks left waiting by an earlier step that got nothing new.
        let waiting = std::mem::take(&mut self.waiting);
        for id in waiting {
            let Some(live) = self.stacks.get_mut(&id) else {
                continue;
            };
            if !live.waiting {
                continue;
            }
            let open = opens.get(&id).copied();
            match self.work.settle(ctx, id, live, &[], horizon, open) {
                Settled::Finished => {
                    self.stacks.remove(&id);
                }
                Settled::Waiting => self.waiting.push(id),
                Settled::Idle => live.waiting = false,
            }
        }
        Ok(())
    }

    /// Replays what `horizon` allows of the own stacks: this step's
    /// segments (`own`) and those an earlier step left.
    fn step_own(&mut self, ctx: &ReplayContext<'_, '_>, own: &[Segment], horizon: Option<u64>) {
        let mut rest = own;
        while let Some(first) = rest.first() {
            let thread = first.thread;
            let n = rest.iter().take_while(|s| s.thread == thread).count();
            let (group, tail) = rest.split_at(n);
            rest = tail;
            let live = self.own.entry(thread).or_default();
            self.work.seen += (!live.ran()) as u64;
            // No end, and no other thread runs it: only the horizon waits.
            self.work.settle(ctx, u64::MAX, live, group, horizon, None);
        }
        for live in self.own.values_mut() {
            if !live.pending.is_empty() {
                self.work.settle(ctx, u64::MAX, live, &[], horizon, None);
            }
        }
    }

    /// The earliest start (tick) of a segment the lane has not replayed.
    fn earliest_segment(&self) -> Option<u64> {
        let waiting = self.waiting.iter().filter_map(|id| self.stacks.get(id));
        let pending = waiting
            .chain(self.own.values())
            .filter_map(|live| live.pending.first());
        let inbox = self.inbox.segments.iter().chain(&self.inbox.own);
        pending.chain(inbox).map(|s| s.start_tick).min()
    }

    /// The step after the last event: everything is judged and replayed,
    /// and every stack still alive finished at the end of the trace
    /// (`end_ns`).
    fn last_step(&mut self, ctx: &ReplayContext<'_, '_>, end_ns: u64) -> Result<(), NotStreamable> {
        self.step(ctx, None, &FxHashMap::default())?;
        let logical = std::mem::take(&mut self.stacks)
            .into_iter()
            .map(|(id, live)| (StackKey::Logical(id), live));
        let own = std::mem::take(&mut self.own)
            .into_iter()
            .map(|(index, live)| {
                let tid = ctx
                    .decoded
                    .threads
                    .get(index as usize)
                    .map_or(0, |t| t.tid.0);
                (StackKey::Own(tid), live)
            });
        for (key, mut live) in logical.chain(own) {
            if live.replay.is_some() {
                let finish = Some((None, Leftover::NotCounted));
                if let Some(totals) = self.work.replay(ctx, &mut live, &[], finish, end_ns) {
                    let row = totals.into_row(key, self.work.name(ctx, key));
                    self.work.rows.push(row);
                }
            }
        }
        Ok(())
    }
}

impl LaneWork {
    /// The name stack `key`'s row is made with ([`row_name`]).
    fn name(&self, ctx: &ReplayContext<'_, '_>, key: StackKey) -> StackName {
        row_name(self.stack_rows, ctx.decoded, key)
    }

    /// Takes `end` as `live`'s latest end if it is (the latest is kept;
    /// of equal ones, the last in thread order, as `ends.rs` meets them);
    /// the other is ignored.
    fn take_end(&mut self, live: &mut LiveStack, end: End, scale: mtrace_format::TickScale) {
        let ns = scale.ns(end.tick);
        match live.end {
            Some((t, e)) if !replaces(ns, end.tid, t, e.tid) => {
                ignore_end(&mut self.warnings, ns, end.tid);
            }
            Some((t, e)) => {
                ignore_end(&mut self.warnings, t, e.tid);
                live.end = Some((ns, end));
            }
            None => live.end = Some((ns, end)),
        }
    }

    /// Replays what `horizon` allows of stack `id` (its pending segments
    /// and `group`, this step's, in time order) and judges its end (see
    /// [`Lane::step`]; `open`: the segment of it a thread is in).
    fn settle(
        &mut self,
        ctx: &ReplayContext<'_, '_>,
        id: u64,
        live: &mut LiveStack,
        group: &[Segment],
        horizon: Option<u64>,
        open: Option<SegmentKey>,
    ) -> Settled {
        let scale = ctx.decoded.scale;
        let h_ns = horizon.map(|h| scale.ns(h));
        // Segments carried from earlier steps (rare) join this step's.
        let carried = !live.pending.is_empty();
        let merged = if carried {
            let mut all = std::mem::take(&mut live.pending);
            all.extend_from_slice(group);
            all.sort_unstable_by_key(key);
            all
        } else {
            Vec::new()
        };
        let segments = if carried { &merged[..] } else { group };
        if let Some((t, end)) = live.end.filter(|(t, _)| h_ns.is_none_or(|h| *t < h)) {
            if counts(live, segments, t, open.is_some(), scale) {
                let finish = Some((Some(t), Leftover::AtStackEnd));
                if let Some(totals) = self.replay(ctx, live, segments, finish, u64::MAX) {
                    let key = StackKey::Logical(id);
                    let mut row = totals.into_row(key, self.name(ctx, key));
                    row.ended = true;
                    self.rows.push(row);
                }
                self.finished.insert(id);
                return Settled::Finished;
            }
            ignore_end(&mut self.warnings, t, end.tid);
            live.end = None;
        }
        // Before the horizon, a segment's events are all read (it is
        // closed); under `gil`, its switch away must be too: how long a
        // thread ran after an event depends on the next event of any
        // thread, and the runs are merged up to the horizon.
        let gil = ctx.clock == Clock::Gil;
        let before = |s: &Segment, h: u64| match s.switched_away() {
            Some(away) if gil => away < h,
            Some(_) => s.start_tick < h,
            None => false,
        };
        let ready = segments
            .iter()
            .take_while(|s| horizon.is_none_or(|h| before(s, h)) && open.is_none_or(|o| key(s) < o))
            .count();
        if ready > 0 {
            self.replay(ctx, live, &segments[..ready], None, u64::MAX);
        }
        live.pending = segments[ready..].to_vec();
        if !live.pending.is_empty() || live.end.is_some() {
            Settled::Waiting
        } else {
            Settled::Idle
        }
    }

    /// Replays `segments` (in time order) onto `live`'s replay; then
    /// finishes it with `finish` (`Some((cut_at, leftover))`: at its end,
    /// if it has one that counts; `end_ns`: the end of the trace; and
    /// whether frames open then were left open) or suspends it.
    fn replay(
        &mut self,
        ctx: &ReplayContext<'_, '_>,
        live: &mut LiveStack,
        segments: &[Segment],
        finish: Option<(Option<u64>, Leftover)>,
        end_ns: u64,
    ) -> Option<StackTotals> {
        let mut observer = NoObserver;
        let mut state = live.replay.take();
        if let Some(s) = &mut state {
            let used = s.wakes_used().min(live.wakes.len());
            live.wakes.drain(..used);
            s.forget_used_wakes();
        }
        live.wakes.sort_unstable();
        let mut stack = match state {
            Some(s) => StackReplay::reopen(s, &mut self.tally, &mut observer, &live.wakes),
            None => {
                let mut r = StackReplay::new(&mut self.tally, ROOT, &mut observer);
                r.wakes(&live.wakes);
                r
            }
        };
        let scale = ctx.decoded.scale;
        for s in segments {
            let start = scale.ns(s.start_tick);
            live.replayed_start_ns = Some(live.replayed_start_ns.map_or(start, |l| l.max(start)));
            if let Some(away) = s.switched_away() {
                live.replayed_end_ns = live.replayed_end_ns.max(scale.ns(away));
            }
            live.gil_hint =
                replay_one_segment(ctx, &mut stack, s, live.gil_hint, &mut self.warnings);
        }
        match finish {
            Some((cut_at, leftover)) => Some(stack.finish(ctx.clock, end_ns, cut_at, leftover)),
            None => {
                live.replay = Some(stack.suspend(None));
                None
            }
        }
    }
}

/// Whether `live`'s latest end, at `t` ns, counts (see `ends.rs`), given
/// its segments not replayed yet (`pending`) and all that can still run
/// it: `open`, a thread on it now (every later segment starts after `t`).
fn counts(
    live: &LiveStack,
    pending: &[Segment],
    t: u64,
    open: bool,
    scale: mtrace_format::TickScale,
) -> bool {
    (live.replay.is_some() || !pending.is_empty())
        && !open
        && live.replayed_start_ns.is_none_or(|s| s < t)
        && live.replayed_end_ns <= t
        && pending.iter().all(|s| fits_end(s, t, scale))
}

/// A set of stack ids, as a bitmap in pages of 512 ids: ids are dense
/// (the recorder numbers stacks in order), so half a million finished
/// tasks take 64 KB, and a lookup is one hash and one bit.
#[derive(Debug, Default)]
struct IdSet {
    pages: FxHashMap<u64, [u64; 8]>,
}

impl IdSet {
    fn contains(&self, id: u64) -> bool {
        self.pages
            .get(&(id >> 9))
            .is_some_and(|p| p[(id >> 6 & 7) as usize] & 1 << (id & 63) != 0)
    }

    fn insert(&mut self, id: u64) {
        let page = self.pages.entry(id >> 9).or_default();
        page[(id >> 6 & 7) as usize] |= 1 << (id & 63);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_set_holds_what_was_inserted() {
        let mut s = IdSet::default();
        let ids = [5, 7, 6, 1, 3, 2, 511, 512, 1 << 40, u64::MAX];
        for id in ids {
            s.insert(id);
        }
        assert!(ids.iter().all(|&id| s.contains(id)));
        assert!([0, 4, 8, 510, 513, (1 << 40) + 1, u64::MAX - 1]
            .iter()
            .all(|&id| !s.contains(id)));
    }
}

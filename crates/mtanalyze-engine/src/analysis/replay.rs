//! Replaying one stack, segment by segment: time with the paused stretches
//! cut out (the frames and recursion rule are in `frames.rs`).
//!
//! The clock model supplies `r`, the stack's *running clock*: how long the
//! stack had run, in total, at each event. A frame's active time is then
//! `r(exit) - r(enter)`; its paused time is the rest of its wall span.
//!
//! ```text
//! time      0    10   20   30   40   50   60   70   80   90
//! stack S   [====running====)              [===running===)     S switched out at 30, in at 60
//! frame f        [enter=12 ........................ exit=75]
//! r(t)      0    10   20   30   30   30   30   40   50   60
//! active(f) = r(75) - r(12) = 45 - 12 = 33;  paused(f) = (75 - 12) - 33 = 30
//! ```
//!
//! With a time window (`window.rs`), `r` advances only inside it and wall
//! times are clamped to it, so every frame's times are its times inside
//! the window; calls, switches in and events count where they happen.
//!
//! [`StackReplay`] is one stack's replay, driven by [`replay_stack`] from
//! the stack's segments, or by the segment pass (`cut.rs`) for a thread's
//! own stack while it reads the thread's events. Anything added to the
//! per-segment logic belongs in `StackReplay`'s methods, so both drivers
//! keep doing the same replay.

use std::borrow::Cow;

use mtrace_format::event::{raw_is_valid, raw_parts, KIND_ENTER, KIND_EXIT};
use mtrace_format::layout::EVENT_SIZE;
use mtrace_format::{StackKind, TraceFile};

use crate::analysis::clock::{GilCursor, GilTimeline};
use crate::analysis::decode::{prefetch, Batches, Decoded, DenseOf, FunctionTable};
use crate::analysis::ends::StackEnd;
use crate::analysis::frames::{
    Frame, FrameStack, Leftover, NoObserver, Observer, Opened, SetAsidePaths, Tally,
};
use crate::analysis::paths::ROOT;
use crate::analysis::segment::{Seed, Segment, StackKey};
use crate::analysis::window::{Span, WholeTrace, Window};
use mtanalyze_model::report::{Clock, StackName, StackStats, ThreadList};
use mtanalyze_model::warnings::{Location, WarningKind, Warnings};

/// How far ahead of the event being replayed its successors are prefetched.
const PREFETCH_AHEAD: usize = 1024;

/// Everything a stack's replay needs besides its segments.
pub(super) struct ReplayContext<'d, 'a> {
    /// The decoded trace.
    pub decoded: &'d Decoded<'a>,
    /// Function ids to dense indices (complete: unknown ids added).
    pub functions: &'d FunctionTable<'a>,
    /// The clock.
    pub clock: Clock,
    /// The `gil` clock's timeline (only for `Clock::Gil`).
    pub gil: Option<&'d GilTimeline>,
    /// End of the trace, in ticks.
    pub end_tick: u64,
    /// The earliest `lost` mark that ends a thread's events, in ns: after
    /// it, a logical stack not seen running may have run unrecorded.
    pub first_mark_ns: Option<u64>,
}

impl ReplayContext<'_, '_> {
    fn file(&self) -> &TraceFile<'_> {
        &self.decoded.file
    }

    fn ns(&self, tick: u64) -> u64 {
        self.decoded.scale.ns(tick)
    }
}

/// Replays one stack's segments (`segment(j)` is its `j`-th in start
/// order, `None` past the last) into `tally`, showing `observer` every
/// frame and running stretch; returns the stack's statistics and any
/// problems. `wakes`: when its task was woken (ns, ascending); `ended`:
/// where an `end` that counts ended its life (`ends.rs`).
#[allow(clippy::too_many_arguments)]
pub(super) fn replay_stack<'s, O: Observer>(
    ctx: &ReplayContext<'_, '_>,
    wakes: &[u64],
    ended: Option<StackEnd>,
    segment: impl Fn(usize) -> Option<&'s Segment>,
    tally: &mut Tally,
    warnings: &mut Warnings,
    paths_root: u32,
    observer: &mut O,
) -> StackTotals {
    let mut stack = StackReplay::new(tally, paths_root, observer);
    stack.wakes(wakes);
    // Where the stack's last stretch left the gil timeline.
    let mut gil_hint = 0;
    let mut i = 0;
    // Where the last segment left the stack: ended at a `lost` mark (ns),
    // switched away, or still running at the end of the trace.
    let mut last_end = LastEnd::Running;
    // The logical stack's id (none for a thread's own), for the
    // lost-events rule and the frames it leaves open.
    let mut logical = None;
    while let Some(seg) = segment(i) {
        if !seg.is_own() {
            logical = Some(seg.stack);
        }
        // Segments (and their events) are scattered: start loading the
        // ones after this while it replays.
        if let Some(later) = segment(i + 2) {
            prefetch((later as *const Segment).cast());
        }
        if let Some(next) = segment(i + 1) {
            next.prefetch_first_read(ctx.decoded);
        }
        last_end = LastEnd::of(ctx, seg);
        gil_hint = replay_one_segment(ctx, &mut stack, seg, gil_hint, warnings);
        i += 1;
    }
    stack.finish_stack(ctx, ctx.ns(ctx.end_tick), last_end, logical, ended)
}

/// Replays segment `seg` onto `stack` (begun here, its events, its end);
/// returns where the `gil` timeline's cursor got to (`gil_hint`: where the
/// stack's last segment left it). A segment that runs to the end of the
/// trace ends at `ctx.end_tick`.
pub(super) fn replay_one_segment<O: Observer>(
    ctx: &ReplayContext<'_, '_>,
    stack: &mut StackReplay<'_, O>,
    seg: &Segment,
    gil_hint: usize,
    warnings: &mut Warnings,
) -> usize {
    let seg_end_ns = seg
        .switched_away()
        .map_or_else(|| ctx.ns(ctx.end_tick), |t| ctx.ns(t));
    let start_ns = stack.begin(ctx.decoded, ctx.functions, ctx.clock, seg, warnings);
    let thread = &ctx.decoded.threads[seg.thread as usize];
    let tid = thread.tid.0;
    let mut batches = Batches::new(
        ctx.file(),
        thread,
        seg.start,
        seg.end,
        seg.start_tick,
        seg.resume_point(),
    );
    // The whole trace (nearly every run) or a time window: each has
    // its own per-event code.
    let window = stack.frames.window();
    let seg = SegmentRun {
        start_ns,
        end_ns: seg_end_ns,
        switched_away: seg.switched_away().is_some(),
        thread: seg.thread,
        tid,
    };
    if window.is_all() {
        replay_segment(
            ctx,
            stack,
            &mut batches,
            seg,
            gil_hint,
            warnings,
            WholeTrace,
        )
    } else {
        replay_segment(ctx, stack, &mut batches, seg, gil_hint, warnings, window)
    }
}

/// Where a segment runs, for [`replay_segment`].
#[derive(Clone, Copy)]
struct SegmentRun {
    start_ns: u64,
    /// Its switch away, or the end of the trace.
    end_ns: u64,
    switched_away: bool,
    /// The thread's index in the decoded trace, and its id.
    thread: u32,
    tid: u64,
}

/// Replays one segment's events from `batches` onto `stack`, counting
/// what `span` holds; returns where the `gil` timeline's cursor got to
/// (`gil_hint`: where the stack's last segment left it).
fn replay_segment<O: Observer, W: Span>(
    ctx: &ReplayContext<'_, '_>,
    stack: &mut StackReplay<'_, O>,
    batches: &mut Batches<'_, '_>,
    seg: SegmentRun,
    gil_hint: usize,
    warnings: &mut Warnings,
    span: W,
) -> usize {
    // One loop per kind of clock, so the per-event code has no clock
    // branches.
    match ctx.gil {
        Some(timeline) => {
            // r advances after each event by the time until the next
            // event of any thread (or this thread's next event).
            let mut gil = GilRun {
                cursor: timeline.cursor(seg.thread, gil_hint),
                last: None,
                r: stack.so_far.r,
                span,
            };
            stack.so_far.events += replay_events(
                ctx,
                batches,
                &mut gil,
                &mut stack.frames,
                seg.tid,
                warnings,
                span,
            );
            // The stretch from the last event to the switch away (or the end).
            if let Some((lt, lns)) = gil.last {
                gil.ran(lt, lns, seg.end_ns, stack.frames.observer);
            }
            stack.end_gil(gil.r, seg.end_ns);
            if seg.switched_away {
                stack.switched_away(seg.end_ns);
            }
            gil.cursor.position()
        }
        None => {
            let mut linear = Linear {
                offset: stack.offset(ctx.clock, seg.start_ns),
                span,
            };
            stack.so_far.events += replay_events(
                ctx,
                batches,
                &mut linear,
                &mut stack.frames,
                seg.tid,
                warnings,
                span,
            );
            stack.end_linear(ctx.clock, seg.start_ns, seg.end_ns);
            if seg.switched_away {
                stack.switched_away(seg.end_ns);
            }
            gil_hint
        }
    }
}

/// How a stack's last segment ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum LastEnd {
    /// At its thread's `lost` mark, at this ns.
    Lost(u64),
    /// The thread switched away.
    SwitchedAway,
    /// It ran until the end of the trace.
    #[default]
    Running,
}

impl LastEnd {
    /// How segment `seg` left its stack.
    #[inline(always)]
    pub(super) fn of(ctx: &ReplayContext<'_, '_>, seg: &Segment) -> LastEnd {
        match seg.switched_away() {
            Some(t) if seg.ends_at_lost() => LastEnd::Lost(ctx.ns(t)),
            None if seg.ends_at_lost() => LastEnd::Lost(ctx.ns(ctx.end_tick)),
            Some(_) => LastEnd::SwitchedAway,
            None => LastEnd::Running,
        }
    }
}

/// What the replay of one stack found: its row of the report but for the
/// id and the name, which the report adds (`assemble`). Smaller than a
/// row: half a million of these are held while the segments still are.
#[derive(Debug, Default)]
pub(crate) struct StackTotals {
    threads: ThreadList,
    running_ns: u64,
    paused_ns: u64,
    scheduled_ns: u64,
    switches_in: u64,
    max_depth: u32,
    /// An `end` that counts ended its life.
    ended: bool,
    events: u64,
}

impl StackTotals {
    /// The report's row of stack `id`, named `name`, of `kind`.
    pub(super) fn into_row(self, id: StackKey, name: StackName, kind: StackKind) -> StackStats {
        StackStats {
            id,
            name,
            kind,
            threads: self.threads,
            running_ns: self.running_ns,
            paused_ns: self.paused_ns,
            scheduled_ns: self.scheduled_ns,
            waiting_ns: self.paused_ns - self.scheduled_ns,
            switches_in: self.switches_in,
            max_depth: self.max_depth,
            events: self.events,
            ended: self.ended,
        }
    }
}

/// One stack's replay, segment after segment: [`replay_stack`] drives it
/// from the stack's segments; the segment pass drives it for a thread's own
/// stack while it reads the thread's events (one read instead of two).
pub(super) struct StackReplay<'a, O: Observer = NoObserver> {
    frames: FrameStack<'a, O>,
    so_far: SoFar,
    woken: Woken<'a>,
}

/// When a stack's task was woken, and where the replay is in those times:
/// the scheduled part of a pause runs from the first wake after the stack
/// last started running (at the switch away, if it was woken while it ran)
/// to the next switch in, or to the end of its life ("Wakes" in
/// `semantics.md`).
#[derive(Debug, Default)]
struct Woken<'a> {
    /// The stack's wakes, ns, ascending.
    wakes: &'a [u64],
    /// The first wake not yet used.
    next: usize,
    /// When the stack last started running.
    run_start_ns: u64,
    /// When it last switched away, while it has not run again.
    away_ns: Option<u64>,
}

impl Woken<'_> {
    /// The scheduled part of the pause from `self.away_ns` to `until`
    /// that lies in `window`.
    fn scheduled_until(&mut self, until: u64, window: Window) -> u64 {
        let Some(away) = self.away_ns.take() else {
            return 0;
        };
        let wakes = self.wakes;
        while self.next < wakes.len() && wakes[self.next] < self.run_start_ns {
            self.next += 1;
        }
        let Some(&first) = wakes.get(self.next) else {
            return 0;
        };
        // Every wake up to `until` woke this pause.
        while self.next < wakes.len() && wakes[self.next] <= until {
            self.next += 1;
        }
        if first > until {
            return 0;
        }
        window.clip(first.max(away), until)
    }
}

/// What a stack's replay has summed up besides its frames.
#[derive(Debug, Default)]
struct SoFar {
    /// The running clock at the end of the last segment.
    r: u64,
    events: u64,
    switches_in: u64,
    threads: ThreadList,
    /// The latest end of a finished segment.
    prev_end_ns: u64,
    first_start_ns: Option<u64>,
    /// The segment running now: its thread and start (its thread joins
    /// `threads` when it ends, if it ran in the window).
    current: Option<(u64, u64)>,
}

/// A thread's own stack whose replay waits for the end of the trace (to
/// close its open frames): everything [`StackReplay::resume`] needs, with
/// the open frames taken off the tally they were replayed with.
#[derive(Debug)]
pub(super) struct Suspended {
    frames: Vec<Frame>,
    so_far: SoFar,
    max_depth: u32,
    /// The segment still running at the thread's last event: its start.
    running_since_ns: Option<u64>,
    /// The stack's scheduled clock ([`FrameStack::scheduled`]).
    scheduled: u64,
    /// Where the replay was in the stack's wakes (see [`Woken`]): the
    /// first not yet used, then `run_start_ns` and `away_ns`. The wakes
    /// themselves stay with the caller, who may drop the used ones
    /// ([`Suspended::wakes_used`]).
    woken: (usize, u64, Option<u64>),
    /// Its call paths, if kept: merged only when the stack finishes.
    paths: Option<Box<SetAsidePaths>>,
}

impl Suspended {
    /// Its open frames, set aside with it.
    pub(super) fn frames(&self) -> usize {
        self.frames.len()
    }

    /// How many of the stack's wakes (ascending) the replay has used: the
    /// caller may drop that many from the front before the replay is
    /// taken up again.
    pub(super) fn wakes_used(&self) -> usize {
        self.woken.0
    }

    /// The caller dropped the used wakes.
    pub(super) fn forget_used_wakes(&mut self) {
        self.woken.0 = 0;
    }
}

impl<'a, O: Observer> StackReplay<'a, O> {
    /// An empty stack replayed with `tally` (see [`FrameStack::new`]).
    pub(super) fn new(tally: &'a mut Tally, paths_root: u32, observer: &'a mut O) -> Self {
        StackReplay {
            frames: FrameStack::new(tally, paths_root, observer),
            so_far: SoFar::default(),
            woken: Woken::default(),
        }
    }

    /// Makes room in the tally for `n` functions (a stream's pass met a
    /// function the metadata does not name: see `FreshFunctions`).
    pub(super) fn grow_functions(&mut self, n: usize) {
        self.frames.grow_functions(n);
    }

    /// The times the stack's task was woken (ns, ascending).
    pub(super) fn wakes(&mut self, wakes: &'a [u64]) {
        self.woken.wakes = wakes;
    }

    /// The thread switched away from the stack at `ns`.
    fn switched_away(&mut self, ns: u64) {
        self.woken.away_ns = Some(ns);
    }

    /// Starts segment `seg` (its end is not needed yet); returns its start
    /// in ns. `functions` must know every function of the seed snapshot.
    pub(super) fn begin(
        &mut self,
        decoded: &Decoded<'_>,
        functions: &impl DenseOf,
        clock: Clock,
        seg: &Segment,
        warnings: &mut Warnings,
    ) -> u64 {
        let start_ns = decoded.scale.ns(seg.start_tick);
        let window = self.frames.window();
        if self.so_far.first_start_ns.is_none() && !seg.is_own() && seg.seed() == Seed::None {
            self.continue_from_record(decoded, functions, clock, seg.stack);
        }
        // The pause that ends here: its scheduled part (nothing under
        // `wall`, where nothing pauses).
        let scheduled = self.woken.scheduled_until(start_ns, window);
        if clock != Clock::Wall {
            self.frames.scheduled = self.frames.scheduled.saturating_add(scheduled);
        }
        self.woken.run_start_ns = start_ns;
        let tid = seg.tid(&decoded.threads);
        if self.so_far.first_start_ns.is_some() && start_ns < self.so_far.prev_end_ns {
            let at = Location::Time {
                ns: start_ns,
                thread: tid,
            };
            warnings.add(WarningKind::StackOnTwoThreads, at);
        }
        self.so_far.first_start_ns.get_or_insert(start_ns);
        self.so_far.current = Some((tid, start_ns));
        self.so_far.switches_in += (seg.switched_in() & window.contains(start_ns)) as u64;
        let r = match clock {
            Clock::Wall => window.clamp(start_ns),
            _ => self.so_far.r,
        };
        if seg.seed() != Seed::None {
            seed_frames(
                decoded,
                functions,
                seg,
                &mut self.frames,
                start_ns,
                r,
                warnings,
            );
        }
        start_ns
    }

    /// Before logical stack `stack`'s first segment: if it carries on from
    /// an earlier file of a rotating series (a continued-stack record), it
    /// has been alive and paused since the file began, with the record's
    /// frames open, entered before the trace began. So its frames' paused
    /// time, its life and the scheduled part of its pause (from a wake in
    /// this file) run from the file's start, as in one recording.
    fn continue_from_record(
        &mut self,
        decoded: &Decoded<'_>,
        functions: &impl DenseOf,
        clock: Clock,
        stack: u64,
    ) {
        let Some(ids) = decoded.continued_stacks.get(&stack) else {
            return;
        };
        let file_start_ns = decoded.scale.ns(decoded.file.header().clock.start_tick);
        let window = self.frames.window();
        let r = match clock {
            Clock::Wall => window.clamp(file_start_ns),
            _ => self.so_far.r,
        };
        let truth: Vec<u32> = ids
            .iter()
            .filter_map(|id| functions.dense_of(id.0))
            .collect();
        self.frames
            .reconcile(&truth, file_start_ns, r, Opened::BeforeTrace);
        self.so_far.first_start_ns = Some(file_start_ns);
        self.so_far.prev_end_ns = self.so_far.prev_end_ns.max(file_start_ns);
        self.switched_away(file_start_ns);
    }

    /// `stack` and `wall`: the running clock during a segment that started
    /// at `start_ns` is wall time (clamped to the window) plus this (ticks
    /// are clamped from the segment's start, so it never goes back).
    #[inline(always)]
    pub(super) fn offset(&self, clock: Clock, start_ns: u64) -> u64 {
        match clock {
            Clock::Wall => 0,
            _ => self
                .so_far
                .r
                .wrapping_sub(self.frames.window().clamp(start_ns)),
        }
    }

    /// Ends a `stack` or `wall` segment that ran from `start_ns` to `end_ns`.
    pub(super) fn end_linear(&mut self, clock: Clock, start_ns: u64, end_ns: u64) {
        let window = self.frames.window();
        if clock == Clock::Stack {
            self.frames
                .observer
                .running(window.clamp(start_ns), window.clamp(end_ns));
        }
        let r_end = match clock {
            Clock::Wall => window.clamp(end_ns),
            _ => self.so_far.r.saturating_add(window.clip(start_ns, end_ns)),
        };
        self.so_far.r = r_end.max(self.so_far.r);
        self.segment_ended(end_ns);
    }

    /// Ends a `gil` segment at `end_ns`, the running clock then being `r`.
    fn end_gil(&mut self, r: u64, end_ns: u64) {
        self.so_far.r = r;
        self.segment_ended(end_ns);
    }

    /// The segment running ended at `end_ns`.
    fn segment_ended(&mut self, end_ns: u64) {
        self.so_far.prev_end_ns = self.so_far.prev_end_ns.max(end_ns);
        if let Some((tid, start_ns)) = self.so_far.current.take() {
            if self.frames.window().touches(start_ns, end_ns) {
                self.so_far.threads.insert(tid);
            }
        }
    }

    /// Replays one enter or exit event (a `stack` or `wall` segment, whose
    /// running clock is `ns` clamped to the window plus `offset`); `span`
    /// is the window (see [`FrameStack::enter_in`]).
    #[inline(always)]
    pub(super) fn event<W: Span>(
        &mut self,
        enter: bool,
        func: u32,
        ns: u64,
        offset: u64,
        span: W,
    ) -> Result<(), WarningKind> {
        self.so_far.events += span.contains(ns) as u64;
        let r = span.clamp(ns).wrapping_add(offset);
        if enter {
            self.frames.enter_in(func, ns, r, span);
            Ok(())
        } else {
            self.frames.exit_in(func, ns, r, span)
        }
    }

    /// The window the replay counts.
    pub(super) fn window(&self) -> Window {
        self.frames.window()
    }

    /// Finishes the stack after its last segment, which left it as
    /// `last_end` says, at the end of the trace (`end_ns`) or at `ended`
    /// (an `end` that counts, `ends.rs`), by the rules of lost events
    /// ("Lost events" in `schemas/semantics.md`); `logical`: its id, none
    /// for a thread's own stack. Both engines finish every stack here.
    /// (Inlined: a call moved the replay, a few hundred bytes, twice.)
    #[inline(always)]
    pub(super) fn finish_stack(
        self,
        ctx: &ReplayContext<'_, '_>,
        end_ns: u64,
        last_end: LastEnd,
        logical: Option<u64>,
        ended: Option<StackEnd>,
    ) -> StackTotals {
        let cut_at = match (last_end, logical, ctx.first_mark_ns) {
            (LastEnd::Lost(ns), _, _) => Some(ns),
            // Paused when a thread lost its events: whether it ran after
            // that is unknown, so it ends where the trace stopped being
            // complete.
            (LastEnd::SwitchedAway, Some(_), Some(mark)) => Some(mark.max(self.so_far.prev_end_ns)),
            _ => None,
        };
        // Frames still open on a logical stack at its end were left open
        // by the program; cut by a loss first, they were not.
        let leftover = match (logical, ended, cut_at) {
            (Some(stack), Some(end), lost) if lost.is_none_or(|l| end.ns <= l) => {
                Leftover::AtStackEnd {
                    stack,
                    thread: end.thread,
                }
            }
            _ => Leftover::NotCounted,
        };
        // An end never makes a life longer: the earlier of the two.
        let ended_ns = ended.map(|e| e.ns);
        let cut_at = cut_at.into_iter().chain(ended_ns).min();
        let mut totals = self.finish(ctx.clock, end_ns, cut_at, leftover);
        totals.ended = ended_ns.is_some();
        totals
    }

    /// Closes the frames still open at the end of the trace (`end_ns`), or
    /// at `cut_at` if the trace lost the stack's end there (counted as cut
    /// short), and returns the stack's statistics; `leftover` says whether
    /// those frames count as left open by the program.
    pub(super) fn finish(
        mut self,
        clock: Clock,
        end_ns: u64,
        cut_at: Option<u64>,
        leftover: Leftover,
    ) -> StackTotals {
        let window = self.frames.window();
        let close_ns = cut_at.map_or(end_ns, |c| c.min(end_ns));
        let first_start_ns = self.so_far.first_start_ns.unwrap_or(close_ns);
        let r_end = if clock == Clock::Wall {
            window.clamp(close_ns)
        } else {
            self.so_far.r
        };
        let open_at_end = self.frames.depth() > 0;
        // Frames open at the end keep the stack alive until then: its last
        // pause, if it is paused, is part of its life.
        if open_at_end && clock != Clock::Wall {
            let scheduled = self.woken.scheduled_until(close_ns, window);
            self.frames.scheduled = self.frames.scheduled.saturating_add(scheduled);
        }
        self.frames.count_left_open(leftover, close_ns);
        self.frames.close_all(close_ns, r_end, cut_at.is_some());
        self.frames.merge_paths();
        // A stack lives from its first stretch to its last switch away (a
        // task that finished is not "paused" for the rest of the trace), or
        // to the end of the trace (or its cut) if frames were still open there.
        let last_ns = if open_at_end {
            close_ns
        } else {
            self.so_far.prev_end_ns
        };
        let lifetime = window.clip(first_start_ns, last_ns);
        let (life_start, life_end) = (
            window.clamp(first_start_ns),
            window.clamp(last_ns.max(first_start_ns)),
        );
        if clock == Clock::Wall {
            self.frames.observer.running(life_start, life_end);
        }
        self.frames.observer.life(life_start, life_end);
        let running_ns = if clock == Clock::Wall {
            lifetime
        } else {
            self.so_far.r
        };
        let paused_ns = lifetime.saturating_sub(running_ns);
        StackTotals {
            threads: std::mem::take(&mut self.so_far.threads),
            running_ns,
            paused_ns,
            scheduled_ns: self.frames.scheduled.min(paused_ns),
            switches_in: self.so_far.switches_in,
            max_depth: self.frames.max_depth,
            ended: false,
            events: self.so_far.events,
        }
    }

    /// Sets the replay aside until the end of the trace is known, taking
    /// its open frames off the tally (whose counters are then all zero, as
    /// the next stack needs them). `running_since_ns`: the start of the
    /// segment still running, if the thread ended on this stack.
    pub(super) fn suspend(mut self, running_since_ns: Option<u64>) -> Suspended {
        Suspended {
            paths: self.frames.take_paths(),
            frames: self.frames.take_all(),
            so_far: std::mem::take(&mut self.so_far),
            max_depth: self.frames.max_depth,
            running_since_ns,
            scheduled: self.frames.scheduled,
            woken: (self.woken.next, self.woken.run_start_ns, self.woken.away_ns),
        }
    }

    /// Takes up a suspended replay on the tally it was replayed with, to
    /// go on with more segments (`wakes`: the stack's wakes, ns ascending,
    /// less the used ones the caller dropped), its call paths where they
    /// were.
    pub(super) fn reopen(
        s: Suspended,
        tally: &'a mut Tally,
        observer: &'a mut O,
        wakes: &'a [u64],
    ) -> Self {
        let mut stack = StackReplay::new(tally, ROOT, observer);
        stack.frames.put_back(s.frames);
        stack.frames.put_back_paths(s.paths);
        stack.frames.max_depth = s.max_depth;
        stack.frames.scheduled = s.scheduled;
        stack.so_far = s.so_far;
        let (next, run_start_ns, away_ns) = s.woken;
        stack.woken = Woken {
            wakes,
            next,
            run_start_ns,
            away_ns,
        };
        stack
    }

    /// Takes up a suspended replay on the tally it was replayed with, ends
    /// its running segment at `end_ns` and finishes it (at `cut_at` if its
    /// thread's events ended at a `lost` mark).
    pub(super) fn resume(
        s: Suspended,
        tally: &'a mut Tally,
        observer: &'a mut O,
        clock: Clock,
        end_ns: u64,
        cut_at: Option<u64>,
    ) -> StackTotals {
        let running_since_ns = s.running_since_ns;
        let mut stack = StackReplay::reopen(s, tally, observer, &[]);
        if let Some(start_ns) = running_since_ns {
            stack.end_linear(clock, start_ns, end_ns);
        }
        // A thread's own stack: frames open on it are not left open.
        stack.finish(clock, end_ns, cut_at, Leftover::NotCounted)
    }
}

/// How the running clock advances through one segment's events.
trait SegmentClock {
    /// The stack's running clock at its event at (`tick`, `ns`).
    fn at<O: Observer>(&mut self, tick: u64, ns: u64, observer: &mut O) -> u64;
}

/// `stack` and `wall`: the running clock is wall time (clamped to the
/// window) plus a constant.
struct Linear<W> {
    offset: u64,
    span: W,
}

impl<W: Span> SegmentClock for Linear<W> {
    #[inline(always)]
    fn at<O: Observer>(&mut self, _tick: u64, ns: u64, _observer: &mut O) -> u64 {
        self.span.clamp(ns).wrapping_add(self.offset)
    }
}

/// `gil`: the stack ran, after each event, until the next event of any thread.
struct GilRun<'g, W> {
    cursor: GilCursor<'g>,
    /// (tick, ns) of the previous event.
    last: Option<(u64, u64)>,
    r: u64,
    span: W,
}

impl<W: Span> GilRun<'_, W> {
    /// The stack ran after its event at (`tick`, `ns`), at most until
    /// `next_own_ns`: `r` advances by the part of that run in the window.
    #[inline]
    fn ran<O: Observer>(&mut self, tick: u64, ns: u64, next_own_ns: u64, observer: &mut O) {
        let run = self.cursor.run_after(tick, ns, next_own_ns);
        let end = ns.saturating_add(run);
        observer.running(self.span.clamp(ns), self.span.clamp(end));
        self.r = self.r.saturating_add(self.span.clip(ns, end));
    }
}

impl<W: Span> SegmentClock for GilRun<'_, W> {
    #[inline]
    fn at<O: Observer>(&mut self, tick: u64, ns: u64, observer: &mut O) -> u64 {
        if let Some((lt, lns)) = self.last {
            self.ran(lt, lns, ns, observer);
        }
        self.last = Some((tick, ns));
        self.r
    }
}

/// Replays the events `batches` yields (one segment) onto `frames`;
/// returns how many enter and exit events there were in `span` (the
/// frames' window).
fn replay_events<C: SegmentClock, O: Observer, W: Span>(
    ctx: &ReplayContext<'_, '_>,
    batches: &mut Batches<'_, '_>,
    clock: &mut C,
    frames: &mut FrameStack<'_, O>,
    tid: u64,
    warnings: &mut Warnings,
    span: W,
) -> u64 {
    let scale = ctx.decoded.scale;
    let functions = ctx.functions.ids();
    let mut events = 0;
    while let Some(batch) = batches.next_batch() {
        for (i, ev) in batch.events().enumerate() {
            if i % 4 == 0 {
                prefetch(
                    batch
                        .raw()
                        .as_ptr()
                        .wrapping_add(i * EVENT_SIZE + PREFETCH_AHEAD),
                );
            }
            let (kind, raw_tick, payload) = raw_parts(ev);
            // Damage was counted by the segment pass; stop where it did.
            if !raw_is_valid(kind, payload) {
                break;
            }
            let (tick, _) = batches.clamp(raw_tick);
            let ns = scale.ns(tick);
            let r = clock.at(tick, ns, frames.observer);
            if kind == KIND_ENTER {
                events += span.contains(ns) as u64;
                if let Some(d) = functions.get(payload as u32) {
                    frames.enter_in(d, ns, r, span);
                }
            } else if kind == KIND_EXIT {
                events += span.contains(ns) as u64;
                if let Some(d) = functions.get(payload as u32) {
                    if let Err(kind) = frames.exit_in(d, ns, r, span) {
                        warnings.add(kind, Location::Time { ns, thread: tid });
                    }
                }
            }
        }
    }
    events
}

/// What a logical stack stands for, as its name record says (a thread's
/// own stack: unspecified).
pub(super) fn stack_kind(decoded: &Decoded<'_>, key: StackKey) -> StackKind {
    match key {
        StackKey::Own(_) => StackKind::Unspecified,
        StackKey::Logical(s) => decoded.stack_kinds.get(s),
    }
}

/// The thread's or logical stack's recorded name ("" if none).
pub(super) fn stack_name<'d>(decoded: &'d Decoded<'_>, key: StackKey) -> Cow<'d, str> {
    let name = match key {
        StackKey::Own(t) => decoded.thread_names.get(&t).map(|n| n.0.as_str().into()),
        StackKey::Logical(s) => decoded.stack_names.get(s),
    };
    name.unwrap_or_default()
}

fn seed_frames(
    decoded: &Decoded<'_>,
    functions: &impl DenseOf,
    seg: &Segment,
    frames: &mut FrameStack<'_, impl Observer>,
    ns: u64,
    r: u64,
    warnings: &mut Warnings,
) {
    let Some(snapshot) = seed_snapshot(decoded, seg) else {
        return;
    };
    let truth: Vec<u32> = snapshot.filter_map(|id| functions.dense_of(id.0)).collect();
    if seeds_before_trace(decoded, seg) {
        frames.reconcile(&truth, ns, r, Opened::BeforeTrace);
        return;
    }
    let opened = frames.reconcile(&truth, ns, r, Opened::Lost);
    warnings.add_n(
        WarningKind::FramesFromSnapshot,
        opened,
        Location::Time {
            ns,
            thread: seg.tid(&decoded.threads),
        },
    );
}

/// Whether segment `seg`'s seed is the snapshot of its thread's
/// `continued` first chunk (a later file of a rotating series, or a
/// recording attached to a running program): its frames were opened
/// before the trace began, not lost. Only a thread's very
/// first chunk can be one; the flag on any other is not believed.
fn seeds_before_trace(decoded: &Decoded<'_>, seg: &Segment) -> bool {
    let chunks = &decoded.threads[seg.thread as usize].chunks;
    seg.start.chunk == 0
        && seg.start.event == 0
        && chunks
            .first()
            .is_some_and(|c| c.continued && c.thread_chunk_no == 0)
}

/// The frames a segment with a seed starts from (outermost first).
pub(super) fn seed_snapshot(
    decoded: &Decoded<'_>,
    seg: &Segment,
) -> Option<impl Iterator<Item = mtrace_format::FunctionId>> {
    let thread = &decoded.threads[seg.thread as usize];
    let chunk = thread
        .chunks
        .get(seg.start.chunk as usize)
        .and_then(|c| decoded.file.chunk(c.slot).ok().flatten())?;
    let ids: Vec<_> = match seg.seed() {
        Seed::None => Vec::new(),
        Seed::Own => chunk.snapshot.own_frames().collect(),
        Seed::Logical => chunk.snapshot.stack_frames().collect(),
    };
    Some(ids.into_iter())
}

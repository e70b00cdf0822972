//! The segment pass: each thread's events, read once in order, cut into
//! [`Segment`]s at every stack switch (threads in parallel, one pass each).
//!
//! The pass also clamps ticks that go back, counts damage, and numbers the
//! function ids the metadata does not name as it meets them
//! ([`FreshFunctions`]: in events and in the snapshots segments start
//! from). It can replay the thread's own
//! stack as it goes (see [`OwnReplay`]): the same replay `replay.rs` does,
//! fed the events the pass reads anyway. The own stack's segments are then
//! not kept: in a program that polls many tasks they are half of all
//! segments (one between every two polls).

use rustc_hash::FxHashMap;

use mtrace_format::event::{
    raw_is_valid, KIND_END, KIND_ENTER, KIND_EXIT, KIND_LOST, KIND_SWITCH, KIND_WAKE,
};
use mtrace_format::StackId;

use crate::analysis::decode::{
    Batch, Batches, Decoded, FreshFunctions, FunctionIds, FunctionTable, Pos, Restart,
    StepFunctions,
};
use crate::analysis::frames::{NoObserver, Tally};
use crate::analysis::paths::ROOT;
use crate::analysis::replay::{seed_snapshot, StackReplay, Suspended};
use crate::analysis::segment::{
    segment_stack, stack_after_switch, Seed, Segment, SegmentList, StackKey,
};
use crate::analysis::window::{Span, WholeTrace, Window};
use mtanalyze_model::report::Clock;
use mtanalyze_model::warnings::{Location, WarningKind, Warnings};

/// What one pass over a thread found.
#[derive(Debug, Default)]
pub(super) struct ThreadPass {
    /// Its segments in order.
    pub segments: SegmentList,
    /// Events decoded.
    pub events: u64,
    /// First and last clamped ticks.
    pub first_tick: Option<u64>,
    /// Last clamped tick.
    pub last_tick: Option<u64>,
    /// Problems found.
    pub warnings: Warnings,
    /// The thread's own stack, replayed during the pass (if asked and
    /// possible): it only needs the end of the trace. Its segments are
    /// then not in `segments`.
    pub own_replay: Option<OwnReplay>,
    /// The tick of the thread's `lost` mark, if that is where its events
    /// end (a mark followed by a restart from a snapshot is not kept).
    pub lost_at: Option<u64>,
    /// The wakes this thread recorded: (logical stack id, tick).
    pub wakes: Vec<(u64, u64)>,
    /// How many: `wakes` is taken by the stacks' replay, the count stays
    /// for the trace's summary.
    pub wakes_seen: u64,
    /// The ends of logical stacks this thread recorded: (stack id, tick).
    pub ends: Vec<(u64, u64)>,
}

/// A thread's own stack replayed by the segment pass, which reads its
/// events anyway: a second read of them (most of a plain multi-threaded
/// trace) is saved. The replay is the one `replay::replay_stack`
/// does, driven event by event; it waits for the end of the trace to close
/// its open frames.
#[derive(Debug)]
pub(super) struct OwnReplay {
    /// The statistics, with the stack's open frames set aside; `None` if
    /// they went into a tally the caller shares between threads (see
    /// [`cut_thread`]).
    pub tally: Option<Tally>,
    /// The replay, suspended.
    pub state: Suspended,
    /// Problems the replay found.
    pub warnings: Warnings,
    /// Where the stack ends if not at the end of the trace: its thread's
    /// `lost` mark, in ns.
    pub ends_at_ns: Option<u64>,
}

/// The own stack's replay while the pass runs.
struct OwnFusion<'t> {
    replay: StackReplay<'t, NoObserver>,
    clock: Clock,
    warnings: Warnings,
    /// (start, running-clock offset) of the own segment now running.
    running: Option<(u64, u64)>,
    /// Whether the thread ran its own stack at all.
    began: bool,
    /// The own stack's last segment ended at a `lost` mark, at this ns.
    ends_at_ns: Option<u64>,
}

/// The state of one thread's pass.
struct Cutter<'d, 'a, 't, 'f> {
    decoded: &'d Decoded<'a>,
    /// The functions known when the pass (a stream: its step) began.
    functions: &'d FunctionTable<'a>,
    /// The functions the passes met since that `functions` does not map,
    /// numbered as they are met.
    fresh: &'d FreshFunctions<'f>,
    /// Those this pass met, with their dense indices: a trace that lost
    /// its names has every event's function here, looked up without
    /// `fresh`'s lock.
    fresh_here: FxHashMap<u32, u32>,
    index: u32,
    tid: u64,
    pass: ThreadPass,
    /// The segment the thread is in.
    open: Option<Segment>,
    /// The stack the thread runs.
    stack: StackKey,
    own: Option<OwnFusion<'t>>,
}

impl Cutter<'_, '_, '_, '_> {
    fn new_segment(&self, start: Pos, start_tick: u64, switched_in: bool, seed: Seed) -> Segment {
        let stack = segment_stack(self.stack);
        Segment::new(stack, self.index, start, start_tick, switched_in, seed)
    }

    /// The thread is now in `seg`.
    fn open_segment(&mut self, seg: Segment) {
        if seg.seed() != Seed::None {
            self.note_seed_functions(&seg);
        }
        if seg.is_own() {
            self.begin_own(&seg);
        }
        self.open = Some(seg);
    }

    /// The functions of `seg`'s seed that the metadata does not name are
    /// unknown functions, as those of events are: the seed's frames are
    /// opened whichever engine replays the stack.
    fn note_seed_functions(&mut self, seg: &Segment) {
        let Some(ids) = seed_snapshot(self.decoded, seg) else {
            return;
        };
        for id in ids {
            if self.functions.get(id.0).is_none() {
                self.unknown_function(id.0);
            }
        }
    }

    /// Function id `f`, which `functions` does not map, is used: given its
    /// dense index now (the own stack's replay counts it at once, and
    /// makes room for it); the table the ids are folded into counts them
    /// for the trace's warning.
    fn unknown_function(&mut self, f: u32) -> u32 {
        if let Some(&dense) = self.fresh_here.get(&f) {
            return dense;
        }
        let (dense, n) = self.fresh.dense(self.functions, f);
        if let Some(own) = &mut self.own {
            own.replay.grow_functions(n);
        }
        self.fresh_here.insert(f, dense);
        dense
    }

    fn begin_own(&mut self, seg: &Segment) {
        let decoded = self.decoded;
        let functions = StepFunctions {
            table: self.functions,
            fresh: self.fresh,
        };
        let Some(f) = &mut self.own else { return };
        let start_ns = f
            .replay
            .begin(decoded, &functions, f.clock, seg, &mut f.warnings);
        f.running = Some((start_ns, f.replay.offset(f.clock, start_ns)));
        f.began = true;
        f.ends_at_ns = None;
    }

    /// The thread leaves its segment before `end`, at `end_tick`.
    fn close_segment(&mut self, end: Pos, end_tick: u64) {
        let Some(mut s) = self.open.take() else {
            return;
        };
        if let Some(f) = &mut self.own {
            if let (true, Some((start_ns, _))) = (s.is_own(), f.running) {
                let end_ns = self.decoded.scale.ns(end_tick);
                f.replay.end_linear(f.clock, start_ns, end_ns);
                f.running = None;
                f.ends_at_ns = s.ends_at_lost().then_some(end_ns);
            }
        }
        s.end = end;
        s.end_tick = end_tick;
        self.keep(s);
    }

    /// Stores a finished segment, but the own stack's if the pass
    /// replays it.
    fn keep(&mut self, s: Segment) {
        if self.own.is_none() || !s.is_own() {
            self.pass.segments.push(s);
        }
    }

    /// Ends the pass: the last segment runs until the end of the trace, and
    /// so does the own stack's replay if it is in it.
    fn finish(mut self, end: Pos) -> (ThreadPass, Option<(Suspended, Warnings, Option<u64>)>) {
        let running_since = self
            .own
            .as_ref()
            .and_then(|f| f.running)
            .map(|(start, _)| start);
        if let Some(mut s) = self.open.take() {
            s.end = end;
            self.keep(s);
        }
        let own = self
            .own
            .filter(|f| f.began)
            .map(|f| (f.replay.suspend(running_since), f.warnings, f.ends_at_ns));
        (self.pass, own)
    }

    /// An enter or exit the own stack's replay has to see, if running
    /// (`span`: its window).
    #[inline(always)]
    fn own_event<W: Span>(&mut self, enter: bool, func: u32, ns: u64, span: W) {
        let Some(f) = &mut self.own else { return };
        let Some((_, offset)) = f.running else { return };
        if let Err(kind) = f.replay.event(enter, func, ns, offset, span) {
            let at = Location::Time {
                ns,
                thread: self.tid,
            };
            f.warnings.add(kind, at);
        }
    }

    /// The thread's history before this chunk is missing (lost chunks): it
    /// resumes at `tick` on `current_stack`, whose open frames the chunk's
    /// snapshot gives (the segments opened here carry that seed).
    fn restart(
        &mut self,
        chunk: u32,
        Restart {
            tick,
            current_stack,
        }: Restart,
    ) {
        let tid = self.tid;
        let at = Pos { chunk, event: 0 };
        self.close_segment(at, tick);
        // The thread goes on: a `lost` mark before this is a gap, not its end.
        self.pass.lost_at = None;
        if current_stack != StackId::OWN {
            // The own stack is paused below the logical one: open its
            // frames too, in a stretch that does not run.
            self.stack = StackKey::Own(tid);
            let own = self.new_segment(at, tick, false, Seed::Own);
            self.open_segment(own);
            self.close_segment(at, tick);
        }
        self.stack = stack_after_switch(tid, current_stack);
        let seed = if current_stack == StackId::OWN {
            Seed::Own
        } else {
            Seed::Logical
        };
        let seg = self.new_segment(at, tick, false, seed);
        self.open_segment(seg);
        self.pass.first_tick.get_or_insert(tick);
    }

    /// The thread lost its events from `tick` on (a `lost` mark at `pos`):
    /// its current stack stops there, and so does its own stack, which the
    /// thread can no longer be seen to return to. Both end there unless
    /// the thread restarts later (the segments say so; see `replay.rs`).
    fn lost(&mut self, pos: Pos, tick: u64) {
        let tid = self.tid;
        if self.open.is_none() {
            let seg = self.new_segment(pos, tick, self.pass.segments.is_empty(), Seed::None);
            self.open_segment(seg);
        }
        if let Some(s) = &mut self.open {
            s.set_ends_at_lost();
        }
        self.close_segment(pos, tick);
        if self.stack != StackKey::Own(tid) {
            // The own stack, paused below, ends with a stretch that does not run.
            self.stack = StackKey::Own(tid);
            let mut own = self.new_segment(pos, tick, false, Seed::None);
            own.set_ends_at_lost();
            self.open_segment(own);
            self.close_segment(pos, tick);
        }
        self.pass.lost_at = Some(tick);
        let at = Location::Time {
            ns: self.decoded.scale.ns(tick),
            thread: tid,
        };
        self.pass.warnings.add(WarningKind::EventsLost, at);
    }

    /// Cuts one batch: runs of ordinary events on the fast path, every
    /// other event on its own. A damaged event ends the batch.
    fn batch(&mut self, batch: &Batch<'_>, batches: &mut Batches<'_, '_>) {
        let n = batch.len();
        let mut i = 0;
        while i < n {
            i = self.ordinary_run(batch, batches, i);
            if i == n || !self.special_event(batch, batches, i) {
                break;
            }
            i += 1;
        }
    }

    /// The fast path: the run of ordinary events (see [`ordinary`]) from
    /// event `start` of the batch, the bulk of every trace. Nothing to
    /// decide per event but whether the run goes on (and, on the own stack,
    /// to replay it). Returns where the run stopped.
    #[inline(always)]
    fn ordinary_run(
        &mut self,
        batch: &Batch<'_>,
        batches: &mut Batches<'_, '_>,
        start: usize,
    ) -> usize {
        let functions = self.functions.ids();
        let n = batch.len();
        let mut floor = batches.floor();
        if self.open.is_none() {
            let (kind, tick, payload) = batch.parts(start);
            if ordinary(functions, kind, tick, payload, floor).is_some() {
                let pos = Pos {
                    chunk: batch.chunk,
                    event: batch.first_event + start as u32,
                };
                let seg = self.new_segment(pos, tick, true, Seed::None);
                self.open_segment(seg);
            }
        }
        let mut i = start;
        let replaying = self.own.as_ref().is_some_and(|f| f.running.is_some());
        if replaying {
            let window = self.own_window();
            (i, floor) = if window.is_all() {
                self.replay_run(batch, i, floor, WholeTrace)
            } else {
                self.replay_run(batch, i, floor, window)
            };
        } else {
            while i < n {
                let (kind, tick, payload) = batch.parts(i);
                if ordinary(functions, kind, tick, payload, floor).is_none() {
                    break;
                }
                floor = tick;
                i += 1;
            }
        }
        if i > start {
            batches.accept_ordered(floor);
            self.pass.events += (i - start) as u64;
            self.pass.first_tick.get_or_insert(batch.parts(start).1);
            self.pass.last_tick = Some(floor);
        }
        i
    }

    /// The ordinary events from `i` on, replayed on the own stack (counting
    /// what `span`, the replay's window, holds); returns where the run
    /// stopped and its last tick.
    #[inline(always)]
    fn replay_run<W: Span>(
        &mut self,
        batch: &Batch<'_>,
        mut i: usize,
        mut floor: u64,
        span: W,
    ) -> (usize, u64) {
        let functions = self.functions.ids();
        let scale = self.decoded.scale;
        while i < batch.len() {
            let (kind, tick, payload) = batch.parts(i);
            let Some(d) = ordinary(functions, kind, tick, payload, floor) else {
                break;
            };
            self.own_event(kind == KIND_ENTER, d, scale.ns(tick), span);
            floor = tick;
            i += 1;
        }
        (i, floor)
    }

    /// The window the own stack's replay counts.
    fn own_window(&self) -> Window {
        self.own.as_ref().map_or(Window::ALL, |f| f.replay.window())
    }

    /// The slow path: event `i` of the batch switches stacks, is damaged,
    /// goes back in time or names an unknown function. Returns false if it
    /// is damaged (the rest of the chunk is not read).
    fn special_event(
        &mut self,
        batch: &Batch<'_>,
        batches: &mut Batches<'_, '_>,
        i: usize,
    ) -> bool {
        let tid = self.tid;
        let scale = self.decoded.scale;
        let (kind, raw_tick, payload) = batch.parts(i);
        if !raw_is_valid(kind, payload) {
            let problem = batch.problem(i);
            self.pass
                .warnings
                .add(WarningKind::DamagedEvent, Location::Byte(problem.offset));
            batches.damaged();
            return false;
        }
        let (tick, clamped) = batches.clamp(raw_tick);
        if clamped {
            let at = Location::Time {
                ns: scale.ns(tick),
                thread: tid,
            };
            self.pass.warnings.add(WarningKind::ClockBackwards, at);
        }
        self.pass.events += 1;
        self.pass.first_tick.get_or_insert(tick);
        self.pass.last_tick = Some(tick);
        let pos = Pos {
            chunk: batch.chunk,
            event: batch.first_event + i as u32,
        };
        if kind == KIND_WAKE {
            // Not an event of the stack the thread runs: of the one woken.
            self.pass.wakes.push((payload, tick));
            self.pass.wakes_seen += 1;
            return true;
        }
        if kind == KIND_END {
            // Of the stack that ended, not of the one the thread runs
            // (which of them count is decided once all are read: `ends.rs`).
            self.pass.ends.push((payload, tick));
            return true;
        }
        if kind == KIND_LOST {
            self.lost(pos, tick);
            // A `lost` event ends its chunk; the next one restarts from its snapshot.
            batches.damaged();
            return false;
        }
        if kind == KIND_SWITCH {
            if self.open.is_none() && self.pass.segments.is_empty() {
                // The thread started on its own stack and left it at
                // once: record that zero-length stretch, so the own
                // stack's life starts with the thread's.
                let seg = self.new_segment(pos, tick, true, Seed::None);
                self.open_segment(seg);
            }
            self.close_segment(pos, tick);
            self.stack = stack_after_switch(tid, StackId(payload));
            let mut seg = self.new_segment(pos, tick, true, Seed::None);
            seg.resume_at(batch.resume_point(i));
            self.open_segment(seg);
            return true;
        }
        if self.open.is_none() {
            let seg = self.new_segment(pos, tick, true, Seed::None);
            self.open_segment(seg);
        }
        if kind == KIND_ENTER || kind == KIND_EXIT {
            let f = payload as u32;
            let d = match self.functions.get(f) {
                Some(d) => d,
                None => self.unknown_function(f),
            };
            let window = self.own_window();
            self.own_event(kind == KIND_ENTER, d, scale.ns(tick), window);
        }
        true
    }
}

/// An ordinary event: an enter or exit of a known function, its tick not
/// going back from `floor`. Its function's dense index if so.
#[inline(always)]
fn ordinary(
    functions: FunctionIds<'_>,
    kind: u64,
    tick: u64,
    payload: u64,
    floor: u64,
) -> Option<u32> {
    let ordinary = (kind == KIND_ENTER || kind == KIND_EXIT)
        & (payload != 0)
        & (payload <= u32::MAX as u64)
        & (tick >= floor);
    if ordinary {
        functions.get(payload as u32)
    } else {
        None
    }
}

/// Cuts thread `index` of `decoded` into segments, numbering in `fresh`
/// the functions the metadata does not name. With `fuse` (the `stack` or
/// `wall` clock), also replays the thread's own stack on the way (see
/// [`OwnReplay`]): into `shared` if given (a tally for the metadata's
/// functions and the window, which a sequential analysis uses for every
/// stack of the trace), else into a tally of its own.
pub(crate) fn cut_thread(
    decoded: &Decoded<'_>,
    index: u32,
    fuse: Option<(Clock, Window)>,
    shared: Option<&mut Tally>,
    fresh: &FreshFunctions<'_>,
) -> ThreadPass {
    let thread = &decoded.threads[index as usize];
    let tid = thread.tid.0;
    let mut own_tally = None;
    let tally = match (fuse, shared) {
        (None, _) => None,
        (Some(_), Some(t)) => Some(t),
        (Some((_, window)), None) => {
            Some(own_tally.insert(Tally::new(decoded.functions.dense_len(), false, window)))
        }
    };
    let mut observer = NoObserver;
    let own = match (fuse, tally) {
        (Some((clock, _)), Some(t)) => Some(OwnFusion {
            replay: StackReplay::new(t, ROOT, &mut observer),
            clock,
            warnings: decoded.warnings(),
            running: None,
            began: false,
            ends_at_ns: None,
        }),
        _ => None,
    };
    let mut cut = Cutter {
        decoded,
        functions: &decoded.functions,
        fresh,
        fresh_here: FxHashMap::default(),
        index,
        tid,
        pass: ThreadPass {
            warnings: decoded.warnings(),
            ..ThreadPass::default()
        },
        open: None,
        stack: StackKey::Own(tid),
        own,
    };
    let mut batches = Batches::all(&decoded.file, thread);
    while let Some(batch) = batches.next_batch() {
        if let Some(restart) = batch.restart {
            cut.restart(batch.chunk, restart);
        }
        cut.batch(&batch, &mut batches);
    }
    let end = Pos {
        chunk: thread.chunks.len() as u32,
        event: 0,
    };
    let (mut pass, own) = cut.finish(end);
    if let Some((state, warnings, ends_at_ns)) = own {
        pass.own_replay = Some(OwnReplay {
            tally: own_tally,
            state,
            warnings,
            ends_at_ns,
        });
    }
    pass
}

/// One thread's segment pass cut into steps for the streamed analysis
/// (`stream/`): each [`ThreadStream::cut_until`] reads whole chunks until
/// the thread's clock reaches a time, and leaves the segments it closed,
/// the wakes and the ends in [`ThreadStream::pass`] for the caller to take.
/// Between steps the thread's state is kept here: its open segment, the
/// stack it runs, and the own stack's replay, suspended on the thread's
/// own tally (it is always fused: a stream that cannot fuse is not
/// streamed).
pub(crate) struct ThreadStream {
    index: u32,
    /// What the pass found so far; its segments, wakes and ends are the
    /// caller's to drain after each step.
    pub pass: ThreadPass,
    open: Option<Segment>,
    stack: StackKey,
    /// `None` under `gil`, whose own stacks are replayed as logical ones
    /// are (the runs need every thread's events first): their segments
    /// are the caller's too.
    own: Option<OwnBetweenSteps>,
    /// Where the thread's next chunk starts, and the tick its events may
    /// not go below.
    next: Pos,
    floor: u64,
    /// The last chunk read ended at a damaged event (or a `lost` mark):
    /// the next restarts from its snapshot (a step may end between the
    /// two).
    restart_next: bool,
    done: bool,
}

/// How a stream's segment pass replays a thread's own stack on the way.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FusedOwn {
    /// The clock (`stack` or `wall`: `gil` needs every thread's events first).
    pub(crate) clock: Clock,
    /// With call paths: where the stack's hang ([`ROOT`], or its label).
    pub(crate) paths_root: Option<u32>,
}

/// The own stack's fused replay between two steps.
struct OwnBetweenSteps {
    tally: Tally,
    clock: Clock,
    paths_root: u32,
    state: Option<Suspended>,
    warnings: Warnings,
    running: Option<(u64, u64)>,
    began: bool,
    ends_at_ns: Option<u64>,
}

/// Why a trace cannot be streamed after all (the batch analysis takes it).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NotStreamable(pub &'static str);

impl ThreadStream {
    /// Thread `index` of `decoded`, not read yet; with `own`, its own
    /// stack replayed on the way into a tally of its own for `n_functions`
    /// functions, counting what `window` holds; without, its own stack's
    /// segments are the caller's, as logical ones are.
    pub(crate) fn new(
        decoded: &Decoded<'_>,
        index: u32,
        own: Option<FusedOwn>,
        n_functions: usize,
        window: Window,
    ) -> Self {
        let tid = decoded.threads[index as usize].tid.0;
        ThreadStream {
            index,
            pass: ThreadPass {
                warnings: decoded.warnings(),
                ..ThreadPass::default()
            },
            open: None,
            stack: StackKey::Own(tid),
            own: own.map(|o| OwnBetweenSteps {
                tally: Tally::new(n_functions, o.paths_root.is_some(), window),
                clock: o.clock,
                paths_root: o.paths_root.unwrap_or(ROOT),
                state: None,
                warnings: decoded.warnings(),
                running: None,
                began: false,
                ends_at_ns: None,
            }),
            next: Pos::default(),
            floor: 0,
            restart_next: false,
            done: false,
        }
    }

    /// Ends the pass once every event is read ([`ThreadStream::floor`] is `None`),
    /// as [`cut_thread`] does: the segment the thread is in runs until the
    /// end of the trace (it is the pass's last, if on a logical stack), and
    /// so does the own stack's replay if it is in it.
    pub(crate) fn finish(mut self, decoded: &Decoded<'_>) -> ThreadPass {
        let end = Pos {
            chunk: decoded.threads[self.index as usize].chunks.len() as u32,
            event: 0,
        };
        if let Some(mut s) = self.open.take() {
            s.end = end;
            if !s.is_own() || self.own.is_none() {
                self.pass.segments.push(s);
            }
        }
        if let Some(own) = self.own {
            if let (true, Some(state)) = (own.began, own.state) {
                self.pass.own_replay = Some(OwnReplay {
                    tally: Some(own.tally),
                    state,
                    warnings: own.warnings,
                    ends_at_ns: own.ends_at_ns,
                });
            }
        }
        self.pass
    }

    /// The tick no event still to read is below (clamped ticks never go
    /// back); `None` once every event is read.
    pub(crate) fn floor(&self) -> Option<u64> {
        (!self.done).then_some(self.floor)
    }

    /// The segment the thread is in, if any.
    pub(crate) fn open_segment(&self) -> Option<&Segment> {
        self.open.as_ref()
    }

    /// Reads whole chunks until the thread's clock reaches `until` (the
    /// last event read is at or after it) or its events end, as
    /// [`cut_thread`] reads them (restarts from snapshots, `lost` marks and
    /// damaged events included). `functions` is the step's table; a
    /// function it does not map is numbered in `fresh`.
    pub(crate) fn cut_until(
        &mut self,
        decoded: &Decoded<'_>,
        functions: &FunctionTable<'_>,
        fresh: &FreshFunctions<'_>,
        until: u64,
    ) {
        if self.done {
            return;
        }
        let thread = &decoded.threads[self.index as usize];
        let mut observer = NoObserver;
        let (fusion, own) = match &mut self.own {
            Some(OwnBetweenSteps {
                tally,
                clock,
                paths_root,
                state,
                warnings,
                running,
                began,
                ends_at_ns,
            }) => {
                let replay = match state.take() {
                    Some(s) => StackReplay::reopen(s, tally, &mut observer, &[]),
                    None => StackReplay::new(tally, *paths_root, &mut observer),
                };
                let fusion = OwnFusion {
                    replay,
                    clock: *clock,
                    warnings: std::mem::take(warnings),
                    running: *running,
                    began: *began,
                    ends_at_ns: *ends_at_ns,
                };
                (
                    Some(fusion),
                    Some((state, warnings, running, began, ends_at_ns)),
                )
            }
            None => (None, None),
        };
        let mut cut = Cutter {
            decoded,
            functions,
            fresh,
            fresh_here: FxHashMap::default(),
            index: self.index,
            tid: thread.tid.0,
            pass: std::mem::take(&mut self.pass),
            open: self.open.take(),
            stack: self.stack,
            own: fusion,
        };
        let end = Pos {
            chunk: thread.chunks.len() as u32,
            event: 0,
        };
        // Whole chunks: `next` is a chunk's start.
        let mut batches = Batches::new(&decoded.file, thread, self.next, end, self.floor, None);
        if self.restart_next {
            batches.damaged();
        }
        loop {
            let Some(batch) = batches.next_batch() else {
                self.done = true;
                break;
            };
            if let Some(restart) = batch.restart {
                // After lost chunks, a pause, a `lost` mark or a damaged
                // event, or at a thread's first chunk in a later file of a
                // series: the cutter restarts the thread from the
                // snapshot in either engine.
                cut.restart(batch.chunk, restart);
            }
            cut.batch(&batch, &mut batches);
            if batches.floor() >= until {
                break;
            }
        }
        self.next = batches.position();
        self.floor = batches.floor();
        self.restart_next = batches.restart_pending();
        self.pass = std::mem::take(&mut cut.pass);
        self.open = cut.open.take();
        self.stack = cut.stack;
        if let (Some(f), Some((state, warnings, running, began, ends_at_ns))) =
            (cut.own.take(), own)
        {
            let running_since = f.running.map(|(start, _)| start);
            *warnings = f.warnings;
            *running = f.running;
            *began = f.began;
            *ends_at_ns = f.ends_at_ns;
            *state = Some(f.replay.suspend(running_since));
        }
    }

    /// Makes room in the own stack's tally for `n` functions (the step's
    /// table took in those another thread met).
    pub(crate) fn grow_functions(&mut self, n: usize) {
        if let Some(own) = &mut self.own {
            own.tally.grow(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::decode::{decode, switch_points, Decoded, FreshFunctions, ResumePoint};

    /// A segment that a `switch` inside a compact chunk opens carries
    /// that switch as its resume point, as the format crate's one-event
    /// decoder finds it, so its replay expands the chunk from there; any other
    /// segment (a chunk's start, a 16-byte chunk) replays from the
    /// chunk's start.
    #[test]
    fn a_segment_opened_by_a_compact_switch_resumes_there() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample-traces");
        let (mut resumed, mut from_start) = (0, 0);
        for (name, compact) in [("workload-v4.bin", true), ("workload.bin", false)] {
            let bytes = std::fs::read(root.join(name)).expect("sample trace");
            let decoded = decode(&bytes, None, false).expect("decodes");
            for index in 0..decoded.threads.len() {
                let points = switch_points(&decoded, index);
                let fresh = FreshFunctions::new(&decoded.functions, None);
                let pass = cut_thread(&decoded, index as u32, None, None, &fresh);
                for seg in pass.segments.iter() {
                    let at_switch = points
                        .get(seg.start.chunk as usize)
                        .and_then(|p| p.iter().find(|p| p.at == seg.start))
                        .filter(|p| p.offset > 0);
                    assert_eq!(seg.resume_point(), at_switch.copied(), "{name}: {seg:?}");
                    assert_eq!(
                        at_switch.is_some(),
                        compact && seg.start.event > 0 && seg.switched_in(),
                        "{name}: {seg:?}"
                    );
                    if at_switch.is_some() {
                        resumed += 1;
                    } else {
                        from_start += 1;
                    }
                }
            }
        }
        assert!(resumed > 100, "{resumed} segments resume at a switch");
        assert!(from_start > 0);
    }

    /// A compact trace of one thread switching between three fibers, its
    /// clock jumping ahead by `jump` once and going on below the jump:
    /// the later events clamp to the jump until the clock passes it.
    fn jumped_trace(jump: u64) -> Vec<u8> {
        use mtrace_format::{EventKind, ThreadId, TraceFile, TraceWriter, WriterOptions};
        let options = WriterOptions {
            chunk_size: mtrace_format::layout::MIN_CHUNK_SIZE,
            ..Default::default()
        };
        let mut w = TraceWriter::new(std::io::Cursor::new(Vec::new()), options).expect("writer");
        let (f, g) = (w.function("f", "", 0, ""), w.function("g", "", 0, ""));
        let fibers: Vec<_> = (0..3).map(|i| w.stack(&format!("fiber-{i}"))).collect();
        let mut t = 0;
        for round in 0..200 {
            for (i, &fiber) in fibers.iter().enumerate() {
                let kinds = [
                    EventKind::Switch(fiber),
                    EventKind::Enter(f),
                    EventKind::Enter(g),
                    EventKind::Exit(g),
                    EventKind::Exit(f),
                ];
                for (k, kind) in kinds.into_iter().enumerate() {
                    t += 10;
                    let jumps = (round, i, k) == (20, 0, 2);
                    let tick = if jumps { t + jump } else { t };
                    w.event(ThreadId(1), tick, kind).expect("event");
                }
            }
        }
        let sixteen = w.finish(None).expect("finish").into_inner();
        let file = TraceFile::parse(&sixteen).expect("parses");
        mtrace_format::convert::compact(&file)
            .expect("converts")
            .bytes
    }

    /// The events (kind, clamped tick, payload) a replay of `seg` reads,
    /// its first chunk expanded from `resume` or from the chunk's start.
    fn replayed(
        decoded: &Decoded<'_>,
        seg: &Segment,
        resume: Option<ResumePoint>,
    ) -> Vec<(u64, u64, u64)> {
        let thread = &decoded.threads[seg.thread as usize];
        let mut batches = Batches::new(
            &decoded.file,
            thread,
            seg.start,
            seg.end,
            seg.start_tick,
            resume,
        );
        let mut events = Vec::new();
        while let Some(batch) = batches.next_batch() {
            for i in 0..batch.len() {
                let (kind, tick, payload) = batch.parts(i);
                events.push((kind, batches.clamp(tick).0, payload));
            }
        }
        events
    }

    /// After a far jump (as a damaged tick delta makes), every later
    /// segment begins and ends at the jump's tick. Those a compact chunk's
    /// `switch` opens resume there although the switch's own tick is not
    /// kept, and read the events, clamped, that a walk from the chunk's
    /// start reads.
    #[test]
    fn flat_segments_after_a_clock_jump_resume_at_their_switch() {
        let compact = jumped_trace(1 << 40);
        let decoded = decode(&compact, None, false).expect("decodes");
        let fresh = FreshFunctions::new(&decoded.functions, None);
        let pass = cut_thread(&decoded, 0, None, None, &fresh);
        let mut flat = 0;
        for seg in pass.segments.iter() {
            let Some(point) = seg.resume_point().filter(|p| p.tick.is_none()) else {
                continue;
            };
            flat += 1;
            assert_eq!(seg.start_tick, seg.end_tick, "{seg:?}");
            let events = replayed(&decoded, seg, Some(point));
            assert!(!events.is_empty());
            assert_eq!(events, replayed(&decoded, seg, None), "{seg:?}");
        }
        assert!(flat > 100, "{flat} flat segments resume at their switch");
    }

    /// After a short jump the clock passes the jump again inside a
    /// segment opened by a clamped switch: its events do not all clamp to
    /// its start, so a walk from the switch that does not know the
    /// switch's tick would read other ticks. Such a segment is replayed
    /// from its chunk's start.
    #[test]
    fn a_segment_the_clock_passes_a_jump_in_is_replayed_from_its_chunks_start() {
        let compact = jumped_trace(2_000);
        let decoded = decode(&compact, None, false).expect("decodes");
        let points = switch_points(&decoded, 0);
        let fresh = FreshFunctions::new(&decoded.functions, None);
        let pass = cut_thread(&decoded, 0, None, None, &fresh);
        let mut rising = 0;
        for seg in pass.segments.iter() {
            let Some(at_switch) = points
                .get(seg.start.chunk as usize)
                .and_then(|p| p.iter().find(|p| p.at == seg.start && p.offset > 0))
            else {
                continue;
            };
            if at_switch.tick == Some(seg.start_tick) {
                assert_eq!(seg.resume_point(), Some(*at_switch));
                continue;
            }
            let without_tick = ResumePoint {
                tick: None,
                ..*at_switch
            };
            let whole = replayed(&decoded, seg, None);
            if seg.start_tick == seg.end_tick {
                assert_eq!(seg.resume_point(), Some(without_tick));
                assert_eq!(replayed(&decoded, seg, Some(without_tick)), whole);
            } else {
                rising += 1;
                assert_eq!(seg.resume_point(), None, "{seg:?}");
                assert_ne!(replayed(&decoded, seg, Some(without_tick)), whole);
            }
        }
        assert!(rising > 0, "a clamped segment the clock rises in");
    }
}

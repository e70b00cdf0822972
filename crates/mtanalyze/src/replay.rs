//! Replaying one stack: frames, recursion, and time with the paused
//! stretches cut out.
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
//! Recursion is decided per stack with counters of open frames per function
//! and per (caller, callee) edge: a frame is recursive iff its function's
//! counter is non-zero when it is entered, which is exactly what a walk down
//! the stack would find (a property test compares the two).
//!
//! Pieces: [`FrameStack`] (open frames, counters, totals of one stack) over a
//! [`Tally`] (a worker's statistics and scratch, reused stack after stack);
//! [`StackReplay`] (one stack, segment by segment), driven by
//! [`replay_stack`] from the stack's segments or by the segment pass for a
//! thread's own stack.

use rustc_hash::FxHashMap;

use mtrace_format::event::{raw_is_valid, raw_parts, KIND_ENTER, KIND_EXIT};
use mtrace_format::layout::EVENT_SIZE;
use mtrace_format::TraceFile;

use crate::clock::{Clock, GilCursor, GilTimeline};
use crate::decode::{prefetch, Batches, Decoded, FunctionTable};
use crate::paths::{PathTree, ROOT};
use crate::report::StackStats;
use crate::segment::{Seed, Segment, StackKey};
use crate::warnings::{Location, WarningKind, Warnings};

/// Totals of one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FnAcc {
    /// Frames.
    pub ncalls: u64,
    /// Non-recursive frames.
    pub primitive_calls: u64,
    /// Sum of self time.
    pub tottime_ns: u64,
    /// Sum of active time of non-recursive frames.
    pub cumtime_ns: u64,
    /// Sum of paused time of non-recursive frames.
    pub paused_ns: u64,
    /// Frames still open at the end of the trace (closed there).
    pub open_at_end: u64,
}

/// Totals of one caller -> callee edge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeAcc {
    /// Frames.
    pub ncalls: u64,
    /// Frames whose edge is not recursive.
    pub primitive_calls: u64,
    /// Sum of self time.
    pub tottime_ns: u64,
    /// Sum of active time of non-recursive edge frames.
    pub cumtime_ns: u64,
}

impl EdgeAcc {
    /// Adds `other`'s totals.
    pub fn add(&mut self, other: &EdgeAcc) {
        self.ncalls += other.ncalls;
        self.primitive_calls += other.primitive_calls;
        self.tottime_ns = self.tottime_ns.saturating_add(other.tottime_ns);
        self.cumtime_ns = self.cumtime_ns.saturating_add(other.cumtime_ns);
    }
}

/// Statistics accumulated over any number of stacks. Sums only, so merging
/// in any order gives the same result.
#[derive(Clone, Debug, Default)]
pub struct Acc {
    /// By dense function index.
    pub functions: Vec<FnAcc>,
    /// By (caller, callee) dense indices.
    pub edges: FxHashMap<(u32, u32), EdgeAcc>,
    /// Call paths, when asked for.
    pub paths: Option<PathTree>,
}

impl Acc {
    /// An empty accumulator for `n` functions.
    pub fn new(n: usize, paths: bool) -> Acc {
        Acc {
            functions: vec![FnAcc::default(); n],
            edges: FxHashMap::default(),
            paths: paths.then(PathTree::default),
        }
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: Acc) {
        if self.functions.len() < other.functions.len() {
            self.functions
                .resize(other.functions.len(), FnAcc::default());
        }
        for (a, b) in self.functions.iter_mut().zip(other.functions) {
            a.ncalls += b.ncalls;
            a.primitive_calls += b.primitive_calls;
            a.tottime_ns = a.tottime_ns.saturating_add(b.tottime_ns);
            a.cumtime_ns = a.cumtime_ns.saturating_add(b.cumtime_ns);
            a.paused_ns = a.paused_ns.saturating_add(b.paused_ns);
            a.open_at_end += b.open_at_end;
        }
        for (k, b) in other.edges {
            self.edges.entry(k).or_default().add(&b);
        }
        if let (Some(a), Some(b)) = (&mut self.paths, &other.paths) {
            a.merge_from(b, ROOT);
        }
    }
}

const NO_PARENT: u32 = u32::MAX;
/// How far ahead of the event being replayed its successors are prefetched.
const PREFETCH_AHEAD: usize = 1024;

/// A stack's (caller, callee) edges: numbered on first use, each with its
/// open frames and totals in one entry, found through an open-addressing
/// index of 4-byte numbers kept at most half full.
///
/// Entering a frame costs one multiply, a probe of the small index and the
/// edge's entry; leaving it touches the same entry again. (A general hash
/// map behind a small cache missed on traces with thousands of edges.)
#[derive(Debug)]
struct EdgeTable {
    /// Edge numbers, or `VACANT`.
    index: Vec<u32>,
    shift: u32,
    /// By number.
    entries: Vec<EdgeEntry>,
}

#[derive(Clone, Copy, Debug, Default)]
struct EdgeEntry {
    /// `caller << 32 | callee`.
    key: u64,
    /// Frames of this edge open now.
    open: u32,
    totals: EdgeAcc,
}

impl EdgeTable {
    const INITIAL_BITS: u32 = 6;
    const VACANT: u32 = u32::MAX;

    fn new() -> EdgeTable {
        EdgeTable {
            index: vec![Self::VACANT; 1 << Self::INITIAL_BITS],
            shift: 64 - Self::INITIAL_BITS,
            entries: Vec::new(),
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// Opens a frame of edge (`caller`, `callee`); returns the edge's
    /// number and whether a frame of it was already open.
    #[inline(always)]
    fn open(&mut self, caller: u32, callee: u32) -> (u32, bool) {
        let key = (caller as u64) << 32 | callee as u64;
        let mask = self.index.len() - 1;
        let mut i = self.home(key);
        let number = loop {
            match self.index[i] {
                Self::VACANT => break self.insert(i, key),
                n if self.entries[n as usize].key == key => break n,
                _ => i = (i + 1) & mask,
            }
        };
        let e = &mut self.entries[number as usize];
        e.open += 1;
        (number, e.open > 1)
    }

    /// Counts a frame of edge `number` open again (see `FrameStack::put_back`).
    fn reopen(&mut self, number: u32) {
        self.entries[number as usize].open += 1;
    }

    /// Closes a frame of edge `number`; returns the edge's totals.
    #[inline(always)]
    fn close(&mut self, number: u32) -> &mut EdgeAcc {
        let e = &mut self.entries[number as usize];
        e.open -= 1;
        &mut e.totals
    }

    #[cold]
    fn insert(&mut self, at: usize, key: u64) -> u32 {
        let number = self.entries.len() as u32;
        self.entries.push(EdgeEntry {
            key,
            ..EdgeEntry::default()
        });
        self.index[at] = number;
        if self.entries.len() * 2 > self.index.len() {
            self.index = vec![Self::VACANT; self.index.len() * 2];
            self.shift -= 1;
            let mask = self.index.len() - 1;
            for (n, e) in self.entries.iter().enumerate() {
                let mut i = self.home(e.key);
                while self.index[i] != Self::VACANT {
                    i = (i + 1) & mask;
                }
                self.index[i] = n as u32;
            }
        }
        number
    }

    /// Every edge with its totals, emptying the table.
    fn drain(&mut self) -> impl Iterator<Item = ((u32, u32), EdgeAcc)> + '_ {
        self.entries
            .drain(..)
            .map(|e| (((e.key >> 32) as u32, e.key as u32), e.totals))
    }
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    func: u32,
    /// Number in `FrameStack::edges`, or `NO_PARENT` for a root frame.
    edge: u32,
    /// Node in `FrameStack::paths` (unused when paths are off).
    node: u32,
    enter_ns: u64,
    enter_r: u64,
    child_active: u64,
    recursive: bool,
    edge_recursive: bool,
}

/// Sees every frame and every running stretch of a stack as the replay
/// finds them; the exports that draw timelines use it. The statistics never
/// need it: [`NoObserver`] compiles to nothing.
pub trait Observer {
    /// A frame of `func` (dense index), with `depth` frames open below it,
    /// was open from `enter_ns` to `exit_ns`.
    fn frame(&mut self, _func: u32, _depth: u32, _enter_ns: u64, _exit_ns: u64) {}
    /// The stack ran from `start_ns` to `end_ns` (stretches may touch or,
    /// on broken input, overlap).
    fn running(&mut self, _start_ns: u64, _end_ns: u64) {}
    /// The stack lived from `start_ns` (its first stretch) to `end_ns` (its
    /// last switch away, or the end of the trace if frames were open there).
    fn life(&mut self, _start_ns: u64, _end_ns: u64) {}
}

/// Observes nothing.
pub struct NoObserver;

impl Observer for NoObserver {}

/// The open frames of one stack and the counters that decide recursion.
/// Edges are numbered per stack on first use, so entering a frame costs one
/// table lookup and leaving it none.
pub struct FrameStack<'a, O: Observer = NoObserver> {
    t: &'a mut Tally,
    paths: Option<PathTree>,
    /// Where this stack's paths hang in the merged tree.
    paths_root: u32,
    observer: &'a mut O,
    /// Deepest depth reached.
    pub max_depth: u32,
}

/// What one replay worker accumulates, stack after stack: the statistics,
/// and the scratch a stack's replay needs. Every replay ends with all its
/// frames closed, which leaves the open-frame counters at zero for the next
/// stack; allocating them per stack cost more than replaying a short async
/// task. Edges keep their numbers across stacks and reach the statistics in
/// [`Tally::into_acc`].
#[derive(Debug)]
pub struct Tally {
    acc: Acc,
    frames: Vec<Frame>,
    fn_open: Vec<u32>,
    edges: EdgeTable,
}

impl Tally {
    /// An empty tally for `n` functions, with call paths or not.
    pub fn new(n: usize, paths: bool) -> Tally {
        Tally {
            acc: Acc::new(n, paths),
            frames: Vec::new(),
            fn_open: vec![0; n],
            edges: EdgeTable::new(),
        }
    }

    /// The statistics of every stack replayed.
    pub fn into_acc(mut self) -> Acc {
        for (key, e) in self.edges.drain() {
            self.acc.edges.entry(key).or_default().add(&e);
        }
        self.acc
    }
}

impl<O: Observer> Drop for FrameStack<'_, O> {
    fn drop(&mut self) {
        if let (Some(all), Some(mine)) = (&mut self.t.acc.paths, &self.paths) {
            let root = match self.paths_root {
                ROOT => ROOT,
                label => all.child(ROOT, label),
            };
            all.merge_from(mine, root);
        }
    }
}

impl<'a, O: Observer> FrameStack<'a, O> {
    /// An empty stack replayed with `tally`'s scratch, into its statistics
    /// (call paths are added when it is dropped). `paths_root`: [`ROOT`] to
    /// merge call paths of all stacks, or a `STACK_LABEL` node to keep this
    /// stack's apart.
    pub fn new(tally: &'a mut Tally, paths_root: u32, observer: &'a mut O) -> FrameStack<'a, O> {
        debug_assert!(tally.frames.is_empty(), "the last stack closed its frames");
        let paths = tally.acc.paths.is_some().then(PathTree::default);
        FrameStack {
            t: tally,
            paths,
            paths_root,
            observer,
            max_depth: 0,
        }
    }

    /// Frames open now.
    pub fn depth(&self) -> usize {
        self.t.frames.len()
    }

    /// Pushes a frame of `func` at wall time `ns`, running clock `r`.
    #[inline(always)]
    pub fn enter(&mut self, func: u32, ns: u64, r: u64) {
        let recursive = self.t.fn_open[func as usize] > 0;
        self.t.fn_open[func as usize] += 1;
        let (edge, edge_recursive) = match self.t.frames.last() {
            None => (NO_PARENT, false),
            Some(parent) => self.t.edges.open(parent.func, func),
        };
        let node = match &mut self.paths {
            Some(t) => t.child(self.t.frames.last().map_or(ROOT, |p| p.node), func),
            None => 0,
        };
        self.t.frames.push(Frame {
            func,
            edge,
            node,
            enter_ns: ns,
            enter_r: r,
            child_active: 0,
            recursive,
            edge_recursive,
        });
        self.max_depth = self.max_depth.max(self.t.frames.len() as u32);
    }

    /// Pops the frame of `func` (repairing as `schemas/semantics.md` says).
    #[inline(always)]
    pub fn exit(&mut self, func: u32, ns: u64, r: u64) -> Result<(), WarningKind> {
        match self.t.frames.last() {
            None => Err(WarningKind::ExitOnEmpty),
            Some(top) if top.func == func => {
                self.pop(ns, r);
                Ok(())
            }
            Some(_) => {
                let Some(pos) = self.t.frames.iter().rposition(|f| f.func == func) else {
                    return Err(WarningKind::ExitNotOpen);
                };
                while self.t.frames.len() > pos {
                    self.pop(ns, r);
                }
                Err(WarningKind::ExitMismatch)
            }
        }
    }

    /// Makes the open frames equal `truth` (outermost first), after events
    /// were lost: frames that match from the bottom stay open, the rest are
    /// closed at `ns`, and the missing ones are opened at `ns`. Returns how
    /// many were opened.
    pub fn reconcile(&mut self, truth: &[u32], ns: u64, r: u64) -> u64 {
        let common = self
            .t
            .frames
            .iter()
            .zip(truth)
            .take_while(|(f, &t)| f.func == t)
            .count();
        while self.t.frames.len() > common {
            self.pop(ns, r);
        }
        for &f in &truth[common..] {
            self.enter(f, ns, r);
        }
        (truth.len() - common) as u64
    }

    /// Removes the open frames without accounting them, undoing their
    /// counts (see [`StackReplay::suspend`]).
    fn take_all(&mut self) -> Vec<Frame> {
        let frames = std::mem::take(&mut self.t.frames);
        for f in &frames {
            self.t.fn_open[f.func as usize] -= 1;
            if f.edge != NO_PARENT {
                self.t.edges.close(f.edge);
            }
        }
        frames
    }

    /// Puts back frames [`FrameStack::take_all`] removed from the same tally.
    fn put_back(&mut self, frames: Vec<Frame>) {
        for f in &frames {
            self.t.fn_open[f.func as usize] += 1;
            if f.edge != NO_PARENT {
                self.t.edges.reopen(f.edge);
            }
        }
        self.t.frames = frames;
    }

    /// Closes every open frame at the end of the trace.
    pub fn close_all(&mut self, ns: u64, r: u64) {
        while let Some(f) = self.t.frames.last() {
            self.t.acc.functions[f.func as usize].open_at_end += 1;
            self.pop(ns, r);
        }
    }

    #[inline(always)]
    fn pop(&mut self, ns: u64, r: u64) {
        let Some(f) = self.t.frames.pop() else { return };
        let active = r.saturating_sub(f.enter_r);
        let paused = ns.saturating_sub(f.enter_ns).saturating_sub(active);
        let self_ns = active.saturating_sub(f.child_active);
        self.t.fn_open[f.func as usize] -= 1;
        self.observer.frame(
            f.func,
            self.t.frames.len() as u32,
            f.enter_ns,
            ns.max(f.enter_ns),
        );
        if let Some(t) = &mut self.paths {
            t.record(f.node, self_ns);
        }
        // Recursion is data: masks instead of branches, which mispredict
        // whenever recursion comes and goes.
        let primitive = !f.recursive as u64;
        let keep = primitive.wrapping_neg();
        let a = &mut self.t.acc.functions[f.func as usize];
        a.ncalls += 1;
        a.tottime_ns = a.tottime_ns.saturating_add(self_ns);
        a.primitive_calls += primitive;
        a.cumtime_ns = a.cumtime_ns.saturating_add(active & keep);
        a.paused_ns = a.paused_ns.saturating_add(paused & keep);
        if f.edge != NO_PARENT {
            let primitive = !f.edge_recursive as u64;
            let e = self.t.edges.close(f.edge);
            e.ncalls += 1;
            e.tottime_ns = e.tottime_ns.saturating_add(self_ns);
            e.primitive_calls += primitive;
            e.cumtime_ns = e
                .cumtime_ns
                .saturating_add(active & primitive.wrapping_neg());
        }
        if let Some(parent) = self.t.frames.last_mut() {
            parent.child_active = parent.child_active.saturating_add(active);
        }
    }
}

/// Everything a stack's replay needs besides its segments.
pub struct ReplayContext<'d, 'a> {
    /// The decoded trace.
    pub decoded: &'d Decoded<'a>,
    /// Function ids to dense indices (complete: unknown ids added).
    pub functions: &'d FunctionTable,
    /// The clock.
    pub clock: Clock,
    /// The `gil` clock's timeline (only for `Clock::Gil`).
    pub gil: Option<&'d GilTimeline>,
    /// End of the trace, in ticks.
    pub end_tick: u64,
}

impl ReplayContext<'_, '_> {
    fn file(&self) -> &TraceFile<'_> {
        &self.decoded.file
    }

    fn ns(&self, tick: u64) -> u64 {
        self.decoded.scale.ns(tick)
    }
}

/// Replays one stack's segments (sorted by start) into `tally`, showing
/// `observer` every frame and running stretch; returns the stack's
/// statistics (unnamed: see [`stack_name`]) and any problems.
#[allow(clippy::too_many_arguments)]
pub fn replay_stack<O: Observer>(
    ctx: &ReplayContext<'_, '_>,
    key: StackKey,
    segments: &[&Segment],
    tally: &mut Tally,
    warnings: &mut Warnings,
    paths_root: u32,
    observer: &mut O,
) -> StackStats {
    let end_ns = ctx.ns(ctx.end_tick);
    let mut stack = StackReplay::new(tally, paths_root, observer);
    // Where the stack's last stretch left the gil timeline.
    let mut gil_hint = 0;
    for (i, seg) in segments.iter().enumerate() {
        // Segments (and their events) are scattered: start loading the
        // ones after this while it replays.
        if let Some(&later) = segments.get(i + 2) {
            prefetch((later as *const Segment).cast());
        }
        if let Some(next) = segments.get(i + 1) {
            let chunks = &ctx.decoded.threads[next.thread as usize].chunks;
            if let Some(c) = chunks.get(next.start.chunk as usize) {
                let at = c.events_offset as usize + next.start.event as usize * EVENT_SIZE;
                prefetch(ctx.file().bytes().as_ptr().wrapping_add(at));
            }
        }
        let seg_end_ns = seg.switched_away().map_or(end_ns, |t| ctx.ns(t));
        let start_ns = stack.begin(ctx.decoded, ctx.functions, ctx.clock, seg, warnings);
        let thread = &ctx.decoded.threads[seg.thread as usize];
        let mut batches = Batches::new(
            ctx.file(),
            &thread.chunks,
            seg.start,
            seg.end,
            seg.start_tick,
        );
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
                };
                stack.so_far.events += replay_events(
                    ctx,
                    &mut batches,
                    &mut gil,
                    &mut stack.frames,
                    seg.tid,
                    warnings,
                );
                // The stretch from the last event to the switch away (or the end).
                if let Some((lt, lns)) = gil.last {
                    let run = gil.cursor.run_after(lt, lns, seg_end_ns);
                    stack.frames.observer.running(lns, lns + run);
                    gil.r = gil.r.saturating_add(run);
                }
                stack.end_gil(gil.r, seg_end_ns);
                gil_hint = gil.cursor.position();
            }
            None => {
                let mut linear = Linear {
                    offset: stack.offset(ctx.clock, start_ns),
                };
                stack.so_far.events += replay_events(
                    ctx,
                    &mut batches,
                    &mut linear,
                    &mut stack.frames,
                    seg.tid,
                    warnings,
                );
                stack.end_linear(ctx.clock, start_ns, seg_end_ns);
            }
        }
    }
    stack.finish(ctx.clock, key, end_ns)
}

/// One stack's replay, segment after segment: [`replay_stack`] drives it
/// from the stack's segments; the segment pass drives it for a thread's own
/// stack while it reads the thread's events (one read instead of two).
pub struct StackReplay<'a, O: Observer = NoObserver> {
    frames: FrameStack<'a, O>,
    so_far: SoFar,
}

/// What a stack's replay has summed up besides its frames.
#[derive(Debug, Default)]
struct SoFar {
    /// The running clock at the end of the last segment.
    r: u64,
    events: u64,
    switches_in: u64,
    threads: Vec<u64>,
    /// The latest end of a finished segment.
    prev_end_ns: u64,
    first_start_ns: Option<u64>,
}

/// A thread's own stack whose replay waits for the end of the trace (to
/// close its open frames): everything [`StackReplay::resume`] needs, with
/// the open frames taken off the tally they were replayed with.
#[derive(Debug)]
pub struct Suspended {
    frames: Vec<Frame>,
    so_far: SoFar,
    max_depth: u32,
    /// The segment still running at the thread's last event: its start.
    running_since_ns: Option<u64>,
}

impl<'a, O: Observer> StackReplay<'a, O> {
    /// An empty stack replayed with `tally` (see [`FrameStack::new`]).
    pub fn new(tally: &'a mut Tally, paths_root: u32, observer: &'a mut O) -> Self {
        StackReplay {
            frames: FrameStack::new(tally, paths_root, observer),
            so_far: SoFar::default(),
        }
    }

    /// Starts segment `seg` (its end is not needed yet); returns its start
    /// in ns. `functions` must know every function of the seed snapshot.
    pub fn begin(
        &mut self,
        decoded: &Decoded<'_>,
        functions: &FunctionTable,
        clock: Clock,
        seg: &Segment,
        warnings: &mut Warnings,
    ) -> u64 {
        let start_ns = decoded.scale.ns(seg.start_tick);
        if self.so_far.first_start_ns.is_some() && start_ns < self.so_far.prev_end_ns {
            let at = Location::Time {
                ns: start_ns,
                thread: seg.tid,
            };
            warnings.add(WarningKind::StackOnTwoThreads, at);
        }
        self.so_far.first_start_ns.get_or_insert(start_ns);
        if !self.so_far.threads.contains(&seg.tid) {
            self.so_far.threads.push(seg.tid);
        }
        self.so_far.switches_in += seg.switched_in as u64;
        if seg.seed != Seed::None {
            let r = match clock {
                Clock::Wall => start_ns,
                _ => self.so_far.r,
            };
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

    /// `stack` and `wall`: the running clock during a segment that started
    /// at `start_ns` is wall time plus this (ticks are clamped from the
    /// segment's start, so `ns - start_ns` never underflows).
    #[inline(always)]
    pub fn offset(&self, clock: Clock, start_ns: u64) -> u64 {
        match clock {
            Clock::Wall => 0,
            _ => self.so_far.r.wrapping_sub(start_ns),
        }
    }

    /// Ends a `stack` or `wall` segment that ran from `start_ns` to `end_ns`.
    pub fn end_linear(&mut self, clock: Clock, start_ns: u64, end_ns: u64) {
        if clock == Clock::Stack {
            self.frames.observer.running(start_ns, end_ns);
        }
        let r_end = match clock {
            Clock::Wall => end_ns,
            _ => self
                .so_far
                .r
                .saturating_add(end_ns.saturating_sub(start_ns)),
        };
        self.so_far.r = r_end.max(self.so_far.r);
        self.so_far.prev_end_ns = self.so_far.prev_end_ns.max(end_ns);
    }

    /// Ends a `gil` segment at `end_ns`, the running clock then being `r`.
    fn end_gil(&mut self, r: u64, end_ns: u64) {
        self.so_far.r = r;
        self.so_far.prev_end_ns = self.so_far.prev_end_ns.max(end_ns);
    }

    /// Replays one enter or exit event (a `stack` or `wall` segment, whose
    /// running clock is `ns + offset`).
    #[inline(always)]
    pub fn event(
        &mut self,
        enter: bool,
        func: u32,
        ns: u64,
        offset: u64,
    ) -> Result<(), WarningKind> {
        self.so_far.events += 1;
        let r = ns.wrapping_add(offset);
        if enter {
            self.frames.enter(func, ns, r);
            Ok(())
        } else {
            self.frames.exit(func, ns, r)
        }
    }

    /// Closes the frames still open at the end of the trace (`end_ns`) and
    /// returns the stack's statistics (with an empty name).
    pub fn finish(mut self, clock: Clock, key: StackKey, end_ns: u64) -> StackStats {
        let first_start_ns = self.so_far.first_start_ns.unwrap_or(end_ns);
        let r_end = if clock == Clock::Wall {
            end_ns
        } else {
            self.so_far.r
        };
        let open_at_end = self.frames.depth() > 0;
        self.frames.close_all(end_ns, r_end);
        // A stack lives from its first stretch to its last switch away (a
        // task that finished is not "paused" for the rest of the trace), or
        // to the end of the trace if frames were still open there.
        let last_ns = if open_at_end {
            end_ns
        } else {
            self.so_far.prev_end_ns
        };
        let lifetime = last_ns.saturating_sub(first_start_ns);
        let life_end = last_ns.max(first_start_ns);
        if clock == Clock::Wall {
            self.frames.observer.running(first_start_ns, life_end);
        }
        self.frames.observer.life(first_start_ns, life_end);
        let running_ns = if clock == Clock::Wall {
            lifetime
        } else {
            self.so_far.r
        };
        self.so_far.threads.sort_unstable();
        StackStats {
            id: key.id_string(),
            // Named by the caller: a report of a million tasks moves the
            // names out of the metadata instead of copying each here.
            name: String::new(),
            threads: std::mem::take(&mut self.so_far.threads),
            running_ns,
            paused_ns: lifetime.saturating_sub(running_ns),
            switches_in: self.so_far.switches_in,
            max_depth: self.frames.max_depth,
            events: self.so_far.events,
        }
    }

    /// Sets the replay aside until the end of the trace is known, taking
    /// its open frames off the tally (whose counters are then all zero, as
    /// the next stack needs them). `running_since_ns`: the start of the
    /// segment still running, if the thread ended on this stack.
    pub fn suspend(mut self, running_since_ns: Option<u64>) -> Suspended {
        Suspended {
            frames: self.frames.take_all(),
            so_far: std::mem::take(&mut self.so_far),
            max_depth: self.frames.max_depth,
            running_since_ns,
        }
    }

    /// Takes up a suspended replay on the tally it was replayed with, ends
    /// its running segment at `end_ns` and finishes it.
    pub fn resume(
        s: Suspended,
        tally: &'a mut Tally,
        observer: &'a mut O,
        clock: Clock,
        key: StackKey,
        end_ns: u64,
    ) -> StackStats {
        let mut stack = StackReplay::new(tally, ROOT, observer);
        stack.frames.put_back(s.frames);
        stack.frames.max_depth = s.max_depth;
        stack.so_far = s.so_far;
        if let Some(start_ns) = s.running_since_ns {
            stack.end_linear(clock, start_ns, end_ns);
        }
        stack.finish(clock, key, end_ns)
    }
}

/// How the running clock advances through one segment's events.
trait SegmentClock {
    /// The stack's running clock at its event at (`tick`, `ns`).
    fn at<O: Observer>(&mut self, tick: u64, ns: u64, observer: &mut O) -> u64;
}

/// `stack` and `wall`: the running clock is wall time plus a constant.
struct Linear {
    offset: u64,
}

impl SegmentClock for Linear {
    #[inline(always)]
    fn at<O: Observer>(&mut self, _tick: u64, ns: u64, _observer: &mut O) -> u64 {
        ns.wrapping_add(self.offset)
    }
}

/// `gil`: the stack ran, after each event, until the next event of any thread.
struct GilRun<'g> {
    cursor: GilCursor<'g>,
    /// (tick, ns) of the previous event.
    last: Option<(u64, u64)>,
    r: u64,
}

impl SegmentClock for GilRun<'_> {
    #[inline]
    fn at<O: Observer>(&mut self, tick: u64, ns: u64, observer: &mut O) -> u64 {
        if let Some((lt, lns)) = self.last {
            let run = self.cursor.run_after(lt, lns, ns);
            observer.running(lns, lns + run);
            self.r = self.r.saturating_add(run);
        }
        self.last = Some((tick, ns));
        self.r
    }
}

/// Replays the events `batches` yields (one segment) onto `frames`;
/// returns how many enter and exit events there were.
fn replay_events<C: SegmentClock, O: Observer>(
    ctx: &ReplayContext<'_, '_>,
    batches: &mut Batches<'_, '_>,
    clock: &mut C,
    frames: &mut FrameStack<'_, O>,
    tid: u64,
    warnings: &mut Warnings,
) -> u64 {
    let scale = ctx.decoded.scale;
    let mut events = 0;
    while let Some(batch) = batches.next_batch() {
        for (i, ev) in batch.events().enumerate() {
            if i % 4 == 0 {
                prefetch(
                    batch
                        .raw
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
                events += 1;
                if let Some(d) = ctx.functions.get(payload as u32) {
                    frames.enter(d, ns, r);
                }
            } else if kind == KIND_EXIT {
                events += 1;
                if let Some(d) = ctx.functions.get(payload as u32) {
                    if let Err(kind) = frames.exit(d, ns, r) {
                        warnings.add(kind, Location::Time { ns, thread: tid });
                    }
                }
            }
        }
    }
    events
}

/// The thread's or logical stack's recorded name ("" if none).
pub fn stack_name(decoded: &Decoded<'_>, key: StackKey) -> String {
    let name = match key {
        StackKey::Own(t) => decoded.thread_names.get(&t).map(|n| n.0.clone()),
        StackKey::Logical(s) => decoded.stack_names.get(s).map(str::to_owned),
    };
    name.unwrap_or_default()
}

fn seed_frames(
    decoded: &Decoded<'_>,
    functions: &FunctionTable,
    seg: &Segment,
    frames: &mut FrameStack<'_, impl Observer>,
    ns: u64,
    r: u64,
    warnings: &mut Warnings,
) {
    let Some(snapshot) = seed_snapshot(decoded, seg) else {
        return;
    };
    let truth: Vec<u32> = snapshot.filter_map(|id| functions.get(id.0)).collect();
    let opened = frames.reconcile(&truth, ns, r);
    warnings.add_n(
        WarningKind::FramesFromSnapshot,
        opened,
        Location::Time {
            ns,
            thread: seg.tid,
        },
    );
}

/// The frames a segment with a seed starts from (outermost first).
pub fn seed_snapshot(
    decoded: &Decoded<'_>,
    seg: &Segment,
) -> Option<impl Iterator<Item = mtrace_format::FunctionId>> {
    let thread = &decoded.threads[seg.thread as usize];
    let chunk = thread
        .chunks
        .get(seg.start.chunk as usize)
        .and_then(|c| decoded.file.chunk(c.slot).ok().flatten())?;
    let ids: Vec<_> = match seg.seed {
        Seed::None => Vec::new(),
        Seed::Own => chunk.snapshot.own_frames().collect(),
        Seed::Logical => chunk.snapshot.stack_frames().collect(),
    };
    Some(ids.into_iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_keep_their_numbers_and_open_counts_across_growth() {
        let mut table = EdgeTable::new();
        let edges: Vec<(u32, u32)> = (0..5000u32)
            .map(|i| (i % 97, i.wrapping_mul(2_654_435_761) % 1009))
            .collect();
        let mut first_seen: Vec<(u32, u32)> = Vec::new();
        let mut opened = Vec::new();
        for &(a, b) in &edges {
            let (n, recursive) = table.open(a, b);
            opened.push(n);
            if n as usize == first_seen.len() {
                assert!(!recursive);
                first_seen.push((a, b));
            } else {
                assert_eq!(first_seen[n as usize], (a, b));
                assert!(recursive, "another frame of the edge is still open");
            }
        }
        assert!(first_seen.len() > 1000, "the table grew several times");
        for &n in &opened {
            table.close(n).ncalls += 1;
        }
        // Nothing is open now: the next frame of any edge is not recursive.
        for (n, &(a, b)) in first_seen.iter().enumerate() {
            assert_eq!(table.open(a, b), (n as u32, false));
        }
        // Extreme keys are edges too.
        let (big, next) = (u32::MAX - 1, first_seen.len() as u32);
        assert_eq!(table.open(big, big), (next, false));
        assert_eq!(table.open(big, big), (next, true));
        assert_eq!(table.open(0, 0).0, 0, "key 0 is an edge, not a hole");
        let totals: Vec<_> = table.drain().collect();
        assert_eq!(totals.len(), first_seen.len() + 1);
        let calls: u64 = totals.iter().map(|(_, t)| t.ncalls).sum();
        assert_eq!(calls, edges.len() as u64);
        assert_eq!(totals[0].0, first_seen[0]);
        assert_eq!(totals[next as usize].0, (big, big));
    }
}

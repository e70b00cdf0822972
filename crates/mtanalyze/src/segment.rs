//! Cutting each thread's events into segments: maximal stretches during
//! which the thread ran one stack.
//!
//! ```text
//! thread 1:  e e e S(task-7) e e e S(own) e e        (S = switch)
//! segments:  [own......)[task-7.......)[own.....)    end of trace
//! ```
//! A segment begins with the event that put the thread on the stack (its
//! first event, or the switch onto it) and ends just before the switch away.
//! It stores positions, not events, so memory grows with switches rather
//! than events. Grouping the segments of one stack, in time order, gives
//! everything the replay of that stack needs, whichever threads it ran on.
//!
//! The pass can also replay the thread's own stack as it goes (see
//! [`OwnReplay`]): the same replay, fed the events the pass reads anyway.
//! The own stack's segments are then not kept: in a program that polls
//! many tasks they are half of all segments (one between every two polls).

use rustc_hash::FxHashSet;

use mtrace_format::event::{raw_is_valid, KIND_ENTER, KIND_EXIT, KIND_SWITCH};
use mtrace_format::StackId;

use crate::clock::Clock;
use crate::decode::{Batches, Decoded, Pos, Restart};
use crate::paths::ROOT;
use crate::replay::{seed_snapshot, NoObserver, StackReplay, Suspended, Tally};
use crate::warnings::{Location, WarningKind, Warnings};

/// A stack: a thread's own, or a logical one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StackKey {
    /// The own stack of the thread with this id.
    Own(u64),
    /// The logical stack with this id.
    Logical(u64),
}

impl StackKey {
    /// The stack a thread runs after switching to `id`.
    pub fn from_switch(tid: u64, id: StackId) -> StackKey {
        if id == StackId::OWN {
            StackKey::Own(tid)
        } else {
            StackKey::Logical(id.0)
        }
    }

    /// `thread:<tid>` or `stack:<id>`.
    pub fn id_string(&self) -> String {
        match self {
            StackKey::Own(t) => format!("thread:{t}"),
            StackKey::Logical(s) => format!("stack:{s}"),
        }
    }
}

/// Where a segment's stack gets the frames that were open before its first
/// surviving event (after lost chunks): the snapshot of the chunk the
/// segment starts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seed {
    /// Nothing to open.
    None,
    /// The snapshot's own-stack frames.
    Own,
    /// The snapshot's logical-stack frames.
    Logical,
}

/// One stretch of one thread running one stack. Kept small (64 bytes):
/// segments are most of the analyzer's heap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The stack.
    pub stack: StackKey,
    /// Index of the thread in [`Decoded::threads`].
    pub thread: u32,
    /// The thread's id.
    pub tid: u64,
    /// First event (inclusive).
    pub start: Pos,
    /// End (exclusive): the switch away, or the end of the thread's stream.
    pub end: Pos,
    /// When the stack started running here. Also the floor for clamping the
    /// segment's ticks: the first event's clamped tick is this one, so
    /// clamping from it gives the ticks the thread pass saw.
    pub start_tick: u64,
    /// When the thread switched away; [`RUNS_TO_END`]: it ran until the end of the trace.
    pub end_tick: u64,
    /// It began with a switch onto the stack (or the thread's first event).
    pub switched_in: bool,
    /// Frames to open first if the stack is empty.
    pub seed: Seed,
}

const _: () = assert!(std::mem::size_of::<Segment>() <= 64);

/// `Segment::end_tick` of a stretch that lasted until the end of the trace.
pub const RUNS_TO_END: u64 = u64::MAX;

impl Segment {
    /// When the thread switched away, if it did.
    pub fn switched_away(&self) -> Option<u64> {
        (self.end_tick != RUNS_TO_END).then_some(self.end_tick)
    }
}

/// A thread's segments, stored in fixed blocks: growing never copies and
/// wastes at most one partly filled block (a plain `Vec` doubles, and its
/// slack and copies were the analyzer's peak heap).
#[derive(Clone, Debug, Default)]
pub struct SegmentList {
    blocks: Vec<Vec<Segment>>,
    len: usize,
}

const BLOCK: usize = 256;

impl SegmentList {
    /// Appends a segment.
    pub fn push(&mut self, s: Segment) {
        if self.blocks.last().is_none_or(|b| b.len() == BLOCK) {
            // The first block grows as a Vec does: a trace of many threads
            // with a few segments each must not cost a whole block per thread.
            let capacity = if self.blocks.is_empty() { 0 } else { BLOCK };
            self.blocks.push(Vec::with_capacity(capacity));
        }
        if let Some(b) = self.blocks.last_mut() {
            b.push(s);
        }
        self.len += 1;
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No segments.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments in order.
    pub fn iter(&self) -> impl Iterator<Item = &Segment> {
        self.blocks.iter().flatten()
    }
}

impl SegmentList {
    /// The segments of `self` and `first` (each in thread order) in thread
    /// order; at one position, `first`'s segment comes first (a thread's
    /// own stack is entered before the stack it switches to there).
    fn merge(self, first: SegmentList) -> SegmentList {
        let mut out = SegmentList::default();
        let mut a = self.into_iter().peekable();
        let mut b = first.into_iter().peekable();
        loop {
            let take_b = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => y.start <= x.start,
                (None, Some(_)) => true,
                (_, None) => false,
            };
            match if take_b { b.next() } else { a.next() } {
                Some(s) => out.push(s),
                None => return out,
            }
        }
    }
}

impl std::ops::Index<usize> for SegmentList {
    type Output = Segment;

    fn index(&self, i: usize) -> &Segment {
        &self.blocks[i / BLOCK][i % BLOCK]
    }
}

impl IntoIterator for SegmentList {
    type Item = Segment;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<Segment>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.blocks.into_iter().flatten()
    }
}

/// What one pass over a thread found.
#[derive(Debug, Default)]
pub struct ThreadPass {
    /// Its segments in order.
    pub segments: SegmentList,
    /// Events decoded.
    pub events: u64,
    /// First and last clamped ticks.
    pub first_tick: Option<u64>,
    /// Last clamped tick.
    pub last_tick: Option<u64>,
    /// Function ids used but not in the metadata.
    pub unknown_functions: FxHashSet<u32>,
    /// Problems found.
    pub warnings: Warnings,
    /// The thread's own stack, replayed during the pass (if asked and
    /// possible): it only needs the end of the trace. Its segments are
    /// then not in `segments`.
    pub own_replay: Option<OwnReplay>,
}

/// A thread's own stack replayed by the segment pass, which reads its
/// events anyway: a second read of them (most of a plain multi-threaded
/// trace) is saved. The replay is the one [`crate::replay::replay_stack`]
/// does, driven event by event; it waits for the end of the trace to close
/// its open frames.
#[derive(Debug)]
pub struct OwnReplay {
    /// The statistics, with the stack's open frames set aside.
    pub tally: Tally,
    /// The replay, suspended.
    pub state: Suspended,
    /// Problems the replay found.
    pub warnings: Warnings,
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
}

/// The state of one thread's pass.
struct Cutter<'d, 'a, 't> {
    decoded: &'d Decoded<'a>,
    index: u32,
    tid: u64,
    pass: ThreadPass,
    /// The segment the thread is in.
    open: Option<Segment>,
    /// The stack the thread runs.
    stack: StackKey,
    own: Option<OwnFusion<'t>>,
    /// Own-stack segments closed while `own` replayed them: dropped if the
    /// replay lasts the pass, merged back into the segments if it stops.
    own_segments: SegmentList,
}

impl Cutter<'_, '_, '_> {
    fn new_segment(&self, start: Pos, start_tick: u64, switched_in: bool, seed: Seed) -> Segment {
        Segment {
            stack: self.stack,
            thread: self.index,
            tid: self.tid,
            start,
            end: start,
            start_tick,
            end_tick: RUNS_TO_END,
            switched_in,
            seed,
        }
    }

    /// The thread is now in `seg`.
    fn open_segment(&mut self, seg: Segment) {
        if seg.stack == StackKey::Own(self.tid) {
            self.begin_own(&seg);
        }
        self.open = Some(seg);
    }

    fn begin_own(&mut self, seg: &Segment) {
        let decoded = self.decoded;
        let Some(f) = &mut self.own else { return };
        // The fused replay knows only the metadata's functions; a seed
        // naming another leaves the stack to the replay pass.
        if seg.seed != Seed::None
            && seed_snapshot(decoded, seg)
                .is_some_and(|mut ids| ids.any(|id| decoded.functions.get(id.0).is_none()))
        {
            self.own = None;
            return;
        }
        let start_ns = f
            .replay
            .begin(decoded, &decoded.functions, f.clock, seg, &mut f.warnings);
        f.running = Some((start_ns, f.replay.offset(f.clock, start_ns)));
        f.began = true;
    }

    /// The thread leaves its segment before `end`, at `end_tick`.
    fn close_segment(&mut self, end: Pos, end_tick: u64) {
        let Some(mut s) = self.open.take() else {
            return;
        };
        if let Some(f) = &mut self.own {
            if let (StackKey::Own(_), Some((start_ns, _))) = (s.stack, f.running) {
                let end_ns = self.decoded.scale.ns(end_tick);
                f.replay.end_linear(f.clock, start_ns, end_ns);
                f.running = None;
            }
        }
        s.end = end;
        s.end_tick = end_tick;
        self.keep(s);
    }

    /// Stores a finished segment (see `own_segments`).
    fn keep(&mut self, s: Segment) {
        if self.own.is_some() && s.stack == StackKey::Own(self.tid) {
            self.own_segments.push(s);
        } else {
            self.pass.segments.push(s);
        }
    }

    /// Ends the pass: the last segment runs until the end of the trace, and
    /// so does the own stack's replay if it is in it.
    fn finish(mut self, end: Pos) -> (ThreadPass, Option<(Suspended, Warnings)>) {
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
            .map(|f| (f.replay.suspend(running_since), f.warnings));
        if own.is_none() && !self.own_segments.is_empty() {
            let own_segments = std::mem::take(&mut self.own_segments);
            let segments = std::mem::take(&mut self.pass.segments);
            self.pass.segments = segments.merge(own_segments);
        }
        (self.pass, own)
    }

    /// An enter or exit the own stack's replay has to see, if running.
    #[inline(always)]
    fn own_event(&mut self, enter: bool, func: u32, ns: u64) {
        let Some(f) = &mut self.own else { return };
        let Some((_, offset)) = f.running else { return };
        if let Err(kind) = f.replay.event(enter, func, ns, offset) {
            let at = Location::Time {
                ns,
                thread: self.tid,
            };
            f.warnings.add(kind, at);
        }
    }
}

/// Cuts thread `index` of `decoded` into segments. With `fuse` (the `stack`
/// or `wall` clock), also replays the thread's own stack on the way, unless
/// it meets a function the metadata does not name (see [`OwnReplay`]).
pub fn cut_thread(decoded: &Decoded<'_>, index: u32, fuse: Option<Clock>) -> ThreadPass {
    let thread = &decoded.threads[index as usize];
    let tid = thread.tid.0;
    let scale = decoded.scale;
    let mut tally = fuse.map(|_| Tally::new(decoded.functions.entries().len(), false));
    let mut observer = NoObserver;
    let own = match (fuse, tally.as_mut()) {
        (Some(clock), Some(t)) => Some(OwnFusion {
            replay: StackReplay::new(t, ROOT, &mut observer),
            clock,
            warnings: Warnings::default(),
            running: None,
            began: false,
        }),
        _ => None,
    };
    let mut cut = Cutter {
        decoded,
        index,
        tid,
        pass: ThreadPass::default(),
        open: None,
        stack: StackKey::Own(tid),
        own,
        own_segments: SegmentList::default(),
    };
    let mut batches = Batches::all(&decoded.file, &thread.chunks);
    while let Some(batch) = batches.next_batch() {
        if let Some(Restart {
            tick,
            current_stack,
        }) = batch.restart
        {
            let at = Pos {
                chunk: batch.chunk,
                event: 0,
            };
            cut.close_segment(at, tick);
            if current_stack != StackId::OWN {
                // The own stack is paused below the logical one: open its
                // frames too, in a stretch that does not run.
                cut.stack = StackKey::Own(tid);
                let own = cut.new_segment(at, tick, false, Seed::Own);
                cut.open_segment(own);
                cut.close_segment(at, tick);
            }
            cut.stack = StackKey::from_switch(tid, current_stack);
            let seed = if current_stack == StackId::OWN {
                Seed::Own
            } else {
                Seed::Logical
            };
            let seg = cut.new_segment(at, tick, false, seed);
            cut.open_segment(seg);
            cut.pass.first_tick.get_or_insert(tick);
        }
        let n = batch.len();
        let event = |i: usize| batch.parts(i);
        // An ordinary event: an enter or exit of a known function, its tick
        // not going back. Its function's dense index if so.
        let plain = |kind: u64, tick: u64, payload: u64, floor: u64| -> Option<u32> {
            let ordinary = (kind == KIND_ENTER || kind == KIND_EXIT)
                & (payload != 0)
                & (payload <= u32::MAX as u64)
                & (tick >= floor);
            if ordinary {
                decoded.functions.get(payload as u32)
            } else {
                None
            }
        };
        let mut i = 0;
        while i < n {
            // Fast path: a run of ordinary events, the bulk of every trace.
            // Nothing to decide per event but whether the run goes on (and,
            // on the own stack, to replay it).
            let run_start = i;
            let mut floor = batches.floor();
            if cut.open.is_none() {
                let (kind, tick, payload) = event(i);
                if plain(kind, tick, payload, floor).is_some() {
                    let pos = Pos {
                        chunk: batch.chunk,
                        event: batch.first_event + i as u32,
                    };
                    let seg = cut.new_segment(pos, tick, true, Seed::None);
                    cut.open_segment(seg);
                }
            }
            let replaying = cut.own.as_ref().is_some_and(|f| f.running.is_some());
            if replaying {
                while i < n {
                    let (kind, tick, payload) = event(i);
                    let Some(d) = plain(kind, tick, payload, floor) else {
                        break;
                    };
                    cut.own_event(kind == KIND_ENTER, d, scale.ns(tick));
                    floor = tick;
                    i += 1;
                }
            } else {
                while i < n {
                    let (kind, tick, payload) = event(i);
                    if plain(kind, tick, payload, floor).is_none() {
                        break;
                    }
                    floor = tick;
                    i += 1;
                }
            }
            if i > run_start {
                batches.accept_ordered(floor);
                cut.pass.events += (i - run_start) as u64;
                cut.pass.first_tick.get_or_insert(event(run_start).1);
                cut.pass.last_tick = Some(floor);
            }
            if i == n {
                break;
            }
            // Slow path: one event that switches, is damaged, goes back in
            // time or names an unknown function.
            let (kind, raw_tick, payload) = event(i);
            if !raw_is_valid(kind, payload) {
                let problem = batch.problem(i);
                cut.pass
                    .warnings
                    .add(WarningKind::DamagedEvent, Location::Byte(problem.offset));
                batches.damaged();
                break;
            }
            let (tick, clamped) = batches.clamp(raw_tick);
            if clamped {
                let at = Location::Time {
                    ns: scale.ns(tick),
                    thread: tid,
                };
                cut.pass.warnings.add(WarningKind::ClockBackwards, at);
            }
            cut.pass.events += 1;
            cut.pass.first_tick.get_or_insert(tick);
            cut.pass.last_tick = Some(tick);
            let pos = Pos {
                chunk: batch.chunk,
                event: batch.first_event + i as u32,
            };
            i += 1;
            if kind == KIND_SWITCH {
                if cut.open.is_none() && cut.pass.segments.is_empty() {
                    // The thread started on its own stack and left it at
                    // once: record that zero-length stretch, so the own
                    // stack's life starts with the thread's.
                    let seg = cut.new_segment(pos, tick, true, Seed::None);
                    cut.open_segment(seg);
                }
                cut.close_segment(pos, tick);
                cut.stack = StackKey::from_switch(tid, StackId(payload));
                let seg = cut.new_segment(pos, tick, true, Seed::None);
                cut.open_segment(seg);
                continue;
            }
            if cut.open.is_none() {
                let seg = cut.new_segment(pos, tick, true, Seed::None);
                cut.open_segment(seg);
            }
            if kind == KIND_ENTER || kind == KIND_EXIT {
                let f = payload as u32;
                match decoded.functions.get(f) {
                    Some(d) => cut.own_event(kind == KIND_ENTER, d, scale.ns(tick)),
                    None => {
                        cut.pass.unknown_functions.insert(f);
                        if cut.stack == StackKey::Own(tid) {
                            // Its dense index is settled after every pass.
                            cut.own = None;
                        }
                    }
                }
            }
        }
    }
    let end = Pos {
        chunk: thread.chunks.len() as u32,
        event: 0,
    };
    let (mut pass, own) = cut.finish(end);
    if let (Some((state, warnings)), Some(tally)) = (own, tally) {
        pass.own_replay = Some(OwnReplay {
            tally,
            state,
            warnings,
        });
    }
    pass
}

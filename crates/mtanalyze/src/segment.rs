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

use rustc_hash::FxHashSet;

use mtrace_format::event::{raw_is_valid, raw_parts, KIND_ENTER, KIND_EXIT, KIND_SWITCH};
use mtrace_format::layout::EVENT_SIZE;
use mtrace_format::StackId;

use crate::decode::{Batches, Decoded, Pos, Restart};
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

const BLOCK: usize = 1024;

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
#[derive(Clone, Debug, Default)]
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
}

/// Cuts thread `index` of `decoded` into segments.
pub fn cut_thread(decoded: &Decoded<'_>, index: u32) -> ThreadPass {
    let thread = &decoded.threads[index as usize];
    let tid = thread.tid.0;
    let clock = decoded.scale;
    let mut pass = ThreadPass::default();
    let mut open: Option<Segment> = None;
    let mut stack = StackKey::Own(tid);
    let new_segment = |stack, start, start_tick, switched_in, seed| Segment {
        stack,
        thread: index,
        tid,
        start,
        end: start,
        start_tick,
        end_tick: RUNS_TO_END,
        switched_in,
        seed,
    };
    let close = |seg: Option<Segment>, end: Pos, end_tick: u64, out: &mut SegmentList| {
        if let Some(mut s) = seg {
            s.end = end;
            s.end_tick = end_tick;
            out.push(s);
        }
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
            close(open.take(), at, tick, &mut pass.segments);
            stack = StackKey::from_switch(tid, current_stack);
            if current_stack != StackId::OWN {
                // The own stack is paused below the logical one: open its
                // frames too, in a stretch that does not run.
                let mut own = new_segment(StackKey::Own(tid), at, tick, false, Seed::Own);
                own.end_tick = tick;
                pass.segments.push(own);
            }
            let seed = if current_stack == StackId::OWN {
                Seed::Own
            } else {
                Seed::Logical
            };
            open = Some(new_segment(stack, at, tick, false, seed));
            pass.first_tick.get_or_insert(tick);
        }
        let raw = batch.raw;
        let n = raw.len() / EVENT_SIZE;
        let event = |i: usize| -> (u64, u64, u64) {
            raw.get(i * EVENT_SIZE..(i + 1) * EVENT_SIZE)
                .and_then(|b| <&[u8; EVENT_SIZE]>::try_from(b).ok())
                .map_or((u64::MAX, 0, 0), raw_parts)
        };
        let mut i = 0;
        while i < n {
            // Fast path: a run of enters and exits of known functions with
            // ticks in order, the bulk of every trace. Nothing to decide per
            // event but whether the run goes on.
            let run_start = i;
            let mut floor = batches.floor();
            while i < n {
                let (kind, tick, payload) = event(i);
                let plain = (kind == KIND_ENTER || kind == KIND_EXIT)
                    & (payload != 0)
                    & (payload <= u32::MAX as u64)
                    & (tick >= floor)
                    && decoded.functions.get(payload as u32).is_some();
                if !plain {
                    break;
                }
                floor = tick;
                i += 1;
            }
            if i > run_start {
                batches.accept_ordered(floor);
                let first = event(run_start).1;
                pass.events += (i - run_start) as u64;
                pass.first_tick.get_or_insert(first);
                pass.last_tick = Some(floor);
                if open.is_none() {
                    let pos = Pos {
                        chunk: batch.chunk,
                        event: batch.first_event + run_start as u32,
                    };
                    open = Some(new_segment(stack, pos, first, true, Seed::None));
                }
            }
            if i == n {
                break;
            }
            // Slow path: one event that switches, is damaged, goes back in
            // time or names an unknown function.
            let (kind, raw_tick, payload) = event(i);
            if !raw_is_valid(kind, payload) {
                let problem = batch.problem(i);
                pass.warnings
                    .add(WarningKind::DamagedEvent, Location::Byte(problem.offset));
                batches.damaged();
                break;
            }
            let (tick, clamped) = batches.clamp(raw_tick);
            if clamped {
                let at = Location::Time {
                    ns: clock.ns(tick),
                    thread: tid,
                };
                pass.warnings.add(WarningKind::ClockBackwards, at);
            }
            pass.events += 1;
            pass.first_tick.get_or_insert(tick);
            pass.last_tick = Some(tick);
            let pos = Pos {
                chunk: batch.chunk,
                event: batch.first_event + i as u32,
            };
            i += 1;
            if kind == KIND_SWITCH {
                if open.is_none() && pass.segments.is_empty() {
                    // The thread started on its own stack and left it at
                    // once: record that zero-length stretch, so the own
                    // stack's life starts with the thread's.
                    open = Some(new_segment(stack, pos, tick, true, Seed::None));
                }
                close(open.take(), pos, tick, &mut pass.segments);
                stack = StackKey::from_switch(tid, StackId(payload));
                open = Some(new_segment(stack, pos, tick, true, Seed::None));
                continue;
            }
            if open.is_none() {
                open = Some(new_segment(stack, pos, tick, true, Seed::None));
            }
            if kind == KIND_ENTER || kind == KIND_EXIT {
                let f = payload as u32;
                if decoded.functions.get(f).is_none() {
                    pass.unknown_functions.insert(f);
                }
            }
        }
    }
    let end = Pos {
        chunk: thread.chunks.len() as u32,
        event: 0,
    };
    close(open.take(), end, RUNS_TO_END, &mut pass.segments);
    pass
}

//! Segments: maximal stretches during which one thread ran one stack.
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
//! The segment pass that cuts them is in `cut.rs`.

use mtrace_format::layout::EVENT_SIZE;
use mtrace_format::StackId;

use crate::analysis::decode::{prefetch, ChunkRef, Decoded, Pos, ResumePoint, ThreadChunks};
pub(crate) use mtanalyze_model::report::StackKey;

/// [`Segment::stack`] of a segment on `key`.
pub(crate) fn segment_stack(key: StackKey) -> u64 {
    match key {
        StackKey::Own(_) => StackId::OWN.0,
        StackKey::Logical(id) => id,
    }
}

/// The stack a thread runs after switching to `id`.
pub(crate) fn stack_after_switch(tid: u64, id: StackId) -> StackKey {
    if id == StackId::OWN {
        StackKey::Own(tid)
    } else {
        StackKey::Logical(id.0)
    }
}

/// Where a segment's stack gets the frames that were open before its first
/// surviving event (after lost chunks, at a resume, or at a rotating
/// series' `continued` first chunk): the snapshot of the chunk the segment
/// starts in. (A stack carried on by a continued-stack record has no seed:
/// its replay takes the record at its first segment.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seed {
    /// Nothing to open.
    None,
    /// The snapshot's own-stack frames.
    Own,
    /// The snapshot's logical-stack frames.
    Logical,
}

/// One stretch of one thread running one stack. Kept small (48 bytes):
/// segments are most of the analyzer's heap, so what the thread's index
/// gives (its id, the key of its own stack) is not stored, and four small
/// values share a word (`bits`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// The stack: a logical stack's id, or `StackId::OWN` for the thread's
    /// own ([`segment_stack`] of a key).
    pub stack: u64,
    /// Index of the thread in [`Decoded::threads`](crate::analysis::decode::Decoded::threads).
    pub thread: u32,
    /// Its flags and resume offset: bit 0 `switched_in`, bits 1-2 the
    /// seed, bit 3 `ends_at_lost`, bit 4 the resume switch's tick was
    /// clamped, bits 8-31 the resume offset (see
    /// [`Segment::resume_point`]; 0: none). A compact chunk is at most
    /// `COMPACT_MAX_CHUNK_SIZE` bytes, so every offset in one fits.
    bits: u32,
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
}

const _: () = assert!(std::mem::size_of::<Segment>() <= 48);

// The parts of `Segment::bits`.
const SWITCHED_IN: u32 = 1;
const SEED_SHIFT: u32 = 1;
const ENDS_AT_LOST: u32 = 1 << 3;
const RESUME_CLAMPED: u32 = 1 << 4;
const OFFSET_SHIFT: u32 = 8;
const _: () =
    assert!((mtrace_format::layout::COMPACT_MAX_CHUNK_SIZE as u64) < 1 << (32 - OFFSET_SHIFT));

/// `Segment::end_tick` of a stretch that lasted until the end of the trace.
pub(crate) const RUNS_TO_END: u64 = u64::MAX;

impl Segment {
    /// A stretch of `thread` on `stack` from `start` at `start_tick`, not
    /// ended yet; `switched_in`: it begins with a switch onto the stack (or
    /// the thread's first event); `seed`: the frames to open first if the
    /// stack is empty. Its replay expands its first chunk from the chunk's
    /// start until [`Segment::resume_at`] says otherwise.
    pub(crate) fn new(
        stack: u64,
        thread: u32,
        start: Pos,
        start_tick: u64,
        switched_in: bool,
        seed: Seed,
    ) -> Segment {
        let seed = match seed {
            Seed::None => 0,
            Seed::Own => 1,
            Seed::Logical => 2,
        };
        Segment {
            stack,
            thread,
            bits: switched_in as u32 | seed << SEED_SHIFT,
            start,
            end: start,
            start_tick,
            end_tick: RUNS_TO_END,
        }
    }

    /// It began with a switch onto the stack (or the thread's first event).
    pub(crate) fn switched_in(&self) -> bool {
        self.bits & SWITCHED_IN != 0
    }

    /// Frames to open first if the stack is empty.
    pub(crate) fn seed(&self) -> Seed {
        match (self.bits >> SEED_SHIFT) & 3 {
            1 => Seed::Own,
            2 => Seed::Logical,
            _ => Seed::None,
        }
    }

    /// It ended at a `lost` mark of its thread: if it is the stack's last
    /// segment, the stack ends there (see "Lost events" in `semantics.md`).
    pub(crate) fn ends_at_lost(&self) -> bool {
        self.bits & ENDS_AT_LOST != 0
    }

    /// Marks it as ending at a `lost` mark.
    pub(crate) fn set_ends_at_lost(&mut self) {
        self.bits |= ENDS_AT_LOST;
    }

    /// The segment starts with the `switch` at `point` (a compact chunk's,
    /// as the segment pass expanding the chunk noted it, with its own
    /// tick): its replay may expand the chunk from there, not from the
    /// chunk's start. The switch's tick is the segment's start tick, which
    /// then stands for it, unless the clock went back there: the segment
    /// has no room for a second tick, so that is noted with a bit (see
    /// [`Segment::resume_point`]). Any other point is not kept, and the
    /// replay starts at the chunk's start, which is always right, only
    /// slower.
    pub(crate) fn resume_at(&mut self, point: Option<ResumePoint>) {
        let Some(p) = point.filter(|p| p.at == self.start) else {
            return;
        };
        let clamped = match p.tick {
            Some(tick) if tick == self.start_tick => 0,
            Some(tick) if tick < self.start_tick => RESUME_CLAMPED,
            _ => return,
        };
        if p.offset > 0 && p.offset < 1 << (32 - OFFSET_SHIFT) {
            let flags = self.bits & ((1 << OFFSET_SHIFT) - 1) & !RESUME_CLAMPED;
            self.bits = flags | clamped | p.offset << OFFSET_SHIFT;
        }
    }

    /// Where its replay may expand its first chunk from, if not from the
    /// chunk's start (see [`Segment::resume_at`]). After a clamped switch,
    /// only if the segment ended at its start tick: then every event of it
    /// clamps to that tick, whatever the ticks they count from, so the
    /// walk need not know the switch's own ([`ResumePoint::tick`]). A
    /// damaged tick delta, which clamps every later event of its thread
    /// to it, leaves such segments by the thousand; replayed from their
    /// chunks' starts, they made a damaged trace's analysis several times
    /// slower than the intact one's.
    pub(crate) fn resume_point(&self) -> Option<ResumePoint> {
        let offset = self.bits >> OFFSET_SHIFT;
        if offset == 0 {
            return None;
        }
        let tick = if self.bits & RESUME_CLAMPED == 0 {
            Some(self.start_tick)
        } else if self.end_tick == self.start_tick {
            None
        } else {
            return None;
        };
        Some(ResumePoint {
            at: self.start,
            offset,
            tick,
        })
    }

    /// Starts loading the first bytes its replay reads (a hint: nothing
    /// happens if they are not in `decoded`'s file): its first event's
    /// slot, or in a compact chunk the event its expansion starts from
    /// (its resume point, else the chunk's first event). A stack's
    /// segments are scattered over the file, a few cache lines each, too
    /// short for the hardware prefetcher to pick up.
    pub(crate) fn prefetch_first_read(&self, decoded: &Decoded<'_>) {
        let Some(c) = decoded
            .threads
            .get(self.thread as usize)
            .and_then(|t| t.chunks.get(self.start.chunk as usize))
        else {
            return;
        };
        let within = if !c.compact {
            self.start.event as usize * EVENT_SIZE
        } else {
            self.resume_point().map_or(0, |p| p.offset as usize)
        };
        let at = c.events_offset as usize + within;
        prefetch(decoded.file.bytes().as_ptr().wrapping_add(at));
    }

    /// The segment is on its thread's own stack.
    pub(crate) fn is_own(&self) -> bool {
        self.stack == StackId::OWN.0
    }

    /// The thread's id (`threads`: the decoded trace's).
    pub(crate) fn tid(&self, threads: &[ThreadChunks]) -> u64 {
        threads.get(self.thread as usize).map_or(0, |t| t.tid.0)
    }

    /// How many event slots the segment spans in its thread's `chunks`
    /// (events cut by damage are counted): how much replaying it reads.
    pub(crate) fn events(&self, chunks: &[ChunkRef]) -> u64 {
        let (s, e) = (self.start, self.end);
        let count = |c: u32| chunks.get(c as usize).map_or(0, |r| r.events as u64);
        if s.chunk == e.chunk {
            return (e.event as u64).saturating_sub(s.event as u64);
        }
        let mut n = count(s.chunk).saturating_sub(s.event as u64);
        for c in s.chunk + 1..e.chunk {
            n += count(c);
        }
        n + (e.event as u64).min(count(e.chunk))
    }

    /// When the thread switched away, if it did.
    pub(crate) fn switched_away(&self) -> Option<u64> {
        (self.end_tick != RUNS_TO_END).then_some(self.end_tick)
    }
}

/// A thread's segments, stored in fixed blocks: growing never copies and
/// wastes at most one partly filled block (a plain `Vec` doubles, and its
/// slack and copies were the analyzer's peak heap).
#[derive(Clone, Debug, Default)]
pub(crate) struct SegmentList {
    blocks: Vec<Vec<Segment>>,
    len: usize,
}

const BLOCK: usize = 256;

impl SegmentList {
    /// Appends a segment.
    pub(crate) fn push(&mut self, s: Segment) {
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

    /// How many segments.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// No segments.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Segment> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The four values sharing a word read back as written, whatever the
    /// others hold; a resume point is kept only at the segment's start, at
    /// its start tick, at an offset the word holds.
    #[test]
    fn a_segment_keeps_its_flags_and_resume_point_apart() {
        let start = Pos { chunk: 3, event: 9 };
        let point = |offset, tick| {
            Some(ResumePoint {
                at: start,
                offset,
                tick,
            })
        };
        for switched_in in [false, true] {
            for seed in [Seed::None, Seed::Own, Seed::Logical] {
                for lost in [false, true] {
                    let mut s = Segment::new(7, 2, start, 100, switched_in, seed);
                    let max = (1 << (32 - OFFSET_SHIFT)) - 1;
                    s.resume_at(point(max, Some(100)));
                    if lost {
                        s.set_ends_at_lost();
                    }
                    assert_eq!(s.switched_in(), switched_in);
                    assert_eq!(s.seed(), seed);
                    assert_eq!(s.ends_at_lost(), lost);
                    assert_eq!(s.resume_point(), point(max, Some(100)));
                    assert_eq!((s.end, s.end_tick), (start, RUNS_TO_END));
                }
            }
        }
        let fresh = || Segment::new(7, 2, start, 100, true, Seed::Own);
        let refused = [
            point(1 << (32 - OFFSET_SHIFT), Some(100)),
            point(0, Some(100)),
            // A tick after the start tick: not the switch's.
            point(40, Some(101)),
            point(40, None),
            Some(ResumePoint {
                at: Pos { chunk: 3, event: 8 },
                offset: 40,
                tick: Some(100),
            }),
            None,
        ];
        for p in refused {
            let mut s = fresh();
            s.resume_at(p);
            assert_eq!(s.resume_point(), None, "{p:?}");
            assert!(s.switched_in() && s.seed() == Seed::Own && !s.ends_at_lost());
        }
    }

    /// A switch whose tick was clamped (the clock went back) is a point to
    /// resume from only for a segment that ends at its start tick, and
    /// then without a tick: its events all clamp to the start tick.
    #[test]
    fn a_clamped_switch_is_resumed_from_only_by_a_flat_segment() {
        let start = Pos { chunk: 3, event: 9 };
        let clamped = Some(ResumePoint {
            at: start,
            offset: 40,
            tick: Some(99),
        });
        let mut s = Segment::new(7, 2, start, 100, true, Seed::Logical);
        s.resume_at(clamped);
        s.set_ends_at_lost();
        assert_eq!(s.resume_point(), None, "still running");
        s.end_tick = 101;
        assert_eq!(s.resume_point(), None, "its clamped ticks rise");
        s.end_tick = 100;
        let flat = ResumePoint {
            at: start,
            offset: 40,
            tick: None,
        };
        assert_eq!(s.resume_point(), Some(flat));
        assert!(s.switched_in() && s.seed() == Seed::Logical && s.ends_at_lost());
        // A later point at the start tick replaces it, flag and all.
        s.resume_at(Some(ResumePoint {
            tick: Some(100),
            offset: 41,
            ..flat
        }));
        s.end_tick = 200;
        assert_eq!(
            s.resume_point().map(|p| (p.offset, p.tick)),
            Some((41, Some(100)))
        );
    }
}

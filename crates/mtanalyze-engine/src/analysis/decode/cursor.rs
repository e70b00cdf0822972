//! A thread's events a batch at a time, in chunk order, for the segment
//! pass and the replay: where an event is ([`Pos`]), where a chunk restarts
//! from its snapshot ([`Restart`]).
//!
//! A batch is 16-byte events. Those of a version 1 to 3 file are the
//! file's bytes; a compact (version 4) chunk's are expanded when a batch
//! reaches them, into a buffer the worker reuses (one chunk's events at
//! most), so no image of the whole file is made and the expansion's
//! writes stay in cache. A batch that starts inside a compact chunk
//! expands from the `switch` event the caller names at or before its first
//! event ([`ResumePoint`]: a stack's stretch starts at one, and its segment
//! carries it), or else from the chunk's start, and up to its last event
//! only, so a stack replayed stretch by stretch decodes each of its events
//! once more, not its chunks' every event. Where the switches are is
//! learnt as the segment pass expands each chunk ([`Batch::resume_point`]),
//! so no table of them is kept.
//!
//! ```text
//! compact chunk:  snapshot | e0 e1 e2 [switch] e4 e5 e6 [switch] e8 ...
//! batch [4, 6), resuming at event 3:     ^ decoded from here; 3..5 written, e4 e5 lent
//! ```

use std::cell::Cell;
use std::marker::PhantomData;

use mtrace_format::compact::{tick_before, CompactEvents, SwitchPoint};
use mtrace_format::event::{raw_parts, KIND_LOST};
use mtrace_format::layout::EVENT_SIZE;
use mtrace_format::{
    BadEvent, ChunkProblem, ChunkProblemKind, CompactFault, Event, StackId, TraceFile,
};

use super::{ChunkRef, ThreadChunks};

/// Asks the CPU to start loading the cache line at `p`. The replay reads
/// short runs of events scattered over the file (a fiber's stretch is a few
/// cache lines), too short for the hardware prefetcher to pick up.
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    // SAFETY: a prefetch is a hint that never faults, whatever `p` is;
    // SSE is part of the x86_64 baseline.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Where an event sits in its thread's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Pos {
    /// Index into the thread's chunk list.
    pub chunk: u32,
    /// Index of the event within the chunk.
    pub event: u32,
}

/// A chunk that follows missing or damaged chunks, or that the recorder
/// flagged `restart` (a resume, a rotating series' next file): its
/// snapshot tells what was open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Restart {
    /// The snapshot's tick, clamped.
    pub tick: u64,
    /// The stack the thread was running.
    pub current_stack: StackId,
}

/// A `switch` event of a compact chunk, from which the chunk's events
/// expand without those before it (a `switch` forgets the named frames:
/// see `mtrace_format::compact`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResumePoint {
    /// The switch.
    pub at: Pos,
    /// Its byte offset from the chunk's first event.
    pub offset: u32,
    /// Its tick, unclamped: with its bytes, it gives the tick of the event
    /// before it, from which its own is a delta
    /// (`mtrace_format::compact::tick_before`). `None` where only the
    /// clamped ticks of what follows are known to be flat: the switch's
    /// tick was clamped (the clock went back) and so is every event of
    /// the stretch it opens, to the stretch's start tick (see
    /// `Segment::resume_point`). The walk then counts ticks from 0: each
    /// is its own tick less the one before the switch, so at most its own,
    /// and clamping from the start tick lifts it to the start tick as it
    /// lifts its own.
    pub tick: Option<u64>,
}

/// The events of one chunk that fall in the requested range, as raw
/// 16-byte slots: the hot loops split them with `event::raw_parts` and
/// branch on the kind themselves (an `Event` enum match compiles to an
/// indirect jump that mispredicts on every enter/exit alternation).
pub(crate) struct Batch<'a> {
    /// Index of the chunk in the thread's list.
    pub chunk: u32,
    /// Index (in the chunk) of the first event in `raw`.
    pub first_event: u32,
    /// Set when the thread's history before this chunk is missing.
    pub restart: Option<Restart>,
    /// The events in range, `len` bytes from `events`: in the file (whose
    /// bytes are borrowed for `'a`), or in `expanded`'s heap buffer. A
    /// pointer, not a slice of either: every event the hot loops read goes
    /// through it, and a branch on where the events are cost an
    /// instruction or more an event on the 16-byte path.
    events: *const u8,
    len: usize,
    file: PhantomData<&'a [u8]>,
    /// A compact chunk's events, expanded (the batch's are some of them).
    expanded: Option<Expansion>,
    slot: u64,
    offset: u64,
}

/// A compact chunk's events, 16 bytes each, and the `switch` events among
/// them (`event`: the index in `events`). One value, so that a batch of
/// 16-byte events, which has none, drops nothing but a `None`.
#[derive(Default)]
struct Expansion {
    events: Vec<[u8; EVENT_SIZE]>,
    switches: Vec<SwitchPoint>,
    /// The index in `events` of the batch's first event.
    lent_from: u32,
    /// Where the events ended before the chunk's count (a count its
    /// header gave: see [`ChunkRef::events`]), and why: the index in
    /// `events` of the slot that stands for the damage (a kind no event
    /// has, so the passes take it as a damaged 16-byte event). Boxed: a
    /// batch is moved by value for every stretch replayed, and this is rare.
    damage: Option<Box<(u32, ChunkProblem)>>,
}

thread_local! {
    /// The buffer a worker's compact chunks are expanded into: taken by a
    /// batch, handed back when it is dropped. A worker holding two batches
    /// at once (the `gil` clock's merge) gives the second a buffer of its own.
    static EXPANDED: Cell<Expansion> = const {
        Cell::new(Expansion {
            events: Vec::new(),
            switches: Vec::new(),
            lent_from: 0,
            damage: None,
        })
    };
    /// The named frames of the worker's compact walks, reused likewise.
    static NAMED: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
}

// SAFETY: a batch's pointer is into bytes shared for `'a` (`&[u8]` is
// `Send`) or into the buffer it owns (a `Vec` is `Send`): it may move to
// another thread as they may (the `gil` clock's merge does).
unsafe impl Send for Batch<'_> {}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if let Some(buffer) = self.expanded.take() {
            EXPANDED.with(|b| b.set(buffer));
        }
    }
}

impl Batch<'_> {
    /// The events in range, 16 bytes each.
    #[inline(always)]
    pub(crate) fn raw(&self) -> &[u8] {
        // SAFETY: `events` and `len` were taken from a slice of the file's
        // bytes, which outlive `'a` and so `self`, or of `expanded`'s heap
        // buffer, which `self` owns, never resizes, and gives up only when
        // it is dropped: either lives as long as `&self`.
        unsafe { std::slice::from_raw_parts(self.events, self.len) }
    }

    /// The events in range.
    #[inline]
    pub(crate) fn events(&self) -> impl Iterator<Item = &[u8; EVENT_SIZE]> + '_ {
        self.raw()
            .chunks_exact(EVENT_SIZE)
            .map(|e| e.try_into().unwrap_or(&[0; EVENT_SIZE]))
    }

    /// Number of events.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.raw().len() / EVENT_SIZE
    }

    /// The `i`-th event split by `event::raw_parts` into (kind, tick,
    /// payload); past the end, a kind no event has.
    #[inline(always)]
    pub(crate) fn parts(&self, i: usize) -> (u64, u64, u64) {
        self.raw()
            .get(i * EVENT_SIZE..(i + 1) * EVENT_SIZE)
            .and_then(|b| <&[u8; EVENT_SIZE]>::try_from(b).ok())
            .map_or((u64::MAX, 0, 0), raw_parts)
    }

    /// Where a later walk may expand this compact chunk from, at the
    /// batch's `i`-th event, a `switch` (the one a segment starts with);
    /// `None` for a 16-byte chunk, which needs no point.
    pub(crate) fn resume_point(&self, i: usize) -> Option<ResumePoint> {
        let x = self.expanded.as_ref()?;
        let index = x.lent_from as usize + i;
        let k = x.switches.binary_search_by_key(&index, |p| p.event).ok()?;
        let point = x.switches.get(k)?;
        Some(ResumePoint {
            at: Pos {
                chunk: self.chunk,
                event: self.first_event + i as u32,
            },
            offset: u32::try_from(point.offset.checked_sub(self.offset)?).ok()?,
            tick: Some(self.parts(i).1),
        })
    }

    /// What is wrong with the `i`-th event of the batch, which the caller
    /// found invalid (`event::raw_is_valid`). A compact chunk's expansion
    /// ends at its first damaged event: where the decode counted the
    /// chunk's events, it found the damage and reported it, and the
    /// batches hold none; where the chunk's header gave the count, the
    /// expansion stands a slot for it, whose problem is the decoder's.
    pub(crate) fn problem(&self, i: usize) -> ChunkProblem {
        if let Some(x) = &self.expanded {
            if let Some((at, problem)) = x.damage.as_deref() {
                if x.lent_from as usize + i == *at as usize {
                    return problem.clone();
                }
            }
        }
        let at = i * EVENT_SIZE;
        let bad = self
            .raw()
            .get(at..at + EVENT_SIZE)
            .and_then(|b| <&[u8; EVENT_SIZE]>::try_from(b).ok())
            .and_then(|b| Event::decode(b).err())
            .unwrap_or(BadEvent::UnknownKind(0));
        ChunkProblem {
            index: self.slot,
            offset: self.offset + at as u64,
            kind: ChunkProblemKind::BadEvent(bad),
        }
    }
}

/// Walks a thread's chunks from `from` (inclusive) to `to` (exclusive) one
/// chunk at a time. Callers decode the batch's events in a tight loop and
/// pass every tick through [`Batches::clamp`], so all passes over a thread
/// see the same events with the same clamped ticks.
pub(crate) struct Batches<'a, 'd> {
    file: &'d TraceFile<'a>,
    chunks: &'d [ChunkRef],
    /// Where the first chunk's expansion may start, if not at its start.
    resume: Option<ResumePoint>,
    next: Pos,
    to: Pos,
    prev_tick: u64,
    restart_pending: bool,
}

impl<'a, 'd> Batches<'a, 'd> {
    /// Events of `thread`'s chunks in `[from, to)`, clamping from
    /// `floor_tick`; a compact chunk `from` is inside expands from
    /// `resume` (a switch at or before `from` in that chunk) if given, else
    /// from its start.
    pub(crate) fn new(
        file: &'d TraceFile<'a>,
        thread: &'d ThreadChunks,
        from: Pos,
        to: Pos,
        floor_tick: u64,
        resume: Option<ResumePoint>,
    ) -> Self {
        Batches {
            file,
            chunks: &thread.chunks,
            resume,
            next: from,
            to,
            prev_tick: floor_tick,
            restart_pending: false,
        }
    }

    /// The whole stream of a thread.
    pub(crate) fn all(file: &'d TraceFile<'a>, thread: &'d ThreadChunks) -> Self {
        let end = Pos {
            chunk: thread.chunks.len() as u32,
            event: 0,
        };
        Self::new(file, thread, Pos::default(), end, 0, None)
    }

    /// Clamps a tick so the thread's ticks never go backwards; returns the
    /// clamped tick and whether it had to be clamped.
    #[inline(always)]
    pub(crate) fn clamp(&mut self, tick: u64) -> (u64, bool) {
        if tick < self.prev_tick {
            (self.prev_tick, true)
        } else {
            self.prev_tick = tick;
            (tick, false)
        }
    }

    /// Accepts, in one step, a run of events whose ticks the caller checked
    /// never go backwards from [`Batches::floor`], the last being `last_tick`.
    #[inline(always)]
    pub(crate) fn accept_ordered(&mut self, last_tick: u64) {
        self.prev_tick = last_tick;
    }

    /// The tick the next event must not be earlier than.
    #[inline(always)]
    pub(crate) fn floor(&self) -> u64 {
        self.prev_tick
    }

    /// Where the next batch starts.
    pub(crate) fn position(&self) -> Pos {
        self.next
    }

    /// Tells the walk that an event of the last batch was damaged: the
    /// rest of that chunk is dropped and the next one restarts from its snapshot.
    pub(crate) fn damaged(&mut self) {
        self.restart_pending = true;
    }

    /// Whether the next chunk restarts from its snapshot after damage in
    /// the last one (a walk that goes on in other `Batches` tells them
    /// with [`Batches::damaged`]).
    pub(crate) fn restart_pending(&self) -> bool {
        self.restart_pending
    }

    /// The next chunk's batch.
    pub(crate) fn next_batch(&mut self) -> Option<Batch<'a>> {
        loop {
            if self.next >= self.to {
                return None;
            }
            let Pos {
                chunk: ci,
                event: first,
            } = self.next;
            let r = self.chunks.get(ci as usize)?;
            self.next = Pos {
                chunk: ci + 1,
                event: 0,
            };
            let restart_here = first == 0
                && (std::mem::take(&mut self.restart_pending) || r.restarts(ci as usize));
            let restart = if restart_here {
                // Only a restart needs the snapshot. The header decoded in
                // `decode`, so it decodes again; a `None` here would mean
                // the bytes changed under us: skip the chunk.
                let Some(chunk) = self.file.chunk(r.slot).ok().flatten() else {
                    continue;
                };
                let tick = chunk.snapshot.tick.max(self.prev_tick);
                self.prev_tick = tick;
                Some(Restart {
                    tick,
                    current_stack: chunk.snapshot.current_stack,
                })
            } else {
                None
            };
            let end = if ci == self.to.chunk {
                self.to.event.min(r.events)
            } else {
                r.events
            };
            let first = first.min(end);
            if r.compact {
                let Some((expanded, lent)) = self.expand(ci, r, first, end) else {
                    continue;
                };
                let events = expanded
                    .events
                    .get(lent.0..lent.1)
                    .unwrap_or_default()
                    .as_flattened();
                return Some(Batch {
                    chunk: ci,
                    first_event: first,
                    restart,
                    events: events.as_ptr(),
                    len: events.len(),
                    file: PhantomData,
                    expanded: Some(expanded),
                    slot: r.slot,
                    offset: r.events_offset,
                });
            }
            // `decode` checked that the committed events lie in the file.
            let from = r.events_offset as usize + first as usize * EVENT_SIZE;
            let to = r.events_offset as usize + end as usize * EVENT_SIZE;
            let Some(raw) = self.file.bytes().get(from..to) else {
                continue;
            };
            return Some(Batch {
                chunk: ci,
                first_event: first,
                restart,
                events: raw.as_ptr(),
                len: raw.len(),
                file: PhantomData,
                expanded: None,
                slot: r.slot,
                offset: from as u64,
            });
        }
    }

    /// Events `[first, end)` of compact chunk `r` (the thread's `ci`-th),
    /// expanded into the worker's buffer from the resume point if it is in
    /// this chunk at or before `first` (else from the chunk's start): the
    /// buffer, the `switch` events written (see [`Batch::resume_point`]),
    /// and the range of the buffer that holds the events. `None` if the
    /// chunk no longer decodes (the bytes changed under us).
    fn expand(
        &self,
        ci: u32,
        r: &ChunkRef,
        first: u32,
        end: u32,
    ) -> Option<(Expansion, (usize, usize))> {
        // A walk from a `switch` needs only the chunk's event bytes; one
        // from the chunk's start, its snapshot (the header decoded again).
        let resume = self
            .resume
            .filter(|p| p.at.chunk == ci && p.at.event <= first)
            .and_then(|p| {
                let from = r.events_offset as usize + p.offset as usize;
                let to = r.events_offset as usize + r.event_bytes as usize;
                let rest = self.file.bytes().get(from..to)?;
                let prev_tick = match p.tick {
                    Some(tick) => tick_before(rest, tick)?,
                    None => 0,
                };
                Some((p, rest, prev_tick))
            });
        let named = NAMED.with(Cell::take);
        let (mut walk, skipped) = match resume {
            Some((p, rest, prev_tick)) => {
                let offset = r.events_offset + p.offset as u64;
                let walk = CompactEvents::resume(rest, r.slot, offset, prev_tick, named);
                (walk, p.at.event)
            }
            None => {
                let chunk = self.file.chunk(r.slot).ok().flatten()?;
                (chunk.compact_events(named)?, 0)
            }
        };
        let mut x = EXPANDED.with(Cell::take);
        x.switches.clear();
        let wanted = (end - skipped) as usize;
        // Grown, never shrunk: the slots past what a batch writes keep old
        // events, which no batch lends.
        if x.events.len() < wanted {
            x.events.resize(wanted, [0; EVENT_SIZE]);
        }
        let switches = &mut x.switches;
        let written =
            walk.fill_events_noting_switches(&mut x.events[..wanted], |p| switches.push(p));
        // Fewer events than counted: the count was the header's (a count
        // the decode walked stops before damage). The chunk ends at the
        // damage the walk met, or, if it met none, where the events end
        // (the count was false); one slot stands for it, for the passes
        // to find as a damaged 16-byte event. A `lost` ends its chunk in
        // any case, and the passes need nothing more.
        x.damage = None;
        let ended_at_lost = written
            .checked_sub(1)
            .and_then(|last| x.events.get(last))
            .is_some_and(|e| raw_parts(e).0 == KIND_LOST);
        let mut filled = written;
        if written < wanted && !ended_at_lost {
            let problem = walk.problem().cloned().unwrap_or(ChunkProblem {
                index: r.slot,
                offset: walk.offset(),
                kind: ChunkProblemKind::BadCompactEvent(CompactFault::FewerThanCounted),
            });
            if let Some(slot) = x.events.get_mut(written) {
                *slot = [0; EVENT_SIZE];
                x.damage = Some(Box::new((written as u32, problem)));
                filled += 1;
            }
        }
        NAMED.with(|n| n.set(walk.into_named()));
        let lent = ((first - skipped) as usize).min(filled);
        x.lent_from = lent as u32;
        Some((x, (lent, filled)))
    }
}

#[cfg(test)]
/// Each chunk's `switch` events of a thread, as the format crate's
/// one-event decoder finds them from the chunk's start (for tests).
pub(crate) fn switch_points(decoded: &super::Decoded<'_>, thread: usize) -> Vec<Vec<ResumePoint>> {
    let t = &decoded.threads[thread];
    t.chunks
        .iter()
        .enumerate()
        .map(|(ci, r)| {
            let chunk = decoded.file.chunk(r.slot).ok().flatten();
            let mut points = Vec::new();
            if let Some(mut walk) = chunk.and_then(|c| c.compact_events(Vec::new())) {
                let mut event = 0;
                loop {
                    let offset = walk.offset();
                    let Some((kind, tick, _)) = walk.next_raw() else {
                        break;
                    };
                    if kind == mtrace_format::event::KIND_SWITCH {
                        points.push(ResumePoint {
                            at: Pos {
                                chunk: ci as u32,
                                event,
                            },
                            offset: (offset - r.events_offset) as u32,
                            tick: Some(tick),
                        });
                    }
                    event += 1;
                }
            }
            points
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::decode::{decode, Decoded};
    use mtanalyze_testkit::counts::{released_counts, without_released_counts};

    fn sample(name: &str) -> Vec<u8> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample-traces");
        std::fs::read(root.join(name)).expect("sample trace")
    }

    /// The events of `[from, to)` of a thread, batch after batch, the
    /// first chunk expanded from `resume` if given.
    fn events(
        decoded: &Decoded<'_>,
        thread: usize,
        from: Pos,
        to: Pos,
        resume: Option<ResumePoint>,
    ) -> Vec<u8> {
        let t = &decoded.threads[thread];
        let mut batches = Batches::new(&decoded.file, t, from, to, 0, resume);
        let mut out = Vec::new();
        while let Some(b) = batches.next_batch() {
            out.extend_from_slice(b.raw());
        }
        out
    }

    /// The points the batches of a whole-thread walk give at its `switch`
    /// events ([`Batch::resume_point`]), which the segment pass stores.
    fn noted_points(decoded: &Decoded<'_>, thread: usize) -> Vec<Vec<ResumePoint>> {
        let t = &decoded.threads[thread];
        let mut noted = vec![Vec::new(); t.chunks.len()];
        let mut batches = Batches::all(&decoded.file, t);
        while let Some(b) = batches.next_batch() {
            for i in 0..b.len() {
                if b.parts(i).0 == mtrace_format::event::KIND_SWITCH {
                    let point = b.resume_point(i).expect("a compact switch has a point");
                    noted[b.chunk as usize].push(point);
                }
            }
        }
        noted
    }

    /// Every range of a compact trace's events, from a chunk's start, from
    /// a `switch`, from just after one, from anywhere between, to anywhere
    /// after (in the chunk or a later one), holds the events its 16-byte
    /// image holds (the format crate's expansion of the whole file),
    /// whether its first chunk expands from the last switch at or before
    /// its start or from the chunk's start; the switch points the batches
    /// note are those the format crate's count walk finds; and the chunks
    /// the damage cut are the image's, at the same offsets.
    fn reads_as_its_image(compact: &[u8]) {
        let file = TraceFile::parse(compact).expect("parses");
        assert!(file.is_compact());
        let image = mtrace_format::convert::expand(&file).expect("expands");
        let lazy = decode(compact, None, false).expect("decodes");
        let whole = decode(&image.bytes, None, false).expect("decodes");
        assert_eq!(lazy.cut, image.cut);
        assert_eq!(lazy.damaged, image.damaged);
        assert_eq!(lazy.threads.len(), whole.threads.len());
        let (mut mid_chunk, mut resumed) = (0, 0);
        for (i, (a, b)) in lazy.threads.iter().zip(&whole.threads).enumerate() {
            let counts = |t: &ThreadChunks| t.chunks.iter().map(|c| c.events).collect::<Vec<_>>();
            assert_eq!(counts(a), counts(b), "thread {i}");
            let end = Pos {
                chunk: a.chunks.len() as u32,
                event: 0,
            };
            assert_eq!(
                events(&lazy, i, Pos::default(), end, None),
                events(&whole, i, Pos::default(), end, None)
            );
            let points = switch_points(&lazy, i);
            assert_eq!(noted_points(&lazy, i), points, "thread {i}");
            for (ci, c) in a.chunks.iter().enumerate() {
                let mut firsts = vec![0, c.events / 3, c.events / 2, c.events.saturating_sub(1)];
                for sw in &points[ci] {
                    firsts.extend([sw.at.event, sw.at.event + 1, sw.at.event + 2]);
                }
                for first in firsts.into_iter().filter(|&f| f <= c.events) {
                    mid_chunk += (first > 0) as usize;
                    let from = Pos {
                        chunk: ci as u32,
                        event: first,
                    };
                    let last_switch = points[ci]
                        .iter()
                        .rev()
                        .find(|p| p.at.event <= first)
                        .copied();
                    resumed += last_switch.is_some() as usize;
                    let ends = [
                        Pos {
                            chunk: ci as u32,
                            event: (first + 1).min(c.events),
                        },
                        Pos {
                            chunk: ci as u32,
                            event: c.events,
                        },
                        Pos {
                            chunk: ci as u32 + 1,
                            event: 3,
                        },
                    ];
                    for to in ends {
                        let image = events(&whole, i, from, to, None);
                        for resume in [None, last_switch] {
                            assert_eq!(
                                events(&lazy, i, from, to, resume),
                                image,
                                "thread {i}, {from:?} to {to:?}, from {resume:?}"
                            );
                        }
                    }
                }
            }
        }
        assert!(mid_chunk > 0, "some batches start inside a chunk");
        assert!(resumed > 0, "some batches resume at a switch");
    }

    #[test]
    fn a_compact_trace_reads_as_its_image_from_any_event() {
        let compact = sample("workload-v4.bin");
        let n = released_counts(&compact);
        assert!(
            n > 10,
            "{n} chunks carry their count, as the converter stores them"
        );
        let lazy = decode(&compact, None, false).expect("decodes");
        let switches: usize = (0..lazy.threads.len())
            .flat_map(|i| switch_points(&lazy, i))
            .map(|s| s.len())
            .sum();
        assert!(switches > 100, "the sample switches stacks inside chunks");
        reads_as_its_image(&compact);
    }

    /// The same without the counts in the chunks' headers: the decode
    /// walks every chunk to count its events.
    #[test]
    fn a_compact_trace_without_counts_reads_as_its_image_from_any_event() {
        let compact = without_released_counts(&sample("workload-v4.bin"));
        assert_eq!(released_counts(&compact), 0);
        reads_as_its_image(&compact);
    }

    /// A chunk cut by a damaged event, and one the file's end tore, keep
    /// every event before the damage, read from any event, and report the
    /// damage where the image's expansion does, when the decode walks the
    /// chunks. (With the counts in the headers the damage is found where
    /// the segment pass expands the chunk: `semantics.rs`'s damaged
    /// traces compare the two ways' reports.)
    #[test]
    fn a_damaged_compact_chunk_reads_as_its_image() {
        let mut compact = without_released_counts(&sample("workload-v4.bin"));
        let lazy = decode(&compact, None, false).expect("decodes");
        // A switch in the middle of a chunk that holds many, made a long
        // form whose width code names no width (tag 0: the long form with
        // no tick bytes, then the kind byte).
        let (chunk, switches) = (0..lazy.threads.len())
            .flat_map(|i| lazy.threads[i].chunks.iter().zip(switch_points(&lazy, i)))
            .max_by_key(|(_, s)| s.len())
            .expect("chunks");
        let sw = switches[switches.len() / 2];
        let at = (chunk.events_offset + sw.offset as u64) as usize;
        let last_slot = lazy
            .threads
            .iter()
            .flat_map(|t| &t.chunks)
            .map(|c| c.events_offset)
            .max()
            .expect("chunks");
        drop(lazy);
        compact[at] = mtrace_format::layout::FORM_LONG << 6;
        compact[at + 1] = 0x0F;
        reads_as_its_image(&compact);
        let damaged = decode(&compact, None, false).expect("decodes");
        assert!(
            damaged.cut.iter().any(|p| p.offset == at as u64),
            "{:?}",
            damaged.cut
        );
        // Torn inside the last chunk's events.
        compact.truncate(last_slot as usize + 37);
        reads_as_its_image(&compact);
    }
}

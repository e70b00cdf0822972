//! Chunks: the unit a thread claims, fills alone, and the reader decodes alone.
//!
//! ```text
//! chunk:  [ header 64 B | snapshot (32 B + 4 B per frame, padded to 16) | event | event | ... ]
//! header: state u64 (seq+1 << 24 | committed/16 << 1 | writing), thread u64, thread_chunk_no u64, 0...
//! ```
//! The body is only valid up to the committed length in the state word,
//! which the writer publishes with release ordering after the bytes.
//! In format version 4 the state word counts that length in bytes and the
//! events after the snapshot are compact ([`crate::compact`]); a chunk
//! knows which it is ([`Chunk::is_compact`]) and [`Chunk::events`] decodes
//! either.
//! The snapshot names the frames that were open when the chunk was claimed, so
//! a chunk whose predecessors were overwritten (ring mode) still decodes.

use crate::compact::CompactEvents;
use crate::error::{ChunkProblem, ChunkProblemKind};
use crate::event::{Event, ThreadId};
use crate::layout::*;
pub(crate) use crate::snapshot::decode_snapshot;
pub use crate::snapshot::{encode_snapshot, SnapshotRef};

/// A committed, claimed chunk.
#[derive(Clone, Debug)]
pub struct Chunk<'a> {
    /// The slot index in the file.
    pub index: u64,
    /// File offset of the chunk.
    pub offset: u64,
    /// Global claim sequence number (orders chunks in time across threads).
    pub seq: u64,
    /// The thread that wrote it.
    pub thread: ThreadId,
    /// Its position among that thread's chunks (0 = the thread's first).
    pub thread_chunk_no: u64,
    /// A writer still owned the chunk when the file was last written
    /// (the recorder was killed, or the chunk was the thread's current one).
    pub writing: bool,
    /// The thread's stream restarts at this chunk's snapshot
    /// ([`CHUNK_FLAG_RESTART`]).
    pub restart: bool,
    /// The snapshot's frames were opened before this file began: in the
    /// one before it of a rotating series, or before the recording began
    /// ([`CHUNK_FLAG_CONTINUED`]).
    pub continued: bool,
    /// Frames open when the chunk was claimed.
    pub snapshot: SnapshotRef<'a>,
    events: &'a [u8],
    events_offset: u64,
    /// The events are compact (format version 4), not 16 bytes each.
    compact: bool,
    /// `events_plus_one` of the header, as read (0: none).
    events_plus_one: u32,
    /// Damage that cut the chunk short (events before it are still returned).
    pub cut: Option<ChunkProblem>,
}

impl<'a> Chunk<'a> {
    /// Decodes slot `index` of a chunk region whose slot starts at file offset
    /// `offset`. `bytes` is whatever of the slot is in the file (shorter than
    /// `chunk_size` if the file was cut). `Ok(None)`: never claimed, or
    /// nothing committed. The events are 16 bytes each (versions 1 to 3;
    /// [`Chunk::decode_compact`] reads version 4's).
    pub fn decode(
        bytes: &'a [u8],
        index: u64,
        offset: u64,
        chunk_size: usize,
    ) -> Result<Option<Chunk<'a>>, ChunkProblem> {
        Chunk::decode_as(bytes, index, offset, chunk_size, false)
    }

    /// [`Chunk::decode`] of a version-4 chunk: the state word counts
    /// committed bytes, and the events are compact.
    pub fn decode_compact(
        bytes: &'a [u8],
        index: u64,
        offset: u64,
        chunk_size: usize,
    ) -> Result<Option<Chunk<'a>>, ChunkProblem> {
        Chunk::decode_as(bytes, index, offset, chunk_size, true)
    }

    fn decode_as(
        bytes: &'a [u8],
        index: u64,
        offset: u64,
        chunk_size: usize,
        compact: bool,
    ) -> Result<Option<Chunk<'a>>, ChunkProblem> {
        let problem = |at: usize, kind| ChunkProblem {
            index,
            offset: offset + at as u64,
            kind,
        };
        let Some(state) = read_u64(bytes, C_STATE) else {
            return Err(problem(0, ChunkProblemKind::Truncated));
        };
        let state = if compact {
            unpack_state_compact(state)
        } else {
            unpack_state(state)
        };
        let Some(seq) = state.seq else {
            return Ok(None);
        };
        if state.committed_bytes == 0 {
            return Ok(None);
        }
        // `chunk_size` comes from a checked header; a caller passing less
        // than a chunk header gets an empty body, not an underflow.
        let body_room = chunk_size.saturating_sub(CHUNK_HEADER_SIZE);
        if state.committed_bytes > body_room {
            return Err(problem(
                C_STATE,
                ChunkProblemKind::CommittedTooLong(state.committed_bytes),
            ));
        }
        let (Some(thread), Some(thread_chunk_no)) = (
            read_u64(bytes, C_THREAD),
            read_u64(bytes, C_THREAD_CHUNK_NO),
        ) else {
            return Err(problem(0, ChunkProblemKind::Truncated));
        };
        if thread == 0 {
            return Err(problem(C_THREAD, ChunkProblemKind::NoThread));
        }
        let body_end = CHUNK_HEADER_SIZE + state.committed_bytes;
        let mut cut = None;
        let available = bytes.len().min(body_end);
        if available < body_end {
            cut = Some(problem(available, ChunkProblemKind::Truncated));
        }
        let body = bytes.get(CHUNK_HEADER_SIZE..available).unwrap_or(&[]);
        let snapshot = decode_snapshot(body)
            .map_err(|why| problem(CHUNK_HEADER_SIZE, ChunkProblemKind::BadSnapshot(why)))?;
        let snap_len = snapshot.encoded_len();
        // A cut file can end mid-event: keep whole events only (a compact
        // event cut short is found, and reported, by its decoder).
        let events = body.get(snap_len..).unwrap_or(&[]);
        let events = if compact {
            events
        } else {
            &events[..events.len() / EVENT_SIZE * EVENT_SIZE]
        };
        let flags = read_u64(bytes, C_FLAGS).unwrap_or(0);
        let events_plus_one = read_u32(bytes, C_EVENTS_PLUS_ONE).unwrap_or(0);
        Ok(Some(Chunk {
            index,
            offset,
            seq,
            thread: ThreadId(thread),
            thread_chunk_no,
            writing: state.writing,
            restart: flags & CHUNK_FLAG_RESTART != 0,
            continued: flags & CHUNK_FLAG_RESTART != 0 && flags & CHUNK_FLAG_CONTINUED != 0,
            snapshot,
            events,
            events_offset: offset + (CHUNK_HEADER_SIZE + snap_len) as u64,
            compact,
            events_plus_one,
            cut,
        }))
    }

    /// The events are compact (format version 4): [`Chunk::event_count`]
    /// and [`Chunk::event_bytes`] do not count or hold 16-byte slots.
    pub fn is_compact(&self) -> bool {
        self.compact
    }

    /// Number of 16-byte event slots committed (some may turn out
    /// damaged). A compact chunk's events are counted by decoding them:
    /// here, 0.
    pub fn event_count(&self) -> usize {
        if self.compact {
            0
        } else {
            self.events.len() / EVENT_SIZE
        }
    }

    /// A compact chunk's events as its writer counted them when it let go
    /// of the chunk (the header's `events_plus_one`), where that count can
    /// stand for the walk's: the writer let go of the chunk (`writing` is
    /// clear), its committed body is all in the file (not `cut`), and its
    /// events' bytes could hold that many (an event takes at least one).
    /// A reader that takes it reads that many events and finds damage
    /// where it expands them: the count says how many events there are as
    /// the committed length says how many bytes (see
    /// `schemas/trace-format.md`). `None` for 16-byte chunks, whose count
    /// is [`Chunk::event_count`].
    pub fn released_count(&self) -> Option<u32> {
        let count = self.events_plus_one.checked_sub(1)?;
        let whole = self.compact && !self.writing && self.cut.is_none();
        (whole && count as usize <= self.events.len()).then_some(count)
    }

    /// The raw committed event bytes (whole events only in versions 1 to 3;
    /// every committed byte of a compact chunk that is in the file).
    pub fn event_bytes(&self) -> &'a [u8] {
        self.events
    }

    /// A compact chunk's events, for the raw walks of
    /// [`CompactEvents::next_raw`] and [`CompactEvents::for_each_raw`]
    /// (`named` is a buffer to reuse, see [`CompactEvents::into_named`]);
    /// `None` for a chunk of 16-byte events.
    pub fn compact_events(&self, mut named: Vec<u32>) -> Option<CompactEvents<'a>> {
        if !self.compact {
            return None;
        }
        named.clear();
        named.extend(crate::compact::named_frames(&self.snapshot).map(|f| f.0));
        Some(CompactEvents::from_parts(
            self.events,
            self.index,
            self.events_offset,
            self.snapshot.tick,
            named,
        ))
    }

    /// File offset of the first event slot.
    pub fn events_offset(&self) -> u64 {
        self.events_offset
    }

    /// Decodes the events in order. A damaged event yields one `Err` and ends
    /// the iteration; the events before it are intact.
    pub fn events(&self) -> ChunkEvents<'a> {
        self.events_from(0)
    }

    /// Like [`Chunk::events`], starting at the `first`-th event (fixed
    /// sizes make this a slice, not a scan; compact events are decoded
    /// and skipped).
    pub fn events_from(&self, first: usize) -> ChunkEvents<'a> {
        if let Some(mut events) = self.compact_events(Vec::new()) {
            for _ in 0..first {
                if events.next_raw().is_none() {
                    break;
                }
            }
            return ChunkEvents::Compact(events);
        }
        let skip = first.saturating_mul(EVENT_SIZE).min(self.events.len());
        ChunkEvents::Fixed(EventIter {
            rest: &self.events[skip..],
            offset: self.events_offset + skip as u64,
            index: self.index,
            failed: false,
        })
    }
}

/// A chunk's events in either encoding; see [`Chunk::events`].
#[derive(Clone, Debug)]
pub enum ChunkEvents<'a> {
    /// 16-byte events (versions 1 to 3).
    Fixed(EventIter<'a>),
    /// Compact events (version 4).
    Compact(CompactEvents<'a>),
}

impl Iterator for ChunkEvents<'_> {
    type Item = Result<Event, ChunkProblem>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            ChunkEvents::Fixed(events) => events.next(),
            ChunkEvents::Compact(events) => events.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            ChunkEvents::Fixed(events) => events.size_hint(),
            ChunkEvents::Compact(events) => events.size_hint(),
        }
    }
}

/// Iterator over a chunk's events; see [`Chunk::events`].
#[derive(Clone, Debug)]
pub struct EventIter<'a> {
    rest: &'a [u8],
    offset: u64,
    index: u64,
    failed: bool,
}

impl Iterator for EventIter<'_> {
    type Item = Result<Event, ChunkProblem>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let (head, rest) = self.rest.split_first_chunk::<EVENT_SIZE>()?;
        let at = self.offset;
        self.rest = rest;
        self.offset += EVENT_SIZE as u64;
        match Event::decode(head) {
            Ok(e) => Some(Ok(e)),
            Err(bad) => {
                self.failed = true;
                Some(Err(ChunkProblem {
                    index: self.index,
                    offset: at,
                    kind: ChunkProblemKind::BadEvent(bad),
                }))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.rest.len() / EVENT_SIZE))
    }
}

/// Writes a chunk header (everything but the body) into `chunk[..CHUNK_HEADER_SIZE]`.
pub fn encode_chunk_header(chunk: &mut [u8], state: u64, thread: ThreadId, thread_chunk_no: u64) {
    chunk[..CHUNK_HEADER_SIZE].fill(0);
    chunk[C_STATE..C_STATE + 8].copy_from_slice(&state.to_le_bytes());
    chunk[C_THREAD..C_THREAD + 8].copy_from_slice(&thread.0.to_le_bytes());
    chunk[C_THREAD_CHUNK_NO..C_THREAD_CHUNK_NO + 8].copy_from_slice(&thread_chunk_no.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, FunctionId, StackId};

    fn chunk_with(events: &[Event], own: &[u32], stack: StackId, frames: &[u32]) -> Vec<u8> {
        let size = 4096;
        let mut c = vec![0u8; size];
        let snap = encode_snapshot(&mut c[CHUNK_HEADER_SIZE..], 1024, 5, own, stack, frames);
        let mut at = CHUNK_HEADER_SIZE + snap;
        for e in events {
            c[at..at + 16].copy_from_slice(&e.encode());
            at += 16;
        }
        encode_chunk_header(
            &mut c,
            pack_state(9, at - CHUNK_HEADER_SIZE, true),
            ThreadId(3),
            2,
        );
        c
    }

    #[test]
    fn chunk_decodes_alone() {
        let evs = [
            Event {
                tick: 10,
                kind: EventKind::Enter(FunctionId(4)),
            },
            Event {
                tick: 11,
                kind: EventKind::Exit(FunctionId(4)),
            },
        ];
        let bytes = chunk_with(&evs, &[1, 2], StackId(8), &[3]);
        let c = Chunk::decode(&bytes, 0, 4096, 4096).unwrap().unwrap();
        assert_eq!(
            (c.seq, c.thread, c.thread_chunk_no, c.writing),
            (9, ThreadId(3), 2, true)
        );
        assert_eq!(
            c.snapshot.own_frames().collect::<Vec<_>>(),
            vec![FunctionId(1), FunctionId(2)]
        );
        assert_eq!(
            c.snapshot.stack_frames().collect::<Vec<_>>(),
            vec![FunctionId(3)]
        );
        assert_eq!(c.snapshot.current_stack, StackId(8));
        assert_eq!(
            c.events().collect::<Result<Vec<_>, _>>().unwrap(),
            evs.to_vec()
        );
    }

    /// A compact chunk's count (`events_plus_one`) stands for its walk
    /// only where it can be true: released, whole in the file, and no more
    /// events than the bytes could hold.
    #[test]
    fn a_compact_chunk_s_count_is_taken_only_where_it_can_be_true() {
        let mut c = vec![0u8; 4096];
        let snap = encode_snapshot(&mut c[CHUNK_HEADER_SIZE..], 1024, 5, &[], StackId::OWN, &[]);
        let mut encoder = crate::compact::ChunkEncoder::new(5, &[]);
        let mut at = CHUNK_HEADER_SIZE + snap;
        for i in 0..10u64 {
            let f = FunctionId(7);
            let kind = if i % 2 == 0 {
                EventKind::Enter(f)
            } else {
                EventKind::Exit(f)
            };
            at += encoder
                .push(&mut c[at..], &Event { tick: 5 + i, kind })
                .unwrap();
        }
        let events = (at - CHUNK_HEADER_SIZE - snap) as u32;
        let count = |plus_one: u32, writing: bool, len: usize| {
            let mut c = c.clone();
            let state = pack_state_compact(0, at - CHUNK_HEADER_SIZE, writing);
            encode_chunk_header(&mut c, state, ThreadId(1), 0);
            c[C_EVENTS_PLUS_ONE..C_EVENTS_PLUS_ONE + 4].copy_from_slice(&plus_one.to_le_bytes());
            let chunk = Chunk::decode_compact(&c[..len], 0, 4096, 4096)
                .unwrap()
                .unwrap();
            chunk.released_count()
        };
        assert_eq!(count(11, false, 4096), Some(10));
        // None stored, or a writer still held the chunk.
        assert_eq!(count(0, false, 4096), None);
        assert_eq!(count(11, true, 4096), None);
        // The file's end cut the body.
        assert_eq!(count(11, false, at - 1), None);
        // More events than bytes: false. As many: possible.
        assert_eq!(count(events + 2, false, 4096), None);
        assert_eq!(count(events + 1, false, 4096), Some(events));
        // 16-byte chunks count their slots.
        let bytes = chunk_with(&[], &[], StackId::OWN, &[]);
        let chunk = Chunk::decode(&bytes, 0, 4096, 4096).unwrap().unwrap();
        assert_eq!(chunk.released_count(), None);
    }

    #[test]
    fn the_restart_flag_is_read_and_old_chunks_have_none() {
        let evs = [Event {
            tick: 10,
            kind: EventKind::Enter(FunctionId(4)),
        }];
        let mut bytes = chunk_with(&evs, &[1, 2], StackId::OWN, &[]);
        let c = Chunk::decode(&bytes, 0, 0, 4096).unwrap().unwrap();
        assert!(!c.restart, "reserved bytes are zero: no restart");
        bytes[C_FLAGS..C_FLAGS + 8].copy_from_slice(&CHUNK_FLAG_RESTART.to_le_bytes());
        let c = Chunk::decode(&bytes, 0, 0, 4096).unwrap().unwrap();
        assert!(c.restart);
        assert_eq!(
            c.snapshot.own_frames().map(|f| f.0).collect::<Vec<_>>(),
            [1, 2]
        );
    }

    #[test]
    fn deep_snapshots_keep_the_innermost_frames() {
        let mut body = vec![0u8; 256];
        let own: Vec<u32> = (1..=100).collect();
        let n = encode_snapshot(&mut body, 64, 0, &own, StackId::OWN, &[]);
        let s = decode_snapshot(&body[..n]).unwrap();
        assert_eq!(s.flags, SNAP_OWN_TRUNCATED);
        assert_eq!(
            s.own_frames().map(|f| f.0).collect::<Vec<_>>(),
            (93..=100).collect::<Vec<_>>()
        );
    }

    #[test]
    fn every_truncation_of_a_chunk_keeps_its_whole_events() {
        let evs: Vec<Event> = (0..20)
            .map(|i| Event {
                tick: i,
                kind: EventKind::Enter(FunctionId(1)),
            })
            .collect();
        let bytes = chunk_with(&evs, &[], StackId::OWN, &[]);
        for cut in 0..200 {
            match Chunk::decode(&bytes[..cut], 0, 0, 4096) {
                Ok(Some(c)) => {
                    let got: Vec<_> = c.events().map(|e| e.unwrap()).collect();
                    assert_eq!(got, evs[..got.len()].to_vec());
                    assert_eq!(got.len(), (cut - 64 - 32) / 16);
                }
                Ok(None) => panic!("claimed chunk read as empty"),
                Err(_) => assert!(cut < 64 + 32, "cut {cut}"),
            }
        }
    }

    #[test]
    fn garbage_after_the_good_events_is_reported_with_its_offset() {
        let evs = [Event {
            tick: 1,
            kind: EventKind::Enter(FunctionId(1)),
        }];
        let mut bytes = chunk_with(&evs, &[], StackId::OWN, &[]);
        // commit one more (zero) event slot
        let state = pack_state(9, 32 + 32, false);
        bytes[..8].copy_from_slice(&state.to_le_bytes());
        let c = Chunk::decode(&bytes, 0, 8192, 4096).unwrap().unwrap();
        let all: Vec<_> = c.events().collect();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].as_ref().unwrap_err().offset, 8192 + 64 + 32 + 16);
    }
}

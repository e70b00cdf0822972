//! Re-encoding a whole trace's events, between the 16-byte encoding
//! (versions 1 to 3) and the compact one (version 4, [`crate::compact`]).
//!
//! * [`compact`]: a version 1 to 3 file as a version-4 file
//!   (`mtanalyze convert --compact`). Chunks keep their slot, thread, number, flags and
//!   snapshot; the chunk size is the smallest that holds the fullest chunk.
//! * [`expand`]: a version-4 file as a version-3 *image* in memory, for
//!   readers whose passes index 16-byte events (the analyzer). The image
//!   is laid out as the original file followed by a chunk region of
//!   16-byte events, so the metadata keeps its offsets (only the header
//!   and the committed metadata log, its segments in the original's chunk
//!   slots included, are copied: the rest is never read);
//!   every chunk keeps its slot index.
//!   Each slot is sized first, by its events' lengths alone
//!   ([`slot_bound`]: a small part of a decode) or by a decode ([`plan_slot`]:
//!   exact even when damage ends the chunk early), then decoded straight
//!   into its place ([`expand_into`]), so the image is the only copy;
//!   callers run both on the slots in parallel.
//!
//! A chunk is salvaged as a reader would: the events before damage (a torn
//! tail, a bad event) are kept and the damage is handed back with its byte
//! offset in the file read. A damaged chunk (bad snapshot, thread 0, ...)
//! becomes an empty slot and its problem is handed back.

use crate::chunk::{encode_chunk_header, Chunk};
use crate::compact::{count_events, ChunkEncoder, CompactEvents};
use crate::error::ChunkProblem;
use crate::event::{Event, ThreadId};
use crate::layout::*;
use crate::reader::TraceFile;

/// Why a trace could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The input already has the encoding asked for.
    #[error("the trace is already format version {0}")]
    AlreadyThatVersion(u32),
    /// A chunk's events do not fit the largest chunk of the output's version.
    #[error(
        "a chunk needs {needed} bytes, more than the {max} a version-{version} chunk may hold"
    )]
    ChunkTooLarge {
        /// The bytes its events need.
        needed: usize,
        /// The largest chunk of the output's version.
        max: usize,
        /// The output's version.
        version: u32,
    },
}

/// A converted trace, and what of the input could not be carried over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The output file's bytes.
    pub bytes: Vec<u8>,
    /// Chunks of the input that could not be decoded at all (now empty slots).
    pub damaged: Vec<ChunkProblem>,
    /// Chunks cut short by damage or the file's end: their events before it
    /// were kept.
    pub cut: Vec<ChunkProblem>,
}

/// One chunk, re-encoded: its chunk header fields and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertedChunk {
    seq: u64,
    thread: ThreadId,
    thread_chunk_no: u64,
    writing: bool,
    flags: u64,
    /// Compact events in `body`, for the header's `events_plus_one` (as a
    /// recorder stores it when it lets go of a chunk); `None` for 16-byte ones.
    compact_events: Option<u32>,
    /// Snapshot then events.
    body: Vec<u8>,
}

/// One slot of the input, converted (see [`compact_chunk`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConvertedSlot {
    /// The chunk, if the slot held one that decoded.
    pub chunk: Option<ConvertedChunk>,
    /// The slot's chunk could not be decoded at all.
    pub damaged: Option<ChunkProblem>,
    /// The chunk was cut short; the events before the cut are in `chunk`.
    pub cut: Option<ChunkProblem>,
}

impl ConvertedChunk {
    fn from(
        chunk: &Chunk<'_>,
        file: &TraceFile<'_>,
        events: Vec<u8>,
        compact_events: Option<u32>,
    ) -> ConvertedChunk {
        // The snapshot's bytes are the same in every version: copied as
        // they are (with its flags), not rebuilt.
        let start = chunk.offset as usize + CHUNK_HEADER_SIZE;
        let snapshot = file
            .bytes()
            .get(start..start + chunk.snapshot.encoded_len())
            .unwrap_or_default();
        let mut body = Vec::with_capacity(snapshot.len() + events.len());
        body.extend_from_slice(snapshot);
        body.extend_from_slice(&events);
        let flags = if chunk.restart { CHUNK_FLAG_RESTART } else { 0 }
            | if chunk.continued {
                CHUNK_FLAG_CONTINUED
            } else {
                0
            };
        ConvertedChunk {
            seq: chunk.seq,
            thread: chunk.thread,
            thread_chunk_no: chunk.thread_chunk_no,
            writing: chunk.writing,
            flags,
            compact_events,
            body,
        }
    }
}

/// What slot `index` of a version-4 file holds once expanded: found by
/// decoding it ([`plan_slot`]), so that [`expand_into`] can write
/// every slot straight into its place in one image.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlotPlan {
    /// Body bytes of the expanded chunk (snapshot and 16-byte events), if
    /// the slot holds a chunk that decodes.
    pub body_len: Option<usize>,
    /// The slot's chunk could not be decoded at all.
    pub damaged: Option<ChunkProblem>,
    /// The chunk was cut short; the events before the cut are expanded.
    pub cut: Option<ChunkProblem>,
}

/// Slot `index` of a version-4 file and a walk of its compact events
/// (`named` lent to it: [`CompactEvents::into_named`] gives it back), or
/// the plan of a slot with nothing to expand (empty, or damaged).
fn compact_walk<'f>(
    file: &TraceFile<'f>,
    index: u64,
    named: &mut Vec<u32>,
) -> Result<(Chunk<'f>, CompactEvents<'f>), SlotPlan> {
    let chunk = match file.chunk(index) {
        Ok(Some(chunk)) => chunk,
        Ok(None) => return Err(SlotPlan::default()),
        Err(problem) => {
            return Err(SlotPlan {
                damaged: Some(problem),
                ..SlotPlan::default()
            })
        }
    };
    match chunk.compact_events(std::mem::take(named)) {
        Some(walk) => Ok((chunk, walk)),
        None => Err(SlotPlan::default()),
    }
}

/// Decodes slot `index` of a version-4 file to learn its expanded size
/// and damage (`named`: a buffer reused from slot to slot).
pub fn plan_slot(file: &TraceFile<'_>, index: u64, named: &mut Vec<u32>) -> SlotPlan {
    let (chunk, mut walk) = match compact_walk(file, index, named) {
        Ok(found) => found,
        Err(plan) => return plan,
    };
    let mut events = 0usize;
    walk.for_each_raw(|_| events += 1);
    let cut = walk.problem().cloned().or_else(|| chunk.cut.clone());
    *named = walk.into_named();
    SlotPlan {
        body_len: Some(chunk.snapshot.encoded_len() + events * EVENT_SIZE),
        damaged: None,
        cut,
    }
}

/// Where [`expand_into`] puts things in a version-3 image of a
/// version-4 file (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageLayout {
    /// The image's header.
    pub header: Vec<u8>,
    /// Bytes per chunk slot.
    pub chunk_size: usize,
    /// File offset of slot 0 (after a copy of the original file).
    pub chunks_offset: usize,
    /// The image's length.
    pub len: usize,
}

/// The largest body an expansion of slot `index` of a version-4 file can
/// take, found without decoding it: its snapshot and 16 bytes for each
/// event [`count_events`] finds (exact unless damage or a `lost` ends
/// the chunk sooner). `None` for a slot without a chunk (empty, damaged).
pub fn slot_bound(file: &TraceFile<'_>, index: u64) -> Option<usize> {
    let chunk = file.chunk(index).ok()??;
    Some(chunk.snapshot.encoded_len() + count_events(chunk.event_bytes()) * EVENT_SIZE)
}

/// The layout of a version-3 image of `file` with `slots` slots, the
/// largest body of which is `largest_body` bytes (exact, from
/// [`plan_slot`], or a bound, from [`slot_bound`]).
pub fn image_layout(
    file: &TraceFile<'_>,
    slots: u64,
    largest_body: usize,
) -> Result<ImageLayout, ConvertError> {
    let chunk_size = (CHUNK_HEADER_SIZE + largest_body)
        .next_multiple_of(64)
        .max(MIN_CHUNK_SIZE);
    if chunk_size > MAX_CHUNK_SIZE {
        return Err(ConvertError::ChunkTooLarge {
            needed: chunk_size,
            max: MAX_CHUNK_SIZE,
            version: FORMAT_VERSION,
        });
    }
    // The original file, then the chunks: the metadata (and any damage
    // in it) keeps its offsets.
    let chunks_offset = file.bytes().len().next_multiple_of(64).max(HEADER_SIZE);
    let mut header = file.header().clone();
    header.version = FORMAT_VERSION;
    header.chunk_size = chunk_size as u32;
    header.chunk_count = slots;
    header.chunks_offset = chunks_offset as u64;
    Ok(ImageLayout {
        header: header.encode(),
        chunk_size,
        chunks_offset,
        len: chunks_offset + slots as usize * chunk_size,
    })
}

/// Writes everything of the image but its chunks: the original file's
/// committed metadata log, every part of it at its offset (the first
/// region's, and each segment's header and log), and the image's header.
/// `image` is [`ImageLayout::len`] zero bytes.
pub fn image_start(file: &TraceFile<'_>, layout: &ImageLayout, image: &mut [u8]) {
    let original = file.bytes();
    // Of the original, a reader of the image reads only the header (the
    // image's own, below) and the committed metadata: the rest stays
    // zero and untouched. A recording's metadata region is mostly room
    // never written (16 MiB in a Python profile's file in memory), and
    // copying it cost a page fault per 4 KiB on each side. The log goes
    // on in segments in the original's chunk slots, which the image
    // does not copy (its chunks are new ones, after the original's
    // bytes): each segment is copied where it was, or the image's log
    // would end at the first link.
    for span in file.metadata_spans() {
        if let (Some(to), Some(from)) = (image.get_mut(span.clone()), original.get(span)) {
            to.copy_from_slice(from);
        }
    }
    image[..HEADER_SIZE].copy_from_slice(&layout.header);
}

/// Writes slot `index` of a version-4 file, expanded, into `slot` (its
/// [`ImageLayout::chunk_size`] bytes of the image, zero, sized by
/// [`plan_slot`] or [`slot_bound`]); returns what it wrote and the damage.
pub fn expand_into(
    file: &TraceFile<'_>,
    index: u64,
    named: &mut Vec<u32>,
    slot: &mut [u8],
) -> SlotPlan {
    let (chunk, mut walk) = match compact_walk(file, index, named) {
        Ok(found) => found,
        Err(plan) => return plan,
    };
    let start = chunk.offset as usize + CHUNK_HEADER_SIZE;
    let snapshot = file
        .bytes()
        .get(start..start + chunk.snapshot.encoded_len())
        .unwrap_or_default();
    let Some((header, body)) = slot.split_at_mut_checked(CHUNK_HEADER_SIZE) else {
        return SlotPlan::default();
    };
    let Some((snap_out, events)) = body.split_at_mut_checked(snapshot.len()) else {
        return SlotPlan::default();
    };
    snap_out.copy_from_slice(snapshot);
    // The slot was sized for these events; one too small (a caller's
    // mistake) keeps the events that fit.
    let written = walk.write_events(events.as_chunks_mut::<EVENT_SIZE>().0);
    let cut = walk.problem().cloned().or_else(|| chunk.cut.clone());
    *named = walk.into_named();
    let body_len = snapshot.len() + written * EVENT_SIZE;
    let flags = if chunk.restart { CHUNK_FLAG_RESTART } else { 0 }
        | if chunk.continued {
            CHUNK_FLAG_CONTINUED
        } else {
            0
        };
    encode_chunk_header(
        header,
        pack_state(chunk.seq, body_len, chunk.writing),
        chunk.thread,
        chunk.thread_chunk_no,
    );
    header[C_FLAGS..C_FLAGS + 8].copy_from_slice(&flags.to_le_bytes());
    SlotPlan {
        body_len: Some(body_len),
        damaged: None,
        cut,
    }
}

/// Compacts slot `index` of a version 1 to 3 file: its events, up to the
/// first damage, as compact ones.
pub fn compact_chunk(file: &TraceFile<'_>, index: u64) -> ConvertedSlot {
    let chunk = match file.chunk(index) {
        Ok(Some(chunk)) => chunk,
        Ok(None) => return ConvertedSlot::default(),
        Err(problem) => {
            return ConvertedSlot {
                damaged: Some(problem),
                ..ConvertedSlot::default()
            }
        }
    };
    let mut encoder = ChunkEncoder::from_snapshot(&chunk.snapshot);
    let mut events = vec![0u8; chunk.event_count() * COMPACT_MAX_EVENT_SIZE];
    let mut len = 0;
    let mut count = 0u32;
    let mut cut = chunk.cut.clone();
    for event in chunk.events() {
        let event: Event = match event {
            Ok(event) => event,
            Err(problem) => {
                cut = Some(problem);
                break;
            }
        };
        // Room for the worst case of every event was made above.
        let Some(n) = encoder.push(&mut events[len..], &event) else {
            break;
        };
        len += n;
        count += 1;
        // Nothing after a `lost` is read in version 4 (nor written).
        if event.kind == crate::EventKind::Lost {
            break;
        }
    }
    events.truncate(len);
    ConvertedSlot {
        chunk: Some(ConvertedChunk::from(&chunk, file, events, Some(count))),
        damaged: None,
        cut,
    }
}

/// Lays out the file of `slots` (one a slot of `file`, in order) in
/// format `version` (3: 16-byte events; 4: compact): `file`'s header with
/// the new version and chunk size, then, as [`expand`] and [`compact`]
/// describe, the metadata and the chunks.
pub fn assemble(
    file: &TraceFile<'_>,
    slots: Vec<ConvertedSlot>,
    version: u32,
) -> Result<Converted, ConvertError> {
    let compact = version >= COMPACT_FORMAT_VERSION;
    let max = if compact {
        COMPACT_MAX_CHUNK_SIZE
    } else {
        MAX_CHUNK_SIZE
    };
    let mut needed = MIN_CHUNK_SIZE;
    for slot in &slots {
        if let Some(c) = &slot.chunk {
            let size = (CHUNK_HEADER_SIZE + c.body.len()).next_multiple_of(64);
            if size > max {
                return Err(ConvertError::ChunkTooLarge {
                    needed: size,
                    max,
                    version,
                });
            }
            needed = needed.max(size);
        }
    }
    let chunk_size = needed;
    let meta = file.metadata_log();
    let mut header = file.header().clone();
    header.version = version;
    header.chunk_size = chunk_size as u32;
    header.chunk_count = slots.len() as u64;
    let mut out;
    if compact {
        // Header, chunks, metadata: a file as a recorder lays it out.
        header.chunks_offset = HEADER_SIZE as u64;
        header.meta_offset = (HEADER_SIZE + slots.len() * chunk_size) as u64;
        header.meta_capacity = meta.len() as u64;
        header.meta_len = meta.len() as u64;
        out = vec![0u8; header.meta_offset as usize + meta.len()];
        out[header.meta_offset as usize..].copy_from_slice(&meta);
    } else {
        // The original file, then the chunks: the metadata (and any
        // damage in it) keeps its offsets.
        let original = file.bytes();
        let start = original.len().next_multiple_of(64).max(HEADER_SIZE);
        header.chunks_offset = start as u64;
        out = vec![0u8; start + slots.len() * chunk_size];
        out[..original.len()].copy_from_slice(original);
    }
    let chunks_offset = header.chunks_offset as usize;
    out[..HEADER_SIZE].copy_from_slice(&header.encode());
    let damaged = slots.iter().filter_map(|s| s.damaged.clone()).collect();
    let cut = slots.iter().filter_map(|s| s.cut.clone()).collect();
    for (index, slot) in slots.into_iter().enumerate() {
        let Some(c) = slot.chunk else { continue };
        let at = chunks_offset + index * chunk_size;
        let chunk = &mut out[at..at + chunk_size];
        let state = if compact {
            pack_state_compact(c.seq, c.body.len(), c.writing)
        } else {
            pack_state(c.seq, c.body.len(), c.writing)
        };
        encode_chunk_header(chunk, state, c.thread, c.thread_chunk_no);
        chunk[C_FLAGS..C_FLAGS + 8].copy_from_slice(&c.flags.to_le_bytes());
        // As a recorder does when it lets go of a chunk (a chunk it still
        // held has no count).
        if let Some(n) = c.compact_events.filter(|_| compact && !c.writing) {
            chunk[C_EVENTS_PLUS_ONE..C_EVENTS_PLUS_ONE + 4]
                .copy_from_slice(&n.saturating_add(1).to_le_bytes());
        }
        chunk[CHUNK_HEADER_SIZE..CHUNK_HEADER_SIZE + c.body.len()].copy_from_slice(&c.body);
    }
    Ok(Converted {
        bytes: out,
        damaged,
        cut,
    })
}

/// A version-4 file as a version-3 image (see the module doc), one slot
/// at a time: [`plan_slot`], [`image_layout`], [`image_start`] and
/// [`expand_into`], which callers run on the slots in parallel.
pub fn expand(file: &TraceFile<'_>) -> Result<Converted, ConvertError> {
    if !file.is_compact() {
        return Err(ConvertError::AlreadyThatVersion(file.header().version));
    }
    let mut named = Vec::new();
    let plans: Vec<SlotPlan> = (0..file.chunk_slots())
        .map(|i| plan_slot(file, i, &mut named))
        .collect();
    let largest = plans.iter().filter_map(|p| p.body_len).max().unwrap_or(0);
    let layout = image_layout(file, plans.len() as u64, largest)?;
    let mut bytes = vec![0u8; layout.len];
    image_start(file, &layout, &mut bytes);
    let chunks = bytes[layout.chunks_offset..].chunks_exact_mut(layout.chunk_size);
    for ((index, plan), slot) in plans.iter().enumerate().zip(chunks) {
        if plan.body_len.is_some() {
            expand_into(file, index as u64, &mut named, slot);
        }
    }
    Ok(Converted {
        bytes,
        damaged: plans.iter().filter_map(|p| p.damaged.clone()).collect(),
        cut: plans.iter().filter_map(|p| p.cut.clone()).collect(),
    })
}

/// A version 1 to 3 file as a version-4 file (see the module doc).
pub fn compact(file: &TraceFile<'_>) -> Result<Converted, ConvertError> {
    if file.is_compact() {
        return Err(ConvertError::AlreadyThatVersion(file.header().version));
    }
    let slots: Vec<ConvertedSlot> = (0..file.chunk_slots())
        .map(|i| compact_chunk(file, i))
        .collect();
    assemble(file, slots, COMPACT_FORMAT_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, FunctionId, StackId, MAX_TICK};
    use crate::writer::{TraceWriter, WriterOptions};
    use crate::ChunkProblemKind;
    use crate::CompactFault;
    use std::io::Cursor;

    /// A two-thread trace over several 1 KiB chunks: nested frames, stack
    /// switches, wakes and ends, ids and tick deltas of every width.
    fn sample() -> Vec<u8> {
        let opts = WriterOptions {
            chunk_size: 1024,
            ..Default::default()
        };
        let mut w = TraceWriter::new(Cursor::new(Vec::new()), opts).unwrap();
        let f = w.function("f", "a.rs", 1, "m");
        let g = w.function("g", "a.rs", 2, "m");
        let s = w.stack("task");
        w.mark(3, 1, "warm-up done");
        let wide = FunctionId(70_000);
        let mut tick = 0;
        for i in 0..600u64 {
            tick += [1, 100, 5000, 1 << 30][(i % 4) as usize];
            let tid = ThreadId(1 + i % 2);
            let kind = match i % 10 {
                0 | 1 => EventKind::Enter(f),
                2 => EventKind::Switch(s),
                3 => EventKind::Enter(g),
                4 => EventKind::Exit(g),
                5 => EventKind::Switch(StackId::OWN),
                6 => EventKind::Wake(StackId(1 << 40)),
                7 => EventKind::Enter(wide),
                8 => EventKind::Exit(wide),
                _ => EventKind::Exit(f),
            };
            w.event(tid, tick.min(MAX_TICK), kind).unwrap();
        }
        w.event(ThreadId(1), tick, EventKind::End(s)).unwrap();
        w.finish(Some(tick)).unwrap().into_inner()
    }

    /// Every slot's events (an `Err` ends a slot's list).
    fn events_by_slot(bytes: &[u8]) -> Vec<Vec<Result<Event, ChunkProblem>>> {
        let file = TraceFile::parse(bytes).unwrap();
        (0..file.chunk_slots())
            .map(|i| match file.chunk(i) {
                Ok(Some(c)) => c.events().collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn compact_then_expand_keeps_every_event_chunk_and_record() {
        let v3 = sample();
        let original = TraceFile::parse(&v3).unwrap();
        let v4 = compact(&original).unwrap();
        assert!(v4.damaged.is_empty() && v4.cut.is_empty());
        let compacted = TraceFile::parse(&v4.bytes).unwrap();
        assert_eq!(compacted.header().version, COMPACT_FORMAT_VERSION);
        assert!(compacted.is_compact());
        assert_eq!(events_by_slot(&v4.bytes), events_by_slot(&v3));
        assert_eq!(compacted.metadata(), original.metadata());
        // Each chunk carries its count, as a recorder's released chunk
        // does, and the count is the walk's.
        for i in 0..compacted.chunk_slots() {
            let Some(c) = compacted.chunk(i).unwrap() else {
                continue;
            };
            let walked = c.compact_events(Vec::new()).unwrap().count() as u32;
            assert_eq!(c.released_count(), Some(walked), "slot {i}");
        }
        let back = expand(&compacted).unwrap();
        let expanded = TraceFile::parse(&back.bytes).unwrap();
        assert_eq!(expanded.header().version, FORMAT_VERSION);
        assert_eq!(events_by_slot(&back.bytes), events_by_slot(&v3));
        assert_eq!(expanded.metadata(), original.metadata());
        for i in 0..original.chunk_slots() {
            let (a, b) = (original.chunk(i).unwrap(), expanded.chunk(i).unwrap());
            let (a, b) = (a.unwrap(), b.unwrap());
            assert_eq!(
                (a.seq, a.thread, a.thread_chunk_no, a.writing, a.restart),
                (b.seq, b.thread, b.thread_chunk_no, b.writing, b.restart)
            );
            assert_eq!(a.snapshot, b.snapshot);
        }
        // Each way only once.
        assert_eq!(
            compact(&compacted),
            Err(ConvertError::AlreadyThatVersion(4))
        );
        assert!(expand(&original).is_err());
    }

    #[test]
    fn a_torn_compact_chunk_keeps_its_events_before_the_tear() {
        let v4 = compact(&TraceFile::parse(&sample()).unwrap())
            .unwrap()
            .bytes;
        let file = TraceFile::parse(&v4).unwrap();
        let whole: Vec<Event> = file
            .chunk(0)
            .unwrap()
            .unwrap()
            .events()
            .map(|e| e.unwrap())
            .collect();
        let chunks_offset = file.header().chunks_offset as usize;
        let c0 = file.chunk(0).unwrap().unwrap();
        let events_start = c0.events_offset() as usize;
        let events_end = events_start + c0.event_bytes().len();
        // Cut the file at every byte of chunk 0's events, and claim the
        // slot is all there is: the events before the tear are kept,
        // the tear is reported at the cut event's offset.
        for cut in events_start..events_end {
            let mut torn = v4[..cut].to_vec();
            torn[crate::layout::H_CHUNK_COUNT..][..8].copy_from_slice(&1u64.to_le_bytes());
            let file = TraceFile::parse(&torn).unwrap();
            assert_eq!(file.chunk_slots(), 1);
            let got = expand(&file).unwrap();
            let kept = events_by_slot(&got.bytes).remove(0);
            let kept: Vec<Event> = kept.into_iter().map(|e| e.unwrap()).collect();
            assert_eq!(kept[..], whole[..kept.len()], "cut {cut}");
            assert!(kept.len() < whole.len());
            let problem = &got.cut[..];
            assert_eq!(problem.len(), 1, "cut {cut}");
            assert!(
                problem[0].offset as usize <= cut && problem[0].offset as usize >= events_start
            );
            assert!(chunks_offset <= events_start);
            if problem[0].offset as usize != cut {
                assert_eq!(
                    problem[0].kind,
                    ChunkProblemKind::BadCompactEvent(CompactFault::Cut),
                    "cut {cut}"
                );
            }
        }
    }

    #[test]
    fn a_damaged_compact_event_keeps_the_events_before_it() {
        let v4 = compact(&TraceFile::parse(&sample()).unwrap())
            .unwrap()
            .bytes;
        let file = TraceFile::parse(&v4).unwrap();
        let c0 = file.chunk(0).unwrap().unwrap();
        let at = c0.events_offset() as usize;
        // Form 3 at the chunk's first event when the snapshot names no
        // frame: nothing of the chunk is kept, the offset is the event's.
        let mut bad = v4.clone();
        bad[at] = 0xC0;
        let got = expand(&TraceFile::parse(&bad).unwrap()).unwrap();
        assert_eq!(got.cut.len(), 1);
        assert_eq!(got.cut[0].offset, at as u64);
        assert_eq!(got.cut[0].index, 0);
        assert!(events_by_slot(&got.bytes)[0].is_empty());
        // A slot whose thread is 0 is damaged, the others read.
        let mut bad = v4.clone();
        bad[c0.offset as usize + C_THREAD..][..8].fill(0);
        let got = expand(&TraceFile::parse(&bad).unwrap()).unwrap();
        assert_eq!(got.damaged.len(), 1);
        assert_eq!(events_by_slot(&got.bytes)[1], events_by_slot(&v4)[1]);
    }
}

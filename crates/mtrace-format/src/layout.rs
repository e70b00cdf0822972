//! Byte offsets and constants of the on-disk layout.
//!
//! This file is the single place where the numbers of `schemas/trace-format.md`
//! live. The recorder writes through these offsets into a memory map, the
//! [`crate::TraceWriter`] writes them through `std::io`, and the reader checks
//! every one of them against the real size of the file.
//!
//! ```text
//! +-----------------+ 0
//! | file header     |  HEADER_SIZE bytes (fixed fields + command line)
//! +-----------------+ meta_offset / chunks_offset (either order)
//! | metadata region |  append-only log of function, stack and thread records
//! +-----------------+
//! | chunk 0         |  chunk_size bytes: 64-byte chunk header, then body
//! | chunk 1         |  (or a metadata segment: the log going on, linked
//! | ...             |   from the region by a next-segment record)
//! +-----------------+
//! ```

/// The first eight bytes of every trace file.
pub const MAGIC: [u8; 8] = *b"MTRACE\0\x01";
/// The format version this crate writes. Version 2 is version 1 plus the
/// `lost` event (kind 6), the 16 bytes every chunk keeps free for it, and
/// the `wake` event (kind 7). Version 3 adds the `end` event (kind 8).
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format version this crate reads (every version up to
/// [`NEWEST_READ_VERSION`] is read).
pub const OLDEST_READ_VERSION: u32 = 1;
/// The newest format version this crate reads: version 4
/// ([`COMPACT_FORMAT_VERSION`], compact events, what recorders write by
/// default), ahead of [`FORMAT_VERSION`] (16-byte events).
pub const NEWEST_READ_VERSION: u32 = COMPACT_FORMAT_VERSION;
/// Size of the file header, including the command line area.
pub const HEADER_SIZE: usize = 4096;

// --- file header fields (all little-endian) ---
pub const H_MAGIC: usize = 0x000;
pub const H_VERSION: usize = 0x008;
pub const H_HEADER_SIZE: usize = 0x00C;
pub const H_FLAGS: usize = 0x010;
pub const H_PID: usize = 0x014;
pub const H_CHUNK_SIZE: usize = 0x018;
pub const H_CLOCK_KIND: usize = 0x01C;
pub const H_PREFERRED_CLOCK: usize = 0x01E;
pub const H_CHUNK_COUNT: usize = 0x020;
pub const H_CHUNKS_OFFSET: usize = 0x028;
pub const H_META_OFFSET: usize = 0x030;
pub const H_META_CAPACITY: usize = 0x038;
pub const H_START_TICK: usize = 0x040;
pub const H_START_UNIX_NS: usize = 0x048;
pub const H_CALIB_TICKS: usize = 0x050;
pub const H_CALIB_NS: usize = 0x058;
pub const H_END_TICK: usize = 0x060;
pub const H_END_UNIX_NS: usize = 0x068;
pub const H_CMDLINE_LEN: usize = 0x070;
/// Which recorder wrote the trace, when the names' meaning depends on it
/// (u16, [`crate::Producer`] codes).
pub const H_PRODUCER: usize = 0x074;
/// Atomic counter of chunk claims; on its own cache line because every
/// thread touches it once per chunk.
pub const H_NEXT_SEQ: usize = 0x080;
/// Atomic count of events that could not be recorded (`StopWhenFull`).
pub const H_DROPPED_EVENTS: usize = 0x0C0;
/// Atomic count of chunk claims refused or skipped.
pub const H_DROPPED_CHUNKS: usize = 0x0C8;
/// Atomic count of committed bytes in the metadata region.
pub const H_META_LEN: usize = 0x0D0;
/// Atomic count of metadata records that did not fit.
pub const H_META_DROPPED: usize = 0x0D8;
/// Start of the command line (UTF-8, `H_CMDLINE_LEN` bytes, NUL-separated arguments).
pub const H_CMDLINE: usize = 0x100;
/// Largest command line that fits in the header.
pub const CMDLINE_MAX: usize = HEADER_SIZE - H_CMDLINE;

/// Header flag: the recorder finished the file; `end_tick` is valid.
pub const FLAG_FINISHED: u32 = 1 << 0;
/// Header flag: the recorder ran in ring (flight recorder) mode.
pub const FLAG_RING: u32 = 1 << 1;

// --- chunks ---
/// Size of the chunk header; the body starts right after it.
pub const CHUNK_HEADER_SIZE: usize = 64;
/// Offset of the chunk's atomic state word.
pub const C_STATE: usize = 0x00;
/// Offset of the owning thread id (u64).
pub const C_THREAD: usize = 0x08;
/// Offset of the chunk's index among its thread's chunks (u64, from 0).
pub const C_THREAD_CHUNK_NO: usize = 0x10;
/// Offset of the chunk's flags (u64; 0 in files of recorders before it).
pub const C_FLAGS: usize = 0x18;
/// Chunk flag: the thread's stream restarts at this chunk's snapshot,
/// though no chunk of it is missing: the recorder did not record the
/// thread for a while (it was paused, or the thread moved to this file of a
/// rotating series), so the frames open now are the snapshot's, not those
/// its earlier events leave open.
pub const CHUNK_FLAG_RESTART: u64 = 1 << 0;
/// Chunk flag, set with [`CHUNK_FLAG_RESTART`]: the snapshot's frames
/// were opened before this file began, in the one before it in a
/// rotating series (the thread moved here from there), or before the
/// recording began (it attached to a running program). Readers count
/// their time here but not their calls (the earlier file counts those),
/// so the files of a series add up to one recording.
pub const CHUNK_FLAG_CONTINUED: u64 = 1 << 1;
/// Offset of a version-4 chunk's event count plus one (u32): stored by the
/// recorder when it lets go of the chunk, 0 while it writes it (and in
/// chunks of recorders before the field, and of other writers). A hint
/// for counting the events without walking them; the events themselves
/// decide (a reader must not trust it for anything that could go wrong
/// if it were false).
pub const C_EVENTS_PLUS_ONE: usize = 0x20;
/// Smallest chunk size the reader accepts.
pub const MIN_CHUNK_SIZE: usize = 1024;
/// Largest chunk size the state word can describe.
pub const MAX_CHUNK_SIZE: usize = 64 << 20;
/// Default chunk size used by the recorder and the writer.
pub const DEFAULT_CHUNK_SIZE: usize = 64 << 10;

/// Every event and the snapshot are laid in units of this many bytes.
pub const EVENT_SIZE: usize = 16;

/// Bytes at the end of every chunk body that a version-2 recorder keeps
/// free for one `lost` event: a thread whose next claim fails can always
/// say, in the chunk it already owns, from when its events are missing.
pub const LOST_RESERVE: usize = EVENT_SIZE;

/// State word bit: a writer currently owns the chunk.
pub const STATE_WRITING: u64 = 1;
/// State word: committed body length in 16-byte units, bits 1..=23.
pub const STATE_UNITS_SHIFT: u32 = 1;
/// Width of the committed-units field.
pub const STATE_UNITS_BITS: u32 = 23;
/// State word: chunk sequence number plus one, bits 24..=63 (0 = never used).
pub const STATE_SEQ_SHIFT: u32 = 24;

/// Packs a chunk state word.
pub const fn pack_state(seq: u64, committed_bytes: usize, writing: bool) -> u64 {
    ((seq + 1) << STATE_SEQ_SHIFT)
        | (((committed_bytes / EVENT_SIZE) as u64) << STATE_UNITS_SHIFT)
        | if writing { STATE_WRITING } else { 0 }
}

/// The fields of an unpacked chunk state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkState {
    /// Global claim sequence number, or `None` if the chunk was never claimed.
    pub seq: Option<u64>,
    /// Bytes of the body that were committed.
    pub committed_bytes: usize,
    /// A writer owned the chunk when the file was last written.
    pub writing: bool,
}

/// Unpacks a chunk state word.
pub const fn unpack_state(word: u64) -> ChunkState {
    let seq_plus_one = word >> STATE_SEQ_SHIFT;
    let units = (word >> STATE_UNITS_SHIFT) & ((1 << STATE_UNITS_BITS) - 1);
    ChunkState {
        seq: if seq_plus_one == 0 {
            None
        } else {
            Some(seq_plus_one - 1)
        },
        committed_bytes: units as usize * EVENT_SIZE,
        writing: word & STATE_WRITING != 0,
    }
}

// --- compact events (format version 4; see `crate::compact`) ---
/// The format version whose events are compact (variable-size) instead of
/// 16 bytes. Not yet written by the recorder ([`FORMAT_VERSION`] says what is).
pub const COMPACT_FORMAT_VERSION: u32 = 4;
/// Largest compact event: tag, 7 tick bytes, kind byte, 8 payload bytes.
/// The encoder's fast path stores this many bytes (the event's own, then
/// bytes the next event overwrites), so it wants this much room.
pub const COMPACT_MAX_EVENT_SIZE: usize = 17;
/// Largest compact `lost` event (tag, 7 tick bytes, kind byte): a version-4
/// recorder stops ordinary events this many bytes short of the body's end.
pub const COMPACT_LOST_RESERVE: usize = 9;
/// Largest chunk of a version-4 file: its state word counts committed bytes
/// (not 16-byte units) in the same 23 bits, so the body must stay below 2^23.
pub const COMPACT_MAX_CHUNK_SIZE: usize = 8 << 20;
/// Tag bits 7..6: the event's form.
pub const TAG_FORM_SHIFT: u32 = 6;
/// Tag bits 5..4: the tick delta's size class.
pub const TAG_CLASS_SHIFT: u32 = 4;
/// Tag bits 3..0: the tick delta's low 4 bits.
pub const TAG_DELTA_LOW_MASK: u8 = 0x0F;
/// Form 0: a kind byte (kind << 4 | payload width code) and a payload follow.
pub const FORM_LONG: u8 = 0;
/// Form 1: `enter`, a 1-byte function id follows.
pub const FORM_ENTER_1: u8 = 1;
/// Form 2: `enter`, a 2-byte function id follows.
pub const FORM_ENTER_2: u8 = 2;
/// Form 3: `exit` of the innermost frame the chunk names; nothing follows.
pub const FORM_EXIT_TOP: u8 = 3;
/// Bytes of the tick delta's high part after the tag, by size class.
pub const TICK_CLASS_BYTES: [usize; 4] = [0, 1, 2, 7];
/// Largest tick delta of each size class (class 3: all 60 bits).
pub const TICK_CLASS_MAX: [u64; 4] = [(1 << 4) - 1, (1 << 12) - 1, (1 << 20) - 1, (1 << 60) - 1];
/// Bytes of a long form's payload, by width code (the kind byte's low nibble).
pub const PAYLOAD_WIDTH_BYTES: [usize; 5] = [0, 1, 2, 4, 8];

/// Packs a version-4 chunk state word: as [`pack_state`], but the committed
/// length counts bytes.
pub const fn pack_state_compact(seq: u64, committed_bytes: usize, writing: bool) -> u64 {
    ((seq + 1) << STATE_SEQ_SHIFT)
        | ((committed_bytes as u64) << STATE_UNITS_SHIFT)
        | if writing { STATE_WRITING } else { 0 }
}

/// Unpacks a version-4 chunk state word (committed length in bytes).
pub const fn unpack_state_compact(word: u64) -> ChunkState {
    let units = unpack_state(word);
    ChunkState {
        committed_bytes: units.committed_bytes / EVENT_SIZE,
        ..units
    }
}

// --- snapshot (first record of every chunk body) ---
/// Marks a snapshot record: "SNAP" little-endian.
pub const SNAPSHOT_MAGIC: u32 = u32::from_le_bytes(*b"SNAP");
/// Fixed part of a snapshot; followed by the frame ids.
pub const SNAPSHOT_FIXED: usize = 32;
/// Snapshot flag: the thread's own stack was deeper than recorded.
pub const SNAP_OWN_TRUNCATED: u32 = 1 << 0;
/// Snapshot flag: the current logical stack was deeper than recorded.
pub const SNAP_STACK_TRUNCATED: u32 = 1 << 1;

/// Bytes a snapshot with these depths occupies, rounded up to whole event units.
pub const fn snapshot_size(own_depth: usize, stack_depth: usize) -> usize {
    let raw = SNAPSHOT_FIXED + 4 * (own_depth + stack_depth);
    raw.div_ceil(EVENT_SIZE) * EVENT_SIZE
}

// --- metadata records ---
/// Record header: u32 payload length, u16 kind, u16 reserved.
pub const META_RECORD_HEADER: usize = 8;
/// Records start on 8-byte boundaries.
pub const META_ALIGN: usize = 8;
/// Metadata record kind: a function (or scope) definition.
pub const META_FUNCTION: u16 = 1;
/// Metadata record kind: a logical stack's name.
pub const META_STACK: u16 = 2;
/// Metadata record kind: a thread's name and OS id.
pub const META_THREAD: u16 = 3;
/// Metadata record kind: the host the trace was recorded on.
pub const META_HOST: u16 = 4;
/// Metadata record kind: a named instant (`mtrace::mark`).
pub const META_MARK: u16 = 5;
/// Metadata record kind: a logical stack continued from an earlier file of
/// a rotating series, with the frames it had open.
pub const META_CONTINUED_STACK: u16 = 6;
/// Metadata record kind: the log goes on in a metadata segment (payload
/// `offset u64, size u64`); the last record of a full segment.
pub const META_NEXT_SEGMENT: u16 = 7;
/// Bytes of a next-segment record: its header and 16 bytes of payload.
/// Every part of the log keeps this much room at its end for one.
pub const META_NEXT_SEGMENT_LEN: usize = META_RECORD_HEADER + 16;
/// Longest string a metadata record may hold.
pub const META_STRING_MAX: usize = 64 << 10;

// --- metadata segments (the metadata log past the first region) ---
/// A segment's header, the size of a chunk header: the recorder places a
/// segment in a chunk slot. Its log follows.
pub const SEGMENT_HEADER_SIZE: usize = CHUNK_HEADER_SIZE;
/// Offset of the segment's state word (where a chunk's is):
/// [`SEGMENT_STATE`].
pub const S_STATE: usize = 0x00;
/// Offset of the segment's magic, [`SEGMENT_MAGIC`].
pub const S_MAGIC: usize = 0x08;
/// Offset of the segment's committed log length (u64, atomic), counted
/// from the end of the segment header.
pub const S_META_LEN: usize = 0x10;
/// Marks a metadata segment: "MTMETASG" little-endian.
pub const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"MTMETASG");
/// The state word of a chunk slot holding a metadata segment: writing bit
/// set (a ring's claims find it busy and pass it by), committed length 0
/// (every reader of chunks sees an empty slot), and every sequence bit set
/// (no chunk's claim has that number).
pub const SEGMENT_STATE: u64 = (u64::MAX << STATE_SEQ_SHIFT) | STATE_WRITING;

/// Reads a little-endian u16 at `at`; `None` past the end.
pub fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

/// Reads a little-endian u32 at `at`; `None` past the end.
pub fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Reads a little-endian u64 at `at`; `None` past the end.
pub fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

// The committed-units field must describe the largest chunk body.
const _: () = assert!((MAX_CHUNK_SIZE / EVENT_SIZE) < (1 << STATE_UNITS_BITS));
// ... and, counted in bytes, the largest version-4 chunk body.
const _: () = assert!(COMPACT_MAX_CHUNK_SIZE - CHUNK_HEADER_SIZE < (1 << STATE_UNITS_BITS));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_word_round_trips() {
        for (seq, bytes, writing) in [
            (0, 0, true),
            (7, 16 * 100, false),
            ((1 << 39) - 2, MAX_CHUNK_SIZE - 64, true),
        ] {
            let s = unpack_state(pack_state(seq, bytes, writing));
            assert_eq!(
                s,
                ChunkState {
                    seq: Some(seq),
                    committed_bytes: bytes,
                    writing
                }
            );
        }
        assert_eq!(unpack_state(0).seq, None);
    }

    #[test]
    fn compact_state_word_counts_bytes() {
        for (seq, bytes, writing) in [
            (0, 0, true),
            (7, 33, false),
            (
                (1 << 39) - 2,
                COMPACT_MAX_CHUNK_SIZE - CHUNK_HEADER_SIZE,
                true,
            ),
        ] {
            let word = pack_state_compact(seq, bytes, writing);
            let s = unpack_state_compact(word);
            assert_eq!(
                s,
                ChunkState {
                    seq: Some(seq),
                    committed_bytes: bytes,
                    writing
                }
            );
            // The same word read as version 3 counts 16-byte units: the
            // fields other than the length are where they were.
            assert_eq!(unpack_state(word).seq, Some(seq));
            assert_eq!(unpack_state(word).writing, writing);
        }
    }
}

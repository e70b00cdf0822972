//! The file header: what the trace is, where its parts are, and its clock.

use crate::clock::{ClockInfo, ClockKind, PreferredClock};
use crate::error::FormatError;
use crate::layout::*;

/// Which recorder wrote the trace, when that changes what its names mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Producer {
    /// Not said (the Rust recorder, a converted or imported trace): names
    /// are whatever the instrumentation registered.
    #[default]
    Unspecified,
    /// The Python binding: a Python function's name is its code object's
    /// `co_qualname` (`Class.method`, `outer.<locals>.inner`), its file
    /// `co_filename` and its line `co_firstlineno`; a C function has file
    /// `~`, line 0 and the name cProfile gives it.
    Python,
}

impl Producer {
    /// The on-disk code.
    pub fn code(self) -> u16 {
        match self {
            Producer::Unspecified => 0,
            Producer::Python => 1,
        }
    }

    /// Parses the on-disk code; unknown codes read as `Unspecified`.
    pub fn from_code(code: u16) -> Producer {
        match code {
            1 => Producer::Python,
            _ => Producer::Unspecified,
        }
    }
}

/// The decoded file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version (this crate reads [`OLDEST_READ_VERSION`] to
    /// [`NEWEST_READ_VERSION`]).
    pub version: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Process id of the recorded program (0 if unknown).
    pub pid: u32,
    /// Bytes per chunk, header included.
    pub chunk_size: u32,
    /// The clock description.
    pub clock: ClockInfo,
    /// The analysis clock that suits the trace.
    pub preferred_clock: PreferredClock,
    /// Which recorder wrote the trace, when that changes what names mean.
    pub producer: Producer,
    /// Number of chunk slots the file was laid out with.
    pub chunk_count: u64,
    /// File offset of chunk 0.
    pub chunks_offset: u64,
    /// File offset of the metadata region.
    pub meta_offset: u64,
    /// Capacity of the metadata region in bytes.
    pub meta_capacity: u64,
    /// Tick of the end of the trace, when the recorder finished the file.
    pub end_tick: Option<u64>,
    /// Wall-clock date of the end (ns since the Unix epoch, 0 if unknown).
    pub end_unix_ns: u64,
    /// Chunks claimed so far (wraps the ring in ring mode).
    pub next_seq: u64,
    /// Events the recorder could not store (`StopWhenFull`).
    pub dropped_events: u64,
    /// Chunk claims that were refused or skipped.
    pub dropped_chunks: u64,
    /// Committed bytes of the metadata region.
    pub meta_len: u64,
    /// Metadata records that did not fit the region.
    pub meta_dropped: u64,
    /// The recorded program's command line, arguments separated by NUL.
    pub cmdline: String,
}

impl Header {
    /// A header for a trace with no chunks yet.
    pub fn new(clock: ClockInfo, chunk_size: u32) -> Header {
        Header {
            version: FORMAT_VERSION,
            flags: 0,
            pid: 0,
            chunk_size,
            clock,
            preferred_clock: PreferredClock::Unspecified,
            producer: Producer::Unspecified,
            chunk_count: 0,
            chunks_offset: HEADER_SIZE as u64,
            meta_offset: HEADER_SIZE as u64,
            meta_capacity: 0,
            end_tick: None,
            end_unix_ns: 0,
            next_seq: 0,
            dropped_events: 0,
            dropped_chunks: 0,
            meta_len: 0,
            meta_dropped: 0,
            cmdline: String::new(),
        }
    }

    /// The recorder finished the file (it was not killed or still running).
    pub fn finished(&self) -> bool {
        self.flags & FLAG_FINISHED != 0
    }

    /// The recorder ran as a ring (flight recorder).
    pub fn ring(&self) -> bool {
        self.flags & FLAG_RING != 0
    }

    /// The command line as a list of arguments.
    pub fn args(&self) -> Vec<&str> {
        self.cmdline.split('\0').filter(|a| !a.is_empty()).collect()
    }

    /// Encodes the header into its `HEADER_SIZE` bytes. A command line longer
    /// than the header allows is cut at a character boundary.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = [0u8; HEADER_SIZE];
        self.encode_into(&mut b);
        b.to_vec()
    }

    /// [`Header::encode`] into `b`, every byte written whatever `b` held
    /// (a recorder rewrites a reused file's header in place: no buffer
    /// made and copied per recording).
    pub fn encode_into(&self, b: &mut [u8; HEADER_SIZE]) {
        let mut end = self.cmdline.len().min(CMDLINE_MAX);
        while !self.cmdline.is_char_boundary(end) {
            end -= 1;
        }
        // The bytes no field covers are zero; the fields follow.
        b[..H_CMDLINE].fill(0);
        b[H_CMDLINE + end..].fill(0);
        let mut put = |at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
        put(H_MAGIC, &MAGIC);
        put(H_VERSION, &self.version.to_le_bytes());
        put(H_HEADER_SIZE, &(HEADER_SIZE as u32).to_le_bytes());
        put(H_FLAGS, &self.flags.to_le_bytes());
        put(H_PID, &self.pid.to_le_bytes());
        put(H_CHUNK_SIZE, &self.chunk_size.to_le_bytes());
        put(H_CLOCK_KIND, &self.clock.kind.code().to_le_bytes());
        put(
            H_PREFERRED_CLOCK,
            &self.preferred_clock.code().to_le_bytes(),
        );
        put(H_PRODUCER, &self.producer.code().to_le_bytes());
        put(H_CHUNK_COUNT, &self.chunk_count.to_le_bytes());
        put(H_CHUNKS_OFFSET, &self.chunks_offset.to_le_bytes());
        put(H_META_OFFSET, &self.meta_offset.to_le_bytes());
        put(H_META_CAPACITY, &self.meta_capacity.to_le_bytes());
        put(H_START_TICK, &self.clock.start_tick.to_le_bytes());
        put(H_START_UNIX_NS, &self.clock.start_unix_ns.to_le_bytes());
        put(H_CALIB_TICKS, &self.clock.calib_ticks.to_le_bytes());
        put(H_CALIB_NS, &self.clock.calib_ns.to_le_bytes());
        put(H_END_TICK, &self.end_tick.unwrap_or(0).to_le_bytes());
        put(H_END_UNIX_NS, &self.end_unix_ns.to_le_bytes());
        put(H_NEXT_SEQ, &self.next_seq.to_le_bytes());
        put(H_DROPPED_EVENTS, &self.dropped_events.to_le_bytes());
        put(H_DROPPED_CHUNKS, &self.dropped_chunks.to_le_bytes());
        put(H_META_LEN, &self.meta_len.to_le_bytes());
        put(H_META_DROPPED, &self.meta_dropped.to_le_bytes());
        put(H_CMDLINE_LEN, &(end as u32).to_le_bytes());
        put(H_CMDLINE, &self.cmdline.as_bytes()[..end]);
    }

    /// Decodes and checks a header. `file_len` is the real size of the file;
    /// nothing the header claims is trusted beyond it.
    pub fn decode(bytes: &[u8]) -> Result<Header, FormatError> {
        if bytes.len() < 8 || bytes[..8] != MAGIC {
            return Err(FormatError::NotATrace);
        }
        let u32_at = |at| {
            read_u32(bytes, at).ok_or(FormatError::TruncatedHeader {
                len: bytes.len() as u64,
            })
        };
        let u64_at = |at| {
            read_u64(bytes, at).ok_or(FormatError::TruncatedHeader {
                len: bytes.len() as u64,
            })
        };
        let version = u32_at(H_VERSION)?;
        if !(OLDEST_READ_VERSION..=NEWEST_READ_VERSION).contains(&version) {
            return Err(FormatError::UnsupportedVersion(version));
        }
        if bytes.len() < HEADER_SIZE {
            return Err(FormatError::TruncatedHeader {
                len: bytes.len() as u64,
            });
        }
        let bad = |field: &'static str, offset: usize, why: String| FormatError::BadHeader {
            field,
            offset: offset as u64,
            why,
        };
        let header_size = u32_at(H_HEADER_SIZE)?;
        if header_size as usize != HEADER_SIZE {
            return Err(bad(
                "header_size",
                H_HEADER_SIZE,
                format!("{header_size}, expected {HEADER_SIZE}"),
            ));
        }
        let chunk_size = u32_at(H_CHUNK_SIZE)?;
        let chunk_count = u64_at(H_CHUNK_COUNT)?;
        // A version-4 state word counts committed bytes, not 16-byte units,
        // in the same bits: its chunks are smaller.
        let max_chunk = if version >= COMPACT_FORMAT_VERSION {
            COMPACT_MAX_CHUNK_SIZE
        } else {
            MAX_CHUNK_SIZE
        };
        if chunk_count > 0
            && (!(MIN_CHUNK_SIZE..=max_chunk).contains(&(chunk_size as usize))
                || !(chunk_size as usize).is_multiple_of(64))
        {
            return Err(bad(
                "chunk_size",
                H_CHUNK_SIZE,
                format!(
                    "{chunk_size} is not a multiple of 64 between {MIN_CHUNK_SIZE} and {max_chunk}"
                ),
            ));
        }
        let kind_code = read_u16(bytes, H_CLOCK_KIND).unwrap_or(u16::MAX);
        let kind = ClockKind::from_code(kind_code).ok_or_else(|| {
            bad(
                "clock_kind",
                H_CLOCK_KIND,
                format!("unknown clock kind {kind_code}"),
            )
        })?;
        let calib_ticks = u64_at(H_CALIB_TICKS)?;
        let calib_ns = u64_at(H_CALIB_NS)?;
        if calib_ticks == 0 || calib_ns == 0 {
            return Err(bad(
                "calibration",
                H_CALIB_TICKS,
                format!("{calib_ticks} ticks in {calib_ns} ns"),
            ));
        }
        let flags = u32_at(H_FLAGS)?;
        let cmdline_len = (u32_at(H_CMDLINE_LEN)? as usize).min(CMDLINE_MAX);
        let cmdline =
            String::from_utf8_lossy(&bytes[H_CMDLINE..H_CMDLINE + cmdline_len]).into_owned();
        let end_tick = u64_at(H_END_TICK)?;
        Ok(Header {
            version,
            flags,
            pid: u32_at(H_PID)?,
            chunk_size,
            clock: ClockInfo {
                kind,
                start_tick: u64_at(H_START_TICK)?,
                start_unix_ns: u64_at(H_START_UNIX_NS)?,
                calib_ticks,
                calib_ns,
            },
            preferred_clock: PreferredClock::from_code(
                read_u16(bytes, H_PREFERRED_CLOCK).unwrap_or(0),
            ),
            producer: Producer::from_code(read_u16(bytes, H_PRODUCER).unwrap_or(0)),
            chunk_count,
            chunks_offset: u64_at(H_CHUNKS_OFFSET)?,
            meta_offset: u64_at(H_META_OFFSET)?,
            meta_capacity: u64_at(H_META_CAPACITY)?,
            end_tick: (flags & FLAG_FINISHED != 0).then_some(end_tick),
            end_unix_ns: u64_at(H_END_UNIX_NS)?,
            next_seq: u64_at(H_NEXT_SEQ)?,
            dropped_events: u64_at(H_DROPPED_EVENTS)?,
            dropped_chunks: u64_at(H_DROPPED_CHUNKS)?,
            meta_len: u64_at(H_META_LEN)?,
            meta_dropped: u64_at(H_META_DROPPED)?,
            cmdline,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let mut h = Header::new(ClockInfo::nanoseconds(), 65536);
        h.pid = 77;
        h.flags = FLAG_FINISHED | FLAG_RING;
        h.end_tick = Some(999);
        h.chunk_count = 3;
        h.cmdline = "prog\0--flag\0x".into();
        h.preferred_clock = PreferredClock::Gil;
        h.producer = Producer::Python;
        h.dropped_events = 5;
        let back = Header::decode(&h.encode()).expect("decodes");
        assert_eq!(back, h);
        assert_eq!(back.args(), vec!["prog", "--flag", "x"]);
    }

    #[test]
    fn a_header_encoded_over_another_is_its_own_bytes() {
        // A reused file's header is rewritten in place: nothing of the
        // last one (a longer command line, its fields) may remain.
        let mut long = Header::new(ClockInfo::nanoseconds(), 65536);
        long.cmdline = "x".repeat(CMDLINE_MAX + 10);
        long.dropped_events = u64::MAX;
        long.end_tick = Some(u64::MAX);
        let mut short = Header::new(ClockInfo::nanoseconds(), 4096);
        short.cmdline = "prog\0-v".into();
        let mut b = [0xAAu8; HEADER_SIZE];
        long.encode_into(&mut b);
        short.encode_into(&mut b);
        assert_eq!(b.as_slice(), short.encode().as_slice());
        assert_eq!(Header::decode(&b).expect("decodes"), short);
    }

    #[test]
    fn an_unknown_producer_reads_as_unspecified() {
        let mut b = Header::new(ClockInfo::nanoseconds(), 65536).encode();
        b[H_PRODUCER..H_PRODUCER + 2].copy_from_slice(&99u16.to_le_bytes());
        let header = Header::decode(&b).expect("decodes");
        assert_eq!(header.producer, Producer::Unspecified);
    }

    #[test]
    fn newer_version_is_a_clear_error() {
        let mut b = Header::new(ClockInfo::nanoseconds(), 65536).encode();
        b[H_VERSION..H_VERSION + 4].copy_from_slice(&7u32.to_le_bytes());
        let err = Header::decode(&b).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unsupported format version 7 (this build reads versions 1 to 4)"
        );
    }

    #[test]
    fn every_prefix_of_a_header_is_an_error_not_a_panic() {
        let b = Header::new(ClockInfo::nanoseconds(), 65536).encode();
        for cut in 0..HEADER_SIZE {
            assert!(Header::decode(&b[..cut]).is_err());
        }
    }
}

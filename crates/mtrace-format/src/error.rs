//! Errors of the reader. Every error names the byte offset it is about.

use crate::event::BadEvent;

/// The file cannot be read as a trace at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The first bytes are not the trace magic.
    #[error("not an mtrace trace (no MTRACE magic at byte 0)")]
    NotATrace,
    /// The version field names a version this build does not read.
    #[error("unsupported format version {0} (this build reads versions 1 to 4)")]
    UnsupportedVersion(u32),
    /// The file ends inside the header.
    #[error("file is cut short inside the header ({len} bytes)")]
    TruncatedHeader {
        /// The file's length.
        len: u64,
    },
    /// A header field holds a value no writer produces.
    #[error("bad header field `{field}` at byte {offset}: {why}")]
    BadHeader {
        /// The field's name.
        field: &'static str,
        /// Its offset in the file.
        offset: u64,
        /// What is wrong with it.
        why: String,
    },
}

/// One chunk (or part of one) could not be used; the rest of the trace is unaffected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("chunk {index} at byte {offset}: {kind}")]
pub struct ChunkProblem {
    /// The chunk's slot index.
    pub index: u64,
    /// File offset of the problem.
    pub offset: u64,
    /// What was wrong.
    pub kind: ChunkProblemKind,
}

/// What was wrong with a chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkProblemKind {
    /// The committed length is larger than the chunk body.
    #[error("committed length {0} exceeds the chunk body")]
    CommittedTooLong(usize),
    /// The body does not start with a valid snapshot record.
    #[error("bad snapshot record: {0}")]
    BadSnapshot(&'static str),
    /// An event could not be decoded; the events before it are kept.
    #[error("bad event: {0:?}")]
    BadEvent(BadEvent),
    /// The file ends inside the chunk; the events before the cut are kept.
    #[error("file ends inside the chunk")]
    Truncated,
    /// The chunk's thread id is 0, which no writer uses.
    #[error("thread id 0")]
    NoThread,
    /// A compact (version 4) event could not be decoded; the events before
    /// it are kept.
    #[error("bad compact event: {0}")]
    BadCompactEvent(CompactFault),
}

/// Why the bytes at an offset of a version-4 chunk are not a compact event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CompactFault {
    /// The kind or payload is one no writer produces (as for a 16-byte event).
    #[error("{0:?}")]
    Event(BadEvent),
    /// The event runs past the committed length (a writer commits whole
    /// events only) or past the end of the file.
    #[error("event runs past the committed length")]
    Cut,
    /// A long form's payload width code is not 0..=4.
    #[error("payload width code {0}")]
    BadWidth(u8),
    /// An exit of the innermost named frame when the chunk names none.
    #[error("exit of the innermost frame, but the chunk names no open frame")]
    ExitWithoutNamedFrame,
    /// The tick delta carries the tick past 60 bits.
    #[error("tick past 60 bits")]
    TickOverflow,
    /// The events end before the count the chunk's header gives
    /// (`events_plus_one`): the header or the body is damaged.
    #[error("the events end before the count in the chunk header")]
    FewerThanCounted,
}

//! Errors of the reader. Every error names the byte offset it is about.

use crate::event::BadEvent;

/// The file cannot be read as a trace at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The first bytes are not the trace magic.
    #[error("not an mtrace trace (no MTRACE magic at byte 0)")]
    NotATrace,
    /// The version field names a version this build does not read.
    #[error("unsupported format version {0} (this build reads versions 1 to 3)")]
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
}

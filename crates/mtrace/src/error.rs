//! Errors of the recorder. None of them stops the workload: a recording that
//! cannot start leaves the program running unprofiled.

use std::io;
use std::path::PathBuf;

use mtrace_format::layout::{COMPACT_MAX_CHUNK_SIZE, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE};

/// A configuration value is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `MTRACE_OUT` is not set (or empty).
    #[error("MTRACE_OUT is not set")]
    NoOutput,
    /// An environment variable holds a value that cannot be used.
    #[error("{variable}=`{value}`: expected {expected}")]
    BadValue {
        /// The variable's name.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// The chunk size is not a multiple of 64 in the format's range.
    #[error(
        "chunk size {0} is not a multiple of 64 between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE}"
    )]
    BadChunkSize(usize),
    /// The chunk size is above what a compact (version 4) chunk's state
    /// word counts.
    #[error(
        "chunk size {0} is above {COMPACT_MAX_CHUNK_SIZE}, the largest chunk of compact events (format 4); use smaller chunks, or 16-byte events (MTRACE_FORMAT=3)"
    )]
    ChunkTooLargeForFormat(usize),
    /// The capacity does not hold a single chunk.
    #[error("capacity {capacity} bytes holds no chunk of {chunk_size} bytes")]
    CapacityTooSmall {
        /// The configured capacity.
        capacity: u64,
        /// The configured chunk size.
        chunk_size: usize,
    },
    /// A ring is one fixed file: it cannot rotate.
    #[error("a ring-mode recording cannot rotate (rotation is for stop-when-full files)")]
    RotatingRing,
    /// A recording into memory has no file to move on from.
    #[error("a recording into memory cannot rotate (rotation is for files)")]
    RotatingMemory,
    /// Each file of a rotating series names every function it may see.
    #[error("a rotating recording names every function in each file: it cannot name them on use")]
    NamesOnUseRotating,
    /// Rotation at a size smaller than a chunk.
    #[error("rotation at {bytes} bytes holds no chunk of {chunk_size} bytes")]
    RotationTooSmall {
        /// The configured rotation size.
        bytes: u64,
        /// The configured chunk size.
        chunk_size: usize,
    },
    /// A rotating series asked to keep no file.
    #[error("a rotating series must keep at least one file")]
    KeepNothing,
}

/// Why [`crate::start`] did not start a recording.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another recording is running; finish it first.
    #[error("a recording to {} is already running", running.display())]
    AlreadyRecording {
        /// The running recording's file.
        running: PathBuf,
    },
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The trace file could not be created or sized.
    #[error("cannot create trace file {}: {source}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The file system has no room for the trace file's first step (its
    /// header, metadata region and first chunks; a ring's whole file).
    #[error("no space for a {bytes}-byte trace file at {}", path.display())]
    NoSpace {
        /// The file.
        path: PathBuf,
        /// The size that did not fit.
        bytes: u64,
    },
    /// The address range for the file at its maximum size could not be
    /// reserved (a capacity beyond what the address space holds).
    #[error("cannot reserve {bytes} bytes of address space for trace file {}: {source}", path.display())]
    Reserve {
        /// The file.
        path: PathBuf,
        /// The size of the range.
        bytes: u64,
        /// What the system said.
        source: io::Error,
    },
    /// The trace file could not be memory-mapped.
    #[error("cannot map trace file {}: {source}", path.display())]
    Map {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
}

/// Why [`crate::Recording::finish`] could not complete the file.
#[derive(Debug, thiserror::Error)]
pub enum FinishError {
    /// The recording was already finished (by the process-exit hook).
    #[error("the recording was already finished")]
    AlreadyFinished,
    /// This process is a `fork` of the one recording: the file belongs to the
    /// parent and is left alone.
    #[error("the recording belongs to the parent process (this is a forked child)")]
    OtherProcess,
}

/// Why [`crate::adopt_open_frames`] left the calling thread as it was, or
/// [`crate::adopt_thread_frames`] wrote nothing for another thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdoptError {
    /// No recording runs (none started, or it is paused), or the thread
    /// is exiting: there is no stream to start.
    #[error("no recording runs on this thread")]
    NotRecording,
    /// The thread already recorded in this recording (or in an earlier
    /// file of its rotating series), or its frames were adopted already:
    /// its stream has begun, and frames it never entered there cannot be
    /// put under it.
    #[error("the thread has already recorded in this recording")]
    AlreadyRecorded,
    /// [`crate::adopt_thread_frames`] in a later file of a rotating
    /// series: the threads bound to earlier files move to it unseen, so
    /// which of them has a stream there is not known.
    #[error("the recording has rotated past its first file: another thread's frames are adopted only there")]
    Rotated,
    /// [`crate::adopt_thread_frames`] of thread id 0, which names no
    /// thread (the recorder knows no thread's id on this system).
    #[error("thread id 0 names no operating-system thread")]
    UnknownThread,
    /// The trace had no chunk left for the adopted thread's first one
    /// (the file is full, or, in a ring, every slot tried was busy).
    #[error("the trace has no room for the thread's first chunk")]
    Full,
}

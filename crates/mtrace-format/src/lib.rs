//! The mtrace trace format: the contract between the recorder and the analyzer.
//!
//! A trace is one file: a fixed [`Header`], a metadata region of
//! [`MetaRecord`]s (function, stack and thread names, marks; the log goes
//! on in metadata segments, chunk slots the region links to), and a ring
//! of fixed-size chunks. Each chunk belongs to one thread, starts with a
//! [`chunk::SnapshotRef`] of the frames open when it was claimed, and holds
//! 16-byte [`Event`]s up to a committed length. `schemas/trace-format.md`
//! documents every byte; [`layout`] holds the numbers.
//!
//! * Writing from explicit values: [`TraceWriter`].
//! * Reading (zero-copy, never trusting a claimed size): [`TraceFile`].
//! * The recorder writes the same layout live into a memory map using
//!   [`layout`], [`chunk::encode_snapshot`] and the event encoders.
//! * Format version 4's compact events (what the recorder writes by
//!   default): [`compact`]; [`TraceFile`] and [`Chunk::events`] read them, and
//!   [`convert`] re-encodes a whole trace either way.
#![deny(missing_docs)]

pub mod chunk;
pub mod clock;
pub mod compact;
pub mod convert;
pub mod error;
pub mod event;
pub mod header;
#[allow(missing_docs)]
pub mod layout;
pub mod meta;
pub mod reader;
pub mod snapshot;
pub mod writer;

pub use chunk::{Chunk, ChunkEvents, SnapshotRef};
pub use clock::{ClockInfo, ClockKind, PreferredClock, TickScale};
pub use error::{ChunkProblem, ChunkProblemKind, CompactFault, FormatError};
pub use event::{BadEvent, Event, EventKind, FunctionId, StackId, ThreadId};
pub use header::{Header, Producer};
pub use meta::{FunctionMeta, MetaRecord, MetaRecordRef, StackKind};
pub use reader::TraceFile;
pub use writer::{TraceWriter, WriteError, WriterOptions};

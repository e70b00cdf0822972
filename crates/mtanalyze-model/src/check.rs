//! What `check` finds in a trace file, chunk by chunk, without replaying it
//! (computed by `mtanalyze-engine`'s `analysis::check`).

use serde::{Deserialize, Serialize};

use crate::marks::Mark;
use crate::report::{ThreadSummary, Warning};

/// A chunk that could not be used, with where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkIssue {
    /// Slot index.
    pub index: u64,
    /// Byte offset of the problem.
    pub offset: u64,
    /// What was wrong.
    pub problem: String,
}

/// What a trace file holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    /// The file.
    pub source: String,
    /// `binary`, `jsonl` or `chrome`.
    pub input_format: String,
    /// Binary format version.
    pub format_version: u32,
    /// The recorder finished the file.
    pub finished: bool,
    /// Ring (flight recorder) mode.
    pub ring: bool,
    /// Recorded process id.
    pub pid: u32,
    /// Recorded command line.
    pub cmdline: Vec<String>,
    /// `tsc` or `ns`.
    pub clock_source: String,
    /// Calibration: ticks ...
    pub calib_ticks: u64,
    /// ... in this many ns.
    pub calib_ns: u64,
    /// Ticks per second.
    pub ticks_per_second: u64,
    /// Date of time zero (ns since the Unix epoch).
    pub start_unix_ns: u64,
    /// Trace length from the first event to the end, ns.
    pub duration_ns: u64,
    /// Chunk size in bytes.
    pub chunk_size: u32,
    /// Chunk slots the header claims.
    pub chunk_slots: u64,
    /// Slots that are physically in the file.
    pub chunk_slots_in_file: u64,
    /// Chunks holding events.
    pub chunks_used: u64,
    /// Slots never used.
    pub chunks_empty: u64,
    /// Chunks missing from threads' sequences (overwritten by the ring, or lost).
    pub chunks_lost: u64,
    /// Chunks skipped as damaged, by offset.
    pub chunks_damaged: Vec<ChunkIssue>,
    /// Chunks cut short by the end of the file, or by a damaged compact
    /// event that the decode found counting a chunk's events (a chunk whose
    /// header gives its count, like a 16-byte one, has its damaged events
    /// found by the passes: `damaged_event` in the warnings).
    pub chunks_cut: Vec<ChunkIssue>,
    /// Chunks a writer still owned (the recorder was killed or is running).
    pub chunks_unreleased: u64,
    /// Events decoded.
    pub events: u64,
    /// Events the recorder dropped (file full).
    pub dropped_events: u64,
    /// Chunk claims the recorder refused or skipped.
    pub dropped_chunks: u64,
    /// Metadata records read.
    pub metadata_records: u64,
    /// Metadata records the recorder could not store.
    pub metadata_dropped: u64,
    /// Damage in the metadata region.
    pub metadata_problem: Option<String>,
    /// Threads.
    pub threads: Vec<ThreadSummary>,
    /// Distinct stacks.
    pub stacks: u64,
    /// The marks the program recorded, in time order.
    #[serde(default)]
    pub marks: Vec<Mark>,
    /// Warnings.
    pub warnings: Vec<Warning>,
}

//! The event counts compact chunks carry in their headers
//! (`events_plus_one`, `schemas/trace-format.md`): which chunks have one
//! the decode takes, and a file without them, as a writer that stores
//! none leaves it (the decode then walks every chunk to count its events).
//! Bytes in, bytes out: `mtanalyze`'s own unit tests use them too.

use mtrace_format::layout::C_EVENTS_PLUS_ONE;
use mtrace_format::TraceFile;

/// How many chunks of the trace `bytes` carry a count their events can
/// stand for (`Chunk::released_count`).
pub fn released_counts(bytes: &[u8]) -> usize {
    let file = TraceFile::parse(bytes).expect("parses");
    (0..file.chunk_slots())
        .filter_map(|i| file.chunk(i).ok().flatten())
        .filter(|c| c.released_count().is_some())
        .count()
}

/// The trace `bytes` with no chunk's count in its header.
pub fn without_released_counts(bytes: &[u8]) -> Vec<u8> {
    let file = TraceFile::parse(bytes).expect("parses");
    let chunks: Vec<usize> = (0..file.chunk_slots())
        .filter_map(|i| file.chunk(i).ok().flatten())
        .map(|c| c.offset as usize)
        .collect();
    let mut out = bytes.to_vec();
    for at in chunks {
        let at = at + C_EVENTS_PLUS_ONE;
        out[at..at + 4].fill(0);
    }
    out
}

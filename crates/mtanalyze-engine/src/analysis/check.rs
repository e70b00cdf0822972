//! `check`: what a trace file holds, chunk by chunk, from the stages every
//! command shares (decode and the segment pass), without replaying a stack.

use crate::analysis::marks::to_marks;
use crate::analysis::prepare::{decode_for, prepare, Fuse};
use crate::analysis::stacks::group_by_stack;
use crate::analysis::AnalyzeError;
use crate::input::LoadedTrace;
use mtanalyze_model::check::{CheckReport, ChunkIssue};

/// Describes a trace without replaying it.
pub fn check(trace: &LoadedTrace) -> Result<CheckReport, AnalyzeError> {
    let decoding = decode_for(trace, None, None)?;
    let mut prep = prepare(trace, decoding, None, Fuse::No, &mut |_| {})?;
    let marks = to_marks(std::mem::take(&mut prep.decoded.marks), prep.decoded.scale);
    let stacks = group_by_stack(&prep.passes, &prep.decoded.threads).1.len() as u64;
    let h = prep.decoded.file.header();
    let summary = prep.summary(trace, stacks);
    let issue = |p: &mtrace_format::ChunkProblem| ChunkIssue {
        index: p.index,
        offset: p.offset,
        problem: p.kind.to_string(),
    };
    let chunks = &prep.decoded.threads;
    Ok(CheckReport {
        source: trace.source.clone(),
        input_format: trace.format.name().to_owned(),
        format_version: h.version,
        finished: h.finished(),
        ring: h.ring(),
        pid: h.pid,
        cmdline: summary.cmdline.clone(),
        clock_source: summary.clock_source.clone(),
        calib_ticks: h.clock.calib_ticks,
        calib_ns: h.clock.calib_ns,
        ticks_per_second: summary.ticks_per_second,
        start_unix_ns: h.clock.start_unix_ns,
        duration_ns: summary.duration_ns,
        chunk_size: h.chunk_size,
        chunk_slots: h.chunk_count,
        chunk_slots_in_file: prep.decoded.file.chunk_slots(),
        chunks_used: summary.chunks,
        chunks_empty: prep.decoded.empty_slots,
        chunks_lost: prep.decoded.lost,
        chunks_damaged: prep.decoded.damaged.iter().map(issue).collect(),
        chunks_cut: prep.decoded.cut.iter().map(issue).collect(),
        chunks_unreleased: chunks
            .iter()
            .flat_map(|t| &t.chunks)
            .filter(|c| c.writing)
            .count() as u64,
        events: summary.events,
        dropped_events: h.dropped_events,
        dropped_chunks: h.dropped_chunks,
        metadata_records: prep.decoded.meta_records,
        metadata_dropped: h.meta_dropped,
        metadata_problem: prep
            .decoded
            .meta_problem
            .as_ref()
            .map(|m| format!("byte {}: {}", m.offset, m.why)),
        threads: summary.threads,
        stacks,
        marks,
        warnings: prep.warnings.to_report(),
    })
}

//! What the fuzz targets run: every entry point that reads untrusted bytes,
//! the way `mtanalyze` runs them, with the invariants that must hold for
//! any input checked as assertions (a failed assertion is a crash the
//! fuzzer reports, like a panic inside the analyzer).
//!
//! * [`format`]: `mtrace_format::TraceFile` directly: the header, every
//!   chunk slot in the file (snapshot, events), slots outside the file, and
//!   the metadata region.
//! * [`analyzer`]: `mtanalyze::from_bytes`, then `analyze` with each
//!   of the three clocks (and each call-path mode), `check`, `diff`, and
//!   every renderer and export the command has (tables, JSON, callgrind,
//!   folded stacks, flame graphs, the Chrome and speedscope timelines),
//!   writing to a sink.
#![deny(missing_docs)]

use std::io::sink;

use mtanalyze::RecursionCollapse;
use mtanalyze::Timelines;
use mtanalyze::view::{self, EdgeSelection, SortKey, ViewOptions};
use mtanalyze::{render, AnalyzeOptions, Clock, PathMode};
use mtrace_format::layout::{EVENT_SIZE, HEADER_SIZE, META_ALIGN};
use mtrace_format::TraceFile;

/// Reads `data` with the format crate alone.
pub fn format(data: &[u8]) {
    let Ok(file) = TraceFile::parse(data) else {
        return;
    };
    let h = file.header().clone();
    let _ = h.args();
    let _ = h.clock.ticks_to_ns(u64::MAX);
    let _ = h.clock.ticks_per_second();
    let slots = file.chunk_slots();
    assert!(slots <= h.chunk_count, "more slots than the header claims");
    // Only slots that start inside the file are visited, however many are claimed.
    let room = (data.len() as u64).saturating_sub(HEADER_SIZE as u64);
    assert!(
        slots.saturating_sub(1).saturating_mul(h.chunk_size as u64) <= room,
        "{slots} slots of {} bytes in a {}-byte file",
        h.chunk_size,
        data.len()
    );
    assert_eq!(file.missing_slots(), h.chunk_count - slots);
    let mut events = 0usize;
    for i in 0..slots {
        let Ok(Some(c)) = file.chunk(i) else { continue };
        assert!(c.event_bytes().len() <= h.chunk_size as usize);
        let _ = c.snapshot.own_frames().count() + c.snapshot.stack_frames().count();
        let _ = c.snapshot.encoded_len();
        for e in c.events() {
            if e.is_err() {
                break;
            }
            events += 1;
        }
        // Any start position is a slice, never a panic.
        let _ = c.events_from(c.event_count() / 2).count();
        let _ = c.events_from(usize::MAX).count();
    }
    assert!(events <= data.len() / EVENT_SIZE);
    // Slots the file does not hold are errors, not panics.
    for i in [
        slots,
        h.chunk_count,
        h.chunk_count.wrapping_add(1),
        u64::MAX,
    ] {
        assert!(file.chunk(i).is_err(), "slot {i} outside the file decoded");
    }
    let (records, _) = file.metadata();
    assert!(records.len() <= data.len() / META_ALIGN);
}

/// Loads `data` as `mtanalyze` would a file and runs every command on it.
pub fn analyzer(data: &[u8]) {
    let Ok(trace) = mtanalyze::from_bytes("fuzz", data.to_vec()) else {
        return;
    };
    // The converted JSON lines are a binary trace too.
    format(trace.bytes());
    let view = ViewOptions {
        sort: SortKey::Tottime,
        limit: Some(20),
        filter: None,
    };
    let mut reports = Vec::new();
    for (clock, paths, collapse) in [
        (Clock::Stack, PathMode::PerStack, None),
        (Clock::Gil, PathMode::Merged, Some(RecursionCollapse::All)),
        (Clock::Wall, PathMode::Off, None),
    ] {
        let options = AnalyzeOptions {
            clock: Some(clock),
            paths,
            collapse_recursion: collapse,
            ..AnalyzeOptions::default()
        };
        let Ok(report) = mtanalyze::analyze(&trace, &options) else {
            continue;
        };
        let out = &mut sink();
        render::table::header(out, &report).unwrap();
        let rows = view::function_rows(&report, &view);
        render::table::functions(out, &rows, report.functions.len()).unwrap();
        let stacks = view::stack_rows(&report, Some(SortKey::Paused), Some(20));
        render::table::stacks(out, &stacks, report.stacks.len()).unwrap();
        let groups = view::stack_groups(&report, Some(SortKey::Ncalls));
        render::table::stack_groups(out, &groups, groups.len()).unwrap();
        let edges = EdgeSelection {
            callers_of: None,
            callees_of: None,
        };
        render::json::report(out, &view::filtered_report(&report, &view, &edges)).unwrap();
        let _ = render::warnings_summary(&report.warnings);
        reports.push(report);
    }
    // With call paths off, the segment pass replays own stacks itself; its
    // numbers must be the replay pass's (the `stack` report above has paths).
    if let (Some(replayed), Ok(mut fused)) = (
        reports.first().filter(|r| r.clock == Clock::Stack),
        mtanalyze::analyze(
            &trace,
            &AnalyzeOptions {
                clock: Some(Clock::Stack),
                ..AnalyzeOptions::default()
            },
        ),
    ) {
        let mut replayed = replayed.clone();
        replayed.paths.clear();
        fused.paths.clear();
        assert!(
            fused == replayed,
            "own stacks replayed by the segment pass differ"
        );
    }
    if let [stack, gil, wall] = &reports[..] {
        let d = mtanalyze::diff(stack, wall, Default::default());
        render::diff::json(&mut sink(), &d).unwrap();
        // The other exports of a report: callgrind, folded stacks, flame graphs.
        render::callgrind::callgrind(&mut sink(), wall).unwrap();
        let _ = render::folded::lines(gil, None);
        let _ = render::flamegraph::flamegraph(&mut sink(), gil, None);
    }
    // The timeline exports (`mtanalyze export`).
    if let Ok(t) = Timelines::new(&trace, &AnalyzeOptions::default()) {
        render::chrome::chrome(&mut sink(), &t, &mut |_| {}).unwrap();
        render::speedscope::speedscope(&mut sink(), &t, &mut |_| {}).unwrap();
    }
    if let Ok(check) = mtanalyze::check(&trace) {
        render::check::human(&mut sink(), &check).unwrap();
        render::json::check(&mut sink(), &check).unwrap();
    }
}

//! What the fuzz targets run: every entry point that reads untrusted bytes,
//! the way `mtanalyze` runs them, with the invariants that must hold for
//! any input checked as assertions (a failed assertion is a crash the
//! fuzzer reports, like a panic inside the analyzer).
//!
//! * [`format`]: `mtrace_format::TraceFile` directly: the header, every
//!   chunk slot in the file (snapshot, events of either encoding), slots
//!   outside the file, the metadata log (its region and the segments its
//!   next-segment records lead to, wherever they point), and the same events read back
//!   from the file converted to the other encoding (version 4's compact
//!   events, or 16-byte ones from a version-4 file).
//! * [`analyzer`]: `mtanalyze::from_bytes`, then `analyze` with each
//!   of the three clocks (and each call-path mode), `check`, `marks`, `diff`, and
//!   every renderer and export the command has (tables, JSON, callgrind,
//!   folded stacks, flame graphs, the Chrome and speedscope timelines),
//!   writing to a sink.
#![deny(missing_docs)]

use std::io::sink;

use mtanalyze::timeline::Timelines;
use mtanalyze::view::{self, EdgeSelection, SortKey, ViewOptions};
use mtanalyze::RecursionCollapse;
use mtanalyze::{render, report::Clock, AnalyzeOptions, PathMode};
use mtrace_format::event::MAX_TICK;
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
    // A compact event takes at least one byte, a 16-byte one sixteen.
    let smallest = if file.is_compact() { 1 } else { EVENT_SIZE };
    assert!(events <= data.len() / smallest);
    // Slots the file does not hold are errors, not panics. The slot past
    // the claimed count only exists below u64::MAX: a header may claim
    // u64::MAX slots, and wrapping around would name slot 0, a real one.
    for i in [
        Some(slots),
        Some(h.chunk_count),
        h.chunk_count.checked_add(1),
        Some(u64::MAX),
    ]
    .into_iter()
    .flatten()
    {
        assert!(file.chunk(i).is_err(), "slot {i} outside the file decoded");
    }
    let (records, _) = file.metadata();
    assert!(records.len() <= data.len() / META_ALIGN);
    encodings_agree(&file);
}

/// Every slot's events up to its first damage, in slot order.
fn events_by_slot(file: &TraceFile<'_>) -> Vec<Vec<mtrace_format::Event>> {
    (0..file.chunk_slots())
        .map(|i| match file.chunk(i) {
            Ok(Some(c)) => c.events().map_while(Result::ok).collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The other encoding of `file` (compact for 16-byte events, 16-byte for
/// compact ones, `mtrace_format::convert`) holds the same events: what
/// was salvaged from each slot, and nothing else. An image (16-byte events
/// expanded from compact ones) is at most 16 times its file, plus the file.
fn encodings_agree(file: &TraceFile<'_>) {
    let converted = if file.is_compact() {
        mtrace_format::convert::expand(file)
    } else {
        mtrace_format::convert::compact(file)
    };
    // A 16-byte chunk near 64 MiB may not fit 8 MiB of compact events.
    let Ok(converted) = converted else { return };
    let len = file.bytes().len();
    assert!(converted.bytes.len() <= len.saturating_mul(17) + 2 * HEADER_SIZE);
    let other = TraceFile::parse(&converted.bytes).expect("a converted trace parses");
    assert_ne!(other.is_compact(), file.is_compact());
    let mut want = events_by_slot(file);
    let got = events_by_slot(&other);
    if !file.is_compact() {
        for (i, events) in want.iter_mut().enumerate() {
            // Nothing after a `lost` is kept in compact chunks.
            if let Some(at) = events
                .iter()
                .position(|e| e.kind == mtrace_format::EventKind::Lost)
            {
                events.truncate(at + 1);
            }
            // A compact chunk's ticks never go down from its snapshot's: a
            // 16-byte event's tick below the one before is stored as that
            // one, the tick a reader of the 16-byte chunk clamps it to.
            if let Ok(Some(chunk)) = file.chunk(i as u64) {
                let mut floor = chunk.snapshot.tick & MAX_TICK;
                for e in events.iter_mut() {
                    e.tick = e.tick.max(floor);
                    floor = e.tick;
                }
            }
        }
    }
    assert_eq!(want, got, "the events of the other encoding differ");
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
        // Full width and a narrow terminal's (names and paths shortened).
        let width = [None, Some(40)][reports.len() % 2];
        render::table::header(out, &report, width).unwrap();
        let rows = view::function_rows(&report, &view);
        render::table::functions(
            out,
            &rows,
            report.functions.len(),
            width,
            Some(render::table::Wakes::of(&report.trace)),
        )
        .unwrap();
        render::table::ends_line(out, &report).unwrap();
        let stacks = view::stack_rows(&report, Some(SortKey::Paused), Some(20));
        render::table::stacks(
            out,
            &stacks,
            report.stacks.len(),
            width,
            render::table::Wakes::of(&report.trace),
        )
        .unwrap();
        let groups = view::stack_groups(&report, Some(SortKey::Ncalls));
        render::table::stack_groups(
            out,
            &groups,
            groups.len(),
            width,
            render::table::Wakes::of(&report.trace),
        )
        .unwrap();
        let edges = EdgeSelection {
            callers_of: None,
            callees_of: None,
        };
        render::json::report(out, &view::filtered_report(&report, &view, &edges)).unwrap();
        // The JSON writer formats stack rows by hand, in parallel batches:
        // byte for byte what serde_json writes, whatever the names hold.
        let whole = view::ReportView::from(&report);
        let mut written = Vec::new();
        render::json::report(&mut written, &whole).unwrap();
        let mut expected = serde_json::to_vec_pretty(&whole).unwrap();
        expected.push(b'\n');
        assert!(
            written == expected,
            "the JSON writer differs from serde_json"
        );
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
    // The streamed analysis in steps of a chunk, where it streams at all,
    // gives the batch analysis's report, with call paths (merged, or per
    // stack with recursion collapsed) and without, and with a selection
    // of stacks, by stack and by thread.
    for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
        let options = AnalyzeOptions {
            clock: Some(clock),
            ..AnalyzeOptions::default()
        };
        let selection = vec!["thread:1".to_owned(), "stack:2".to_owned()];
        let variants = [
            (PathMode::Off, None, Vec::new(), Vec::new()),
            (PathMode::Merged, None, Vec::new(), Vec::new()),
            (PathMode::PerStack, Some(RecursionCollapse::Direct), Vec::new(), Vec::new()),
            (PathMode::Off, None, selection, Vec::new()),
            (PathMode::Off, None, Vec::new(), vec![2]),
        ];
        for (paths, collapse_recursion, stacks, threads) in variants {
            let options = AnalyzeOptions {
                paths,
                collapse_recursion,
                stacks,
                threads,
                ..options.clone()
            };
            if let (Ok(Some(streamed)), Ok(batch)) = (
                mtanalyze::testing::analyze_streamed_with(&trace, &options, 1),
                mtanalyze::testing::analyze_batched(&trace, &options),
            ) {
                assert!(streamed == batch, "the streamed analysis differs");
            }
        }
        // `--format json`: the rows handed as stacks finish, sorted on
        // disk a few at a time, give the batch report's JSON.
        let mut sorted = view::SortedRows::with_max_runs(1000, 2);
        if let (Ok(handed), Ok(batch)) = (
            mtanalyze::testing::analyze_with_sink_streamed(&trace, &options, 1, &mut sorted),
            mtanalyze::testing::analyze_batched(&trace, &options),
        ) {
            let mut written = Vec::new();
            let rows = sorted.into_sorted().unwrap();
            let handed = view::ReportView::from(&handed);
            render::json::report_with_rows(&mut written, &handed, rows).unwrap();
            let mut expected = Vec::new();
            render::json::report(&mut expected, &view::ReportView::from(&batch)).unwrap();
            assert!(
                written == expected,
                "the JSON of rows sorted on disk differs"
            );
        }
    }
    // Time windows split any trace, damaged or not, exactly: the halves
    // [0, m) and [m, end) sum to the whole in every function's totals, and
    // a window draws its timelines too.
    if let Some(whole) = reports.first() {
        windows_add_up(&trace, whole);
    }
    // Which stacks ended is a fact of the trace: only logical stacks end,
    // and the same ones under every clock.
    for r in &reports {
        assert!(
            r.stacks
                .iter()
                .all(|s| !s.ended || matches!(s.id, mtanalyze::report::StackKey::Logical(_))),
            "an own stack ended"
        );
        assert!(
            ended(r) == reports.first().map(ended).unwrap_or_default(),
            "the clocks disagree on which stacks ended"
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
        // The marks read without analyzing are the ones check lists.
        if let Ok(marks) = mtanalyze::marks(&trace) {
            assert!(marks == check.marks, "marks() and check disagree");
            if let Some(report) = reports.first() {
                assert!(report.marks == marks, "marks() and the report disagree");
            }
        }
    }
}

/// The stacks whose life ended at an `end` event.
fn ended(r: &mtanalyze::Report) -> Vec<mtanalyze::report::StackKey> {
    r.stacks.iter().filter(|s| s.ended).map(|s| s.id).collect()
}

/// The functions' sums (`FunctionStats::sums`) by identity, rows of zeros
/// left out.
fn function_sums(
    r: &mtanalyze::Report,
) -> std::collections::BTreeMap<String, mtanalyze::report::FunctionSums> {
    let mut m = std::collections::BTreeMap::<String, mtanalyze::report::FunctionSums>::new();
    for f in &r.functions {
        m.entry(format!("{:?}", f.key()))
            .or_default()
            .add(&f.sums());
    }
    m.retain(|_, v| *v != mtanalyze::report::FunctionSums::default());
    m
}

/// `whole` (the `stack` clock, all of `trace`) is the sum of the windows
/// before and after the middle of the trace.
fn windows_add_up(trace: &mtanalyze::LoadedTrace, whole: &mtanalyze::Report) {
    let middle = whole.trace.end_ns / 2;
    let window = |from: Option<u64>, to: Option<u64>| AnalyzeOptions {
        clock: Some(whole.clock),
        from: from.map(mtanalyze::TimeBound::At),
        to: to.map(mtanalyze::TimeBound::At),
        ..AnalyzeOptions::default()
    };
    let (Ok(a), Ok(b)) = (
        mtanalyze::analyze(trace, &window(None, Some(middle))),
        mtanalyze::analyze(trace, &window(Some(middle), None)),
    ) else {
        panic!("a window of a trace that analyzes failed");
    };
    let mut sum = function_sums(&a);
    for (k, v) in function_sums(&b) {
        sum.entry(k).or_default().add(&v);
    }
    // Saturated sums (counts the file claims) cannot be compared.
    let saturated = |m: &std::collections::BTreeMap<String, mtanalyze::report::FunctionSums>| {
        m.values()
            .flat_map(|v| v.fields())
            .any(|(_, x)| x > u64::MAX / 4)
    };
    // A stack that ran on two threads at once (broken input) can run
    // longer than it was open: its frames' paused time is then held at 0
    // (`semantics.md`, "Time windows"), which does not split.
    let overlapped = whole
        .warnings
        .iter()
        .any(|w| w.kind == mtanalyze::WarningKind::StackOnTwoThreads.name());
    if !saturated(&sum) && !overlapped {
        assert!(
            sum == function_sums(whole),
            "windows [0, {middle}) and [{middle}, end) do not add up to the whole"
        );
    }
    // A window does not change which stacks ended.
    for s in a.stacks.iter().chain(&b.stacks) {
        assert!(
            s.ended == ended(whole).contains(&s.id),
            "a window changed whether {} ended",
            s.id
        );
    }
    if let Ok(t) = Timelines::new(trace, &window(Some(middle / 2), Some(middle))) {
        render::chrome::chrome(&mut sink(), &t, &mut |_| {}).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use mtrace_format::layout::{H_CHUNK_COUNT, MIN_CHUNK_SIZE};
    use mtrace_format::{EventKind, StackId, ThreadId, TraceWriter, WriterOptions};

    use super::*;

    /// A small valid trace (two threads handing a task over, in 1 KiB
    /// chunks) whose header then claims `u64::MAX` chunk slots: the file
    /// `crates/mtanalyze/tests/regressions/chunk-count-max.bin`.
    fn claims_u64_max_slots() -> Vec<u8> {
        let options = WriterOptions {
            chunk_size: MIN_CHUNK_SIZE,
            ..Default::default()
        };
        let mut w = TraceWriter::new(Cursor::new(Vec::new()), options).unwrap();
        let (f, g) = (w.function("f", "", 0, ""), w.function("g", "", 0, ""));
        let task = w.stack("task");
        let mut now = 0;
        for round in 0..50u64 {
            let t = ThreadId(1 + round % 2);
            for kind in [
                EventKind::Enter(f),
                EventKind::Switch(task),
                EventKind::Enter(g),
                EventKind::Exit(g),
                EventKind::Switch(StackId::OWN),
                EventKind::Exit(f),
            ] {
                now += 10;
                w.event(t, now, kind).unwrap();
            }
        }
        let mut bytes = w.finish(None).unwrap().into_inner();
        bytes[H_CHUNK_COUNT..H_CHUNK_COUNT + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        bytes
    }

    /// Slot `chunk_count + 1` wraps to slot 0 when the header claims
    /// `u64::MAX` slots; slot 0 is in the file and decodes, which is right.
    #[test]
    fn a_header_claiming_u64_max_slots_is_not_a_crash() {
        let data = claims_u64_max_slots();
        let file = TraceFile::parse(&data).expect("parses");
        assert_eq!(file.header().chunk_count, u64::MAX);
        assert!(file.chunk_slots() > 0);
        assert!(file.chunk(0).is_ok(), "slot 0 is a real slot");
        format(&data);
        analyzer(&data);
    }

    /// The committed regression input is the same file.
    #[test]
    fn the_regression_input_is_this_header() {
        let committed = include_bytes!("../../mtanalyze/tests/regressions/chunk-count-max.bin");
        assert_eq!(&committed[..], &claims_u64_max_slots()[..]);
    }

    /// A 16-byte chunk whose ticks go back (another core's clock): its
    /// compact twin stores the tick a reader clamps it to, which the
    /// harness's comparison of the encodings takes into account.
    #[test]
    fn a_tick_back_in_a_chunk_converts_to_the_clamped_tick() {
        let mut w = TraceWriter::new(Cursor::new(Vec::new()), WriterOptions::default()).unwrap();
        let f = w.function("f", "", 0, "");
        for (tick, kind) in [
            (100, EventKind::Enter(f)),
            (1 << 41, EventKind::Enter(f)),
            (120, EventKind::Exit(f)),
            (130, EventKind::Exit(f)),
        ] {
            w.event(ThreadId(1), tick, kind).unwrap();
        }
        let data = w.finish(None).unwrap().into_inner();
        format(&data);
        analyzer(&data);
        // The input the fuzzer found it with.
        format(include_bytes!(
            "../../mtanalyze/tests/regressions/tick-back-in-a-chunk.bin"
        ));
    }

    /// A compact chunk whose snapshot names a frame of id 0, which an exit
    /// then names: damage, where the chunk ends in both encodings.
    #[test]
    fn an_exit_of_a_snapshot_frame_of_id_0_ends_the_compact_chunk() {
        let data = include_bytes!("../../mtanalyze/tests/regressions/exit-of-frame-0.bin");
        format(data);
        analyzer(data);
    }
}

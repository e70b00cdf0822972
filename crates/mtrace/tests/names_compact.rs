//! Names in a compact trace (format version 4) never run out either: the
//! analyzer reads a compact file through a version-3 image whose chunk
//! slots are written anew, and the metadata segments, which live in the
//! file's chunk slots, are carried into it where they were. Thousands of
//! function and task names past the first region are all in the report.
//!
//! A test binary of its own: functions are registered once per process and
//! every later recording names them all at its start, so thousands of them
//! would crowd the names of `names.rs`'s small ring.

mod common;

use std::collections::HashSet;

use common::{serial, TempTrace};
use mtrace::{Config, Format, LogicalStack, Mode};
use mtrace_format::layout::SEGMENT_STATE;
use mtrace_format::TraceFile;

/// Runs `n` logical stacks named `task-<i>`, each calling `f` once, and
/// drops them (a task per request).
fn run_tasks(n: u64, f: mtrace::FunctionId) {
    for i in 0..n {
        let mut stack = LogicalStack::new(format!("task-{i}"));
        let _on = stack.enter();
        mtrace::enter(f);
        mtrace::exit(f);
    }
}

/// Slots of the trace `bytes` that hold metadata segments.
fn segment_slots(bytes: &[u8]) -> usize {
    let file = TraceFile::parse(bytes).unwrap();
    let h = file.header();
    (0..file.chunk_slots())
        .filter(|&i| {
            let at = (h.chunks_offset + i * h.chunk_size as u64) as usize;
            bytes[at..at + 8] == SEGMENT_STATE.to_le_bytes()
        })
        .count()
}

/// Compact events (format version 4) are read through a version-3 image
/// whose chunk slots are new: the segments, which live in the file's
/// chunk slots, must be in it too, or every name past the first region
/// is lost (`unknown_function` for each such function, and
/// `damaged_metadata` at the first segment). Thousands of function names
/// and task names, in a file that stops when full and in a ring, are all
/// in the analyzer's report, with no warning.
#[test]
fn a_compact_trace_keeps_every_name_past_the_first_region() {
    let _serial = serial();
    const FUNCTIONS: usize = 4000;
    const TASKS: u64 = 5000;
    for (case, mode) in [("stop-when-full", Mode::StopWhenFull), ("ring", Mode::Ring)] {
        let trace = TempTrace::new(&format!("names-compact-{case}"));
        // The default first region (32 KiB) and chunk size; a ring big
        // enough not to wrap, with room for its quarter of segments.
        let recording = mtrace::start(
            Config::new(trace.path())
                .format(Format::Compact)
                .mode(mode)
                .capacity(32 << 20),
        )
        .unwrap();
        let functions: Vec<_> = (0..FUNCTIONS)
            .map(|i| {
                let name = format!("compact_{case}_{i}");
                mtrace::register_function(&name, file!(), i as u32 + 1, module_path!())
            })
            .collect();
        for &f in &functions {
            mtrace::enter(f);
            mtrace::exit(f);
        }
        run_tasks(TASKS, functions[0]);
        let summary = recording.finish().unwrap();
        assert_eq!(summary.meta_dropped, 0, "{case}: {summary:?}");
        let bytes = std::fs::read(trace.path()).unwrap();
        let file = TraceFile::parse(&bytes).unwrap();
        assert!(file.is_compact(), "{case}");
        // The names overflowed the first region several times.
        let segments = segment_slots(&bytes);
        assert!(segments >= 4, "{case}: {segments} segments");
        drop(bytes);

        let loaded = mtanalyze::load(trace.path()).expect("load");
        let report =
            mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
        assert!(report.warnings.is_empty(), "{case}: {:?}", report.warnings);
        let prefix = format!("compact_{case}_");
        let named: HashSet<&str> = report
            .functions
            .iter()
            .map(|f| f.function.as_str())
            .filter(|n| n.starts_with(&prefix))
            .collect();
        assert_eq!(named.len(), FUNCTIONS, "{case}");
        let last = format!("{prefix}{}", FUNCTIONS - 1);
        assert!(named.contains(last.as_str()), "{case}");
        let tasks = report
            .stacks
            .iter()
            .filter(|s| s.name.starts_with("task-"))
            .count() as u64;
        assert_eq!(tasks, TASKS, "{case}");
    }
}

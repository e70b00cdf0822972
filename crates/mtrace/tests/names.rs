//! Names never run out: the metadata log starts in a small first region
//! and goes on in segments in chunk slots as the file grows, so a million
//! task names are all in the trace and in the analyzer's report, whether
//! the first region is the default or set small in code; a ring keeps its
//! names and its events; and a small trace is no larger on disk than about
//! twice what it holds.

mod common;

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;

use common::{decode, kill_child_at, serial, TempTrace};
use mtrace::{Config, Format, LogicalStack, Mode};
use mtrace_format::layout::{HEADER_SIZE, SEGMENT_STATE};
use mtrace_format::{MetaRecord, TraceFile};

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

/// The stack names the trace at `path` holds, read with the format crate.
fn stack_names(bytes: &[u8]) -> Vec<String> {
    let trace = TraceFile::parse(bytes).expect("parse");
    let mut names = Vec::new();
    let problem = trace.for_each_metadata(|r| {
        if let MetaRecord::Stack { name, .. } = r {
            names.push(name);
        }
    });
    assert_eq!(problem, None);
    names
}

#[test]
fn a_million_task_names_are_all_in_the_trace_and_the_report() {
    let _serial = serial();
    const TASKS: u64 = 1_000_000;
    // Set in code, and small: the first region is no cap.
    for (case, config) in [
        ("default", Config::new("")),
        ("small-first-region", Config::new("").meta_capacity(4096)),
    ] {
        let trace = TempTrace::new(&format!("names-million-{case}"));
        let config = Config {
            path: trace.path().to_owned(),
            ..config
        };
        let recording = mtrace::start(config).unwrap();
        let f = mtrace::register_function("handle", file!(), line!(), module_path!());
        run_tasks(TASKS, f);
        let summary = recording.finish().unwrap();
        assert_eq!(summary.meta_dropped, 0, "{case}: {summary:?}");
        let bytes = std::fs::read(trace.path()).unwrap();
        let names = stack_names(&bytes);
        let distinct: HashSet<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(distinct.len() as u64, TASKS, "{case}");
        assert!(distinct.contains("task-0") && distinct.contains("task-999999"));
        // The names went on in segments: chunk slots that every reader
        // of chunks sees as empty.
        let file = TraceFile::parse(&bytes).unwrap();
        assert!(file.header().meta_len <= file.header().meta_capacity);
        let segments = (0..file.chunk_slots())
            .filter(|&i| {
                let at =
                    (file.header().chunks_offset + i * file.header().chunk_size as u64) as usize;
                bytes[at..at + 8] == SEGMENT_STATE.to_le_bytes()
            })
            .count();
        assert!(segments > 100, "{case}: {segments} segments");
        for i in 0..file.chunk_slots() {
            let at = (file.header().chunks_offset + i * file.header().chunk_size as u64) as usize;
            if bytes[at..at + 8] == SEGMENT_STATE.to_le_bytes() {
                assert!(file.chunk(i).unwrap().is_none(), "segment slot {i}");
            }
        }
        drop(bytes);

        // The analyzer names every stack that ran.
        let loaded = mtanalyze::load(trace.path()).expect("load");
        let report =
            mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
        let named: HashSet<&str> = report
            .stacks
            .iter()
            .filter(|s| matches!(s.id, mtanalyze::report::StackKey::Logical(_)))
            .map(|s| s.name.as_ref())
            .filter(|n| n.starts_with("task-"))
            .collect();
        assert_eq!(named.len() as u64, TASKS, "{case}");
        assert!(
            !report.warnings.iter().any(|w| w.kind == "dropped_metadata"),
            "{case}: {:?}",
            report.warnings
        );
    }
}

/// In both event encodings (compact events take fewer bytes: more of them
/// wrap the ring as often); the analyzer names every task too.
#[test]
fn a_ring_keeps_its_names_and_passes_their_slots_by() {
    let _serial = serial();
    const CHUNK: usize = 4096;
    for (format, pairs) in [(Format::Fixed, 400_000), (Format::Compact, 3_000_000)] {
        let trace = TempTrace::new(&format!("names-ring-{format:?}"));
        let recording = mtrace::start(
            Config::new(trace.path())
                .format(format)
                .mode(Mode::Ring)
                .chunk_size(CHUNK)
                .capacity(4 << 20)
                .meta_capacity(4096),
        )
        .unwrap();
        let f = mtrace::register_function("spin", file!(), line!(), module_path!());
        // Names first (some 30 segments of 1024 slots), then enough events
        // to wrap the ring several times over.
        run_tasks(3000, f);
        for _ in 0..pairs {
            mtrace::enter(f);
            mtrace::exit(f);
        }
        let summary = recording.finish().unwrap();
        assert!(summary.wrapped, "{format:?}: {summary:?}");
        assert_eq!(summary.meta_dropped, 0, "{format:?}");
        // Passing a segment's slot by is no drop: one thread, no busy slot.
        assert_eq!(summary.dropped_chunks, 0, "{format:?}: {summary:?}");
        assert_eq!(summary.dropped_events, 0, "{format:?}: {summary:?}");
        let d = decode(trace.path());
        for i in [0, 1500, 2999] {
            assert!(
                d.stacks.values().any(|n| *n == format!("task-{i}")),
                "{format:?}: task-{i}"
            );
        }
        assert_eq!(d.stacks.len(), 3000, "{format:?}");
        // The analyzer reads the names in the segments too (a compact
        // file through its version-3 image).
        let loaded = mtanalyze::load(trace.path()).expect("load");
        let report =
            mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
        assert!(
            !report.warnings.iter().any(|w| w.kind.contains("metadata")),
            "{format:?}: {:?}",
            report.warnings
        );
        assert!(
            !report
                .functions
                .iter()
                .any(|f| f.function.starts_with("fn#")),
            "{format:?}"
        );
    }
}

#[test]
fn a_ring_gives_names_a_quarter_of_its_slots_at_most() {
    let _serial = serial();
    const CHUNK: usize = 4096;
    const SLOTS: u64 = 64;
    let trace = TempTrace::new("names-ring-share");
    let recording = mtrace::start(
        Config::new(trace.path())
            .mode(Mode::Ring)
            .chunk_size(CHUNK)
            .capacity(SLOTS * CHUNK as u64)
            .meta_capacity(4096),
    )
    .unwrap();
    let f = mtrace::register_function("share", file!(), line!(), module_path!());
    run_tasks(20_000, f);
    let summary = recording.finish().unwrap();
    assert!(summary.meta_dropped > 0);
    let bytes = std::fs::read(trace.path()).unwrap();
    let file = TraceFile::parse(&bytes).unwrap();
    let segments = (0..file.chunk_slots())
        .filter(|&i| {
            let at = (file.header().chunks_offset + i * CHUNK as u64) as usize;
            bytes[at..at + 8] == SEGMENT_STATE.to_le_bytes()
        })
        .count() as u64;
    assert_eq!(segments, SLOTS / 4);
    // The names kept are the first ones, every one of them readable.
    let names = stack_names(&bytes);
    assert!(names.len() > 1000);
    assert!(names
        .iter()
        .enumerate()
        .all(|(i, n)| *n == format!("task-{i}")));
}

/// Bytes the file's blocks take on disk.
fn disk_bytes(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// What a trace holds: its header, the committed bytes of its chunks
/// and the bytes of its metadata records.
fn contents(bytes: &[u8]) -> u64 {
    let file = TraceFile::parse(bytes).unwrap();
    let mut held = HEADER_SIZE as u64;
    for i in 0..file.chunk_slots() {
        if let Ok(Some(c)) = file.chunk(i) {
            held += (64 + c.snapshot.encoded_len() + c.event_bytes().len()) as u64;
        }
    }
    held + file.metadata_log().len() as u64
}

#[test]
fn a_small_trace_is_no_larger_than_twice_what_it_holds() {
    let _serial = serial();
    for (case, tasks, pairs) in [("few-names", 50, 3000), ("many-names", 20_000, 3000)] {
        let trace = TempTrace::new(&format!("names-size-{case}"));
        // The defaults, as a child process's recording has them.
        let recording = mtrace::start(Config::new(trace.path())).unwrap();
        let f = mtrace::register_function("work", file!(), line!(), module_path!());
        run_tasks(tasks, f);
        for _ in 0..pairs {
            mtrace::enter(f);
            mtrace::exit(f);
        }
        recording.finish().unwrap();
        let bytes = std::fs::read(trace.path()).unwrap();
        let held = contents(&bytes);
        let apparent = bytes.len() as u64;
        let on_disk = disk_bytes(trace.path());
        eprintln!("{case}: holds {held} bytes, {apparent} apparent, {on_disk} on disk");
        assert!(apparent <= 2 * held, "{case}: {apparent} bytes for {held}");
        assert!(
            on_disk <= 2 * held,
            "{case}: {on_disk} bytes on disk for {held}"
        );
    }
}

const CHILD_ENV: &str = "MTRACE_TEST_NAMES_CRASH_CHILD";

/// Not a test on its own: the body of the child process, which names
/// stacks `task-0`, `task-1`, ... until it is killed.
#[test]
fn names_crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let recording = mtrace::start(Config::new(path).chunk_size(4096)).expect("start");
    // Never finished: the process is killed.
    std::mem::forget(recording);
    for i in 0u64.. {
        drop(LogicalStack::new(format!("task-{i}")));
        if i.is_multiple_of(1024) {
            // Every name before `i` is committed before this line.
            println!("named {i}");
        }
    }
}

/// A process killed while it writes names leaves a log that reads whole:
/// the names, in order, up to the last one committed, and no damage.
#[test]
fn sigkill_while_naming_loses_only_the_name_being_written() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let trace = TempTrace::new("names-crash");
    let reached = kill_child_at(
        "names_crash_child",
        CHILD_ENV,
        trace.path(),
        "named ",
        50_000,
    );
    let bytes = std::fs::read(trace.path()).unwrap();
    let names = stack_names(&bytes);
    assert!(
        names.len() as u64 >= reached,
        "{} of {reached}",
        names.len()
    );
    for (i, name) in names.iter().enumerate() {
        assert_eq!(*name, format!("task-{i}"));
    }
}

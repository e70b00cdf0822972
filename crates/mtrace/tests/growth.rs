//! A stop-when-full file grows as the run needs it: created small, grown
//! step by step as chunks are claimed up to a maximum that by default is a
//! share of the free disk space. A tiny program leaves a tiny file; a run
//! that writes more than the old 256 MiB default drops nothing; a run
//! killed after its file grew leaves a file the analyzer reads.

mod common;

use common::{decode, kill_child_at, serial, TempTrace};
use mtrace::{Config, Format};
use mtrace_format::{EventKind, TraceFile};

/// The old fixed default capacity, which the big run must exceed.
const OLD_DEFAULT: u64 = 256 << 20;

#[test]
fn a_tiny_program_leaves_a_tiny_file() {
    let _serial = serial();
    let trace = TempTrace::new("growth-tiny");
    let recording = mtrace::start(Config::new(trace.path())).unwrap();
    std::thread::spawn(|| {
        let f = mtrace::register_function("tiny", file!(), line!(), module_path!());
        mtrace::enter(f);
        mtrace::exit(f);
    })
    .join()
    .unwrap();
    // While it runs: the header lays the file out at its maximum, which is
    // far larger than the file on disk (the first step only).
    let running = std::fs::metadata(trace.path()).unwrap().len();
    let bytes = std::fs::read(trace.path()).unwrap();
    let header = TraceFile::parse(&bytes).unwrap().header().clone();
    let maximum = header.chunks_offset + header.chunk_count * header.chunk_size as u64;
    assert!(
        header.chunk_count * header.chunk_size as u64 >= mtrace::bench::AUTO_CAPACITY_MIN,
        "maximum {} slots",
        header.chunk_count
    );
    assert!(
        running <= header.chunks_offset + (2 << 20),
        "{running} bytes on disk at start"
    );
    assert!(running < maximum);

    let summary = recording.finish().unwrap();
    let len = std::fs::metadata(trace.path()).unwrap().len();
    let d = decode(trace.path());
    assert!(d.header.finished());
    assert_eq!(summary.chunk_count, 1, "one thread, one chunk");
    assert_eq!(d.header.chunk_count, 1);
    assert_eq!(
        len,
        d.header.chunks_offset + d.header.chunk_size as u64,
        "the file ends after its one chunk"
    );
    assert_eq!(summary.growths, 0);
    assert_eq!(summary.dropped_events, 0);
    assert_eq!(
        d.event_count(),
        4,
        "the thread's start, enter, exit, the thread's exit"
    );
    eprintln!("a tiny program's file: {len} bytes");
}

#[test]
fn more_than_the_old_default_drops_nothing_with_default_settings() {
    let _serial = serial();
    let trace = TempTrace::new("growth-big");
    // 16-byte events: the file passes the old default with a sixth of
    // the events compact ones would need (the growth is the point here,
    // not the encoding).
    let config = Config::new(trace.path()).format(Format::Fixed);
    let recording = mtrace::start(config).unwrap();
    const THREADS: u64 = 2;
    // 2 threads x 4.5 M pairs x 2 events x 16 bytes: 288 MiB of events.
    const PAIRS: u64 = 4_500_000;
    const _: () = assert!(THREADS * PAIRS * 2 * 16 > OLD_DEFAULT);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let f = mtrace::register_function("busy", file!(), t as u32, module_path!());
                for _ in 0..PAIRS {
                    mtrace::enter(f);
                    mtrace::exit(f);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let summary = recording.finish().unwrap();
    assert_eq!(summary.dropped_events, 0);
    assert_eq!(summary.dropped_chunks, 0);
    assert_eq!(summary.growth_failure, None);
    assert!(summary.growths > 0);
    eprintln!(
        "{} events, {} chunk slots, {} growths",
        summary.events, summary.chunk_count, summary.growths
    );

    // Every event decodes, in place (the file is too big to copy into
    // per-event vectors): each thread's start, its pairs, its exit.
    let bytes = std::fs::read(trace.path()).unwrap();
    assert!(bytes.len() as u64 > OLD_DEFAULT);
    let trace = TraceFile::parse(&bytes).unwrap();
    let header = trace.header();
    assert!(header.finished());
    assert_eq!(header.dropped_events, 0);
    let mut per_thread = std::collections::BTreeMap::<u64, (u64, u64)>::new();
    for i in 0..trace.chunk_slots() {
        let chunk = trace
            .chunk(i)
            .unwrap_or_else(|e| panic!("chunk {i}: {e}"))
            .unwrap_or_else(|| panic!("slot {i} is empty"));
        assert!(chunk.cut.is_none());
        let (pairs_seen, others) = per_thread.entry(chunk.thread.0).or_default();
        for event in chunk.events() {
            match event.unwrap_or_else(|e| panic!("chunk {i}: {e}")).kind {
                EventKind::Enter(_) => *pairs_seen += 1,
                EventKind::Exit(_) => {}
                _ => *others += 1,
            }
        }
    }
    assert_eq!(per_thread.len(), THREADS as usize);
    for (tid, counts) in per_thread {
        assert_eq!(counts, (PAIRS, 2), "thread {tid}: enters, other events");
    }
    assert_eq!(summary.events, THREADS * (2 * PAIRS + 2));
}

const CHILD_ENV: &str = "MTRACE_TEST_GROWTH_CHILD";

/// Not a test on its own: the body of the killed child. Records with the
/// default settings, nested calls in a loop, printing how far it got.
#[test]
fn growth_crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let recording = mtrace::start(Config::new(path)).expect("start");
    // Never finished: the process is killed.
    std::mem::forget(recording);
    let ids: Vec<_> = ["outer", "inner"]
        .iter()
        .map(|n| mtrace::register_function(n, file!(), 1, module_path!()))
        .collect();
    let mut i = 0u64;
    loop {
        mtrace::enter(ids[0]);
        mtrace::enter(ids[1]);
        mtrace::exit(ids[1]);
        mtrace::exit(ids[0]);
        i += 1;
        if i.is_multiple_of(65536) {
            // Every event of iterations < i is committed before this line.
            println!("progress {i}");
        }
    }
}

#[test]
fn a_killed_run_whose_file_grew_analyzes() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let trace = TempTrace::new("growth-crash");
    // 4 events of 16 bytes an iteration: 24 MiB of events, past several
    // growths of the file (1 MiB at start, then 2, 4, 8, ...).
    const ITERATIONS: u64 = 400_000;
    let reached = kill_child_at(
        "growth_crash_child",
        CHILD_ENV,
        trace.path(),
        "progress ",
        ITERATIONS,
    );

    let len = std::fs::metadata(trace.path()).unwrap().len();
    let bytes = std::fs::read(trace.path()).unwrap();
    let header = TraceFile::parse(&bytes).unwrap().header().clone();
    assert!(!header.finished(), "a killed recording is not finished");
    let maximum = header.chunks_offset + header.chunk_count * header.chunk_size as u64;
    assert!(
        len > header.chunks_offset + (8 << 20),
        "the file grew: {len} bytes"
    );
    assert!(
        len < maximum,
        "the file is only as long as it grew ({len} of {maximum} bytes)"
    );

    let loaded = mtanalyze::load(trace.path()).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    for name in ["outer", "inner"] {
        let f = report
            .functions
            .iter()
            .find(|f| f.function == name)
            .unwrap_or_else(|| panic!("no {name} in the report"));
        assert!(
            f.ncalls >= reached,
            "{name}: {} calls, at least {reached} were committed",
            f.ncalls
        );
    }
}

/// The recording opens its file by its path to grow it (it holds no
/// descriptor): a file put in its place meanwhile is not the recording's,
/// and the recording stops growing rather than write into it; the file
/// moved away keeps what was recorded before.
#[test]
fn a_file_put_in_the_trace_s_place_is_never_grown_into() {
    let _serial = serial();
    let trace = TempTrace::new("growth-replaced");
    let moved = trace.path().with_extension("moved");
    let recording = mtrace::start(Config::new(trace.path())).unwrap();
    let f = mtrace::register_function("replaced", file!(), line!(), module_path!());
    mtrace::enter(f);
    mtrace::exit(f);
    std::fs::rename(trace.path(), &moved).unwrap();
    std::fs::write(trace.path(), b"the program's own file").unwrap();
    for _ in 0..400_000 {
        mtrace::enter(f);
        mtrace::exit(f);
    }
    let summary = recording.finish().unwrap();
    let failure = summary.growth_failure.expect("the file could not grow");
    assert!(failure.contains("replaced by another file"), "{failure}");
    assert!(summary.dropped_events > 0);
    assert_eq!(
        std::fs::read(trace.path()).unwrap(),
        b"the program's own file"
    );
    let d = decode(&moved);
    assert_eq!(d.event_count(), summary.events);
    let _ = std::fs::remove_file(&moved);
}

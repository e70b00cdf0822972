//! Adopted open frames (`mtrace::adopt_open_frames`, what `python -m
//! mtrace attach` does for the threads of a running program): a thread
//! that was inside functions when the recording began, and records its
//! first event later, has those frames open from the file's start (their
//! time counts from there, their calls do not), its later frames exact,
//! and nothing repaired; a thread whose stream has begun is refused and
//! its stream left as it was.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{serial, TempTrace};
use mtanalyze::{report::Clock, AnalyzeOptions, FunctionStats, Report};
use mtrace::{AdoptError, Config, Format};

const HANDLES: u64 = 50;

fn analyze(path: &std::path::Path, clock: Clock) -> Report {
    let loaded = mtanalyze::load(path).expect("load");
    let options = AnalyzeOptions {
        clock: Some(clock),
        ..AnalyzeOptions::default()
    };
    mtanalyze::analyze(&loaded, &options).expect("analyze")
}

fn row<'a>(report: &'a Report, name: &str) -> &'a FunctionStats {
    report
        .functions
        .iter()
        .find(|f| f.function == name)
        .unwrap_or_else(|| panic!("no row for {name}"))
}

/// A worker waits, with no event, inside `serve` and `wait` while the
/// recording starts; the main thread records the mark `released` and
/// lets it go. It adopts the two frames, leaves `wait`, handles requests
/// and leaves `serve`.
fn record_a_worker_that_was_waiting(format: Format, trace: &TempTrace) {
    let f = |name| mtrace::register_function(name, file!(), 1, module_path!());
    let (serve, wait, handle, leaf) = (f("serve"), f("wait"), f("handle"), f("leaf"));
    let (release, released) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        released.recv().expect("released");
        mtrace::adopt_open_frames(&[serve, wait]).expect("its first event");
        mtrace::exit(wait);
        for _ in 0..HANDLES {
            mtrace::enter(handle);
            mtrace::enter(leaf);
            mtrace::exit(leaf);
            mtrace::exit(handle);
        }
        mtrace::exit(serve);
        // Its stream has begun: refused, and nothing written.
        assert_eq!(
            mtrace::adopt_open_frames(&[serve]),
            Err(AdoptError::AlreadyRecorded)
        );
    });
    let recording = mtrace::start(Config::new(&trace.0).format(format)).expect("start");
    // The worker's wait lasts while the main thread runs on: its time in
    // the file, up to the mark at least, is the wait's.
    std::thread::sleep(Duration::from_millis(20));
    mtrace::mark("released");
    release.send(()).expect("worker waits");
    worker.join().expect("worker");
    recording.finish().expect("finish");
}

#[test]
fn adopted_frames_are_open_from_the_files_start_and_count_no_call() {
    let _serial = serial();
    for format in [Format::Fixed, Format::Compact] {
        let trace = TempTrace::new(&format!("adopt-{format:?}"));
        record_a_worker_that_was_waiting(format, &trace);
        let decoded = common::decode(&trace.0);
        let first_chunks: Vec<_> = decoded
            .chunks
            .values()
            .filter_map(|chunks| chunks.first())
            .filter(|c| c.continued)
            .collect();
        assert_eq!(first_chunks.len(), 1, "{format:?}: one thread adopted");
        let first = first_chunks[0];
        assert!(first.restart && first.chunk_no == 0);
        assert_eq!(first.snapshot.own.len(), 2, "{format:?}: serve and wait");
        let start = decoded.header.clock.start_tick;
        assert_eq!(first.snapshot_tick, start, "{format:?}");
        for clock in [Clock::Stack, Clock::Wall, Clock::Gil] {
            let at = format!("{format:?}, {clock:?}");
            let report = analyze(&trace.0, clock);
            assert!(report.warnings.is_empty(), "{at}: {:?}", report.warnings);
            let (serve, wait) = (row(&report, "serve"), row(&report, "wait"));
            let (handle, leaf) = (row(&report, "handle"), row(&report, "leaf"));
            assert_eq!((serve.ncalls, wait.ncalls), (0, 0), "{at}");
            assert_eq!((handle.ncalls, leaf.ncalls), (HANDLES, HANDLES), "{at}");
            assert_eq!(serve.open_at_end, 0, "{at}");
            assert!(
                serve.cumtime_ns >= wait.cumtime_ns + handle.cumtime_ns,
                "{at}"
            );
            assert!(handle.cumtime_ns >= leaf.cumtime_ns, "{at}");
            if clock != Clock::Gil {
                // Open since the file's start: past the mark before the
                // worker's first event. (Under `gil` a thread runs only
                // after its own events: the stretch before its first one
                // is nobody's.)
                let released = report
                    .marks
                    .iter()
                    .find(|m| m.name == "released")
                    .expect("mark");
                assert!(released.time_ns > 0, "{at}");
                assert!(wait.cumtime_ns >= released.time_ns, "{at}");
            }
        }
    }
}

#[test]
fn a_thread_that_recorded_is_refused_and_its_stream_kept() {
    let _serial = serial();
    let f = |name| mtrace::register_function(name, file!(), 2, module_path!());
    let (outer, inner) = (f("outer"), f("inner"));
    assert_eq!(
        mtrace::adopt_open_frames(&[outer]),
        Err(AdoptError::NotRecording)
    );
    let trace = TempTrace::new("adopt-refused");
    let recording = mtrace::start(Config::new(&trace.0)).expect("start");
    std::thread::spawn(move || {
        mtrace::enter(outer);
        assert_eq!(
            mtrace::adopt_open_frames(&[inner]),
            Err(AdoptError::AlreadyRecorded)
        );
        mtrace::exit(outer);
    })
    .join()
    .expect("thread");
    recording.finish().expect("finish");
    let decoded = common::decode(&trace.0);
    assert!(decoded.chunks.values().flatten().all(|c| !c.restart));
    let report = analyze(&trace.0, Clock::Stack);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(row(&report, "outer").ncalls, 1);
    assert!(report.functions.iter().all(|f| f.function != "inner"));
}

//! Adopted open frames (`mtrace::adopt_open_frames`, what `python -m
//! mtrace attach` does for the threads of a running program): a thread
//! that was inside functions when the recording began, and records its
//! first event later, has those frames open from the file's start (their
//! time counts from there, their calls do not), its later frames exact,
//! and nothing repaired; a thread whose stream has begun is refused and
//! its stream left as it was.
//!
//! Another thread's frames (`mtrace::adopt_thread_frames`, for a thread
//! blocked at the attach): a thread that never records is in the trace
//! with them open from the file's start to its end; one that records
//! later continues that stream, one stream with exact counts and no
//! frame twice, also when it wakes while the adoption is being written.

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{serial, TempTrace};
use mtanalyze::{report::Clock, AnalyzeOptions, FunctionStats, Report};
use mtrace::{AdoptError, Config, Format, FunctionId, Rotation};

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

/// The calling thread's operating-system id, as `adopt_thread_frames` takes it.
fn gettid() -> u64 {
    // SAFETY: gettid has no arguments and cannot fail.
    (unsafe { libc::syscall(libc::SYS_gettid) }) as u64
}

/// A thread blocked (in a channel's `recv`, as a worker in `queue.get`)
/// until released, then running `then`: its operating-system id, the
/// sender that releases it, and its handle.
fn blocked_thread(
    then: impl FnOnce() + Send + 'static,
) -> (u64, mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (tell, told) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        tell.send(gettid()).expect("tid");
        released.recv().expect("released");
        then();
    });
    (told.recv().expect("tid"), release, thread)
}

fn functions(names: &[&str]) -> Vec<FunctionId> {
    names
        .iter()
        .map(|name| mtrace::register_function(name, file!(), 3, module_path!()))
        .collect()
}

/// Records on the main thread what the attaching thread does meanwhile:
/// `ticks` calls of `tick`, then, 20 ms later, the mark `late`.
fn main_thread_works(tick: FunctionId, ticks: u64) {
    for _ in 0..ticks {
        mtrace::enter(tick);
        mtrace::exit(tick);
    }
    std::thread::sleep(Duration::from_millis(20));
    mtrace::mark("late");
}

#[test]
fn another_threads_adopted_frames_span_the_trace_when_it_never_records() {
    let _serial = serial();
    let f = functions(&["idle serve", "idle wait", "idle tick"]);
    let (serve, wait, tick) = (f[0], f[1], f[2]);
    for format in [Format::Fixed, Format::Compact] {
        let trace = TempTrace::new(&format!("adopt-idle-{format:?}"));
        let (worker_tid, release, worker) = blocked_thread(|| {});
        let recording = mtrace::start(Config::new(&trace.0).format(format)).expect("start");
        mtrace::adopt_thread_frames(worker_tid, "worker-3", &[serve, wait]).expect("adopted");
        // Once: the stream has begun.
        assert_eq!(
            mtrace::adopt_thread_frames(worker_tid, "worker-3", &[serve]),
            Err(AdoptError::AlreadyRecorded)
        );
        assert_eq!(
            mtrace::adopt_thread_frames(0, "nobody", &[serve]),
            Err(AdoptError::UnknownThread)
        );
        main_thread_works(tick, 10);
        recording.finish().expect("finish");
        release.send(()).expect("worker waits");
        worker.join().expect("worker");
        assert_eq!(
            mtrace::adopt_thread_frames(worker_tid, "worker-3", &[serve]),
            Err(AdoptError::NotRecording)
        );

        let decoded = common::decode(&trace.0);
        let tid = decoded.tid("worker-3");
        assert_eq!(decoded.threads[&tid].0, worker_tid, "{format:?}: its os id");
        let chunks = &decoded.chunks[&tid];
        assert_eq!(chunks.len(), 1, "{format:?}");
        let first = &chunks[0];
        assert!(
            first.restart && first.continued && first.chunk_no == 0,
            "{format:?}"
        );
        assert_eq!(first.snapshot.own, [serve.0, wait.0], "{format:?}");
        let start = decoded.header.clock.start_tick;
        assert_eq!(first.snapshot_tick, start, "{format:?}");
        assert!(first.events.is_empty(), "{format:?}: it ran nothing");
        for clock in [Clock::Stack, Clock::Wall, Clock::Gil] {
            let at = format!("{format:?}, {clock:?}");
            let report = analyze(&trace.0, clock);
            assert!(report.warnings.is_empty(), "{at}: {:?}", report.warnings);
            assert!(
                report
                    .trace
                    .threads
                    .iter()
                    .any(|t| t.tid == tid && t.name == "worker-3"),
                "{at}: {:?}",
                report.trace.threads
            );
            let (serve, wait) = (row(&report, "idle serve"), row(&report, "idle wait"));
            assert_eq!((serve.ncalls, wait.ncalls), (0, 0), "{at}");
            assert_eq!((serve.open_at_end, serve.cut_short), (0, 0), "{at}");
            assert_eq!(row(&report, "idle tick").ncalls, 10, "{at}");
            if clock == Clock::Gil {
                // A thread runs only after its own events, and it has
                // none: its frames are open, never running (it held no
                // turn), paused from the file's start to the trace's end.
                assert_eq!((serve.cumtime_ns, wait.cumtime_ns), (0, 0), "{at}");
                assert_eq!(serve.paused_ns, report.trace.end_ns, "{at}");
                assert_eq!(wait.paused_ns, report.trace.end_ns, "{at}");
            } else {
                // Open from the file's start to the trace's end.
                assert_eq!(serve.cumtime_ns, report.trace.end_ns, "{at}");
                assert_eq!(wait.cumtime_ns, report.trace.end_ns, "{at}");
                assert_eq!(wait.tottime_ns, report.trace.end_ns, "{at}");
                let late = report
                    .marks
                    .iter()
                    .find(|m| m.name == "late")
                    .expect("mark");
                assert!(late.time_ns > 0 && wait.cumtime_ns >= late.time_ns, "{at}");
            }
        }
    }
}

#[test]
fn another_thread_that_records_later_continues_its_adopted_stream() {
    let _serial = serial();
    let f = functions(&["later serve", "later wait", "later handle", "later tick"]);
    let (serve, wait, handle, tick) = (f[0], f[1], f[2], f[3]);
    // It continues with plain events, or first says which frames it has
    // (as the Python binding does at a thread's first event): the same
    // ones, or fewer (`wait` returned unseen: its exit is recorded then).
    // Whether `wait` is still open after.
    type Wakes = fn(FunctionId, FunctionId) -> bool;
    let wakes: [(&str, Wakes); 3] = [
        ("plain", |_, _| true),
        ("same", |serve, wait| {
            mtrace::adopt_open_frames(&[serve, wait]).expect("continues");
            true
        }),
        ("fewer", |serve, _| {
            mtrace::adopt_open_frames(&[serve]).expect("continues");
            false
        }),
    ];
    for format in [Format::Fixed, Format::Compact] {
        for (how, wake) in wakes {
            let at = format!("{format:?}, {how}");
            let trace = TempTrace::new(&format!("adopt-later-{format:?}-{how}"));
            let (worker_tid, release, worker) = blocked_thread(move || {
                if wake(serve, wait) {
                    mtrace::exit(wait);
                }
                for _ in 0..HANDLES {
                    mtrace::enter(handle);
                    mtrace::exit(handle);
                }
                mtrace::exit(serve);
                // Its stream has begun.
                assert_eq!(
                    mtrace::adopt_open_frames(&[serve]),
                    Err(AdoptError::AlreadyRecorded)
                );
            });
            let recording = mtrace::start(Config::new(&trace.0).format(format)).expect("start");
            mtrace::adopt_thread_frames(worker_tid, "worker-4", &[serve, wait]).expect("adopted");
            main_thread_works(tick, 10);
            release.send(()).expect("worker waits");
            worker.join().expect("worker");
            assert_eq!(
                mtrace::adopt_thread_frames(worker_tid, "worker-4", &[serve]),
                Err(AdoptError::AlreadyRecorded),
                "{at}"
            );
            recording.finish().expect("finish");

            let decoded = common::decode(&trace.0);
            let tid = decoded.tid("worker-4");
            assert_eq!(decoded.threads.len(), 2, "{at}: one stream each");
            let chunks = &decoded.chunks[&tid];
            let numbers: Vec<u64> = chunks.iter().map(|c| c.chunk_no).collect();
            assert_eq!(
                numbers,
                (0..chunks.len() as u64).collect::<Vec<_>>(),
                "{at}"
            );
            assert!(
                chunks.len() >= 2,
                "{at}: its own chunk after the adopted one"
            );
            assert!(chunks[0].continued, "{at}");
            assert!(chunks[1..].iter().all(|c| !c.restart), "{at}");
            // Its own first chunk continues from the adopted frames.
            assert_eq!(chunks[1].snapshot.own, [serve.0, wait.0], "{at}");
            let events = decoded.events(tid);
            let enters = |f: FunctionId| {
                events
                    .iter()
                    .filter(|e| e.kind == mtrace_format::EventKind::Enter(f))
                    .count()
            };
            assert_eq!(
                (enters(serve), enters(wait)),
                (0, 0),
                "{at}: no frame twice"
            );
            for clock in [Clock::Stack, Clock::Wall, Clock::Gil] {
                let at = format!("{at}, {clock:?}");
                let report = analyze(&trace.0, clock);
                assert!(report.warnings.is_empty(), "{at}: {:?}", report.warnings);
                let (serve, wait) = (row(&report, "later serve"), row(&report, "later wait"));
                assert_eq!((serve.ncalls, wait.ncalls), (0, 0), "{at}");
                assert_eq!(row(&report, "later handle").ncalls, HANDLES, "{at}");
                assert_eq!((serve.open_at_end, serve.cut_short), (0, 0), "{at}");
                assert!(serve.cumtime_ns >= wait.cumtime_ns, "{at}");
                if clock != Clock::Gil {
                    let late = report
                        .marks
                        .iter()
                        .find(|m| m.name == "late")
                        .expect("mark");
                    assert!(wait.cumtime_ns >= late.time_ns, "{at}");
                }
            }
        }
    }
}

/// The thread wakes and records while another thread adopts its frames:
/// whichever binds first, one stream, the counts exact, nothing twice.
#[test]
fn a_thread_waking_during_its_adoption_has_one_stream() {
    let _serial = serial();
    let f = functions(&["race serve", "race handle", "race tick"]);
    let (serve, handle, tick) = (f[0], f[1], f[2]);
    let rounds = 40;
    let (mut adopted, mut refused) = (0, 0);
    for round in 0..rounds {
        let format = if round % 2 == 0 {
            Format::Compact
        } else {
            Format::Fixed
        };
        let trace = TempTrace::new(&format!("adopt-race-{round}"));
        let go = Arc::new(Barrier::new(2));
        let (tell, told) = mpsc::channel();
        let worker = std::thread::spawn({
            let go = Arc::clone(&go);
            move || {
                tell.send(gettid()).expect("tid");
                go.wait();
                // As the Python binding at a thread's first event.
                if mtrace::adopt_open_frames(&[serve]).is_err() {
                    panic!("its first event");
                }
                for _ in 0..HANDLES {
                    mtrace::enter(handle);
                    mtrace::exit(handle);
                }
                mtrace::exit(serve);
            }
        });
        let worker_tid = told.recv().expect("tid");
        let recording = mtrace::start(Config::new(&trace.0).format(format)).expect("start");
        mtrace::enter(tick);
        go.wait();
        match mtrace::adopt_thread_frames(worker_tid, "racer", &[serve]) {
            Ok(()) => adopted += 1,
            Err(AdoptError::AlreadyRecorded) => refused += 1,
            Err(e) => panic!("round {round}: {e}"),
        }
        mtrace::exit(tick);
        worker.join().expect("worker");
        recording.finish().expect("finish");

        let at = format!("round {round}, {format:?}");
        let decoded = common::decode(&trace.0);
        assert_eq!(decoded.threads.len(), 2, "{at}: {:?}", decoded.threads);
        for clock in [Clock::Stack, Clock::Gil] {
            let report = analyze(&trace.0, clock);
            assert!(report.warnings.is_empty(), "{at}: {:?}", report.warnings);
            assert_eq!(row(&report, "race serve").ncalls, 0, "{at}");
            assert_eq!(row(&report, "race handle").ncalls, HANDLES, "{at}");
            assert_eq!(row(&report, "race tick").ncalls, 1, "{at}");
        }
    }
    // Both orders are legal; say which ones ran.
    eprintln!("{adopted} adopted first, {refused} bound first, of {rounds}");
    assert_eq!(adopted + refused, rounds);
}

#[test]
fn another_threads_frames_are_refused_in_a_later_file_of_a_series() {
    let _serial = serial();
    let f = functions(&["series serve"]);
    let d = std::env::temp_dir().join(format!("mtrace-test-{}-adopt-series", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("dir");
    let (first_tid, release_first, first) = blocked_thread(|| {});
    let (later_tid, release_later, later) = blocked_thread(|| {});
    let config =
        Config::new(d.join("trace.bin")).rotate(Rotation::Every(Duration::from_millis(20)));
    let recording = mtrace::start(config).expect("start");
    assert_eq!(mtrace::adopt_thread_frames(first_tid, "first", &f), Ok(()));
    // Once the series moved on to its second file, refused there.
    let mut refused = None;
    for _ in 0..500 {
        match mtrace::adopt_thread_frames(later_tid, "later", &f) {
            Ok(()) | Err(AdoptError::AlreadyRecorded) => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    recording.finish().expect("finish");
    for (release, thread) in [(release_first, first), (release_later, later)] {
        release.send(()).expect("waits");
        thread.join().expect("thread");
    }
    let first_file = common::decode(&d.join("trace.bin"));
    let _ = std::fs::remove_dir_all(&d);
    assert_eq!(refused, Some(AdoptError::Rotated));
    // The first file has the thread adopted there.
    let tid = first_file.tid("first");
    assert_eq!(first_file.chunks[&tid][0].snapshot.own, [f[0].0]);
}

//! A real async runtime end to end: tokio tasks recorded by the recorder
//! (the `async_tasks` example, included here) and analyzed by the library.
//! Times are only bounded from below by what the program itself guarantees
//! (a tokio sleep lasts at least its duration), never compared to a speed.

use std::time::Duration;

use mtanalyze::{analyze, report::Clock, AnalyzeOptions, Report};

use crate::util::TempDir;

#[allow(dead_code)] // the example's `main`
#[path = "../../crates/mtrace/examples/async_tasks.rs"]
pub(crate) mod service;

/// The recorder allows one recording at a time per process (every test
/// of this binary that records takes this).
pub(crate) static RECORDER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn record(dir: &TempDir, name: &str, service: &service::Service) -> std::path::PathBuf {
    let _one_at_a_time = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    let path = dir.join(name);
    let summary = service::record(&path, service).expect("recorded");
    assert!(summary.events > 0);
    path
}

fn report(path: &std::path::Path, clock: Clock) -> Report {
    let trace = mtanalyze::load(path).expect("load");
    let options = AnalyzeOptions {
        clock: Some(clock),
        ..AnalyzeOptions::default()
    };
    analyze(&trace, &options).expect("analyze")
}

fn function<'r>(report: &'r Report, name: &str) -> &'r mtanalyze::FunctionStats {
    report
        .functions
        .iter()
        .find(|f| f.function == name)
        .unwrap_or_else(|| panic!("no function {name}"))
}

#[test]
fn each_task_keeps_its_frames_and_its_waits_are_paused() {
    let dir = TempDir::new("async-tasks");
    let service = service::Service {
        requests: 40,
        workers: 2,
        wait: Duration::from_millis(3),
        logical_stacks: true,
        rotate: None,
    };
    let path = record(&dir, "tasks.bin", &service);
    let n = service.requests;
    let waited = n * service.wait.as_nanos() as u64;

    let stack = report(&path, Clock::Stack);
    assert!(stack.warnings.is_empty(), "{:?}", stack.warnings);
    for name in ["handle", "parse", "fetch", "render"] {
        let f = function(&stack, name);
        assert_eq!((f.ncalls, f.primitive_calls), (n, n), "{name}");
    }
    // The awaited sleep is paused time of the frames open across it, not
    // time spent in them. What the program's order guarantees is only that
    // each such frame spans its sleep: on a loaded machine the thread can
    // be descheduled inside the poll that starts the sleep, and the
    // deadline then passes while the stack counts as running.
    for name in ["handle", "fetch"] {
        let f = function(&stack, name);
        assert!(f.paused_ns > 0, "{name}: never paused");
        assert!(
            f.cumtime_ns + f.paused_ns >= waited,
            "{name}: cumtime {} + paused {} < {waited}",
            f.cumtime_ns,
            f.paused_ns
        );
    }
    for name in ["parse", "render"] {
        assert_eq!(function(&stack, name).paused_ns, 0, "{name}");
    }
    let requests: Vec<_> = stack
        .stacks
        .iter()
        .filter(|s| s.name.starts_with("request-"))
        .collect();
    assert_eq!(requests.len() as u64, n);
    for s in &requests {
        // Polled before and after the sleep; handle -> fetch (or parse,
        // render) is two deep; four frames, eight events.
        assert!(s.switches_in >= 2, "{s:?}");
        assert_eq!((s.max_depth, s.events), (2, 8), "{s:?}");
        // Switched out across the sleep; its life spans the sleep (see above).
        assert!(s.paused_ns > 0, "{s:?}");
        assert!(
            s.running_ns + s.paused_ns >= service.wait.as_nanos() as u64,
            "{s:?}"
        );
    }
    let edge = stack
        .edges
        .iter()
        .find(|e| e.caller == "handle" && e.callee == "fetch")
        .expect("handle -> fetch");
    assert_eq!(edge.ncalls, n);

    // Under the wall clock nothing is paused: the wait is inside fetch.
    let wall = report(&path, Clock::Wall);
    let fetch = function(&wall, "fetch");
    assert_eq!(fetch.paused_ns, 0);
    assert!(fetch.cumtime_ns >= waited, "{}", fetch.cumtime_ns);
}

#[test]
fn without_logical_stacks_requests_look_recursive() {
    let dir = TempDir::new("async-one-stack");
    let service = service::Service {
        requests: 40,
        workers: 2,
        // Long enough that every worker starts several requests before the
        // first wait ends, however slow the machine.
        wait: Duration::from_millis(50),
        logical_stacks: false,
        rotate: None,
    };
    let path = record(&dir, "one-stack.bin", &service);
    let r = report(&path, Clock::Stack);
    assert!(r
        .stacks
        .iter()
        .all(|s| matches!(s.id, mtanalyze::report::StackKey::Own(_))));
    // Frames of requests that wait pile up on the worker threads' stacks:
    // the `10000/538` primitive-call symptom of one-stack profilers.
    let handle = function(&r, "handle");
    assert_eq!(handle.ncalls, service.requests);
    assert!(handle.primitive_calls < handle.ncalls, "{handle:?}");
}

#[test]
fn names_that_did_not_fit_are_a_warning() {
    let _one_at_a_time = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("meta-dropped");
    let path = dir.join("names.bin");
    // Room for a few names only: names past the first region go on in
    // segments, and a ring of 16 slots gives them 4 at most.
    let config = mtrace::Config::new(&path)
        .mode(mtrace::Mode::Ring)
        .chunk_size(4096)
        .capacity(16 * 4096)
        .meta_capacity(4096);
    let recording = mtrace::start(config).expect("recording");
    for i in 0..500 {
        let mut stack = mtrace::LogicalStack::new(format!("a task with a long name, number {i}"));
        let _on = stack.enter();
        let _frame = mtrace::scope!("step");
    }
    recording.finish().expect("finished");
    let r = report(&path, Clock::Stack);
    let dropped = r
        .warnings
        .iter()
        .find(|w| w.kind == "dropped_metadata")
        .unwrap_or_else(|| panic!("{:?}", r.warnings));
    assert!(dropped.count > 0 && dropped.count < 500, "{dropped:?}");
    // The stacks are all there, the unnamed ones by id.
    let tasks = r
        .stacks
        .iter()
        .filter(|s| matches!(s.id, mtanalyze::report::StackKey::Logical(_)))
        .count();
    assert_eq!(tasks, 500);
    assert!(r
        .stacks
        .iter()
        .any(|s| matches!(s.id, mtanalyze::report::StackKey::Logical(_)) && s.name.is_empty()));
    // The command says so on stderr.
    let run = crate::util::mtanalyze([path.as_os_str()]).success();
    assert!(run.stderr.contains("dropped_metadata ("), "{}", run.stderr);
}

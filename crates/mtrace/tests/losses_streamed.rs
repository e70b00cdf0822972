//! Recordings that lose or skip events while tasks run on two threads:
//! paused and resumed (each thread's first chunk after a resume restarts
//! from its snapshot, with frames open on the task it runs and below it,
//! some left or opened while nothing was recorded), a file that fills
//! (every thread's events end at a `lost` mark), and a ring that wraps
//! (the oldest chunks overwritten). The analyzer streams each (it used to
//! give them to the batch analysis), and the stream gives the batch's
//! report under every clock, in steps of any size.

use mtanalyze::plan::Engine;
use mtanalyze::report::Clock;
use mtanalyze::testing::{analyze_batched, analyze_streamed_with};
use mtanalyze::AnalyzeOptions;

#[mtrace::profile]
fn work(n: u64) -> u64 {
    (0..n).map(|i| i * i).sum()
}

/// Runs `tasks` tasks, each on a logical stack of its own, under an
/// `outer` frame of the thread's own stack; the thread that `pauses`
/// pauses and resumes the recording every 150 tasks, in the middle of a
/// task, with frames left and opened while paused.
#[mtrace::profile]
fn serve(first: u64, tasks: u64, pauses: bool) -> u64 {
    let mut total = 0;
    for i in first..first + tasks {
        let mut task = mtrace::LogicalStack::new(format!("task-{i}"));
        let on_task = task.enter();
        let step = mtrace::scope!("step");
        total += work(20 + i % 5);
        if pauses && i % 150 == 75 {
            assert!(mtrace::pause());
            drop(step);
            let _unseen = mtrace::scope!("unseen");
            total += work(3);
            let late = mtrace::scope!("late");
            assert!(mtrace::resume());
            total += work(5);
            drop(late);
        } else {
            drop(step);
        }
        drop(on_task);
        drop(task);
    }
    total
}

/// `loaded` is planned for the stream, and the stream gives the batch's
/// report under every clock and in steps of any size; returns the batch
/// report under `stack`.
fn streams_to_the_batch_report(loaded: &mtanalyze::LoadedTrace) -> mtanalyze::Report {
    let plan = mtanalyze::plan::of(loaded, &AnalyzeOptions::default()).expect("plans");
    assert_eq!(plan.engine, Engine::Stream, "{plan:?}");
    let mut under_stack = None;
    for clock in [Clock::Stack, Clock::Wall, Clock::Gil] {
        let opts = AnalyzeOptions {
            clock: Some(clock),
            ..AnalyzeOptions::default()
        };
        let batched = analyze_batched(loaded, &opts).expect("analyzes");
        for step in [1, 97, 1 << 16] {
            let streamed = analyze_streamed_with(loaded, &opts, step)
                .expect("analyzes")
                .unwrap_or_else(|| panic!("{clock}, step {step}: the stream gave up"));
            assert_eq!(streamed, batched, "{clock}, step {step}");
        }
        under_stack.get_or_insert(batched);
    }
    under_stack.expect("a report")
}

fn warned(report: &mtanalyze::Report, kind: &str) -> bool {
    report.warnings.iter().any(|w| w.kind == kind)
}

fn trace_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mtrace-{name}-{}.mtrace", std::process::id()))
}

/// Two threads of 1,200 tasks each, recorded with `config`; the first
/// thread pauses the recording mid-task every 150 tasks if `pauses`.
fn record(config: mtrace::Config, pauses: bool) -> mtanalyze::LoadedTrace {
    let path = config.path.clone();
    let armed = config.armed;
    let recording = mtrace::start(config).expect("trace file");
    let outer = mtrace::scope!("outer");
    if armed {
        assert!(recording.resume());
    }
    let total = std::thread::scope(|s| {
        let a = s.spawn(|| serve(0, 1200, pauses));
        let b = s.spawn(|| serve(1_000_000, 1200, false));
        a.join().expect("thread a") + b.join().expect("thread b")
    });
    assert!(total > 0);
    drop(outer);
    recording.finish().expect("finished");
    let loaded = mtanalyze::load(&path).expect("load");
    let _ = std::fs::remove_file(&path);
    loaded
}

// One recording at a time: the recorder is the process's.
#[test]
fn recordings_that_lose_or_skip_events_stream_to_the_batch_report() {
    // Armed and paused: every thread's first chunk restarts from a
    // snapshot too.
    let paused = record(mtrace::Config::new(trace_path("paused")).armed(true), true);
    let report = streams_to_the_batch_report(&paused);
    assert!(
        warned(&report, "frames_from_snapshot"),
        "{:?}",
        report.warnings
    );
    // A task of the other thread's that ran only while paused is not in
    // the trace.
    let tasks = report.stacks.iter().filter(|s| s.name.starts_with("task-"));
    assert!(tasks.count() > 2000);

    // Stop when full: the threads' events end at `lost` marks.
    let full = record(
        mtrace::Config::new(trace_path("full"))
            .capacity(256 << 10)
            .chunk_size(4096),
        false,
    );
    let report = streams_to_the_batch_report(&full);
    assert!(warned(&report, "events_lost"), "{:?}", report.warnings);

    // A ring: the oldest chunks are overwritten.
    let ring = record(
        mtrace::Config::new(trace_path("ring"))
            .mode(mtrace::Mode::Ring)
            .capacity(256 << 10)
            .chunk_size(4096),
        false,
    );
    let report = streams_to_the_batch_report(&ring);
    assert!(warned(&report, "lost_chunks"), "{:?}", report.warnings);
}

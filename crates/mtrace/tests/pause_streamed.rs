//! A recording paused and resumed while tasks run on two threads: each
//! thread's first chunk after a resume restarts from its snapshot, with
//! frames open on the task it runs and below it, some left or opened
//! while nothing was recorded. Such a trace loses nothing, so the analyzer
//! streams it (it used to give it to the batch analysis), and the stream
//! gives the batch's report under every clock, in steps of any size.

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

#[test]
fn a_paused_recording_of_many_tasks_streams_to_the_batch_report() {
    let path = std::env::temp_dir().join(format!(
        "mtrace-pause-streamed-{}.mtrace",
        std::process::id()
    ));
    // Armed: every thread's first chunk restarts from a snapshot too.
    let recording = mtrace::start(mtrace::Config::new(&path).armed(true)).expect("trace file");
    let outer = mtrace::scope!("outer");
    assert!(recording.resume());
    let total = std::thread::scope(|s| {
        let a = s.spawn(|| serve(0, 1200, true));
        let b = s.spawn(|| serve(1_000_000, 1200, false));
        a.join().expect("thread a") + b.join().expect("thread b")
    });
    assert!(total > 0);
    drop(outer);
    recording.finish().expect("finished");

    let loaded = mtanalyze::load(&path).expect("load");
    let _ = std::fs::remove_file(&path);
    let plan = mtanalyze::plan::of(&loaded, &AnalyzeOptions::default()).expect("plans");
    assert!(plan.whole, "{plan:?}");
    assert_eq!(plan.engine, Engine::Stream, "{plan:?}");
    for clock in [Clock::Stack, Clock::Wall, Clock::Gil] {
        let opts = AnalyzeOptions {
            clock: Some(clock),
            ..AnalyzeOptions::default()
        };
        let batched = analyze_batched(&loaded, &opts).expect("analyzes");
        // The restarts are there: frames the snapshots open.
        assert!(
            batched
                .warnings
                .iter()
                .any(|w| w.kind == "frames_from_snapshot"),
            "{clock}: {:?}",
            batched.warnings
        );
        // A task of the other thread's that ran only while paused is not
        // in the trace.
        let tasks = batched
            .stacks
            .iter()
            .filter(|s| s.name.starts_with("task-"));
        assert!(tasks.count() > 2000, "{clock}");
        for step in [1, 97, 1 << 16] {
            let streamed = analyze_streamed_with(&loaded, &opts, step)
                .expect("analyzes")
                .unwrap_or_else(|| panic!("{clock}, step {step}: the stream gave up"));
            assert_eq!(streamed, batched, "{clock}, step {step}");
        }
    }
}

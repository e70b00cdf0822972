//! Parked workers are idle, not running: a runtime whose two workers wait
//! for a timer for most of the run. Each worker's own stack is paused
//! while it waits, and the waiting is on its idle stack (kind `idle`).

use std::time::Duration;

use mtanalyze::{
    report::{Clock, StackKey},
    AnalyzeOptions,
};
use mtrace::StackKind;

const SLEEP: Duration = Duration::from_millis(200);

#[test]
fn workers_waiting_for_work_are_on_idle_stacks_not_running() {
    let dir = std::env::temp_dir().join(format!("mtrace-tokio-park-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("park.mtrace");
    let recording = mtrace::start(mtrace::Config::new(&path)).expect("start");
    let runtime = mtrace_tokio::runtime()
        .worker_threads(2)
        .thread_name("parked-worker")
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let waiting = tokio::spawn(async { tokio::time::sleep(SLEEP).await });
        waiting.await.expect("task");
    });
    drop(runtime);
    recording.finish().expect("finish");

    let loaded = mtanalyze::load(&path).expect("load");
    let opts = AnalyzeOptions {
        clock: Some(Clock::Stack),
        ..AnalyzeOptions::default()
    };
    let report = mtanalyze::analyze(&loaded, &opts).expect("analyze");
    let idle: Vec<_> = report
        .stacks
        .iter()
        .filter(|s| s.kind == StackKind::Idle)
        .collect();
    // Both workers parked: each has an idle stack, named after it.
    assert_eq!(idle.len(), 2, "{:#?}", report.stacks);
    for s in &idle {
        assert_eq!(&*s.name, "idle parked-worker", "{s:?}");
        assert_eq!(s.threads.len(), 1, "{s:?}");
    }
    let sleep_ns = SLEEP.as_nanos() as u64;
    for s in &idle {
        let tid = s.threads[0];
        let own = report
            .stacks
            .iter()
            .find(|o| o.id == StackKey::Own(tid))
            .expect("the worker's own stack");
        // The worker waited most of the sleep: on its idle stack, while its
        // own stack was paused (not running).
        assert!(s.running_ns >= sleep_ns / 2, "idle {s:?}");
        assert!(own.running_ns < sleep_ns / 2, "own {own:?}");
        assert!(own.paused_ns >= sleep_ns / 2, "own {own:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

//! `mtrace_tokio::run`, the one line in place of `#[tokio::main]`: the
//! future's output comes back, and (with `--cfg tokio_unstable`) the tasks
//! it spawns run on logical stacks of their own, named by spawn site.

#[mtrace::profile]
async fn work(i: u64) -> u64 {
    tokio::task::yield_now().await;
    i * 2
}

/// What `#[tokio::main] async fn main` would have been.
async fn app() -> u64 {
    let tasks: Vec<_> = (0..8).map(|i| tokio::spawn(work(i))).collect();
    let mut sum = 0;
    for t in tasks {
        sum += t.await.expect("task");
    }
    // The timer driver is on, as under `#[tokio::main]`.
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    sum
}

#[test]
fn run_is_tokio_main_with_the_hooks() {
    let dir = std::env::temp_dir().join(format!("mtrace-tokio-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("run.mtrace");
    let recording = mtrace::start(mtrace::Config::new(&path)).expect("start");
    let sum = mtrace_tokio::run(app()).expect("runtime");
    recording.finish().expect("finish");
    assert_eq!(sum, 56);

    let loaded = mtanalyze::load(&path).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    let tasks = report
        .stacks
        .iter()
        .filter(|s| s.name.starts_with(file!()) && s.name.contains(" task-"))
        .inspect(|s| assert_eq!(s.kind, mtrace::StackKind::TokioTask, "{s:?}"))
        .count();
    let expected = if mtrace_tokio::HOOKS_AVAILABLE { 8 } else { 0 };
    assert_eq!(tasks, expected, "a stack per spawned task");
    let work = report.functions.iter().find(|f| f.function == "work");
    assert_eq!(work.map(|f| f.ncalls), Some(8));
    std::fs::remove_dir_all(&dir).ok();
}

//! Exact under any interleaving: thousands of tasks that wake each other
//! in a ring and yield, on 4 workers (on a 2-core machine most of them
//! are preempted now and then, which widens every race between a
//! worker's hooks), recorded and analyzed many times. Every run must be
//! exact: each function's call count, each task's stack holding exactly
//! its own frames (none on a worker's own stack), nothing open or cut
//! short, and no warning (`stack_on_two_threads` above all: a task's
//! stack entered by a second worker before the first left it).
//!
//! The race it guards against: tokio calls the after-poll hook after
//! `task.run()` returns, when the task may already have been woken and
//! handed to another worker, whose before-poll hook then runs first.
//!
//! ```sh
//! # the quick variant (4 runs) runs with the crate's tests; the long one (60 runs):
//! RUSTFLAGS="--cfg tokio_unstable" cargo test -p mtrace-tokio --test stress -- --ignored --nocapture
//! ```
//!
//! Needs `--cfg tokio_unstable` (see the README); without it this file has
//! no test.

#[cfg(tokio_unstable)]
mod with_hooks {
    use std::path::Path;
    use std::sync::{Arc, Mutex, Once};
    use std::time::Duration;

    use tokio::sync::Semaphore;
    use tracing_subscriber::layer::SubscriberExt;

    /// Tasks in the ring: their stacks all fit in the hooks' table.
    const TASKS: usize = 2000;
    /// Tasks in the larger ring: more than the hooks' table has entries
    /// (`ENTRIES` in `src/hooks.rs`), so that the stacks of some live in
    /// its overflow map, whose locks are then on the poll path.
    const MANY_TASKS: usize = 6000;
    /// Rounds each task makes: wake the next task, wait for the previous
    /// one, yield.
    const ROUNDS: usize = 12;
    /// Worker threads: more than the cores of a small machine.
    const WORKERS: usize = 4;

    /// One recording at a time in this process (tests run in parallel).
    static RECORDING: Mutex<()> = Mutex::new(());
    static SUBSCRIBER: Once = Once::new();

    #[mtrace::profile]
    async fn member(i: usize, ring: Arc<Vec<Semaphore>>) {
        for _ in 0..ROUNDS {
            step(i, &ring).await;
        }
    }

    #[mtrace::profile]
    async fn step(i: usize, ring: &[Semaphore]) {
        // Wakes the next task (if it waits), often on another worker.
        ring[(i + 1) % ring.len()].add_permits(1);
        turn(i, ring).await;
        tokio::task::yield_now().await;
    }

    /// A `tracing` span, as `#[instrument]` in a service: its frame opens
    /// on the task's stack, if the task runs on it.
    #[tracing::instrument(skip_all)]
    async fn turn(i: usize, ring: &[Semaphore]) {
        ring[i].acquire().await.expect("never closed").forget();
    }

    /// What one run got wrong (empty: exact).
    fn run_once(path: &Path, tasks: usize) -> Vec<String> {
        let recording =
            mtrace::start(mtrace::Config::new(path).capacity(256 << 20)).expect("start");
        let rt = mtrace_tokio::instrument(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all(),
        )
        .build()
        .expect("runtime");
        rt.block_on(async {
            let ring: Arc<Vec<Semaphore>> =
                Arc::new((0..tasks).map(|_| Semaphore::new(0)).collect());
            let handles: Vec<_> = (0..tasks)
                .map(|i| tokio::spawn(member(i, ring.clone())))
                .collect();
            tokio::time::timeout(Duration::from_secs(120), async {
                for t in handles {
                    t.await.expect("task");
                }
            })
            .await
            .expect("tasks done in time");
        });
        drop(rt);
        recording.finish().expect("finish");

        let loaded = mtanalyze::load(path).expect("load");
        let report =
            mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
        let mut wrong = Vec::new();
        for (name, calls) in [
            ("member", tasks),
            ("step", tasks * ROUNDS),
            ("turn", tasks * ROUNDS),
        ] {
            match report.functions.iter().find(|f| f.function == name) {
                Some(f) => {
                    if f.ncalls != calls as u64 || f.open_at_end != 0 || f.cut_short != 0 {
                        wrong.push(format!(
                            "{name}: {} calls (want {calls}), {} open at end, {} cut short",
                            f.ncalls, f.open_at_end, f.cut_short
                        ));
                    }
                }
                None => wrong.push(format!("{name}: not in the report")),
            }
        }
        // Each task's stack: its member, and a step and a turn per round,
        // each entered and exited once, three deep; nothing elsewhere.
        let per_task = 2 * (1 + 2 * ROUNDS) as u64;
        let mut task_stacks = 0;
        for s in &report.stacks {
            if s.name.contains(" task-") {
                task_stacks += 1;
                if s.events != per_task || s.max_depth != 3 || !s.ended {
                    wrong.push(format!(
                        "stack {} ({}): {} events (want {per_task}), depth {}, ended {}",
                        s.id, s.name, s.events, s.max_depth, s.ended
                    ));
                }
            } else if s.events != 0 {
                wrong.push(format!(
                    "stack {} ({}): {} events outside every task",
                    s.id, s.name, s.events
                ));
            }
        }
        if task_stacks != tasks {
            wrong.push(format!("{task_stacks} task stacks (want {tasks})"));
        }
        for w in &report.warnings {
            wrong.push(format!("warning {}", w.brief()));
        }
        wrong
    }

    /// Runs the ring `runs` times; panics with what each inexact run got
    /// wrong (the first lines of each).
    fn exact_every_time(runs: usize, tasks: usize) {
        let _one_at_a_time = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
        SUBSCRIBER.call_once(|| {
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(mtrace_tracing::layer()),
            )
            .expect("the only subscriber");
        });
        let dir = std::env::temp_dir().join(format!("mtrace-tokio-stress-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut inexact = Vec::new();
        for run in 0..runs {
            let path = dir.join(format!("run-{run}.mtrace"));
            let wrong = run_once(&path, tasks);
            std::fs::remove_file(&path).ok();
            if !wrong.is_empty() {
                eprintln!("run {run}: {} problems, first: {}", wrong.len(), wrong[0]);
                inexact.push((run, wrong));
            }
        }
        std::fs::remove_dir_all(&dir).ok();
        eprintln!("{} of {runs} runs exact", runs - inexact.len());
        assert!(
            inexact.is_empty(),
            "{} of {runs} runs not exact: {:#?}",
            inexact.len(),
            inexact
                .iter()
                .map(|(run, wrong)| (run, wrong.len(), &wrong[..wrong.len().min(5)]))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_ring_of_tasks_is_exact_on_every_run() {
        exact_every_time(4, TASKS);
    }

    #[test]
    fn a_ring_larger_than_the_hooks_table_is_exact() {
        exact_every_time(2, MANY_TASKS);
    }

    #[test]
    #[ignore = "long: 60 runs; see the module docs for the command"]
    fn a_ring_of_tasks_is_exact_on_every_one_of_many_runs() {
        exact_every_time(60, TASKS);
    }
}

//! Why a task waited (issue 19), on real tokio runtimes: the future
//! adapter's wakes split a task's paused time into waiting (for its timer)
//! and scheduled (woken, waiting for a worker). Checked through the
//! analyzer's library, as a user's `mtanalyze` run would see them. The
//! bounds are generous (the machine is shared); they test the split, not
//! the timings.

mod common;

use std::time::{Duration, Instant};

use common::{serial, TempTrace};
use mtrace::{Config, LogicalStackExt};

fn busy(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// (paused, scheduled, waiting) in ms of each stack, by name.
fn split(trace: &std::path::Path) -> Vec<(String, f64, f64, f64)> {
    let loaded = mtanalyze::load(trace).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    let ms = |ns: u64| ns as f64 / 1e6;
    report
        .stacks
        .iter()
        .map(|s| {
            assert_eq!(s.scheduled_ns + s.waiting_ns, s.paused_ns);
            (
                s.name.to_string(),
                ms(s.paused_ns),
                ms(s.scheduled_ns),
                ms(s.waiting_ns),
            )
        })
        .collect()
}

fn find<'a>(rows: &'a [(String, f64, f64, f64)], name: &str) -> &'a (String, f64, f64, f64) {
    rows.iter()
        .find(|r| r.0 == name)
        .unwrap_or_else(|| panic!("no stack {name}: {rows:?}"))
}

/// Set from another thread after a delay, like an I/O completion: the
/// waker runs on that thread at that moment.
#[derive(Default)]
struct Signal(std::sync::Mutex<(bool, Option<std::task::Waker>)>);

impl Signal {
    fn fire(&self) {
        let mut s = self.0.lock().unwrap();
        s.0 = true;
        if let Some(w) = s.1.take() {
            w.wake();
        }
    }

    async fn wait(&self) {
        std::future::poll_fn(|cx| {
            let mut s = self.0.lock().unwrap();
            if s.0 {
                std::task::Poll::Ready(())
            } else {
                s.1 = Some(cx.waker().clone());
                std::task::Poll::Pending
            }
        })
        .await
    }
}

/// A current-thread runtime: task A waits for a signal another thread
/// gives after 20 ms; task B busy-loops 70 ms. A is woken at ~20 ms while
/// B holds the only thread, so A waits ~20 ms for its signal, then ~50 ms
/// scheduled. (A tokio timer would not show this on a current-thread
/// runtime: its driver fires timers only when the thread is free, so the
/// wake itself comes late.)
#[test]
fn a_task_woken_while_another_holds_the_thread_is_scheduled() {
    let _serial = serial();
    let trace = TempTrace::new("wakes-current-thread");
    let recording = mtrace::start(Config::new(trace.path()).capacity(8 << 20)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let signal = std::sync::Arc::new(Signal::default());
    let firing = signal.clone();
    let io = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        firing.fire();
    });
    rt.block_on(async {
        let a = tokio::spawn(async move { signal.wait().await }.on_logical_stack("task-A"));
        let b = tokio::spawn(
            async {
                // Let A start (and wait) first.
                tokio::task::yield_now().await;
                busy(Duration::from_millis(70));
            }
            .on_logical_stack("task-B"),
        );
        a.await.unwrap();
        b.await.unwrap();
    });
    io.join().unwrap();
    recording.finish().unwrap();
    let rows = split(trace.path());
    let a = find(&rows, "task-A");
    assert!(
        a.2 >= 40.0,
        "A scheduled {:.1} ms, expected ~50: {rows:?}",
        a.2
    );
    assert!(
        a.3 >= 15.0 && a.3 < 40.0,
        "A waiting {:.1} ms, expected ~20: {rows:?}",
        a.3
    );
    let b = find(&rows, "task-B");
    // B yields once at the start, then runs to its end: no 50 ms wait.
    assert!(b.2 < 5.0, "B scheduled {:.1} ms: {rows:?}", b.2);
}

/// A 2-worker runtime with 8 tasks that busy-loop 20 ms after a 1 ms
/// sleep: more ready tasks than workers, so tasks wait scheduled. With 2
/// such tasks (idle workers), almost none.
#[test]
fn more_ready_tasks_than_workers_show_scheduled_time_and_idle_workers_none() {
    let run = |tasks: usize, name: &str| -> f64 {
        let _serial = serial();
        let trace = TempTrace::new(name);
        let recording = mtrace::start(Config::new(trace.path()).capacity(8 << 20)).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let handles: Vec<_> = (0..tasks)
                .map(|i| {
                    tokio::spawn(
                        async {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            busy(Duration::from_millis(20));
                        }
                        .on_logical_stack(format!("busy-{i}")),
                    )
                })
                .collect();
            for h in handles {
                h.await.unwrap();
            }
        });
        drop(rt);
        recording.finish().unwrap();
        split(trace.path())
            .iter()
            .filter(|r| r.0.starts_with("busy-"))
            .map(|r| r.2)
            .sum()
    };
    let crowded = run(8, "wakes-crowded");
    let idle = run(2, "wakes-idle");
    // 8 tasks of 20 ms on 2 workers: the last ones wait ~60 ms each.
    assert!(
        crowded >= 100.0,
        "8 tasks on 2 workers: {crowded:.1} ms scheduled in all"
    );
    assert!(
        idle < crowded / 5.0,
        "2 tasks on 2 workers: {idle:.1} ms vs {crowded:.1}"
    );
}

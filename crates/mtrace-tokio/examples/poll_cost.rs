//! What the hooks cost per poll, beside `.on_logical_stack()` and nothing:
//! 64 tasks x 64 polls (`yield_now`) on a 2-worker runtime, recording into
//! a trace on `/dev/shm`, best of 15 runs of each.
//!
//! ```sh
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/tokio-unstable \
//!     cargo run --release -p mtrace-tokio --example poll_cost
//! ```

use std::time::{Duration, Instant};

use mtrace::LogicalStackExt;

const TASKS: usize = 64;
const POLLS: usize = 64;

async fn work() {
    for _ in 1..POLLS {
        tokio::task::yield_now().await;
    }
}

/// ns per poll of the best run; `hooks`: the runtime has them,
/// `adapter`: each task is wrapped in `.on_logical_stack()`.
fn run(hooks: bool, adapter: bool) -> f64 {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2);
    if hooks {
        mtrace_tokio::instrument(&mut builder);
    }
    let rt = builder.build().unwrap();
    let mut best = Duration::MAX;
    for _ in 0..15 {
        let start = Instant::now();
        rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|_| {
                    if adapter {
                        tokio::spawn(work().on_logical_stack("task"))
                    } else {
                        tokio::spawn(work())
                    }
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        best = best.min(start.elapsed());
    }
    best.as_nanos() as f64 / (TASKS * POLLS) as f64
}

fn main() {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let path = dir.join(format!(
        "mtrace-tokio-poll-cost-{}.mtrace",
        std::process::id()
    ));
    let recording = mtrace::start(mtrace::Config::new(&path).capacity(256 << 20)).unwrap();
    let none = run(false, false);
    let adapter = run(false, true);
    let hooks = run(true, false);
    let summary = recording.finish().unwrap();
    std::fs::remove_file(&path).ok();
    println!("hooks available: {}", mtrace_tokio::HOOKS_AVAILABLE);
    println!("ns per poll: none {none:.1}  on_logical_stack {adapter:.1}  hooks {hooks:.1}");
    println!(
        "over none: on_logical_stack {:.1}  hooks {:.1}  ({} events, {} dropped)",
        adapter - none,
        hooks - none,
        summary.events,
        summary.dropped_events
    );
}

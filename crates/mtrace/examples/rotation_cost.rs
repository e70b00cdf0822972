//! What a rotation costs the threads that record: each worker times every
//! `scope!` pair it records and keeps the slowest one of each stretch
//! between switches (a thread moving to the next file claims a chunk and
//! names itself there: the slowest pair of a stretch is that move when it
//! happens in it), and the run prints the medians of those maxima and the
//! mean pair, with and without rotation (see the crate's README).
//!
//! ```text
//! cargo run --release -p mtrace --example rotation_cost -- 20 2 1
//! ```
//!
//! Arguments: the rotation's age in ms, the recording's length in s, and
//! the number of threads (default 1: on a two-core machine the rotation
//! thread then has a core of its own, and the slowest pair is the
//! thread's move, not a preemption).

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Runs scope pairs for `run`, split in stretches of `stretch`; returns the
/// slowest pair of each stretch and the mean pair (ns).
fn worker(run: Duration, stretch: Duration) -> (Vec<u64>, f64) {
    let start = Instant::now();
    let mut maxima = Vec::new();
    let (mut pairs, mut stretch_end) = (0u64, start + stretch);
    let mut slowest = 0u64;
    loop {
        let t0 = Instant::now();
        {
            let _frame = mtrace::scope!("pair");
            black_box(pairs);
        }
        let t1 = Instant::now();
        pairs += 1;
        slowest = slowest.max((t1 - t0).as_nanos() as u64);
        if t1 >= stretch_end {
            maxima.push(slowest);
            slowest = 0;
            stretch_end += stretch;
            if t1 - start >= run {
                break;
            }
        }
    }
    let mean = start.elapsed().as_nanos() as f64 / pairs as f64;
    (maxima, mean)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn measure(
    threads: usize,
    age: Option<Duration>,
    run: Duration,
    stretch: Duration,
) -> (u64, f64, u64) {
    let dir = std::env::temp_dir().join(format!("mtrace-rotation-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut config = mtrace::Config::new(dir.join("trace.bin")).keep(2);
    if let Some(age) = age {
        config = config.rotate(mtrace::Rotation::Every(age));
    }
    let recording = mtrace::start(config).expect("trace file");
    let workers: Vec<_> = (0..threads)
        .map(|_| std::thread::spawn(move || worker(run, stretch)))
        .collect();
    let results: Vec<(Vec<u64>, f64)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let summary = recording.finish().expect("finished");
    let _ = std::fs::remove_dir_all(&dir);
    let maxima: Vec<u64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    let mean = results.iter().map(|r| r.1).sum::<f64>() / results.len() as f64;
    (median(maxima), mean, summary.files)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let age_ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let run_s: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let (age, run) = (Duration::from_millis(age_ms), Duration::from_secs(run_s));
    let (still_max, still_mean, _) = measure(threads, None, run, age);
    let (rotating_max, rotating_mean, files) = measure(threads, Some(age), run, age);
    println!("{threads} threads, {run_s} s, stretches of {age_ms} ms");
    println!("no rotation:   slowest pair per stretch (median) {still_max} ns, mean pair {still_mean:.1} ns");
    println!(
        "rotating ({files} files): slowest pair per stretch (median) {rotating_max} ns, mean pair {rotating_mean:.1} ns"
    );
}

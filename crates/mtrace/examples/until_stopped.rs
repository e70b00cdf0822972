//! A program that records until it is told to stop: the recording a live
//! view (`mtanalyze top`) watches in the analyzer's tests.
//!
//! ```text
//! cargo run -p mtrace --example until_stopped -- trace.bin
//! ```
//!
//! Two threads call `step` (which calls `leaf`) in a loop, pausing a
//! little between calls so the file grows slowly, until standard input
//! ends (close it, or press Ctrl-D); then the recording is finished and
//! the program prints how many steps ran. It prints `recording` once the
//! recording has started.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);
static STEPS: AtomicU64 = AtomicU64::new(0);

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: until_stopped TRACE");
        return std::process::ExitCode::from(2);
    };
    // Small chunks: the analyzer sees new ones committed every few ms.
    let config = mtrace::Config::new(path).chunk_size(4096);
    let recording = match mtrace::start(config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("until_stopped: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    println!("recording");
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !STOP.load(Ordering::Relaxed) {
                    step();
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
        }
        // Standard input's end is the signal to stop.
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        STOP.store(true, Ordering::Relaxed);
    });
    drop(recording);
    println!("steps: {}", STEPS.load(Ordering::Relaxed));
    std::process::ExitCode::SUCCESS
}

#[mtrace::profile]
fn step() {
    STEPS.fetch_add(1, Ordering::Relaxed);
    leaf();
}

#[mtrace::profile]
fn leaf() -> u64 {
    (0..64u64).map(|i| i * i).sum()
}

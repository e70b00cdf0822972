//! A server recorded on demand: it starts with the recorder armed but
//! idle, and `kill -USR2 PID` switches recording on and off.
//!
//! ```text
//! cargo run -p mtrace --example armed_server -- server.mtrace
//! ```
//!
//! It reads commands on stdin, one a line, and answers each on stdout:
//! `work N` hands N requests to its worker threads and answers
//! `done N` once they are handled; `paused?` answers `paused true` or
//! `paused false`; `quit` (or the end of stdin) finishes the recording
//! and prints `handled N recorded M`: M is how many requests were
//! handled while the recorder recorded (each handler looks when it
//! starts), which is what the trace's `handle` count must be.
//! `crates/mtrace/tests/on_demand.rs` runs it under `kill -USR2`.

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

const WORKERS: usize = 3;

/// Requests handled while the recorder recorded (not paused).
static RECORDED: AtomicU64 = AtomicU64::new(0);
static HANDLED: AtomicU64 = AtomicU64::new(0);

#[mtrace::profile]
fn checksum(seed: u64) -> u64 {
    (0..200u64).fold(seed, |acc, i| {
        acc.rotate_left(5) ^ i.wrapping_mul(0x9e37_79b9)
    })
}

#[mtrace::profile]
fn handle(request: u64) -> u64 {
    if !mtrace::is_paused() {
        RECORDED.fetch_add(1, Ordering::Relaxed);
    }
    HANDLED.fetch_add(1, Ordering::Relaxed);
    checksum(request) ^ checksum(request + 1)
}

/// A worker: takes requests until the queue closes, reporting each one done.
#[mtrace::profile]
fn serve(queue: Arc<Mutex<mpsc::Receiver<u64>>>, done: mpsc::Sender<u64>) {
    loop {
        let next = queue.lock().map(|q| q.recv());
        let Ok(Ok(request)) = next else {
            return;
        };
        let _ = done.send(handle(request));
    }
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "server.mtrace".into());
    serve_commands(&path);
}

/// The server: records armed into `path`, answers stdin's commands until
/// `quit`. (`crates/mtrace/tests/on_demand.rs` includes this file and runs
/// it in a child process of its own.)
pub fn serve_commands(path: &str) {
    let recording = mtrace::start(mtrace::Config::new(path).armed(true).signal(libc_sigusr2()))
        .expect("trace file");
    let (requests, queue) = mpsc::channel::<u64>();
    let queue = Arc::new(Mutex::new(queue));
    let (done, results) = mpsc::channel::<u64>();
    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            let (queue, done) = (Arc::clone(&queue), done.clone());
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || serve(queue, done))
                .expect("worker thread")
        })
        .collect();
    let mut next_request = 0u64;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["work", n] => {
                let n: u64 = n.parse().expect("work N");
                for _ in 0..n {
                    next_request += 1;
                    requests.send(next_request).expect("workers run");
                }
                for _ in 0..n {
                    results.recv().expect("workers run");
                }
                println!("done {n}");
            }
            ["paused?"] => println!("paused {}", mtrace::is_paused()),
            ["quit"] => break,
            _ => println!("unknown command: {line}"),
        }
    }
    drop(requests);
    for worker in workers {
        worker.join().expect("worker");
    }
    recording.finish().expect("finished");
    println!(
        "handled {} recorded {}",
        HANDLED.load(Ordering::Relaxed),
        RECORDED.load(Ordering::Relaxed)
    );
}

/// SIGUSR2 (the example needs no `libc` of its own for one number).
fn libc_sigusr2() -> i32 {
    mtrace::parse_signal("SIGUSR2").expect("SIGUSR2")
}

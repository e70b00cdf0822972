//! A workload with every shape of work mtrace is for, recorded into one trace.
//!
//! ```text
//! cargo run --release -p mtrace --example workload -- \
//!     --threads 4 --fibers 8 --seconds 2 --out workload.mtrace [--mode ring|stop] [--capacity 64M]
//! ```
//!
//! * `--threads N` threads contend for one shared `Mutex` (`critical section`
//!   frames show the time spent holding it, `update shared` the time waiting
//!   plus holding);
//! * they also run direct recursion (`fib`) and mutual recursion (a
//!   recursive-descent parser: `parse_expr` -> `parse_term` -> `parse_factor`
//!   -> `parse_expr`);
//! * `--fibers M` fibers, each with its own `LogicalStack`, are run a step at
//!   a time by a pool of `--workers W` threads pulling them from a shared
//!   queue, so a fiber's steps land on different threads while its
//!   `fiber main` frame stays open on its own stack from first step to last;
//! * one more thread starts late, a third of the way through;
//! * `--pace MICROS` makes the threads sleep (in `wait for input`) between
//!   rounds and the workers between fiber steps, for sparser, longer traces.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use mtrace::{Config, FunctionId, LogicalStack, Mode};

struct Args {
    threads: usize,
    fibers: usize,
    workers: usize,
    seconds: f64,
    out: String,
    mode: Mode,
    capacity: u64,
    chunk_size: usize,
    meta_capacity: usize,
    pace: Duration,
}

const USAGE: &str = "usage: workload [--threads N] [--fibers M] [--workers W] [--seconds S] [--out FILE] \
                     [--mode ring|stop] [--capacity BYTES] [--chunk-size BYTES] [--meta-capacity BYTES] \
                     [--pace MICROSECONDS]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        threads: 4,
        fibers: 8,
        workers: 2,
        seconds: 1.0,
        out: "workload.mtrace".into(),
        mode: Mode::StopWhenFull,
        capacity: 64 << 20,
        chunk_size: mtrace_format::layout::DEFAULT_CHUNK_SIZE,
        meta_capacity: mtrace::DEFAULT_META_CAPACITY,
        pace: Duration::ZERO,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let bad = |what: &str| format!("{flag} {value}: expected {what}");
        let bytes = || mtrace::parse_bytes(&value).ok_or_else(|| bad("a byte count such as 4M"));
        match flag.as_str() {
            "--threads" => args.threads = value.parse().map_err(|_| bad("a number"))?,
            "--fibers" => args.fibers = value.parse().map_err(|_| bad("a number"))?,
            "--workers" => {
                args.workers = value.parse::<usize>().map_err(|_| bad("a number"))?.max(1)
            }
            "--seconds" => args.seconds = value.parse().map_err(|_| bad("seconds, such as 0.5"))?,
            "--out" => args.out = value.clone(),
            "--capacity" => args.capacity = bytes()?,
            "--chunk-size" => args.chunk_size = bytes()? as usize,
            "--meta-capacity" => args.meta_capacity = bytes()? as usize,
            "--pace" => {
                args.pace = Duration::from_micros(value.parse().map_err(|_| bad("microseconds"))?)
            }
            "--mode" => {
                args.mode = match value.as_str() {
                    "ring" => Mode::Ring,
                    "stop" => Mode::StopWhenFull,
                    _ => return Err(bad("`ring` or `stop`")),
                }
            }
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    Ok(args)
}

// ------------------------------------------------------------- recursion

#[mtrace::profile]
fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

/// A recursive-descent parser over `+ - * ( )` and digits: mutual recursion.
struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    #[mtrace::profile]
    fn parse_expr(&mut self) -> i64 {
        let mut value = self.parse_term();
        while let Some(&op) = self.bytes.get(self.at) {
            match op {
                b'+' | b'-' => {
                    self.at += 1;
                    let rhs = self.parse_term();
                    value = if op == b'+' {
                        value.wrapping_add(rhs)
                    } else {
                        value.wrapping_sub(rhs)
                    };
                }
                _ => break,
            }
        }
        value
    }

    #[mtrace::profile]
    fn parse_term(&mut self) -> i64 {
        let mut value = self.parse_factor();
        while self.bytes.get(self.at) == Some(&b'*') {
            self.at += 1;
            value = value.wrapping_mul(self.parse_factor());
        }
        value
    }

    #[mtrace::profile]
    fn parse_factor(&mut self) -> i64 {
        match self.bytes.get(self.at) {
            Some(b'(') => {
                self.at += 1;
                let v = self.parse_expr();
                self.at += 1; // ')'
                v
            }
            _ => {
                let start = self.at;
                while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
                    self.at += 1;
                }
                std::str::from_utf8(&self.bytes[start..self.at])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0)
            }
        }
    }
}

/// A nested expression such as `(1+(2*(3-4)))` of the given depth.
fn expression(depth: u32, seed: u64) -> String {
    if depth == 0 {
        return (seed % 10).to_string();
    }
    let op = ['+', '-', '*'][(seed % 3) as usize];
    format!("({}{op}{})", seed % 7, expression(depth - 1, seed / 3 + 1))
}

// ------------------------------------------------------------- contention

#[mtrace::profile(name = "update shared")]
fn update_shared(shared: &Mutex<Vec<u64>>, value: u64) {
    let mut v = shared.lock().unwrap_or_else(|e| e.into_inner());
    let _held = mtrace::scope!("critical section");
    let len = v.len();
    v[value as usize % len] = v[value as usize % len].wrapping_mul(31).wrapping_add(value);
    // Hold the lock for a little while so the threads really contend.
    v[0] ^= spin(2_000 + value % 1_000);
}

/// Uninstrumented work: about `n` multiply-adds.
fn spin(n: u64) -> u64 {
    let mut x = n;
    for _ in 0..n {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x
}

#[mtrace::profile]
fn thread_round(shared: &Mutex<Vec<u64>>, round: u64) -> u64 {
    update_shared(shared, round);
    let mut sum = fib(4 + (round % 4) as u32);
    let text = expression(2 + (round % 3) as u32, round);
    sum = sum.wrapping_add(
        Parser {
            bytes: text.as_bytes(),
            at: 0,
        }
        .parse_expr() as u64,
    );
    sum
}

#[mtrace::profile(name = "wait for input")]
fn wait_for_input(pace: Duration) {
    std::thread::sleep(pace);
}

fn contended_thread(
    shared: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicU64>,
    pace: Duration,
) -> u64 {
    let mut sum = 0u64;
    let mut round = 0;
    while !stop.load(Ordering::Relaxed) {
        sum = sum.wrapping_add(thread_round(&shared, round));
        if !pace.is_zero() {
            wait_for_input(pace);
        }
        round += 1;
    }
    rounds.fetch_add(round, Ordering::Relaxed);
    sum
}

// ------------------------------------------------------------- fibers

/// A fiber: a logical stack and how far it got. Its `fiber main` frame is
/// open from its first step to its last, whichever threads run the steps.
struct Fiber {
    stack: LogicalStack,
    step: u32,
    steps: u32,
    seed: u64,
}

struct FiberQueue {
    state: Mutex<(VecDeque<Fiber>, u64)>,
    ready: Condvar,
}

fn fiber_step(fiber: &mut Fiber, main: FunctionId) -> bool {
    let _on_fiber = fiber.stack.enter();
    if fiber.step == 0 {
        mtrace::enter(main);
    }
    {
        let _step = mtrace::scope!("fiber step");
        let text = expression(2 + fiber.step % 3, fiber.seed + fiber.step as u64);
        std::hint::black_box(
            Parser {
                bytes: text.as_bytes(),
                at: 0,
            }
            .parse_expr(),
        );
        std::hint::black_box(fib(4 + fiber.step % 5));
        spin(20_000);
    }
    fiber.step += 1;
    let done = fiber.step == fiber.steps;
    if done {
        mtrace::exit(main);
    }
    done
}

fn fiber_worker(queue: Arc<FiberQueue>, stop: Arc<AtomicBool>, main: FunctionId, pace: Duration) {
    loop {
        let mut fiber = {
            let mut state = queue.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(f) = state.0.pop_front() {
                    break f;
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                state = queue
                    .ready
                    .wait_timeout(state, Duration::from_millis(10))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        };
        let done = fiber_step(&mut fiber, main);
        if !pace.is_zero() {
            // The worker does other things between fiber steps.
            std::thread::sleep(pace);
        }
        let mut state = queue.state.lock().unwrap_or_else(|e| e.into_inner());
        if done {
            state.1 += 1;
            if !stop.load(Ordering::Relaxed) {
                // Replace it with a fresh fiber.
                let n = state.1;
                state.0.push_back(new_fiber(n));
            }
        } else {
            // Yield: back to the end of the queue, maybe for another worker.
            state.0.push_back(fiber);
        }
        queue.ready.notify_one();
    }
}

fn new_fiber(n: u64) -> Fiber {
    Fiber {
        stack: LogicalStack::new(format!("fiber-{n}")),
        step: 0,
        steps: 3 + (n % 5) as u32,
        seed: n * 7919,
    }
}

// ------------------------------------------------------------- main

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let config = Config::new(&args.out)
        .capacity(args.capacity)
        .mode(args.mode)
        .chunk_size(args.chunk_size)
        .meta_capacity(args.meta_capacity);
    let pace = args.pace;
    let recording = match mtrace::start(config) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("workload: not recording: {e} (running unprofiled)");
            None
        }
    };
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Mutex::new(vec![1u64; 64]));
    let rounds = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for t in 0..args.threads {
        let (shared, stop, rounds) = (shared.clone(), stop.clone(), rounds.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("contended-{t}"))
                .spawn(move || {
                    contended_thread(shared, stop, rounds, pace);
                })
                .expect("spawn"),
        );
    }
    let fiber_main = mtrace::register_function("fiber main", file!(), line!(), module_path!());
    let queue = Arc::new(FiberQueue {
        state: Mutex::new(((0..args.fibers as u64).map(new_fiber).collect(), 0)),
        ready: Condvar::new(),
    });
    for w in 0..args.workers {
        let (queue, stop) = (queue.clone(), stop.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("fiber-worker-{w}"))
                .spawn(move || fiber_worker(queue, stop, fiber_main, pace))
                .expect("spawn"),
        );
    }
    let run_for = Duration::from_secs_f64(args.seconds.max(0.0));
    std::thread::sleep(run_for / 3);
    {
        let (shared, stop, rounds) = (shared.clone(), stop.clone(), rounds.clone());
        handles.push(
            std::thread::Builder::new()
                .name("late".into())
                .spawn(move || {
                    contended_thread(shared, stop, rounds, pace);
                })
                .expect("spawn"),
        );
    }
    std::thread::sleep(run_for.saturating_sub(started.elapsed()));
    stop.store(true, Ordering::Relaxed);
    queue.ready.notify_all();
    for h in handles {
        let _ = h.join();
    }
    let fibers_done = queue.state.lock().unwrap_or_else(|e| e.into_inner()).1;
    println!(
        "work: {} contended rounds on {} threads (+1 late), {} fibers finished on {} workers, {:.2} s",
        rounds.load(Ordering::Relaxed),
        args.threads,
        fibers_done,
        args.workers,
        started.elapsed().as_secs_f64()
    );
    let Some(recording) = recording else {
        return ExitCode::from(1);
    };
    match recording.finish() {
        Ok(s) => {
            println!("trace: {}", s.path.display());
            println!(
                "events: {} in {} of {} chunks, {} threads, {} dropped events, {} skipped chunk claims{}",
                s.events,
                s.chunks,
                s.chunk_count,
                s.threads,
                s.dropped_events,
                s.dropped_chunks,
                if s.wrapped { ", ring wrapped" } else { "" }
            );
            println!(
                "metadata: {} bytes, {} records dropped",
                s.meta_bytes, s.meta_dropped
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("workload: {e}");
            ExitCode::from(1)
        }
    }
}

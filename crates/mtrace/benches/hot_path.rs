//! The recorder's hot path against the hardware floor, measured in one run.
//!
//! `cargo bench -p mtrace` prints the median nanoseconds per event of
//! `enter` + `exit` pairs on one thread and on two threads at once, next to
//! the floor: a loop that only reads the TSC and stores the same 16 bytes
//! into a buffer of the same size as the recorder's ring. Both write into
//! memory that was touched once before timing starts, so page faults are
//! not measured. The last line, `recorder_vs_floor_ratio: X`, is the
//! one-thread median divided by the one-thread floor median.
//!
//! It also times the drop of a `LogicalStack` (the median ns per drop of
//! batches of anonymous stacks, made and switched onto outside the timing):
//! one that ran in the recording writes an `end`; one never entered, or
//! dropped after the recording finished, only checks.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use mtrace::{Config, FunctionId, LogicalStack, Mode};
use mtrace_format::event::encode_enter;

/// Bytes of the ring, and of the floor's buffer.
const CAPACITY: usize = 4 << 20;
/// enter+exit pairs per timed sample.
const PAIRS: usize = 10_000;
/// Timed samples per measurement.
const SAMPLES: usize = 301;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median ns per event of `SAMPLES` runs of `sample`, each recording `events` events.
fn measure(events: usize, mut sample: impl FnMut()) -> f64 {
    // Warm up: touch the whole ring / buffer at least twice.
    for _ in 0..(2 * CAPACITY / (16 * events)).max(10) {
        sample();
    }
    let times = (0..SAMPLES)
        .map(|_| {
            let t = Instant::now();
            sample();
            t.elapsed().as_nanos() as f64 / events as f64
        })
        .collect();
    median(times)
}

/// Stacks dropped per timed sample of the drop measurements.
const STACKS: usize = 4096;
/// Timed samples of each drop measurement.
const DROP_SAMPLES: usize = 51;

/// Batches of `STACKS` anonymous stacks for the drop measurements, each
/// switched onto once (in whatever recording runs) if `entered`.
fn stack_batches(entered: bool) -> Vec<Vec<LogicalStack>> {
    (0..DROP_SAMPLES)
        .map(|_| {
            let mut stacks: Vec<LogicalStack> =
                (0..STACKS).map(|_| LogicalStack::anonymous()).collect();
            if entered {
                for s in &mut stacks {
                    drop(s.enter());
                }
            }
            stacks
        })
        .collect()
}

/// Median ns per stack of dropping each batch.
fn drops(batches: Vec<Vec<LogicalStack>>) -> f64 {
    let times = batches
        .into_iter()
        .map(|mut stacks| {
            // In the cache first, as a task's stack is when its task ends.
            black_box(stacks.iter().map(|s| s.id().0).sum::<u64>());
            let t = Instant::now();
            // Drops every stack in place; the vector keeps its buffer.
            stacks.clear();
            let ns = t.elapsed().as_nanos() as f64 / STACKS as f64;
            black_box(stacks);
            ns
        })
        .collect();
    median(times)
}

/// One thread's floor: read the TSC, store 16 bytes, advance, wrap.
fn floor() -> f64 {
    let mut buffer = vec![0u8; CAPACITY];
    let base = black_box(buffer.as_mut_ptr());
    let mut at = 0usize;
    let f = black_box(FunctionId(1));
    let result = measure(2 * PAIRS, || {
        for _ in 0..2 * PAIRS {
            let bytes = encode_enter(mtrace::bench::read_tsc(), f);
            // SAFETY: `at + 16 <= CAPACITY`.
            unsafe { (base.add(at) as *mut [u8; 16]).write(bytes) };
            at += 16;
            if at == CAPACITY {
                at = 0;
            }
        }
    });
    black_box(&buffer);
    result
}

fn recorder(f: FunctionId) -> f64 {
    measure(2 * PAIRS, || {
        for _ in 0..PAIRS {
            mtrace::enter(f);
            mtrace::exit(f);
        }
    })
}

/// Runs `work` on two threads started together; returns both results.
fn two_threads(work: fn(FunctionId) -> f64, f: FunctionId) -> [f64; 2] {
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                work(f)
            })
        })
        .collect();
    let results: Vec<f64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    [results[0], results[1]]
}

fn trace_path() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    let dir = if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("mtrace-bench-{}.mtrace", std::process::id()))
}

fn main() {
    // Tools that enumerate benchmarks run `hot_path --list`: there is nothing to list.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let path = trace_path();
    let f = mtrace::register_function("bench", file!(), line!(), module_path!());
    println!(
        "clock: {}",
        if mtrace::bench::has_invariant_tsc() {
            "invariant TSC"
        } else {
            "monotonic (no invariant TSC)"
        }
    );
    println!(
        "ring: {} KiB in {} ({} pairs per sample, {} samples)",
        CAPACITY >> 10,
        path.display(),
        PAIRS,
        SAMPLES
    );

    let floor_1 = floor();
    let recording = mtrace::start(
        Config::new(&path)
            .capacity(CAPACITY as u64)
            .mode(Mode::Ring),
    )
    .expect("start recording");
    let rec_1 = std::thread::spawn(move || recorder(f)).join().unwrap();
    let floor_2 = two_threads(|_| floor(), f);
    let rec_2 = two_threads(recorder, f);
    let drop_end = drops(stack_batches(true));
    let drop_unentered = drops(stack_batches(false));
    let entered_before_finish = stack_batches(true);
    let summary = recording.finish().expect("finish");
    let off = recorder(f);
    let drop_off = drops(entered_before_finish);
    let _ = std::fs::remove_file(&path);

    let rec_2_worst = rec_2[0].max(rec_2[1]);
    let floor_2_worst = floor_2[0].max(floor_2[1]);
    println!("floor (rdtsc + 16-byte store), 1 thread:     {floor_1:6.2} ns/event");
    println!(
        "recorder enter+exit, 1 thread:               {rec_1:6.2} ns/event  ({:.2}x floor)",
        rec_1 / floor_1
    );
    println!(
        "floor, 2 threads at once:                    {:6.2} / {:6.2} ns/event",
        floor_2[0], floor_2[1]
    );
    println!(
        "recorder enter+exit, 2 threads at once:      {:6.2} / {:6.2} ns/event  ({:.2}x floor, {:.2}x one thread)",
        rec_2[0],
        rec_2[1],
        rec_2_worst / floor_2_worst,
        rec_2_worst / rec_1
    );
    println!("not recording, enter+exit:                   {off:6.2} ns/event");
    println!("LogicalStack drop, ran in the recording (end): {drop_end:6.2} ns/stack");
    println!("LogicalStack drop, never entered (recording): {drop_unentered:6.2} ns/stack");
    println!("LogicalStack drop, after the recording:       {drop_off:6.2} ns/stack");
    println!(
        "recorded {} events, {} chunk claims skipped, {} dropped",
        summary.events, summary.dropped_chunks, summary.dropped_events
    );
    println!("recorder_vs_floor_ratio: {:.2}", rec_1 / floor_1);
}

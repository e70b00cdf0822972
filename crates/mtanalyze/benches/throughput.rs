//! Analyzer throughput against the hardware floor, measured in one run.
//!
//! ```text
//! cargo bench -p mtanalyze --bench throughput                       # 50M-event synthetic trace
//! cargo bench -p mtanalyze --bench throughput -- --events 5000000 --trace sample-traces/workload.bin
//! cargo bench -p mtanalyze --bench throughput -- --clock gil        # another clock (default: the trace's)
//! ```
//!
//! For each trace: the floor is one parallel pass that reads every byte of
//! the mapped file; the measured job is what `mtanalyze --format json` does
//! (load, analyze, serialize the report). Both run `--runs` times; medians
//! are printed with events per second, the ratio to the floor, and the peak
//! heap (counted by this binary's allocator, so the mapped file's pages are
//! not included) as a share of the file size.
//!
//! A third pass, the replay floor, does a strict subset of what any correct
//! replay must do: each chunk on its own, a stack of open frames, and
//! per-function call counts and times in a dense array. No segments, no
//! stack switches, no recursion, no edges, no paused time, no report. Its
//! ratio to the floor bounds from below what any analyzer of this design can
//! reach; the job's ratio to it is what the analysis itself costs on top.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use mtanalyze_testkit::synth as synth_gen;

/// Counts live and peak heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Reads every byte of the mapped file once, in parallel.
fn floor_pass(path: &Path) -> u64 {
    let file = std::fs::File::open(path).expect("open trace");
    // SAFETY: read-only map of a file nobody modifies during the benchmark.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map trace");
    map.par_chunks(1 << 20)
        .map(|c| {
            c.chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))
                .fold(0u64, u64::wrapping_add)
        })
        .reduce(|| 0, u64::wrapping_add)
}

/// The least any replay does (see the module docs): per chunk, push on
/// enter, pop on exit, add the frame's time to its function's totals.
/// Returns a checksum so the work cannot be optimized away.
fn replay_floor_pass(path: &Path) -> u64 {
    use mtrace_format::event::{raw_parts, KIND_ENTER, KIND_EXIT};
    use mtrace_format::layout::EVENT_SIZE;

    /// Dense per-function totals: function ids are folded into this many slots.
    const SLOTS: usize = 1024;
    #[derive(Clone, Copy, Default)]
    struct Totals {
        calls: u64,
        self_ticks: u64,
        total_ticks: u64,
    }
    struct Open {
        function: usize,
        start: u64,
        children: u64,
    }

    let file = std::fs::File::open(path).expect("open trace");
    // SAFETY: read-only map of a file nobody modifies during the benchmark.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map trace");
    let trace = mtrace_format::TraceFile::parse(&map).expect("parse trace");
    (0..trace.chunk_slots() as usize)
        .into_par_iter()
        .with_min_len(64)
        .fold(
            || {
                (
                    vec![Totals::default(); SLOTS],
                    Vec::<Open>::with_capacity(256),
                )
            },
            |(mut totals, mut open), slot| {
                let Ok(Some(chunk)) = trace.chunk(slot as u64) else {
                    return (totals, open);
                };
                open.clear();
                for bytes in chunk.event_bytes().chunks_exact(EVENT_SIZE) {
                    let Ok(bytes) = bytes.try_into() else {
                        continue;
                    };
                    let (kind, tick, payload) = raw_parts(bytes);
                    if kind == KIND_ENTER {
                        let function = payload as usize % SLOTS;
                        open.push(Open {
                            function,
                            start: tick,
                            children: 0,
                        });
                    } else if kind == KIND_EXIT {
                        let Some(frame) = open.pop() else { continue };
                        let elapsed = tick.wrapping_sub(frame.start);
                        let t = &mut totals[frame.function];
                        t.calls += 1;
                        t.self_ticks = t
                            .self_ticks
                            .wrapping_add(elapsed.wrapping_sub(frame.children));
                        t.total_ticks = t.total_ticks.wrapping_add(elapsed);
                        if let Some(parent) = open.last_mut() {
                            parent.children = parent.children.wrapping_add(elapsed);
                        }
                    }
                }
                (totals, open)
            },
        )
        .map(|(totals, _)| {
            totals
                .iter()
                .fold(0u64, |acc, t| acc ^ t.calls ^ t.self_ticks ^ t.total_ticks)
        })
        .reduce(|| 0, |a, b| a ^ b)
}

fn analyze_json(path: &Path, clock: Option<mtanalyze::Clock>) -> (u64, usize) {
    let trace = mtanalyze::load(path).expect("load trace");
    let options = mtanalyze::AnalyzeOptions {
        clock,
        ..mtanalyze::AnalyzeOptions::default()
    };
    let report = mtanalyze::analyze(&trace, &options).expect("analyze");
    let mut sink = std::io::sink();
    serde_json::to_writer(&mut sink, &report).expect("serialize");
    (report.trace.events, report.functions.len())
}

fn bench(path: &Path, runs: usize, clock: Option<mtanalyze::Clock>) {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    // Warm the page cache so both sides read from memory.
    std::hint::black_box(floor_pass(path));
    let mut floor = Vec::new();
    let mut replay_floor = Vec::new();
    let mut job = Vec::new();
    let mut peak = 0usize;
    let mut events = 0u64;
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(floor_pass(path));
        floor.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::hint::black_box(replay_floor_pass(path));
        replay_floor.push(t.elapsed().as_secs_f64());
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t = Instant::now();
        let (n, _) = analyze_json(path, clock);
        job.push(t.elapsed().as_secs_f64());
        peak = peak.max(PEAK.load(Ordering::Relaxed).saturating_sub(base));
        events = n;
    }
    let (f, r, j) = (median(floor), median(replay_floor), median(job));
    println!(
        "trace: {} ({:.1} MB, {} events)",
        path.display(),
        size as f64 / 1e6,
        events
    );
    println!(
        "  floor (read every byte, {} threads): median {:.3} s",
        rayon::current_num_threads(),
        f
    );
    println!(
        "  replay floor (stack + function totals): median {:.3} s",
        r
    );
    println!("  mtanalyze --format json:          median {:.3} s", j);
    println!("  events_per_second: {:.1} M", events as f64 / j / 1e6);
    println!("  ratio_to_floor: {:.2}", j / f);
    println!("  replay_floor_ratio_to_floor: {:.2}", r / f);
    println!("  ratio_to_replay_floor: {:.2}", j / r);
    println!(
        "  peak_heap: {:.1} MB ({:.2}% of the file)",
        peak as f64 / 1e6,
        100.0 * peak as f64 / size.max(1) as f64
    );
}

/// `cargo bench` runs in the crate's directory: a relative path that is
/// not there is taken from the workspace root, where the README's commands run.
fn workspace_path(p: &str) -> PathBuf {
    let path = PathBuf::from(p);
    if path.is_relative() && !path.exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(&path);
        if root.exists() {
            return root;
        }
    }
    path
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut events = 50_000_000u64;
    let mut runs = 5usize;
    let mut clock: Option<mtanalyze::Clock> = None;
    let mut traces: Vec<PathBuf> = Vec::new();
    let mut synth_path = std::env::temp_dir().join("mtanalyze-bench-synth.bin");
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => events = args.next().and_then(|v| v.parse().ok()).unwrap_or(events),
            "--runs" => {
                runs = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(runs)
                    .max(1)
            }
            "--trace" => traces.extend(args.next().map(|p| workspace_path(&p))),
            "--clock" => clock = args.next().and_then(|v| v.parse::<mtanalyze::Clock>().ok()),
            "--synth-out" => synth_path = args.next().map(PathBuf::from).unwrap_or(synth_path),
            "--bench" => {} // passed by `cargo bench`
            other => eprintln!("ignoring argument {other:?}"),
        }
    }
    if events > 0 {
        let opts = synth_gen::SynthOptions {
            events,
            threads: 4,
            fibers: 16,
            functions: 300,
            seed: 1,
        };
        let t = Instant::now();
        let written =
            synth_gen::generate(&opts, &synth_path, "synth".into()).expect("write synthetic trace");
        println!(
            "wrote {written} synthetic events to {} in {:.1} s",
            synth_path.display(),
            t.elapsed().as_secs_f64()
        );
        bench(&synth_path, runs, clock);
        let _ = std::fs::remove_file(&synth_path);
    }
    for t in &traces {
        bench(t, runs, clock);
    }
}

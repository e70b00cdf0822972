//! Analyzer throughput against the hardware floor, measured in one run.
//!
//! ```text
//! cargo bench -p mtanalyze --bench throughput                 # the default run (about four minutes on 2 cores)
//! cargo bench -p mtanalyze --bench throughput -- --quick      # 5M events, 50k tasks, 3 runs
//! cargo bench -p mtanalyze --bench throughput -- --events 0 --tasks 0 --trace sample-traces/workload.bin
//! cargo bench -p mtanalyze --bench throughput -- --clock gil  # one clock (repeatable; default: all three)
//! cargo bench -p mtanalyze --bench throughput -- --quick --stages  # and each stage's time and heap
//! cargo bench -p mtanalyze --bench throughput -- --events 0 --tasks 0 --merge 1000  # the merge case alone
//! ```
//!
//! By default it writes and measures three traces in the same run:
//!
//! * the synthetic trace (`--events`, 50M): four threads, sixteen fibers,
//!   deep recursive call trees: many events on few stacks;
//! * the many-task trace (`--tasks`, 500,000): an async service's requests,
//!   each on its own logical stack, polled two or three times by four
//!   workers, a dozen events each (`synth::generate_tasks`): many stacks;
//! * the same service with a tenth of the tasks, for how the heap scales
//!   with the number of stacks.
//!
//! * the merge case (`--merge N`, 1,000; `--merge-events`, 100,000 each):
//!   N synthetic traces merged into one report the way `mtanalyze DIR`
//!   does it (`mtanalyze::analyze_many`, `ManyTraces::Merge`:
//!   a worker per core, each analyzing its traces sequentially with tables
//!   it reuses from trace to trace and summing their functions and edges),
//!   against one synthetic trace of the same total events (its stacks in
//!   parallel); and N/10 traces, merged with 100,000 events each and with
//!   10,000, for how the heap grows with the events alone (it should not:
//!   a batch of traces is analyzed at a time, and the merged report grows
//!   with functions and stacks, not events);
//!
//! and any `--trace FILE` besides. For each trace: the floor is one
//! parallel pass that reads every byte of the mapped file; the measured job
//! is what `mtanalyze --format json --clock C` does (load, analyze,
//! serialize the report), once per clock. Everything runs `--runs` times,
//! interleaved, so a busy moment of the machine hits all of them alike;
//! medians are printed with events per second, the ratio to the floor, and
//! the peak heap (counted by this binary's allocator, so the mapped file's
//! pages are not included) as a share of the file size. The heap is counted
//! in one more run of each job, before the timed ones: counting is two
//! atomic updates of shared counters per allocation, which the command
//! line does not pay, and which cost the jobs that allocate most (many
//! small traces, many tasks) more than the others. A summary compares the numbers with the targets of issue 15
//! ("Many stacks at full speed"); timings are never test assertions.
//!
//! A third pass, the replay floor, does a strict subset of what any correct
//! replay must do: each chunk on its own, a stack of open frames, and
//! per-function call counts and times in a dense array. No segments, no
//! stack switches, no recursion, no edges, no paused time, no report. Its
//! ratio to the floor bounds from below what any analyzer of this design can
//! reach; the job's ratio to it is what the analysis itself costs on top.
//!
//! A fourth, the semantic floor, is the replay floor plus the work every
//! event costs under the report's semantics (`schemas/semantics.md`), each
//! in its cheapest form: events checked and clamped, ticks converted to
//! ns, function ids looked up, recursion counted per function, frames that
//! carry a running clock apart from wall time, the per-function calls,
//! primitive calls, tottime, cumtime and paused time (saturating), and
//! caller-callee edges in a dense matrix (ids folded, no hashing). Still one chunk at a time, no segments, no
//! stack switches, no report. The job's ratio to it is what the analyzer
//! adds to the per-event semantics: segments, stacks, windows, the report.
//!
//! With `--stages`, one more run of the job per trace and clock prints
//! where it goes, stage by stage (`mtanalyze::testing::analyze_in_stages`): time,
//! the heap still held when the stage ends and the peak during it, each
//! also per stack (a task of the many-task trace is a stack).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use mtanalyze_testkit::synth as synth_gen;

/// Counts live and peak heap bytes while [`COUNTING`] is on.
struct Counting;

/// Whether the allocator counts: only in the runs that measure the heap
/// ([`heap_of`], `--stages`), not in the timed ones (see the module doc).
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated less bytes freed while counting (signed: a block
/// allocated before counting began may be freed during it).
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            let size = layout.size() as isize;
            let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Turns counting on and returns the live bytes, which become the peak.
fn start_counting() -> isize {
    COUNTING.store(true, Ordering::SeqCst);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    base
}

/// The peak heap over `base` (from [`start_counting`]) of the counted
/// stretch that ends here, with counting turned off.
fn stop_counting(base: isize) -> usize {
    COUNTING.store(false, Ordering::SeqCst);
    (PEAK.load(Ordering::Relaxed) - base).max(0) as usize
}

/// The peak heap of one run of `job` (counted), and what it returns.
fn heap_of<T>(job: impl FnOnce() -> T) -> (usize, T) {
    let base = start_counting();
    let out = job();
    (stop_counting(base), out)
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

/// The replay floor plus the report's per-event semantics, each in its
/// cheapest form (see the module docs). Returns a checksum.
fn semantic_floor_pass(path: &Path) -> u64 {
    use mtrace_format::event::{raw_is_valid, raw_parts, KIND_ENTER, KIND_EXIT};
    use mtrace_format::layout::EVENT_SIZE;
    use mtrace_format::MetaRecordRef;

    /// Function ids above this are not looked up (the bench's traces have
    /// a few hundred functions).
    const MAX_ID: usize = 1 << 16;
    /// Edges: callers and callees folded into this many slots each, so
    /// the matrix stays in cache (with 128, the 300 functions' edges missed
    /// it and this floor took a quarter longer).
    const EDGE_SLOTS: usize = 64;
    const NO_EDGE: u32 = u32::MAX;
    #[derive(Clone, Copy, Default)]
    struct Function {
        ncalls: u64,
        primitive: u64,
        tottime: u64,
        cumtime: u64,
        paused: u64,
    }
    #[derive(Clone, Copy, Default)]
    struct Edge {
        open: u32,
        ncalls: u64,
        primitive: u64,
        tottime: u64,
        cumtime: u64,
        callee_cumtime: u64,
    }
    struct Open {
        function: u32,
        edge: u32,
        recursive: bool,
        edge_recursive: bool,
        enter_ns: u64,
        enter_r: u64,
        child_active: u64,
    }
    struct Tables {
        functions: Vec<Function>,
        open_count: Vec<u32>,
        edges: Vec<Edge>,
        open: Vec<Open>,
    }

    let file = std::fs::File::open(path).expect("open trace");
    // SAFETY: read-only map of a file nobody modifies during the benchmark.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map trace");
    let trace = mtrace_format::TraceFile::parse(&map).expect("parse trace");
    let scale = trace.header().clock.scale();
    let mut dense = vec![u32::MAX; MAX_ID];
    let mut n = 0u32;
    trace.for_each_metadata_borrowed(|record| {
        if let MetaRecordRef::Function { id, .. } = record {
            if let Some(d) = dense.get_mut(id.0 as usize) {
                *d = n;
                n += 1;
            }
        }
    });
    let n = n as usize;
    // A few contiguous runs of chunks per thread, each with its tables
    // (made once: zeroing the edge matrix per rayon job cost more than
    // the many-task trace's whole replay).
    let slots = trace.chunk_slots() as usize;
    let parts = rayon::current_num_threads() * 4;
    (0..parts)
        .into_par_iter()
        .map(|part| {
            let mut t = Tables {
                functions: vec![Function::default(); n],
                open_count: vec![0; n],
                edges: vec![Edge::default(); EDGE_SLOTS * EDGE_SLOTS],
                open: Vec::with_capacity(256),
            };
            for slot in slots * part / parts..slots * (part + 1) / parts {
                let Ok(Some(chunk)) = trace.chunk(slot as u64) else {
                    continue;
                };
                // The last chunk's frames are dropped (each chunk alone).
                for f in t.open.drain(..) {
                    t.open_count[f.function as usize] -= 1;
                    if f.edge != NO_EDGE {
                        t.edges[f.edge as usize].open -= 1;
                    }
                }
                let mut floor = 0;
                // The running clock is wall time plus this between two
                // switches (hidden from the optimizer: it is not 0 there).
                let offset = std::hint::black_box(0u64);
                for bytes in chunk.event_bytes().chunks_exact(EVENT_SIZE) {
                    let Ok(bytes) = bytes.try_into() else {
                        continue;
                    };
                    let (kind, tick, payload) = raw_parts(bytes);
                    if !raw_is_valid(kind, payload) {
                        break;
                    }
                    floor = tick.max(floor);
                    let ns = scale.ns(floor);
                    let r = ns.wrapping_add(offset);
                    if kind != KIND_ENTER && kind != KIND_EXIT {
                        continue;
                    }
                    let Some(&function) = dense.get(payload as usize) else {
                        continue;
                    };
                    if function == u32::MAX {
                        continue;
                    }
                    if kind == KIND_ENTER {
                        let recursive = t.open_count[function as usize] > 0;
                        t.open_count[function as usize] += 1;
                        let (edge, edge_recursive) = match t.open.last() {
                            Some(caller) => {
                                let e = (caller.function as usize % EDGE_SLOTS) * EDGE_SLOTS
                                    + function as usize % EDGE_SLOTS;
                                t.edges[e].open += 1;
                                (e as u32, t.edges[e].open > 1)
                            }
                            None => (NO_EDGE, false),
                        };
                        t.open.push(Open {
                            function,
                            edge,
                            recursive,
                            edge_recursive,
                            enter_ns: ns,
                            enter_r: r,
                            child_active: 0,
                        });
                        continue;
                    }
                    if t.open.last().is_none_or(|top| top.function != function) {
                        continue;
                    }
                    let Some(f) = t.open.pop() else { continue };
                    let active = r.saturating_sub(f.enter_r);
                    let paused = ns.saturating_sub(f.enter_ns).saturating_sub(active);
                    let self_ns = active.saturating_sub(f.child_active);
                    t.open_count[f.function as usize] -= 1;
                    let keep = (!f.recursive as u64).wrapping_neg();
                    let s = &mut t.functions[f.function as usize];
                    s.ncalls += 1;
                    s.primitive += !f.recursive as u64;
                    s.tottime = s.tottime.saturating_add(self_ns);
                    s.cumtime = s.cumtime.saturating_add(active & keep);
                    s.paused = s.paused.saturating_add(paused & keep);
                    if f.edge != NO_EDGE {
                        let e = &mut t.edges[f.edge as usize];
                        e.open -= 1;
                        e.ncalls += 1;
                        e.primitive += !f.edge_recursive as u64;
                        e.tottime = e.tottime.saturating_add(self_ns);
                        let keep_edge = (!f.edge_recursive as u64).wrapping_neg();
                        e.cumtime = e.cumtime.saturating_add(active & keep_edge);
                        e.callee_cumtime = e.callee_cumtime.saturating_add(active & keep);
                    }
                    if let Some(caller) = t.open.last_mut() {
                        caller.child_active = caller.child_active.saturating_add(active);
                    }
                }
            }
            let f = t.functions.iter().fold(0, |acc, s| {
                acc ^ s.ncalls ^ s.primitive ^ s.tottime ^ s.cumtime ^ s.paused
            });
            t.edges.iter().fold(f, |acc, e| {
                acc ^ e.ncalls ^ e.primitive ^ e.tottime ^ e.cumtime ^ e.callee_cumtime
            })
        })
        .reduce(|| 0, |a, b| a ^ b)
}

/// What `mtanalyze --format json --clock C` does; returns the events and
/// stacks the report counts.
fn analyze_json(path: &Path, clock: mtanalyze::report::Clock) -> (u64, usize) {
    let trace = mtanalyze::load(path).expect("load trace");
    let options = mtanalyze::AnalyzeOptions {
        clock: Some(clock),
        ..mtanalyze::AnalyzeOptions::default()
    };
    // The rows sorted as they are handed over, on disk past the budget.
    let mut rows = mtanalyze::view::SortedRows::new(mtanalyze::view::DEFAULT_BUDGET);
    let report = mtanalyze::analyze_with_sink(&trace, &options, &mut rows).expect("analyze");
    let stacks = rows.len() as usize;
    let view = mtanalyze::view::ReportView::from(&report);
    let rows = rows.into_sorted().expect("sorted rows");
    mtanalyze::render::json::report_with_rows(&mut std::io::sink(), &view, rows)
        .expect("serialize");
    (report.trace.events, stacks)
}

/// What `mtanalyze TRACE --clock C` does (the function table): the stacks
/// only counted, since the table shows none of them.
fn analyze_table(path: &Path, clock: mtanalyze::report::Clock) {
    let trace = mtanalyze::load(path).expect("load trace");
    let options = mtanalyze::AnalyzeOptions {
        clock: Some(clock),
        stack_rows: mtanalyze::report::StackRows::Counted,
        ..mtanalyze::AnalyzeOptions::default()
    };
    let report = mtanalyze::analyze(&trace, &options).expect("analyze");
    let rows = mtanalyze::view::function_rows(&report, &mtanalyze::view::ViewOptions::default());
    mtanalyze::render::table::header(&mut std::io::sink(), &report, None).expect("table");
    let total = report.functions.len();
    mtanalyze::render::table::functions(&mut std::io::sink(), &rows, total, None, None)
        .expect("table");
}

/// Writes the report as `--format json` does, to nowhere.
fn write_json(report: &mtanalyze::Report) {
    let view = mtanalyze::view::ReportView::from(report);
    mtanalyze::render::json::report(&mut std::io::sink(), &view).expect("serialize");
}

/// One run of the job under `clock`, printing each stage's time and heap
/// (what is held at its end, the peak during it), in all and per stack.
fn print_stages(path: &Path, clock: mtanalyze::report::Clock) {
    struct Stage {
        name: &'static str,
        seconds: f64,
        held: usize,
        peak: usize,
    }
    let base = start_counting();
    let mut stages: Vec<Stage> = Vec::new();
    let mut t = Instant::now();
    let mut done = |name: &'static str| {
        let live = LIVE.load(Ordering::Relaxed);
        stages.push(Stage {
            name,
            seconds: t.elapsed().as_secs_f64(),
            held: (live - base).max(0) as usize,
            peak: (PEAK.load(Ordering::Relaxed) - base).max(0) as usize,
        });
        PEAK.store(live, Ordering::Relaxed);
        t = Instant::now();
    };
    let trace = mtanalyze::load(path).expect("load trace");
    done("load");
    let options = mtanalyze::AnalyzeOptions {
        clock: Some(clock),
        ..mtanalyze::AnalyzeOptions::default()
    };
    let report =
        mtanalyze::testing::analyze_in_stages(&trace, &options, &mut done).expect("analyze");
    write_json(&report);
    done("json");
    let stacks = report.stacks.len().max(1) as f64;
    drop(report);
    drop(trace);
    stop_counting(base);
    println!("  stages (clock {clock}, one run; per stack: / {stacks} stacks):");
    println!(
        "    {:<9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "stage", "ms", "ns/stack", "held MB", "B/stack", "peak MB", "B/stack"
    );
    for s in &stages {
        println!(
            "    {:<9} {:>9.2} {:>10.0} {:>10.1} {:>10.0} {:>10.1} {:>10.0}",
            s.name,
            s.seconds * 1e3,
            s.seconds * 1e9 / stacks,
            s.held as f64 / 1e6,
            s.held as f64 / stacks,
            s.peak as f64 / 1e6,
            s.peak as f64 / stacks,
        );
    }
}

/// The job under one clock: median seconds and the peak heap (of the
/// counted run).
struct ClockRun {
    clock: mtanalyze::report::Clock,
    seconds: f64,
    peak_heap: usize,
    /// The peak heap of the function table's job ([`analyze_table`]).
    table_heap: usize,
}

/// One trace's medians.
struct Measured {
    size: u64,
    events: u64,
    floor: f64,
    replay_floor: f64,
    semantic_floor: f64,
    clocks: Vec<ClockRun>,
}

impl Measured {
    fn clock(&self, clock: mtanalyze::report::Clock) -> Option<&ClockRun> {
        self.clocks.iter().find(|c| c.clock == clock)
    }

    fn events_per_second(&self, c: &ClockRun) -> f64 {
        self.events as f64 / c.seconds
    }

    fn heap_percent(&self, c: &ClockRun) -> f64 {
        self.percent(c.peak_heap)
    }

    fn percent(&self, bytes: usize) -> f64 {
        100.0 * bytes as f64 / self.size.max(1) as f64
    }
}

/// Seconds in ms: the small traces take well under one.
fn ms(seconds: f64) -> String {
    format!("{:.2} ms", seconds * 1e3)
}

fn bench(path: &Path, runs: usize, clocks: &[mtanalyze::report::Clock], stages: bool) -> Measured {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    // Warm the page cache so both sides read from memory.
    std::hint::black_box(floor_pass(path));
    let mut floor = Vec::new();
    let mut replay_floor = Vec::new();
    let mut semantic_floor = Vec::new();
    let mut job: Vec<Vec<f64>> = vec![Vec::new(); clocks.len()];
    let mut peak = vec![0usize; clocks.len()];
    let mut table_peak = vec![0usize; clocks.len()];
    let (mut events, mut stacks) = (0u64, 0usize);
    for (i, &clock) in clocks.iter().enumerate() {
        peak[i] = heap_of(|| analyze_json(path, clock)).0;
        table_peak[i] = heap_of(|| analyze_table(path, clock)).0;
    }
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(floor_pass(path));
        floor.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::hint::black_box(replay_floor_pass(path));
        replay_floor.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::hint::black_box(semantic_floor_pass(path));
        semantic_floor.push(t.elapsed().as_secs_f64());
        for (i, &clock) in clocks.iter().enumerate() {
            let t = Instant::now();
            (events, stacks) = analyze_json(path, clock);
            job[i].push(t.elapsed().as_secs_f64());
        }
    }
    let m = Measured {
        size,
        events,
        floor: median(floor),
        replay_floor: median(replay_floor),
        semantic_floor: median(semantic_floor),
        clocks: clocks
            .iter()
            .zip(job)
            .zip(peak.into_iter().zip(table_peak))
            .map(|((&clock, j), (peak_heap, table_heap))| ClockRun {
                clock,
                seconds: median(j),
                peak_heap,
                table_heap,
            })
            .collect(),
    };
    println!(
        "trace: {} ({:.1} MB, {} events, {} stacks)",
        path.display(),
        size as f64 / 1e6,
        events,
        stacks
    );
    println!(
        "  floor (read every byte, {} threads): median {}",
        rayon::current_num_threads(),
        ms(m.floor)
    );
    println!(
        "  replay floor (stack + function totals): median {}",
        ms(m.replay_floor)
    );
    println!(
        "  replay_floor_ratio_to_floor: {:.2}",
        m.replay_floor / m.floor
    );
    println!(
        "  semantic floor (the report's per-event work, cheapest form): median {}",
        ms(m.semantic_floor)
    );
    println!(
        "  semantic_floor_ratio_to_replay_floor: {:.2}",
        m.semantic_floor / m.replay_floor
    );
    for c in &m.clocks {
        println!("  clock {}:", c.clock);
        println!("    mtanalyze --format json: median {}", ms(c.seconds));
        println!(
            "    events_per_second: {:.1} M",
            m.events_per_second(c) / 1e6
        );
        println!("    ratio_to_floor: {:.2}", c.seconds / m.floor);
        println!(
            "    ratio_to_replay_floor: {:.2}",
            c.seconds / m.replay_floor
        );
        println!(
            "    ratio_to_semantic_floor: {:.2}",
            c.seconds / m.semantic_floor
        );
        println!(
            "    peak_heap: {:.1} MB ({:.2}% of the file)",
            c.peak_heap as f64 / 1e6,
            m.heap_percent(c)
        );
        println!(
            "    peak_heap of the function table (mtanalyze TRACE): {:.1} MB ({:.2}% of the file)",
            c.table_heap as f64 / 1e6,
            m.percent(c.table_heap)
        );
    }
    if stages {
        for &clock in clocks {
            print_stages(path, clock);
        }
    }
    m
}

/// What `mtanalyze TRACE... --format json --clock C` does with several
/// traces: analyze them a batch at a time, each worker summing the
/// functions, edges and call paths of its traces (`analyze_many` with
/// `ManyTraces::Merge`), list the rest in order, combine the sums,
/// serialize the merge. Returns the events it counts.
fn merge_json(paths: &[PathBuf], clock: mtanalyze::report::Clock) -> u64 {
    let options = mtanalyze::AnalyzeOptions {
        clock: Some(clock),
        ..mtanalyze::AnalyzeOptions::default()
    };
    let merged =
        mtanalyze::analyze_many(paths, &options, mtanalyze::ManyTraces::Merge, |_, _, r| {
            r.map(drop)
        })
        .expect("analyze a trace");
    let report = merged.finish().expect("at least one trace");
    write_json(&report);
    report.trace.events
}

/// Runs `job` once: seconds, and the peak heap above what was live before.
fn timed<T>(job: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let out = job();
    (t.elapsed().as_secs_f64(), out)
}

/// One job's numbers: median seconds, the peak heap of the counted run,
/// the events counted.
struct Job {
    seconds: f64,
    peak_heap: usize,
    events: u64,
}

impl Job {
    fn events_per_second(&self) -> f64 {
        self.events as f64 / self.seconds
    }

    fn print(&self, what: &str) {
        println!(
            "    {what}: median {}, events_per_second: {:.1} M, peak_heap: {:.1} MB",
            ms(self.seconds),
            self.events_per_second() / 1e6,
            self.peak_heap as f64 / 1e6
        );
    }
}

/// The merge case under one clock.
struct MergeRun {
    clock: mtanalyze::report::Clock,
    single: Job,
    merged: Job,
    tenth: Option<Job>,
    /// The tenth's traces with a tenth of the events each: events and
    /// peak heap of their merge (not timed).
    light: Option<(u64, usize)>,
}

/// Writes `traces` synthetic traces of `each` events into a directory
/// beside `single` and one trace of all their events at `single`, then
/// times the merge of all, of a tenth of them, and the one trace, `runs`
/// times interleaved, under every clock; deletes the files. The heap of
/// a tenth of the traces is also measured with a tenth of the events
/// each: the same traces, the same functions and stacks, ten times fewer
/// events, so what the heap owes to the events alone.
fn merge_case(
    traces: u64,
    each: u64,
    single: &Path,
    runs: usize,
    clocks: &[mtanalyze::report::Clock],
) -> Vec<MergeRun> {
    let dir = single.with_file_name("mtanalyze-bench-merge");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the merge directory");
    let options = |events, seed| synth_gen::SynthOptions {
        events,
        threads: 4,
        fibers: 16,
        functions: 300,
        seed,
    };
    let t = Instant::now();
    let write = |n: u64, each: u64, prefix: &str| -> Vec<PathBuf> {
        (0..n)
            .into_par_iter()
            .map(|i| {
                let p = dir.join(format!("{prefix}-{i:05}.bin"));
                synth_gen::generate(&options(each, i + 1), &p, format!("synth {i}"))
                    .expect("write a synthetic trace");
                p
            })
            .collect()
    };
    let paths = write(traces, each, "trace");
    let light = write(traces / 10, each / 10, "light");
    let size: u64 = paths
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    synth_gen::generate(
        &options(traces * each, 1),
        single,
        "synth merge-single".into(),
    )
    .expect("write the single trace");
    let single_size = std::fs::metadata(single).map_or(0, |m| m.len());
    println!(
        "wrote {traces} traces of {each} events ({:.1} MB) and one trace of {} events ({:.1} MB) in {:.1} s",
        size as f64 / 1e6,
        traces * each,
        single_size as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    // Warm the page cache so every job reads from memory.
    for p in paths.iter().chain([&single.to_path_buf()]) {
        std::hint::black_box(floor_pass(p));
    }
    let tenth = &paths[..paths.len() / 10];
    let mut out = Vec::new();
    for &clock in clocks {
        let mut times: [Vec<f64>; 3] = Default::default();
        let mut heaps = [0usize; 3];
        let mut events = [0u64; 3];
        let jobs: [&dyn Fn() -> u64; 3] = [
            &|| analyze_json(single, clock).0,
            &|| merge_json(&paths, clock),
            &|| {
                if tenth.is_empty() {
                    0
                } else {
                    merge_json(tenth, clock)
                }
            },
        ];
        for (i, job) in jobs.iter().enumerate() {
            heaps[i] = heap_of(job).0;
        }
        for _ in 0..runs {
            for (i, job) in jobs.iter().enumerate() {
                let (seconds, n) = timed(job);
                times[i].push(seconds);
                events[i] = n;
            }
        }
        let [a, b, c] = times;
        let job = |seconds, i: usize| Job {
            seconds,
            peak_heap: heaps[i],
            events: events[i],
        };
        let run = MergeRun {
            clock,
            single: job(median(a), 0),
            merged: job(median(b), 1),
            tenth: (!tenth.is_empty()).then(|| job(median(c), 2)),
            light: (!light.is_empty()).then(|| {
                let (heap, events) = heap_of(|| merge_json(&light, clock));
                (events, heap)
            }),
        };
        println!("  clock {clock}:");
        run.single
            .print(&format!("one trace of {} events", run.single.events));
        run.merged.print(&format!(
            "{traces} traces merged ({} events)",
            run.merged.events
        ));
        if let Some(t) = &run.tenth {
            t.print(&format!(
                "{} traces merged ({} events)",
                tenth.len(),
                t.events
            ));
        }
        out.push(run);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(single);
    out
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

/// The CPU's model name and the number of logical cores, from
/// `/proc/cpuinfo` (elsewhere: what the standard library knows).
fn machine() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = match info
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count()
    {
        0 => std::thread::available_parallelism().map_or(0, |n| n.get()),
        n => n,
    };
    format!("{model} ({cores} cores)")
}

/// Writes a trace with `write` (returning its events), reports how long it
/// took, measures it and deletes it.
fn generated(
    path: &Path,
    what: &str,
    runs: usize,
    clocks: &[mtanalyze::report::Clock],
    stages: bool,
    write: impl FnOnce(&Path) -> Result<u64, Box<dyn std::error::Error>>,
) -> Measured {
    let t = Instant::now();
    let written = write(path).expect("write synthetic trace");
    println!(
        "wrote {written} events ({what}) to {} in {:.1} s",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    let m = bench(path, runs, clocks, stages);
    let _ = std::fs::remove_file(path);
    m
}

/// A measured trace's numbers under `clock`, if both were measured.
fn with(m: &Option<Measured>, clock: mtanalyze::report::Clock) -> Option<(&Measured, &ClockRun)> {
    let m = m.as_ref()?;
    Some((m, m.clock(clock)?))
}

/// One summary line: a value against its target.
fn target(
    name: &str,
    clock: mtanalyze::report::Clock,
    value: f64,
    unit: &str,
    target: &str,
    met: bool,
) {
    let verdict = if met { "met" } else { "missed" };
    println!("  {name} (clock {clock}): {value:.2}{unit} (target {target}: {verdict})");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut events = 50_000_000u64;
    let mut tasks = 500_000u64;
    let mut runs = 5usize;
    let mut merge = 1_000u64;
    let mut merge_events = 100_000u64;
    let mut stages = false;
    let mut clocks: Vec<mtanalyze::report::Clock> = Vec::new();
    let mut traces: Vec<PathBuf> = Vec::new();
    let mut synth_path = std::env::temp_dir().join("mtanalyze-bench-synth.bin");
    let number =
        |v: Option<String>, default: u64| v.and_then(|v| v.parse().ok()).unwrap_or(default);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--events" => events = number(args.next(), events),
            "--tasks" => tasks = number(args.next(), tasks),
            "--runs" => runs = number(args.next(), runs as u64).max(1) as usize,
            "--stages" => stages = true,
            "--quick" => (events, tasks, runs, merge) = (5_000_000, 50_000, 3, 50),
            "--merge" => merge = number(args.next(), merge),
            "--merge-events" => merge_events = number(args.next(), merge_events),
            "--trace" => traces.extend(args.next().map(|p| workspace_path(&p))),
            "--clock" => match args.next().map(|v| v.parse::<mtanalyze::report::Clock>()) {
                Some(Ok(c)) => clocks.push(c),
                other => eprintln!("ignoring --clock {other:?}"),
            },
            "--synth-out" => synth_path = args.next().map(PathBuf::from).unwrap_or(synth_path),
            "--bench" => {} // passed by `cargo bench`
            other => eprintln!("ignoring argument {other:?}"),
        }
    }
    if clocks.is_empty() {
        clocks = vec![
            mtanalyze::report::Clock::Stack,
            mtanalyze::report::Clock::Gil,
            mtanalyze::report::Clock::Wall,
        ];
    }
    println!("machine: {}", machine());
    println!(
        "runs: {runs}, clocks: {}",
        clocks
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let started = Instant::now();
    let beside = |name: &str| synth_path.with_file_name(name);
    let synthetic = (events > 0).then(|| {
        let opts = synth_gen::SynthOptions {
            events,
            threads: 4,
            fibers: 16,
            functions: 300,
            seed: 1,
        };
        generated(&synth_path, "synthetic", runs, &clocks, stages, |p| {
            synth_gen::generate(&opts, p, "synth".into())
        })
    });
    // The many-task trace, and the same service with a tenth of the tasks.
    let many = |n: u64, file: &str| {
        let opts = synth_gen::TaskOptions {
            tasks: n,
            ..synth_gen::TaskOptions::default()
        };
        let what = format!("{n} tasks");
        generated(&beside(file), &what, runs, &clocks, stages, |p| {
            synth_gen::generate_tasks(&opts, p, format!("synth --tasks {n}"))
        })
    };
    let many_task = (tasks > 0).then(|| many(tasks, "mtanalyze-bench-tasks.bin"));
    let few_task = (tasks >= 10).then(|| many(tasks / 10, "mtanalyze-bench-tasks-tenth.bin"));
    for t in &traces {
        bench(t, runs, &clocks, stages);
    }
    let merged = (merge > 0 && merge_events > 0).then(|| {
        let single = beside("mtanalyze-bench-merge-single.bin");
        merge_case(merge, merge_events, &single, runs, &clocks)
    });

    if synthetic.is_none() && many_task.is_none() && merged.is_none() {
        return; // the targets compare the generated traces
    }
    println!(
        "summary (medians of {runs} runs, heap of one more run; {:.0} s in all):",
        started.elapsed().as_secs_f64()
    );
    for &clock in &clocks {
        if let (Some((s, sc)), Some((t, tc))) = (with(&synthetic, clock), with(&many_task, clock)) {
            let r = t.events_per_second(tc) / s.events_per_second(sc);
            let name = "many_task_events_per_second_over_synthetic";
            target(name, clock, r, "", ">= 0.5", r >= 0.5);
        }
    }
    for &clock in &clocks {
        if let Some((s, sc)) = with(&synthetic, clock) {
            let r = sc.seconds / s.replay_floor;
            let name = "synthetic ratio_to_replay_floor";
            target(name, clock, r, "", "<= 2", r <= 2.0);
        }
    }
    if let Some(s) = &synthetic {
        // The target above leaves the analyzer 2 / this times the
        // per-event semantics' cheapest cost for everything else.
        println!(
            "  synthetic semantic_floor_ratio_to_replay_floor: {:.2} (no target: the report's per-event work alone)",
            s.semantic_floor / s.replay_floor
        );
        for c in &s.clocks {
            println!(
                "  synthetic ratio_to_semantic_floor (clock {}): {:.2} (no target)",
                c.clock,
                c.seconds / s.semantic_floor
            );
        }
    }
    for (label, trace) in [("synthetic", &synthetic), ("many-task", &many_task)] {
        for &clock in &clocks {
            if let Some((m, c)) = with(trace, clock) {
                let h = m.heap_percent(c);
                let name = format!("{label} peak_heap");
                target(&name, clock, h, "% of the file", "<= 10%", h <= 10.0);
                let h = m.percent(c.table_heap);
                let name = format!("{label} peak_heap of the function table");
                target(&name, clock, h, "% of the file", "<= 10%", h <= 10.0);
            }
        }
    }
    for &clock in &clocks {
        if let (Some((_, big)), Some((_, small))) =
            (with(&many_task, clock), with(&few_task, clock))
        {
            let r = big.peak_heap as f64 / small.peak_heap.max(1) as f64;
            let name = format!(
                "heap_scaling {} -> {tasks} tasks ({:.1} -> {:.1} MB)",
                tasks / 10,
                small.peak_heap as f64 / 1e6,
                big.peak_heap as f64 / 1e6
            );
            target(&name, clock, r, "x", "<= 10x", r <= 10.0);
        }
    }
    for m in merged.iter().flatten() {
        let r = m.merged.events_per_second() / m.single.events_per_second();
        let name = format!("merge_{merge}_traces_events_per_second_over_one_trace");
        target(&name, m.clock, r, "", ">= 1", r >= 1.0);
        if let (Some(t), Some((light_events, light_heap))) = (&m.tenth, m.light) {
            let r = t.peak_heap as f64 / light_heap.max(1) as f64;
            let name = format!(
                "merge heap {light_events} -> {} events, same traces ({:.1} -> {:.1} MB)",
                t.events,
                light_heap as f64 / 1e6,
                t.peak_heap as f64 / 1e6
            );
            target(
                &name,
                m.clock,
                r,
                "x",
                "<= 2x: not the events' 10x",
                r <= 2.0,
            );
            // Ten times the traces: the report lists ten times the
            // stacks and threads (the issue allows functions x traces).
            println!(
                "  merge heap {} -> {} traces: {:.1} -> {:.1} MB (clock {}; grows with the traces, which list their stacks)",
                merge / 10,
                merge,
                t.peak_heap as f64 / 1e6,
                m.merged.peak_heap as f64 / 1e6,
                m.clock
            );
        }
    }
}

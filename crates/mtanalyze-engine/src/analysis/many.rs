//! Many traces, one pass: [`analyze_many`] loads and analyzes traces in
//! parallel and hands their reports over one at a time, in the order given.
//!
//! ```text
//! paths     a  b  c  d  e  f  g  h ...   taken in order by a worker per rayon thread
//! workers   a  c  e | b  d  f ...        each analyzes a trace on its own thread, one
//!                                        stage and one stack after the other
//! each      a, b, c, d, ...              in order on the caller's thread
//! ```
//!
//! The traces are what runs in parallel, not their stacks: with at least
//! [`SEQUENTIAL_TRACES_PER_THREAD`] traces per rayon thread, a worker
//! analyzes each small trace sequentially (the planner's table, `plan.rs`,
//! says which; the stages that use rayon run in a pool of one thread, the
//! worker itself), with one tally for all its stacks, kept from trace to
//! trace. A small trace then costs one set of tables and no hand-offs
//! between threads; analyzed in parallel it made a tally per thread and
//! per replay worker, and summed them. With fewer traces (the traces
//! alone would leave threads idle), each is analyzed as one trace, by two
//! workers per thread (a worker's own steps, loading and assembling, run
//! on it, not on rayon's threads).
//!
//! Workers take the next trace as soon as they finish one, so a slow trace
//! holds up no other; but none runs more than a window of traces ahead of
//! the caller, so at most that many reports wait to be handed over however
//! many traces there are. A trace that fails is handed over as its error,
//! in its place; the caller decides whether that ends the run. The
//! reports go between threads as [`CompactReport`]s, whose edges are not
//! rows yet: summing them needs none, and rows cost a small trace more
//! than its replay. To merge ([`ManyTraces::Merge`]) each worker also
//! adds the functions, edges and call paths of its traces up itself
//! ([`Sums`]), so the caller only lists what is listed trace after trace
//! (stacks, marks, the summary) and combines the workers' sums at the end.
//! Summed on the caller's thread, they took a tenth of the CPU of a merge
//! of 1,000 small traces, on the cores the workers needed. A worker
//! numbers its traces' functions as its sums do, and keeps one tally under
//! those numbers for all of them (see `pipeline.rs`): a trace's rows and
//! edges then go to the sums by index.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Condvar, Mutex};

use crate::analysis::options::{AnalyzeError, AnalyzeOptions};
use crate::analysis::pipeline::Scratch;
use crate::analysis::plan::analyze_in_worker;
use crate::input::{load, LoadError, LoadedTrace};
use mtanalyze_model::compact::CompactReport;
use mtanalyze_model::merge::{Merged, Sums};
use mtanalyze_model::report::Report;

/// Why one of several traces gave no report.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// It could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// It could not be analyzed.
    #[error(transparent)]
    Analyze(#[from] AnalyzeError),
}

/// Workers per rayon thread when traces are analyzed sequentially: each
/// analyzes its trace on its own thread.
const WORKERS_PER_THREAD: usize = 1;

/// Workers per rayon thread when traces are analyzed in parallel: two keep
/// the threads busy while the workers load and assemble.
const PARALLEL_WORKERS_PER_THREAD: usize = 2;

/// Traces per rayon thread from which they are analyzed sequentially, one
/// per worker (see the module doc).
const SEQUENTIAL_TRACES_PER_THREAD: usize = 2;

/// How far ahead of the trace being handed over the workers may go, per
/// worker: reports waiting to be handed over are at most this many.
const AHEAD_PER_WORKER: usize = 4;

/// Which traces have been handed to workers and to the caller.
struct Progress {
    /// The next trace a worker takes.
    next: usize,
    /// Traces handed over to the caller.
    delivered: usize,
    /// The caller stopped: take nothing more.
    stop: bool,
}

/// What [`analyze_many`] does with the traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManyTraces {
    /// Sums them (the merged report); each trace's report handed over
    /// brings only what is listed trace after trace (summary, stacks,
    /// marks, warnings): its functions, edges and call paths are empty,
    /// summed by the workers themselves.
    Merge,
    /// Sums them, and hands over each trace's whole report (`--by-trace`).
    MergeAndReport,
    /// Hands over each trace's whole report and sums nothing (the merge
    /// returned is empty): for a caller that writes each out.
    Report,
}

/// Loads and analyzes every trace in `paths` with `opts` (in parallel; see
/// the module doc), calling `each` with its index and its report (or why
/// there is none; what the report holds: see [`ManyTraces`]), in the order
/// of `paths`, on the calling thread; returns the traces summed
/// ([`Merged::finish`] gives the merged report). The reports summed must
/// share a clock: `each` checks (a sum over different clocks means
/// nothing). Stops at the first error `each` returns (the traces being
/// analyzed then are finished and dropped).
pub fn analyze_many<E>(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    what: ManyTraces,
    mut each: impl FnMut(usize, &Path, Result<&Report, TraceError>) -> Result<(), E>,
) -> Result<Merged, E> {
    let mut merged = Merged::new();
    let mut hand = |i: usize, path: &Path, r: Result<CompactReport, TraceError>| {
        let c = match r {
            Ok(c) => c,
            Err(e) => return each(i, path, Err(e)),
        };
        match what {
            ManyTraces::Merge => each(i, path, Ok(c.report()))?,
            ManyTraces::MergeAndReport => each(i, path, Ok(&c.clone().into_report()))?,
            ManyTraces::Report => return each(i, path, Ok(&c.into_report())),
        }
        merged.add_compact(c);
        Ok(())
    };
    if what == ManyTraces::Merge {
        let sums = each_with(
            paths,
            opts,
            |t, o, s, i| {
                // Traces are numbered by their place in `paths`: a failed
                // one leaves a gap, which keeps the order.
                let mut c = analyze_in(t, o, s, Some(i as u32))?;
                // What the analysis did not add up itself (a trace
                // analyzed in parallel, or call paths).
                s.sums.add_compact(i as u32, &mut c);
                Ok(c)
            },
            &mut hand,
        )?;
        merged.absorb(sums);
    } else {
        each_with(
            paths,
            opts,
            |t, o, s, _| analyze_in(t, o, s, None),
            &mut hand,
        )?;
    }
    Ok(merged)
}

/// One trace's analysis by a worker, as the planner decides
/// ([`analyze_in_worker`]), in the worker's pool of one thread if it
/// analyzes sequentially. With `summed` (the trace's number), a
/// sequential analysis adds its function rows and edges to the worker's
/// sums itself.
fn analyze_in(
    trace: &LoadedTrace,
    opts: &AnalyzeOptions,
    scratch: &mut WorkerScratch,
    summed: Option<u32>,
) -> Result<CompactReport, AnalyzeError> {
    let WorkerScratch {
        sequential,
        pool,
        tables,
        sums,
    } = scratch;
    let into = summed.map(|i| (sums, i));
    match pool {
        Some(pool) => pool.install(|| analyze_in_worker(trace, opts, *sequential, tables, into)),
        None => analyze_in_worker(trace, opts, *sequential, tables, into),
    }
}

/// What a worker keeps from trace to trace.
struct WorkerScratch {
    /// Whether small traces are analyzed sequentially (enough traces for
    /// every thread; see the module doc).
    sequential: bool,
    /// A pool of one thread, the worker itself: the stages that use rayon
    /// run on it, not on the caller's pool (`None` if it could not be made).
    pool: Option<rayon::ThreadPool>,
    /// The analysis's tables.
    tables: Scratch,
    /// What the worker summed ([`ManyTraces::Merge`]).
    sums: Sums,
}

impl WorkerScratch {
    /// What the worker summed, all of it (see [`Scratch::flush`]).
    fn into_sums(mut self) -> Sums {
        self.tables.flush(&mut self.sums);
        self.sums
    }
}

/// [`analyze_many`] with `analyze` making what is handed over from trace
/// number `i`; returns the workers' sums, added up.
fn each_with<T: Send, E>(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    analyze: impl Fn(&LoadedTrace, &AnalyzeOptions, &mut WorkerScratch, usize) -> Result<T, AnalyzeError>
        + Sync,
    mut each: impl FnMut(usize, &Path, Result<T, TraceError>) -> Result<(), E>,
) -> Result<Sums, E> {
    if !crate::threads::parallel() {
        // Every trace on the calling thread, one after the other.
        let mut scratch = WorkerScratch {
            sequential: true,
            pool: None,
            tables: Scratch::default(),
            sums: Sums::default(),
        };
        for (i, path) in paths.iter().enumerate() {
            let r = load(path)
                .map_err(TraceError::from)
                .and_then(|t| Ok(analyze(&t, opts, &mut scratch, i)?));
            each(i, path, r)?;
        }
        return Ok(scratch.into_sums());
    }
    let threads = rayon::current_num_threads();
    let sequential = paths.len() >= SEQUENTIAL_TRACES_PER_THREAD * threads;
    let per_thread = match sequential {
        true => WORKERS_PER_THREAD,
        false => PARALLEL_WORKERS_PER_THREAD,
    };
    let workers = (per_thread * threads).clamp(1, paths.len().max(1));
    let window = AHEAD_PER_WORKER * workers;
    let state = Mutex::new(Progress {
        next: 0,
        delivered: 0,
        stop: false,
    });
    let moved = Condvar::new();
    // A poisoned lock means a worker panicked: the scope re-raises it.
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let (tx, rx) = mpsc::channel::<(usize, Result<T, TraceError>)>();
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(workers);
        for _ in 0..workers {
            let tx = tx.clone();
            let (lock, moved, analyze) = (&lock, &moved, &analyze);
            handles.push(scope.spawn(move || {
                let pool = sequential
                    .then(|| {
                        rayon::ThreadPoolBuilder::new()
                            .num_threads(1)
                            .use_current_thread()
                            .build()
                            .ok()
                    })
                    .flatten();
                let mut scratch = WorkerScratch {
                    sequential,
                    pool,
                    tables: Scratch::default(),
                    sums: Sums::default(),
                };
                loop {
                    let i = {
                        let mut s = lock();
                        while !s.stop && s.next < paths.len() && s.next >= s.delivered + window {
                            s = moved.wait(s).unwrap_or_else(|e| e.into_inner());
                        }
                        if s.stop || s.next >= paths.len() {
                            return scratch.into_sums();
                        }
                        s.next += 1;
                        s.next - 1
                    };
                    let r = load(&paths[i])
                        .map_err(TraceError::from)
                        .and_then(|t| Ok(analyze(&t, opts, &mut scratch, i)?));
                    if tx.send((i, r)).is_err() {
                        return scratch.into_sums();
                    }
                }
            }));
        }
        drop(tx);
        let mut waiting = BTreeMap::new();
        let mut want = 0;
        let mut result = Ok(());
        for (i, r) in rx.iter() {
            waiting.insert(i, r);
            while let Some(r) = waiting.remove(&want) {
                result = each(want, &paths[want], r);
                want += 1;
                if result.is_err() {
                    break;
                }
            }
            let mut s = lock();
            s.delivered = want;
            s.stop = result.is_err();
            moved.notify_all();
            if s.stop {
                break;
            }
        }
        result?;
        let mut sums = Sums::default();
        for h in handles {
            // A worker that panicked: raise it here, as the scope would.
            match h.join() {
                Ok(s) => sums.absorb(s),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok(sums)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sequential worker's scratch, as a worker of `analyze_many` that merges starts.
    fn one_worker() -> WorkerScratch {
        WorkerScratch {
            sequential: true,
            pool: None,
            tables: Scratch::default(),
            sums: Sums::default(),
        }
    }
    use mtanalyze_testkit::worked_examples::{FIBER_HANDOFF, GIL_TURNS};

    #[test]
    fn reports_come_in_order_with_failures_in_their_place() {
        let dir = std::env::temp_dir().join(format!("mtanalyze-many-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut paths = Vec::new();
        // More traces than the workers' window, so they wait for the caller.
        let n = 3 * AHEAD_PER_WORKER * WORKERS_PER_THREAD * rayon::current_num_threads() + 3;
        for i in 0..n {
            let p = dir.join(format!("{i}.jsonl"));
            let text = if i % 2 == 0 { FIBER_HANDOFF } else { GIL_TURNS };
            std::fs::write(&p, text).unwrap();
            paths.push(p);
        }
        paths[5] = dir.join("missing.jsonl");
        let mut seen = Vec::new();
        let opts = AnalyzeOptions::default();
        let r: Result<_, ()> = analyze_many(&paths, &opts, ManyTraces::Report, |i, p, r| {
            assert_eq!(p, paths[i]);
            seen.push((i, r.map(|r| r.functions.len()).map_err(|e| e.to_string())));
            Ok(())
        });
        assert!(r.is_ok());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(seen.len(), n);
        for (k, (i, r)) in seen.into_iter().enumerate() {
            assert_eq!(i, k);
            match (k, r) {
                (5, Err(e)) => assert!(e.contains("missing.jsonl"), "{e}"),
                (k, Ok(functions)) => assert_eq!(functions, if k % 2 == 0 { 3 } else { 2 }),
                (k, Err(e)) => panic!("trace {k}: {e}"),
            }
        }
    }

    /// Trace `i` of [`one_worker_sums_its_traces_as_a_merge_of_their_reports`]:
    /// five functions declared in an order of its own (their ids differ
    /// from trace to trace), of which it calls the first `2 + i % 4` (some
    /// get a row only in later traces), a module named only in some
    /// traces; its own stacks and a logical one migrating between its two
    /// threads. `unknown`: an id no record names, on thread 1's own stack
    /// (`Some(true)`: the segment pass's replay of it numbers the id as it
    /// meets it) or on the logical stack.
    fn worker_trace(i: usize, unknown: Option<bool>) -> LoadedTrace {
        use mtrace_format::{EventKind, FunctionId, StackId, ThreadId, TraceWriter, WriterOptions};
        let out = std::io::Cursor::new(Vec::new());
        let mut w = TraceWriter::new(out, WriterOptions::default()).unwrap();
        let names = ["a", "b", "c", "d", "e"];
        let mut ids = [FunctionId(0); 5];
        for k in 0..names.len() {
            let k = (k + i) % names.len();
            let module = if (i + k).is_multiple_of(3) {
                ""
            } else {
                ["m", "n"][i % 2]
            };
            ids[k] = w.function(names[k], "f.rs", k as u32, module);
        }
        let called = &ids[..2 + i % 4];
        let stack = w.stack("s");
        let mut t = 10 * i as u64;
        let mut ev = |w: &mut TraceWriter<_>, tid, kind| {
            t += 7;
            w.event(ThreadId(tid), t, kind).unwrap();
        };
        for (n, &f) in called.iter().enumerate() {
            let g = called[(n + 1) % called.len()];
            ev(&mut w, 1, EventKind::Enter(f));
            ev(&mut w, 1, EventKind::Enter(g));
            ev(&mut w, 1, EventKind::Enter(f));
            ev(&mut w, 1, EventKind::Exit(f));
            ev(&mut w, 1, EventKind::Exit(g));
            ev(&mut w, 2, EventKind::Switch(stack));
            ev(&mut w, 2, EventKind::Enter(g));
            ev(&mut w, 2, EventKind::Switch(StackId::OWN));
            ev(&mut w, 1, EventKind::Switch(stack));
            ev(&mut w, 1, EventKind::Exit(g));
            ev(&mut w, 1, EventKind::Switch(StackId::OWN));
            ev(&mut w, 1, EventKind::Exit(f));
        }
        match unknown {
            Some(true) => {
                ev(&mut w, 1, EventKind::Enter(FunctionId(99)));
                ev(&mut w, 1, EventKind::Enter(called[0]));
            }
            Some(false) => {
                ev(&mut w, 2, EventKind::Switch(stack));
                ev(&mut w, 2, EventKind::Enter(FunctionId(77)));
                ev(&mut w, 2, EventKind::Enter(called[1]));
                ev(&mut w, 2, EventKind::Switch(StackId::OWN));
            }
            None => {}
        }
        // Left open at the end.
        ev(&mut w, 2, EventKind::Enter(called[1]));
        let bytes = w.finish(None).unwrap().into_inner();
        crate::input::from_bytes(&format!("t{i}"), bytes).unwrap()
    }

    /// One worker summing trace after trace, its tally and numbering kept
    /// throughout (traces with functions the metadata does not name among
    /// them, numbered as the segment pass meets them), adds
    /// up to the merge of the traces' reports, rows in the same order.
    #[test]
    fn one_worker_sums_its_traces_as_a_merge_of_their_reports() {
        use crate::analysis::options::TimeBound;
        use mtanalyze_model::merge::{merge, Merged};
        let traces: Vec<LoadedTrace> = (0..12)
            .map(|i| worker_trace(i, [None, None, None, Some(true), None, Some(false)][i % 6]))
            .collect();
        let windows = [(None, None), (Some(100), Some(400)), (Some(150), None)];
        for clock in [
            mtanalyze_model::report::Clock::Stack,
            mtanalyze_model::report::Clock::Gil,
            mtanalyze_model::report::Clock::Wall,
        ] {
            for (from, to) in windows {
                let opts = AnalyzeOptions {
                    clock: Some(clock),
                    from: from.map(TimeBound::At),
                    to: to.map(TimeBound::At),
                    ..AnalyzeOptions::default()
                };
                let want = merge(traces.iter().map(|t| crate::analyze(t, &opts).unwrap()));
                let mut scratch = one_worker();
                let mut merged = Merged::new();
                for (i, t) in traces.iter().enumerate() {
                    let mut c = analyze_in(t, &opts, &mut scratch, Some(i as u32)).unwrap();
                    scratch.sums.add_compact(i as u32, &mut c);
                    merged.add_compact(c);
                }
                merged.absorb(scratch.into_sums());
                let got = merged.finish();
                assert!(got.as_ref().is_some_and(|r| r.edges.len() > 5));
                assert_eq!(got, want, "{clock:?} {from:?} {to:?}");
            }
        }
    }

    /// Functions of the traces of
    /// [`a_worker_that_forgets_its_edges_sums_them_all_the_same`].
    const FAN_FUNCTIONS: u32 = 150;

    /// A trace calling each (caller, callee) of `edges` once, the calls
    /// of a caller in one frame of it (a callee that is its caller is
    /// called from a second frame of it: a recursive edge), each taking a
    /// time of its own; functions `f0` to `f149` declared from `f{i}` on,
    /// so their ids differ from trace to trace. One caller in eight runs
    /// on a logical stack of thread 2, the rest on thread 1's own stack.
    fn fan_trace(i: usize, edges: &[(u32, u32)]) -> LoadedTrace {
        use mtrace_format::{EventKind, FunctionId, StackId, ThreadId, TraceWriter, WriterOptions};
        let out = std::io::Cursor::new(Vec::new());
        let mut w = TraceWriter::new(out, WriterOptions::default()).unwrap();
        let mut ids = vec![FunctionId(0); FAN_FUNCTIONS as usize];
        for k in 0..FAN_FUNCTIONS {
            let k = (k + i as u32) % FAN_FUNCTIONS;
            ids[k as usize] = w.function(&format!("f{k}"), "fan.rs", k, "fan");
        }
        let stack = w.stack("s");
        let mut t = 1_000;
        let mut ev = |w: &mut TraceWriter<_>, tid, step: u32, kind| {
            t += 1 + u64::from(step % 11);
            w.event(ThreadId(tid), t, kind).unwrap();
        };
        for run in edges.chunk_by(|a, b| a.0 == b.0) {
            let c = run[0].0;
            let (f, tid) = (ids[c as usize], 1 + u64::from(c % 8 == 0));
            if tid == 2 {
                ev(&mut w, 2, 0, EventKind::Switch(stack));
            }
            ev(&mut w, tid, c, EventKind::Enter(f));
            for &(_, callee) in run {
                let (g, step) = (ids[callee as usize], 7 * c + 3 * callee + i as u32);
                ev(&mut w, tid, step, EventKind::Enter(g));
                ev(&mut w, tid, step / 2, EventKind::Exit(g));
            }
            ev(&mut w, tid, c, EventKind::Exit(f));
            if tid == 2 {
                ev(&mut w, 2, 0, EventKind::Switch(StackId::OWN));
            }
        }
        let bytes = w.finish(None).unwrap().into_inner();
        crate::input::from_bytes(&format!("fan{i}"), bytes).unwrap()
    }

    /// `callers` each calling the 50 functions `c + stride * k`: 5,000
    /// edges for 100 callers.
    fn fan(callers: std::ops::Range<u32>, stride: u32) -> Vec<(u32, u32)> {
        callers
            .flat_map(|c| (0..50).map(move |k| (c, (c + stride * k) % FAN_FUNCTIONS)))
            .collect()
    }

    /// A worker's tally forgets the numbers of its edges once it numbers
    /// many more than a trace calls (their sums going to the worker's sums
    /// first): traces of 5,000 edges and traces of three or four, which
    /// call again edges numbered before a reset, add up to the merge of
    /// their reports all the same, every function, edge and stack, under
    /// every clock, with and without a window (which makes even a big
    /// trace forget its edges: it counts few of them).
    #[test]
    fn a_worker_that_forgets_its_edges_sums_them_all_the_same() {
        use crate::analysis::options::TimeBound;
        use mtanalyze_model::merge::{merge, Merged};
        let a = fan(0..100, 1);
        let c = fan(50..150, 2);
        // (70, 100) and (3, 3) are a's, (70, 100) c's too; (120, 5) is new.
        let b = [(120, 5), (70, 100), (3, 3)];
        // (149, 1) is c's, (99, 100) a's, (60, 60) both's; (7, 140) is new.
        let d = [(149, 1), (99, 100), (7, 140), (60, 60)];
        let e = [(60, 60), (0, 1), (120, 5)];
        let edges: [&[(u32, u32)]; 5] = [&a, &b, &c, &d, &e];
        let traces: Vec<LoadedTrace> = edges
            .iter()
            .enumerate()
            .map(|(i, e)| fan_trace(i, e))
            .collect();
        // How many edges the worker's tally numbers after each trace (none
        // after a reset), and the edge rows of the merge. The window holds
        // the first 30 or so calls of a trace: a and c count too few of
        // theirs to keep them.
        let windows = [
            ((None, None), [5_000, 0, 5_000, 0, 3], 8_752),
            ((Some(1_000), Some(1_400)), [0, 3, 0, 4, 6], 74),
        ];
        for clock in [
            mtanalyze_model::report::Clock::Stack,
            mtanalyze_model::report::Clock::Gil,
            mtanalyze_model::report::Clock::Wall,
        ] {
            for ((from, to), numbered, rows) in windows {
                let opts = AnalyzeOptions {
                    clock: Some(clock),
                    from: from.map(TimeBound::At),
                    to: to.map(TimeBound::At),
                    ..AnalyzeOptions::default()
                };
                let case = format!("{clock:?} {from:?} {to:?}");
                let want = merge(traces.iter().map(|t| crate::analyze(t, &opts).unwrap())).unwrap();
                let mut scratch = one_worker();
                let mut merged = Merged::new();
                let mut seen = Vec::new();
                for (i, t) in traces.iter().enumerate() {
                    let mut c = analyze_in(t, &opts, &mut scratch, Some(i as u32)).unwrap();
                    seen.push(scratch.tables.summed_edges_numbered().unwrap());
                    scratch.sums.add_compact(i as u32, &mut c);
                    merged.add_compact(c);
                }
                assert_eq!(seen, numbered, "{case}: edges numbered after each trace");
                merged.absorb(scratch.into_sums());
                let got = merged.finish().unwrap();
                assert_eq!(want.edges.len(), rows, "{case}");
                assert_eq!(got.functions, want.functions, "{case}");
                assert_eq!(got.edges.len(), rows, "{case}");
                for (g, w) in got.edges.iter().zip(&want.edges) {
                    assert_eq!(g, w, "{case}");
                }
                assert_eq!(got.stacks, want.stacks, "{case}");
                assert_eq!(got.trace, want.trace, "{case}");
                assert_eq!(got, want, "{case}");
            }
        }
    }

    #[test]
    fn an_error_from_the_caller_stops_the_run() {
        let paths = vec![
            PathBuf::from("/nonexistent/a"),
            PathBuf::from("/nonexistent/b"),
        ];
        let mut calls = 0;
        let r = analyze_many(
            &paths,
            &AnalyzeOptions::default(),
            ManyTraces::Merge,
            |_, _, _| {
                calls += 1;
                Err("stop")
            },
        );
        assert_eq!((r.err(), calls), (Some("stop"), 1));
    }
}

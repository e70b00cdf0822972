//! The analyzer from Python: `mtrace.analyze` and the `mtanalyze` console
//! script, both the Rust analyzer linked into the extension (never a second
//! analyzer written in Python).
//!
//! * [`analyze`] loads and analyzes a trace with the GIL released and hands
//!   the report back as the serde form the JSON report is written from
//!   (`pythonize`): dicts and lists with the same field names, units and
//!   order as `mtanalyze --format json`, no JSON text in between. The Python package
//!   wraps it in `mtrace.Report`.
//! * [`run_mtanalyze`] runs the command line (`mtanalyze_cli::run`) on the
//!   process's stdout; [`run_mtanalyze_captured`] returns what it wrote, for a
//!   caller whose `sys.stdout` is not the process's (a notebook).
//!
//! A trace that cannot be read raises `TraceError` (a `ValueError`) with
//! the analyzer's own message, which names the file and the byte offset.
//!
//! Every analysis runs [`without_staying_threads`]: the program that
//! called it (a `pstats.Stats(profile)` per web request) has no thread of
//! mtrace's afterwards.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::hash::BuildHasher;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mtanalyze::render::pstats::{Key, PstatsTable};
use mtanalyze::report::{analyze_compact, CompactReport};
use mtanalyze::view::{filtered_report, EdgeSelection, ViewOptions};
use mtanalyze::{report::Clock, AnalyzeOptions, TimeBound};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};
use rustc_hash::FxBuildHasher;

use crate::memory::PyMemoryTrace;

pyo3::create_exception!(
    _mtrace,
    TraceError,
    PyValueError,
    "A trace that cannot be read or analyzed (the message names the file and the byte offset)."
);

/// Why an analysis from Python did not give a report.
enum Failure {
    /// The file could not be opened or read.
    Io(String),
    /// The trace is not one, or is damaged past what the analyzer salvages.
    Trace(String),
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Io(m) => PyOSError::new_err(m),
            Failure::Trace(m) => TraceError::new_err(m),
        }
    }
}

/// The trace at `path`: a file that cannot be read is an `OSError`, one
/// that is no trace a `TraceError`.
fn load(path: &Path) -> Result<mtanalyze::LoadedTrace, Failure> {
    mtanalyze::load(path).map_err(|e| match e {
        mtanalyze::LoadError::Io { .. } => Failure::Io(e.to_string()),
        _ => Failure::Trace(e.to_string()),
    })
}

/// An option's text as the analyzer's type, or a ValueError naming it.
fn parsed<T: std::str::FromStr<Err = String>>(
    what: &str,
    text: Option<&str>,
) -> PyResult<Option<T>> {
    text.map(|t| {
        t.parse::<T>()
            .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
    })
    .transpose()
}

/// Runs `work` (an analysis) so that no thread of it outlives the call:
/// with one thread, all of it on the calling thread (no thread started);
/// with more, its parallel parts on a thread pool made for this call,
/// whose threads have ended before it returns. rayon's global pool, which
/// the analyzer would use otherwise, keeps its threads for the life of the
/// process, where the program sees them (`/proc/self/task`, CPython's
/// warning at `os.fork()`). If no thread can be started, `work` runs on
/// the calling thread.
///
/// `threads`: how many ([`threads_for`] its inputs).
fn without_staying_threads<R: Send>(threads: usize, work: impl FnOnce() -> R + Send) -> R {
    if threads <= 1 {
        return mtanalyze::threads::on_the_calling_thread(work);
    }
    let spawned = Mutex::new(Vec::new());
    let mut slot = Some(work);
    let ran = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_scoped(
            |thread| {
                if let Some(task) = this_task() {
                    spawned.lock().unwrap_or_else(|e| e.into_inner()).push(task);
                }
                thread.run()
            },
            |pool| slot.take().map(|work| pool.install(work)),
        );
    // The scope joined the threads, but a joined thread is still listed
    // while the kernel finishes its exit: a program counting its threads
    // right after the call would count it.
    let deadline = Instant::now() + Duration::from_millis(100);
    for task in spawned.into_inner().unwrap_or_else(|e| e.into_inner()) {
        while task.exists() && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }
    match (ran, slot.take()) {
        (Ok(Some(done)), _) => done,
        (_, Some(work)) => mtanalyze::threads::on_the_calling_thread(work),
        // Unreachable: the work is either done on the pool or still here.
        (_, None) => unreachable!("the analysis neither ran nor stayed"),
    }
}

/// Threads for an analysis of `inputs` (the arguments that are files; the
/// others are left out): one (the caller) for small files, which it
/// finishes before more would have started; else one per processor.
fn threads_for<S: AsRef<OsStr>>(inputs: &[S]) -> usize {
    use std::os::unix::fs::MetadataExt;
    // The bytes written, not the length: a trace's unused name region is a
    // hole (16 MiB of a Python trace), and holes read as nothing to do.
    let bytes: u64 = inputs
        .iter()
        .filter_map(|input| std::fs::metadata(input.as_ref()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len().min(m.blocks().saturating_mul(512)))
        .sum();
    threads_for_bytes(bytes)
}

/// Threads for an analysis of `bytes` of traces: see [`threads_for`].
fn threads_for_bytes(bytes: u64) -> usize {
    if bytes < SMALL_INPUT {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Inputs smaller than this (in all) are analyzed on one thread: a profile
/// of a web request is analyzed in less time than threads take to start.
const SMALL_INPUT: u64 = 4 << 20;

/// The calling thread's entry in `/proc` (`/proc/PID/task/TID`), which is
/// gone once the thread has ended; None where there is no `/proc`.
fn this_task() -> Option<PathBuf> {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .map(|task| Path::new("/proc").join(task))
}

/// Analyzes the trace at `path` and returns the report as the JSON report's
/// value (a dict). `clock`: `stack`, `gil` or `wall` (None: the trace's
/// preferred clock); `start`/`end`: `--from`/`--to` (a duration from the
/// start such as `"150ms"`, or `"mark:NAME"`); `threads`, `stacks`: as
/// `--thread` and `--stack`.
#[pyfunction]
#[pyo3(signature = (path, clock = None, start = None, end = None, threads = None, stacks = None))]
pub(crate) fn analyze<'py>(
    py: Python<'py>,
    path: &str,
    clock: Option<&str>,
    start: Option<&str>,
    end: Option<&str>,
    threads: Option<Vec<u64>>,
    stacks: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyAny>> {
    let options = AnalyzeOptions {
        clock: parsed::<Clock>("clock", clock)?,
        from: parsed::<TimeBound>("start", start)?,
        to: parsed::<TimeBound>("end", end)?,
        threads: threads.unwrap_or_default(),
        stacks: stacks.unwrap_or_default(),
        ..AnalyzeOptions::default()
    };
    let report = py.detach(|| {
        without_staying_threads(threads_for(&[path]), || {
            mtanalyze::analyze(&load(Path::new(path))?, &options)
                .map_err(|e| Failure::Trace(e.to_string()))
        })
    })?;
    // The view `--format json` writes with no view option: functions by
    // self time, every edge and stack.
    let view = filtered_report(&report, &ViewOptions::default(), &EdgeSelection::default());
    pythonize::pythonize(py, &view)
        .map_err(|e| PyValueError::new_err(format!("the report as Python objects: {e}")))
}

/// A trace to sum in [`pstats`]: a path, or a trace in memory.
enum Input {
    Path(PathBuf),
    Memory(mtrace::MemoryTrace),
}

impl Input {
    /// `item`: an `mtrace.MemoryTrace` (open), or anything `os.fspath` takes.
    fn of(item: &Bound<'_, PyAny>) -> PyResult<Input> {
        match item.cast::<PyMemoryTrace>() {
            Ok(handle) => handle
                .get()
                .view()
                .map(Input::Memory)
                .ok_or_else(|| PyValueError::new_err("the trace in memory is closed")),
            Err(_) => item.extract::<PathBuf>().map(Input::Path),
        }
    }

    /// Where it is read from, for several traces (`analyze_many` reads
    /// paths): a trace in memory through a descriptor of it, kept open
    /// for the analysis and given back after it.
    fn path(&self, descriptors: &mut Vec<std::fs::File>) -> Result<PathBuf, Failure> {
        match self {
            Input::Path(path) => Ok(path.clone()),
            Input::Memory(view) => {
                use std::os::fd::AsRawFd;
                let descriptor = view
                    .descriptor()
                    .map_err(|e| Failure::Io(format!("the trace in memory: {e}")))?;
                let path = PathBuf::from(format!("/proc/self/fd/{}", descriptor.as_raw_fd()));
                descriptors.push(descriptor);
                Ok(path)
            }
        }
    }
}

/// The statistics of `traces` (paths, or `mtrace.MemoryTrace`s), summed,
/// as the dict cProfile's `Profile.stats` is and a pstats file holds
/// (what `mtanalyze PATHS... --format pstats -o -` writes, without the
/// command line around it: these traces only, no child processes' or
/// series' files looked for, no warning said). `clock`: as for
/// [`analyze`]. One trace in memory (a profile per request) is read where
/// the recorder wrote it: no descriptor, mapping or copy; and the dict is
/// built here, not encoded as marshal bytes for Python to decode.
#[pyfunction]
#[pyo3(signature = (traces, clock = None))]
pub(crate) fn pstats<'py>(
    py: Python<'py>,
    traces: Vec<Bound<'py, PyAny>>,
    clock: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let options = AnalyzeOptions {
        clock: parsed::<Clock>("clock", clock)?,
        ..AnalyzeOptions::default()
    };
    let inputs = traces.iter().map(Input::of).collect::<PyResult<Vec<_>>>()?;
    let threads = inputs
        .iter()
        .map(|input| match input {
            Input::Path(path) => threads_for(&[path]),
            Input::Memory(view) => threads_for_bytes(view.bytes().len() as u64),
        })
        .max()
        .unwrap_or(1);
    let analyze = || {
        without_staying_threads(threads, || -> Result<Analyzed, Failure> {
            let failed = |e: mtanalyze::AnalyzeError| Failure::Trace(e.to_string());
            // One trace: its edges left numbered (read once, below).
            let one = |trace: &mtanalyze::LoadedTrace| {
                analyze_compact(trace, &options)
                    .map(Analyzed::One)
                    .map_err(failed)
            };
            Ok(match inputs.as_slice() {
                [Input::Memory(view)] => {
                    let trace = mtanalyze::LoadedTrace::from_shared(
                        "the trace in memory",
                        Box::new(view.clone()),
                    )
                    .map_err(|e| Failure::Trace(e.to_string()))?;
                    one(&trace)?
                }
                [Input::Path(path)] => one(&load(path)?)?,
                several => {
                    let mut descriptors = Vec::new();
                    let paths = several
                        .iter()
                        .map(|input| input.path(&mut descriptors))
                        .collect::<Result<Vec<_>, _>>();
                    let merged = paths.and_then(|paths| {
                        mtanalyze::analyze_many(
                            &paths,
                            &options,
                            mtanalyze::ManyTraces::Merge,
                            |_, _, r| r.map(|_| ()).map_err(|e| Failure::Trace(e.to_string())),
                        )
                    });
                    // Given back whether the analysis went well or not.
                    for descriptor in descriptors {
                        mtrace::give_back_memory_trace(descriptor);
                    }
                    Analyzed::Summed(
                        merged?
                            .finish()
                            .ok_or_else(|| Failure::Trace("no trace given".into()))?,
                    )
                }
            })
        })
    };
    // A profile per request is analyzed in less time than letting go of
    // the GIL and taking it back costs: only an analysis of traces in
    // memory worth threads lets other Python threads run meanwhile. (A
    // path may name a large file: always let go then.)
    let in_memory_and_small = threads <= 1 && inputs.iter().all(|i| matches!(i, Input::Memory(_)));
    let report = if in_memory_and_small {
        analyze()
    } else {
        py.detach(analyze)
    }?;
    let table = match &report {
        Analyzed::One(compact) => PstatsTable::of_compact(compact),
        Analyzed::Summed(report) => PstatsTable::of(report),
    };
    stats_dict(py, &table)
}

/// What [`pstats`] analyzed: one trace, or several summed.
enum Analyzed {
    One(CompactReport),
    Summed(mtanalyze::Report),
}

/// `table` as pstats' dict: `{(file, line, name): (cc, nc, tt, ct,
/// {caller: (nc, cc, tt, ct)})}`, times in seconds, as the marshal
/// encoding in `mtanalyze::render::pstats` writes it. Each entry's key is
/// one tuple, shared wherever that function calls (as cProfile's keys
/// share the code objects' strings), and the entries of one file share
/// its string.
fn stats_dict<'py, 'r>(py: Python<'py>, table: &PstatsTable<'r>) -> PyResult<Bound<'py, PyDict>> {
    // Not waited for: a dict made meanwhile by another thread, or by a
    // finalizer the allocations below ran, makes its keys anew.
    let mut made = KEY_TUPLES.try_lock().ok();
    // Keys sorted by file first: an entry's file is most often the last
    // one's, whose string it shares.
    let mut last_file: Option<(&'r str, Bound<'py, PyString>)> = None;
    let mut tuple_of = |key @ (file, line, name): Key<'r>| -> PyResult<Bound<'py, PyTuple>> {
        let hash = KeyTuples::hash(key);
        if let Some(tuple) = made.as_ref().and_then(|made| made.get(py, hash, key)) {
            return Ok(tuple);
        }
        let file = match &last_file {
            Some((f, string)) if *f == file => string.clone(),
            _ => {
                let string = PyString::new(py, file);
                last_file = Some((file, string.clone()));
                string
            }
        };
        let tuple = PyTuple::new(
            py,
            [
                file.into_any(),
                line.into_pyobject(py)?.into_any(),
                PyString::new(py, name).into_any(),
            ],
        )?;
        if let Some(made) = made.as_mut() {
            made.insert(hash, key, &tuple);
        }
        Ok(tuple)
    };
    // The entries' keys, in the table's (sorted) order: a caller is found
    // among them by binary search (a caller has an entry of its own
    // unless it was summed from another trace without one).
    let mut keys: Vec<(Key<'r>, Bound<'py, PyTuple>)> = Vec::with_capacity(table.sizes().0);
    table.for_each(|k, _, _| -> PyResult<()> {
        keys.push((k, tuple_of(k)?));
        Ok(())
    })?;
    let seconds = |ns: u64| ns as f64 / 1e9;
    let stats = PyDict::new(py);
    let mut entry_keys = keys.iter();
    table.for_each(|_, counts, callers| -> PyResult<()> {
        let by_caller = PyDict::new(py);
        for ((_, caller), c) in callers {
            let key = match keys.binary_search_by(|(k, _)| k.cmp(caller)) {
                Ok(at) => keys[at].1.clone(),
                Err(_) => tuple_of(*caller)?,
            };
            by_caller.set_item(key, (c.nc, c.cc, seconds(c.tt_ns), seconds(c.ct_ns)))?;
        }
        let entry = (
            counts.cc,
            counts.nc,
            seconds(counts.tt_ns),
            seconds(counts.ct_ns),
            by_caller,
        );
        let (_, key) = entry_keys
            .next()
            .ok_or_else(|| Failure::Trace("the pstats table changed while read".into()))?;
        stats.set_item(key, entry)
    })?;
    Ok(stats)
}

/// The pstats keys [`stats_dict`] made, kept for the next dicts: a
/// profile per request names mostly the same functions each time, and
/// then its dict holds the same key tuples, whose strings were made and
/// hashed once (as cProfile's keys hold the code objects' own strings).
static KEY_TUPLES: Mutex<KeyTuples> = Mutex::new(KeyTuples::new());

/// Keys kept at most: past it they are let go of and made anew (a
/// program that runs ever new code, `exec` in a loop, keeps no more).
const KEY_TUPLES_KEPT: usize = 1 << 16;

/// Key tuples by the hash of their key (a key is looked up by its parts,
/// with no string made for the lookup).
struct KeyTuples {
    by_hash: HashMap<u64, Vec<KeptKey>, FxBuildHasher>,
    len: usize,
}

struct KeptKey {
    file: Box<str>,
    line: u32,
    name: Box<str>,
    tuple: Py<PyTuple>,
}

impl KeyTuples {
    const fn new() -> KeyTuples {
        KeyTuples {
            by_hash: HashMap::with_hasher(FxBuildHasher),
            len: 0,
        }
    }

    /// What `key` is kept under: computed once per key and handed to
    /// [`KeyTuples::get`] and, if that misses, [`KeyTuples::insert`].
    fn hash((file, line, name): Key<'_>) -> u64 {
        FxBuildHasher.hash_one((file, line, name))
    }

    fn get<'py>(
        &self,
        py: Python<'py>,
        hash: u64,
        (file, line, name): Key<'_>,
    ) -> Option<Bound<'py, PyTuple>> {
        self.by_hash
            .get(&hash)?
            .iter()
            .find(|k| k.line == line && *k.file == *file && *k.name == *name)
            .map(|k| k.tuple.bind(py).clone())
    }

    fn insert(&mut self, hash: u64, (file, line, name): Key<'_>, tuple: &Bound<'_, PyTuple>) {
        if self.len >= KEY_TUPLES_KEPT {
            *self = KeyTuples::new();
        }
        self.len += 1;
        self.by_hash.entry(hash).or_default().push(KeptKey {
            file: file.into(),
            line,
            name: name.into(),
            tuple: tuple.clone().unbind(),
        });
    }
}

/// Runs the `mtanalyze` command line on `argv` (its name first) with the
/// GIL released, writing to the process's stdout; returns the exit status.
#[pyfunction]
#[pyo3(name = "mtanalyze")]
pub(crate) fn run_mtanalyze(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    py.detach(|| {
        without_staying_threads(threads_for(&argv), || {
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            mtanalyze_cli::run(argv, &mut out)
        })
    })
}

/// [`run_mtanalyze`], returning `(status, what it wrote to stdout)` instead.
#[pyfunction]
#[pyo3(name = "mtanalyze_captured")]
pub(crate) fn run_mtanalyze_captured(
    py: Python<'_>,
    argv: Vec<OsString>,
) -> (u8, Bound<'_, PyBytes>) {
    let (status, out) = py.detach(|| {
        without_staying_threads(threads_for(&argv), || {
            let mut out = Vec::new();
            let status = mtanalyze_cli::run(argv, &mut out);
            (status, out)
        })
    });
    (status, PyBytes::new(py, &out))
}

//! `mtrace._mtrace`: the native half of the Python binding.
//!
//! CPython's events become mtrace `enter`/`exit`/switch events on the thread
//! that runs them, through one of two backends, chosen when the extension is
//! built (pyo3's `Py_3_12` cfg):
//!
//! * `monitoring.rs`, Python 3.12+: `sys.monitoring` callbacks that are C
//!   functions, process-wide (every thread), under a tool id of mtrace's own;
//! * `legacy.rs`, Python 3.11: a C profile function set on every thread
//!   state, and a PEP 523 frame evaluator that sets it on those that appear
//!   later (however the thread was started, C libraries' threads included)
//!   before their first frame runs.
//!
//! Both feed `stacks.rs`, which decides which stack each event belongs to
//! (the thread's own, a greenlet's, an asyncio task's), keeps the shadow
//! stacks that make a return whose call was not recorded harmless, and
//! records a wake of an asyncio task when the event loop schedules it.
//! `registry.rs` names code objects and C functions. `analyze.rs` is the
//! other half: the Rust analyzer and its command line, linked in.
//!
//! ```text
//! CPython events -> monitoring.rs | legacy.rs -> stacks.rs -> mtrace::{enter, exit, wake, LogicalStack}
//!                                                  |
//!                                              registry.rs (code object / PyMethodDef -> FunctionId)
//! ```
//!
//! Nothing here relies on the GIL for its own state (thread-local state,
//! atomics, mutexes), so the module is declared free-threading safe; on a
//! free-threaded build the trace asks for the `stack` clock instead of `gil`.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod analyze;
mod memory;
mod registry;
mod stacks;

#[cfg(not(Py_3_12))]
mod legacy;
#[cfg(Py_3_12)]
mod monitoring;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use mtrace::{Config, Mode, PreferredClock, Producer, Recording, StartError};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::registry::lock;

/// Greenlets given a stack so far (their names count up).
static GREENLETS: AtomicU64 = AtomicU64::new(0);
/// The running recording.
static RECORDING: Mutex<Option<Recording>> = Mutex::new(None);
/// How the running recording was started (its configuration and whether
/// asyncio tasks get stacks), for a forked child's own recording.
static STARTED_WITH: Mutex<Option<(Config, bool)>> = Mutex::new(None);

/// `start`'s error while a recording runs, whether this module's or one
/// the Rust crate started in the same process: one message for both.
fn already_recording(running: &std::path::Path) -> PyErr {
    PyRuntimeError::new_err(format!(
        "mtrace is already recording to {}",
        running.display()
    ))
}

/// The clock the trace asks `mtanalyze` to use: `gil` where one thread runs
/// Python at a time, `stack` on a free-threaded build, where threads run at
/// once.
fn preferred_clock() -> PreferredClock {
    if cfg!(Py_GIL_DISABLED) {
        PreferredClock::Stack
    } else {
        PreferredClock::Gil
    }
}

/// Starts a recording into `path` (the header names the Python producer)
/// and installs the backend: every thread of the interpreter is recorded
/// from now on, those that exist and those that appear later, however they
/// are started.
///
/// `builtins`: True (C functions, as cProfile records them), False (none),
/// or "fast" (3.12+: a call site seen calling a Python function is no
/// longer watched for C calls; on 3.11 the same as True). `meta_capacity`:
/// bytes of the first region for names (the recorder's default, a few
/// hundred functions' names; names past it go on in chunk slots as the
/// file grows, so it is no limit). A bad capacity
/// raises ValueError, a file that cannot be made OSError.
///
/// `armed`: start paused (nothing recorded until `resume`); `signal`: a
/// signal name (`"USR2"`, `"SIGUSR2"`) or number that toggles recording
/// from outside (`kill -USR2 PID`); its handler replaces the program's.
///
/// `rotate`: a size (`"256M"`) or an age (`"60s"`, `"5min"`) at which the
/// recording moves on to the next file of a series, `NAME.1.EXT`,
/// `NAME.2.EXT`, ... beside `path`; `keep`: how many files of it to keep.
///
/// `memory`: record into memory, no file (`path` only names it); `stop`
/// then hands over the descriptor the trace is read from.
///
/// `open_frames`: the recording is attached to a running program: each
/// thread's frames open at its first event are taken as open since the
/// recording began (time from the file's start, no call), with the mark
/// `mtrace:open-frames`; every other thread's frames are adopted at the
/// start, so that a thread blocked for the whole recording is in it too.
#[pyfunction]
#[pyo3(signature = (path, capacity = None, ring = false, builtins = None, tasks = true, meta_capacity = None, armed = false, signal = None, rotate = None, keep = None, memory = false, open_frames = false))]
#[allow(clippy::too_many_arguments)]
fn start(
    py: Python<'_>,
    path: &str,
    capacity: Option<&str>,
    ring: bool,
    builtins: Option<&Bound<'_, PyAny>>,
    tasks: bool,
    meta_capacity: Option<&str>,
    armed: bool,
    signal: Option<&str>,
    rotate: Option<&str>,
    keep: Option<u32>,
    memory: bool,
    open_frames: bool,
) -> PyResult<()> {
    let (builtins, fast_builtins) = match builtins {
        None => (true, false),
        Some(b) if b.extract::<String>().is_ok_and(|s| s == "fast") => (true, true),
        Some(b) => match b.extract::<bool>() {
            Ok(on) => (on, false),
            Err(_) => {
                return Err(PyValueError::new_err(
                    "builtins: expected True, False or \"fast\"",
                ))
            }
        },
    };
    let mut slot = lock(&RECORDING);
    if let Some(running) = slot.as_ref() {
        return Err(already_recording(running.path()));
    }
    if FLOOR.load(Ordering::Relaxed) {
        return Err(PyRuntimeError::new_err(
            "floor_start() is active: floor_stop() first",
        ));
    }
    // The producer tells mtanalyze the names are `co_qualname`s, so its
    // pstats output can key them by `co_name` as cProfile does.
    // No page provisioner thread: CPython counts the process's threads at
    // every `os.fork()` and warns (3.12+) when there is more than one, and
    // a program must not see a thread it did not start. Each claim maps
    // its own chunk's pages instead.
    let mut config = Config::new(path)
        .preferred_clock(preferred_clock())
        .producer(Producer::Python)
        .provisioner(false)
        .in_memory(memory)
        // A recording into memory (a profile, often one per request) holds
        // the names of the functions it saw, not of every function the
        // process ever ran (thousands in a large program, per request).
        .names_on_use(memory);
    // A trace file holds compact events (format version 4): a sixth of
    // the bytes, so a sixth of the fresh pages to fault in, which costs a
    // Python program more CPU time than the encoding's extra
    // instructions. A recording into memory (a profile, often one per
    // request) keeps 16-byte events: it never reaches a disk, and the
    // analysis at its `pstats.Stats` would expand compact events first.
    // `MTRACE_FORMAT` (3 or 4) decides either way when set.
    let format = match std::env::var("MTRACE_FORMAT")
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        Some(value) => mtrace::Format::from_env_value(&value).ok_or_else(|| {
            PyValueError::new_err(format!(
                "MTRACE_FORMAT={value:?}: expected 3 (16-byte events) or 4 (compact events)"
            ))
        })?,
        None if memory => mtrace::Format::Fixed,
        None => mtrace::Format::Compact,
    };
    config = config.format(format);
    if let Some(text) = capacity {
        config = config.capacity(mtrace::parse_bytes(text).ok_or_else(|| {
            PyValueError::new_err(format!(
                "capacity {text:?}: expected a byte count such as 64M"
            ))
        })?);
    }
    if let Some(text) = meta_capacity {
        let meta_bytes = mtrace::parse_bytes(text)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "meta_capacity {text:?}: expected a byte count such as 64K"
                ))
            })?;
        config = config.meta_capacity(meta_bytes);
    }
    if ring {
        config = config.mode(Mode::Ring);
    }
    config = config.armed(armed);
    if let Some(text) = signal {
        config = config.signal(mtrace::parse_signal(text).ok_or_else(|| {
            PyValueError::new_err(format!(
                "signal {text:?}: expected a signal such as USR2, SIGUSR1 or 12"
            ))
        })?);
    }
    if let Some(text) = rotate {
        config = config.rotate(mtrace::Rotation::parse(text).ok_or_else(|| {
            PyValueError::new_err(format!(
                "rotate {text:?}: expected a size such as 256M or an age such as 60s or 5min"
            ))
        })?);
    }
    if let Some(files) = keep {
        config = config.keep(files);
    }
    let started_with = (config.clone(), tasks);
    let recording = mtrace::start(config).map_err(|e| match e {
        StartError::Config(_) => PyValueError::new_err(e.to_string()),
        StartError::AlreadyRecording { ref running } => already_recording(running),
        _ => PyOSError::new_err(e.to_string()),
    })?;
    stacks::start_session(tasks, open_frames, memory);
    stacks::ACTIVE.store(true, Ordering::Release);
    #[cfg(Py_3_12)]
    let installed = monitoring::install(py, builtins, fast_builtins, false);
    #[cfg(not(Py_3_12))]
    let installed = {
        let _ = fast_builtins;
        legacy::install_all(py, builtins)
    };
    if let Err(e) = installed {
        stacks::ACTIVE.store(false, Ordering::Release);
        drop(recording);
        return Err(e);
    }
    *slot = Some(recording);
    *lock(&STARTED_WITH) = Some(started_with);
    // The other threads' frames with no lock held: on the free-threaded
    // build, `sys._current_frames()` stops the world, which must not wait
    // for a thread blocked on one of ours.
    drop(slot);
    if open_frames {
        stacks::adopt_other_threads(py);
    }
    Ok(())
}

/// The folder of the Python package (with a trailing separator): its code
/// is mtrace's own and never recorded, so no table shows mtrace's frames.
#[pyfunction]
fn set_own_folder(folder: String) {
    registry::set_own_folder(folder);
}

/// In a child process made by `fork` while recording (the Python package
/// calls it from `os.register_at_fork`): the recording inherited is the
/// parent's, whose file the child must never write (the recorder stopped
/// it at the fork). Starts the child's own recording into `path`, with the
/// parent's configuration; the backend stays installed, as the fork left
/// it. Returns False when nothing was recording. If the recording cannot
/// start, the backend is removed (the child runs unprofiled) and OSError
/// (or ValueError) says why.
#[pyfunction]
fn restart_in_child(py: Python<'_>, path: &str) -> PyResult<bool> {
    if !stacks::ACTIVE.load(Ordering::Acquire) {
        return Ok(false);
    }
    // Dropping it finishes nothing: the recorder refuses a file of another
    // process (`FinishError::OtherProcess`) before touching it.
    drop(lock(&RECORDING).take());
    let Some((mut config, tasks)) = lock(&STARTED_WITH).clone() else {
        return Ok(false);
    };
    config.path = path.into();
    let names_on_use = config.names_on_use;
    match mtrace::start(config) {
        Ok(recording) => {
            // A new session: the forking thread's open frames were the
            // parent's, their returns are not this recording's.
            stacks::start_session(tasks, false, names_on_use);
            *lock(&RECORDING) = Some(recording);
            Ok(true)
        }
        Err(e) => {
            stacks::ACTIVE.store(false, Ordering::Release);
            #[cfg(Py_3_12)]
            monitoring::uninstall(py)?;
            #[cfg(not(Py_3_12))]
            legacy::uninstall_all(py)?;
            Err(match e {
                StartError::Config(_) => PyValueError::new_err(e.to_string()),
                _ => PyOSError::new_err(e.to_string()),
            })
        }
    }
}

/// Stops the recording: removes the backend, closes the frames still open
/// on this thread (as cProfile does when it is disabled), finishes the file
/// and returns a summary (`path`, `events`, `dropped_events`, `threads`,
/// `growth_failure`: why the file stopped growing before its maximum, such
/// as a full disk, or None; for a recording into memory `trace`, its
/// `mtrace.MemoryTrace`), or None if nothing was recording.
#[pyfunction]
fn stop(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    stacks::ACTIVE.store(false, Ordering::Release);
    #[cfg(Py_3_12)]
    monitoring::uninstall(py)?;
    #[cfg(not(Py_3_12))]
    legacy::uninstall_all(py)?;
    // SAFETY: attached to the interpreter.
    unsafe { stacks::close_calling_thread() };
    let recording = lock(&RECORDING).take();
    let Some(recording) = recording else {
        return Ok(None);
    };
    // A recording into memory: the view its trace is read from, taken
    // before `finish` lets go of the file.
    let memory = recording.memory_view();
    let summary = py
        .detach(|| recording.finish())
        .map_err(|e| PyOSError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    if let Some(view) = memory {
        d.set_item("trace", memory::PyMemoryTrace::new(view))?;
    }
    d.set_item("path", summary.path.to_string_lossy().into_owned())?;
    d.set_item("files", summary.files)?;
    d.set_item("events", summary.events)?;
    d.set_item("dropped_events", summary.dropped_events)?;
    d.set_item("threads", summary.threads)?;
    d.set_item("growth_failure", summary.growth_failure)?;
    Ok(Some(d))
}

/// greenlet's trace hook (`greenlet.settrace`): on a switch or throw from
/// one greenlet to another, the thread moves to the target greenlet's
/// stack (a main greenlet's is the thread's own stack).
#[pyfunction]
fn greenlet_trace(event: &str, args: &Bound<'_, PyAny>) -> PyResult<()> {
    if event != "switch" && event != "throw" {
        return Ok(());
    }
    let Ok(pair) = args.cast::<PyTuple>() else {
        return Ok(());
    };
    if pair.len() != 2 {
        return Ok(());
    }
    let (origin, target) = (pair.get_item(0)?, pair.get_item(1)?);
    let origin_dead = origin
        .getattr("dead")
        .and_then(|d| d.is_truthy())
        .unwrap_or(false);
    let target_is_main = target
        .getattr("parent")
        .map(|p| p.is_none())
        .unwrap_or(true);
    // Named in the order greenlets first run: by the time the trace hook
    // sees a greenlet, it no longer has its `run` to name it by.
    let name = || format!("greenlet-{}", GREENLETS.fetch_add(1, Ordering::Relaxed) + 1);
    // SAFETY: attached; the addresses are only keys.
    unsafe {
        stacks::greenlet_switch(
            origin.as_ptr() as usize,
            origin_dead,
            target.as_ptr() as usize,
            target_is_main,
            name,
        )
    };
    Ok(())
}

/// Sets (or, with None, clears) the callback whose result (an int, or None
/// for the thread's own stack) names the context that runs: each context
/// gets a logical stack of its own. Called on every event: it costs.
#[pyfunction]
fn set_context_id_callback(callback: Option<Bound<'_, PyAny>>) -> PyResult<()> {
    if let Some(cb) = &callback {
        if !cb.is_callable() {
            return Err(PyValueError::new_err(
                "the context-id callback must be callable",
            ));
        }
    }
    // SAFETY: attached; the callback is a new (owned) reference.
    unsafe { stacks::set_callback(callback.map_or(std::ptr::null_mut(), |cb| cb.into_ptr())) };
    Ok(())
}

/// Records a named instant (`mtrace::mark`): the recording's clock and the
/// calling thread's id, into the trace's metadata. Nothing when this
/// module is not recording (so a mark never starts an `MTRACE_OUT`
/// recording behind `enable()`'s back). Takes the metadata region's lock,
/// briefly, with the GIL held (no holder of that lock waits for the GIL).
#[pyfunction]
fn mark(name: &str) {
    if stacks::ACTIVE.load(Ordering::Acquire) {
        mtrace::mark(name);
    }
}

/// `floor_start` is active (its hooks hold the tool id a recording takes).
static FLOOR: AtomicBool = AtomicBool::new(false);

/// For `bench/bench.py`: hooks that do nothing on the events a recording
/// watches (no file, no stacks), on every thread: what the interpreter's
/// dispatch of those events costs, the floor recording is measured
/// against. `builtins` as for `start` (True or False). `evaluator` (3.11
/// only; ignored on 3.12+): also install the frame evaluator a recording
/// installs there, so its own cost can be told from the profile function's.
/// Not for users.
#[pyfunction]
#[pyo3(signature = (builtins, evaluator=false))]
fn floor_start(py: Python<'_>, builtins: bool, evaluator: bool) -> PyResult<()> {
    if lock(&RECORDING).is_some() {
        return Err(PyRuntimeError::new_err("mtrace is recording"));
    }
    FLOOR.store(true, Ordering::Relaxed);
    #[cfg(Py_3_12)]
    {
        let _ = evaluator;
        monitoring::install(py, builtins, false, true)
    }
    #[cfg(not(Py_3_12))]
    {
        let _ = builtins;
        legacy::install_floor(py, evaluator);
        Ok(())
    }
}

/// Removes what `floor_start` installed.
#[pyfunction]
fn floor_stop(py: Python<'_>) -> PyResult<()> {
    FLOOR.store(false, Ordering::Relaxed);
    #[cfg(Py_3_12)]
    return monitoring::uninstall(py);
    #[cfg(not(Py_3_12))]
    legacy::uninstall_all(py)
}

/// Whether a recording runs.
#[pyfunction]
fn is_recording() -> bool {
    stacks::ACTIVE.load(Ordering::Relaxed)
}

/// Pauses the recording (the backend stays installed and follows the
/// frames, so a resume knows those open then); False if nothing records
/// or it was paused already.
#[pyfunction]
fn pause() -> bool {
    stacks::ACTIVE.load(Ordering::Relaxed) && mtrace::pause()
}

/// Resumes a paused (or armed) recording; False if nothing was paused.
#[pyfunction]
fn resume() -> bool {
    stacks::ACTIVE.load(Ordering::Relaxed) && mtrace::resume()
}

/// Whether the recording is paused (or armed and not resumed yet).
#[pyfunction]
fn is_paused() -> bool {
    stacks::ACTIVE.load(Ordering::Relaxed) && mtrace::is_paused()
}

/// The `sys.monitoring` tool id mtrace holds (3.12+ while recording), or None.
#[pyfunction]
fn tool_id() -> Option<i64> {
    #[cfg(Py_3_12)]
    return monitoring::tool_id();
    #[cfg(not(Py_3_12))]
    None
}

#[pymodule(gil_used = false)]
fn _mtrace(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_own_folder, m)?)?;
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(stop, m)?)?;
    m.add_class::<memory::PyMemoryTrace>()?;
    m.add_function(wrap_pyfunction!(restart_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(greenlet_trace, m)?)?;
    m.add_function(wrap_pyfunction!(set_context_id_callback, m)?)?;
    m.add_function(wrap_pyfunction!(is_recording, m)?)?;
    m.add_function(wrap_pyfunction!(pause, m)?)?;
    m.add_function(wrap_pyfunction!(resume, m)?)?;
    m.add_function(wrap_pyfunction!(is_paused, m)?)?;
    m.add_function(wrap_pyfunction!(floor_start, m)?)?;
    m.add_function(wrap_pyfunction!(floor_stop, m)?)?;
    m.add_function(wrap_pyfunction!(mark, m)?)?;
    m.add_function(wrap_pyfunction!(tool_id, m)?)?;
    m.add_function(wrap_pyfunction!(analyze::analyze, m)?)?;
    m.add_function(wrap_pyfunction!(analyze::pstats, m)?)?;
    m.add_function(wrap_pyfunction!(analyze::run_mtanalyze, m)?)?;
    m.add_function(wrap_pyfunction!(analyze::run_mtanalyze_captured, m)?)?;
    m.add("TraceError", m.py().get_type::<analyze::TraceError>())?;
    m.add(
        "BACKEND",
        if cfg!(Py_3_12) {
            "sys.monitoring"
        } else {
            "profile function"
        },
    )?;
    Ok(())
}

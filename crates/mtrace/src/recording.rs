//! A recording's life as the program sees it: [`start`] (its first file,
//! made by `trace_file.rs`, published as the generation the hot path sees,
//! `shared.rs`; a rotating one's series and rotation thread, `rotate.rs`),
//! pause and resume, [`Recording::finish`] (of the file being written, the
//! series' totals in its summary), the automatic recording that
//! `MTRACE_OUT` starts on the process's first event and finishes at exit,
//! and the fork handler's registration.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, Once};

use mtrace_format::meta::encode_mark;

use crate::clock::{self, Calibration};
use crate::config::Config;
use crate::error::{FinishError, StartError};
use crate::kept::MemoryTrace;
use crate::meta;
use crate::rotate;
use crate::shared::{
    self, live, lock, running, Series, SeriesTotals, Shared, CONTROL, CURRENT, GEN, GEN_OFF,
    GEN_PAUSED, GEN_TSC, GEN_UNCHECKED,
};
use crate::signal;
use crate::trace_file;
pub use crate::trace_file::Summary;
/// The recording started from the environment, finished at process exit.
static AUTO: Mutex<Option<Recording>> = Mutex::new(None);
static ENV_CHECK: Once = Once::new();

/// A running recording. Dropping it finishes the file (ignoring errors); call
/// [`Recording::finish`] to see them and get a [`Summary`].
#[derive(Debug)]
#[must_use = "dropping the Recording finishes it at once"]
pub struct Recording {
    shared: &'static Shared,
    done: bool,
}

impl Recording {
    /// The trace file.
    pub fn path(&self) -> &Path {
        &self.shared.map.path
    }

    /// For a recording into memory ([`Config::in_memory()`]): a descriptor
    /// of the trace's memory file, which keeps the trace (finished by
    /// [`Recording::finish`], as a file on disk is) until it is closed; read
    /// it as any trace file (`/proc/self/fd/N`, or mapped). None for a
    /// recording into a file. Give it back with
    /// [`crate::give_back_memory_trace`] when done, rather than close it:
    /// its memory then serves the next recording into memory.
    pub fn memory_trace(&self) -> Option<std::io::Result<std::fs::File>> {
        self.shared.map.memory_file()
    }

    /// For a recording into memory ([`Config::in_memory()`]): a view that
    /// reads the trace's bytes in place ([`MemoryTrace::bytes`], once
    /// [`Recording::finish`] is done), with no descriptor, second mapping
    /// or copy: the cheapest way to analyze a short recording (a profile
    /// per request). Dropping every view lets its memory serve the next
    /// recording into memory. None for a recording into a file.
    pub fn memory_view(&self) -> Option<MemoryTrace> {
        self.shared.map.memory_view()
    }

    /// The file being written now: [`Recording::path`], or the latest
    /// file of a rotating series.
    pub fn current_path(&self) -> PathBuf {
        let control = lock(&CONTROL);
        live(&control, self.shared).map.path.clone()
    }

    /// The most chunk slots the file may hold: its maximum size, which the
    /// header's `chunk_count` says while the recording runs.
    pub fn chunk_count(&self) -> u64 {
        self.shared.map.chunk_count
    }

    /// Pauses recording: from their next event on, threads record
    /// nothing, but keep track of the frames they open and close (a cold
    /// call per event), so a [`Recording::resume`] knows the frames open
    /// then. Writes the mark `mtrace:pause:K`, K the stretch it ends (0
    /// for the one a recording not started armed begins with). False if
    /// it was paused already (or is finished).
    pub fn pause(&self) -> bool {
        set_paused(self.shared, true)
    }

    /// Resumes recording: the mark `mtrace:resume:K` (K = 1, 2, ...: the
    /// stretches of the recording), then every thread records again from
    /// its next event, its open frames in its next chunk's snapshot
    /// (opened, for the analyzer, at that snapshot: see `semantics.md`).
    /// False if it was recording already (or is finished).
    pub fn resume(&self) -> bool {
        set_paused(self.shared, false)
    }

    /// Whether the recording is paused (or armed and not resumed yet).
    pub fn is_paused(&self) -> bool {
        let control = lock(&CONTROL);
        let shared = live(&control, self.shared);
        ptr::eq(CURRENT.load(Ordering::Acquire), shared)
            && GEN.load(Ordering::Relaxed) == shared.gen | GEN_PAUSED
    }

    /// Stops recording, writes the end time and final clock calibration into
    /// the header, marks the file finished and lets go of it (a rotating
    /// recording: stops rotating first, and finishes its latest file).
    ///
    /// Threads that are still running stop recording at their next event;
    /// their current chunks keep the writing flag, which readers accept.
    pub fn finish(mut self) -> Result<Summary, FinishError> {
        self.done = true;
        finish(self.shared)
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.done {
            let _ = finish(self.shared);
        }
    }
}

/// Starts recording into a new trace file.
///
/// Only one recording runs at a time. On error nothing is recorded and the
/// program goes on unprofiled; instrumentation stays a no-op.
pub fn start(config: Config) -> Result<Recording, StartError> {
    // An explicit start (even a failed one) replaces the MTRACE_OUT auto-start.
    let _ = GEN.compare_exchange(GEN_UNCHECKED, GEN_OFF, Ordering::Relaxed, Ordering::Relaxed);
    let mut last_gen = lock(&CONTROL);
    shared::free_given_back();
    if let Some(running) = running(&last_gen) {
        return Err(StartError::AlreadyRecording {
            running: running.map.path.clone(),
        });
    }
    // Before the clock's calibration: a bad size is refused at once.
    config.check()?;
    // The file is made while the clock calibrates: a process's first
    // calibration spins 1 ms (later ones take its rate), and a language
    // binding starts a recording per `enable()`.
    let calibration = Calibration::begin(config.clock);
    *last_gen += 1;
    let given_path = config.path.clone();
    let mut config = config;
    if config.rotate.is_some() {
        // The series' later files are made long after the start: a
        // program that changes its working directory meanwhile (a test
        // runner does) would scatter them, and `keep` delete elsewhere.
        if let Ok(absolute) = std::path::absolute(&config.path) {
            config.path = absolute;
        }
        rotate::remove_stale(&config.path);
    }
    let series = config.rotate.is_some().then(|| {
        let series: &'static Series = Box::leak(Box::new(Series {
            given_path,
            config: config.clone(),
            made: AtomicU64::new(1),
            on_disk: Mutex::new(VecDeque::from([config.path.clone()])),
            finished_totals: Mutex::new(SeriesTotals::default()),
            threads: AtomicU64::new(0),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            controller: Mutex::new(None),
        }));
        series
    });
    let shared = trace_file::open(&config, (*last_gen, 0), || calibration.finish(), series, 0)?;
    let gen = shared.gen;
    shared::watch_forks();
    if let Some(signal) = config.signal {
        if let Err(e) = signal::install(signal, toggle_running) {
            warn(format_args!(
                "signal {signal} will not toggle recording: {e}"
            ));
        }
    }
    let published = if config.armed { gen | GEN_PAUSED } else { gen };
    meta::publish(shared, || {
        CURRENT.store(shared as *const Shared as *mut Shared, Ordering::Release);
        GEN.store(published, Ordering::Release);
    });
    if let Some(series) = series {
        rotate::spawn(series);
    }
    Ok(Recording {
        shared,
        done: false,
    })
}

fn finish(first: &'static Shared) -> Result<Summary, FinishError> {
    if crate::process::pid() != first.pid {
        return Err(FinishError::OtherProcess);
    }
    // Before the lock: a switch under way takes it, and the old file it
    // left is finished before the last one is.
    if let Some(series) = first.series {
        rotate::stop(series);
    }
    let control = lock(&CONTROL);
    let shared = live(&control, first);
    if shared.finished.swap(true, Ordering::AcqRel) {
        return Err(FinishError::AlreadyFinished);
    }
    if ptr::eq(CURRENT.load(Ordering::Acquire), shared) {
        GEN.store(GEN_OFF, Ordering::Release);
        CURRENT.store(ptr::null_mut(), Ordering::Release);
    }
    let mut summary = trace_file::finish(shared, None);
    shared::retire(shared);
    if let Some(series) = first.series {
        let before = *lock(&series.finished_totals);
        summary.path = series.given_path.clone();
        summary.files = series.made.load(Ordering::Relaxed);
        summary.threads = series.threads.load(Ordering::Relaxed);
        summary.events += before.events;
        summary.chunks += before.chunks;
        summary.dropped_events += before.dropped_events;
        summary.dropped_chunks += before.dropped_chunks;
        summary.meta_dropped += before.meta_dropped;
    }
    // Last: `first` and `shared` may be freed here, if given back.
    shared::free_given_back();
    drop(control);
    Ok(summary)
}

/// Whether a recording is running (paused or not: a paused recording
/// still follows the frames, so instrumentation layers that switch stacks
/// must keep doing it; see [`is_paused`]).
pub fn is_recording() -> bool {
    GEN.load(Ordering::Relaxed) > GEN_OFF
}

/// Whether the running recording is paused (armed but idle).
pub fn is_paused() -> bool {
    let g = GEN.load(Ordering::Relaxed);
    g > GEN_OFF && g & GEN_PAUSED != 0
}

/// Pauses the running recording, if any ([`Recording::pause`]); for a
/// recording the program does not hold, such as the one `MTRACE_OUT`
/// starts. False if none runs or it was paused already.
pub fn pause() -> bool {
    set_paused_running(true)
}

/// Resumes the running recording, if any ([`Recording::resume`]).
pub fn resume() -> bool {
    set_paused_running(false)
}

/// Pauses the running recording if it records, else resumes it (the
/// toggling signal's action).
pub(crate) fn toggle_running() {
    let _ = set_paused_running(!is_paused());
}

/// Pauses or resumes `shared` if it is the running recording and not in
/// that state yet, and writes the mark that says so. The resume's mark is
/// stamped before the threads can record again, the pause's after they
/// stop (each at its next event), so the stretch between the marks holds
/// every event of it.
fn set_paused(shared: &'static Shared, paused: bool) -> bool {
    let control = lock(&CONTROL);
    // A rotating recording pauses and resumes in the file being written.
    let shared = live(&control, shared);
    set_paused_under(shared, paused)
}

/// [`set_paused`] of the running recording, if any.
fn set_paused_running(paused: bool) -> bool {
    let control = lock(&CONTROL);
    running(&control).is_some_and(|shared| set_paused_under(shared, paused))
}

/// [`set_paused`]'s work, under [`CONTROL`], on the file being written.
fn set_paused_under(shared: &Shared, paused: bool) -> bool {
    if !ptr::eq(CURRENT.load(Ordering::Acquire), shared) || shared.finished.load(Ordering::Acquire)
    {
        return false;
    }
    let running = shared.gen;
    let target = if paused {
        running | GEN_PAUSED
    } else {
        running
    };
    if GEN.load(Ordering::Relaxed) == target {
        return false;
    }
    let tsc = running & GEN_TSC != 0;
    let (tick, name) = if paused {
        GEN.store(target, Ordering::Release);
        let stretch = shared.stretches.load(Ordering::Relaxed);
        (clock::ticks(tsc), format!("mtrace:pause:{stretch}"))
    } else {
        let stretch = shared.stretches.fetch_add(1, Ordering::Relaxed) + 1;
        let tick = clock::ticks(tsc);
        GEN.store(target, Ordering::Release);
        (tick, format!("mtrace:resume:{stretch}"))
    };
    // The mark belongs to the recording, not to a thread (the signal's
    // thread never records): its thread is 0, unknown.
    shared.write_meta_with(|out| encode_mark(out, tick, 0, &name));
    true
}

/// The first event of the process: start a recording if `MTRACE_OUT` is set.
#[cold]
#[inline(never)]
pub(crate) fn check_env() {
    ENV_CHECK.call_once(|| {
        if GEN.load(Ordering::Acquire) == GEN_UNCHECKED && std::env::var_os("MTRACE_OUT").is_some()
        {
            match Config::from_env().map_err(StartError::from).and_then(start) {
                Ok(recording) => {
                    *lock(&AUTO) = Some(recording);
                    // SAFETY: registering a plain extern "C" function.
                    unsafe { libc::atexit(finish_at_exit) };
                }
                Err(StartError::AlreadyRecording { .. }) => {}
                Err(e) => warn(format_args!("not recording: {e}")),
            }
        }
        let _ = GEN.compare_exchange(GEN_UNCHECKED, GEN_OFF, Ordering::Relaxed, Ordering::Relaxed);
    });
}

extern "C" fn finish_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let recording = lock(&AUTO).take();
        if let Some(recording) = recording {
            match recording.finish() {
                Ok(s) => warn(format_args!(
                    "wrote {} events to {}",
                    s.events,
                    s.path.display()
                )),
                Err(e) => warn(format_args!("{e}")),
            }
        }
    });
}

/// Prints a line to stderr, ignoring failure (stderr may be closed).
fn warn(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "mtrace: {message}");
}

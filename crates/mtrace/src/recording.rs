//! Starting and finishing a recording: the file, the generation the hot
//! path sees (`shared.rs`), the automatic recording that `MTRACE_OUT`
//! starts on the process's first event and finishes at exit, and the fork
//! handler's registration. Finishing remaps the recording's address range
//! away from the file, so late writes of threads still holding pointers
//! into it never reach it (nor a next recording to the same path), cuts a
//! stop-when-full file after the slots it used, and closes it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use mtrace_format::layout::*;

use mtrace_format::meta::encode_mark;

use crate::clock::{self, Calibration};
use crate::config::{Config, Mode};
use crate::error::{FinishError, StartError};
use crate::file::TraceMap;
use crate::meta;
use crate::provision::{self, Provisioner};
use crate::shared::{
    self, current, lock, MetaRegion, Shared, CURRENT, GEN, GEN_OFF, GEN_PAUSED, GEN_TSC,
    GEN_UNCHECKED,
};
use crate::signal;

/// Serialises start and finish; holds the last generation number used.
static CONTROL: Mutex<u64> = Mutex::new(0);
/// The recording started from the environment, finished at process exit.
static AUTO: Mutex<Option<Recording>> = Mutex::new(None);
static ENV_CHECK: Once = Once::new();
static AT_FORK: Once = Once::new();

/// What a finished recording holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The trace file.
    pub path: PathBuf,
    /// Events committed in the file (snapshots not counted; `lost` marks,
    /// one per thread whose claim failed while it held a chunk, counted).
    pub events: u64,
    /// Chunks holding committed data.
    pub chunks: u64,
    /// Chunk slots in the file: in `StopWhenFull` mode the slots chunks
    /// were claimed in (the file ends after them), in `Ring` mode all.
    pub chunk_count: u64,
    /// Ring mode only: older chunks were overwritten.
    pub wrapped: bool,
    /// Events that could not be stored (`StopWhenFull` after the file reached
    /// its maximum or the disk filled up, or a ring whose chunks were all busy).
    pub dropped_events: u64,
    /// Chunk claims refused (file full) or skipped (slot busy).
    pub dropped_chunks: u64,
    /// `StopWhenFull`: how many times the file grew after its first step.
    pub growths: u64,
    /// `StopWhenFull`: why the file stopped growing before its maximum (the
    /// system's message, such as "No space left on device"), if it did.
    pub growth_failure: Option<String>,
    /// Chunk slots whose pages the provisioner thread mapped before they
    /// were claimed (at most 4 MiB of them past the last claim).
    pub slots_prepared: u64,
    /// Threads that recorded at least one event.
    pub threads: u64,
    /// Bytes of metadata written.
    pub meta_bytes: u64,
    /// Metadata records that did not fit.
    pub meta_dropped: u64,
    /// Wall time from start to finish.
    pub duration: Duration,
}

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
        ptr::eq(CURRENT.load(Ordering::Acquire), self.shared)
            && GEN.load(Ordering::Relaxed) == self.shared.gen | GEN_PAUSED
    }

    /// Stops recording, writes the end time and final clock calibration into
    /// the header, marks the file finished and syncs it to disk.
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
    if let Some(running) = current() {
        return Err(StartError::AlreadyRecording {
            running: running.map.path.clone(),
        });
    }
    // Before the clock's calibration: a bad size is refused at once.
    config.check()?;
    // The file is made while the clock calibrates: the calibration's
    // 1 ms spin is the floor of a start's cost, and a language binding
    // starts a recording per `enable()`.
    let calibration = Calibration::begin(config.clock);
    // So is the provisioner thread's start (see `provision.rs`).
    let provisioner_thread = provision::spawn();
    let map = TraceMap::create(&config)?;
    let clock = calibration.finish();
    map.write_header(&config, &clock);
    *last_gen += 1;
    let gen = (*last_gen << 2) | if clock.tsc { GEN_TSC } else { 0 };
    let provisioner = Provisioner::new(&map);
    let meta = MetaRegion::new(map.meta_reserved_at_start());
    let shared: &'static Shared = Box::leak(Box::new(Shared {
        gen,
        map,
        provisioner,
        mode: config.mode,
        clock,
        threads: AtomicU64::new(0),
        meta: Mutex::new(meta),
        finished: AtomicBool::new(false),
        stretches: AtomicU64::new(0),
        started: Instant::now(),
        pid: std::process::id(),
    }));
    AT_FORK.call_once(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe {
            libc::pthread_atfork(
                None,
                None,
                Some(shared::after_fork_in_child as unsafe extern "C" fn()),
            )
        };
    });
    // Before the recording is published: the first claim can wake it.
    let job = provision::Job {
        map: &shared.map,
        mode: shared.mode,
        state: &shared.provisioner,
    };
    provision::start(job, provisioner_thread);
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
    Ok(Recording {
        shared,
        done: false,
    })
}

/// Counts what the file holds. Exact once the writing threads have
/// stopped; a thread still writing may add events after the count.
fn summarize(shared: &Shared) -> Summary {
    let map = &shared.map;
    let next_seq = map.counter(H_NEXT_SEQ).load(Ordering::Relaxed);
    let mut events = 0;
    let mut chunks = 0;
    // Slots past `next_seq` were never claimed (and may never have been
    // touched); slots past the ready ones are not in the file.
    for slot in 0..next_seq.min(map.ready_slots()) {
        let state = unpack_state(map.state(slot).load(Ordering::Acquire));
        if state.seq.is_none() || state.committed_bytes < SNAPSHOT_FIXED {
            continue;
        }
        chunks += 1;
        let body = map.chunks_offset + slot as usize * map.chunk_size + CHUNK_HEADER_SIZE;
        let own = map.read_u32(body + 4) as usize;
        let stack = map.read_u32(body + 16) as usize;
        let snap = snapshot_size(own, stack);
        events += (state.committed_bytes.saturating_sub(snap) / EVENT_SIZE) as u64;
    }
    Summary {
        path: map.path.clone(),
        events,
        chunks,
        chunk_count: map.chunk_count,
        wrapped: shared.mode == Mode::Ring && next_seq > map.chunk_count,
        dropped_events: map.counter(H_DROPPED_EVENTS).load(Ordering::Relaxed),
        dropped_chunks: map.counter(H_DROPPED_CHUNKS).load(Ordering::Relaxed),
        growths: map.growths(),
        growth_failure: map.growth_failure(),
        slots_prepared: shared.provisioner.prepared_count(),
        threads: shared.threads.load(Ordering::Relaxed),
        meta_bytes: map.counter(H_META_LEN).load(Ordering::Relaxed),
        meta_dropped: map.counter(H_META_DROPPED).load(Ordering::Relaxed),
        duration: shared.started.elapsed(),
    }
}

fn finish(shared: &'static Shared) -> Result<Summary, FinishError> {
    if std::process::id() != shared.pid {
        return Err(FinishError::OtherProcess);
    }
    let _control = lock(&CONTROL);
    if shared.finished.swap(true, Ordering::AcqRel) {
        return Err(FinishError::AlreadyFinished);
    }
    if ptr::eq(CURRENT.load(Ordering::Acquire), shared) {
        GEN.store(GEN_OFF, Ordering::Release);
        CURRENT.store(ptr::null_mut(), Ordering::Release);
    }
    // Before the file's length is decided: the provisioner grows and maps
    // the file, which is about to be cut and detached.
    shared.provisioner.stop();
    let (end_tick, end_unix_ns, calib_ticks, calib_ns) = shared.clock.finish();
    let map = &shared.map;
    map.write(H_END_TICK, &end_tick.to_le_bytes());
    map.write(H_END_UNIX_NS, &end_unix_ns.to_le_bytes());
    map.write(H_CALIB_TICKS, &calib_ticks.to_le_bytes());
    map.write(H_CALIB_NS, &calib_ns.to_le_bytes());
    let flags = map.read_u32(H_FLAGS) | FLAG_FINISHED;
    map.write(H_FLAGS, &flags.to_le_bytes());
    // The file leaves no unused slots on disk: the header claims the slots
    // chunks were claimed in (from 0, in claim order; slots the file never
    // grew to were claimed by no one), and the file ends after them. A ring
    // keeps its size: it is a fixed buffer. A claim racing with this lands
    // past the new count, where readers do not look.
    let used = (shared.mode == Mode::StopWhenFull).then(|| {
        let claimed = map.counter(H_NEXT_SEQ).load(Ordering::Acquire);
        claimed.min(map.ready_slots())
    });
    if let Some(used) = used {
        map.write(H_CHUNK_COUNT, &used.to_le_bytes());
    }
    let mut summary = summarize(shared);
    summary.chunk_count = used.unwrap_or(map.chunk_count);
    // Threads may still hold pointers into the map: from here on their
    // writes must not reach the file, which a next recording to the same
    // path would truncate and map again.
    let detached = map.detach();
    // Cut only once detached (see `TraceMap::close`).
    map.close(used.filter(|_| detached));
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
    current().is_some_and(|s| set_paused(s, true))
}

/// Resumes the running recording, if any ([`Recording::resume`]).
pub fn resume() -> bool {
    current().is_some_and(|s| set_paused(s, false))
}

/// Pauses the running recording if it records, else resumes it (the
/// toggling signal's action).
pub(crate) fn toggle_running() {
    if let Some(s) = current() {
        let _ = set_paused(s, !is_paused());
    }
}

/// Pauses or resumes `shared` if it is the running recording and not in
/// that state yet, and writes the mark that says so. The resume's mark is
/// stamped before the threads can record again, the pause's after they
/// stop (each at its next event), so the stretch between the marks holds
/// every event of it.
fn set_paused(shared: &'static Shared, paused: bool) -> bool {
    let _control = lock(&CONTROL);
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

//! The mtrace recorder: records when every instrumented function is entered
//! and left, on every thread and logical stack, into one memory-mapped file.
//!
//! ```no_run
//! #[mtrace::profile]
//! fn fib(n: u64) -> u64 {
//!     if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
//! }
//!
//! let recording = mtrace::start(mtrace::Config::new("fib.mtrace")).expect("trace file");
//! fib(20);
//! let summary = recording.finish().expect("finished");
//! println!("{} events in {}", summary.events, summary.path.display());
//! ```
//!
//! Or set `MTRACE_OUT=fib.mtrace` (and optionally `MTRACE_CAPACITY`,
//! `MTRACE_MODE`; see [`Config::from_env`]): the first instrumented event
//! then starts a recording, which is finished when the process exits.
//!
//! # Instrumentation
//!
//! * [`#[profile]`](macro@profile) on a function or method (also `async fn`);
//! * [`scope!`]`("name")` for a block;
//! * [`register_function`], [`enter`], [`exit`] for language bindings;
//! * [`LogicalStack`] for fibers and tasks ([`LogicalStack::enter_detached`]
//!   and [`LogicalStack::leave`] for callback APIs), and [`LogicalStackExt::on_logical_stack`]
//!   for futures that move between the worker threads of an executor;
//! * [`wake`] for a binding's tasks that are not Rust futures (their wake
//!   events split waiting from scheduled time);
//! * [`mark()`]`("warm-up done")` for a named instant of the run.
//!
//! # On demand
//!
//! [`Config::armed`] starts a recording armed but idle; [`Recording::resume`]
//! and [`Recording::pause`] (or [`resume`], [`pause`], or the signal of
//! [`Config::signal`], e.g. `kill -USR2 PID`) switch it on and off. Each
//! recorded stretch is a mark pair `mtrace:resume:K` / `mtrace:pause:K`.
//! While paused, an event only pushes or pops the thread's shadow frame.
//!
//! When nothing is recorded, each of these costs one relaxed atomic load and
//! one branch. When recording, an event costs one clock read (`rdtsc`), one
//! 16-byte store into the thread's own chunk, and one release store of the
//! chunk's state word.
//!
//! # How it writes
//!
//! The file is the layout of [`mtrace_format`]: a header, a metadata region
//! (names of functions, stacks and threads) and a ring of fixed-size chunks.
//! Each thread registers itself on its first event and claims chunks with one
//! atomic operation; every chunk starts with a snapshot of the frames open
//! when it was claimed, so it decodes alone. See [`Mode`] for what happens
//! when the chunks run out. The process can be killed at any moment: every
//! event committed before is in the file.
//!
//! Module map: `recording` (start/finish, the global switch), `thread` (the
//! hot path and chunk claims), `signal` (the toggling signal), `file` (the mapped file), `meta` (function
//! registry and metadata region), `mark` (named instants), `provision` (the thread that maps chunk
//! slots' pages ahead of the claims), `clock`, `scope` (call sites), `stack`
//! (logical stacks), `future` (the future adapter), `config`, `error`.
#![deny(missing_docs)]

mod clock;
mod config;
mod error;
mod fds;
mod file;
mod future;
mod kept;
mod mark;
mod meta;
mod process;
mod provision;
mod recording;
mod rotate;
mod scope;
mod shared;
mod signal;
mod stack;
mod thread;
mod trace_file;

use std::sync::atomic::Ordering;

pub use config::{
    parse_bytes, parse_signal, ClockSource, Config, Format, Mode, Rotation, DEFAULT_META_CAPACITY,
    DEFAULT_RING_CAPACITY, MEMORY_CAPACITY,
};
pub use error::{AdoptError, ConfigError, FinishError, StartError};
pub use future::{Instrumented, LogicalStackExt};
pub use kept::{give_back_memory_trace, MemoryTrace};
pub use mtrace_format::{FunctionId, PreferredClock, Producer, StackId, StackKind};
pub use recording::{is_paused, is_recording, pause, resume, start, Recording, Summary};
pub use scope::{CallSite, ScopeGuard};
pub use stack::{current_stack, switch_to, wake, Detached, LogicalStack, SwitchGuard};

/// What the benchmarks and the recorder's own tests measure against: the
/// raw clock and the stop-when-full sizing bounds. Behind the `bench`
/// feature so that a program recording itself sees only the recorder.
#[cfg(feature = "bench")]
pub mod bench {
    pub use crate::clock::{has_invariant_tsc, read_tsc};
    pub use crate::config::{AUTO_CAPACITY_MAX, AUTO_CAPACITY_MIN};
}

/// Instruments a function: its body runs inside a frame named after it.
///
/// Works on free functions, methods and `async fn`s (whose frame opens at
/// the first poll and closes when the body completes; put the task on a
/// [`LogicalStack`] with [`LogicalStackExt::on_logical_stack`] so the frame
/// follows it between threads). `#[profile(name = "other")]` sets the name.
///
/// ```
/// struct Parser;
///
/// impl Parser {
///     #[mtrace::profile]
///     fn parse(&self, text: &str) -> usize {
///         text.len()
///     }
/// }
///
/// #[mtrace::profile(name = "load config")]
/// fn load() -> Result<u32, String> {
///     "42".parse::<u32>().map_err(|e| e.to_string())
/// }
///
/// #[mtrace::profile]
/// async fn fetch(id: u32) -> u32 {
///     id * 2
/// }
///
/// assert_eq!(Parser.parse("abc"), 3);
/// assert_eq!(load(), Ok(42));
/// let _future = fetch(21);
/// ```
///
/// It only goes on functions with a body:
///
/// ```compile_fail
/// #[mtrace::profile]
/// struct NotAFunction;
/// ```
///
/// ```compile_fail
/// #[mtrace::profile(label = "x")]
/// fn unknown_argument() {}
/// ```
///
/// ```compile_fail
/// #[mtrace::profile]
/// const fn not_at_run_time() {}
/// ```
pub use mtrace_macros::profile;

/// Registers a function for [`enter`] and [`exit`] and returns its id (the
/// same id for the same name, file, line and module). Ids are stable for the
/// life of the process and are named in every recording.
pub fn register_function(name: &str, file: &str, line: u32, module: &str) -> FunctionId {
    meta::register(name, file, line, module)
}

/// Records that `function` was entered on the current thread's current stack.
///
/// Pair every `enter` with an [`exit`] of the same id on the same stack.
/// Id 0 (never registered) is ignored.
#[inline]
pub fn enter(function: FunctionId) {
    let g = shared::GEN.load(Ordering::Relaxed);
    if g == shared::GEN_OFF {
        return;
    }
    if function.0 != 0 {
        thread::enter(g, function.0);
    }
}

/// Records that `function` was left on the current thread's current stack.
#[inline]
pub fn exit(function: FunctionId) {
    let g = shared::GEN.load(Ordering::Relaxed);
    if g == shared::GEN_OFF {
        return;
    }
    if function.0 != 0 {
        thread::exit(g, function.0);
    }
}

/// The calling thread's recorder, looked up once: its [`enter`](ThreadRecorder::enter)
/// and [`exit`](ThreadRecorder::exit) are [`enter`] and [`exit`] without
/// the thread-local look-up each of those makes.
///
/// For a binding that keeps state of its own per thread and can keep this
/// beside it (the Python binding does). Linked into a shared library, as
/// an extension module is, every thread-local is reached through a call
/// into the dynamic linker (`__tls_get_addr`): one such call an event fewer
/// is a sizeable part of an event's cost there. The value belongs to the
/// thread that took it: it is neither `Send` nor `Sync`.
///
/// ```
/// let here = mtrace::ThreadRecorder::current();
/// let f = mtrace::register_function("work", file!(), line!(), module_path!());
/// here.enter(f);
/// here.exit(f);
/// ```
///
/// ```compile_fail
/// let here = mtrace::ThreadRecorder::current();
/// std::thread::spawn(move || here.enter(mtrace::FunctionId(1)));
/// ```
#[derive(Clone, Copy)]
pub struct ThreadRecorder {
    /// `thread::Local` is not `Sync`: a reference to it is not `Send`.
    local: &'static thread::Local,
}

impl ThreadRecorder {
    /// The calling thread's recorder.
    #[inline]
    pub fn current() -> ThreadRecorder {
        ThreadRecorder {
            local: thread::this_thread(),
        }
    }

    /// [`enter`], on this thread.
    #[inline]
    pub fn enter(self, function: FunctionId) {
        let g = shared::GEN.load(Ordering::Relaxed);
        if g == shared::GEN_OFF {
            return;
        }
        if function.0 != 0 {
            thread::enter_on(self.local, g, function.0);
        }
    }

    /// [`exit`], on this thread.
    #[inline]
    pub fn exit(self, function: FunctionId) {
        let g = shared::GEN.load(Ordering::Relaxed);
        if g == shared::GEN_OFF {
            return;
        }
        if function.0 != 0 {
            thread::exit_on(self.local, g, function.0);
        }
    }
}

impl std::fmt::Debug for ThreadRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadRecorder").finish_non_exhaustive()
    }
}

/// Makes `frames` (outermost first) the calling thread's open frames, as
/// opened before the recording began, without recording an enter for any
/// of them: for a binding that starts recording a program already running
/// (`python -m mtrace attach`), whose threads are inside functions then.
///
/// Call it on a thread before its first event of the recording (it binds
/// the thread and records its start). Its first chunk is then flagged
/// `restart` and `continued`, with the frames in its snapshot stamped at
/// the recording's start, as a thread's first chunk in a later file of a
/// rotating series is: a reader takes them as open before the file began,
/// so their time from the start of the file counts and their calls do not
/// (the calls began before the recording). The frames' exits are then
/// recorded with [`exit`] as usual; frames entered later nest inside them.
/// Id 0 is left out. The frames go to the stack the thread runs.
///
/// # Errors
///
/// [`AdoptError::AlreadyRecorded`] on a thread that has already recorded
/// in this recording (its stream is left untouched: frames it never
/// entered there cannot be slipped under it); [`AdoptError::NotRecording`]
/// when no recording runs or it is paused.
///
/// ```
/// let path = std::env::temp_dir().join(format!("adopt-doc-{}.mtrace", std::process::id()));
/// let serve = mtrace::register_function("serve", "server.rs", 10, "server");
/// let handle = mtrace::register_function("handle", "server.rs", 20, "server");
/// let recording = mtrace::start(mtrace::Config::new(&path)).expect("trace file");
/// std::thread::spawn(move || {
///     // This thread was inside `serve` before the recording started.
///     mtrace::adopt_open_frames(&[serve]).expect("its first event");
///     mtrace::enter(handle);
///     mtrace::exit(handle);
///     mtrace::exit(serve);
///     // A second time, its stream has begun.
///     assert_eq!(
///         mtrace::adopt_open_frames(&[serve]),
///         Err(mtrace::AdoptError::AlreadyRecorded)
///     );
/// })
/// .join()
/// .unwrap();
/// recording.finish().expect("finished");
/// # std::fs::remove_file(&path).ok();
/// ```
pub fn adopt_open_frames(frames: &[FunctionId]) -> Result<(), AdoptError> {
    thread::adopt_open_frames(&function_ids(frames))
}

/// [`adopt_open_frames`] on behalf of another thread, which may never
/// record an event of its own: for a binding that attaches to a running
/// program whose threads sit blocked (in a lock's wait, a queue's `get`,
/// a `select`) and may stay so for the whole recording. `os_tid` is the
/// thread's operating-system id (Linux: its `gettid`, Python's
/// `threading.Thread.native_id`), `name` its name in the trace's thread
/// record.
///
/// The thread's stream is begun at once: its thread record, and its first
/// chunk, whose snapshot holds `frames` (outermost first; id 0 is left
/// out) as opened before the recording began (flagged `continued`, as
/// [`adopt_open_frames`] writes it), and no event. A thread that never
/// records is then in the trace with those frames open from the file's
/// start to its end: their time counts (under the `gil` clock, where a
/// thread runs only after its own events, they are paused throughout),
/// their calls (begun before the recording) do not. A thread that records
/// later continues that stream at its first event, from those frames (its
/// exits of them are ordinary exits); if it calls [`adopt_open_frames`]
/// there, that succeeds, and its frames become the ones it gives by exits
/// and enters where the two lists differ (they do not when it ran no
/// event in between).
///
/// The thread may start recording at any moment, also while this runs:
/// both sides decide under one lock of the file, so either the thread
/// bound first and this is refused, or this finishes first and the thread
/// continues what it wrote. Never two streams, never the frames twice.
///
/// # Errors
///
/// Nothing is written when it is refused:
/// [`AdoptError::AlreadyRecorded`] when that thread has recorded in this
/// file, or its frames were adopted already; [`AdoptError::NotRecording`]
/// when no recording runs or it is paused; [`AdoptError::Rotated`] in a
/// later file of a rotating series; [`AdoptError::UnknownThread`] for id
/// 0; [`AdoptError::Full`] when the trace has no chunk left (in which
/// case the attempt is counted as a dropped chunk, as any failed claim is).
///
/// ```
/// let path = std::env::temp_dir().join(format!("adopt-thread-doc-{}.mtrace", std::process::id()));
/// let serve = mtrace::register_function("serve", "server.rs", 10, "server");
/// let (tell, told) = std::sync::mpsc::channel();
/// let (release, released) = std::sync::mpsc::channel::<()>();
/// let worker = std::thread::spawn(move || {
///     // Linux: the thread's id as the system knows it.
///     tell.send(unsafe { libc::syscall(libc::SYS_gettid) } as u64).unwrap();
///     // Blocked, inside `serve`, for the whole recording.
///     released.recv().unwrap();
/// });
/// let worker_tid = told.recv().unwrap();
/// let recording = mtrace::start(mtrace::Config::new(&path)).expect("trace file");
/// mtrace::adopt_thread_frames(worker_tid, "worker-3", &[serve]).expect("not recorded yet");
/// // Once only.
/// assert_eq!(
///     mtrace::adopt_thread_frames(worker_tid, "worker-3", &[serve]),
///     Err(mtrace::AdoptError::AlreadyRecorded)
/// );
/// recording.finish().expect("finished");
/// release.send(()).unwrap();
/// worker.join().unwrap();
/// # std::fs::remove_file(&path).ok();
/// ```
pub fn adopt_thread_frames(
    os_tid: u64,
    name: &str,
    frames: &[FunctionId],
) -> Result<(), AdoptError> {
    thread::adopt_thread_frames(os_tid, name, &function_ids(frames))
}

/// The ids of `frames` but id 0 (never registered).
fn function_ids(frames: &[FunctionId]) -> Vec<u32> {
    frames.iter().map(|f| f.0).filter(|&id| id != 0).collect()
}

/// Names `function` in the running recording, if it was started with
/// [`Config::names_on_use`] and has not named it yet; otherwise does
/// nothing. Instrumentation that records with `names_on_use` calls it
/// before a function's first event in each recording (the Python
/// binding: once per code object, thread and recording).
pub fn name_function(function: FunctionId) {
    meta::name(function);
}

/// Records a named instant of the run: a *mark*, written into the trace with
/// the recording's clock (the one its events are stamped with) and the
/// calling thread's id.
///
/// Marks name moments of the run (`"warm-up done"`, `"request 7 sent"`);
/// `mtanalyze` lists them in its JSON report (`marks`) and in `mtanalyze
/// check`, with their times from the start of the trace. A mark falls
/// between the calling thread's events before and after the call. Names
/// need not be unique.
///
/// When no recording runs, it does nothing (as the instrumentation does;
/// if `MTRACE_OUT` is set and nothing was recorded yet, it first starts
/// that recording, as an instrumented event would). Marks are rare: each
/// takes the lock of the trace's metadata region and costs about what
/// naming a function does, and recording events never waits for it. A
/// mark that does not fit the metadata region is dropped and counted with
/// the region's drops (`Summary::meta_dropped`).
///
/// ```
/// let path = std::env::temp_dir().join(format!("mark-doc-{}.mtrace", std::process::id()));
/// let recording = mtrace::start(mtrace::Config::new(&path)).expect("trace file");
/// {
///     let _warm_up = mtrace::scope!("warm up");
/// }
/// mtrace::mark("warm-up done");
/// {
///     let _work = mtrace::scope!("work");
/// }
/// recording.finish().expect("finished");
/// # std::fs::remove_file(&path).ok();
/// ```
pub fn mark(name: &str) {
    mark::mark(name);
}

/// What the `#[profile]` attribute expands to. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::future::ProfiledFuture;
}

/// The repository README's Rust example, compiled (not run: it writes
/// `trace.bin`) as a doctest, so the lines a reader copies build.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

//! Every tokio task on its own mtrace [`LogicalStack`], with no code at
//! spawn sites: [`instrument`] installs tokio's task hooks on a runtime
//! [`Builder`].
//!
//! ```no_run
//! let _recording = mtrace::start(mtrace::Config::new("service.mtrace")).ok();
//! let runtime = mtrace_tokio::instrument(&mut tokio::runtime::Builder::new_multi_thread())
//!     .enable_all()
//!     .build()
//!     .unwrap();
//! ```
//!
//! In place of `#[tokio::main]`: [`run`] (the runtime `#[tokio::main]`
//! builds, with the hooks), or [`runtime`] for its [`Builder`].
//!
//! # How
//!
//! * `on_task_spawn`: a [`LogicalStack`] for the task, named after where it
//!   was spawned and its id (`src/server.rs:42 task-17`), kept in a table
//!   by task id (an entry with an atomic state word per task; a sharded,
//!   locked map for tasks whose entry another task has);
//! * `on_before_task_poll`: the worker takes the task's stack (one
//!   compare-exchange on its entry) and switches onto it ([`LogicalStack::enter_detached`]): frames
//!   the task opens (`#[mtrace::profile]`, `scope!`, `mtrace-tracing`'s
//!   spans) land on it, nested as the code nests, and stay there between
//!   polls, paused;
//! * `on_after_task_poll`: it switches back ([`LogicalStack::leave`]) and
//!   gives the stack back (another compare-exchange). tokio calls this hook after the task's poll has
//!   returned, when another worker may already be polling the task again:
//!   that worker's `on_before_task_poll` waits for the stack to be back
//!   (a few nanoseconds, or until the first worker, preempted in between,
//!   gets a core again), so a task's stack is on one thread at a time and
//!   its time on each is exact (`tests/stress.rs`);
//! * `on_task_terminate`: the stack is dropped, which records its `end`
//!   (after the switch back when the task finishes inside a poll, as tokio
//!   calls this hook there; at once for a task cancelled while switched
//!   out, its open frames then cut short).
//!
//! ```text
//! worker 1: own --before poll--> task-17 [handler, query] --after poll--> own
//! worker 2:                 own --before poll--> task-17 [handler, query] ... terminate: end
//! ```
//!
//! `mtanalyze trace --stacks --group` sums the tasks of each spawn site:
//! it writes every number `#` but a line after a file name, so the task
//! ids fold and two spawn sites stay apart (`src/server.rs:42 task-#`).
//!
//! # What it needs, and what it misses
//!
//! tokio 1.54 has these hooks only under `--cfg tokio_unstable`
//! (`RUSTFLAGS="--cfg tokio_unstable"`). Built without it, [`instrument`]
//! returns the builder unchanged and [`HOOKS_AVAILABLE`] is false: put
//! tasks on stacks by hand with `.on_logical_stack(name)` instead.
//!
//! The hooks see no waker. With this crate's `tracing` feature (which
//! turns on tokio's own `tracing` instrumentation), `wakes()` is a
//! `tracing_subscriber` layer that reads tokio's waker events and records
//! a `wake` of the task's stack at each, so the analyzer splits its pauses
//! into waiting and scheduled (the `wakes` module, documented with the
//! feature). Without it the trace has no
//! wakes and the tables say the split was not measured
//! (`.on_logical_stack()`'s waker records wakes too). A worker parked
//! while it waits for work is on an idle stack of its own (kind `idle`),
//! so its own stack is paused, not running, meanwhile.
//! The future given to `block_on`
//! is not a task and runs on the thread's own stack; `spawn_blocking`
//! closures are not polled, so they run on the blocking thread's own
//! stack. A task spawned while nothing recorded has no stack of its
//! own.
#![deny(missing_docs)]

#[cfg(tokio_unstable)]
mod hooks;
mod idle;
#[cfg(feature = "tracing")]
pub mod wakes;

#[cfg(feature = "tracing")]
pub use wakes::{wakes, WakeLayer};

pub use mtrace::LogicalStack;
pub use tokio::runtime::Builder;

/// Whether this build has tokio's task hooks (`--cfg tokio_unstable`).
pub const HOOKS_AVAILABLE: bool = cfg!(tokio_unstable);

/// A multi-thread runtime [`Builder`] as `#[tokio::main]` makes one (every
/// driver enabled: I/O, time), with the task hooks [`instrument`]
/// installs. Change it further before `build()` (`worker_threads`, ...).
///
/// ```no_run
/// let runtime = mtrace_tokio::runtime().build()?;
/// runtime.block_on(async { /* the body of `#[tokio::main] async fn main` */ });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn runtime() -> Builder {
    let mut builder = Builder::new_multi_thread();
    builder.enable_all();
    instrument(&mut builder);
    builder
}

/// Runs `future` to its end on a runtime built by [`runtime`] and returns
/// its output, as `#[tokio::main]` runs the body of `main`: the one line
/// that takes the attribute's place.
///
/// ```no_run
/// // Was: #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> { .. }
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     mtrace_tokio::run(serve())?
/// }
///
/// async fn serve() -> Result<(), Box<dyn std::error::Error>> {
///     // the body of the old `main`
///     Ok(())
/// }
/// ```
///
/// # Errors
///
/// The runtime could not be built (the operating system refused a thread
/// or the I/O driver), where `#[tokio::main]` panics.
pub fn run<F: std::future::Future>(future: F) -> std::io::Result<F::Output> {
    Ok(runtime().build()?.block_on(future))
}

/// Installs the task hooks that run every task of the runtime on its own
/// [`LogicalStack`] (see the [crate docs](crate)), and the park hooks that
/// put a worker waiting for work on an idle stack (`StackKind::Idle`), so
/// the report counts it idle, not running. Without `--cfg tokio_unstable`,
/// only the park hooks.
///
/// It replaces hooks installed before it (tokio keeps one of each).
pub fn instrument(builder: &mut Builder) -> &mut Builder {
    #[cfg(tokio_unstable)]
    hooks::install(builder);
    idle::install(builder);
    builder
}

//! The recorders under test, behind one trait, so every workload is the same
//! code monomorphized once per recorder (and once more with [`NoRecorder`]
//! for the uninstrumented baseline).
//!
//! Each recorder is used the way its documentation shows: its own scope
//! macro or guard, its own future adapter where it has one, its own global
//! setup in [`Recorder::start`]. Each runs in a process of its own, so no
//! recorder's globals (threads, queues, subscribers) touch another's.

use std::future::Future;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

pub mod fastrace;
pub mod mtrace;
pub mod puffin;
pub mod tracing;

/// What a recorder holds at the end of a run.
#[derive(Clone, Debug, Default)]
pub struct TraceStats {
    /// Bytes of trace data it keeps (file or memory), if it can say.
    pub bytes: Option<u64>,
    /// Events (scope begins and ends, switches) those bytes hold, if it can say.
    pub events: Option<u64>,
    /// Anything unusual (drops), as `key=value` words.
    pub note: String,
}

/// One recorder, driven by the workloads.
pub trait Recorder: Sized + 'static {
    /// The guard of an open scope.
    type Scope;
    /// What must be open around a batch of scopes (a trace root, a frame).
    type Batch;

    /// Per-process setup; `expected_events` sizes buffers that have a size.
    fn start(expected_events: u64) -> Self;
    /// Opens the loop's scope.
    fn scope() -> Self::Scope;
    /// Opens the recursive function's scope.
    fn recurse_scope() -> Self::Scope;
    /// Opens a batch: at most [`crate::workloads::BATCH`] scopes run inside one.
    fn batch() -> Self::Batch;
    /// After each timed sample, on the measuring thread (a frame boundary).
    fn end_sample() {}
    /// Instruments every poll of a task.
    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static;
    /// Installs what the recorder hooks into the tokio runtime of the
    /// `async` workload (its task hooks); true if it installed anything,
    /// and then the uninstrumented baseline runs on a runtime of its own.
    fn hook_runtime(_builder: &mut tokio::runtime::Builder) -> bool {
        false
    }
    /// Ends the recording; what it holds.
    fn finish(self) -> TraceStats;
}

/// The uninstrumented baseline: every hook does nothing.
pub struct NoRecorder;

impl Recorder for NoRecorder {
    type Scope = ();
    type Batch = ();

    fn start(_: u64) -> Self {
        NoRecorder
    }
    #[inline(always)]
    fn scope() {}
    #[inline(always)]
    fn recurse_scope() {}
    #[inline(always)]
    fn batch() {}
    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        future
    }
    fn finish(self) -> TraceStats {
        TraceStats::default()
    }
}

/// A scope around one poll, for [`PerPoll`].
pub trait PollScope: 'static {
    /// The guard.
    type Guard;
    /// Opens the scope.
    fn open() -> Self::Guard;
}

/// A generic future adapter for recorders without one: a scope of `S`
/// around every poll. Scopes open and close inside one poll, so on one
/// thread, as these recorders require.
pub struct PerPoll<F, S> {
    inner: F,
    _scope: PhantomData<fn() -> S>,
}

impl<F, S> PerPoll<F, S> {
    /// Wraps `inner`.
    pub fn new(inner: F) -> Self {
        PerPoll {
            inner,
            _scope: PhantomData,
        }
    }
}

impl<F: Future, S: PollScope> Future for PerPoll<F, S> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: never moved out of `self`.
        let this = unsafe { self.get_unchecked_mut() };
        let _scope = S::open();
        // SAFETY: as above.
        unsafe { Pin::new_unchecked(&mut this.inner) }.poll(cx)
    }
}

/// A scratch file for recorders that write one: on `/dev/shm` (tmpfs) when
/// it exists, so the disk is not measured.
pub fn scratch_path(name: &str) -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    let dir = if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("mtrace-bench-{}-{name}", std::process::id()))
}

//! puffin with scopes on: `profile_scope!` (its guard, via
//! `profile_scope_custom!`), inside an outer scope per batch as a frame's
//! root scope would be (a thread sends its stream to the global profiler
//! each time its outermost scope closes); a scope around every poll of a
//! task (puffin has no future adapter, so each poll's scope is outermost).
//! `new_frame()` ends every timed sample, and a sink keeps every frame.

use std::future::Future;
use std::sync::{Arc, Mutex};

use puffin::{FrameData, GlobalProfiler, ProfilerScope};

use super::{PerPoll, PollScope, Recorder, TraceStats};

/// The frames the sink was given.
type Kept = Arc<Mutex<Vec<Arc<FrameData>>>>;

/// puffin with scopes on and a sink that keeps every frame.
pub struct Puffin {
    kept: Kept,
}

/// The scope around one poll.
pub struct PollScopeGuard;

impl PollScope for PollScopeGuard {
    type Guard = Option<ProfilerScope>;

    #[inline(always)]
    fn open() -> Option<ProfilerScope> {
        puffin::profile_scope_custom!("poll")
    }
}

impl Recorder for Puffin {
    type Scope = Option<ProfilerScope>;
    type Batch = Option<ProfilerScope>;

    fn start(_: u64) -> Self {
        puffin::set_scopes_on(true);
        let kept = Kept::default();
        let sink = kept.clone();
        GlobalProfiler::lock().add_sink(Box::new(move |frame| {
            sink.lock().unwrap_or_else(|e| e.into_inner()).push(frame);
        }));
        Puffin { kept }
    }

    #[inline(always)]
    fn scope() -> Option<ProfilerScope> {
        puffin::profile_scope_custom!("scope")
    }

    #[inline(always)]
    fn recurse_scope() -> Option<ProfilerScope> {
        puffin::profile_scope_custom!("recurse")
    }

    #[inline(always)]
    fn batch() -> Option<ProfilerScope> {
        puffin::profile_scope_custom!("batch")
    }

    fn end_sample() {
        GlobalProfiler::lock().new_frame();
    }

    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        PerPoll::<F, PollScopeGuard>::new(future)
    }

    fn finish(self) -> TraceStats {
        GlobalProfiler::lock().new_frame();
        let frames = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: usize = frames.iter().filter_map(|f| f.unpacked_size()).sum();
        let scopes: usize = frames.iter().map(|f| f.meta().num_scopes).sum();
        TraceStats {
            bytes: Some(bytes as u64),
            events: Some(2 * scopes as u64),
            note: String::new(),
        }
    }
}

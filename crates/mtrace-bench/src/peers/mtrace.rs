//! mtrace: `scope!` guards; tasks on their own logical stack
//! (`on_logical_stack`, a switch in and out around every poll). The trace
//! file is on `/dev/shm`, a ring sized to keep every event of the run.

use std::future::Future;
use std::path::PathBuf;

use mtrace::{Config, LogicalStackExt, Mode, Recording, ScopeGuard};
use mtrace_format::layout::{DEFAULT_CHUNK_SIZE, HEADER_SIZE};

use super::{scratch_path, Recorder, TraceStats};

/// A running mtrace recording.
pub struct Mtrace {
    recording: Recording,
    path: PathBuf,
}

/// Room for `events` events, their chunks' headers and snapshots, and one
/// partly filled chunk per thread, in whole MiB.
fn capacity_for(events: u64) -> u64 {
    let bytes = events * 16 * 5 / 4 + 64 * DEFAULT_CHUNK_SIZE as u64;
    bytes.div_ceil(1 << 20) << 20
}

impl Recorder for Mtrace {
    type Scope = ScopeGuard;
    type Batch = ();

    fn start(expected_events: u64) -> Self {
        let path = scratch_path("mtrace.mtrace");
        let recording = mtrace::start(
            Config::new(&path)
                .capacity(capacity_for(expected_events))
                .mode(Mode::Ring),
        )
        .expect("start the mtrace recording");
        Mtrace { recording, path }
    }

    #[inline(always)]
    fn scope() -> ScopeGuard {
        mtrace::scope!("scope")
    }

    #[inline(always)]
    fn recurse_scope() -> ScopeGuard {
        mtrace::scope!("recurse")
    }

    #[inline(always)]
    fn batch() {}

    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        future.on_logical_stack("task")
    }

    fn finish(self) -> TraceStats {
        let summary = self
            .recording
            .finish()
            .expect("finish the mtrace recording");
        let _ = std::fs::remove_file(&self.path);
        let bytes =
            HEADER_SIZE as u64 + summary.meta_bytes + summary.chunks * DEFAULT_CHUNK_SIZE as u64;
        let mut note = String::new();
        if summary.wrapped || summary.dropped_events > 0 {
            note = format!(
                "wrapped={} dropped_events={}",
                summary.wrapped, summary.dropped_events
            );
        }
        TraceStats {
            bytes: Some(bytes),
            events: Some(summary.events),
            note,
        }
    }
}

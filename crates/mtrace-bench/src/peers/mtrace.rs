//! mtrace: `scope!` guards; tasks on their own logical stack
//! (`on_logical_stack`, a switch in and out around every poll). The trace
//! file is on `/dev/shm`, a ring sized to keep every event of the run
//! ([`Mtrace`]), or a 4 MiB ring that wraps many times ([`MtraceRing`]).
//!
//! The second is not a way to record a run (it keeps only the last 4 MiB);
//! it separates the two costs of recording. Keeping every event writes each
//! event into memory the process never touched before, and the kernel
//! provides that memory a page at a time (on the machine of the README's
//! table, about 1 us per 4 KiB page: 4 ns per event; the recorder's
//! provisioner thread has it done ahead of the claims). A ring that wraps
//! reuses memory that is mapped and in cache, as the floor's buffer and the
//! recorder bench's (`cargo bench -p mtrace`) ring are: what is left is the
//! recording path itself.

use std::future::Future;
use std::path::PathBuf;

use mtrace::{Config, Format, LogicalStackExt, Mode, Recording, ScopeGuard};
use mtrace_format::layout::{DEFAULT_CHUNK_SIZE, HEADER_SIZE};

use super::{scratch_path, Recorder, TraceStats};

/// mtrace keeping every event of the run.
pub type Mtrace = MtraceIn<false>;

/// mtrace writing into a [`RING_BYTES`] ring that wraps.
pub type MtraceRing = MtraceIn<true>;

/// The ring of [`MtraceRing`]: the size of the floor's buffer.
pub const RING_BYTES: u64 = 4 << 20;

/// A running mtrace recording; `SMALL_RING`: a [`RING_BYTES`] ring, else
/// room for every event.
pub struct MtraceIn<const SMALL_RING: bool> {
    recording: Recording,
    path: PathBuf,
}

/// The event format `MTRACE_FORMAT` asks for (`4`: compact events), as a
/// recording from `Config::from_env` would write; 16-byte events when it
/// is unset, so the two formats' costs can be compared in one binary.
fn format_from_env() -> Format {
    std::env::var("MTRACE_FORMAT")
        .ok()
        .and_then(|v| Format::from_env_value(&v))
        .unwrap_or_default()
}

/// Room for `events` events, their chunks' headers and snapshots, and one
/// partly filled chunk per thread, in whole MiB.
pub fn capacity_for(events: u64) -> u64 {
    let bytes = events * 16 * 5 / 4 + 64 * DEFAULT_CHUNK_SIZE as u64;
    bytes.div_ceil(1 << 20) << 20
}

impl<const SMALL_RING: bool> Recorder for MtraceIn<SMALL_RING> {
    type Scope = ScopeGuard;
    type Batch = ();

    fn start(expected_events: u64) -> Self {
        let path = scratch_path("mtrace.mtrace");
        let capacity = if SMALL_RING {
            RING_BYTES
        } else {
            capacity_for(expected_events)
        };
        let config = Config::new(&path)
            .capacity(capacity)
            .mode(Mode::Ring)
            .format(format_from_env());
        let recording = mtrace::start(config).expect("start the mtrace recording");
        MtraceIn { recording, path }
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

/// mtrace with tokio's task hooks (`mtrace_tokio::instrument`): every task
/// on its own logical stack with no code at the spawn site, a switch in
/// and out around every poll from the runtime's before- and after-poll
/// hooks, and the tasks' stacks kept in a table between polls. Runs
/// only where the hooks exist (`--cfg tokio_unstable`).
pub struct MtraceTokio(Mtrace);

impl Recorder for MtraceTokio {
    type Scope = ScopeGuard;
    type Batch = ();

    fn start(expected_events: u64) -> Self {
        MtraceTokio(Mtrace::start(expected_events))
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
        future
    }

    fn hook_runtime(builder: &mut tokio::runtime::Builder) -> bool {
        mtrace_tokio::instrument(builder);
        mtrace_tokio::HOOKS_AVAILABLE
    }

    fn finish(self) -> TraceStats {
        self.0.finish()
    }
}

//! `tracing` spans (`info_span!(..).entered()`, `Instrument::instrument`
//! for tasks: the span is entered on every poll) under two subscribers that
//! record span timings, each a `Registry` with one layer, and a reference:
//!
//! * [`TracingChrome`]: `tracing-chrome`'s `ChromeLayer` with its defaults
//!   (threaded style, a begin and an end record per enter and exit), writing
//!   its JSON file on `/dev/shm` from its writer thread;
//! * [`TracingTiming`]: the least a timing layer can do, [`TimingLayer`]:
//!   `rdtsc` on enter and exit, a 24-byte record per closed interval pushed
//!   onto a thread-local vector;
//! * [`MtraceTracing`]: `mtrace-tracing`'s layer, recording into an mtrace
//!   trace file as the `mtrace` row does (a root span on a thread's own
//!   stack gets a logical stack of its own: see that crate's docs), and
//!   [`MtraceTracingThread`], the same with `with_own_stacks(false)`;
//! * [`TracingRegistry`]: a layer that does nothing, [`NoopLayer`]: the
//!   registry's own cost, which the rows above include.

use std::cell::RefCell;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::span::{EnteredSpan, Id};
use tracing::{Instrument, Subscriber};
use tracing_chrome::{ChromeLayerBuilder, FlushGuard};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use super::mtrace::capacity_for;
use super::{scratch_path, Recorder, TraceStats};

/// `tracing` under a `ChromeLayer`.
pub struct TracingChrome {
    guard: FlushGuard,
    path: PathBuf,
}

/// `tracing` under a [`TimingLayer`].
pub struct TracingTiming;

#[inline(always)]
fn span_scope() -> EnteredSpan {
    tracing::info_span!("scope").entered()
}

#[inline(always)]
fn span_recurse() -> EnteredSpan {
    tracing::info_span!("recurse").entered()
}

fn instrument<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
where
    F: Future + Send + 'static,
{
    future.instrument(tracing::info_span!("task"))
}

impl Recorder for TracingChrome {
    type Scope = EnteredSpan;
    type Batch = ();

    fn start(_: u64) -> Self {
        let path = scratch_path("chrome.json");
        let (layer, guard) = ChromeLayerBuilder::new().file(&path).build();
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("set the global subscriber");
        TracingChrome { guard, path }
    }

    #[inline(always)]
    fn scope() -> EnteredSpan {
        span_scope()
    }

    #[inline(always)]
    fn recurse_scope() -> EnteredSpan {
        span_recurse()
    }

    #[inline(always)]
    fn batch() {}

    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        instrument(future)
    }

    fn finish(self) -> TraceStats {
        // Dropping the guard flushes the file and joins the writer thread.
        drop(self.guard);
        let bytes = std::fs::metadata(&self.path).map(|m| m.len()).ok();
        let _ = std::fs::remove_file(&self.path);
        TraceStats {
            bytes,
            events: None,
            note: String::new(),
        }
    }
}

/// One closed interval of a span: its callsite, entry and exit ticks.
#[allow(dead_code)] // kept as the trace, never read back
struct Interval {
    callsite: usize,
    start: u64,
    end: u64,
}

/// A thread's intervals; counted into [`INTERVALS`] when the thread exits.
#[derive(Default)]
struct Intervals {
    open: Vec<u64>,
    done: Vec<Interval>,
}

impl Drop for Intervals {
    fn drop(&mut self) {
        INTERVALS.fetch_add(self.done.len() as u64, Ordering::Relaxed);
    }
}

/// Intervals kept by threads that have exited.
static INTERVALS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD_INTERVALS: RefCell<Intervals> = RefCell::new(Intervals::default());
}

#[inline(always)]
fn ticks() -> u64 {
    mtrace::bench::read_tsc()
}

/// Times every enter/exit of every span with the TSC.
pub struct TimingLayer;

impl<S> Layer<S> for TimingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_enter(&self, _id: &Id, _ctx: Context<'_, S>) {
        let now = ticks();
        THREAD_INTERVALS.with(|t| t.borrow_mut().open.push(now));
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let end = ticks();
        let callsite = ctx.metadata(id).map_or(0, |m| m as *const _ as usize);
        THREAD_INTERVALS.with(|t| {
            let mut t = t.borrow_mut();
            if let Some(start) = t.open.pop() {
                t.done.push(Interval {
                    callsite,
                    start,
                    end,
                });
            }
        });
    }
}

impl Recorder for TracingTiming {
    type Scope = EnteredSpan;
    type Batch = ();

    fn start(_: u64) -> Self {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(TimingLayer))
            .expect("set the global subscriber");
        TracingTiming
    }

    #[inline(always)]
    fn scope() -> EnteredSpan {
        span_scope()
    }

    #[inline(always)]
    fn recurse_scope() -> EnteredSpan {
        span_recurse()
    }

    #[inline(always)]
    fn batch() {}

    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        instrument(future)
    }

    fn finish(self) -> TraceStats {
        let here = THREAD_INTERVALS.with(|t| t.borrow().done.len() as u64);
        let intervals = here + INTERVALS.load(Ordering::Relaxed);
        TraceStats {
            bytes: Some(intervals * std::mem::size_of::<Interval>() as u64),
            events: Some(2 * intervals),
            note: String::new(),
        }
    }
}

/// A layer that does nothing: every hook is the trait's empty default.
pub struct NoopLayer;

impl<S> Layer<S> for NoopLayer where S: Subscriber + for<'a> LookupSpan<'a> {}

/// `tracing` under a [`NoopLayer`]: what the registry costs on its own,
/// so a layer's row minus this one is what that layer adds.
pub struct TracingRegistry;

impl Recorder for TracingRegistry {
    type Scope = EnteredSpan;
    type Batch = ();

    fn start(_: u64) -> Self {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(NoopLayer))
            .expect("set the global subscriber");
        TracingRegistry
    }

    #[inline(always)]
    fn scope() -> EnteredSpan {
        span_scope()
    }

    #[inline(always)]
    fn recurse_scope() -> EnteredSpan {
        span_recurse()
    }

    #[inline(always)]
    fn batch() {}

    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        instrument(future)
    }

    fn finish(self) -> TraceStats {
        TraceStats {
            bytes: None,
            events: None,
            note: String::new(),
        }
    }
}

/// `tracing` under `mtrace-tracing`'s layer, recording with mtrace.
pub type MtraceTracing = MtraceTracingIn<true>;

/// The same with `with_own_stacks(false)`: root spans on the thread's stack.
pub type MtraceTracingThread = MtraceTracingIn<false>;

/// `tracing` under `mtrace-tracing`'s layer; `OWN_STACKS`: its
/// `with_own_stacks` setting.
pub struct MtraceTracingIn<const OWN_STACKS: bool> {
    recording: mtrace::Recording,
    path: PathBuf,
}

impl<const OWN_STACKS: bool> Recorder for MtraceTracingIn<OWN_STACKS> {
    type Scope = EnteredSpan;
    type Batch = ();

    fn start(expected_events: u64) -> Self {
        let path = scratch_path("mtrace-tracing.mtrace");
        // A root span records up to 7 events (switch in, enter, switch
        // out; at its close switch in, exit, switch out, end).
        let config = mtrace::Config::new(&path)
            .capacity(capacity_for(expected_events * 4))
            .mode(mtrace::Mode::Ring);
        let recording = mtrace::start(config).expect("start the mtrace recording");
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry()
                .with(mtrace_tracing::layer().with_own_stacks(OWN_STACKS)),
        )
        .expect("set the global subscriber");
        MtraceTracingIn { recording, path }
    }

    #[inline(always)]
    fn scope() -> EnteredSpan {
        span_scope()
    }

    #[inline(always)]
    fn recurse_scope() -> EnteredSpan {
        span_recurse()
    }

    #[inline(always)]
    fn batch() {}

    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        instrument(future)
    }

    fn finish(self) -> TraceStats {
        let summary = self
            .recording
            .finish()
            .expect("finish the mtrace recording");
        let _ = std::fs::remove_file(&self.path);
        let mut note = String::new();
        if summary.wrapped || summary.dropped_events > 0 || summary.meta_dropped > 0 {
            note = format!(
                "wrapped={} dropped_events={} meta_dropped={}",
                summary.wrapped, summary.dropped_events, summary.meta_dropped
            );
        }
        TraceStats {
            bytes: Some(summary.chunks * mtrace_format::layout::DEFAULT_CHUNK_SIZE as u64),
            events: Some(summary.events),
            note,
        }
    }
}

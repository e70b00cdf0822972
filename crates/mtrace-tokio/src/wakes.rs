//! Wakes of tasks, from tokio's own `tracing` instrumentation.
//!
//! tokio's task hooks see no waker. With its `tracing` feature (and
//! `--cfg tokio_unstable`), tokio wraps every task in a `runtime.spawn`
//! span (target `tokio::task`), which it enters around each poll, and its
//! task waker emits an event (target `tokio::task::waker`) at every use, with the
//! waker's operation (`op`: `waker.wake`, `waker.wake_by_ref`,
//! `waker.clone`, `waker.drop`) and the id of the task's span
//! (`task.id`): what tokio-console reads. [`wakes`]'s layer keeps, per
//! task span, the logical stack the task runs on (the thread's stack when
//! the span is first entered: the hooks switched onto the task's stack
//! before the poll that enters it), and records a `wake` of that stack
//! ([`mtrace::wake`]) at each `waker.wake` and `waker.wake_by_ref`, on the
//! waking thread:
//!
//! ```text
//! spawn:        runtime.spawn span #9 created (fields: task.id = tokio's id)
//! first poll:   hooks switch onto task-17's stack; span #9 entered: #9 -> stack of task-17
//! an I/O wake:  event {op = "waker.wake_by_ref", task.id = 9} -> wake(stack of task-17)
//! ```
//!
//! A wake before the task's first poll records nothing: the task has no
//! pause yet (its stack's life starts at its first poll).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use mtrace::StackId;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The layer of [`wakes`].
#[derive(Debug, Default)]
pub struct WakeLayer {
    _private: (),
}

/// A layer that records a `wake` of a task's logical stack whenever
/// tokio's waker wakes the task. Needs the `tracing` feature of this crate
/// (which turns on tokio's), `--cfg tokio_unstable`, and a subscriber
/// (`tracing_subscriber::registry()`) that lets tokio's `tokio::task`
/// spans and `tokio::task::waker` events (level `TRACE`) reach it; see
/// the [module
/// docs](self).
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt;
///
/// tracing::subscriber::set_global_default(
///     tracing_subscriber::registry()
///         .with(mtrace_tokio::wakes())
///         .with(mtrace_tracing::layer()),
/// )
/// .unwrap();
/// ```
pub fn wakes() -> WakeLayer {
    WakeLayer::default()
}

/// What the layer keeps in a task span's extensions: the task's stack
/// (`StackId::OWN.0`: not polled yet on a stack of its own).
struct TaskStack(AtomicU64);

fn is_task_span(meta: &Metadata<'_>) -> bool {
    meta.target() == "tokio::task" && meta.name() == "runtime.spawn"
}

/// The fields of a waker event: whether it wakes, and the task's span.
#[derive(Default)]
struct WakerEvent {
    wakes: bool,
    span: Option<u64>,
}

impl Visit for WakerEvent {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "task.id" {
            self.span = Some(value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "op" {
            self.wakes = matches!(value, "waker.wake" | "waker.wake_by_ref");
        }
    }

    // Should a tokio version record `op` as a `Display` value.
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "op" {
            let mut text = String::new();
            let _ = fmt::write(&mut text, format_args!("{value:?}"));
            self.wakes = matches!(text.as_str(), "waker.wake" | "waker.wake_by_ref");
        }
    }
}

impl<S> Layer<S> for WakeLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !is_task_span(attrs.metadata()) {
            return;
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut()
                .insert(TaskStack(AtomicU64::new(StackId::OWN.0)));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if !is_task_span(span.metadata()) {
            return;
        }
        let current = mtrace::current_stack();
        let ext = span.extensions();
        if let Some(task) = ext.get::<TaskStack>() {
            // Every poll, not just the first: a task spawned while nothing
            // recorded has no stack; one polled after a restart may have.
            task.0.store(current.0, Ordering::Relaxed);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        if meta.target() != "tokio::task::waker" || !mtrace::is_recording() {
            return;
        }
        let mut fields = WakerEvent::default();
        event.record(&mut fields);
        let (true, Some(span)) = (fields.wakes, fields.span) else {
            return;
        };
        let Some(span) = ctx.span(&Id::from_u64(span)) else {
            return;
        };
        let ext = span.extensions();
        let Some(task) = ext.get::<TaskStack>() else {
            return;
        };
        let stack = StackId(task.0.load(Ordering::Relaxed));
        mtrace::wake(stack); // nothing for `StackId::OWN`
    }
}

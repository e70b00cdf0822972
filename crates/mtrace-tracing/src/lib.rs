//! A [`tracing_subscriber::Layer`] that records `tracing` spans as mtrace
//! frames.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let _recording = mtrace::start(mtrace::Config::new("app.mtrace")).ok();
//! tracing::subscriber::set_global_default(
//!     tracing_subscriber::registry().with(mtrace_tracing::layer()),
//! )
//! .unwrap();
//! ```
//!
//! # What a span becomes
//!
//! A span is **one call**: its frame opens at the span's first enter and
//! closes when the span closes (its last handle is dropped), however many
//! times it is entered and exited in between. An `Instrumented` future
//! enters its span on every poll and exits it when the poll returns; the
//! frame stays open across those exits, and the time between polls is the
//! frame's `paused` time, as for `#[mtrace::profile] async fn` on a task's
//! [`LogicalStack`].
//!
//! That needs the frame to live on a stack that is switched away between
//! polls, never on a worker thread's own stack (where the next task's
//! frames would land on top of it). So, at a span's first enter:
//!
//! * if the thread runs a logical stack (a task put on one by
//!   `mtrace-tokio`'s hooks or `.on_logical_stack()`, or the stack of an
//!   entered span, see below), the frame opens on it (the span *borrows*
//!   that stack): it nests under the frames open there, and the task's own
//!   switches pause it;
//! * if the thread runs its own stack (a root span, or a span whose parent
//!   is entered in another task), the span gets a [`LogicalStack`] of its
//!   own, named after the span, and the frame opens on it. Every enter of
//!   the span switches the thread onto that stack
//!   ([`LogicalStack::enter_detached`]) and its exit switches back
//!   ([`LogicalStack::leave`]), the model of the future adapter: the
//!   analyzer's pause accounting does the rest. Spans entered inside it
//!   borrow it, so they nest under it. Closing the span closes its frame on
//!   its stack and drops the stack (its `end`).
//!
//! A span of its own stack costs 7 events (a switch in, the enter, a
//! switch out; at the close a switch in, the exit, a switch out, the
//! `end`) and a stack name in the trace's metadata; a span on a borrowed
//! stack costs 2, as `scope!` does. [`MtraceLayer::with_own_stacks`]`(false)`
//! opens root spans on the thread's own stack instead: right for programs
//! whose spans on plain threads are synchronous, or whose tasks all run
//! on stacks of their own (`mtrace-tokio`).
//!
//! ```text
//! poll 1 (worker 1):  own --enter handler--> [handler] --enter lookup--> [handler, lookup] --exit, exit--> own
//!                                  (the stack "handler" keeps [handler, lookup]: both paused)
//! poll 2 (worker 2):  own --enter handler--> [handler, lookup] --close lookup--> [handler] --exit--> own
//! close handler:      switch onto "handler", exit handler, switch back; the stack ends
//! ```
//!
//! What a span cannot do, and what happens instead (never a panic):
//!
//! * A span that borrowed a stack and is closed while another stack runs
//!   (closed in another task) leaves its frame open on the stack it
//!   borrowed: it closes, as cut short, when that stack ends (or is open
//!   at the end of the trace); the analyzer warns of it
//!   (`frames_open_at_stack_end`).
//! * A span never closed keeps its frame (and its stack) open to the end
//!   of the trace: `open_at_end`, as a task still running when the
//!   recording finished (no warning: the trace cannot tell them apart).
//! * A span entered on two threads at once, or entered again while
//!   entered: the second enter records nothing (its stack is in use).
//! * A borrowed-stack span exited and entered again while the code around
//!   it goes on (`span.in_scope(..)` twice with work between) counts that
//!   work as its own: the frame is open between the two.
//! * Exits out of order on a thread undo the switches made since the
//!   exited span's enter, innermost first (switches nest as guards do).
//!
//! Names and `file:line` come from the span's metadata; each callsite is
//! registered once ([`mtrace::register_function`]) and its id cached.
//! Events (`tracing::event!`, `info!`) become marks with
//! [`MtraceLayer::with_marks`]`(true)` (off by default): named after the
//! event's message, else its metadata name.
//!
//! Filters decide as for every layer: a span a global `EnvFilter` or this
//! layer's own filter (`layer().with_filter(..)`) disables never reaches
//! it, so it records no frame. So that an empty report is not a mystery,
//! the layer says on stderr, when it is added to a subscriber whose
//! filters pass only some levels (its `max_level_hint`, e.g. a global
//! `EnvFilter` under it with `RUST_LOG` unset: `ERROR`), which spans will
//! not reach it. A filter added after this layer (above it) is not seen
//! then: tracing-subscriber tells a layer only of the subscriber under it
//! (`Layer::on_layer`), and its `Dispatch` has no public level hint.
//! Keep filters for the printed output on the printing layer
//! (`fmt::layer().with_filter(..)`): per-layer filters never hide spans
//! from this one.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::Layer;
//!
//! tracing::subscriber::set_global_default(
//!     tracing_subscriber::registry()
//!         .with(mtrace_tracing::layer()) // every span, whatever RUST_LOG says
//!         .with(tracing_subscriber::fmt::layer().with_filter(
//!             tracing_subscriber::EnvFilter::from_default_env(), // what is printed
//!         )),
//! )
//! .unwrap();
//! ```
//!
//! tokio's own instrumentation (its `tracing` feature: `runtime.spawn` and
//! `runtime.resource` spans, waker events, which `mtrace_tokio::wakes()`
//! reads) is never recorded: a task's stack stands for it.
#![deny(missing_docs)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use mtrace::{Detached, FunctionId, LogicalStack, StackId, StackKind};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The layer; see the [crate docs](crate). Made by [`layer`].
pub struct MtraceLayer {
    marks: bool,
    own_stacks: bool,
    spans: Spans,
}

impl fmt::Debug for MtraceLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MtraceLayer")
            .field("marks", &self.marks)
            .field("own_stacks", &self.own_stacks)
            .finish_non_exhaustive()
    }
}

/// A layer that records spans as frames, and no events.
pub fn layer() -> MtraceLayer {
    MtraceLayer {
        marks: false,
        own_stacks: true,
        spans: Spans::default(),
    }
}

impl MtraceLayer {
    /// Records every event the layer sees as a mark ([`mtrace::mark`]).
    pub fn with_marks(mut self, marks: bool) -> MtraceLayer {
        self.marks = marks;
        self
    }

    /// Whether a span first entered on a thread's own stack gets a
    /// logical stack of its own (the default: `true`). With `false` its
    /// frame opens on the thread's stack: 2 events a span instead of 7,
    /// right when every such span is synchronous (entered once, closed
    /// right after, as `#[instrument]` on a plain `fn` is) or when every
    /// task already runs on a stack of its own (`mtrace-tokio`'s hooks,
    /// `.on_logical_stack()`); wrong for a span entered by the polls of a
    /// task on a thread's own stack, whose frame would stay open under
    /// the next task's.
    pub fn with_own_stacks(mut self, own_stacks: bool) -> MtraceLayer {
        self.own_stacks = own_stacks;
        self
    }
}

/// Hashes a callsite's metadata address or a span id: one multiply, no
/// SipHash.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

/// Per callsite, its function id, or `None` for tokio's own
/// instrumentation (never recorded).
type Sites = HashMap<usize, Option<FunctionId>, BuildHasherDefault<AddressHasher>>;

/// Shards of [`Spans`]: enough that threads entering different spans
/// rarely meet on one lock.
const SHARDS: usize = 64;

type SpanMap = HashMap<u64, SpanFrame, BuildHasherDefault<AddressHasher>>;

/// The layer's state of every span it records, by span id, in shards
/// locked one at a time. The layer keeps it itself rather than in the
/// registry's span extensions: an extension costs a slab lookup, a lock
/// of the span's extensions, a type-keyed map and a boxed value per span,
/// where this costs one hash and one uncontended lock per hook. A span's
/// entry is removed at its close, before the registry can give its id to
/// another span.
struct Spans {
    shards: [Mutex<SpanMap>; SHARDS],
}

impl Default for Spans {
    fn default() -> Spans {
        Spans {
            shards: std::array::from_fn(|_| Mutex::new(SpanMap::default())),
        }
    }
}

impl Spans {
    /// The shard of span `id`, locked.
    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, SpanMap> {
        let at = (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % SHARDS;
        self.shards[at].lock().unwrap_or_else(|e| e.into_inner())
    }
}

thread_local! {
    /// Function id per callsite (its metadata's address: one `static` per
    /// callsite), per thread: no lock. A miss registers the callsite,
    /// which returns the id it already has if another thread did.
    static SITES: RefCell<Sites> = RefCell::new(Sites::default());
    /// This thread's id (`std::thread::current()` clones an `Arc`).
    static THREAD: std::thread::ThreadId = std::thread::current().id();
    /// This thread's enters not yet exited, innermost last.
    static ENTERED: RefCell<Vec<Entered>> = const { RefCell::new(Vec::new()) };
}

fn this_thread() -> std::thread::ThreadId {
    THREAD.with(|t| *t)
}

/// The function id of a span's callsite, or `None` if the layer records
/// no span of it (tokio's own instrumentation): decided once per callsite
/// and thread, so a span costs one map lookup for both.
fn function(meta: &'static Metadata<'static>) -> Option<FunctionId> {
    let key = meta as *const Metadata<'static> as usize;
    SITES.with(|sites| {
        *sites.borrow_mut().entry(key).or_insert_with(|| {
            (!is_tokio_instrumentation(meta)).then(|| {
                mtrace::register_function(
                    meta.name(),
                    meta.file().unwrap_or(""),
                    meta.line().unwrap_or(0),
                    meta.module_path().unwrap_or(""),
                )
            })
        })
    })
}

/// A span or event of tokio's own instrumentation (its `tracing` feature,
/// under `--cfg tokio_unstable`): `runtime.spawn` around every task's
/// polls (target `tokio::task`), `runtime.resource*` around its timers and
/// locks (targets `tokio::...`, and `runtime::resource::...` for their
/// state updates), the waker's events (`tokio::task::waker`). They
/// describe the runtime, not the program: a task's stack already stands
/// for its `runtime.spawn`, and `mtrace_tokio::wakes()` reads them for
/// wakes.
fn is_tokio_instrumentation(meta: &Metadata<'_>) -> bool {
    let target = meta.target();
    target == "tokio" || target.starts_with("tokio::") || target.starts_with("runtime::resource")
}

/// Where a span's frame is open.
#[derive(Debug)]
enum Home {
    /// Not entered in a recording yet.
    NotOpen,
    /// Open on a stack the span found running at its first enter (a
    /// thread's own stack: with that thread's id, as every thread's own
    /// stack is `StackId::OWN`).
    Borrowed(StackId, Option<std::thread::ThreadId>),
    /// Open on the span's own stack; `None` while a thread runs it (the
    /// thread's entry holds it).
    Own(Option<LogicalStack>),
}

/// What the layer keeps of a span, in [`Spans`].
struct SpanFrame {
    function: FunctionId,
    name: &'static str,
    home: Home,
}

/// One enter on this thread, undone by the matching exit.
struct Entered {
    span: u64,
    /// The span's own stack and the switch onto it, if this enter switched.
    switched: Option<(LogicalStack, Detached)>,
}

/// Switches back from an entry's stack and gives the stack back to its
/// span (if the span is gone, closed while entered, dropping the stack
/// ends it).
fn undo(entry: Entered, spans: &Spans) {
    let Some((mut stack, detached)) = entry.switched else {
        return;
    };
    stack.leave(detached);
    let mut shard = spans.shard(entry.span);
    if let Some(frame) = shard.get_mut(&entry.span) {
        if let Home::Own(slot @ None) = &mut frame.home {
            *slot = Some(stack);
        }
    }
}

impl<S> Layer<S> for MtraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_layer(&mut self, subscriber: &mut S) {
        if let Some(warning) = filter_warning(subscriber.max_level_hint()) {
            eprintln!("{warning}");
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        let Some(function) = function(meta) else {
            return;
        };
        let frame = SpanFrame {
            function,
            name: meta.name(),
            home: Home::NotOpen,
        };
        let id = id.into_u64();
        self.spans.shard(id).insert(id, frame);
    }

    fn on_enter(&self, id: &Id, _ctx: Context<'_, S>) {
        let id = id.into_u64();
        let mut switched = None;
        {
            let mut shard = self.spans.shard(id);
            let Some(frame) = shard.get_mut(&id) else {
                return;
            };
            let home = &mut frame.home;
            match home {
                Home::NotOpen if mtrace::is_recording() => {
                    let current = mtrace::current_stack();
                    if current == StackId::OWN && self.own_stacks {
                        let mut stack = LogicalStack::of_kind(StackKind::Span, frame.name);
                        if let Some(detached) = stack.enter_detached() {
                            mtrace::enter(frame.function);
                            *home = Home::Own(None);
                            switched = Some((stack, detached));
                        }
                    } else {
                        mtrace::enter(frame.function);
                        let thread = (current == StackId::OWN).then(this_thread);
                        *home = Home::Borrowed(current, thread);
                    }
                }
                Home::Own(slot @ Some(_)) => {
                    let mut stack = slot.take().expect("matched Some");
                    match stack.enter_detached() {
                        Some(detached) => switched = Some((stack, detached)),
                        None => *slot = Some(stack),
                    }
                }
                // Not recording; borrowed (its frame stays where it is);
                // or its stack runs already (entered twice).
                _ => {}
            }
        }
        let entry = Entered { span: id, switched };
        ENTERED.with(|e| e.borrow_mut().push(entry));
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        let id = id.into_u64();
        // Taken out of the thread-local before undoing: undoing locks the
        // span's shard, never the list.
        let innermost = ENTERED.with(|e| {
            let mut entered = e.borrow_mut();
            match entered.last() {
                Some(last) if last.span == id => entered.pop().map(Ok),
                // Out of order: undo the enters since, innermost first.
                _ => entered
                    .iter()
                    .rposition(|x| x.span == id)
                    .map(|at| Err(entered.drain(at..).rev().collect::<Vec<_>>())),
            }
        });
        match innermost {
            Some(Ok(entry)) => undo(entry, &self.spans),
            Some(Err(rest)) => rest.into_iter().for_each(|entry| undo(entry, &self.spans)),
            None => {}
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let id = id.into_u64();
        let Some(frame) = self.spans.shard(id).remove(&id) else {
            return;
        };
        match frame.home {
            Home::Borrowed(stack, thread)
                if mtrace::current_stack() == stack
                    && thread.is_none_or(|t| t == this_thread()) =>
            {
                mtrace::exit(frame.function);
            }
            Home::Own(Some(mut stack)) => {
                if let Some(detached) = stack.enter_detached() {
                    mtrace::exit(frame.function);
                    stack.leave(detached);
                }
                // Dropped: its `end`.
            }
            // Closed on another stack than the one it borrowed: the frame
            // stays open there (cut short at that stack's end). Own stack
            // still run by a thread (closed while entered): that thread's
            // exit finds the span gone and drops the stack, which ends it.
            _ => {}
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if !self.marks || !mtrace::is_recording() || is_tokio_instrumentation(event.metadata()) {
            return;
        }
        let mut message = Message(None);
        event.record(&mut message);
        match message.0 {
            Some(text) => mtrace::mark(&text),
            None => mtrace::mark(event.metadata().name()),
        }
    }
}

/// The start-up warning when the subscriber this layer is added to lets
/// only some levels of spans through (`max_level_hint` below `TRACE`: a
/// global `EnvFilter`, `with_max_level`, ...): the spans it filters out
/// never reach this layer, and their functions are missing from the
/// report with no other word why. `None` when every level gets through.
fn filter_warning(hint: Option<LevelFilter>) -> Option<String> {
    let hint = hint?;
    if hint >= LevelFilter::TRACE {
        return None;
    }
    let hidden = match hint.into_level() {
        None => "spans of every level".to_owned(),
        Some(level) => format!("spans below {level}"),
    };
    Some(format!(
        "mtrace-tracing: the subscriber under this layer passes at most {hint} ({hidden} never reach it, \
         so they are not recorded): a filter such as a global EnvFilter (RUST_LOG unset: ERROR only). \
         To filter only what is printed, make it the fmt layer's own filter \
         (`fmt::layer().with_filter(EnvFilter::from_default_env())`) and add mtrace_tracing::layer() before it"
    ))
}

/// An event's `message` field.
struct Message(Option<String>);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing::Subscriber;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::Layer;

    use super::*;

    #[test]
    fn a_global_filter_under_the_layer_is_named_at_start_up() {
        // `RUST_LOG` unset: `EnvFilter` passes ERROR only.
        let global =
            tracing_subscriber::registry().with(tracing_subscriber::EnvFilter::new("error"));
        let warning = filter_warning(global.max_level_hint()).expect("a warning");
        assert!(
            warning.contains("at most error (spans below ERROR never reach it"),
            "{warning}"
        );
        assert!(warning.contains("EnvFilter"), "{warning}");
        let off = filter_warning(Some(LevelFilter::OFF)).expect("a warning");
        assert!(off.contains("spans of every level never reach it"), "{off}");
    }

    #[test]
    fn no_filter_or_a_per_layer_one_under_the_layer_is_silent() {
        assert_eq!(
            filter_warning(tracing_subscriber::registry().max_level_hint()),
            None
        );
        assert_eq!(filter_warning(Some(LevelFilter::TRACE)), None);
        // The printing layer's own filter, added after this layer: the
        // whole stack passes every level.
        let stack = tracing_subscriber::registry().with(layer()).with(
            tracing_subscriber::fmt::layer()
                .with_filter(tracing_subscriber::EnvFilter::new("warn")),
        );
        assert_eq!(filter_warning(stack.max_level_hint()), None);
    }
}

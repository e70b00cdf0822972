//! fastrace (built with its `enable` feature): `LocalSpan`s under a root
//! span per batch (fastrace drops local spans past 10240 under one local
//! parent, so batches stay below that); every task gets a root span
//! (`in_span`) and a local span per poll (`enter_on_poll`). The reporter
//! keeps every `SpanRecord` it is given, in memory.

use std::future::Future;
use std::sync::{Arc, Mutex};

use fastrace::collector::{Config, Reporter, SpanContext};
use fastrace::future::FutureExt;
use fastrace::local::LocalParentGuard;
use fastrace::prelude::{LocalSpan, Span, SpanRecord};

use super::{Recorder, TraceStats};

/// The spans the reporter was given.
type Kept = Arc<Mutex<Vec<SpanRecord>>>;

/// A reporter that keeps every span.
struct KeepSpans(Kept);

impl Reporter for KeepSpans {
    fn report(&mut self, spans: Vec<SpanRecord>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(spans);
    }
}

/// fastrace with `KeepSpans` (which keeps the spans in memory) as its reporter.
pub struct Fastrace {
    kept: Kept,
}

/// A root span set as the thread's local parent (the guard drops first).
pub struct Root {
    _parent: LocalParentGuard,
    _root: Span,
}

impl Recorder for Fastrace {
    type Scope = LocalSpan;
    type Batch = Root;

    fn start(_: u64) -> Self {
        let kept = Kept::default();
        fastrace::set_reporter(KeepSpans(kept.clone()), Config::default());
        Fastrace { kept }
    }

    #[inline(always)]
    fn scope() -> LocalSpan {
        LocalSpan::enter_with_local_parent("scope")
    }

    #[inline(always)]
    fn recurse_scope() -> LocalSpan {
        LocalSpan::enter_with_local_parent("recurse")
    }

    #[inline(always)]
    fn batch() -> Root {
        let root = Span::root("batch", SpanContext::random());
        Root {
            _parent: root.set_local_parent(),
            _root: root,
        }
    }

    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        future
            .enter_on_poll("poll")
            .in_span(Span::root("task", SpanContext::random()))
    }

    fn finish(self) -> TraceStats {
        fastrace::flush();
        let spans = self.kept.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
        TraceStats {
            // What the reporter holds: the records themselves (their names
            // are static, they have no properties or events).
            bytes: Some(spans * std::mem::size_of::<SpanRecord>() as u64),
            events: Some(2 * spans),
            note: String::new(),
        }
    }
}

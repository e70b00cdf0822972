//! The Tracy child: `mtrace-bench` runs this binary for the `tracy` rows.
//!
//! Tracy (`tracy-client`): `span!` zones; a zone around every poll of a task
//! (Tracy has no future adapter).
//!
//! Tracy's client starts before `main` in every binary that links it (its
//! static constructors spawn its worker threads), which is how users run
//! it. Linked into the bench binary, it would run in every recorder's
//! process; so it lives in this binary of its own, and the library never
//! names `tracy-client`.
//!
//! Built with `default-features = false, features = ["enable"]`: the client
//! is on and collecting from the start (no `ondemand`), and the features
//! that would add background work or network traffic are off (sampling,
//! system and context-switch tracing, code transfer, UDP broadcast). With
//! no profiler connected, as here, the client keeps every zone in its
//! in-memory queues until one connects; nothing is dropped. So the trace
//! bytes are not reported by the client: the tables show its peak memory.

use std::future::Future;

use tracy_client::{Client, Span};

use mtrace_bench::peers::{PerPoll, PollScope, Recorder, TraceStats};
use mtrace_bench::Peer;

/// A running Tracy client.
struct Tracy {
    _client: Client,
}

/// The zone around one poll.
struct PollZone;

impl PollScope for PollZone {
    type Guard = Span;

    #[inline(always)]
    fn open() -> Span {
        tracy_client::span!("poll")
    }
}

impl Recorder for Tracy {
    type Scope = Span;
    type Batch = ();

    fn start(_: u64) -> Self {
        Tracy {
            _client: Client::start(),
        }
    }

    #[inline(always)]
    fn scope() -> Span {
        tracy_client::span!("scope")
    }

    #[inline(always)]
    fn recurse_scope() -> Span {
        tracy_client::span!("recurse")
    }

    #[inline(always)]
    fn batch() {}

    fn task<F>(future: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        PerPoll::<F, PollZone>::new(future)
    }

    fn finish(self) -> TraceStats {
        TraceStats::default()
    }
}

fn main() {
    mtrace_bench::child_main::<Tracy>(Peer::Tracy);
}

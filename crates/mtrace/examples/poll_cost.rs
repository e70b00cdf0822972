//! What a poll of the future adapter costs in instructions, with the wake a
//! tokio task that yields records at every poll, against the floor (a
//! clock read and a 16-byte store per event) and the same future without
//! the adapter: run it under callgrind and compare the instructions of
//! `polls` for two counts (see `crates/mtrace-bench/README.md`, "The poll
//! path").
//!
//! ```text
//! cargo build --release -p mtrace --example poll_cost
//! for N in 100000 200000; do valgrind --tool=callgrind --toggle-collect='*poll_cost*polls*' \
//!     --callgrind-out-file=/dev/null target/release/examples/poll_cost adapter $N 2>&1 | grep refs; done
//! ```
//!
//! Modes: `plain` (the future alone), `adapter` (`.on_logical_stack()`, a
//! switch in and out per poll), `floor` (two clock reads and 16-byte
//! stores per poll, into a ring). The waker is woken after each poll
//! returned, on the polling thread, as tokio does with the waker of a task
//! that called `yield_now` (its worker wakes the deferred wakers later):
//! with the adapter, a `wake` event per poll.

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use mtrace::LogicalStackExt;

/// A future that is pending `0` more times, then ready; it keeps its
/// waker, as a yield hands it to the runtime.
struct Yields(usize, Option<Waker>);

impl Future for Yields {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match black_box(self.0) {
            0 => Poll::Ready(()),
            n => {
                self.0 = n - 1;
                let keep = match &self.1 {
                    Some(kept) if kept.will_wake(cx.waker()) => None,
                    _ => Some(cx.waker().clone()),
                };
                if keep.is_some() {
                    self.1 = keep;
                }
                if let Some(waker) = &self.1 {
                    DEFERRED.with(|d| *d.borrow_mut() = Some(waker.clone()));
                }
                Poll::Pending
            }
        }
    }
}

thread_local! {
    /// The waker of the last poll, woken after it returned.
    static DEFERRED: std::cell::RefCell<Option<Waker>> = const { std::cell::RefCell::new(None) };
}

/// The runtime's waker: counts its wakes.
struct Runtime;

impl Wake for Runtime {
    fn wake(self: Arc<Self>) {
        black_box(());
    }
}

#[inline(never)]
fn polls(future: impl Future<Output = ()>) {
    let waker = Waker::from(Arc::new(Runtime));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    while future.as_mut().poll(&mut cx).is_pending() {
        if let Some(deferred) = DEFERRED.with(|d| d.borrow_mut().take()) {
            deferred.wake();
        }
    }
}

#[inline(never)]
fn polls_floor(n: usize) {
    let mut ring = vec![[0u64; 2]; 1 << 18];
    let mut at = 0usize;
    for i in 0..n {
        for _ in 0..2 {
            ring[at] = [mtrace::bench::read_tsc(), i as u64];
            at = (at + 1) & ((1 << 18) - 1);
        }
    }
    black_box(&ring);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "adapter".into());
    let n: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let path = std::env::temp_dir().join(format!("mtrace-poll-cost-{}.mtrace", std::process::id()));
    let recording =
        mtrace::start(mtrace::Config::new(&path).capacity(256 << 20)).expect("trace file");
    match mode.as_str() {
        "plain" => polls(Yields(n, None)),
        "adapter" => polls(Yields(n, None).on_logical_stack("task")),
        "floor" => polls_floor(n),
        other => panic!("mode `{other}`: plain, adapter or floor"),
    }
    recording.finish().expect("finished");
    let _ = std::fs::remove_file(&path);
}

//! The mtrace APIs no peer has a counterpart of, as workloads that only the
//! mtrace rows run: `#[profile]` on a function and on an `async fn`, an
//! explicit logical-stack switch pair, and the future adapter polled in a
//! loop on one thread.
//!
//! Each workload is a pair of sample functions: the instrumented one, and
//! the same code without mtrace (the baseline, timed in the same child).
//! Each unit of work records two events, like a scope:
//!
//! ```text
//! profile-fn        CALLS x profiled(i)                      enter + exit of `profiled`
//! profile-async-fn  CALLS x poll(profiled_async(i)) once     enter + exit (ready on its first poll)
//! switch-pair       CALLS x { stack.enter(); drop }          switch in + switch out
//! adapter-poll      CALLS polls of Countdown.on_logical_stack(..)  switch in + switch out per poll
//! ```
//!
//! The stack of `switch-pair` and the task of `adapter-poll` are dropped
//! at the end of each sample, which records their `end`: one event more a
//! sample, not a unit.
//!
//! The async ones are polled with a no-op waker on the timing thread, not
//! on a runtime, so the numbers are the adapter's own cost without a
//! scheduler's noise (the `async` workload measures it on tokio).

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};

use mtrace::{LogicalStack, LogicalStackExt};

use crate::workloads::{BATCH, LOOP_BATCHES};

/// Calls (or polls) per timed sample of each workload here.
pub const CALLS: usize = LOOP_BATCHES * BATCH;

/// An instrumented function with an empty body.
#[mtrace::profile]
#[inline(never)]
fn profiled(i: usize) -> usize {
    black_box(i)
}

/// `profiled` without the attribute.
#[inline(never)]
fn plain(i: usize) -> usize {
    black_box(i)
}

/// One sample of `profile-fn`.
#[inline(never)]
pub fn profile_fn_sample() {
    for i in 0..CALLS {
        black_box(profiled(i));
    }
}

/// The baseline of `profile-fn`.
#[inline(never)]
pub fn plain_fn_sample() {
    for i in 0..CALLS {
        black_box(plain(i));
    }
}

/// An instrumented `async fn` that completes on its first poll.
#[mtrace::profile]
async fn profiled_async(i: usize) -> usize {
    black_box(i)
}

/// `profiled_async` without the attribute.
async fn plain_async(i: usize) -> usize {
    black_box(i)
}

/// Polls `future`, which must complete on its first poll.
#[inline(always)]
fn poll_once<F: Future>(future: F, cx: &mut Context<'_>) -> Option<F::Output> {
    match pin!(future).poll(cx) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// One sample of `profile-async-fn`.
#[inline(never)]
pub fn profile_async_sample() {
    let mut cx = Context::from_waker(Waker::noop());
    for i in 0..CALLS {
        black_box(poll_once(profiled_async(i), &mut cx));
    }
}

/// The baseline of `profile-async-fn`.
#[inline(never)]
pub fn plain_async_sample() {
    let mut cx = Context::from_waker(Waker::noop());
    for i in 0..CALLS {
        black_box(poll_once(plain_async(i), &mut cx));
    }
}

/// One sample of `switch-pair`: the thread switches onto a logical stack
/// and back, `CALLS` times.
#[inline(never)]
pub fn switch_sample() {
    let mut stack = LogicalStack::new("switch");
    for i in 0..CALLS {
        let _on_stack = stack.enter();
        black_box(i);
    }
}

/// The baseline of `switch-pair`.
#[inline(never)]
pub fn no_switch_sample() {
    for i in 0..CALLS {
        black_box(i);
    }
}

/// A future that is pending `0` more times, then ready.
struct Countdown(usize);

impl Future for Countdown {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        match black_box(self.0) {
            0 => Poll::Ready(()),
            n => {
                self.0 = n - 1;
                Poll::Pending
            }
        }
    }
}

/// Polls `future` until it is ready.
#[inline(always)]
fn poll_to_end(future: impl Future<Output = ()>) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut future = pin!(future);
    while future.as_mut().poll(&mut cx).is_pending() {}
}

/// One sample of `adapter-poll`: a task on its own logical stack, polled
/// `CALLS` times.
#[inline(never)]
pub fn adapter_sample() {
    poll_to_end(Countdown(CALLS - 1).on_logical_stack("task"));
}

/// The baseline of `adapter-poll`: the same future, polled bare.
#[inline(never)]
pub fn bare_poll_sample() {
    poll_to_end(Countdown(CALLS - 1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn countdown_is_polled_calls_times() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut future = pin!(Countdown(2));
        let polls = std::iter::from_fn(|| Some(future.as_mut().poll(&mut cx)))
            .position(|p| p.is_ready())
            .map(|at| at + 1);
        assert_eq!(polls, Some(3));
    }

    #[test]
    fn async_bodies_complete_on_their_first_poll() {
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(poll_once(profiled_async(7), &mut cx), Some(7));
        assert_eq!(poll_once(plain_async(7), &mut cx), Some(7));
    }
}

//! Futures on logical stacks: a task keeps its own stack whichever worker
//! thread polls it.
//!
//! [`Instrumented`] switches onto the task's [`LogicalStack`] before every
//! poll of the inner future and back after it (the pattern of
//! `tracing::Instrumented::poll`, with a stack in place of a span). Frames
//! opened inside the task, such as the ones `#[mtrace::profile]` opens for
//! an `async fn`, stay on the task's stack between polls and move with it to
//! the next worker.
//!
//! It also polls the inner future with a waker of its own, which records a
//! `wake` event naming the task's stack (on whichever thread wakes it)
//! before waking the runtime's: the analyzer splits the time a task was
//! switched out into waiting (for its I/O or timer) and scheduled (woken,
//! waiting for a worker). The wrapper is made again only when the runtime
//! hands the task a waker that would not wake the same task (`will_wake`),
//! so a task polled again and again allocates once.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use mtrace_format::{StackId, StackKind};

use crate::scope::CallSite;
use crate::stack::LogicalStack;

/// A future that runs on its own [`LogicalStack`]; see [`LogicalStackExt`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Instrumented<F> {
    // Dropped by hand, on the task's stack.
    inner: ManuallyDrop<F>,
    /// Dropped, like every field, after `Drop::drop` has closed the inner
    /// future's frames on it and switched away: its `end` comes after
    /// those exits.
    stack: LogicalStack,
    /// The inner future returned `Ready`: dropping it closes no frame.
    done: bool,
    /// The runtime's waker last seen and the recording waker around it.
    waker: Option<(Waker, Waker)>,
}

/// A waker that records a `wake` of `stack`, then wakes the runtime's.
struct RecordingWaker {
    stack: StackId,
    inner: Waker,
}

impl Wake for RecordingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        crate::thread::wake(self.stack);
        self.inner.wake_by_ref();
    }
}

impl<F> Instrumented<F> {
    /// Wraps `inner` so every poll runs on `stack`.
    pub fn new(inner: F, stack: LogicalStack) -> Instrumented<F> {
        Instrumented {
            inner: ManuallyDrop::new(inner),
            stack,
            done: false,
            waker: None,
        }
    }

    /// The task's stack.
    pub fn stack(&self) -> &LogicalStack {
        &self.stack
    }
}

impl<F: Future> Future for Instrumented<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned (never moved out; dropped in
        // place); `stack` is not pinned and is only used through `&mut`.
        let this = unsafe { self.get_unchecked_mut() };
        let runtime = cx.waker();
        let reuse = matches!(&this.waker, Some((seen, _)) if seen.will_wake(runtime));
        if !reuse {
            let wrapped = Waker::from(Arc::new(RecordingWaker {
                stack: this.stack.id(),
                inner: runtime.clone(),
            }));
            this.waker = Some((runtime.clone(), wrapped));
        }
        let waker = match &this.waker {
            Some((_, wrapped)) => wrapped,
            None => runtime,
        };
        let mut cx = Context::from_waker(waker);
        let on_stack = this.stack.enter();
        // SAFETY: see above.
        let inner = unsafe { Pin::new_unchecked(&mut *this.inner) };
        let result = inner.poll(&mut cx);
        // The guard's drop switches back if the poll unwinds.
        on_stack.leave();
        this.done |= result.is_ready();
        result
    }
}

impl<F> Drop for Instrumented<F> {
    fn drop(&mut self) {
        // Dropping an unfinished inner future may close frames (a cancelled
        // `#[profile] async fn`): do it on the task's stack, if it opened
        // any in this recording. A task never polled in it (dropped by a
        // runtime shutting down, or polled only before a restart) has no
        // frames here: switching onto it would make a stack of an empty
        // stretch and an end.
        let polled_here = !self.done && self.stack.ran_in_recording();
        let _on_stack = polled_here.then(|| self.stack.enter());
        // SAFETY: dropped exactly once, in place, and never used again.
        unsafe { ManuallyDrop::drop(&mut self.inner) };
    }
}

/// Puts a future on its own logical stack.
///
/// The returned [`Instrumented`] switches onto the task's [`LogicalStack`]
/// before every poll of the inner future and back after it (the pattern of
/// `tracing::Instrumented::poll`, with a stack in place of a span). Frames
/// opened inside the task, such as the ones `#[mtrace::profile]` opens for an
/// `async fn`, stay on the task's stack between polls and move with it to
/// whichever worker thread polls it next. Dropping an unfinished task closes
/// its frames on its own stack. Dropping the task, finished or not, ends its
/// stack (an `end` event, after those exits; see [`LogicalStack`]).
///
/// ```
/// use mtrace::LogicalStackExt;
///
/// async fn handle(request: u32) -> u32 {
///     request + 1
/// }
///
/// let task = handle(41).on_logical_stack("request-41");
/// assert_eq!(task.stack().name(), Some("request-41"));
/// ```
pub trait LogicalStackExt: Future + Sized {
    /// Runs every poll of `self` on a new stack named `name`.
    fn on_logical_stack(self, name: impl Into<String>) -> Instrumented<Self> {
        Instrumented::new(self, LogicalStack::of_kind(StackKind::Future, name.into()))
    }

    /// Runs every poll of `self` on `stack`.
    fn on_stack(self, stack: LogicalStack) -> Instrumented<Self> {
        Instrumented::new(self, stack)
    }
}

impl<F: Future> LogicalStackExt for F {}

/// The body of a `#[profile] async fn`: enters the function's frame on the
/// first poll and leaves it when the body completes (or is dropped unfinished).
#[doc(hidden)]
#[derive(Debug)]
pub struct ProfiledFuture<F> {
    // Dropped by hand, before the frame is closed.
    inner: ManuallyDrop<F>,
    site: &'static CallSite,
    polled: bool,
    /// The frame's function id while it is open (0: not open).
    open: u32,
}

impl<F> ProfiledFuture<F> {
    #[doc(hidden)]
    pub fn new(site: &'static CallSite, inner: F) -> Self {
        ProfiledFuture {
            inner: ManuallyDrop::new(inner),
            site,
            polled: false,
            open: 0,
        }
    }
}

impl<F: Future> Future for ProfiledFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned (dropped in place); the
        // other fields are plain data and never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.polled {
            this.polled = true;
            this.open = crate::scope::enter_site(this.site);
        }
        // SAFETY: see above.
        let result = unsafe { Pin::new_unchecked(&mut *this.inner) }.poll(cx);
        if result.is_ready() {
            crate::scope::exit_site(std::mem::take(&mut this.open));
        }
        result
    }
}

impl<F> Drop for ProfiledFuture<F> {
    fn drop(&mut self) {
        // Frames the body still has open close first.
        // SAFETY: dropped exactly once, in place, and never used again.
        unsafe { ManuallyDrop::drop(&mut self.inner) };
        crate::scope::exit_site(std::mem::take(&mut self.open));
    }
}

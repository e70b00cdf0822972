//! Logical stacks: work that runs on several threads in turn (a fiber, a
//! task, a coroutine) gets a stack of its own. See [`LogicalStack`].

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use mtrace_format::{StackId, StackKind};

use crate::shared::{self, GEN_OFF};
use crate::thread;

static NEXT_STACK_ID: AtomicU64 = AtomicU64::new(1);

/// A stack of frames that is not tied to a thread: a fiber's, a task's, a
/// coroutine's.
///
/// A thread runs one stack at a time: its own, or a logical one it switched
/// onto. [`LogicalStack::enter`] switches the current thread onto a stack and
/// returns a guard that switches back when dropped; both moves are recorded
/// as `switch` events. While a stack is switched out, it keeps its open
/// frames itself, so the next thread to enter it continues where the last
/// one stopped:
///
/// ```text
/// thread 1:  own --enter--> task (push handler, push query) --drop guard--> own
/// thread 2:                                      own --enter--> task (pop query, pop handler) --> own
///                          the frames [handler, query] travel inside the LogicalStack
/// ```
///
/// Guards nest: entering stack B while on stack A returns to A on drop.
/// When nothing is recorded, entering a stack does nothing.
///
/// Dropping a stack that ran in the running recording (a thread entered it
/// since that recording started) records an `end` event on the dropping
/// thread: the stack is complete, no thread will run it again (stack ids
/// are never reused). Drop the stack when its fiber or task is done, not
/// before: a stack that is only switched out may run again. Frames still
/// open on it then (a fiber abandoned mid-call, a task cancelled while
/// suspended) are left open; the analyzer closes them at the end as cut
/// short, instead of letting them pause until the end of the trace. A
/// stack that did not run in the running recording (created while nothing
/// recorded and never entered since, or last entered in an earlier
/// recording, before a stop and start or in the parent of a forked child)
/// ends silently: its drop costs a comparison, and a load of the global
/// switch when it did run once.
///
/// ```
/// let mut task = mtrace::LogicalStack::new("task-1");
/// {
///     let _on_task = task.enter(); // this thread now runs `task`
///     let _scope = mtrace::scope!("handler");
/// } // back on the thread's own stack
/// ```
#[derive(Debug)]
pub struct LogicalStack {
    id: StackId,
    /// Borrowed when the name is a `&'static str` (a callsite's name):
    /// naming such a stack allocates nothing.
    name: Option<Cow<'static, str>>,
    /// Open frames while switched out (while switched in: what the thread
    /// gets back on switch-out).
    frames: Vec<u32>,
    /// The generation `frames` belong to: the recording the stack last
    /// ran in (`GEN_OFF`: none yet), which its drop ends it in.
    frames_gen: u64,
    /// The generation whose metadata names this stack.
    named_in: u64,
    /// What it stands for, written with its name.
    kind: StackKind,
}

impl LogicalStack {
    /// A stack named `name` in the trace. Names need not be unique: each
    /// stack has its own id.
    pub fn new(name: impl Into<String>) -> LogicalStack {
        LogicalStack::of_kind(StackKind::Program, name.into())
    }

    /// [`LogicalStack::new`] for a name that lives as long as the program
    /// (a callsite's, a literal): the stack keeps a reference, so making
    /// one allocates nothing (a `tracing` layer makes one per root span).
    pub fn with_static_name(name: &'static str) -> LogicalStack {
        LogicalStack::of_kind(StackKind::Program, name)
    }

    /// A stack named `name` that stands for a `kind` of thing (a task, a
    /// span: what an integration makes). Reports group stacks by kind,
    /// e.g. when they summarize frames left open at stacks' ends. A
    /// `&'static str` name is kept by reference, as
    /// [`LogicalStack::with_static_name`] keeps it.
    pub fn of_kind(kind: StackKind, name: impl Into<Cow<'static, str>>) -> LogicalStack {
        let mut stack = LogicalStack::anonymous();
        stack.name = Some(name.into());
        stack.kind = kind;
        let g = shared::GEN.load(Ordering::Relaxed);
        stack.name_in(g);
        stack
    }

    /// A stack with no name record (the analyzer shows its id).
    pub fn anonymous() -> LogicalStack {
        LogicalStack {
            id: StackId(NEXT_STACK_ID.fetch_add(1, Ordering::Relaxed)),
            name: None,
            frames: Vec::new(),
            frames_gen: GEN_OFF,
            named_in: GEN_OFF,
            kind: StackKind::Unspecified,
        }
    }

    /// The id `switch` events use.
    pub fn id(&self) -> StackId {
        self.id
    }

    /// The name, if the stack has one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Frames open on the stack while it is switched out (innermost last),
    /// as function ids.
    pub fn open_frames(&self) -> &[u32] {
        &self.frames
    }

    /// Switches the current thread onto this stack until the guard is dropped.
    /// A no-op when nothing is recorded.
    // Inline across crates, like `scope!`'s guard: a call into the crate
    // per switch (the future adapter makes two per poll) costs a stack
    // frame and register saves on top of the event. Always: with plain
    // `#[inline]`, LLVM kept `enter` and the guard's drop out of line in
    // `Instrumented::poll` on tokio's tasks (six register pushes and pops
    // each, about 160 instructions a poll for the pair); inlined, tasks on
    // a current-thread tokio runtime went from 1.58x to 1.31x the floor.
    #[inline(always)]
    pub fn enter(&mut self) -> SwitchGuard<'_> {
        let prev = match thread::switch_in(self.id, &mut self.frames, &mut self.frames_gen) {
            Some((prev, g)) => {
                self.name_in(g);
                Some(prev)
            }
            None => None,
        };
        SwitchGuard {
            stack: self,
            prev,
            _not_send: PhantomData,
        }
    }

    /// Switches the current thread onto this stack with no guard, for
    /// callback APIs whose switch back comes in another call (a tracing
    /// `Layer`'s `on_enter` and `on_exit`, a runtime's before- and
    /// after-poll hooks). `None` when nothing is recorded (nothing was
    /// switched). Hand the [`Detached`] back to [`LogicalStack::leave`] on the
    /// same thread, after the switches made since were undone (switches
    /// nest as guards do); until then the stack holds what the thread gets
    /// back, so keep it (it may move, e.g. into a map, but not be dropped).
    ///
    /// ```
    /// // A runtime's hooks: one call switches in, a later one back.
    /// let mut task = mtrace::LogicalStack::new("task-1");
    /// let switched = task.enter_detached(); // `None` here: nothing records
    /// let _frame = mtrace::scope!("poll");
    /// drop(_frame);
    /// if let Some(switched) = switched {
    ///     task.leave(switched);
    /// }
    /// assert_eq!(mtrace::current_stack(), mtrace::StackId::OWN);
    /// ```
    #[inline]
    pub fn enter_detached(&mut self) -> Option<Detached> {
        let (prev, g) = thread::switch_in(self.id, &mut self.frames, &mut self.frames_gen)?;
        self.name_in(g);
        Some(Detached {
            prev,
            _not_send: PhantomData,
        })
    }

    /// Undoes [`LogicalStack::enter_detached`]: the thread goes back to the
    /// stack it ran before, and this stack keeps its open frames.
    #[inline]
    pub fn leave(&mut self, entered: Detached) {
        thread::switch_out(entered.prev, &mut self.frames, &mut self.frames_gen);
    }

    /// Whether a thread entered the stack in the running recording.
    #[inline]
    pub(crate) fn ran_in_recording(&self) -> bool {
        // A generation is never `GEN_OFF` and never used twice in a
        // process (a forked child's next recording gets a new one too).
        let g = self.frames_gen;
        g != GEN_OFF && g == shared::GEN.load(Ordering::Relaxed)
    }

    #[inline]
    fn name_in(&mut self, g: u64) {
        if g > GEN_OFF && self.named_in != g {
            if let Some(name) = &self.name {
                if shared::name_stack(g, self.id, name, self.kind) {
                    self.named_in = g;
                }
            }
        }
    }
}

impl Drop for LogicalStack {
    /// Records the stack's `end` if it ran in the running recording. A
    /// guard borrows the stack, so no thread runs it now: the end comes
    /// after its last switch away.
    #[inline]
    fn drop(&mut self) {
        if self.ran_in_recording() {
            thread::end(self.frames_gen, self.id);
        }
    }
}

/// Switches the current thread onto `stack`; the same as [`LogicalStack::enter`].
pub fn switch_to(stack: &mut LogicalStack) -> SwitchGuard<'_> {
    stack.enter()
}

/// A switch made by [`LogicalStack::enter_detached`]: the stack to go back to.
/// Not `Send`: it is undone on the thread that made it.
#[must_use = "hand it back to `LogicalStack::leave`"]
#[derive(Debug)]
pub struct Detached {
    prev: StackId,
    _not_send: PhantomData<*const ()>,
}

/// The stack the current thread runs: [`StackId::OWN`] (its own) or the
/// id of the [`LogicalStack`] it switched onto. Always [`StackId::OWN`]
/// when nothing is recorded.
#[inline]
pub fn current_stack() -> StackId {
    if shared::GEN.load(Ordering::Relaxed) == GEN_OFF {
        return StackId::OWN;
    }
    thread::current_stack()
}

/// Records that the task on logical stack `stack` was woken (made ready to
/// run), by the calling thread, at this instant: a `wake` event, which the
/// analyzer uses to split the stack's paused time into *waiting* (before
/// the wake) and *scheduled* (woken, waiting for a thread). The future
/// adapter's waker calls it for Rust futures; a binding whose tasks are
/// woken some other way (Python's asyncio, where a future's callback puts
/// the task's next step on the event loop) calls it where that happens.
/// Takes an id rather than the stack, since the waking thread usually does
/// not own the stack (another thread may be running it). Does nothing when
/// nothing records, or for [`StackId::OWN`].
#[inline]
pub fn wake(stack: StackId) {
    thread::wake(stack);
}

/// The current thread runs a [`LogicalStack`] until this guard is dropped.
/// It must be dropped on the thread that created it (it is not `Send`).
#[must_use = "the thread switches back as soon as the guard is dropped"]
#[derive(Debug)]
pub struct SwitchGuard<'a> {
    stack: &'a mut LogicalStack,
    /// The stack to go back to (`None`: nothing was switched).
    prev: Option<StackId>,
    _not_send: PhantomData<*const ()>,
}

impl SwitchGuard<'_> {
    /// Switches back, as dropping the guard does, with the switch inlined
    /// where this is called. A guard dropped both on the normal path and
    /// by unwinding is one out-of-line `drop_in_place` call (the
    /// compiler shares it between the two paths); a hot caller ends the
    /// guard with this instead and leaves the drop to the unwinding path.
    #[inline(always)]
    pub(crate) fn leave(self) {
        let guard = std::mem::ManuallyDrop::new(self);
        if let Some(prev) = guard.prev {
            // SAFETY: the guard is never dropped, so the stack's borrow is
            // read out of it once, here.
            let stack = unsafe { std::ptr::read(&guard.stack) };
            thread::switch_out(prev, &mut stack.frames, &mut stack.frames_gen);
        }
    }
}

impl Drop for SwitchGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(prev) = self.prev {
            thread::switch_out(prev, &mut self.stack.frames, &mut self.stack.frames_gen);
        }
    }
}

//! Which stack an event belongs to, and the shadow stacks that keep the
//! trace well nested. Both backends (`monitoring.rs` on 3.12+, `legacy.rs`
//! on 3.11) turn CPython's events into the calls of this module:
//!
//! ```text
//! py_enter(code, Start | Resume | Throw)    a Python frame starts or is resumed
//! py_leave(code, Return | Yield | Unwind)   a Python frame returns, yields or unwinds
//! (py_enter of loop.call_soon(callback))    a task's wakeup or step is scheduled: a wake
//! c_enter(def) / c_leave(def)               a C function is called / returns or raises
//! ```
//!
//! # Stacks
//!
//! A thread runs one of three levels of stack at a time:
//!
//! ```text
//! level 0   the thread's own stack                      (always)
//! level 1   a greenlet's, or a context-id callback's    (switched by greenlet.settrace / the callback)
//! level 2   an asyncio task's                           (switched when the task's coroutine is resumed
//!                                                         from the event loop, and when it suspends)
//! ```
//!
//! Each level above 0 is an [`mtrace::LogicalStack`] held by a [`Context`]
//! in a process-wide table; the thread keeps the shadow stack (function ids
//! of the open frames) of the level it runs, and those of the levels below.
//! A context whose owner is done (an asyncio task's coroutine returned or
//! unwound, a greenlet died, a dead task's address taken by a new one) is
//! removed and dropped by the thread that saw it, which records its
//! stack's `end` there, after the switch away (see `release`).
//!
//! # Wakes
//!
//! A task that suspends to the loop waits until something makes it
//! runnable: a future it awaits completes (an `Event` set, a timer's
//! handle, I/O), and the future's done-callback puts the task's
//! `__wakeup` on the loop's ready queue; or the task yields (`sleep(0)`)
//! or is cancelled and puts its own `__step` there. Every one of those
//! goes through the event loop's `call_soon` (the C `_asyncio` futures and
//! tasks call the loop's method too), a Python function whose start both
//! backends see anyway: the registry flags its code object
//! (`Entry::wakes`), and there `wake_task_of` reads its `callback`
//! argument, takes the task it is bound to and, if that task has a stack
//! in this recording, records `mtrace::wake` of it on this thread. The
//! analyzer then splits the task's pause into waiting (before the wake)
//! and scheduled (after it: waiting for the loop's thread). A timer
//! wakes its task when the loop runs its handle: a timer that expires
//! while another task holds the loop wakes it late, as a tokio timer
//! does on a current-thread runtime.
//!
//! # Conventions
//!
//! * A plain function is one call from its start to its return.
//! * A generator's (and, outside a task, a coroutine's) every resumption is
//!   a call of its own on the stack that resumes it, as cProfile counts it:
//!   start/resume enter a frame, yield/return/unwind leave it.
//! * On a task's stack, frames that suspend *to the event loop* stay open:
//!   a coroutine is one call from its start to its return however often it
//!   is resumed, and the time the task waits is `paused` of its frames. A
//!   yield is only known to go to the loop when every frame down to the one
//!   the loop resumed (the *anchor*) has yielded too; until then it is
//!   *pending*, and the next other event makes the pending frames ordinary
//!   exits (a generator or `async for` yielding to its caller inside the
//!   task). When the loop resumes a task, the frames above the anchor get
//!   their resume events one by one: those are not calls.
//! * Returns whose call was not recorded (frames open when recording began)
//!   are ignored, as cProfile ignores them.
//!
//! # Threads
//!
//! All per-thread state is thread-local, the tables are behind mutexes, and
//! a [`Context`] is used by one thread at a time (`busy`, set under the
//! table's lock): nothing here relies on the GIL, so the module can declare
//! itself free-threading safe.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::mem::{self, ManuallyDrop};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

use mtrace::{FunctionId, LogicalStack, StackId, StackKind, SwitchGuard};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::registry::{self, lock, Entry, PtrHasher, PtrMap};

/// Events are turned into trace events (a recording runs).
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Asyncio tasks run on stacks of their own.
pub(crate) static TASKS: AtomicBool = AtomicBool::new(true);
/// Incremented by every start: a thread's state from an older session is
/// cleared on its first event of the new one.
pub(crate) static SESSION: AtomicU64 = AtomicU64::new(0);
/// The recording was attached to a running program (`python -m mtrace
/// attach`): each thread's frames open at its first event are taken as
/// open since the recording began ([`adopt_open_frames`]), so that the
/// functions running then (a worker's loop, a server's main) are in it.
pub(crate) static OPEN_FRAMES: AtomicBool = AtomicBool::new(false);
/// The recording names functions on use (`Config::names_on_use`, a
/// profile's recording into memory): each thread names each function it
/// uses, once a session ([`Thread::entry`]), before its first event.
static NAMES_ON_USE: AtomicBool = AtomicBool::new(false);
/// The context-id callback (null: none), a strong reference.
pub(crate) static CALLBACK: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());

/// How a Python frame is entered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Enter {
    Start,
    Resume,
    Throw,
}

/// How a Python frame is left.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Leave {
    Return,
    Yield,
    Unwind,
}

/// What a [`Context`] stands for (part of its key in the table).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Kind {
    Task,
    Greenlet,
    Callback,
}

/// A logical stack: an asyncio task's, a greenlet's or a callback context's.
pub(crate) struct Context {
    key: (Kind, usize),
    name: String,
    stack: LogicalStack,
    /// Open frames while no thread runs it.
    shadow: Vec<u32>,
    /// A thread runs it (another thread asking for it stays where it is).
    busy: bool,
    session: u64,
    /// Task stacks: the position of the frame the event loop resumed.
    anchor: usize,
    /// Frames above the running one still to get their resume events.
    suspended: usize,
    /// Frames on top that yielded, to their caller or (if the anchor
    /// follows) to the loop.
    pending: usize,
    /// The position the loop's next resumption lands on.
    resume_at: usize,
}

impl Context {
    /// Takes the context into recording `session`: what an older recording
    /// left open on it (its frames, the task bookkeeping) does not belong
    /// to this one.
    fn begin_session(&mut self, session: u64) {
        if self.session != session {
            self.session = session;
            self.shadow.clear();
            self.anchor = 0;
            self.suspended = 0;
            self.pending = 0;
            self.resume_at = 0;
        }
    }
}

/// A context in the table, with what a thread that does not run it may
/// read (a wake names the stack of a task another thread may be running):
/// copies, written under the table's lock, of the stack's id and the
/// session it last ran in.
struct Slot {
    stack: StackId,
    session: u64,
    context: Box<Context>,
}

/// Keyed by the owner's address (and kind), hashed as the code-object caches are.
type Table = HashMap<(Kind, usize), Slot, BuildHasherDefault<PtrHasher>>;
static CONTEXTS: Mutex<Option<Table>> = Mutex::new(None);

/// A context a thread runs.
struct Running {
    context: *mut Context,
    guard: Option<SwitchGuard<'static>>,
}

/// One thread's state.
pub(crate) struct Thread {
    session: u64,
    /// Code objects' entries, each with the session it was last named in.
    codes: PtrMap<(Entry, u64)>,
    /// `codes`' entries seen lately (see [`Recent`]). Code objects are
    /// never freed once registered (`registry::code_entry` keeps them), so
    /// an address always means the same code.
    recent_codes: Recent<Entry>,
    /// `cfuncs`' ids seen lately (a `PyMethodDef` is the function's for
    /// as long as the map's key is).
    recent_cfuncs: Recent<u32>,
    /// C functions' ids (by `PyMethodDef`), each with the session it was
    /// last named in.
    cfuncs: PtrMap<(u32, u64)>,
    /// Open frames of the stack the thread runs.
    shadow: Vec<u32>,
    /// Level 1, and the thread's own frames while it runs.
    ctx: Option<Running>,
    below_ctx: Vec<u32>,
    /// The callback's last answer (0: the thread's own stack).
    callback_value: u64,
    /// Level 2: the tasks whose steps run, innermost last (a task started
    /// eagerly runs its first step inside another task's step), each with
    /// the frames of the stack below it.
    tasks: Vec<(Running, Vec<u32>)>,
    /// The thread's recorder, taken when the session began on the thread:
    /// an enter or exit through it skips mtrace's own thread-local look-up,
    /// a call into the dynamic linker in an extension module.
    recorder: Option<mtrace::ThreadRecorder>,
}

/// Slots of a [`Recent`] (a power of two).
const RECENT_SLOTS: usize = 256;

/// Values of a thread's map seen lately, each in the one slot its key (an
/// address) picks, in front of the map: a hit is a few instructions where
/// the map's look-up is some thirty, on every event. Only values already
/// named in the session go in, and a new session empties it (`clear`), so
/// a hit needs no naming. Key 0 (no object's address) marks an empty slot.
struct Recent<V: Copy> {
    slots: [(usize, V); RECENT_SLOTS],
    /// What an empty slot holds beside key 0.
    empty: V,
}

impl<V: Copy> Recent<V> {
    const fn new(empty: V) -> Recent<V> {
        Recent {
            slots: [(0, empty); RECENT_SLOTS],
            empty,
        }
    }

    /// The slot of `key`: the address multiplied, to spread
    /// allocation-aligned addresses, and its top bits.
    #[inline(always)]
    fn slot(key: usize) -> usize {
        const SHIFT: u32 = usize::BITS - RECENT_SLOTS.trailing_zeros();
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> SHIFT) & (RECENT_SLOTS - 1)
    }

    #[inline(always)]
    fn get(&self, key: usize) -> Option<V> {
        let (seen, value) = self.slots[Self::slot(key)];
        (seen == key).then_some(value)
    }

    fn put(&mut self, key: usize, value: V) {
        self.slots[Self::slot(key)] = (key, value);
    }

    fn clear(&mut self) {
        self.slots = [(0, self.empty); RECENT_SLOTS];
    }
}

thread_local! {
    // No destructor, so the hot path reaches it without a registration
    // check; `CLEANUP`, touched once per thread, frees its contents.
    static THREAD: UnsafeCell<ManuallyDrop<Thread>> =
        const { UnsafeCell::new(ManuallyDrop::new(Thread::empty())) };
    static CLEANUP: Cleanup = const { Cleanup };
}

/// Frees a thread's state when the thread exits.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = THREAD.try_with(|cell| {
            // SAFETY: the thread is exiting: no event callback runs on it any more.
            let t = unsafe { &mut *cell.get() };
            // Frames left open on a task or greenlet stay with its context.
            unsafe { leave_ctx(t, false) };
            drop(mem::replace(&mut **t, Thread::empty()));
        });
    }
}

/// Runs `f` on the calling thread's state (not at all while the thread is
/// being torn down, nor when nothing records).
///
/// # Safety
/// The thread must be attached to the interpreter; `f` must not re-enter.
#[inline(always)]
unsafe fn with_thread(f: impl FnOnce(&mut Thread)) {
    with_thread_starting(std::ptr::null_mut(), f)
}

/// [`with_thread`] for the start or resume of `starting`'s frame (the
/// current frame, which the event itself enters).
#[inline(always)]
unsafe fn with_thread_starting(starting: *mut ffi::PyObject, f: impl FnOnce(&mut Thread)) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let _ = THREAD.try_with(|cell| {
        // SAFETY: only this thread touches its state, and no caller holds a
        // reference across a call back into this module (event callbacks do
        // not nest: CPython does not report events while one runs).
        let t = &mut *cell.get();
        let session = SESSION.load(Ordering::Relaxed);
        if t.session != session {
            reset_thread(t, session);
            if OPEN_FRAMES.load(Ordering::Relaxed) {
                adopt_open_frames(t, starting);
            }
        }
        if !CALLBACK.load(Ordering::Relaxed).is_null() {
            follow_callback(t);
        } else if t.callback_value != 0 {
            leave_ctx(t, false);
            t.callback_value = 0;
        }
        f(t)
    });
}

impl Thread {
    const fn empty() -> Thread {
        Thread {
            session: 0,
            codes: HashMap::with_hasher(std::hash::BuildHasherDefault::new()),
            recent_codes: Recent::new(Entry::NONE),
            recent_cfuncs: Recent::new(registry::OWN),
            cfuncs: HashMap::with_hasher(std::hash::BuildHasherDefault::new()),
            shadow: Vec::new(),
            ctx: None,
            below_ctx: Vec::new(),
            callback_value: 0,
            tasks: Vec::new(),
            recorder: None,
        }
    }

    /// The entry of `code`, named in the session's recording if it names
    /// functions on use.
    #[inline(always)]
    unsafe fn entry(&mut self, code: *mut ffi::PyObject) -> Entry {
        match self.recent_codes.get(code as usize) {
            Some(e) => e,
            None => self.entry_not_recent(code),
        }
    }

    /// [`Thread::entry`] through the map, keeping the entry in `recent`.
    #[inline(never)]
    unsafe fn entry_not_recent(&mut self, code: *mut ffi::PyObject) -> Entry {
        let e = named_in_session(
            &mut self.codes,
            code as usize,
            self.session,
            |e| e.id,
            || registry::code_entry(code),
        );
        self.recent_codes.put(code as usize, e);
        e
    }

    /// The id of C function `def`, named in the session's recording if it
    /// names functions on use.
    #[inline(always)]
    unsafe fn cfunction(
        &mut self,
        def: usize,
        callable: *mut ffi::PyObject,
        self_arg: *mut ffi::PyObject,
    ) -> u32 {
        match self.recent_cfuncs.get(def) {
            Some(id) => id,
            None => self.cfunction_not_recent(def, callable, self_arg),
        }
    }

    /// [`Thread::cfunction`] through the map, keeping the id in `recent_cfuncs`.
    #[inline(never)]
    unsafe fn cfunction_not_recent(
        &mut self,
        def: usize,
        callable: *mut ffi::PyObject,
        self_arg: *mut ffi::PyObject,
    ) -> u32 {
        let id = named_in_session(
            &mut self.cfuncs,
            def,
            self.session,
            |&id| id,
            || registry::cfunction_id(def, callable, self_arg),
        );
        self.recent_cfuncs.put(def, id);
        id
    }

    #[inline(always)]
    fn push(&mut self, id: u32) {
        self.shadow.push(id);
        match self.recorder {
            Some(here) => here.enter(FunctionId(id)),
            None => mtrace::enter(FunctionId(id)),
        }
    }

    /// Leaves the top frame if it is `id` (else the call was not recorded).
    #[inline(always)]
    fn pop_if_top(&mut self, id: u32) -> bool {
        if self.shadow.last() == Some(&id) {
            self.shadow.pop();
            match self.recorder {
                Some(here) => here.exit(FunctionId(id)),
                None => mtrace::exit(FunctionId(id)),
            }
            true
        } else {
            false
        }
    }

    /// The running task's context, if the thread runs one.
    #[inline(always)]
    fn task_context(&mut self) -> Option<&'static mut Context> {
        // SAFETY: a busy context is only used by the thread running it, and
        // never removed from the table while busy.
        self.tasks.last().map(|(r, _)| unsafe { &mut *r.context })
    }

    /// The frames that yielded to their caller, not to the loop: they left.
    #[inline(always)]
    fn settle(&mut self, c: &mut Context) {
        c.suspended = 0;
        if c.pending != 0 {
            self.settle_pending(c);
        }
    }

    #[cold]
    fn settle_pending(&mut self, c: &mut Context) {
        for _ in 0..c.pending {
            if let Some(id) = self.shadow.pop() {
                mtrace::exit(FunctionId(id));
            }
        }
        c.pending = 0;
    }
}

/// A Python frame starts or resumes; `how` is asked only for generators
/// and coroutines, `callback` (the frame's local 1, a new reference or
/// null) only for the event loop's `call_soon` (see [`wake_task_of`]).
///
/// # Safety
/// Attached to the interpreter; `code` is a code object.
#[inline(always)]
pub(crate) unsafe fn py_enter(
    code: *mut ffi::PyObject,
    how: impl FnOnce(Entry) -> Enter,
    callback: impl FnOnce() -> *mut ffi::PyObject,
) {
    with_thread_starting(code, |t| {
        let e = t.entry(code);
        if e.id == registry::OWN {
            return;
        }
        if e.wakes && tasks_on() {
            let callback = callback();
            if callback.is_null() {
                registry::clear_error();
            } else {
                wake_task_of(callback);
                ffi::Py_DECREF(callback);
            }
        }
        if let Some(c) = t.task_context() {
            if e.resumable {
                let how = how(e);
                if how != Enter::Start && c.suspended > 0 && c.pending == 0 {
                    // The next frame of the await chain the loop resumed.
                    c.suspended -= 1;
                    return;
                }
                // Eager tasks exist from 3.12 on.
                if cfg!(Py_3_12) && how == Enter::Start && e.coroutine && tasks_on() {
                    t.settle(c);
                    if enter_other_task(t, c, e) {
                        return;
                    }
                }
            }
            t.settle(c);
            t.push(e.id);
        } else if e.coroutine && tasks_on() {
            let how = how(e);
            if !enter_task_for(t, e, how) {
                t.push(e.id);
            }
        } else {
            t.push(e.id);
        }
    })
}

/// A Python frame returns, yields or unwinds; `how` is asked only for
/// generators and coroutines.
///
/// # Safety
/// Attached to the interpreter; `code` is a code object.
#[inline(always)]
pub(crate) unsafe fn py_leave(code: *mut ffi::PyObject, how: impl FnOnce(Entry) -> Leave) {
    with_thread(|t| {
        let e = t.entry(code);
        if e.id == registry::OWN {
            return;
        }
        if let Some(c) = t.task_context() {
            let how = if e.resumable { how(e) } else { Leave::Return };
            leave_on_task(t, c, e, how);
        } else if !t.pop_if_top(e.id) && e.coroutine && tasks_on() {
            // 3.11 resumes a coroutine whose awaited coroutine returned after a
            // throw without reporting it: its return comes with the thread on
            // its own stack, the frame open on the task's.
            let how = how(e);
            if how != Leave::Yield && enter_task_for_leave(t, e) {
                if let Some(c) = t.task_context() {
                    leave_on_task(t, c, e, how);
                }
            }
        }
    })
}

unsafe fn leave_on_task(t: &mut Thread, c: &mut Context, e: Entry, how: Leave) {
    if how == Leave::Yield {
        c.suspended = 0;
        let len = t.shadow.len();
        if len > c.pending && t.shadow[len - 1 - c.pending] == e.id {
            c.pending += 1;
        }
        if len.saturating_sub(c.pending) <= c.anchor {
            // Every frame down to the anchor yielded: the task suspends to the loop.
            c.pending = 0;
            c.resume_at = c.anchor;
            leave_task(t, false);
        }
        return;
    }
    t.settle(c);
    t.pop_if_top(e.id);
    let len = t.shadow.len();
    if len <= c.anchor {
        c.resume_at = len.saturating_sub(1);
        leave_task(t, len == 0);
    }
}

/// A C function is called.
///
/// # Safety
/// Attached; `def` from [`registry::cfunction_def`] for these arguments.
#[inline(always)]
pub(crate) unsafe fn c_enter(
    def: usize,
    callable: *mut ffi::PyObject,
    self_arg: *mut ffi::PyObject,
) {
    with_thread(|t| {
        let id = t.cfunction(def, callable, self_arg);
        if id == registry::OWN {
            return;
        }
        if let Some(c) = t.task_context() {
            t.settle(c);
        }
        t.push(id);
    })
}

/// A C function returns or raises.
///
/// # Safety
/// Attached; `def` from [`registry::cfunction_def`].
#[inline(always)]
pub(crate) unsafe fn c_leave(def: usize) {
    with_thread(|t| {
        // The id its call found (the same as the map's: a def's id never
        // changes), or the map's when the call was in an older session or
        // its slot was taken since.
        let id = match t.recent_cfuncs.get(def) {
            Some(id) => id,
            None => match t.cfuncs.get(&def) {
                Some(&(id, _)) => id,
                None => return,
            },
        };
        if id == registry::OWN {
            return;
        }
        if let Some(c) = t.task_context() {
            t.settle(c);
        }
        t.pop_if_top(id);
    })
}

// ---------------------------------------------------------------- tasks

/// A coroutine starts or resumes on a thread that runs no task: if the
/// event loop runs a task's step, switch onto the task's stack. False if
/// no task runs (the caller records the event on the current stack).
unsafe fn enter_task_for(t: &mut Thread, e: Entry, how: Enter) -> bool {
    let task = current_task();
    if task.is_null() {
        return false;
    }
    enter_this_task(t, task, e, how)
}

/// A coroutine starts on a task's stack: if the current task is another
/// one (a task started eagerly, whose first step runs inside this step),
/// its stack goes on top until its first suspension. Costs a look-up of
/// the current task per coroutine start on a task's stack.
#[cold]
unsafe fn enter_other_task(t: &mut Thread, running: &Context, e: Entry) -> bool {
    let task = current_task();
    if task.is_null() {
        return false;
    }
    if running.key == (Kind::Task, task as usize) {
        ffi::Py_DECREF(task);
        return false;
    }
    enter_this_task(t, task, e, Enter::Start)
}

/// Switches onto `task`'s stack (a new reference, consumed) for a coroutine
/// event; false if another thread runs it.
unsafe fn enter_this_task(t: &mut Thread, task: *mut ffi::PyObject, e: Entry, how: Enter) -> bool {
    let context = acquire(Kind::Task, task as usize, how == Enter::Start, || {
        task_name(task)
    });
    ffi::Py_DECREF(task);
    let Some(context) = context else {
        return false;
    };
    enter_task(t, context);
    let c = &mut *context;
    let len = t.shadow.len();
    let at = match how {
        Enter::Start => None,
        Enter::Resume if t.shadow.get(c.resume_at) == Some(&e.id) => Some(c.resume_at),
        Enter::Resume | Enter::Throw => t.shadow.iter().rposition(|&f| f == e.id),
    };
    c.pending = 0;
    match at {
        Some(p) => {
            c.anchor = p;
            c.suspended = len - p - 1;
        }
        None => {
            c.anchor = len;
            c.suspended = 0;
            t.push(e.id);
        }
    }
    true
}

/// A coroutine returns on a thread that runs no task: switch onto the
/// current task's stack if the frame is open on top of it.
unsafe fn enter_task_for_leave(t: &mut Thread, e: Entry) -> bool {
    let task = current_task();
    if task.is_null() {
        return false;
    }
    let context = acquire(Kind::Task, task as usize, false, || task_name(task));
    ffi::Py_DECREF(task);
    let Some(context) = context else {
        return false;
    };
    if (*context).shadow.last() != Some(&e.id) {
        release(context, false);
        return false;
    }
    enter_task(t, context);
    let c = &mut *context;
    c.anchor = t.shadow.len() - 1;
    c.suspended = 0;
    c.pending = 0;
    true
}

unsafe fn enter_task(t: &mut Thread, context: *mut Context) {
    let c = &mut *context;
    let below = mem::replace(&mut t.shadow, mem::take(&mut c.shadow));
    // SAFETY: the context is boxed and stays in the table while busy; the
    // guard is dropped (in `leave_task`) before it is released.
    let stack: &'static mut LogicalStack = &mut *(&mut c.stack as *mut LogicalStack);
    let running = Running {
        context,
        guard: Some(stack.enter()),
    };
    t.tasks.push((running, below));
}

/// Leaves the innermost task's stack for the stack below it.
unsafe fn leave_task(t: &mut Thread, finished: bool) {
    if let Some((mut r, below)) = t.tasks.pop() {
        drop(r.guard.take());
        let c = &mut *r.context;
        c.shadow = mem::replace(&mut t.shadow, below);
        release(r.context, finished);
    }
}

/// What the current task is read from, once asyncio is imported (strong
/// references, kept for the process): asyncio's `_get_running_loop` and
/// `current_task`, and the dict of running tasks by loop that
/// `current_task` reads, where one exists.
struct Asyncio {
    get_loop: *mut ffi::PyObject,
    current: *mut ffi::PyObject,
    /// `_asyncio._current_tasks` when `current_task` is `_asyncio`'s
    /// (3.12 and 3.13, where it is `current_tasks.get(loop)`), or null
    /// (3.14 keeps the current task in the thread's state): looked up
    /// directly, a call into asyncio fewer per coroutine start or resume
    /// where a task may switch.
    current_tasks: *mut ffi::PyObject,
}

static ASYNCIO: AtomicPtr<Asyncio> = AtomicPtr::new(std::ptr::null_mut());

/// The task whose step runs on this thread (a new reference), or null.
unsafe fn current_task() -> *mut ffi::PyObject {
    let mut asyncio = ASYNCIO.load(Ordering::Acquire);
    if asyncio.is_null() {
        asyncio = find_asyncio();
        if asyncio.is_null() {
            return std::ptr::null_mut();
        }
    }
    let asyncio = &*asyncio;
    let lp = ffi::PyObject_CallNoArgs(asyncio.get_loop);
    if lp.is_null() {
        ffi::PyErr_Clear();
        return std::ptr::null_mut();
    }
    if lp == ffi::Py_None() {
        ffi::Py_DECREF(lp);
        return std::ptr::null_mut();
    }
    let task = if asyncio.current_tasks.is_null() {
        ffi::PyObject_CallOneArg(asyncio.current, lp)
    } else {
        // As `current_task(loop)` reads it (null: no task, or an error).
        let mut task = std::ptr::null_mut();
        ffi::compat::PyDict_GetItemRef(asyncio.current_tasks, lp, &mut task);
        task
    };
    ffi::Py_DECREF(lp);
    if task.is_null() {
        registry::clear_error();
        return std::ptr::null_mut();
    }
    if task == ffi::Py_None() {
        ffi::Py_DECREF(task);
        return std::ptr::null_mut();
    }
    task
}

#[cold]
unsafe fn find_asyncio() -> *mut Asyncio {
    let module = import_loaded(c"asyncio");
    if module.is_null() {
        return std::ptr::null_mut();
    }
    let get_loop = ffi::PyObject_GetAttrString(module, c"_get_running_loop".as_ptr());
    let current = ffi::PyObject_GetAttrString(module, c"current_task".as_ptr());
    ffi::Py_DECREF(module);
    if get_loop.is_null() || current.is_null() {
        ffi::PyErr_Clear();
        ffi::Py_XDECREF(get_loop);
        ffi::Py_XDECREF(current);
        return std::ptr::null_mut();
    }
    let asyncio = Box::into_raw(Box::new(Asyncio {
        get_loop,
        current,
        current_tasks: current_tasks_of(current),
    }));
    match ASYNCIO.compare_exchange(
        std::ptr::null_mut(),
        asyncio,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => asyncio,
        Err(theirs) => {
            // Another thread found them first; ours are leaked (twice at most).
            theirs
        }
    }
}

/// `_asyncio._current_tasks` (a new reference) if `current` is
/// `_asyncio.current_task` and that dict exists, else null.
#[cold]
unsafe fn current_tasks_of(current: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let module = import_loaded(c"_asyncio");
    if module.is_null() {
        return std::ptr::null_mut();
    }
    let theirs = ffi::PyObject_GetAttrString(module, c"current_task".as_ptr());
    let tasks = ffi::PyObject_GetAttrString(module, c"_current_tasks".as_ptr());
    ffi::Py_DECREF(module);
    registry::clear_error();
    let usable = theirs == current && !tasks.is_null() && ffi::PyDict_CheckExact(tasks) != 0;
    ffi::Py_XDECREF(theirs);
    if usable {
        tasks
    } else {
        ffi::Py_XDECREF(tasks);
        std::ptr::null_mut()
    }
}

/// The module `name` if it is imported already (a new reference), else
/// null (no error set).
unsafe fn import_loaded(name: &std::ffi::CStr) -> *mut ffi::PyObject {
    let name = ffi::PyUnicode_FromString(name.as_ptr());
    if name.is_null() {
        ffi::PyErr_Clear();
        return std::ptr::null_mut();
    }
    let module = ffi::PyImport_GetModule(name);
    ffi::Py_DECREF(name);
    if module.is_null() {
        ffi::PyErr_Clear();
    }
    module
}

/// `task.get_name()`, or "task"; asyncio's own names (`Task-N`, which say
/// nothing of the work) with the coroutine's qualified name after them, as
/// asyncio's repr of a task shows it: `Task-3 (fetch_page)`.
unsafe fn task_name(task: *mut ffi::PyObject) -> String {
    // Every new task is named once: through interned names and the
    // method-call protocol, not `PyObject_CallMethod`'s C strings (each
    // made into a str and hashed again per call, and a bound method made).
    let name = call_method0(task, &GET_NAME);
    with_text(name, |name| {
        let numbered = name
            .strip_prefix("Task-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !numbered {
            return name.to_owned();
        }
        let coro = call_method0(task, &GET_CORO);
        if coro.is_null() {
            ffi::PyErr_Clear();
            return name.to_owned();
        }
        let qualname = get_attr(coro, &QUALNAME);
        ffi::Py_DECREF(coro);
        // One string, made once: not `format!`, whose machinery costs
        // more than the copies.
        with_text(qualname, |coroutine| {
            let mut named = String::with_capacity(name.len() + coroutine.len() + 3);
            named.push_str(name);
            named.push_str(" (");
            named.push_str(coroutine);
            named.push(')');
            named
        })
        .unwrap_or_else(|| name.to_owned())
    })
    .unwrap_or_else(|| "task".to_owned())
}

/// An attribute's name as an interned str, made on its first use and kept
/// for the process.
struct Name {
    text: &'static std::ffi::CStr,
    str: AtomicPtr<ffi::PyObject>,
}

impl Name {
    const fn new(text: &'static std::ffi::CStr) -> Name {
        Name {
            text,
            str: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The str, or null (error set) if it could not be made.
    unsafe fn get(&self) -> *mut ffi::PyObject {
        let mut name = self.str.load(Ordering::Relaxed);
        if name.is_null() {
            name = ffi::PyUnicode_InternFromString(self.text.as_ptr());
            // Two threads may both make it (the loser's is kept alive too).
            if !name.is_null() {
                self.str.store(name, Ordering::Relaxed);
            }
        }
        name
    }
}

static GET_NAME: Name = Name::new(c"get_name");
static GET_CORO: Name = Name::new(c"get_coro");
static QUALNAME: Name = Name::new(c"__qualname__");
static SELF_NAME: Name = Name::new(c"__self__");

/// `obj.<name>()` (a new reference), or null (error set).
unsafe fn call_method0(obj: *mut ffi::PyObject, name: &Name) -> *mut ffi::PyObject {
    let name = name.get();
    if name.is_null() {
        return name;
    }
    ffi::PyObject_CallMethodNoArgs(obj, name)
}

/// `obj.<name>` (a new reference), or null (error set).
unsafe fn get_attr(obj: *mut ffi::PyObject, name: &Name) -> *mut ffi::PyObject {
    let name = name.get();
    if name.is_null() {
        return name;
    }
    ffi::PyObject_GetAttr(obj, name)
}

/// `f` of the str of a new reference (consumed; a str is its own str),
/// or None (error cleared).
unsafe fn with_text<R>(obj: *mut ffi::PyObject, f: impl FnOnce(&str) -> R) -> Option<R> {
    if obj.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    let s = if ffi::PyUnicode_CheckExact(obj) != 0 {
        obj
    } else {
        let s = ffi::PyObject_Str(obj);
        ffi::Py_DECREF(obj);
        if s.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        s
    };
    let mut size: ffi::Py_ssize_t = 0;
    let data = ffi::PyUnicode_AsUTF8AndSize(s, &mut size);
    let out = if data.is_null() {
        ffi::PyErr_Clear();
        None
    } else {
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size.max(0) as usize);
        Some(f(&String::from_utf8_lossy(bytes)))
    };
    ffi::Py_DECREF(s);
    out
}

// ---------------------------------------------------------------- wakes

/// A callback goes on the event loop's ready queue (`call_soon(callback,
/// ...)` starts, or, on 3.12+, it makes the queue's `Handle` of it): if
/// `callback` (borrowed) is a task's wakeup or step, the task is made runnable now, by
/// this thread: record a `wake` of its stack, so the analyzer splits the
/// task's pause into waiting (before this) and scheduled (woken, waiting
/// for the loop). A future completing schedules its waiting task's
/// `__wakeup` this way (the C `_asyncio` futures too: they call the loop's
/// `call_soon` method), a timer does through the future it completes, and
/// a task that yields (`asyncio.sleep(0)`) or is cancelled schedules its
/// own `__step`. Only tasks with a stack in this recording are woken; a
/// new task's first step, scheduled before it has one, is not a wake (it
/// has not paused). Costs a look-up in the table, under its lock, per
/// `call_soon` of a task.
///
/// # Safety
/// Attached to the interpreter; `callback` a live object.
#[cold]
#[inline(never)]
pub(crate) unsafe fn wake_task_of(callback: *mut ffi::PyObject) {
    if !ACTIVE.load(Ordering::Relaxed) || !tasks_on() {
        return;
    }
    let task = bound_self(callback);
    if task.is_null() {
        return;
    }
    let session = SESSION.load(Ordering::Relaxed);
    let stack = lock(&CONTEXTS)
        .as_ref()
        .and_then(|table| table.get(&(Kind::Task, task as usize)))
        .filter(|slot| slot.session == session)
        .map(|slot| slot.stack);
    ffi::Py_DECREF(task);
    if let Some(stack) = stack {
        mtrace::wake(stack);
    }
}

extern "C" {
    // CPython's bound methods (`Include/cpython/classobject.h`), which
    // pyo3-ffi does not declare.
    static mut PyMethod_Type: ffi::PyTypeObject;
    fn PyMethod_Self(method: *mut ffi::PyObject) -> *mut ffi::PyObject;
}

/// What a loop callback is bound to (a new reference), or null: a bound
/// method's `__self__` (a Python task's `__step` and `__wakeup`), a C
/// function's `self` (the C task's wakeup, on 3.11-3.13), or the
/// `__self__` of the C task's step wrapper (`TaskStepMethWrapper`). Other
/// callables (plain functions, `functools.partial`...) are nobody's: no
/// attribute look-up, which would raise and clear an `AttributeError`.
unsafe fn bound_self(callback: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let ty = ffi::Py_TYPE(callback);
    if ty == std::ptr::addr_of_mut!(ffi::PyFunction_Type) {
        return std::ptr::null_mut();
    }
    let owner = if ty == std::ptr::addr_of_mut!(PyMethod_Type) {
        PyMethod_Self(callback)
    } else if ffi::PyCFunction_Check(callback) != 0 {
        ffi::PyCFunction_GET_SELF(callback)
    } else if is_step_wrapper(ty) {
        let owner = get_attr(callback, &SELF_NAME);
        if owner.is_null() {
            ffi::PyErr_Clear();
        }
        return owner;
    } else {
        return std::ptr::null_mut();
    };
    if !owner.is_null() {
        ffi::Py_INCREF(owner);
    }
    owner
}

/// The C task's step wrapper type, once seen (a strong reference, kept
/// for the process, so the address stays its).
static STEP_WRAPPER: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

/// `ty` is `_asyncio`'s `TaskStepMethWrapper`: the type seen last, or one
/// of that name (its name read and compared only until one is seen).
#[inline(always)]
unsafe fn is_step_wrapper(ty: *mut ffi::PyTypeObject) -> bool {
    ty == STEP_WRAPPER.load(Ordering::Relaxed) || is_step_wrapper_by_name(ty)
}

#[cold]
unsafe fn is_step_wrapper_by_name(ty: *mut ffi::PyTypeObject) -> bool {
    let named = std::ffi::CStr::from_ptr((*ty).tp_name)
        .to_bytes()
        .ends_with(b"TaskStepMethWrapper");
    if named {
        ffi::Py_INCREF(ty.cast());
        // Another thread's (or an older one, in another interpreter's
        // `_asyncio`) stays alive, referenced.
        STEP_WRAPPER.store(ty, Ordering::Relaxed);
    }
    named
}

// ---------------------------------------------------------------- the table

/// Takes the context of `key` for this thread (creating it, named by
/// `name`, the first time). `fresh`: a coroutine starts on it, which may be
/// the first one of a new owner at the address of a dead one (a task
/// destroyed while pending): a context under another name is replaced. None
/// if another thread runs it.
unsafe fn acquire(
    kind: Kind,
    key: usize,
    fresh: bool,
    name: impl FnOnce() -> String,
) -> Option<*mut Context> {
    let session = SESSION.load(Ordering::Relaxed);
    {
        let mut table = lock(&CONTEXTS);
        if let Some(slot) = table
            .get_or_insert_with(Table::default)
            .get_mut(&(kind, key))
        {
            if slot.context.busy {
                return None;
            }
            if !fresh {
                return Some(slot.take(session));
            }
        }
    }
    // Named outside the lock: naming calls into Python.
    let name = name();
    let mut guard = lock(&CONTEXTS);
    let table = guard.get_or_insert_with(Table::default);
    if let Some(slot) = table.get_mut(&(kind, key)) {
        if slot.context.busy {
            return None;
        }
        if slot.context.name == name {
            return Some(slot.take(session));
        }
    }
    let mut c = Box::new(Context {
        key: (kind, key),
        stack: LogicalStack::of_kind(
            match kind {
                Kind::Task => StackKind::AsyncioTask,
                Kind::Greenlet => StackKind::Greenlet,
                Kind::Callback => StackKind::CallbackContext,
            },
            name.clone(),
        ),
        name,
        shadow: Vec::new(),
        busy: true,
        session,
        anchor: 0,
        suspended: 0,
        pending: 0,
        resume_at: 0,
    });
    let ptr = &mut *c as *mut Context;
    let slot = Slot {
        stack: c.stack.id(),
        session,
        context: c,
    };
    // Replacing a stale context ends it: no thread runs it (not busy). Its
    // stack's drop records the end if it ran in this recording (see
    // `release`), after the lock.
    let stale = table.insert((kind, key), slot);
    drop(guard);
    drop(stale);
    Some(ptr)
}

impl Slot {
    /// Marks the context busy for the calling thread, in `session`; under
    /// the table's lock.
    fn take(&mut self, session: u64) -> *mut Context {
        let c = &mut *self.context;
        c.busy = true;
        c.begin_session(session);
        self.session = session;
        c as *mut Context
    }
}

/// Gives a context back; `finished` removes it from the table and drops
/// it, which ends its stack: the `LogicalStack`'s drop records an `end` on
/// this thread, after the switch away the caller made, if the stack ran in
/// the running recording (a session is a recording: a context last run in
/// an older one ends silently). Dropped after the table's lock, so other
/// threads' task switches never wait for the event.
unsafe fn release(context: *mut Context, finished: bool) {
    let mut table = lock(&CONTEXTS);
    let key = (*context).key;
    if finished {
        let ended = table.as_mut().and_then(|t| t.remove(&key));
        drop(table);
        drop(ended);
    } else {
        (*context).busy = false;
    }
}

// ---------------------------------------------------------------- level 1

unsafe fn enter_ctx(t: &mut Thread, context: *mut Context) {
    leave_ctx(t, false);
    let c = &mut *context;
    t.below_ctx = mem::replace(&mut t.shadow, mem::take(&mut c.shadow));
    // SAFETY: as in `enter_task`.
    let stack: &'static mut LogicalStack = &mut *(&mut c.stack as *mut LogicalStack);
    t.ctx = Some(Running {
        context,
        guard: Some(stack.enter()),
    });
}

unsafe fn leave_ctx(t: &mut Thread, finished: bool) {
    while !t.tasks.is_empty() {
        leave_task(t, false);
    }
    if let Some(mut r) = t.ctx.take() {
        drop(r.guard.take());
        let c = &mut *r.context;
        c.shadow = mem::replace(&mut t.shadow, mem::take(&mut t.below_ctx));
        release(r.context, finished);
    }
}

/// Asks the context-id callback which context runs, and switches the thread
/// onto that context's stack when it changed.
#[cold]
unsafe fn follow_callback(t: &mut Thread) {
    let callback = CALLBACK.load(Ordering::Acquire);
    let result = ffi::PyObject_CallNoArgs(callback);
    let value = if result.is_null() {
        ffi::PyErr_Clear();
        0
    } else {
        let v = if result == ffi::Py_None() {
            0
        } else {
            ffi::PyLong_AsUnsignedLongLongMask(result)
        };
        ffi::Py_DECREF(result);
        registry::clear_error();
        v as u64
    };
    if value == t.callback_value {
        return;
    }
    leave_ctx(t, false);
    t.callback_value = 0;
    if value == 0 {
        return;
    }
    if let Some(context) = acquire(Kind::Callback, value as usize, false, || {
        format!("context {value}")
    }) {
        enter_ctx(t, context);
        t.callback_value = value;
    }
}

/// A greenlet switch (from greenlet's trace hook): the thread leaves the
/// `origin` greenlet's stack for `target`'s (its own stack when `target`
/// is a main greenlet). A dead `origin`'s stack is dropped.
///
/// # Safety
/// Attached; the pointers are only used as keys.
pub(crate) unsafe fn greenlet_switch(
    origin: usize,
    origin_dead: bool,
    target: usize,
    target_is_main: bool,
    name: impl FnOnce() -> String,
) {
    with_thread(|t| {
        let finished = origin_dead
            && t.ctx
                .as_ref()
                .is_some_and(|r| (*r.context).key == (Kind::Greenlet, origin));
        leave_ctx(t, finished);
        if origin_dead && !finished {
            let mut table = lock(&CONTEXTS);
            let dead = table.as_mut().and_then(|table| {
                if table
                    .get(&(Kind::Greenlet, origin))
                    .is_some_and(|s| !s.context.busy)
                {
                    table.remove(&(Kind::Greenlet, origin))
                } else {
                    None
                }
            });
            // Its stack ends (as in `release`), after the lock.
            drop(table);
            drop(dead);
        }
        if !target_is_main {
            if let Some(context) = acquire(Kind::Greenlet, target, false, name) {
                enter_ctx(t, context);
            }
        }
    })
}

// ---------------------------------------------------------------- sessions

/// The frames open on the calling thread when it first reports an event to
/// a recording attached to the running program, outermost first: taken as
/// open since the recording began (`mtrace::adopt_open_frames`: the
/// thread's first chunk is `continued`, so readers count their time from
/// the file's start and none of their calls, which began before it),
/// then the mark `mtrace:open-frames` (by this thread, at its first
/// event), which says in a report which threads had frames open.
/// `starting`: the code of the frame the event starts or resumes (the
/// current frame), which the event enters itself. See [`open_frame_ids`]
/// for which frames.
///
/// A thread whose frames the attach adopted already ([`adopt_other_threads`],
/// it was blocked then) continues that stream: the recorder makes these
/// its frames (the same ones, unless the thread ran between that walk and
/// this one), so it is told even when there are none.
///
/// A thread that already recorded in this recording (the one that
/// started it, if it recorded before its first event here) cannot have
/// frames put under its stream: its frames are entered now instead, as
/// calls that begin at this event.
///
/// # Safety
/// Attached to the interpreter.
#[cold]
#[inline(never)]
unsafe fn adopt_open_frames(t: &mut Thread, starting: *mut ffi::PyObject) {
    let frame = ffi::PyEval_GetFrame();
    if !frame.is_null() {
        ffi::Py_INCREF(frame.cast());
    }
    let open = open_frame_ids(frame, starting, |code| t.entry(code));
    let ids: Vec<FunctionId> = open.iter().map(|&id| FunctionId(id)).collect();
    if mtrace::adopt_open_frames(&ids).is_ok() {
        t.shadow.extend_from_slice(&open);
    } else {
        for &id in &open {
            t.push(id);
        }
    }
    if !open.is_empty() {
        // After the frames: the thread is bound then, and the mark has its id.
        mtrace::mark("mtrace:open-frames");
    }
}

/// The function ids of `frame` (a new reference, or null) and the frames
/// below it, outermost first: those an attach takes as open. `starting`:
/// the code of `frame` if the event being reported enters it (then it is
/// left out). The walk stops at a generator or coroutine: its frames and
/// those it called run on a task's stack, which the thread's first event
/// inside it finds. mtrace's own frames (the attaching code) are left out.
/// `entry` gives a code object's entry.
///
/// # Safety
/// Attached to the interpreter.
unsafe fn open_frame_ids(
    mut frame: *mut ffi::PyFrameObject,
    starting: *mut ffi::PyObject,
    mut entry: impl FnMut(*mut ffi::PyObject) -> Entry,
) -> Vec<u32> {
    // Innermost first, each a new reference.
    let mut codes: Vec<*mut ffi::PyObject> = Vec::new();
    while !frame.is_null() {
        codes.push(ffi::PyFrame_GetCode(frame).cast());
        let back = ffi::PyFrame_GetBack(frame);
        ffi::Py_DECREF(frame.cast());
        frame = back;
    }
    let mut open = Vec::new();
    for (depth, &code) in codes.iter().enumerate().rev() {
        if depth == 0 && code == starting {
            continue;
        }
        let e = entry(code);
        if e.resumable {
            break;
        }
        if e.id != registry::OWN {
            open.push(e.id);
        }
    }
    for code in codes {
        ffi::Py_DECREF(code);
    }
    open
}

/// For a recording attached to the running program (`python -m mtrace
/// attach`), just started on the calling thread: adopts the open frames
/// of every other thread `threading` knows, by its operating-system id
/// (`mtrace::adopt_thread_frames`), as [`adopt_open_frames`] takes a
/// thread's own at its first event. A thread blocked in C for the whole
/// recording (a lock's wait, a queue's `get`, a `sleep`) has no first
/// event: without this it would be missing from the trace; with it, its
/// frames are open from the file's start to its end. A thread that wakes
/// later continues the stream begun here; one that recorded first (the
/// events flow already: a thread running Python binds at once) is
/// refused by the recorder and keeps its own. Returns how many threads
/// were adopted.
///
/// Nothing of Python's runs here (no event of this thread's is
/// recorded): `sys._current_frames()` is called from C, the modules are
/// taken from `sys.modules`, and the threads' ids and names are plain
/// attributes. On the free-threaded build the other threads run meanwhile:
/// `sys._current_frames()` takes their frames with the world stopped, but
/// the walk down a running thread's frames is CPython's own, racing with
/// it as any tool's walk of `sys._current_frames()` does; such a thread
/// has usually bound already, and the recorder refuses its adoption.
pub(crate) fn adopt_other_threads(py: Python<'_>) -> usize {
    let threads = match other_threads(py) {
        Ok(threads) => threads,
        // No thread to adopt (a `threading` whose internals changed):
        // each adopts its own frames at its first event, as before.
        Err(_) => return 0,
    };
    let mut adopted = 0;
    for (os_tid, name, frame) in threads {
        // SAFETY: attached (`py`); the frame is a new reference, given to the walk.
        let open = unsafe {
            open_frame_ids(frame.into_ptr().cast(), std::ptr::null_mut(), |code| {
                let e = registry::code_entry(code);
                name_on_use(e.id);
                e
            })
        };
        if open.is_empty() {
            continue;
        }
        let ids: Vec<FunctionId> = open.iter().map(|&id| FunctionId(id)).collect();
        if mtrace::adopt_thread_frames(os_tid, &name, &ids).is_ok() {
            adopted += 1;
        }
    }
    adopted
}

/// Every thread but the calling one that `threading` knows and that runs
/// Python: its operating-system id, its name and its current frame.
fn other_threads(py: Python<'_>) -> PyResult<Vec<(u64, String, Bound<'_, PyAny>)>> {
    let (Some(sys), Some(threading)) = (loaded_module(py, "sys"), loaded_module(py, "threading"))
    else {
        return Ok(Vec::new());
    };
    let frames = sys.getattr("_current_frames")?.call0()?;
    let frames = frames.cast::<PyDict>()?;
    // A copy: other threads start and end meanwhile.
    let active = threading.getattr("_active")?.cast::<PyDict>()?.copy()?;
    // SAFETY: no precondition.
    let me = unsafe { ffi::PyThread_get_thread_ident() } as u64;
    let mut threads = Vec::new();
    for (ident, thread) in active.iter() {
        let Ok(ident) = ident.extract::<u64>() else {
            continue;
        };
        if ident == me {
            continue;
        }
        let Some(frame) = frames.get_item(ident)? else {
            continue;
        };
        let Some(os_tid) = thread
            .getattr("_native_id")
            .ok()
            .and_then(|id| id.extract::<u64>().ok())
        else {
            continue;
        };
        let name = thread
            .getattr("_name")
            .ok()
            .and_then(|name| name.extract::<String>().ok())
            .unwrap_or_default();
        threads.push((os_tid, name, frame));
    }
    Ok(threads)
}

/// The module `name` if it is imported (`sys.modules[name]`), without
/// importing anything.
fn loaded_module<'py>(py: Python<'py>, name: &str) -> Option<Bound<'py, PyAny>> {
    let name = PyString::new(py, name);
    // SAFETY: attached (`py`); a new reference, or null (with an error
    // set only if the lookup failed, cleared here).
    let module =
        unsafe { Bound::from_owned_ptr_or_opt(py, ffi::PyImport_GetModule(name.as_ptr())) };
    if module.is_none() {
        // SAFETY: attached (`py`).
        unsafe { registry::clear_error() };
    }
    module
}

/// The thread's first event of a session: forget the last session's frames.
#[cold]
unsafe fn reset_thread(t: &mut Thread, session: u64) {
    // Registers the destructor that frees the state at thread exit.
    let _ = CLEANUP.try_with(|_| ());
    leave_ctx(t, false);
    t.callback_value = 0;
    t.shadow.clear();
    t.below_ctx.clear();
    t.recent_codes.clear();
    t.recent_cfuncs.clear();
    t.session = session;
    t.recorder = Some(mtrace::ThreadRecorder::current());
}

/// Closes the frames still open on the calling thread (every level it
/// runs), as cProfile's `disable()` does, and takes it back to its own stack.
///
/// # Safety
/// Attached to the interpreter.
pub(crate) unsafe fn close_calling_thread() {
    let _ = THREAD.try_with(|cell| {
        let t = &mut *cell.get();
        if t.session != SESSION.load(Ordering::Relaxed) {
            return;
        }
        let close = |t: &mut Thread| {
            while let Some(id) = t.shadow.pop() {
                mtrace::exit(FunctionId(id));
            }
        };
        close(t);
        while !t.tasks.is_empty() {
            leave_task(t, false);
            close(t);
        }
        leave_ctx(t, false);
        close(t);
    });
}

/// Starts a session: asyncio tasks on stacks of their own or not; the
/// recording names functions on use or not.
pub(crate) fn start_session(tasks: bool, open_frames: bool, names_on_use: bool) {
    TASKS.store(tasks, Ordering::Relaxed);
    OPEN_FRAMES.store(open_frames, Ordering::Relaxed);
    NAMES_ON_USE.store(names_on_use, Ordering::Relaxed);
    SESSION.fetch_add(1, Ordering::Relaxed);
}

/// `map`'s value for `key` (`register` makes it the first time the thread
/// meets the key), its function (`id_of`) named in the recording of
/// `session` if it names functions on use and this thread has not named it
/// in that session yet.
fn named_in_session<V: Copy>(
    map: &mut PtrMap<(V, u64)>,
    key: usize,
    session: u64,
    id_of: impl Fn(&V) -> u32,
    register: impl FnOnce() -> V,
) -> V {
    match map.get_mut(&key) {
        Some((value, named)) => {
            name_once(named, session, id_of(value));
            *value
        }
        None => {
            let value = register();
            name_on_use(id_of(&value));
            map.insert(key, (value, session));
            value
        }
    }
}

/// Names function `id` if the cache entry stamped `named` was last named
/// in an older session than `session`, and stamps it.
#[inline(always)]
fn name_once(named: &mut u64, session: u64, id: u32) {
    if *named != session {
        *named = session;
        name_on_use(id);
    }
}

/// Names function `id` in the recording if it names functions on use
/// (once per thread and session: see [`Thread::entry`]).
#[cold]
#[inline(never)]
fn name_on_use(id: u32) {
    if id != registry::OWN && NAMES_ON_USE.load(Ordering::Relaxed) {
        mtrace::name_function(FunctionId(id));
    }
}

/// Sets the context-id callback (a new reference, or null), releasing the old one.
///
/// # Safety
/// Attached to the interpreter.
pub(crate) unsafe fn set_callback(callback: *mut ffi::PyObject) {
    let old = CALLBACK.swap(callback, Ordering::AcqRel);
    if !old.is_null() {
        // Another thread may still be calling it: keep it alive (leaked).
        let _ = old;
    }
}

/// Asyncio tasks get stacks of their own: asked for, and no context-id
/// callback set (a callback decides the stacks itself).
#[inline(always)]
fn tasks_on() -> bool {
    TASKS.load(Ordering::Relaxed) && CALLBACK.load(Ordering::Relaxed).is_null()
}

//! The four hooks, and where each task's stack waits between polls.
//!
//! # Where a task's stack is
//!
//! A table of entries, one per task id modulo its length, each with an
//! atomic word (the task's id and a state) beside the stack: the task
//! spawned while its entry is free keeps its stack there for life, and a
//! poll takes it with one compare-exchange and gives it back with
//! another, touching no lock and no line of another task's. A task whose
//! entry another task has at its spawn (more tasks alive than entries, or
//! a long-lived task on its id) goes to an overflow map, sharded, a
//! mutex each, as every task did before; a poll there locks a shard when
//! it takes the stack and when it gives it back.
//!
//! # One worker at a time on a task's stack
//!
//! tokio calls the after-poll hook after `task.run()` returns, and by then
//! the task may have been woken and handed to another worker, whose
//! before-poll hook can run first:
//!
//! ```text
//! worker 1: before poll -- run: poll returns, task idle -------- (preempted) -------- after poll
//! worker 2:                          task woken, stolen -- before poll -- run ...
//! ```
//!
//! The task's stack is then still switched in on worker 1. So each task's
//! stack has a state: idle between polls, held by a worker from its
//! before-poll hook to its after-poll hook (the entry's word, [`IDLE`]
//! and [`HELD`]; the map's [`Slot::Idle`] and [`Slot::Polled`]). A
//! before-poll hook that finds it held waits (spinning, then yielding its
//! core to the preempted worker) until the other worker's after-poll hook
//! gives it back, then switches onto it: the trace never has one stack on
//! two threads, and the task's time on each worker is the time between its
//! hooks there. The other worker is past the task's poll and only has its
//! hook left to run, so the wait is that hook's (nanoseconds, or the rest
//! of a time slice if it was preempted in between).
//!
//! Should the stack never come back (another after-poll hook installed
//! over this one, so none gives it back), waiting would hang the runtime.
//! So a worker that finds the stack held by itself (no worker polls a
//! task twice at once: its own earlier poll never gave it back) does not
//! wait, and any other waits at most [`GIVE_UP`]. Then the task loses its
//! stack for the rest of its life (its map entry goes; its table entry
//! is [`ORPHAN`], freed by the holder if it ever gives it back: at most
//! one wait per task), its polls run on the worker's own stack, as a task
//! spawned while nothing recorded does, and a mark in the trace says so
//! ([`LOST_MARK`]).

use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash as _, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mtrace::{Detached, LogicalStack, StackKind};
use tokio::runtime::{Builder, TaskMeta};
use tokio::task::Id;

/// Shards of the overflow map: workers polling different tasks rarely
/// share a lock.
const SHARDS: usize = 16;

/// Entries of the table (a power of two): a task whose id's entry is free
/// at its spawn keeps its stack there, any other in the overflow map.
/// tokio numbers tasks from one counter, so the tasks alive at once
/// rarely share an entry unless there are more of them than entries.
const ENTRIES: usize = 4096;

/// How long a before-poll hook waits for the stack of its task to come
/// back from the worker that polled it last, before it polls without it.
/// Far longer than a preempted thread waits for a core; short enough that
/// a misconfigured runtime is slow rather than stuck.
const GIVE_UP: Duration = Duration::from_secs(1);

/// The mark recorded when a task's stack did not come back (see the
/// [module docs](self)).
pub(crate) const LOST_MARK: &str =
    "mtrace-tokio: a task's stack was not given back after a poll (another on_after_task_poll hook?); the task runs on the workers' own stacks from here";

/// Spins before the wait yields the core: the other worker's after-poll
/// hook, when it runs, is over in well under a microsecond.
const SPINS: u32 = 64;

/// Reads a task id's number (a counter tokio hands out, which `Id` shows
/// only to a hasher) and hashes it: no adversary picks it, so one
/// multiply, where SipHash took a quarter of the hooks' time.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0 << 8 | b as u64;
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The number tokio gave task `id` (its counter's value).
fn raw(id: Id) -> u64 {
    let mut number = IdHasher::default();
    id.hash(&mut number);
    number.0
}

/// An entry's state, in the low bits of its word (see [`Entry::word`]).
const IDLE: u64 = 1;
/// See [`Entry::word`].
const HELD: u64 = 2;
/// See [`Entry::word`].
const ORPHAN: u64 = 3;

/// Task `task` in state `state`, as an entry's word: tokio's ids come
/// from a 64-bit counter that would take centuries to reach the top two
/// bits this shifts out.
fn word(task: u64, state: u64) -> u64 {
    task << 2 | state
}

/// A task's stack in the table.
#[repr(align(64))] // a cache line of its own: its neighbours' tasks run on other workers
struct Entry {
    /// `0`: free. Else the task's id ([`word`]) and who may touch `stack`:
    /// * [`IDLE`]: between polls; whoever moves the word from `IDLE` to
    ///   `HELD` (a before-poll hook, or the terminate hook) holds it;
    /// * [`HELD`]: the thread that moved the word there (from `IDLE`, or
    ///   from free at the spawn) holds it; another thread may only move
    ///   it on to `ORPHAN`;
    /// * [`ORPHAN`]: still its holder's, which was polling the task when
    ///   the task terminated elsewhere or a waiter gave up on it: at its
    ///   after-poll hook, it ends the stack and frees the entry.
    word: AtomicU64,
    /// `Some` from the spawn to the entry's release.
    stack: UnsafeCell<Option<LogicalStack>>,
}

// SAFETY: `stack` is read or written only by the thread that holds the
// entry (see `word`), and the word's moves that hand it over are
// Release (giving it back, freeing it) and Acquire (taking it): no two
// threads touch it at once, and each sees the last holder's writes. A
// `LogicalStack` is `Send`.
unsafe impl Sync for Entry {}

impl Default for Entry {
    fn default() -> Entry {
        Entry {
            word: AtomicU64::new(0),
            stack: UnsafeCell::new(None),
        }
    }
}

impl Entry {
    /// What the entry holds.
    ///
    /// # Safety
    ///
    /// This thread holds the entry (see `word`), and keeps the reference
    /// no longer than its hold.
    #[allow(clippy::mut_from_ref)] // the hold makes the reference exclusive
    unsafe fn cell(&self) -> &mut Option<LogicalStack> {
        // SAFETY: no other thread touches `stack` while this one holds
        // the entry (see `word`, and the caller's promise).
        unsafe { &mut *self.stack.get() }
    }

    /// Takes the stack out and frees the entry; the stack, dropped by the
    /// caller, records its `end`.
    ///
    /// # Safety
    ///
    /// This thread holds the entry (it lets go of it here).
    unsafe fn free(&self) -> Option<LogicalStack> {
        // SAFETY: the caller's promise; the reference ends here, before
        // the store that lets go.
        let stack = unsafe { self.cell() }.take();
        self.word.store(0, Ordering::Release);
        stack
    }
}

/// Each task's entry: the one its id picks (`id % ENTRIES`). Made at the
/// first spawn while recording.
static TABLE: OnceLock<Box<[Entry]>> = OnceLock::new();

/// Task `task`'s entry, if there is a table (the task's stack may be in
/// the overflow map, or nowhere: the word says).
fn entry(task: u64) -> Option<&'static Entry> {
    TABLE.get().map(|t| &t[task as usize & (ENTRIES - 1)])
}

/// A task's stack, as the overflow map holds it.
enum Slot {
    /// Between polls: here for the next worker to take.
    Idle(LogicalStack),
    /// A worker took it in its before-poll hook and has not given it back
    /// in its after-poll hook yet: the worker's [`this_thread`].
    Polled(usize),
}

type Hash = BuildHasherDefault<IdHasher>;
type Shard = HashMap<Id, Slot, Hash>;

/// The stacks of the tasks whose entry in [`TABLE`] another task had at
/// their spawn, from their spawn to their termination.
struct Tasks {
    shards: Vec<Mutex<Shard>>,
    /// Tasks in the map: none, and a before-poll hook that does not find
    /// its task in the table locks nothing.
    len: AtomicUsize,
}

static TASKS: LazyLock<Tasks> = LazyLock::new(|| Tasks {
    shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
    len: AtomicUsize::new(0),
});

impl Tasks {
    fn shard(&self, id: Id) -> std::sync::MutexGuard<'_, Shard> {
        // The high bits: the map's own buckets take the low ones.
        let at = (Hash::default().hash_one(id) >> 60) as usize % SHARDS;
        self.shards[at].lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, task: Id, stack: LogicalStack) {
        // Counted before it is there: a reader that sees it counts it.
        self.len.fetch_add(1, Ordering::Relaxed);
        self.shard(task).insert(task, Slot::Idle(stack));
    }

    /// Takes task `task`'s entry out of the map.
    fn remove(&self, task: Id) -> Option<Slot> {
        let slot = self.shard(task).remove(&task);
        if slot.is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        slot
    }

    /// Takes task `task`'s stack for a poll, waiting while another worker
    /// still holds it (see the [module docs](self)). `None`: the task has
    /// no stack here, or it did not come back in time.
    fn take(&self, task: Id) -> Option<LogicalStack> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let me = this_thread();
        let mut wait = Wait::default();
        loop {
            {
                let mut shard = self.shard(task);
                let slot = shard.get_mut(&task)?;
                match slot {
                    Slot::Idle(_) => {
                        if let Slot::Idle(stack) = std::mem::replace(slot, Slot::Polled(me)) {
                            return Some(stack);
                        }
                    }
                    // Taken by this thread: never given back.
                    Slot::Polled(by) if *by == me => {
                        drop(shard);
                        self.remove(task);
                        mtrace::mark(LOST_MARK);
                        return None;
                    }
                    Slot::Polled(_) => {}
                }
            } // unlocked: the other worker's hook needs the shard
            if wait.gave_up() {
                self.remove(task);
                mtrace::mark(LOST_MARK);
                return None;
            }
        }
    }

    /// Gives task `task`'s stack back after a poll; drops it (its `end`)
    /// if the task terminated meanwhile on another thread (shut down).
    fn give_back(&self, task: Id, stack: LogicalStack) {
        let left = {
            let mut shard = self.shard(task);
            match shard.get_mut(&task) {
                Some(slot) => {
                    *slot = Slot::Idle(stack);
                    None
                }
                None => Some(stack),
            }
        };
        drop(left); // outside the lock: its `end` is an event
    }
}

/// A before-poll hook's wait for the stack of its task.
#[derive(Default)]
struct Wait {
    waited: u32,
    since: Option<Instant>,
}

impl Wait {
    /// Waits a little (see [`SPINS`]); true once it has waited
    /// [`GIVE_UP`].
    fn gave_up(&mut self) -> bool {
        self.waited += 1;
        if self.waited < SPINS {
            std::hint::spin_loop();
            return false;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() > GIVE_UP {
            return true;
        }
        // The other worker may be preempted, its core taken by this
        // one: give the core back.
        std::thread::yield_now();
        false
    }
}

/// Takes task `task`'s stack for a poll (see the [module docs](self)).
fn take(id: Id, task: u64) -> Option<Held> {
    if let Some(e) = entry(task) {
        let idle = word(task, IDLE);
        match e
            .word
            .compare_exchange(idle, word(task, HELD), Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => return Some(Held::Entry(e)),
            Err(w) if w >> 2 == task => return take_waiting(e, id, task),
            // Free, or another task's: this task's stack is in the map,
            // or it has none.
            Err(_) => {}
        }
    }
    TASKS.take(id).map(Held::Map)
}

/// [`take`] when the entry was not idle: another worker (or this one,
/// if no after-poll hook gave it back) holds it.
fn take_waiting(e: &'static Entry, id: Id, task: u64) -> Option<Held> {
    let (idle, held) = (word(task, IDLE), word(task, HELD));
    let polled_here = polled_here(id);
    let mut wait = Wait::default();
    loop {
        let w = e.word.load(Ordering::Relaxed);
        if w == idle {
            if e.word
                .compare_exchange(idle, held, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Some(Held::Entry(e));
            }
            continue;
        }
        // Orphaned (it did not come back before), or freed since: the
        // task has lost its stack.
        if w != held {
            return None;
        }
        // Held by this thread (no worker polls a task twice at once:
        // its own earlier poll never gave it back), or for too long.
        if polled_here || wait.gave_up() {
            if e.word
                .compare_exchange(
                    held,
                    word(task, ORPHAN),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                continue; // given back meanwhile
            }
            mtrace::mark(LOST_MARK);
            return None;
        }
    }
}

/// Where the stack of a poll in progress is.
enum Held {
    /// In the table's entry, which this thread holds.
    Entry(&'static Entry),
    /// Out of the overflow map, until its after-poll hook gives it back.
    Map(LogicalStack),
}

/// A poll in progress on this thread, in [`POLLING`].
struct Polling {
    task: Id,
    held: Held,
    switched: Option<Detached>,
    /// The task terminated inside the poll: end its stack after it.
    terminated: bool,
}

/// A poll in progress on this thread whose stack is in the table, in
/// [`FAST`]: nothing in it needs dropping, so the thread-local that
/// holds it needs no destructor and its every use is a plain load or
/// store (where [`POLLING`]'s vector took most of the hooks' own
/// instructions).
struct Fast {
    task: Id,
    entry: &'static Entry,
    switched: Option<Detached>,
    terminated: bool,
}

thread_local! {
    /// The outermost poll in progress on this thread whose stack is in
    /// the table: most polls are that.
    static FAST: Cell<Option<Fast>> = const { Cell::new(None) };
    /// The other polls in progress on this thread (in the map, or inside
    /// the poll in [`FAST`]: a poll can run another runtime's task inside
    /// it), innermost last.
    static POLLING: RefCell<Vec<Polling>> = const { RefCell::new(Vec::new()) };
}

/// Whether this thread has a poll of task `task` in progress: at a
/// before-poll hook, one whose after-poll hook never ran.
fn polled_here(task: Id) -> bool {
    let fast = FAST.with(|f| {
        let x = f.take();
        let here = x.as_ref().is_some_and(|x| x.task == task);
        f.set(x);
        here
    });
    fast || POLLING.with(|p| p.borrow().iter().any(|x| x.task == task))
}

/// This thread, as a number no other live thread has: the address of its
/// [`POLLING`] (cheaper than `std::thread::current().id()`, an `Arc`).
fn this_thread() -> usize {
    POLLING.with(|p| p as *const RefCell<Vec<Polling>> as usize)
}

pub(crate) fn install(builder: &mut Builder) {
    builder
        .on_task_spawn(spawn)
        .on_before_task_poll(before_poll)
        .on_after_task_poll(after_poll)
        .on_task_terminate(terminate);
}

fn spawn(meta: &TaskMeta<'_>) {
    if !mtrace::is_recording() {
        return;
    }
    let at = meta.spawned_at();
    let name = format!("{}:{} task-{}", at.file(), at.line(), meta.id());
    let stack = LogicalStack::of_kind(StackKind::TokioTask, name);
    let task = raw(meta.id());
    let table = TABLE.get_or_init(|| (0..ENTRIES).map(|_| Entry::default()).collect());
    let e = &table[task as usize & (ENTRIES - 1)];
    if e.word
        .compare_exchange(0, word(task, HELD), Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        // SAFETY: this thread holds the entry (the exchange above). A
        // free entry holds no stack: nothing is dropped here.
        unsafe { *e.cell() = Some(stack) };
        e.word.store(word(task, IDLE), Ordering::Release);
    } else {
        TASKS.insert(meta.id(), stack);
    }
}

fn before_poll(meta: &TaskMeta<'_>) {
    let id = meta.id();
    let (held, switched) = match take(id, raw(id)) {
        None => return,
        Some(Held::Entry(e)) => {
            // SAFETY: this thread holds the entry (`take`); the reference
            // ends with the switch.
            let switched = unsafe { e.cell() }
                .as_mut()
                .and_then(LogicalStack::enter_detached);
            let fast = Fast {
                task: id,
                entry: e,
                switched,
                terminated: false,
            };
            // Free, unless a poll this one runs inside has it.
            let Some(fast) = FAST.with(|f| match f.take() {
                None => {
                    f.set(Some(fast));
                    None
                }
                outer => {
                    f.set(outer);
                    Some(fast)
                }
            }) else {
                return;
            };
            (Held::Entry(fast.entry), fast.switched)
        }
        Some(Held::Map(mut stack)) => {
            let switched = stack.enter_detached();
            (Held::Map(stack), switched)
        }
    };
    POLLING.with(|p| {
        p.borrow_mut().push(Polling {
            task: id,
            held,
            switched,
            terminated: false,
        })
    });
}

fn after_poll(meta: &TaskMeta<'_>) {
    let id = meta.id();
    let fast = FAST.with(|f| match f.take() {
        Some(x) if x.task == id => Some(x),
        other => {
            f.set(other);
            None
        }
    });
    if let Some(x) = fast {
        give_back(x.entry, id, x.switched, x.terminated);
        return;
    }
    let Some(poll) = POLLING.with(|p| {
        let mut polling = p.borrow_mut();
        let at = polling.iter().rposition(|x| x.task == id)?;
        Some(polling.remove(at))
    }) else {
        return;
    };
    match poll.held {
        Held::Entry(e) => give_back(e, id, poll.switched, poll.terminated),
        Held::Map(mut stack) => {
            if let Some(switched) = poll.switched {
                stack.leave(switched);
            }
            if poll.terminated {
                // Dropped here, after the switch back: its `end`.
                TASKS.remove(id);
                drop(stack);
            } else {
                // The switch back is recorded before the stack is back in
                // the map, where the next worker to poll the task waits
                // for it.
                TASKS.give_back(id, stack);
            }
        }
    }
}

/// Switches back from the stack in entry `e`, which this thread holds
/// for a poll of task `id`, and lets go of the entry: gives it back, or,
/// if the task terminated (here, or elsewhere: orphaned) or a waiter gave
/// up on it, frees it and drops the stack, after the switch back (its
/// `end`).
fn give_back(e: &'static Entry, id: Id, switched: Option<Detached>, terminated: bool) {
    if let Some(switched) = switched {
        // SAFETY: this thread holds the entry until the exchange or free
        // below; the reference ends with the switch.
        if let Some(stack) = unsafe { e.cell() }.as_mut() {
            stack.leave(switched);
        }
    }
    let task = raw(id);
    // The switch back is recorded before the stack is given back, where
    // the next worker to poll the task waits for it.
    let given_back = !terminated
        && e.word
            .compare_exchange(
                word(task, HELD),
                word(task, IDLE),
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok();
    if !given_back {
        // SAFETY: this thread still holds the entry: the exchange failed
        // (orphaned: still its holder's), or was not tried.
        drop(unsafe { e.free() });
    }
}

fn terminate(meta: &TaskMeta<'_>) {
    let id = meta.id();
    // Inside its own poll (finished, or panicked): end after the poll.
    let fast = FAST.with(|f| {
        let mut x = f.take();
        let here = match &mut x {
            Some(x) if x.task == id => {
                x.terminated = true;
                true
            }
            _ => false,
        };
        f.set(x);
        here
    });
    let polled_here = fast
        || POLLING.with(|p| {
            let mut polling = p.borrow_mut();
            match polling.iter_mut().rev().find(|x| x.task == id) {
                Some(poll) => {
                    poll.terminated = true;
                    true
                }
                None => false,
            }
        });
    if polled_here {
        return;
    }
    // Cancelled while switched out, or shut down: ends now, or, if a
    // worker still holds it (in its after-poll hook), when that worker
    // gives it back.
    let task = raw(id);
    if let Some(e) = entry(task) {
        loop {
            let w = e.word.load(Ordering::Relaxed);
            if w >> 2 != task {
                break; // not in the table
            }
            let next = match w & 3 {
                IDLE => HELD,
                HELD => ORPHAN,
                _ => return, // its holder frees it
            };
            if e.word
                .compare_exchange(w, word(task, next), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                if next == HELD {
                    // SAFETY: this thread holds the entry now (the
                    // exchange from idle).
                    drop(unsafe { e.free() });
                }
                return;
            }
        }
    }
    drop(TASKS.remove(id));
}

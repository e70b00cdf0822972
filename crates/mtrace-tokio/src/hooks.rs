//! The four hooks and the map of tasks' stacks.
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
//! The task's stack is then still switched in on worker 1. So the map
//! keeps an entry per task with its state: [`Slot::Idle`] holds the stack
//! between polls, [`Slot::Polled`] marks it taken by a worker. A
//! before-poll hook that finds it taken waits (spinning, then yielding its
//! core to the preempted worker) until the other worker's after-poll hook
//! gives it back, then switches onto it: the trace never has one stack on
//! two threads, and the task's time on each worker is the time between its
//! hooks there. The other worker is past the task's poll and only has its
//! hook left to run, so the wait is that hook's (nanoseconds, or the rest
//! of a time slice if it was preempted in between).
//!
//! Should the stack never come back (another after-poll hook installed
//! over this one, so none gives it back), waiting would hang the runtime.
//! So a worker that finds the stack taken by itself (no worker polls a
//! task twice at once: its own earlier poll never gave it back) does not
//! wait, and any other waits at most [`GIVE_UP`]. Then the task loses its
//! stack for the rest of its life (its entry goes: at most one wait per
//! task), its polls run on the worker's own stack, as a task spawned while
//! nothing recorded does, and a mark in the trace says so
//! ([`LOST_MARK`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use mtrace::{Detached, LogicalStack, StackKind};
use tokio::runtime::{Builder, TaskMeta};
use tokio::task::Id;

/// Shards of the map: workers polling different tasks rarely share a lock.
const SHARDS: usize = 16;

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

/// Hashes a task id (a counter tokio hands out, so no adversary picks
/// it): one multiply, where SipHash took a quarter of the hooks' time.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A task's stack, as the map holds it.
enum Slot {
    /// Between polls: here for the next worker to take.
    Idle(LogicalStack),
    /// A worker took it in its before-poll hook and has not given it back
    /// in its after-poll hook yet: the worker's [`this_thread`].
    Polled(usize),
}

type Hash = BuildHasherDefault<IdHasher>;
type Shard = HashMap<Id, Slot, Hash>;

/// Each task's stack, from its spawn to its termination.
struct Tasks {
    shards: Vec<Mutex<Shard>>,
}

static TASKS: LazyLock<Tasks> = LazyLock::new(|| Tasks {
    shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
});

impl Tasks {
    fn shard(&self, id: Id) -> std::sync::MutexGuard<'_, Shard> {
        // The high bits: the map's own buckets take the low ones.
        let at = (Hash::default().hash_one(id) >> 60) as usize % SHARDS;
        self.shards[at].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes task `task`'s stack for a poll, waiting while another worker
    /// still holds it (see the [module docs](self)). `None`: the task has
    /// no stack (spawned while nothing recorded), or it did not come back
    /// in time.
    fn take(&self, task: Id) -> Option<LogicalStack> {
        let me = this_thread();
        let mut waited = 0u32;
        let mut since: Option<Instant> = None;
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
                        shard.remove(&task);
                        drop(shard);
                        mtrace::mark(LOST_MARK);
                        return None;
                    }
                    Slot::Polled(_) => {}
                }
            } // unlocked: the other worker's hook needs the shard
            waited += 1;
            if waited < SPINS {
                std::hint::spin_loop();
                continue;
            }
            let since = *since.get_or_insert_with(Instant::now);
            if since.elapsed() > GIVE_UP {
                self.shard(task).remove(&task);
                mtrace::mark(LOST_MARK);
                return None;
            }
            // The other worker may be preempted, its core taken by this
            // one: give the core back.
            std::thread::yield_now();
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

    /// Task `task` terminated: its entry goes, and its stack with it if
    /// no worker holds it (else that worker's after-poll hook drops it).
    fn remove(&self, task: Id) {
        let slot = self.shard(task).remove(&task);
        drop(slot);
    }
}

/// A poll in progress on this thread.
struct Polling {
    task: Id,
    stack: LogicalStack,
    switched: Option<Detached>,
    /// The task terminated inside the poll: end its stack after it.
    terminated: bool,
}

thread_local! {
    /// Polls in progress on this thread, innermost last (a poll can run
    /// another runtime's task inside it).
    static POLLING: RefCell<Vec<Polling>> = const { RefCell::new(Vec::new()) };
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
    TASKS.shard(meta.id()).insert(
        meta.id(),
        Slot::Idle(LogicalStack::of_kind(StackKind::TokioTask, name)),
    );
}

fn before_poll(meta: &TaskMeta<'_>) {
    let task = meta.id();
    let Some(mut stack) = TASKS.take(task) else {
        return;
    };
    let switched = stack.enter_detached();
    POLLING.with(|p| {
        p.borrow_mut().push(Polling {
            task,
            stack,
            switched,
            terminated: false,
        })
    });
}

fn after_poll(meta: &TaskMeta<'_>) {
    let task = meta.id();
    let Some(mut poll) = POLLING.with(|p| {
        let mut polling = p.borrow_mut();
        let at = polling.iter().rposition(|x| x.task == task)?;
        Some(polling.remove(at))
    }) else {
        return;
    };
    if let Some(switched) = poll.switched.take() {
        poll.stack.leave(switched);
    }
    if poll.terminated {
        // Dropped here, after the switch back: its `end`.
        TASKS.remove(task);
        drop(poll.stack);
    } else {
        // The switch back is recorded before the stack is back in the
        // map, where the next worker to poll the task waits for it.
        TASKS.give_back(task, poll.stack);
    }
}

fn terminate(meta: &TaskMeta<'_>) {
    let task = meta.id();
    // Inside its own poll (finished, or panicked): end after the poll.
    let polled_here = POLLING.with(|p| {
        let mut polling = p.borrow_mut();
        match polling.iter_mut().rev().find(|x| x.task == task) {
            Some(poll) => {
                poll.terminated = true;
                true
            }
            None => false,
        }
    });
    if !polled_here {
        // Cancelled while switched out, or shut down: ends now (or, if a
        // worker is still in its after-poll hook, when it gives it back).
        TASKS.remove(task);
    }
}

//! The four hooks and the map of tasks' stacks between polls.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::{LazyLock, Mutex};

use mtrace::{Detached, LogicalStack};
use tokio::runtime::{Builder, TaskMeta};
use tokio::task::Id;

/// Shards of the map: workers polling different tasks rarely share a lock.
const SHARDS: usize = 16;

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

type Hash = BuildHasherDefault<IdHasher>;
type Shard = HashMap<Id, LogicalStack, Hash>;

/// Each task's stack while no worker polls it.
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
    TASKS
        .shard(meta.id())
        .insert(meta.id(), LogicalStack::new(name));
}

fn before_poll(meta: &TaskMeta<'_>) {
    let task = meta.id();
    let Some(mut stack) = TASKS.shard(task).remove(&task) else {
        return; // spawned while nothing recorded
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
    if !poll.terminated {
        TASKS.shard(task).insert(task, poll.stack);
    }
    // Terminated: dropped here, after the switch back: its `end`.
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
        // Cancelled while switched out, or dropped at shutdown: ends now.
        let stack = TASKS.shard(task).remove(&task);
        drop(stack);
    }
}

//! Parked workers: a worker thread waiting for work is switched onto an
//! idle stack of its own (`StackKind::Idle`) from `on_thread_park` to
//! `on_thread_unpark`, so the trace says the thread was idle then: its own
//! stack is paused, not running, in the tables and the timeline. These
//! hooks are tokio's stable ones: they work without `--cfg tokio_unstable`.

use std::cell::RefCell;

use mtrace::{Detached, LogicalStack, StackKind};
use tokio::runtime::Builder;

/// A thread's idle stack (made at its first park while recording) and,
/// while the thread is parked, the switch onto it.
struct Idle {
    stack: LogicalStack,
    parked: Option<Detached>,
}

impl Drop for Idle {
    /// A thread that ends parked goes back to its own stack first: a
    /// stack ends after its last switch away.
    fn drop(&mut self) {
        if let Some(parked) = self.parked.take() {
            self.stack.leave(parked);
        }
    }
}

thread_local! {
    static IDLE: RefCell<Option<Idle>> = const { RefCell::new(None) };
}

/// Installs the park and unpark hooks (replacing any set before: tokio
/// keeps one of each).
pub(crate) fn install(builder: &mut Builder) {
    builder.on_thread_park(park).on_thread_unpark(unpark);
}

fn park() {
    if !mtrace::is_recording() {
        return;
    }
    // `try_with`: a thread being torn down has no thread-locals left.
    let _ = IDLE.try_with(|idle| {
        let mut idle = idle.borrow_mut();
        let idle = idle.get_or_insert_with(|| Idle {
            stack: LogicalStack::of_kind(StackKind::Idle, idle_name()),
            parked: None,
        });
        if idle.parked.is_none() {
            idle.parked = idle.stack.enter_detached();
        }
    });
}

fn unpark() {
    let _ = IDLE.try_with(|idle| {
        if let Some(idle) = idle.borrow_mut().as_mut() {
            if let Some(parked) = idle.parked.take() {
                idle.stack.leave(parked);
            }
        }
    });
}

/// `idle tokio-runtime-worker`: the word and the thread's name.
fn idle_name() -> String {
    match std::thread::current().name() {
        Some(name) => format!("idle {name}"),
        None => "idle".to_owned(),
    }
}

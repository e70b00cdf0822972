//! What the recording thread allocates: a stack made, run and dropped over
//! and over (a `tracing` layer makes one per root span, an async runtime
//! one per task) costs no allocation once the thread has grown its frame
//! vector.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use mtrace::{Config, LogicalStack};

/// Counts the allocations of the thread that makes them: the recorder's
/// provisioner thread allocates when it likes.
struct PerThread;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the count is a const-initialized
// thread-local without a destructor, which allocates nothing.
unsafe impl GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: PerThread = PerThread;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// A root span's life: a stack of its own, a frame on it, its end.
fn one_stack(f: mtrace::FunctionId) {
    let mut stack = LogicalStack::with_static_name("span");
    let on_stack = stack.enter();
    mtrace::enter(f);
    mtrace::exit(f);
    drop(on_stack);
    drop(stack);
}

#[test]
fn stacks_made_run_and_dropped_allocate_nothing() {
    let dir = std::env::temp_dir().join(format!("mtrace-allocations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let recording =
        mtrace::start(Config::new(dir.join("trace.mtrace")).capacity(64 << 20)).expect("start");
    let f = mtrace::register_function("work", file!(), 1, module_path!());
    // The thread binds, its frame vector and the name log's buffer grow.
    for _ in 0..4 {
        one_stack(f);
    }
    let before = allocations();
    for _ in 0..200 {
        one_stack(f);
    }
    let made = allocations() - before;
    recording.finish().expect("finish");
    let _ = std::fs::remove_dir_all(&dir);
    // Before, each new stack's frame vector grew at its first frame.
    assert_eq!(made, 0, "{made} allocations for 200 stacks");
}

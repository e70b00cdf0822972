//! The future adapter: a task keeps its logical stack, and its open frames,
//! whichever worker thread polls it.

mod common;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use common::{decode, serial, stack_segments, steps, Step, TempTrace};
use mtrace::{Config, LogicalStackExt};
use mtrace_format::EventKind;

/// Returns `Pending` once (waking itself), then `Ready`.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

fn noop_waker() -> Waker {
    fn clone(_: *const ()) -> RawWaker {
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable functions ignore the data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

#[mtrace::profile]
async fn query(n: u32) -> u32 {
    YieldOnce(false).await;
    {
        let _frame = mtrace::scope!("after-yield");
    }
    n + 1
}

#[mtrace::profile]
async fn handler() -> u32 {
    query(41).await
}

type Task = Pin<Box<dyn Future<Output = u32> + Send>>;
/// Runnable tasks, and how many tasks are not finished yet.
type Queue = Arc<(Mutex<(VecDeque<Task>, u32)>, Condvar)>;

#[test]
fn future_polled_on_two_threads_carries_its_frames() {
    let _serial = serial();
    let trace = TempTrace::new("future-two-threads");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    let task = handler().on_logical_stack("task-1");
    let stack = task.stack().id();
    let task: Task = Box::pin(task);
    let task = std::thread::Builder::new()
        .name("worker-a".into())
        .spawn(move || {
            let mut task = task;
            let poll = task.as_mut().poll(&mut Context::from_waker(&noop_waker()));
            assert!(poll.is_pending());
            task
        })
        .unwrap()
        .join()
        .unwrap();
    let result = std::thread::Builder::new()
        .name("worker-b".into())
        .spawn(move || {
            let mut task = task;
            match task.as_mut().poll(&mut Context::from_waker(&noop_waker())) {
                Poll::Ready(v) => v,
                Poll::Pending => panic!("second poll should finish"),
            }
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(result, 42);
    recording.finish().unwrap();

    let d = decode(trace.path());
    assert_eq!(d.stacks.get(&stack.0).map(String::as_str), Some("task-1"));
    let enter = |n: &str| Step::Enter(n.into());
    let exit = |n: &str| Step::Exit(n.into());
    let a = steps(&d, &d.events(d.tid("worker-a")));
    assert_eq!(
        a,
        [
            Step::Start,
            Step::Switch(stack.0),
            enter("handler"),
            enter("query"),
            // YieldOnce wakes its own task, through the adapter's waker.
            Step::Wake(stack.0),
            Step::Switch(0),
            Step::End
        ]
    );
    let b = steps(&d, &d.events(d.tid("worker-b")));
    assert_eq!(
        b,
        [
            Step::Start,
            Step::Switch(stack.0),
            enter("after-yield"),
            exit("after-yield"),
            exit("query"),
            exit("handler"),
            Step::Switch(0),
            // The finished task is dropped here: its stack ends.
            Step::StackEnd(stack.0),
            Step::End
        ]
    );
}

#[test]
fn frames_stay_with_the_stack_between_polls() {
    let _serial = serial();
    let trace = TempTrace::new("future-frames");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    let mut task = Box::pin(handler().on_logical_stack("task-frames"));
    let waker = noop_waker();
    assert!(task
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    // Between polls, the two open frames belong to the task, not the thread.
    assert_eq!(task.stack().open_frames().len(), 2);
    let own = mtrace::register_function("own-frame", file!(), 1, module_path!());
    mtrace::enter(own);
    mtrace::exit(own);
    assert_eq!(
        task.as_mut().poll(&mut Context::from_waker(&waker)),
        Poll::Ready(42)
    );
    assert!(task.stack().open_frames().is_empty());
    drop(task);
    recording.finish().unwrap();
    let d = decode(trace.path());
    assert!(d
        .events(1)
        .iter()
        .any(|e| matches!(e.kind, EventKind::Enter(f) if f == own)));
}

#[test]
fn cancelled_task_closes_its_frames_on_its_own_stack() {
    let _serial = serial();
    let trace = TempTrace::new("future-cancelled");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    let mut task = Box::pin(handler().on_logical_stack("task-cancelled"));
    let stack = task.stack().id();
    assert!(task
        .as_mut()
        .poll(&mut Context::from_waker(&noop_waker()))
        .is_pending());
    drop(task);
    recording.finish().unwrap();
    let d = decode(trace.path());
    let segments = &stack_segments(&d)[&stack.0];
    let last: Vec<Step> = steps(&d, &segments.last().unwrap().2);
    assert_eq!(
        last,
        [Step::Exit("query".into()), Step::Exit("handler".into())]
    );
}

#[mtrace::profile]
async fn step(task: u32, i: u32) -> u32 {
    let before = {
        let _frame = mtrace::scope!("before-yield");
        // Long enough that both workers are busy at once.
        std::thread::sleep(std::time::Duration::from_micros(200));
        task * 100 + i
    };
    YieldOnce(false).await;
    before
}

#[mtrace::profile]
async fn job(task: u32) -> u32 {
    let mut sum = 0;
    for i in 0..5 {
        sum += step(task, i).await;
    }
    sum
}

/// A two-worker executor: workers pull tasks from a shared queue, poll each
/// once, and put unfinished ones back, so tasks hop between threads.
#[test]
fn tasks_migrating_between_workers_replay_cleanly_per_stack() {
    let _serial = serial();
    let trace = TempTrace::new("future-executor");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(4 << 20).chunk_size(4096)).unwrap();
    const TASKS: u32 = 24;
    let queue: Queue = Arc::new((Mutex::new((VecDeque::new(), TASKS)), Condvar::new()));
    for t in 0..TASKS {
        let task: Task = Box::pin(job(t).on_logical_stack(format!("job-{t}")));
        queue.0.lock().unwrap().0.push_back(task);
    }
    let start_together = Arc::new(std::sync::Barrier::new(2));
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let queue = queue.clone();
            let start_together = start_together.clone();
            std::thread::Builder::new()
                .name(format!("executor-{w}"))
                .spawn(move || {
                    let waker = noop_waker();
                    start_together.wait();
                    loop {
                        let mut task = {
                            let mut q = queue.0.lock().unwrap();
                            loop {
                                if q.1 == 0 {
                                    return;
                                }
                                if let Some(task) = q.0.pop_front() {
                                    break task;
                                }
                                q = queue.1.wait(q).unwrap();
                            }
                        };
                        let done = task
                            .as_mut()
                            .poll(&mut Context::from_waker(&waker))
                            .is_ready();
                        let mut q = queue.0.lock().unwrap();
                        if done {
                            q.1 -= 1;
                        } else {
                            q.0.push_back(task);
                        }
                        queue.1.notify_all();
                    }
                })
                .unwrap()
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    recording.finish().unwrap();

    let d = decode(trace.path());
    let segments = stack_segments(&d);
    assert_eq!(segments.len(), TASKS as usize);
    let mut migrated = 0;
    for (stack, segs) in &segments {
        let threads: std::collections::HashSet<u64> = segs.iter().map(|s| s.1).collect();
        if threads.len() > 1 {
            migrated += 1;
        }
        // Replayed in time order across threads, every exit closes the
        // innermost open frame and the task ends with nothing open.
        let mut frames = Vec::new();
        let mut calls = 0;
        for (_, _, events) in segs {
            for e in events {
                match e.kind {
                    EventKind::Enter(f) => {
                        frames.push(f);
                        calls += 1;
                    }
                    EventKind::Exit(f) => assert_eq!(frames.pop(), Some(f), "stack {stack}"),
                    // The task's yields wake it through the adapter's waker.
                    EventKind::Wake(s) => assert_eq!(s.0, *stack),
                    other => panic!("unexpected {other:?} on stack {stack}"),
                }
            }
        }
        assert!(frames.is_empty(), "stack {stack} ends with {frames:?} open");
        assert_eq!(
            calls,
            1 + 5 * 2,
            "job, then step and before-yield five times"
        );
    }
    assert!(migrated > 0, "some task ran on both workers");
}

/// Pending until `signal` is set; keeps the waker of its last poll there.
struct WaitForSignal(Arc<Mutex<(bool, Vec<Waker>)>>);

impl Future for WaitForSignal {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.0.lock().unwrap();
        if s.0 {
            return Poll::Ready(());
        }
        s.1.push(cx.waker().clone());
        Poll::Pending
    }
}

/// Issue 19: the adapter's waker records, on the thread that wakes the
/// task, a `wake` naming the task's stack, then wakes the runtime; a task
/// polled again with the same runtime waker gets the same wrapper (no new
/// allocation per poll).
#[test]
fn a_wake_is_recorded_on_the_waking_thread_and_the_waker_is_reused() {
    let _serial = serial();
    let trace = TempTrace::new("future-wake");
    let recording =
        mtrace::start(Config::new(trace.path()).capacity(1 << 20).chunk_size(4096)).unwrap();
    let signal = Arc::new(Mutex::new((false, Vec::new())));
    let mut task = Box::pin(WaitForSignal(signal.clone()).on_logical_stack("waiter"));
    let stack = task.stack().id();
    let woken = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let runtime_waker = counting_waker(woken.clone());
    for _ in 0..3 {
        assert!(task
            .as_mut()
            .poll(&mut Context::from_waker(&runtime_waker))
            .is_pending());
    }
    let seen = signal.lock().unwrap().1.clone();
    assert_eq!(seen.len(), 3);
    assert!(
        seen.windows(2).all(|w| w[0].will_wake(&w[1])),
        "one wrapper for one runtime waker"
    );
    assert!(
        !seen[0].will_wake(&runtime_waker),
        "the task sees the adapter's waker"
    );
    std::thread::Builder::new()
        .name("waker".into())
        .spawn(move || {
            let mut s = signal.lock().unwrap();
            s.0 = true;
            s.1.pop().unwrap().wake();
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(
        woken.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the runtime's waker ran"
    );
    assert!(task
        .as_mut()
        .poll(&mut Context::from_waker(&runtime_waker))
        .is_ready());
    recording.finish().unwrap();

    let d = decode(trace.path());
    let w = steps(&d, &d.events(d.tid("waker")));
    assert_eq!(w, [Step::Start, Step::Wake(stack.0), Step::End]);
}

/// A runtime waker that counts its wakes.
fn counting_waker(count: Arc<std::sync::atomic::AtomicU32>) -> Waker {
    struct Count(Arc<std::sync::atomic::AtomicU32>);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    Waker::from(Arc::new(Count(count)))
}

/// Panics in its first poll.
struct PanicsWhenPolled;

impl Future for PanicsWhenPolled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        panic!("the task's poll panics");
    }
}

#[test]
fn a_poll_that_panics_switches_the_thread_back() {
    // The adapter ends a normal poll's switch inline and leaves the
    // unwinding path to the guard's drop: both must switch back.
    let _serial = serial();
    let trace = TempTrace::new("poll-panics");
    let recording = mtrace::start(Config::new(trace.path())).unwrap();
    let (stack, after) = std::thread::Builder::new()
        .name("poller".into())
        .spawn(|| {
            let mut task = Box::pin(PanicsWhenPolled.on_logical_stack("panicking"));
            let stack = task.stack().id();
            let waker = noop_waker();
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = task.as_mut().poll(&mut Context::from_waker(&waker));
            }));
            assert!(unwound.is_err(), "the poll should have panicked");
            assert_eq!(mtrace::current_stack(), mtrace::StackId::OWN);
            // Polled normally afterwards, a task switches in and back again.
            let mut ready = Box::pin(YieldOnce(true).on_logical_stack("after"));
            let after = ready.stack().id();
            assert!(ready
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready());
            assert_eq!(mtrace::current_stack(), mtrace::StackId::OWN);
            (stack, after)
        })
        .unwrap()
        .join()
        .unwrap();
    recording.finish().unwrap();

    let d = decode(trace.path());
    let events = steps(&d, &d.events(d.tid("poller")));
    let switches: Vec<_> = events
        .iter()
        .filter(|s| matches!(s, Step::Switch(_)))
        .cloned()
        .collect();
    assert_eq!(
        switches,
        [
            Step::Switch(stack.0),
            Step::Switch(0),
            Step::Switch(after.0),
            Step::Switch(0),
            // The panicked task, never finished, is dropped on its stack.
            Step::Switch(stack.0),
            Step::Switch(0)
        ]
    );
}

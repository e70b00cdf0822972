//! Ends of logical stacks (issue 15): dropping a stack that ran in the
//! running recording writes one `end` event, on the dropping thread, after
//! the stack's last switch away; a stack that did not run in it writes
//! none. The future adapter's task stacks end when the task is dropped,
//! finished or cancelled.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{decode, serial, steps, Decoded, Step, TempTrace};
use mtrace::{Config, LogicalStack, LogicalStackExt, StackId};
use mtrace_format::{Event, EventKind};

/// Every `end` of the trace: (stack, tick, thread).
fn ends(d: &Decoded) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for &tid in d.threads.keys() {
        for e in d.events(tid) {
            if let EventKind::End(s) = e.kind {
                out.push((s.0, e.tick, tid));
            }
        }
    }
    out.sort();
    out
}

/// For each logical stack, the tick and thread of the last switch away
/// from it (a `switch` on a thread that ran it).
fn last_switch_away(d: &Decoded) -> HashMap<u64, (u64, u64)> {
    let mut out: HashMap<u64, (u64, u64)> = HashMap::new();
    for (&tid, chunks) in &d.chunks {
        let Some(first) = chunks.first() else {
            continue;
        };
        let mut current = first.snapshot.stack;
        let events: Vec<Event> = d.events(tid);
        for e in events {
            if let EventKind::Switch(s) = e.kind {
                if current != StackId::OWN {
                    let at = out.entry(current.0).or_insert((e.tick, tid));
                    if e.tick >= at.0 {
                        *at = (e.tick, tid);
                    }
                }
                current = s;
            }
        }
    }
    out
}

fn start(trace: &TempTrace) -> mtrace::Recording {
    mtrace::start(Config::new(trace.path()).capacity(4 << 20).chunk_size(4096)).unwrap()
}

/// A tokio runtime with two worker threads and timers.
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("worker")
        .enable_time()
        .build()
        .unwrap()
}

fn named_thread<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// A stack runs on one thread, then on another, and a third thread drops
/// it: that thread writes its end, after the second thread's switch away.
/// A second stack is dropped with a frame still open (a fiber abandoned
/// mid-call): it ends all the same, and its frame gets no exit.
#[test]
fn a_dropped_stack_ends_once_on_the_dropping_thread_after_its_last_switch() {
    let _serial = serial();
    let trace = TempTrace::new("ends-dropping-thread");
    let recording = start(&trace);
    let work = mtrace::register_function("work", file!(), 1, module_path!());
    let (fiber, abandoned) = named_thread("first", move || {
        let mut fiber = LogicalStack::new("fiber");
        let mut abandoned = LogicalStack::new("abandoned");
        {
            let _on = fiber.enter();
            mtrace::enter(work);
        }
        {
            let _on = abandoned.enter();
            mtrace::enter(work);
        }
        (fiber, abandoned)
    });
    let (fiber_id, abandoned_id) = (fiber.id().0, abandoned.id().0);
    let fiber = named_thread("second", move || {
        let mut fiber = fiber;
        {
            let _on = fiber.enter();
            mtrace::exit(work);
        }
        fiber
    });
    named_thread("dropper", move || {
        drop(fiber);
        drop(abandoned);
    });
    recording.finish().unwrap();

    let d = decode(trace.path());
    let dropper = d.tid("dropper");
    assert_eq!(
        steps(&d, &d.events(dropper)),
        [
            Step::Start,
            Step::StackEnd(fiber_id),
            Step::StackEnd(abandoned_id),
            Step::End
        ]
    );
    let all = ends(&d);
    assert_eq!(all.len(), 2, "one end a stack: {all:?}");
    let away = last_switch_away(&d);
    for (stack, tick, _) in &all {
        let (last, _) = away[stack];
        assert!(
            *tick >= last,
            "stack {stack} ends at {tick}, before its switch at {last}"
        );
    }
    assert_eq!(away[&fiber_id].1, d.tid("second"));
    // The abandoned stack's frame was never closed: no exit anywhere.
    let first = steps(&d, &d.events(d.tid("first")));
    assert_eq!(
        first.iter().filter(|s| matches!(s, Step::Exit(_))).count(),
        0,
        "{first:?}"
    );
}

/// Stacks that never ran in the recording end silently: one created and
/// dropped in it, one created (and entered) while nothing recorded and
/// dropped in it, one named in it but never entered.
#[test]
fn a_stack_never_entered_in_the_recording_writes_no_end() {
    let _serial = serial();
    let trace = TempTrace::new("ends-never-entered");
    assert!(!mtrace::is_recording());
    let mut before = LogicalStack::new("before");
    {
        let _on = before.enter(); // nothing records: a no-op
    }
    let recording = start(&trace);
    let control = named_thread("dropper", move || {
        let anonymous = LogicalStack::anonymous();
        let named = LogicalStack::new("named");
        drop(anonymous);
        drop(named);
        drop(before);
        // What does end: a stack entered here.
        let mut control = LogicalStack::anonymous();
        drop(control.enter());
        let id = control.id().0;
        drop(control);
        id
    });
    recording.finish().unwrap();

    let d = decode(trace.path());
    assert_eq!(
        steps(&d, &d.events(d.tid("dropper"))),
        [
            Step::Start,
            Step::Switch(control),
            Step::Switch(StackId::OWN.0),
            Step::StackEnd(control),
            Step::End
        ]
    );
    assert_eq!(ends(&d).len(), 1);
}

/// A stack that ran in an earlier recording and not in this one writes no
/// end into this one; a stack dropped while nothing records writes none
/// anywhere; a stack that ran in both ends in the second.
#[test]
fn no_end_while_off_nor_for_a_stack_of_an_earlier_recording() {
    let _serial = serial();
    let first = TempTrace::new("ends-first");
    let second = TempTrace::new("ends-second");
    let mut earlier = LogicalStack::new("earlier");
    let mut both = LogicalStack::new("both");
    let mut dropped_off = LogicalStack::new("dropped-off");
    let recording = start(&first);
    for stack in [&mut earlier, &mut both, &mut dropped_off] {
        drop(stack.enter());
    }
    recording.finish().unwrap();
    drop(dropped_off);
    let recording = start(&second);
    // This thread records into the second recording before the drops.
    drop(both.enter());
    let both_id = both.id().0;
    drop(earlier);
    drop(both);
    recording.finish().unwrap();

    let d = decode(first.path());
    assert_eq!(ends(&d), [], "the first recording ends nothing");
    let d = decode(second.path());
    let got: Vec<u64> = ends(&d).iter().map(|e| e.0).collect();
    assert_eq!(got, [both_id], "only the stack that ran in the second");
}

#[mtrace::profile]
async fn request(i: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(1)).await;
    tokio::task::yield_now().await;
    i
}

/// Tasks on a 2-worker tokio runtime: each task's stack ends once, after
/// the switch away from its last poll, on the worker that finished it.
#[test]
fn each_finished_task_on_a_multi_thread_runtime_ends_once_after_its_last_poll() {
    let _serial = serial();
    let trace = TempTrace::new("ends-tokio");
    let recording = start(&trace);
    let rt = two_workers();
    const TASKS: u64 = 40;
    let ids: Vec<u64> = rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let task = request(i).on_logical_stack(format!("request-{i}"));
                let id = task.stack().id().0;
                (id, tokio::spawn(task))
            })
            .collect();
        let mut ids = Vec::new();
        for (i, (id, handle)) in tasks.into_iter().enumerate() {
            assert_eq!(handle.await.unwrap(), i as u64);
            ids.push(id);
        }
        ids
    });
    drop(rt);
    recording.finish().unwrap();

    let d = decode(trace.path());
    let all = ends(&d);
    let mut ended: Vec<u64> = all.iter().map(|e| e.0).collect();
    ended.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(ended, expected, "one end per task");
    let away = last_switch_away(&d);
    for (stack, tick, tid) in &all {
        let (last, last_tid) = away[stack];
        assert!(
            *tick >= last,
            "stack {stack} ends at {tick}, before its switch at {last}"
        );
        assert_eq!(
            *tid, last_tid,
            "stack {stack} ends on the worker that last ran it"
        );
    }
}

#[mtrace::profile]
async fn stuck() {
    std::future::pending::<()>().await;
}

#[mtrace::profile]
async fn handler() {
    stuck().await;
}

/// A task cancelled while suspended in two `#[profile] async fn` frames:
/// the thread that drops it closes the frames on the task's stack, switches
/// away, then writes the end.
#[test]
fn a_cancelled_task_closes_its_frames_then_ends() {
    let _serial = serial();
    let trace = TempTrace::new("ends-cancelled");
    let recording = start(&trace);
    let rt = two_workers();
    let stack = rt.block_on(async {
        let task = handler().on_logical_stack("cancelled");
        let stack = task.stack().id().0;
        let handle = tokio::spawn(task);
        // Let it run into `stuck`, then cancel it.
        tokio::time::sleep(Duration::from_millis(20)).await;
        handle.abort();
        assert!(handle.await.unwrap_err().is_cancelled());
        stack
    });
    drop(rt);
    recording.finish().unwrap();

    let d = decode(trace.path());
    let all = ends(&d);
    assert_eq!(all.iter().map(|e| e.0).collect::<Vec<_>>(), [stack]);
    let steps = steps(&d, &d.events(all[0].2));
    let at = steps
        .iter()
        .position(|s| *s == Step::StackEnd(stack))
        .unwrap();
    assert!(at >= 4, "{steps:?}");
    assert_eq!(
        steps[at - 4..=at],
        [
            Step::Switch(stack),
            Step::Exit("stuck".into()),
            Step::Exit("handler".into()),
            Step::Switch(StackId::OWN.0),
            Step::StackEnd(stack),
        ]
    );
}

/// A task dropped before any poll in the recording (a runtime shutting
/// down with tasks never run) writes nothing: no switch onto its stack,
/// no end; one polled once and then dropped unfinished switches on,
/// closes its frame, switches away and ends.
#[test]
fn a_task_never_polled_in_the_recording_writes_nothing() {
    let _serial = serial();
    let trace = TempTrace::new("ends-never-polled");
    let recording = start(&trace);
    let (never, once) = named_thread("dropper", || {
        let never = handler().on_logical_stack("never-polled");
        let mut once = Box::pin(handler().on_logical_stack("polled-once"));
        let ids = (never.stack().id().0, once.stack().id().0);
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(std::future::Future::poll(once.as_mut(), &mut cx).is_pending());
        drop(never);
        drop(once);
        ids
    });
    recording.finish().unwrap();

    let d = decode(trace.path());
    let got: Vec<u64> = ends(&d).iter().map(|e| e.0).collect();
    assert_eq!(got, [once], "only the task polled in the recording ends");
    let steps = steps(&d, &d.events(d.tid("dropper")));
    assert!(
        !steps.contains(&Step::Switch(never)),
        "a task never polled is never switched onto: {steps:?}"
    );
    let on = |s: &Step| *s == Step::Switch(once);
    assert_eq!(steps.iter().filter(|s| on(s)).count(), 2, "{steps:?}");
    assert_eq!(
        steps[steps.len() - 6..],
        [
            Step::Switch(once),
            Step::Exit("stuck".into()),
            Step::Exit("handler".into()),
            Step::Switch(StackId::OWN.0),
            Step::StackEnd(once),
            Step::End,
        ]
    );
}

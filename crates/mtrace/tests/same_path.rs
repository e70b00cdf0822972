//! Recording twice to the same path in one process: the second file holds
//! the second recording's events and nothing of the first, even from threads
//! that still held a chunk of the first when it finished.

mod common;

use std::sync::mpsc;

use common::{decode, serial, TempTrace};
use mtrace::{Config, FunctionId};

fn calls(f: FunctionId, n: usize) {
    for _ in 0..n {
        mtrace::enter(f);
        mtrace::exit(f);
    }
}

#[test]
fn a_second_recording_to_the_same_path_holds_only_its_own_events() {
    let _serial = serial();
    let trace = TempTrace::new("same-path");
    let f = mtrace::register_function("work", file!(), line!(), "");

    let first = mtrace::start(Config::new(trace.path())).expect("first start");
    calls(f, 1000);
    // A thread that records into the first recording and exits during the
    // second: it lets go of its chunk of the first only then.
    let (exit_now, wait) = mpsc::channel::<()>();
    let (recorded, has_recorded) = mpsc::channel::<()>();
    let late = std::thread::spawn(move || {
        calls(f, 1000);
        recorded.send(()).expect("main waits");
        wait.recv().expect("main says when");
    });
    has_recorded.recv().expect("the thread records");
    first.finish().expect("first finish");

    let second = mtrace::start(Config::new(trace.path())).expect("second start");
    // The main thread's first event of the second recording lets go of its
    // chunk of the first.
    calls(f, 10);
    exit_now.send(()).expect("thread waits");
    late.join().expect("thread ends");
    let summary = second.finish().expect("second finish");

    // Main thread: thread_start and 10 calls; nothing from the thread that
    // did not record into the second recording.
    let want = 1 + 2 * 10;
    assert_eq!(summary.events, want, "the recorder's own count");
    assert_eq!(summary.dropped_chunks, 0, "a chunk slot was taken");
    // `decode` fails on a damaged chunk (such as one with thread id 0).
    let decoded = decode(trace.path());
    assert_eq!(decoded.event_count(), want);
    assert_eq!(decoded.chunks.len(), 1, "threads with chunks");
}

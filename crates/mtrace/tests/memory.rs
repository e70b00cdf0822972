//! Recording into memory (`Config::in_memory`): no file is made, the trace
//! is read back through the descriptor `Recording::memory_trace` gives, as
//! whole and finished as a file's, and a memory recording cannot rotate.

mod common;

use std::os::fd::AsRawFd;

use common::{decode, serial, TempTrace};
use mtrace::{Config, ConfigError, Rotation, StartError};
use mtrace_format::layout::FLAG_FINISHED;

#[test]
fn a_recording_into_memory_makes_no_file_and_reads_back_whole() {
    let _serial = serial();
    let named = TempTrace::new("in-memory");
    let recording = mtrace::start(Config::new(named.path()).in_memory(true)).expect("start");
    let threads: Vec<_> = (0..2)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("memory-{t}"))
                .spawn(|| {
                    for _ in 0..1000 {
                        let _outer = mtrace::scope!("outer");
                        let _inner = mtrace::scope!("inner");
                    }
                })
                .unwrap()
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let memory = recording
        .memory_trace()
        .expect("a recording into memory has a memory trace")
        .expect("its descriptor");
    let summary = recording.finish().expect("finish");
    assert!(
        !named.path().exists(),
        "no file at the name of a memory trace"
    );
    assert_eq!(summary.dropped_events, 0);

    // Read through /proc as any trace file: the finished trace, every event.
    let d = decode(&std::path::Path::new("/proc/self/fd").join(memory.as_raw_fd().to_string()));
    assert!(d.header.flags & FLAG_FINISHED != 0);
    assert_eq!(d.event_count(), summary.events);
    for t in 0..2 {
        let tid = d.tid(&format!("memory-{t}"));
        // Per scope an enter and an exit, twice; and the thread's start and end.
        assert_eq!(d.events(tid).len(), 4 * 1000 + 2, "memory-{t}");
    }
}

#[test]
fn a_recording_into_a_file_has_no_memory_trace_and_memory_cannot_rotate() {
    let _serial = serial();
    let file = TempTrace::new("not-in-memory");
    let recording = mtrace::start(Config::new(file.path())).expect("start");
    assert!(recording.memory_trace().is_none());
    recording.finish().expect("finish");

    let refused = mtrace::start(
        Config::new("rotating-memory")
            .in_memory(true)
            .rotate(Rotation::Size(64 << 20)),
    );
    assert!(
        matches!(
            refused,
            Err(StartError::Config(ConfigError::RotatingMemory))
        ),
        "{refused:?}"
    );
}

/// Threads that record, name stacks and write marks without pause while
/// short recordings into memory start and finish one after another: each
/// recording is freed once given back ("Freed files" in `shared.rs`), so a
/// thread binding to, naming into or letting go of one as it finishes must
/// never touch a freed one. Each trace reads back whole.
#[test]
fn threads_record_through_many_short_recordings_that_are_freed() {
    let _serial = serial();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f = mtrace::register_function("churn", file!(), line!(), "");
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut k = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    mtrace::enter(f);
                    mtrace::exit(f);
                    k += 1;
                    if k.is_multiple_of(64) {
                        let mut stack = mtrace::LogicalStack::new(format!("task-{t}-{k}"));
                        let _on = stack.enter();
                        mtrace::enter(f);
                        mtrace::exit(f);
                    }
                    if k.is_multiple_of(256) {
                        mtrace::mark("churn");
                    }
                }
            })
        })
        .collect();
    for _ in 0..300 {
        let recording = mtrace::start(Config::new("unused").in_memory(true)).expect("start");
        std::thread::sleep(std::time::Duration::from_micros(200));
        let memory = recording.memory_trace().expect("memory").expect("fd");
        let summary = recording.finish().expect("finish");
        let d = decode(&std::path::Path::new("/proc/self/fd").join(memory.as_raw_fd().to_string()));
        assert!(d.header.flags & FLAG_FINISHED != 0);
        // A thread's event after the finish may still land in its chunk.
        assert!(d.event_count() >= summary.events);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().expect("recording thread");
    }
}

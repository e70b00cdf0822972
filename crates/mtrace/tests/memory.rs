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

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

/// The memory file's identity (device, inode): the same for every
/// descriptor of one file.
fn identity(file: &std::fs::File) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().expect("fstat");
    (meta.dev(), meta.ino())
}

/// Records `calls` calls of `f` on the calling thread and on a thread
/// named `thread` (which exits, letting go of the recording), into memory.
fn record_into_memory(f: mtrace::FunctionId, thread: &str, calls: usize) -> std::fs::File {
    let recording = mtrace::start(Config::new("reused").in_memory(true)).expect("start");
    let on_thread = move || {
        for _ in 0..calls {
            mtrace::enter(f);
            mtrace::exit(f);
        }
    };
    on_thread();
    std::thread::Builder::new()
        .name(thread.to_owned())
        .spawn(on_thread)
        .unwrap()
        .join()
        .unwrap();
    let memory = recording.memory_trace().expect("memory").expect("fd");
    recording.finish().expect("finish");
    memory
}

fn read(memory: &std::fs::File) -> common::Decoded {
    decode(&std::path::Path::new("/proc/self/fd").join(memory.as_raw_fd().to_string()))
}

/// A trace given back (`give_back_memory_trace`) lends its memory file to
/// a later recording into memory, which then reads as its own recording
/// only (none of the earlier one's names, threads or events); a trace
/// still held is never reused, and reads the same after later recordings.
#[test]
fn a_given_back_trace_s_memory_serves_a_later_recording_and_a_held_one_stays() {
    let _serial = serial();
    let big = mtrace::register_function("only-in-the-first", file!(), line!(), "");
    let small = mtrace::register_function("only-in-the-third", file!(), line!(), "");
    let other = mtrace::register_function("held", file!(), line!(), "");
    // Enough events for several chunks of each thread.
    let first = record_into_memory(big, "first-thread", 5_000);
    let first_id = identity(&first);
    mtrace::give_back_memory_trace(first);
    // The calling thread lets go of the first recording at its first
    // event in the second (its spawned thread already did, at its exit):
    // the first file is then kept, given back.
    let held = record_into_memory(other, "held-thread", 100);
    let held_before = read(&held);
    let third = record_into_memory(small, "third-thread", 10);
    assert_eq!(
        identity(&third),
        first_id,
        "the third recording reuses the first's memory"
    );
    let d = read(&third);
    assert!(d.header.flags & FLAG_FINISHED != 0);
    // Each recording names every function registered so far; only the
    // third's calls are in it.
    let calls_of = |f: mtrace::FunctionId| {
        d.chunks
            .values()
            .flatten()
            .flat_map(|c| &c.events)
            .filter(|e| e.kind == mtrace_format::EventKind::Enter(f))
            .count()
    };
    assert_eq!(calls_of(small), 2 * 10);
    assert_eq!(calls_of(big), 0);
    assert_eq!(d.threads.len(), 2, "{:?}", d.threads);
    d.tid("third-thread");
    // Besides the calls' enters and exits, the same events (the threads'
    // starts and ends) as a recording into a new memory file has.
    assert_eq!(
        d.event_count() - 2 * 10 * 2,
        held_before.event_count() - 2 * 100 * 2
    );

    // The held trace was not reused, and reads as it did.
    assert_ne!(identity(&held), first_id);
    let held_after = read(&held);
    assert_eq!(held_after.event_count(), held_before.event_count());
    assert_eq!(held_after.threads, held_before.threads);
    mtrace::give_back_memory_trace(third);
}

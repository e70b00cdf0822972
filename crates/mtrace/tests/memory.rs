//! Recording into memory (`Config::in_memory`): no file is made, the trace
//! is read back through the descriptor `Recording::memory_trace` gives, or
//! in place through `Recording::memory_view`, as whole and finished as a
//! file's, and a memory recording cannot rotate.

mod common;

use std::os::fd::AsRawFd;

use common::{decode, decode_bytes, serial, TempTrace};
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
    // Set when the test ends, a failed assertion too: threads left
    // recording would hold on to the next tests' recordings.
    let _stop_on_drop = StopOnDrop(stop.clone());
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

/// Sets its flag when dropped.
struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
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
/// named `thread` (which exits, letting go of the recording), into
/// memory; `take` takes what the trace is read from before the finish.
fn record_into<T>(
    f: mtrace::FunctionId,
    thread: &str,
    calls: usize,
    take: impl FnOnce(&mtrace::Recording) -> T,
) -> T {
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
    let trace = take(&recording);
    recording.finish().expect("finish");
    trace
}

/// [`record_into`], read through a descriptor.
fn record_into_memory(f: mtrace::FunctionId, thread: &str, calls: usize) -> std::fs::File {
    record_into(f, thread, calls, |r| {
        r.memory_trace().expect("memory").expect("fd")
    })
}

/// [`record_into`], read through a view.
fn record_into_a_view(f: mtrace::FunctionId, thread: &str, calls: usize) -> mtrace::MemoryTrace {
    record_into(f, thread, calls, |r| {
        r.memory_view().expect("a recording into memory has a view")
    })
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
    assert_eq!(d.enters(small), 2 * 10);
    assert_eq!(d.enters(big), 0);
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

/// The identity of the file a view reads (through a descriptor of it,
/// given back).
fn view_identity(view: &mtrace::MemoryTrace) -> (u64, u64) {
    let descriptor = view.descriptor().expect("a descriptor of the view's file");
    let id = identity(&descriptor);
    mtrace::give_back_memory_trace(descriptor);
    id
}

/// A view reads the finished trace in place, as the descriptor does; its
/// memory serves no later recording while it lives, and once dropped it
/// does; a view pushed out of the kept files still reads.
#[test]
fn a_view_reads_in_place_and_keeps_its_memory_until_dropped() {
    let _serial = serial();
    assert!(mtrace::start(Config::new(TempTrace::new("no-view").path()))
        .expect("start")
        .memory_view()
        .is_none());
    let f = mtrace::register_function("viewed-call", file!(), line!(), "");
    let g = mtrace::register_function("other-call", file!(), line!(), "");
    let first = record_into_a_view(f, "view-thread", 300);
    let d = decode_bytes(first.bytes());
    assert!(d.header.flags & FLAG_FINISHED != 0);
    assert_eq!(d.enters(f), 2 * 300);
    d.tid("view-thread");
    let first_id = view_identity(&first);

    // Held: two more recordings (each letting go of the one before, which
    // is then kept) never take the first's memory, and it reads the same.
    let second = record_into_a_view(g, "second-thread", 10);
    let third = record_into_a_view(g, "third-thread", 10);
    assert_ne!(view_identity(&second), first_id);
    assert_ne!(view_identity(&third), first_id);
    assert_eq!(decode_bytes(first.bytes()).event_count(), d.event_count());
    assert_eq!(decode_bytes(first.bytes()).enters(f), 2 * 300);

    // Dropped: the second's memory (kept, its view gone) serves the next.
    let second_id = view_identity(&second);
    drop(second);
    let fourth = record_into_a_view(g, "fourth-thread", 10);
    assert_eq!(
        view_identity(&fourth),
        second_id,
        "a dropped view's memory is reused"
    );
    let d4 = decode_bytes(fourth.bytes());
    assert_eq!(d4.enters(g), 2 * 10);
    assert_eq!(d4.enters(f), 0);
    // The first view, pushed out of the kept files by now, still reads.
    assert_eq!(decode_bytes(first.bytes()).enters(f), 2 * 300);

    // A descriptor taken from a view keeps the trace after the view is
    // dropped, until given back.
    let descriptor = fourth.descriptor().expect("descriptor");
    let fourth_id = identity(&descriptor);
    drop(fourth);
    let fifth = record_into_a_view(g, "fifth-thread", 10);
    let sixth = record_into_a_view(g, "sixth-thread", 10);
    assert_ne!(view_identity(&fifth), fourth_id);
    assert_ne!(view_identity(&sixth), fourth_id);
    assert_eq!(read(&descriptor).enters(g), 2 * 10);
    mtrace::give_back_memory_trace(descriptor);
    drop((first, third, fifth, sixth));
}

/// A recording per request, each read through a view and a descriptor
/// (given back) and dropped: the same few memory files serve them all,
/// each reuse counting its own descriptors.
#[test]
fn views_and_descriptors_given_back_let_the_memory_serve_again_and_again() {
    let _serial = serial();
    let f = mtrace::register_function("per-request", file!(), line!(), "");
    let files: Vec<(u64, u64)> = (0..8)
        .map(|_| {
            let view = record_into_a_view(f, "request-thread", 5);
            assert_eq!(
                decode_bytes(view.bytes()).event_count(),
                read(
                    &view
                        .descriptor()
                        .map(|d| {
                            let copy = d.try_clone().expect("dup");
                            mtrace::give_back_memory_trace(d);
                            copy
                        })
                        .expect("descriptor")
                )
                .event_count()
            );
            view_identity(&view)
        })
        .collect();
    let distinct: std::collections::BTreeSet<_> = files.iter().collect();
    assert!(
        distinct.len() <= 3,
        "memory files of 8 recordings: {files:?}"
    );
}

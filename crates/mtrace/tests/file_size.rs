//! A clean finish leaves a file no larger than what it holds: a
//! stop-when-full recording that ended before its file filled keeps only
//! the chunk slots it claimed (the header says so too); a ring keeps its
//! size, being a fixed buffer.

mod common;

use common::{decode, serial, steps, TempTrace};
use mtrace::{Config, Mode};
use mtrace_format::layout::HEADER_SIZE;

const CHUNK: usize = 4096;
const CAPACITY: u64 = 64 << 20;

fn record(trace: &TempTrace, mode: Mode) -> mtrace::Summary {
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(CAPACITY)
            .chunk_size(CHUNK)
            .mode(mode),
    )
    .unwrap();
    let handles: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                let f = mtrace::register_function("small", file!(), t, module_path!());
                for _ in 0..1000 {
                    mtrace::enter(f);
                    mtrace::exit(f);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    recording.finish().unwrap()
}

#[test]
fn a_small_run_leaves_a_small_file_that_holds_everything() {
    let _serial = serial();
    let trace = TempTrace::new("file-size-stop");
    let summary = record(&trace, Mode::StopWhenFull);
    let len = std::fs::metadata(trace.path()).unwrap().len();
    let d = decode(trace.path());
    assert!(d.header.finished());
    assert!(
        summary.chunk_count < CAPACITY / CHUNK as u64,
        "{} slots",
        summary.chunk_count
    );
    assert_eq!(d.header.chunk_count, summary.chunk_count);
    assert_eq!(
        len,
        d.header.chunks_offset + summary.chunk_count * CHUNK as u64,
        "the file ends after the slots the header claims"
    );
    assert!(len < (2 << 20), "{len} bytes for 4000 events");
    assert!(len > HEADER_SIZE as u64);
    // Nothing lost: every thread's start, its 1000 pairs and its exit.
    assert_eq!(summary.dropped_events, 0);
    assert_eq!(d.event_count(), summary.events);
    let per_thread: Vec<usize> = d
        .threads
        .keys()
        .map(|&tid| steps(&d, &d.events(tid)).len())
        .collect();
    assert_eq!(per_thread.iter().sum::<usize>(), 2 * (2 * 1000 + 2));
}

#[test]
fn a_ring_keeps_its_size() {
    let _serial = serial();
    let trace = TempTrace::new("file-size-ring");
    let summary = record(&trace, Mode::Ring);
    let d = decode(trace.path());
    assert_eq!(summary.chunk_count, CAPACITY / CHUNK as u64);
    assert_eq!(d.header.chunk_count, summary.chunk_count);
    let len = std::fs::metadata(trace.path()).unwrap().len();
    assert_eq!(len, d.header.chunks_offset + CAPACITY);
}

/// Blocks the file takes on disk (its holes take none).
fn disk_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn a_large_metadata_region_takes_disk_only_as_names_fill_it() {
    let _serial = serial();
    const META: usize = 16 << 20;
    let start = |trace: &TempTrace| {
        mtrace::start(
            Config::new(trace.path())
                .capacity(CAPACITY)
                .chunk_size(CHUNK)
                .meta_capacity(META),
        )
        .unwrap()
    };
    // A short run: the region is reserved a step at a time, so the file
    // keeps a hole where the names it did not need would go.
    let small = TempTrace::new("file-size-meta-small");
    let recording = start(&small);
    let _stack = mtrace::LogicalStack::new("one task");
    recording.finish().unwrap();
    let d = decode(small.path());
    assert_eq!(d.header.meta_capacity, META as u64);
    assert_eq!(d.stacks.len(), 1);
    let on_disk = disk_bytes(small.path());
    assert!(on_disk < (4 << 20), "{on_disk} bytes on disk for one name");
    // Names past the first steps are reserved as they come, and all kept:
    // 40,000 names of some 64 bytes each, 2.5 MB of records.
    let many = TempTrace::new("file-size-meta-many");
    let recording = start(&many);
    let stacks: Vec<_> = (0..40_000)
        .map(|i| mtrace::LogicalStack::new(format!("request-{i:06}-{}", "x".repeat(40))))
        .collect();
    let summary = recording.finish().unwrap();
    drop(stacks);
    let d = decode(many.path());
    assert_eq!(d.header.meta_dropped, 0, "{summary:?}");
    assert_eq!(d.stacks.len(), 40_000);
    assert!(d.stacks.values().any(|n| n.starts_with("request-039999-")));
    let on_disk = disk_bytes(many.path());
    assert!(
        on_disk > (2 << 20),
        "{on_disk} bytes on disk for 2.5 MB of names"
    );
    assert!(
        on_disk < (8 << 20),
        "{on_disk} bytes on disk for 2.5 MB of names"
    );
}

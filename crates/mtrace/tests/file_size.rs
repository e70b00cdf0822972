//! A clean finish leaves a file no larger than what it holds: a
//! stop-when-full recording that ended before its file filled keeps only
//! the chunk slots it claimed (the header says so too); a ring keeps its
//! size, being a fixed buffer. (Names past the first metadata region, and
//! what a small trace takes on disk: `names.rs`.)

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

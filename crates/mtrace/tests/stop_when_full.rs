//! `StopWhenFull`: once the chunks are used up, events are dropped, and
//! counted exactly: recorded + dropped == attempted.

mod common;

use common::{decode, serial, TempTrace};
use mtrace::{Config, Mode};

#[test]
fn recorded_plus_dropped_equals_attempted() {
    let _serial = serial();
    let trace = TempTrace::new("stop-when-full");
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(16 * 4096)
            .chunk_size(4096)
            .mode(Mode::StopWhenFull),
    )
    .unwrap();
    const THREADS: u64 = 4;
    const PAIRS: u64 = 20_000;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let f = mtrace::register_function("counted", file!(), t as u32, module_path!());
                for _ in 0..PAIRS {
                    mtrace::enter(f);
                    mtrace::exit(f);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let summary = recording.finish().unwrap();
    // Each thread: ThreadStart, the pairs, ThreadExit.
    let attempted = THREADS * (2 * PAIRS + 2);
    let d = decode(trace.path());
    let recorded = d.event_count();
    let dropped = d.header.dropped_events;
    assert!(
        recorded > 0 && dropped > 0,
        "recorded {recorded}, dropped {dropped}"
    );
    assert_eq!(recorded + dropped, attempted);
    assert_eq!(
        (summary.events, summary.dropped_events),
        (recorded, dropped)
    );
    assert_eq!(summary.chunks, 16, "every chunk was used");
    assert!(!d.header.ring());
    // Each thread's chunks are a contiguous prefix of its events (no holes).
    for &tid in d.threads.keys() {
        let _ = d.events(tid);
    }
}

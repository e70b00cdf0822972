//! `StopWhenFull`: once the chunks are used up, events are dropped, and
//! counted exactly: recorded + dropped == attempted. A thread cut short ends
//! with a `lost` mark saying from when.

mod common;

use common::{decode, serial, TempTrace};
use mtrace::{Config, Format, Mode};
use mtrace_format::layout::{
    snapshot_size, CHUNK_HEADER_SIZE, COMPACT_LOST_RESERVE, COMPACT_MAX_EVENT_SIZE, EVENT_SIZE,
};
use mtrace_format::EventKind;

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
    // The `lost` marks are not attempted events.
    let recorded = d.event_count() - d.lost_marks();
    let dropped = d.header.dropped_events;
    assert!(
        recorded > 0 && dropped > 0,
        "recorded {recorded}, dropped {dropped}"
    );
    assert_eq!(recorded + dropped, attempted);
    assert_eq!(
        (summary.events, summary.dropped_events),
        (d.event_count(), dropped)
    );
    assert_eq!(summary.chunks, 16, "every chunk was used");
    assert!(!d.header.ring());
    // Each thread's chunks are a contiguous prefix of its events (no holes).
    for &tid in d.threads.keys() {
        let _ = d.events(tid);
    }
}

#[test]
fn a_thread_cut_short_ends_with_a_lost_mark() {
    a_thread_cut_short_ends_with_a_lost_mark_in(Format::Compact);
}

#[test]
fn a_thread_of_16_byte_events_cut_short_ends_with_a_lost_mark() {
    a_thread_cut_short_ends_with_a_lost_mark_in(Format::Fixed);
}

fn a_thread_cut_short_ends_with_a_lost_mark_in(format: Format) {
    let _serial = serial();
    let trace = TempTrace::new("stop-when-full-lost");
    // Far too small: 8 chunks of 255 events for 4 threads of 40,002.
    let recording = mtrace::start(
        Config::new(trace.path())
            .capacity(8 * 4096)
            .chunk_size(4096)
            .mode(Mode::StopWhenFull)
            .format(format),
    )
    .unwrap();
    const THREADS: usize = 4;
    const PAIRS: u64 = 20_000;
    let together = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let together = together.clone();
            std::thread::spawn(move || {
                let names = ["outer", "inner"]
                    .map(|n| mtrace::register_function(n, file!(), t as u32, module_path!()));
                together.wait();
                // `outer` stays open throughout: it is open at the mark.
                mtrace::enter(names[0]);
                for _ in 0..PAIRS - 1 {
                    mtrace::enter(names[1]);
                    mtrace::exit(names[1]);
                }
                mtrace::exit(names[0]);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let summary = recording.finish().unwrap();
    assert!(summary.dropped_events > 0);
    let d = decode(trace.path());
    assert_eq!(
        d.header.version,
        format.version(),
        "lost marks came in version 2; this recorder writes 3 or 4"
    );
    let mut marked = 0;
    for (&tid, chunks) in &d.chunks {
        let events = d.events(tid);
        let attempted = 2 * PAIRS as usize + 2;
        let kept = events.iter().filter(|e| e.kind != EventKind::Lost).count();
        assert!(kept < attempted, "thread {tid} recorded everything");
        // The mark is the thread's last event, the only one, at or after the
        // event before it, and it ends its chunk (the thread's last).
        let last = events.last().unwrap();
        assert_eq!(
            last.kind,
            EventKind::Lost,
            "thread {tid}: {:?}",
            &events[events.len().saturating_sub(3)..]
        );
        assert_eq!(kept, events.len() - 1, "thread {tid}: one mark");
        assert!(last.tick >= events[events.len() - 2].tick);
        let chunk = chunks.last().unwrap();
        let end = CHUNK_HEADER_SIZE + chunk.committed;
        match format {
            Format::Fixed => {
                let snapshot =
                    snapshot_size(chunk.snapshot.own.len(), chunk.snapshot.stack_frames.len());
                assert_eq!(
                    CHUNK_HEADER_SIZE + snapshot + chunk.events.len() * EVENT_SIZE,
                    4096,
                    "thread {tid}: the mark fills the chunk's last 16 bytes"
                );
            }
            // The event before the mark did not fit before the reserve:
            // the chunk was full up to less than a largest event, and
            // the mark fits the reserve.
            Format::Compact => assert!(
                end <= 4096 && end > 4096 - COMPACT_LOST_RESERVE - COMPACT_MAX_EVENT_SIZE,
                "thread {tid}: the chunk ends at {end} bytes"
            ),
        }
        marked += 1;
    }
    assert!(marked >= 1);
    assert_eq!(d.lost_marks(), marked);
    // Threads that never held a chunk have nothing to mark.
    assert_eq!(
        d.header.dropped_events + d.event_count() - d.lost_marks(),
        THREADS as u64 * (2 * PAIRS + 2)
    );

    // The analyzer ends each marked thread's frames at its mark: none runs
    // on to the end of the trace, and each marked thread says from when it
    // lost its events.
    let loaded = mtanalyze::load(trace.path()).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    let lost_threads = report
        .trace
        .threads
        .iter()
        .filter(|t| t.lost_from_ns.is_some())
        .count();
    assert_eq!(lost_threads, marked as usize);
    for f in &report.functions {
        assert_eq!(f.open_at_end, 0, "{}: frames run to the end", f.function);
    }
    // (Each thread's `outer` is its own function: its line is the thread's number.)
    let outer_cut_short: u64 = report
        .functions
        .iter()
        .filter(|f| f.function == "outer")
        .map(|f| f.cut_short)
        .sum();
    assert_eq!(
        outer_cut_short, marked,
        "each marked thread's outer frame is cut short at its mark"
    );
}

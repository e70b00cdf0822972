//! The committed sample traces (`sample-traces/*.bin`, made by the workload
//! example) still decode with the current format crate: every chunk, every
//! event and every metadata record, and the frames replay cleanly per chunk
//! and, for complete traces, per logical stack across threads.

mod common;

use std::path::PathBuf;

use common::{decode, replay, stack_segments};
use mtrace_format::EventKind;

#[test]
fn sample_traces_decode_and_replay() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sample-traces");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "bin"));
    files.sort();
    if files.is_empty() {
        eprintln!("no sample traces in {}", dir.display());
        return;
    }
    for path in files {
        let d = decode(&path);
        let name = path.display();
        assert!(d.header.finished(), "{name}");
        assert!(d.threads.len() >= 3, "{name}: {:?}", d.threads);
        assert!(!d.stacks.is_empty(), "{name}: fibers have named stacks");
        for (&tid, chunks) in &d.chunks {
            assert!(
                d.threads.contains_key(&tid),
                "{name}: thread {tid} is named"
            );
            for pair in chunks.windows(2) {
                assert_eq!(
                    pair[1].chunk_no,
                    pair[0].chunk_no + 1,
                    "{name}: thread {tid} has a hole"
                );
            }
            if !d.header.ring() {
                assert_eq!(
                    chunks[0].chunk_no, 0,
                    "{name}: thread {tid} starts at its first chunk"
                );
            }
            for c in chunks {
                replay(&c.snapshot, &c.events);
            }
        }
        if !d.header.ring() && d.header.dropped_events == 0 {
            // Complete: each fiber's frames balance across the threads that ran it.
            for (stack, segments) in stack_segments(&d) {
                let mut frames = Vec::new();
                for (_, _, events) in segments {
                    for e in events {
                        match e.kind {
                            EventKind::Enter(f) => frames.push(f),
                            EventKind::Exit(f) => {
                                assert_eq!(frames.pop(), Some(f), "{name}: stack {stack}")
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        eprintln!(
            "{name}: {} events, {} threads, {} stacks, {} dropped",
            d.event_count(),
            d.threads.len(),
            d.stacks.len(),
            d.header.dropped_events
        );
    }
}

//! Bytes per event of the compact (version 4) encoding on real traces.
//!
//! Reads each trace's 16-byte events chunk by chunk, re-encodes every
//! chunk's events with [`ChunkEncoder`] from the chunk's own snapshot (as
//! a version-4 recorder would have written that chunk), decodes them back
//! to check the round trip, and prints bytes per event, overall and by
//! kind. Chunks keep their version-3 boundaries, so the named frames at
//! each chunk's start are what a recorder's would be.
//!
//! ```sh
//! cargo run --release -p mtrace-format --example compact_size -- sample-traces/*.bin
//! ```

use std::process::ExitCode;

use mtrace_format::compact::{ChunkEncoder, CompactEvents};
use mtrace_format::layout::{COMPACT_MAX_EVENT_SIZE, TAG_CLASS_SHIFT};
use mtrace_format::{ClockKind, EventKind, TraceFile};

/// Events and bytes of one kind of event.
#[derive(Default, Clone, Copy)]
struct Tally {
    events: u64,
    bytes: u64,
}

impl Tally {
    fn add(&mut self, bytes: usize) {
        self.events += 1;
        self.bytes += bytes as u64;
    }

    fn per_event(&self) -> f64 {
        self.bytes as f64 / self.events.max(1) as f64
    }
}

#[derive(Default)]
struct Totals {
    all: Tally,
    enter: Tally,
    exit_top: Tally,
    exit_named: Tally,
    other: Tally,
    snapshots: u64,
    chunks: u64,
    /// Events by the size class of their tick delta (the tag's bits 5..4).
    tick_classes: [u64; 4],
    clock: &'static str,
}

fn measure(path: &str) -> Result<Totals, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let trace = TraceFile::parse(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let mut t = Totals {
        clock: match trace.header().clock.kind {
            ClockKind::Nanoseconds => "ns",
            ClockKind::Tsc => "tsc",
        },
        ..Totals::default()
    };
    let mut body = Vec::new();
    for index in 0..trace.chunk_slots() {
        let Ok(Some(chunk)) = trace.chunk(index) else {
            continue;
        };
        let events: Vec<_> = chunk.events().map_while(Result::ok).collect();
        body.clear();
        body.resize(events.len() * COMPACT_MAX_EVENT_SIZE, 0);
        let mut enc = ChunkEncoder::from_snapshot(&chunk.snapshot);
        let mut len = 0;
        for e in &events {
            let named_before = enc.state().named;
            let n = enc
                .push(&mut body[len..], e)
                .ok_or("no room in a buffer of the worst case")?;
            t.tick_classes[(body[len] >> TAG_CLASS_SHIFT) as usize & 3] += 1;
            len += n;
            t.all.add(n);
            match e.kind {
                EventKind::Enter(_) => t.enter.add(n),
                EventKind::Exit(_) if enc.state().named + 1 == named_before => t.exit_top.add(n),
                EventKind::Exit(_) => t.exit_named.add(n),
                _ => t.other.add(n),
            }
        }
        let back: Vec<_> = CompactEvents::new(&body[..len], index, 0, &chunk.snapshot)
            .collect::<Result<_, _>>()
            .map_err(|p| format!("{path}: re-encoded chunk does not decode: {p}"))?;
        let clamped: Vec<_> = events
            .iter()
            .scan(chunk.snapshot.tick, |prev, e| {
                *prev = (*prev).max(e.tick);
                Some(mtrace_format::Event {
                    tick: *prev,
                    kind: e.kind,
                })
            })
            .collect();
        if back != clamped {
            return Err(format!("{path}: chunk {index} does not round-trip"));
        }
        t.snapshots += chunk.snapshot.encoded_len() as u64;
        t.chunks += 1;
    }
    Ok(t)
}

/// Bytes per event of `t`, or "-" when it counted none.
fn dash_if_none(t: Tally) -> String {
    if t.events == 0 {
        "-".into()
    } else {
        format!("{:.2}", t.per_event())
    }
}

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: compact_size TRACE...");
        return ExitCode::FAILURE;
    }
    println!(
        "{:<28} {:>9} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7} {:>7}",
        "trace", "events", "B/ev", "enter", "exit", "exit-top", "named", "other", "v3 B/ev"
    );
    let mut failed = false;
    for path in &paths {
        match measure(path) {
            Ok(t) => {
                let name = path.rsplit('/').next().unwrap_or(path);
                let exits = Tally {
                    events: t.exit_top.events + t.exit_named.events,
                    bytes: t.exit_top.bytes + t.exit_named.bytes,
                };
                println!(
                    "{:<28} {:>9} {:>7.2} {:>7.2} {:>7.2} {:>8.1}% {:>9} {:>7.2} {:>7.2}",
                    name,
                    t.all.events,
                    t.all.per_event(),
                    t.enter.per_event(),
                    exits.per_event(),
                    100.0 * t.exit_top.events as f64 / exits.events.max(1) as f64,
                    dash_if_none(t.exit_named),
                    t.other.per_event(),
                    16.0,
                );
                let share = |n: u64| 100.0 * n as f64 / t.all.events.max(1) as f64;
                let [c0, c1, c2, c3] = t.tick_classes.map(share);
                println!(
                    "{:<28} clock {}; tick classes {c0:.1}% {c1:.1}% {c2:.1}% {c3:.1}%; \
                     {} chunks, whose snapshots add {:.2} B/ev",
                    "",
                    t.clock,
                    t.chunks,
                    t.snapshots as f64 / t.all.events.max(1) as f64
                );
            }
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

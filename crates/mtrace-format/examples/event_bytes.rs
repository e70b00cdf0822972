//! Bytes per event of traces as they are stored, whatever their version:
//! the committed event bytes of every chunk over its events, then with
//! the chunks' snapshots, then the whole file (header, names, unused
//! slot room included) over the events.
//!
//! ```sh
//! cargo run --release -p mtrace-format --example event_bytes -- TRACE...
//! ```
//!
//! (`compact_size` instead re-encodes a trace's events as version 4
//! would, to compare the encodings on the same events.)

use std::process::ExitCode;

use mtrace_format::TraceFile;

/// What one trace holds.
struct Stored {
    version: u32,
    events: u64,
    event_bytes: u64,
    snapshot_bytes: u64,
    file_bytes: u64,
}

fn measure(path: &str) -> Result<Stored, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let trace = TraceFile::parse(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let mut s = Stored {
        version: trace.header().version,
        events: 0,
        event_bytes: 0,
        snapshot_bytes: 0,
        file_bytes: bytes.len() as u64,
    };
    for index in 0..trace.chunk_slots() {
        let Ok(Some(chunk)) = trace.chunk(index) else {
            continue;
        };
        s.events += chunk.events().map_while(Result::ok).count() as u64;
        s.event_bytes += chunk.event_bytes().len() as u64;
        s.snapshot_bytes += chunk.snapshot.encoded_len() as u64;
    }
    Ok(s)
}

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: event_bytes TRACE...");
        return ExitCode::FAILURE;
    }
    println!(
        "{:<32} {:>7} {:>10} {:>8} {:>12} {:>9}",
        "trace", "version", "events", "B/event", "+snapshots", "file B/ev"
    );
    let mut failed = false;
    for path in &paths {
        match measure(path) {
            Ok(s) => {
                let per = |b: u64| b as f64 / s.events.max(1) as f64;
                let name = path.rsplit('/').next().unwrap_or(path);
                println!(
                    "{:<32} {:>7} {:>10} {:>8.2} {:>12.2} {:>9.2}",
                    name,
                    s.version,
                    s.events,
                    per(s.event_bytes),
                    per(s.event_bytes + s.snapshot_bytes),
                    per(s.file_bytes),
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

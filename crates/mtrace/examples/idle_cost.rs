//! What an event costs an armed-but-idle recording, against no recording
//! and a recording that records: run it under callgrind and compare the
//! instructions of `events` (see the crate's README, "Record on demand").
//!
//! ```text
//! cargo build --release -p mtrace --example idle_cost
//! valgrind --tool=callgrind --toggle-collect='*idle_cost*events*' \
//!     target/release/examples/idle_cost armed 100000
//! ```
//!
//! Modes: `off` (no recording), `armed` (started armed, never resumed),
//! `on` (recording). Each unit is one `scope!`: an enter and an exit.

use std::hint::black_box;

#[inline(never)]
fn events(units: u64) {
    for i in 0..units {
        let _frame = mtrace::scope!("unit");
        black_box(i);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "armed".into());
    let units: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let path = std::env::temp_dir().join(format!("mtrace-idle-cost-{}.mtrace", std::process::id()));
    let recording = match mode.as_str() {
        "off" => None,
        "armed" => Some(mtrace::Config::new(&path).armed(true)),
        "on" => Some(mtrace::Config::new(&path)),
        other => panic!("mode `{other}`: off, armed or on"),
    }
    .map(|config| mtrace::start(config).expect("trace file"));
    // Warm up (the thread binds, the scope's call site registers), then measure.
    events(1000);
    events(units);
    if let Some(recording) = recording {
        recording.finish().expect("finished");
        let _ = std::fs::remove_file(&path);
    }
}

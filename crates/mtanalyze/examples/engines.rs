//! Runs one engine on a trace, whatever the planner would choose, so that
//! the engines' costs can be compared on the same trace (under callgrind:
//! see `docs/BENCHMARKS.md`, "The stream against the batch"):
//!
//! ```sh
//! cargo build --release -p mtanalyze --example engines
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     "$CARGO_TARGET_DIR"/release/examples/engines batch TRACE
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     "$CARGO_TARGET_DIR"/release/examples/engines stream TRACE --step-events 65536
//! ```
//!
//! Prints what it ran and the report's size (functions, stacks), which
//! both engines give the same.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use mtanalyze::report::Clock;
use mtanalyze::{testing, AnalyzeOptions};

#[derive(Clone, Copy, ValueEnum)]
enum Engine {
    /// Every segment cut, then the stacks replayed (`pipeline.rs`).
    Batch,
    /// Cut and replay in steps of time (`stream/`).
    Stream,
    /// The planner's choice (what `mtanalyze` runs).
    Plan,
}

#[derive(Parser)]
#[command(about = "Run one of the analyzer's engines on a trace")]
struct Args {
    /// The engine.
    engine: Engine,
    /// The trace.
    trace: PathBuf,
    /// Events a stream step reads (the stream only; the planner's is
    /// 65536 or 4194304, by the stacks the trace names: `--debug-plan`).
    #[arg(long, default_value_t = 1 << 16)]
    step_events: u64,
    /// The clock: stack, gil or wall (default: the trace's preferred one).
    #[arg(long)]
    clock: Option<Clock>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let trace = mtanalyze::load(&args.trace)?;
    let opts = AnalyzeOptions {
        clock: args.clock,
        ..AnalyzeOptions::default()
    };
    let report = match args.engine {
        Engine::Batch => testing::analyze_batched(&trace, &opts)?,
        Engine::Plan => mtanalyze::analyze(&trace, &opts)?,
        Engine::Stream => testing::analyze_streamed_with(&trace, &opts, args.step_events)?
            .ok_or("the stream gave the trace back (a stack run after its end)")?,
    };
    println!(
        "{} functions, {} stacks",
        report.functions.len(),
        report.stacks.len()
    );
    Ok(())
}

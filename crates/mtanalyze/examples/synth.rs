//! Writes a large, realistic synthetic trace through the format crate's
//! writer (see `mtanalyze_testkit::synth` for what it contains).
//!
//! ```text
//! cargo run --release -p mtanalyze --example synth -- \
//!     --events 50000000 --threads 4 --fibers 16 --seed 1 --out /tmp/synth.bin
//! # many short-lived tasks instead (the benchmark's many-task trace):
//! cargo run --release -p mtanalyze --example synth -- --tasks 500000 --threads 4 --out /tmp/tasks.bin
//! ```

use std::path::PathBuf;

use clap::Parser;

use mtanalyze_testkit::synth as synth_gen;

#[derive(Parser)]
#[command(about = "Write a synthetic mtrace trace")]
struct Args {
    /// Events to write (approximately: open frames are not closed).
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Threads (with `--tasks`: worker threads).
    #[arg(long, default_value_t = 4)]
    threads: u64,
    /// Write this many short-lived async tasks, each on its own logical
    /// stack, instead of the fiber trace (`--events`, `--fibers` and
    /// `--functions` are then ignored).
    #[arg(long, default_value_t = 0)]
    tasks: u64,
    /// With `--tasks`: tasks alive at once.
    #[arg(long, default_value_t = 256)]
    in_flight: u64,
    /// Logical stacks (fibers) that migrate between threads.
    #[arg(long, default_value_t = 16)]
    fibers: u64,
    /// Distinct functions.
    #[arg(long, default_value_t = 300)]
    functions: u32,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file.
    #[arg(long)]
    out: PathBuf,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let cmdline = std::env::args().collect::<Vec<_>>().join("\0");
    if a.tasks > 0 {
        let opts = synth_gen::TaskOptions {
            tasks: a.tasks,
            workers: a.threads,
            in_flight: a.in_flight,
            seed: a.seed,
        };
        let written = synth_gen::generate_tasks(&opts, &a.out, cmdline)?;
        println!(
            "wrote {written} events of {} tasks to {}",
            a.tasks,
            a.out.display()
        );
        return Ok(());
    }
    let opts = synth_gen::SynthOptions {
        events: a.events,
        threads: a.threads,
        fibers: a.fibers,
        functions: a.functions,
        seed: a.seed,
    };
    let written = synth_gen::generate(&opts, &a.out, cmdline)?;
    println!("wrote {written} events to {}", a.out.display());
    Ok(())
}

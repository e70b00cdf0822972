//! The `mtanalyze` command.
//!
//! ```text
//! mtanalyze [OPTIONS] TRACE        report (the default command)
//! mtanalyze check [--format F] TRACE
//! mtanalyze convert IN OUT.bin
//! mtanalyze diff [OPTIONS] BASE NEW [--flamegraph OUT.svg]
//! mtanalyze flamegraph [OPTIONS] TRACE [-o OUT.svg]
//! mtanalyze export --format chrome|speedscope|callgrind [OPTIONS] TRACE [-o OUT]
//! ```
//!
//! Outputs without `-o` (or with `-o -`) go to stdout. A progress indicator
//! appears on stderr when a run takes longer than a second, and only when
//! stderr is a terminal.
//!
//! The first positional argument is a subcommand when it names one, else the
//! trace of the default report. A trace file literally named like a
//! subcommand is reached with `mtanalyze -- check` (or `./check`).
//!
//! Failures print one line, `mtanalyze: <message>`, on stderr and exit with
//! status 2 (the status clap uses for usage errors). `diff --fail-if` exits
//! with status 1 when a rule holds, after naming the rows that break it. A closed stdout
//! (`mtanalyze trace | head`) ends the run quietly with status 0.

mod cli;

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::Parser;

use cli::args::{Cli, Command};
use cli::output::{say, Failure};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = run(cli, &mut out).and_then(|()| out.flush().map_err(Failure::Output));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            say(&format!("mtanalyze: cannot write the output: {e}"));
            ExitCode::from(2)
        }
        Err(Failure::Message(m)) => {
            say(&format!("mtanalyze: {m}"));
            ExitCode::from(2)
        }
        Err(Failure::Gate(n)) => {
            let rows = if n == 1 { "row breaks" } else { "rows break" };
            say(&format!("mtanalyze: {n} {rows} a --fail-if rule"));
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli, out: &mut dyn Write) -> Result<(), Failure> {
    match cli.command {
        Some(Command::Check(args)) => cli::file::check(&args, out),
        Some(Command::Convert(args)) => cli::file::convert(&args, out),
        Some(Command::Diff(args)) => cli::diff::diff(&args, out),
        Some(Command::Flamegraph(args)) => cli::export::flamegraph(&args, out),
        Some(Command::Export(args)) => cli::export::export(&args, out),
        None => cli::report::report(&cli.report, out),
    }
}

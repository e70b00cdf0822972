//! The `mtanalyze` command: [`mtanalyze_cli::run`] on the process's
//! arguments and stdout (see that crate for the commands).

use std::io::{self, BufWriter};
use std::process::ExitCode;

fn main() -> ExitCode {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    ExitCode::from(mtanalyze_cli::run(std::env::args_os(), &mut out))
}

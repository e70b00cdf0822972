//! Where a command's output goes, and how a run fails: one line on stderr.
//!
//! Every file a command writes goes through [`Output`], which refuses a
//! path that is one of the inputs (writing would destroy it) and removes a
//! half-written file when writing fails.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;

/// Why a run failed.
pub(crate) enum Failure {
    /// Writing the output failed (a closed pipe is not reported).
    Output(io::Error),
    /// Anything else: one line for the user.
    Message(String),
    /// `diff --fail-if`: this many rows broke a rule (already named on stderr).
    Gate(usize),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Output(e)
    }
}

/// A failure that is one line for the user.
pub(crate) fn message(e: impl std::fmt::Display) -> Failure {
    Failure::Message(e.to_string())
}

/// One line on stderr. A closed stderr is ignored (`eprintln!` would panic).
pub(crate) fn say(line: &str) {
    let _ = writeln!(io::stderr(), "{line}");
}

/// Where a command's output goes: stdout, or a file it must not share
/// with an input.
pub(crate) enum Output<'a> {
    Stdout,
    File(&'a Path),
}

impl<'a> Output<'a> {
    /// `path` (none or `-`: stdout), refused if it is one of `inputs`.
    pub(crate) fn new(path: Option<&'a Path>, inputs: &[&Path]) -> Result<Output<'a>, Failure> {
        match path {
            None => Ok(Output::Stdout),
            Some(p) if p == Path::new("-") => Ok(Output::Stdout),
            Some(p) => {
                if inputs.iter().any(|i| same_file(i, p)) {
                    return Err(Failure::Message(format!(
                        "{}: input and output are the same file",
                        p.display()
                    )));
                }
                Ok(Output::File(p))
            }
        }
    }

    /// The width tables fit in: `--width N` (0: any), else the terminal's
    /// when the output is one (`COLUMNS` if set, else the window size),
    /// else any width: a file or a pipe gets the full names.
    pub(crate) fn table_width(&self, arg: Option<usize>) -> Option<usize> {
        if let Some(n) = arg {
            return (n > 0).then_some(n);
        }
        if !matches!(self, Output::Stdout) || !io::stdout().is_terminal() {
            return None;
        }
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse().ok());
        columns
            .filter(|&c: &usize| c > 0)
            .or_else(|| {
                console::Term::stdout()
                    .size_checked()
                    .map(|(_, w)| w as usize)
            })
            .or(Some(80))
    }

    /// Runs `write` on stdout or on the file; a failed file is removed.
    pub(crate) fn write(
        &self,
        stdout: &mut dyn Write,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), Failure> {
        match self {
            Output::Stdout => Ok(write(stdout)?),
            Output::File(path) => {
                let failed = |e: io::Error| message(format!("{}: {e}", path.display()));
                let file = std::fs::File::create(path).map_err(failed)?;
                let mut w = BufWriter::new(file);
                let result = write(&mut w).and_then(|()| w.flush());
                if let Err(e) = result {
                    drop(w);
                    let _ = std::fs::remove_file(path);
                    return Err(failed(e));
                }
                Ok(())
            }
        }
    }
}

/// Whether both paths name one existing file (writing would destroy the input).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

//! `check` (what a trace file holds) and `convert` (any trace as a binary
//! one, with 16-byte or, `--compact`, compact events).

use std::io::Write;

use crate::args::{CheckArgs, CheckFormat, ConvertArgs};
use crate::load;
use crate::output::{message, say, Failure, Output};
use mtanalyze::render;

pub(crate) fn check(args: &CheckArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(args.output.as_deref(), &[&args.trace])?;
    let trace = load(&args.trace)?;
    let check = mtanalyze::check(&trace).map_err(message)?;
    target.write(out, |w| match args.format {
        CheckFormat::Json => render::json::check(w, &check),
        CheckFormat::Table => render::check::human(w, &check),
    })
}

pub(crate) fn convert(args: &ConvertArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(Some(&args.output), &[&args.input])?;
    let trace = load(&args.input)?;
    if !args.compact {
        return target.write(out, |w| w.write_all(trace.bytes()));
    }
    // The loaded trace is in 16-byte events whatever the input was (a
    // compact input was expanded when loaded): compact it again.
    let file = mtrace_format::TraceFile::parse(trace.bytes()).map_err(message)?;
    let converted = mtrace_format::convert::compact(&file).map_err(message)?;
    for problem in converted.damaged.iter().chain(&converted.cut) {
        say(&format!(
            "{}: {problem} (the events before it are kept)",
            args.input.display()
        ));
    }
    target.write(out, |w| w.write_all(&converted.bytes))
}

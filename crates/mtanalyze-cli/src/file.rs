//! `check` (what a trace file holds) and `convert` (any trace as a binary one).

use std::io::Write;

use crate::args::{CheckArgs, CheckFormat, ConvertArgs};
use crate::load;
use crate::output::{message, Failure, Output};
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
    target.write(out, |w| w.write_all(trace.bytes()))
}

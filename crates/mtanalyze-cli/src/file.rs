//! `check` (what a trace file holds) and `convert` (any trace as a binary
//! one, with 16-byte or, `--compact`, compact events).

use std::io::Write;

use crate::args::CheckFormat;
use crate::load;
use crate::output::{message, say, Failure, Output};
use crate::plan::{CheckPlan, ConvertPlan};
use mtanalyze::render;

pub(crate) fn check(plan: &CheckPlan, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(plan.output.as_deref(), &[&plan.trace])?;
    let trace = load(&plan.trace)?;
    let check = mtanalyze::check(&trace).map_err(message)?;
    target.write(out, |w| match plan.format {
        CheckFormat::Json => render::json::check(w, &check),
        CheckFormat::Table => render::check::human(w, &check),
    })
}

pub(crate) fn convert(plan: &ConvertPlan, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(Some(&plan.output), &[&plan.input])?;
    let trace = load(&plan.input)?;
    if !plan.compact {
        return target.write(out, |w| w.write_all(trace.bytes()));
    }
    // The loaded trace is in 16-byte events whatever the input was (a
    // compact input was expanded when loaded): compact it again.
    let file = mtrace_format::TraceFile::parse(trace.bytes()).map_err(message)?;
    let converted = mtrace_format::convert::compact(&file).map_err(message)?;
    for problem in converted.damaged.iter().chain(&converted.cut) {
        say(&format!(
            "{}: {problem} (the events before it are kept)",
            plan.input.display()
        ));
    }
    target.write(out, |w| w.write_all(&converted.bytes))
}

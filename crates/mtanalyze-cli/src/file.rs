//! `check` (what a trace file holds) and `convert` (any trace as a binary
//! one, with 16-byte or, `--compact`, compact events).

use std::borrow::Cow;
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
    let bytes = sixteen_byte(&trace)?;
    if !plan.compact {
        return target.write(out, |w| w.write_all(&bytes));
    }
    // Compacted from its 16-byte events whatever the input was (a compact
    // input is expanded first), so a compact input is written again.
    let file = mtrace_format::TraceFile::parse(&bytes).map_err(message)?;
    let converted = mtrace_format::convert::compact(&file).map_err(message)?;
    for problem in converted.damaged.iter().chain(&converted.cut) {
        say(&format!(
            "{}: {problem} (the events before it are kept)",
            plan.input.display()
        ));
    }
    target.write(out, |w| w.write_all(&converted.bytes))
}

/// The trace in 16-byte events: a compact (version 4) one expanded, every
/// slot sized for the events of the largest as their lengths count them,
/// and damage dropped without a word, as the analyzer's load did when it
/// held such an image (what `convert` writes has not changed since).
fn sixteen_byte(trace: &mtanalyze::LoadedTrace) -> Result<Cow<'_, [u8]>, Failure> {
    use mtrace_format::convert::{expand_into, image_layout, image_start, slot_bound};
    let file = mtrace_format::TraceFile::parse(trace.bytes()).map_err(message)?;
    if !file.is_compact() {
        return Ok(Cow::Borrowed(trace.bytes()));
    }
    let slots = file.chunk_slots();
    let largest = (0..slots).filter_map(|i| slot_bound(&file, i)).max();
    let layout = image_layout(&file, slots, largest.unwrap_or(0))
        .map_err(|e| message(format!("{}: {e}", trace.source)))?;
    let mut image = vec![0; layout.len];
    image_start(&file, &layout, &mut image);
    let mut named = Vec::new();
    let slots = image[layout.chunks_offset..].chunks_exact_mut(layout.chunk_size);
    for (i, slot) in slots.enumerate() {
        expand_into(&file, i as u64, &mut named, slot);
    }
    Ok(Cow::Owned(image))
}

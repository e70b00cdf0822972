//! Outputs for other tools: `flamegraph` (an SVG) and `export` (Chrome
//! trace JSON, speedscope, callgrind, pprof).

use std::io::Write;

use crate::cli::args::{analyze_options, ExportArgs, ExportFormat, FlamegraphArgs};
use crate::cli::output::{message, Failure, Output};
use crate::cli::progress::Progress;
use crate::cli::{analyze, load, say_warnings};
use mtanalyze::{render, PathMode, Timelines};

pub(crate) fn flamegraph(args: &FlamegraphArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(args.output.as_deref(), &[&args.trace])?;
    let paths = if args.per_thread {
        PathMode::PerStack
    } else {
        PathMode::Merged
    };
    let options = analyze_options(
        &args.clock,
        Some(&args.select),
        paths,
        args.collapse.recursion,
    );
    let report = analyze(&args.trace, &options)?;
    let mut svg = Vec::new();
    render::flamegraph::flamegraph(&mut svg, &report, args.filter.as_ref())
        .map_err(|e| message(format!("{}: {e}", args.trace.display())))?;
    target.write(out, |w| w.write_all(&svg))?;
    out.flush()?;
    say_warnings(&report, None);
    Ok(())
}

pub(crate) fn export(args: &ExportArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(args.output.as_deref(), &[&args.trace])?;
    let options = analyze_options(&args.clock, Some(&args.select), PathMode::Off, None);
    if args.format == ExportFormat::Callgrind {
        let report = analyze(&args.trace, &options)?;
        target.write(out, |w| render::callgrind::callgrind(w, &report))?;
        out.flush()?;
        say_warnings(&report, None);
        return Ok(());
    }
    if args.format == ExportFormat::Pprof {
        let options = analyze_options(&args.clock, Some(&args.select), PathMode::Merged, None);
        let report = analyze(&args.trace, &options)?;
        target.write(out, |w| render::pprof::pprof(w, &report))?;
        out.flush()?;
        say_warnings(&report, None);
        return Ok(());
    }
    let progress = Progress::spinner(format!("reading {}", args.trace.display()));
    let trace = load(&args.trace)?;
    let timelines = Timelines::new(&trace, &options).map_err(message)?;
    progress.finish();
    let events = timelines.events();
    let progress = Progress::bar(events, format!("exporting {}", args.trace.display()));
    let mut step = |n| progress.inc(n);
    target.write(out, |w| match args.format {
        ExportFormat::Speedscope => render::speedscope::speedscope(w, &timelines, &mut step),
        _ => render::chrome::chrome(w, &timelines, &mut step),
    })?;
    progress.finish();
    out.flush()?;
    Ok(())
}

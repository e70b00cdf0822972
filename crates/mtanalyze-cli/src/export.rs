//! Outputs for other tools: `flamegraph` (an SVG) and `export` (Chrome
//! trace JSON, speedscope, callgrind, pprof, and with the `parquet`
//! feature a directory of Parquet tables).

use std::io::Write;

use crate::args::ExportFormat;
use crate::output::{message, Failure, Output};
use crate::plan::{ExportPlan, FlamegraphPlan};
use crate::progress::Progress;
use crate::{analyze, load, say_warnings};
use mtanalyze::{render, timeline::Timelines};

pub(crate) fn flamegraph(plan: &FlamegraphPlan, out: &mut dyn Write) -> Result<(), Failure> {
    let target = Output::new(plan.output.as_deref(), &[&plan.trace])?;
    let report = analyze(&plan.trace, &plan.options)?;
    let mut svg = Vec::new();
    render::flamegraph::flamegraph(&mut svg, &report, plan.filter.as_ref())
        .map_err(|e| message(format!("{}: {e}", plan.trace.display())))?;
    target.write(out, |w| w.write_all(&svg))?;
    out.flush()?;
    say_warnings(&report, None);
    Ok(())
}

pub(crate) fn export(plan: &ExportPlan, out: &mut dyn Write) -> Result<(), Failure> {
    let (trace, format, output, options) = match plan {
        ExportPlan::One {
            trace,
            format,
            output,
            options,
        } => (trace, *format, output, options),
        #[cfg(feature = "parquet")]
        ExportPlan::Parquet {
            traces,
            dir,
            frames,
            options,
        } => return parquet(traces, dir, *frames, options),
    };
    let target = Output::new(output.as_deref(), &[trace])?;
    if format == ExportFormat::Callgrind {
        let report = analyze(trace, options)?;
        target.write(out, |w| render::callgrind::callgrind(w, &report))?;
        out.flush()?;
        say_warnings(&report, None);
        return Ok(());
    }
    if format == ExportFormat::Pprof {
        let report = analyze(trace, options)?;
        target.write(out, |w| render::pprof::pprof(w, &report))?;
        out.flush()?;
        say_warnings(&report, None);
        return Ok(());
    }
    let progress = Progress::spinner(format!("reading {}", trace.display()));
    let loaded = load(trace)?;
    let timelines = Timelines::new(&loaded, options).map_err(message)?;
    progress.finish();
    let events = timelines.events();
    let progress = Progress::bar(events, format!("exporting {}", trace.display()));
    let mut step = |n| progress.inc(n);
    target.write(out, |w| match format {
        ExportFormat::Speedscope => render::speedscope::speedscope(w, &timelines, &mut step),
        _ => render::chrome::chrome(w, &timelines, &mut step),
    })?;
    progress.finish();
    out.flush()?;
    Ok(())
}

/// `export --format parquet -o DIR`: every trace's report (and with
/// `--frames` its frames) as rows of the tables in DIR, trace by trace.
#[cfg(feature = "parquet")]
fn parquet(
    traces: &[std::path::PathBuf],
    dir: &std::path::Path,
    frames: bool,
    options: &mtanalyze::AnalyzeOptions,
) -> Result<(), Failure> {
    use std::path::Path;

    use mtanalyze::render::parquet::ParquetTables;
    use mtanalyze::ManyTraces;

    use crate::{each_report, expand_traces};

    if dir.exists() && !dir.is_dir() {
        return Err(message(format!("{}: not a directory", dir.display())));
    }
    let traces = expand_traces(traces)?;
    let inputs: Vec<&Path> = traces.iter().map(|p| p.as_path()).collect();
    let files = ParquetTables::paths(dir, frames);
    for f in &files {
        // Refuses a table file that is one of the inputs.
        Output::new(Some(f), &inputs)?;
    }
    let mut tables = ParquetTables::create(dir, frames).map_err(message)?;
    let progress = Progress::spinner(format!("exporting {} traces", traces.len()));
    let several = traces.len() > 1;
    let written = each_report(&traces, options, ManyTraces::Report, |path, report| {
        tables.add(report).map_err(message)?;
        if frames {
            let trace = load(path)?;
            let timelines = Timelines::new(&trace, options).map_err(message)?;
            tables
                .add_frames(report, &timelines, &mut |_| {})
                .map_err(message)?;
        }
        let prefix = path.display().to_string();
        say_warnings(report, several.then_some(prefix.as_str()));
        Ok(())
    })
    .and_then(|_| tables.finish().map_err(message));
    progress.finish();
    if written.is_err() {
        // Half-written tables would read as a (wrong) export.
        for f in &files {
            let _ = std::fs::remove_file(f);
        }
    }
    written
}

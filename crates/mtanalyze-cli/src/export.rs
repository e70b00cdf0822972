//! Outputs for other tools: `flamegraph` (an SVG) and `export` (Chrome
//! trace JSON, speedscope, callgrind, pprof, and with the `parquet`
//! feature a directory of Parquet tables).

use std::io::Write;

use crate::args::{analyze_options, rows_if, ExportArgs, ExportFormat, FlamegraphArgs};
use crate::output::{message, Failure, Output};
use crate::progress::Progress;
use crate::{analyze, load, say_warnings};
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
    let report = analyze(&args.trace, &rows_if(false, options))?;
    let mut svg = Vec::new();
    render::flamegraph::flamegraph(&mut svg, &report, args.filter.as_ref())
        .map_err(|e| message(format!("{}: {e}", args.trace.display())))?;
    target.write(out, |w| w.write_all(&svg))?;
    out.flush()?;
    say_warnings(&report, None);
    Ok(())
}

pub(crate) fn export(args: &ExportArgs, out: &mut dyn Write) -> Result<(), Failure> {
    if args.format == ExportFormat::Parquet {
        return parquet(args);
    }
    if args.frames {
        return Err(message("--frames applies to --format parquet"));
    }
    let [trace] = args.traces.as_slice() else {
        return Err(message(
            "this format holds one trace: give one (several traces go to --format parquet, \
             or into one report with `mtanalyze A B`)",
        ));
    };
    let target = Output::new(args.output.as_deref(), &[trace])?;
    let options = analyze_options(&args.clock, Some(&args.select), PathMode::Off, None);
    if args.format == ExportFormat::Callgrind {
        let report = analyze(trace, &rows_if(false, options))?;
        target.write(out, |w| render::callgrind::callgrind(w, &report))?;
        out.flush()?;
        say_warnings(&report, None);
        return Ok(());
    }
    if args.format == ExportFormat::Pprof {
        let options = analyze_options(&args.clock, Some(&args.select), PathMode::Merged, None);
        let report = analyze(trace, &rows_if(false, options))?;
        target.write(out, |w| render::pprof::pprof(w, &report))?;
        out.flush()?;
        say_warnings(&report, None);
        return Ok(());
    }
    let progress = Progress::spinner(format!("reading {}", trace.display()));
    let loaded = load(trace)?;
    let timelines = Timelines::new(&loaded, &options).map_err(message)?;
    progress.finish();
    let events = timelines.events();
    let progress = Progress::bar(events, format!("exporting {}", trace.display()));
    let mut step = |n| progress.inc(n);
    target.write(out, |w| match args.format {
        ExportFormat::Speedscope => render::speedscope::speedscope(w, &timelines, &mut step),
        _ => render::chrome::chrome(w, &timelines, &mut step),
    })?;
    progress.finish();
    out.flush()?;
    Ok(())
}

/// `export --format parquet` in a build without the `parquet` feature.
#[cfg(not(feature = "parquet"))]
fn parquet(_: &ExportArgs) -> Result<(), Failure> {
    Err(message(
        "this mtanalyze was built without Parquet support: build it with \
         `cargo build --release -p mtanalyze-cli --features parquet`",
    ))
}

/// `export --format parquet -o DIR`: every trace's report (and with
/// `--frames` its frames) as rows of the tables in DIR, trace by trace.
#[cfg(feature = "parquet")]
fn parquet(args: &ExportArgs) -> Result<(), Failure> {
    use std::path::Path;

    use mtanalyze::render::parquet::ParquetTables;
    use mtanalyze::ManyTraces;

    use crate::{each_report, expand_traces};

    let Some(dir) = args.output.as_deref().filter(|d| *d != Path::new("-")) else {
        return Err(message(
            "--format parquet writes a directory of tables: give it with -o DIR",
        ));
    };
    if dir.exists() && !dir.is_dir() {
        return Err(message(format!("{}: not a directory", dir.display())));
    }
    let traces = expand_traces(&args.traces)?;
    let inputs: Vec<&Path> = traces.iter().map(|p| p.as_path()).collect();
    let files = ParquetTables::paths(dir, args.frames);
    for f in &files {
        // Refuses a table file that is one of the inputs.
        Output::new(Some(f), &inputs)?;
    }
    let options = analyze_options(&args.clock, Some(&args.select), PathMode::Off, None);
    let mut tables = ParquetTables::create(dir, args.frames).map_err(message)?;
    let progress = Progress::spinner(format!("exporting {} traces", traces.len()));
    let several = traces.len() > 1;
    let written = each_report(&traces, &options, ManyTraces::Report, |path, report| {
        tables.add(report).map_err(message)?;
        if args.frames {
            let trace = load(path)?;
            let timelines = Timelines::new(&trace, &options).map_err(message)?;
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

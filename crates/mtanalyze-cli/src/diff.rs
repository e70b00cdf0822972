//! `diff BASE NEW`: what got faster or slower, as a table, JSON, folded
//! paths, and optionally a differential flame graph.

use std::io::Write;
use std::path::Path;

use crate::args::{analyze_options, gate_rules, rows_if, DiffArgs, DiffFormat};
use crate::output::{message, say, Failure, Output};
use crate::progress::Progress;
use crate::{expand_traces, load, say_warnings};
use mtanalyze::view::{self, DiffViewOptions, EdgeSelection};
use mtanalyze::{render, DiffOptions, PathMode, Report};

pub(crate) fn diff(args: &DiffArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let (rules, min_change) = gate_rules(args).map_err(Failure::Message)?;
    let folded = args.format == DiffFormat::Folded;
    let row_options = [
        args.limit.is_some(),
        args.min_change.is_some(),
        args.callers.is_some(),
        args.callees.is_some(),
    ];
    if folded && row_options.contains(&true) {
        return Err(Failure::Message(
            "--format folded writes every call path: --limit, --min-change, --callers and \
             --callees do not apply (--filter does)"
                .into(),
        ));
    }
    if args.output.is_some() && args.output == args.flamegraph {
        return Err(Failure::Message(
            "-o and --flamegraph name the same file".into(),
        ));
    }
    let side = |one: &Option<std::path::PathBuf>, runs: &[std::path::PathBuf]| match one {
        Some(p) => expand_traces(std::slice::from_ref(p)),
        None => expand_traces(runs),
    };
    let (base_paths, new_paths) = (
        side(&args.base, &args.base_runs)?,
        side(&args.new, &args.new_runs)?,
    );
    let inputs: Vec<&Path> = base_paths
        .iter()
        .chain(&new_paths)
        .map(|p| p.as_path())
        .collect();
    let target = Output::new(args.output.as_deref(), &inputs)?;
    let svg_target = args
        .flamegraph
        .as_deref()
        .map(|svg| Output::new(Some(svg), &inputs))
        .transpose()?;
    let html = args.format == DiffFormat::Html;
    if html && row_options.contains(&true) {
        return Err(Failure::Message(
            "--format html holds every row: --limit, --min-change, --callers and --callees \
             do not apply (the page filters and sorts itself)"
                .into(),
        ));
    }
    let paths = folded || html || args.flamegraph.is_some();
    if args.collapse.recursion.is_some() && !paths {
        return Err(Failure::Message(
            "--collapse-recursion applies to --format folded and html, and --flamegraph".into(),
        ));
    }
    let paths = if paths {
        PathMode::Merged
    } else {
        PathMode::Off
    };
    // A diff shows no stack.
    let options = rows_if(
        false,
        analyze_options(&args.clock, None, paths, args.collapse.recursion),
    );
    let analyze = |path: &Path| -> Result<Report, Failure> {
        mtanalyze::analyze(&load(path)?, &options).map_err(message)
    };
    let name = |paths: &[std::path::PathBuf]| match paths {
        [one] => one.display().to_string(),
        many => format!("{} runs", many.len()),
    };
    let progress = Progress::spinner(format!(
        "analyzing {} and {}",
        name(&base_paths),
        name(&new_paths)
    ));
    let reduce = |paths: &[std::path::PathBuf]| -> Result<mtanalyze::Runs, Failure> {
        let reports = mtanalyze::threads::map_collect(paths, |p| analyze(p))
            .into_iter()
            .collect::<Result<Vec<Report>, Failure>>()?;
        mtanalyze::runs(reports).ok_or_else(|| message("no trace given"))
    };
    let (base_runs, new_runs) =
        mtanalyze::threads::join(|| reduce(&base_paths), || reduce(&new_paths));
    progress.finish();
    let (base_runs, new_runs) = (base_runs?, new_runs?);
    let (base, new) = (&base_runs.median, &new_runs.median);
    if base.clock != new.clock {
        return Err(Failure::Message(format!(
            "the traces prefer different clocks ({}: {}, {}: {}); choose one with --clock",
            name(&base_paths),
            base.clock,
            name(&new_paths),
            new.clock
        )));
    }
    let mut diff = mtanalyze::diff(
        base,
        new,
        DiffOptions {
            normalize: args.normalize,
            significance: mtanalyze::SignificanceOptions {
                confidence: args.confidence,
                min_effect_pct: args.min_effect,
                min_share_pct: args.min_share,
            },
        },
    );
    mtanalyze::attach_runs(&mut diff, &base_runs, &new_runs);
    // The picture first: a failure leaves no half-written output behind.
    let svg = match &args.flamegraph {
        Some(path) => {
            let mut svg = Vec::new();
            render::flamegraph::differential(&mut svg, &diff, args.filter.as_ref())
                .map_err(|e| message(format!("{}: {e}", path.display())))?;
            Some(svg)
        }
        None => None,
    };
    let view = DiffViewOptions {
        sort: args.sort.into(),
        limit: args.limit,
        filter: args.filter.clone(),
        min_change_pct: args.min_change,
    };
    // The gates before the output: the page shows their verdict.
    let breaches = mtanalyze::gate(&diff, &rules, min_change);
    target.write(out, |w| match args.format {
        DiffFormat::Table => {
            let sections = render::diff::TableSections {
                callers: args.callers.clone(),
                callees: args.callees.clone(),
                width: target.table_width(args.width),
            };
            render::diff::table(w, &diff, &view, &sections)
        }
        DiffFormat::Json => {
            let edges = EdgeSelection {
                callers_of: args.callers.clone(),
                callees_of: args.callees.clone(),
            };
            render::diff::json(w, &view::filtered_diff(&diff, &view, &edges))
        }
        DiffFormat::Folded => render::diff::folded(w, &diff, args.filter.as_ref()),
        DiffFormat::Markdown => {
            let rows = view::diff_function_rows(&diff, &view);
            render::markdown::diff(w, &diff, &rows)
        }
        DiffFormat::Html => {
            let notes = [base, new]
                .into_iter()
                .flat_map(|r| {
                    let lines = [
                        render::warnings_summary(&r.warnings),
                        render::lost_summary(&r.trace),
                    ];
                    lines
                        .into_iter()
                        .flatten()
                        .map(move |l| format!("{}: {l}", r.trace.source))
                })
                .collect();
            let page = render::html::DiffPage {
                rules: &args.fail_if,
                breaches: &breaches,
                notes,
                collapse: args.collapse.recursion.map(|c| {
                    match c {
                        crate::args::CollapseArg::Direct => "direct",
                        crate::args::CollapseArg::All => "all",
                    }
                    .to_owned()
                }),
            };
            render::html::diff(w, &diff, &page)
        }
    })?;
    out.flush()?;
    if let (Some(target), Some(svg)) = (svg_target, svg) {
        target.write(out, |w| w.write_all(&svg))?;
    }
    for report in [base, new] {
        say_warnings(report, Some(&report.trace.source));
    }
    // The gates' verdict closes the output.
    if breaches.is_empty() {
        return Ok(());
    }
    for b in &breaches {
        say(&format!("mtanalyze: fail-if {}", render::diff::breach(b)));
    }
    Err(Failure::Gate(breaches.len()))
}

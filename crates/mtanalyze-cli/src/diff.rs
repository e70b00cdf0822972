//! `diff BASE NEW`: what got faster or slower, as a table, JSON, folded
//! paths, and optionally a differential flame graph. Either side may be
//! traces or saved reports (`--format json`'s output: `saved.rs`), in any
//! mix.

use std::io::Write;
use std::path::Path;

use crate::args::DiffFormat;
use crate::output::{message, say, Failure, Output};
use crate::plan::DiffPlan;
use crate::progress::Progress;
use crate::saved;
use crate::{expand_traces, load, say_warnings};
use mtanalyze::view;
use mtanalyze::{render, Report};

pub(crate) fn diff(plan: &DiffPlan, out: &mut dyn Write) -> Result<(), Failure> {
    let (base_paths, new_paths) = (expand_traces(&plan.base)?, expand_traces(&plan.new)?);
    let inputs: Vec<&Path> = base_paths
        .iter()
        .chain(&new_paths)
        .map(|p| p.as_path())
        .collect();
    let target = Output::new(plan.output.as_deref(), &inputs)?;
    let svg_target = plan
        .flamegraph
        .as_deref()
        .map(|svg| Output::new(Some(svg), &inputs))
        .transpose()?;
    let options = &plan.options;
    // A saved report stands for its trace, if it can (`saved::fit`).
    let analyze = |path: &Path| -> Result<Report, Failure> {
        match saved::read(path)? {
            Some(report) => saved::fit(path, &report, options).map(|()| report),
            None => mtanalyze::analyze(&load(path)?, options).map_err(message),
        }
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
    let reduce = |paths: &[std::path::PathBuf]| -> Result<mtanalyze::report::Runs, Failure> {
        let reports = mtanalyze::threads::map_collect(paths, |p| analyze(p))
            .into_iter()
            .collect::<Result<Vec<Report>, Failure>>()?;
        mtanalyze::report::runs(reports).ok_or_else(|| message("no trace given"))
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
    let mut diff = mtanalyze::diff(base, new, plan.diff);
    mtanalyze::report::attach_runs(&mut diff, &base_runs, &new_runs);
    // The picture first: a failure leaves no half-written output behind.
    let view = &plan.view;
    let svg = match &plan.flamegraph {
        Some(path) => {
            let mut svg = Vec::new();
            render::flamegraph::differential(&mut svg, &diff, view.filter.as_ref())
                .map_err(|e| message(format!("{}: {e}", path.display())))?;
            Some(svg)
        }
        None => None,
    };
    // The gates before the output: the page shows their verdict.
    let breaches = mtanalyze::gate(&diff, &plan.rules, plan.min_change_ns);
    target.write(out, |w| match plan.format {
        DiffFormat::Table => {
            let sections = render::diff::TableSections {
                callers: plan.edges.callers_of.clone(),
                callees: plan.edges.callees_of.clone(),
                width: target.table_width(plan.width),
            };
            render::diff::table(w, &diff, view, &sections)
        }
        DiffFormat::Json => render::diff::json(w, &view::filtered_diff(&diff, view, &plan.edges)),
        DiffFormat::Folded => render::diff::folded(w, &diff, view.filter.as_ref()),
        DiffFormat::Markdown => {
            let rows = view::diff_function_rows(&diff, view);
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
                rules: &plan.rule_texts,
                breaches: &breaches,
                notes,
                collapse: plan.collapse.map(str::to_owned),
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

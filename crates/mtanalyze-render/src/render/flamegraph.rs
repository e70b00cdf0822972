//! Flame graph SVGs, drawn by the `inferno` crate (the Rust port of
//! `flamegraph.pl`) from the folded lines of [`super::folded`] or of a diff.
//!
//! * `mtanalyze flamegraph TRACE`: widths are self time under the report's
//!   clock, so paused time is not drawn as if the frame ran.
//! * `mtanalyze diff BASE NEW --flamegraph`: a differential flame graph;
//!   widths are the new trace's times, red frames got slower, blue faster
//!   (inferno's reading of two-column folded lines), on a scale set by the
//!   paths both traces have (see `color_scaled`).

use std::io::{self, Write};

use inferno::flamegraph::{from_lines, Options};
use regex::Regex;

use mtanalyze_model::diff::DiffReport;
use mtanalyze_model::report::Report;

/// Why no picture was drawn.
#[derive(Debug, thiserror::Error)]
pub enum FlamegraphError {
    /// Every call path has zero self time (or the filter kept none).
    #[error("nothing to draw: no call path has any self time")]
    Empty,
    /// Writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

fn options(title: String, subtitle: String) -> Options<'static> {
    let mut o = Options::default();
    o.title = title;
    o.subtitle = Some(subtitle);
    o.count_name = "ns".into();
    o.name_type = "Function:".into();
    // Same input, same picture: colours from the names, not at random.
    o.deterministic = true;
    o
}

fn draw(
    out: &mut dyn Write,
    mut opts: Options<'_>,
    lines: &[String],
) -> Result<(), FlamegraphError> {
    from_lines(&mut opts, lines.iter().map(String::as_str), out)?;
    Ok(())
}

/// The flame graph of a report with call paths. Title: the trace; subtitle:
/// the clock and what the widths mean.
pub fn flamegraph(
    out: &mut dyn Write,
    report: &Report,
    filter: Option<&Regex>,
) -> Result<(), FlamegraphError> {
    let lines = super::folded::lines(report, filter);
    if lines.iter().all(|(_, ns)| *ns == 0) {
        return Err(FlamegraphError::Empty);
    }
    let lines: Vec<String> = lines
        .into_iter()
        .map(|(path, ns)| format!("{path} {ns}"))
        .collect();
    let title = format!("mtanalyze: {}", report.trace.source);
    let subtitle = format!(
        "clock: {}; widths: self time in ns, switched-out time excluded",
        report.clock
    );
    draw(out, options(title, subtitle), &lines)
}

/// The paths to draw, each with the base value to give inferno. inferno
/// colors a frame by `new - base` over the largest such change of any
/// line, drawn or not, so one path that is gone (not drawn: its width is
/// the new time, 0) or new would wash out every other frame to near white.
/// Gone paths are left out, and a new path's change is capped at the
/// largest change of a path both traces have, so it shows as strongly red
/// without setting the scale. (The diff's tables keep the true numbers.)
fn color_scaled<'d>(
    paths: &[&'d mtanalyze_model::diff::PathDiff],
) -> Vec<(&'d mtanalyze_model::diff::PathDiff, u64)> {
    let drawn = paths.iter().copied().filter(|p| p.new_ns > 0);
    let common = drawn.clone().filter(|p| p.base_ns > 0);
    let cap = common
        .map(|p| p.new_ns.abs_diff(p.base_ns))
        .max()
        .filter(|&c| c > 0)
        .unwrap_or(u64::MAX);
    drawn
        .map(|p| {
            let base = if p.base_ns == 0 {
                p.new_ns - p.new_ns.min(cap)
            } else {
                p.base_ns
            };
            (p, base)
        })
        .collect()
}

/// The differential flame graph of a diff with call paths.
pub fn differential(
    out: &mut dyn Write,
    diff: &DiffReport,
    filter: Option<&Regex>,
) -> Result<(), FlamegraphError> {
    let kept: Vec<_> = diff
        .paths
        .iter()
        .filter(|p| filter.is_none_or(|re| p.path.split(';').any(|f| re.is_match(f))))
        .collect();
    // Widths are the new trace's times: nothing to draw if it has none.
    if kept.iter().all(|p| p.new_ns == 0) {
        return Err(FlamegraphError::Empty);
    }
    let lines: Vec<String> = color_scaled(&kept)
        .into_iter()
        .map(|(p, base)| {
            let path: Vec<_> = p.path.split(';').map(super::folded::frame).collect();
            format!("{} {} {}", path.join(";"), base, p.new_ns)
        })
        .collect();
    let title = format!(
        "mtanalyze diff: {} -> {}",
        diff.base.source, diff.new.source
    );
    let subtitle = format!(
        "clock: {}; width: new self time in ns; red: slower, blue: faster{}",
        diff.clock,
        if diff.normalized {
            " (base normalized)"
        } else {
            ""
        }
    );
    draw(out, options(title, subtitle), &lines)
}

//! `--format folded`: one line per distinct call path, the input of
//! `inferno-flamegraph` and `flamegraph.pl`.
//!
//! ```text
//! main;handler;query 25
//! task-1;handler;query 25        (with --per-thread: the stack is the root frame)
//! ```
//!
//! The number is the path's self time in ns under the report's clock, so
//! time a stack spent switched out is not in it, and the numbers add up to
//! the total self time of the report. Frames are the functions' labels
//! ([`mtanalyze_model::labels::Labels`]: the name, qualified by its site where two functions
//! share it), so two functions never merge into one frame.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, Write};

use regex::Regex;

use crate::render::escape::escape;
use crate::view::matches;
use mtanalyze_model::labels::Labels;
use mtanalyze_model::report::Report;

/// A function or stack name as one folded frame: `;` separates frames, so
/// it is replaced (`[u8; 4]` becomes `[u8: 4]`), and control characters
/// are escaped ([`escape`]: a newline would end the record).
pub(crate) fn frame(name: &str) -> Cow<'_, str> {
    match escape(name) {
        Cow::Borrowed(s) if !s.contains(';') => Cow::Borrowed(s),
        escaped => Cow::Owned(escaped.replace(';', ":")),
    }
}

/// The report's call paths as `(path, self ns)`, merged by text and sorted.
/// Paths kept per stack start with the stack's name. With `filter`, only
/// paths through a function whose name (or `file:line name`) matches.
pub fn lines(report: &Report, filter: Option<&Regex>) -> Vec<(String, u64)> {
    let labels = Labels::of_functions(&report.functions);
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for p in &report.paths {
        let functions: Vec<_> = p
            .frames
            .iter()
            .filter_map(|&i| Some((report.functions.get(i as usize)?, labels.get(i as usize))))
            .collect();
        if let Some(re) = filter {
            if !functions.iter().any(|(f, _)| matches(re, &f.key())) {
                continue;
            }
        }
        let mut text = String::new();
        if !p.stack.is_empty() {
            text.push_str(&frame(&p.stack));
        }
        for (_, label) in functions {
            if !text.is_empty() {
                text.push(';');
            }
            text.push_str(&frame(label));
        }
        let n = merged.entry(text).or_default();
        *n = n.saturating_add(p.self_ns);
    }
    merged.into_iter().collect()
}

/// Writes [`lines`], one `path self_ns` per line.
pub fn folded(out: &mut dyn Write, report: &Report, filter: Option<&Regex>) -> io::Result<()> {
    for (path, ns) in lines(report, filter) {
        writeln!(out, "{path} {ns}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_inside_names_are_replaced() {
        assert_eq!(frame("<[u8; 4] as Debug>::fmt"), "<[u8: 4] as Debug>::fmt");
        assert_eq!(frame("two\nlines"), "two\\x0alines");
        assert_eq!(frame("a;\x1b[2J"), "a:\\x1b[2J");
        assert!(matches!(frame("plain"), Cow::Borrowed("plain")));
    }
}

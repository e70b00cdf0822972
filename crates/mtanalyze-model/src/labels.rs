//! The label each function is shown by where a view has room for one name
//! only (flame graph frames, folded paths, callgrind's `fn=`, pprof's and
//! the timeline exports' frame names): unique within a report, so two
//! functions never merge into one frame.
//!
//! The rule ("Labels" in `schemas/semantics.md`):
//!
//! * a name that one function of the report has is its label, as is:
//!   `apply`;
//! * a name that several functions share (`apply` of `cmd/get.rs` and of
//!   `cmd/set.rs`, a Python `handle` in two modules) is qualified by each
//!   one's site, as the tables show it: `apply (src/cmd/get.rs:12)`. The
//!   site is `file:line`; without a file, the module path
//!   (`apply (redis::cmd::get)`), and the line alone without either;
//! * in the rare case a label so made equals another's (a function whose
//!   name reads `apply (src/cmd/get.rs:12)`), the later one in the
//!   report's order gets ` #2`, ` #3`, ...
//!
//! A label is data from the traced program: escaping it for a terminal is
//! the text renderers' business (`mtanalyze::render::escape`), not this one's.

use std::collections::{HashMap, HashSet};

use crate::functions::FunctionEntry;
use crate::report::FunctionStats;

/// What a function's label is made of: its name, file, line and module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabelSite<'a> {
    /// Function or scope name.
    pub function: &'a str,
    /// Source file ("" if unknown).
    pub file: &'a str,
    /// Source line (0 if unknown).
    pub line: u32,
    /// Module path ("" if unknown).
    pub module: &'a str,
}

impl<'a> From<&'a FunctionStats> for LabelSite<'a> {
    fn from(f: &'a FunctionStats) -> LabelSite<'a> {
        LabelSite {
            function: &f.function,
            file: &f.file,
            line: f.line,
            module: &f.module,
        }
    }
}

impl<'a> From<&'a FunctionEntry<'_>> for LabelSite<'a> {
    fn from(f: &'a FunctionEntry<'_>) -> LabelSite<'a> {
        LabelSite {
            function: &f.key.function,
            file: &f.key.file,
            line: f.key.line,
            module: &f.module,
        }
    }
}

/// The labels of a list of functions, by position in the list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels {
    labels: Vec<String>,
}

impl Labels {
    /// The labels of `functions` (a report's functions, a timeline's
    /// function table, a diff's rows), one per function, in their order.
    pub fn new<'a>(functions: impl IntoIterator<Item = LabelSite<'a>>) -> Labels {
        let sites: Vec<LabelSite<'a>> = functions.into_iter().collect();
        let mut users: HashMap<&str, usize> = HashMap::with_capacity(sites.len());
        for s in &sites {
            *users.entry(s.function).or_default() += 1;
        }
        let mut taken: HashSet<String> = HashSet::with_capacity(sites.len());
        let labels = sites
            .iter()
            .map(|s| {
                let label = match users.get(s.function) {
                    Some(&n) if n > 1 => qualified(s),
                    _ => s.function.to_owned(),
                };
                unique(label, &mut taken)
            })
            .collect();
        Labels { labels }
    }

    /// The labels of a report's functions (`Report::functions`).
    pub fn of_functions(functions: &[FunctionStats]) -> Labels {
        Labels::new(functions.iter().map(LabelSite::from))
    }

    /// The label of the function at `index` ("?" past the end: an index
    /// from a damaged file).
    pub fn get(&self, index: usize) -> &str {
        self.labels.get(index).map_or("?", String::as_str)
    }

    /// All labels, in the functions' order.
    pub fn as_slice(&self) -> &[String] {
        &self.labels
    }
}

/// `name (site)`: see the module doc.
fn qualified(s: &LabelSite<'_>) -> String {
    let place = if s.file.is_empty() { s.module } else { s.file };
    match (place.is_empty(), s.line) {
        (false, 0) if s.file.is_empty() => format!("{} ({place})", s.function),
        (false, line) => format!("{} ({place}:{line})", s.function),
        (true, 0) => s.function.to_owned(),
        (true, line) => format!("{} (line {line})", s.function),
    }
}

/// `label`, or the first of `label #2`, `label #3`, ... not yet `taken`.
fn unique(label: String, taken: &mut HashSet<String>) -> String {
    if taken.insert(label.clone()) {
        return label;
    }
    let mut n = 2u64;
    loop {
        let candidate = format!("{label} #{n}");
        if taken.insert(candidate.clone()) {
            return candidate;
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site<'a>(function: &'a str, file: &'a str, line: u32, module: &'a str) -> LabelSite<'a> {
        LabelSite {
            function,
            file,
            line,
            module,
        }
    }

    #[test]
    fn a_unique_name_is_its_own_label() {
        let l = Labels::new([
            site("main", "src/main.rs", 3, "app"),
            site("apply", "a.rs", 1, ""),
        ]);
        assert_eq!(l.as_slice(), ["main", "apply"]);
    }

    #[test]
    fn a_shared_name_is_qualified_by_file_and_line() {
        let l = Labels::new([
            site("apply", "src/cmd/get.rs", 12, "redis::cmd::get"),
            site("apply", "src/cmd/set.rs", 30, "redis::cmd::set"),
            site("Handler.handle", "app/a.py", 5, ""),
            site("Handler.handle", "app/b.py", 5, ""),
            site("run", "", 0, "x::y"),
            site("run", "", 0, "x::z"),
            site("run", "", 7, ""),
            site("main", "", 0, ""),
        ]);
        assert_eq!(
            l.as_slice(),
            [
                "apply (src/cmd/get.rs:12)",
                "apply (src/cmd/set.rs:30)",
                "Handler.handle (app/a.py:5)",
                "Handler.handle (app/b.py:5)",
                "run (x::y)",
                "run (x::z)",
                "run (line 7)",
                "main",
            ]
        );
    }

    #[test]
    fn labels_that_would_read_alike_are_numbered() {
        let l = Labels::new([
            site("f (a.rs:1)", "", 0, ""),
            site("f", "a.rs", 1, ""),
            site("f", "b.rs", 1, ""),
        ]);
        assert_eq!(l.as_slice(), ["f (a.rs:1)", "f (a.rs:1) #2", "f (b.rs:1)"]);
        assert_eq!(l.get(9), "?");
    }
}

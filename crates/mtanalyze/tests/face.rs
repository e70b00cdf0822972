//! The library's face is deliberate and small: the names at the crate's
//! root are what a user needs first (load, analyze, diff, their options,
//! the report and its main rows, the errors); the rest is reached through
//! the root's modules (`report`, `diff`, `significance`, `timeline`, ...).
//! This test reads `src/lib.rs` and fails when a root name is added or
//! removed without updating [`ROOT`], or when the root passes [`MOST`].

use std::collections::BTreeSet;

/// The most names the root may hold (every name a root `pub use` brings,
/// every root `pub mod`, the `testing` feature's module included).
const MOST: usize = 45;

/// Today's root names.
const ROOT: &[&str] = &[
    // Modules.
    "diff",
    "plan",
    "render",
    "report",
    "significance",
    "testing",
    "threads",
    "timeline",
    "view",
    // Calls.
    "analyze",
    "analyze_many",
    "analyze_with_sink",
    "check",
    "diff",
    "from_bytes",
    "gate",
    "jsonl_to_binary",
    "load",
    "marks",
    // Inputs and options.
    "AnalyzeOptions",
    "InputFormat",
    "LoadedTrace",
    "ManyTraces",
    "PathMode",
    "RecursionCollapse",
    "TimeBound",
    // What the calls give.
    "CheckReport",
    "DiffReport",
    "EdgeStats",
    "FunctionStats",
    "Mark",
    "Merged",
    "Report",
    "StackSink",
    "StackStats",
    "TraceSummary",
    "Warning",
    "WarningKind",
    // Errors.
    "AnalyzeError",
    "GateError",
    "ImportError",
    "JsonlError",
    "LoadError",
    "TraceError",
];

/// `text` without its `//` comments (doc comments included).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names a use tree brings (`a::{b, c::{d as e}}` brings `b` and `e`;
/// `a::{self}` brings `a`).
fn leaves(tree: &str, names: &mut Vec<String>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let prefix = tree[..open].trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').expect("a closed use group")];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    leaf_or_self(prefix, &inner[start..i], names);
                    start = i + 1;
                }
                _ => {}
            }
        }
        leaf_or_self(prefix, &inner[start..], names);
    } else {
        let last = tree.rsplit(' ').next().expect("a name");
        names.push(last.rsplit("::").next().expect("a name").to_string());
    }
}

fn leaf_or_self(prefix: &str, item: &str, names: &mut Vec<String>) {
    if item.trim() == "self" {
        names.push(prefix.rsplit("::").next().expect("a name").to_string());
    } else {
        leaves(item, names);
    }
}

/// Every name `source` (a crate root) puts at its root: each top-level
/// `pub use`'s names and each top-level `pub mod`; what a `pub mod { ... }`
/// block holds is not at the root.
fn root_names(source: &str) -> Vec<String> {
    let code = without_comments(source);
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut rest = code.as_str();
    while let Some(c) = rest.chars().next() {
        if depth == 0 && rest.starts_with("pub use ") {
            let end = rest.find(';').expect("a `pub use` ends with `;`");
            let tree: String = rest["pub use ".len()..end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            leaves(&tree, &mut names);
            rest = &rest[end + 1..];
            continue;
        }
        if depth == 0 && rest.starts_with("pub mod ") {
            let name: String = rest["pub mod ".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            names.push(name);
        }
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    names.sort();
    names
}

#[test]
fn the_root_holds_the_listed_names_and_no_more_than_the_most() {
    let source = include_str!("../src/lib.rs");
    let mut expected: Vec<String> = ROOT.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        root_names(source),
        expected,
        "the root's names changed: update ROOT (and keep the face small)"
    );
    assert!(
        ROOT.len() <= MOST,
        "{} root names, more than {MOST}: reach the new ones through a module",
        ROOT.len()
    );
    let distinct: BTreeSet<_> = ROOT.iter().collect();
    assert!(distinct.contains(&"analyze") && distinct.contains(&"Report"));
}

#[test]
fn the_scan_counts_uses_groups_renames_and_modules_but_not_their_insides() {
    let source = "//! doc: pub use not::This;\n\
        pub use a::b;\n\
        pub use c::{d, e::{f, g as h}, i::{self}};\n\
        #[cfg(feature = \"x\")]\n\
        pub use j::k;\n\
        /// pub mod not_this\n\
        pub mod l {\n    pub use m::n;\n    fn o() { pub use p::q; }\n}\n\
        pub fn not_a_name() {}\n";
    assert_eq!(root_names(source), ["b", "d", "f", "h", "i", "k", "l"]);
}

#[test]
fn the_listed_names_resolve() {
    // A rename or a move out of the root fails to compile here.
    #[allow(unused_imports)]
    use mtanalyze::{
        analyze, analyze_many, analyze_with_sink, check, diff, from_bytes, gate, jsonl_to_binary,
        load, marks, render, report, significance, threads, timeline, view, AnalyzeError,
        AnalyzeOptions, CheckReport, DiffReport, EdgeStats, FunctionStats, GateError, ImportError,
        InputFormat, JsonlError, LoadError, LoadedTrace, ManyTraces, Mark, Merged, PathMode,
        RecursionCollapse, Report, StackSink, StackStats, TimeBound, TraceError, TraceSummary,
        Warning, WarningKind,
    };
}

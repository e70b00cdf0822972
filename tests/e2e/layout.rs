//! The code's layout keeps data flowing one way: no import cycles between
//! the modules of any folder of a crate's `src` (its top-level modules, and
//! the modules inside each folder such as `analysis/`).
//!
//! A module is a file `x.rs` or a folder `x/` (everything below it). It
//! depends on a sibling `y` when one of its lines names `crate::PATH::y`,
//! where `crate::PATH` is the folder (or `super::y` in a file directly in
//! the folder). A folder's `mod.rs` declares and re-exports its children
//! and is not a module of the folder, so its `pub use` lines make no
//! dependencies; nor does a file's `#[cfg(test)] mod` at its end. The
//! binary's tree (`main.rs`, `cli/`) is checked the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{repo_file, TempDir};

/// The crates whose sources are checked.
const CRATES: &[&str] = &[
    "crates/mtanalyze/src",
    "crates/mtanalyze-model/src",
    "crates/mtanalyze-engine/src",
    "crates/mtanalyze-render/src",
    "crates/mtrace/src",
    "crates/mtrace-format/src",
    "crates/mtrace-macros/src",
    "crates/mtanalyze-testkit/src",
];

/// One dependency: the module that names another, and where.
#[derive(Clone, Debug)]
struct Edge {
    to: String,
    at: String,
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The module paths a line names after `crate::` (or `super::`), each as
/// its identifiers: `crate::a::{b::C, d}` gives `[a, b, C]` and `[a, d]`.
fn named_paths(line: &str, anchor: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find(anchor) {
        // `foo_crate::` or `mycrate::` are not `crate::`.
        let before = rest[..i].chars().last();
        rest = &rest[i + anchor.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let mut prefix = Vec::new();
        loop {
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if ident.is_empty() {
                if let Some(group) = rest.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    for item in group[..end].split(',') {
                        let first: String = item
                            .trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if !first.is_empty() {
                            let mut p = prefix.clone();
                            p.push(first);
                            out.push(p);
                        }
                    }
                } else if !prefix.is_empty() {
                    out.push(prefix);
                }
                break;
            }
            rest = &rest[ident.len()..];
            prefix.push(ident);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => {
                    out.push(prefix);
                    break;
                }
            }
        }
    }
    out
}

/// The dependencies between the modules of folder `dir` of the crate whose
/// sources are in `root`: for each module, the siblings it names.
fn folder_graph(root: &Path, dir: &Path) -> BTreeMap<String, Vec<Edge>> {
    let module_path: Vec<String> = dir
        .strip_prefix(root)
        .unwrap_or(Path::new(""))
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let mut siblings = BTreeSet::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let name = p.file_stem().map(|s| s.to_string_lossy().into_owned());
        let Some(name) = name else { continue };
        let module = p.is_dir() || (p.extension().is_some_and(|x| x == "rs") && name != "mod");
        let crate_root = module_path.is_empty() && (name == "lib" || name == "main");
        if module && !crate_root {
            siblings.insert(name);
        }
    }
    let mut graph: BTreeMap<String, Vec<Edge>> = BTreeMap::new();
    for from in &siblings {
        let file = dir.join(format!("{from}.rs"));
        let folder = dir.join(from);
        let files = if folder.is_dir() {
            rust_files(&folder)
        } else {
            vec![file]
        };
        for f in files {
            let direct = f.parent() == Some(dir);
            let text = fs::read_to_string(&f).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for (n, line) in lines.iter().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                // A file's unit tests (at its end, by convention) may use
                // any module: they are not part of the dependency order.
                if code == "#[cfg(test)]"
                    && lines
                        .get(n + 1)
                        .is_some_and(|l| l.trim_start().starts_with("mod "))
                {
                    break;
                }
                let mut targets = Vec::new();
                for p in named_paths(code, "crate::") {
                    if p.len() > module_path.len() && p[..module_path.len()] == module_path[..] {
                        targets.push(p[module_path.len()].clone());
                    }
                }
                if direct {
                    targets.extend(
                        named_paths(code, "super::")
                            .into_iter()
                            .map(|p| p[0].clone()),
                    );
                }
                for to in targets {
                    if &to != from && siblings.contains(&to) {
                        let at = format!("{}:{}", f.display(), n + 1);
                        graph.entry(from.clone()).or_default().push(Edge { to, at });
                    }
                }
            }
        }
    }
    graph
}

/// A cycle of `graph`, as the modules on it with the line of each step.
fn find_cycle(graph: &BTreeMap<String, Vec<Edge>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, Vec<Edge>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<(String, String)>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_owned(), Mark::Open);
        for e in graph.get(node).into_iter().flatten() {
            path.push((node.to_owned(), e.at.clone()));
            match marks.get(&e.to).copied().unwrap_or(Mark::New) {
                Mark::Open => {
                    let start = path.iter().position(|(n, _)| *n == e.to).unwrap_or(0);
                    let steps = path[start..]
                        .iter()
                        .map(|(n, at)| format!("{n} ({at})"))
                        .chain([e.to.clone()])
                        .collect();
                    return Some(steps);
                }
                Mark::New => {
                    if let Some(c) = visit(&e.to, graph, marks, path) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
            path.pop();
        }
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if marks.get(node).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(c) = visit(node, graph, &mut marks, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Every cycle found in the folders of the crate at `root`, one line each.
fn cycles(root: &Path) -> Vec<String> {
    let mut dirs = vec![root.to_path_buf()];
    let mut out = Vec::new();
    while let Some(dir) = dirs.pop() {
        for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                dirs.push(e.path());
            }
        }
        if let Some(c) = find_cycle(&folder_graph(root, &dir)) {
            out.push(format!("{}: {}", dir.display(), c.join(" -> ")));
        }
    }
    out.sort();
    out
}

#[test]
fn no_module_imports_in_a_circle() {
    let mut found = Vec::new();
    for krate in CRATES {
        let root = repo_file(krate)
            .canonicalize()
            .expect("the crate's sources");
        assert!(root.is_dir(), "{} is not a folder", root.display());
        found.extend(cycles(&root));
    }
    assert!(
        found.is_empty(),
        "modules import each other in a circle:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_cycle_at_the_top_and_inside_a_folder() {
    let dir = TempDir::new("layout");
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod deep;\n"),
        ("a.rs", "use crate::b::Thing;\n"),
        (
            "b.rs",
            "// use crate::a::X; is a comment\npub struct Thing;\n",
        ),
        ("deep/mod.rs", "mod x;\nmod y;\npub use x::X;\n"),
        ("deep/x.rs", "use super::y::Y;\npub struct X;\n"),
        ("deep/y.rs", "pub struct Y;\n"),
    ];
    for (name, text) in files {
        let p = dir.path().join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    assert_eq!(cycles(dir.path()), Vec::<String>::new());
    // A grouped import back from b to a closes a circle at the top.
    fs::write(dir.path().join("b.rs"), "use crate::{a::X, deep};\n").unwrap();
    let found = cycles(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("a (") && found[0].contains("b ("),
        "{found:?}"
    );
    // And one inside the folder, through a full path.
    fs::write(dir.path().join("b.rs"), "pub struct Thing;\n").unwrap();
    fs::write(
        dir.path().join("deep/y.rs"),
        "fn f() { crate::deep::x::g(); }\n",
    )
    .unwrap();
    let found = cycles(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("deep: "), "{found:?}");
}

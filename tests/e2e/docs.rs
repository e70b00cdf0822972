//! Every repository path the documentation mentions exists.
//!
//! The documents read are the ones a newcomer reads: `README.md`,
//! `docs/*.md`, `sample-traces/README.md`, every `crates/*/README.md` and
//! `schemas/*.md`. A path is mentioned by
//!
//! * a relative Markdown link, `[text](path#anchor)`, resolved from the
//!   document's folder as a Markdown viewer resolves it;
//! * a word of an inline code span, or of a `sh` or `toml` code block (the
//!   commands a reader runs and the manifests they copy), that starts with a
//!   top-level folder of the repository (`crates/`, `schemas/`,
//!   `sample-traces/`, `tests/`, `docs/`, `.ci/`) or ends in a source
//!   file's extension (`.rs`, `.md`, `.py`, `.pyi`, `.sh`, `.toml`). Such a
//!   word names a file from the repository's root (where the commands run)
//!   or from the document's folder (a crate README naming `src/lib.rs`);
//!   a bare Rust file name (`crash.rs` in a list of a folder's tests) must
//!   be the name of some file of the repository. Other bare names
//!   (`script.py`, `diff.md`) are the reader's own files or a command's
//!   outputs.
//!
//! What is not a path of this repository is told apart by its form, never
//! by a list of exceptions: URLs, absolute paths, build outputs (`target`),
//! words with a placeholder (`*`, `?`, `<...>`, `{...}`, `$VAR`, `...`, or
//! a capitalized stand-in such as `NAME`, `PID` or `DIR`: a segment in
//! capitals that is not a Markdown file's name such as `README.md`),
//! assignments (`KEY=value`), options (`--out`), and source locations
//! (`src/cmd/get.rs:12`, a frame's label in an output).
//!
//! `docs/ARCHITECTURE.md`'s crate graph is checked too, against the
//! manifests as `cargo metadata` reads them: the graph a reader sees is the
//! one the compiler builds.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::util::repo_file;

/// The repository's top-level folders a command or a sentence names.
const ROOT_FOLDERS: &[&str] = &[
    "crates/",
    "schemas/",
    "sample-traces/",
    "tests/",
    "docs/",
    ".ci/",
];

/// Extensions of the repository's own source and documentation files
/// (outputs such as `trace.bin` or `report.html` are made by the commands).
const SOURCE_EXTENSIONS: &[&str] = &[".rs", ".md", ".py", ".pyi", ".sh", ".toml"];

/// Fenced code blocks whose words are checked: commands and manifests.
/// Other blocks are program text or output (`text`), whose paths belong to
/// the program or the machine that printed them.
const CHECKED_FENCES: &[&str] = &["sh", "bash", "toml"];

/// One path a document mentions: its line (1-based), the path as written,
/// and whether it came from a Markdown link (resolved from the document's
/// folder only) or from code (from the root or the document's folder).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mention {
    line: usize,
    path: String,
    link: bool,
}

/// The documents checked, as paths from the repository's root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs = vec![
        PathBuf::from("README.md"),
        PathBuf::from("sample-traces/README.md"),
    ];
    for (folder, only) in [
        ("docs", None),
        ("schemas", None),
        ("crates", Some("README.md")),
    ] {
        let Ok(entries) = fs::read_dir(root.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = PathBuf::from(folder).join(entry.file_name());
            match only {
                // A crate's README, one level down.
                Some(file) => {
                    if root.join(&name).join(file).is_file() {
                        docs.push(name.join(file));
                    }
                }
                None => {
                    if name.extension().is_some_and(|e| e == "md") {
                        docs.push(name);
                    }
                }
            }
        }
    }
    docs.sort();
    docs
}

/// A word with a placeholder, or a URL, absolute path, build output,
/// assignment or option: not a path of this repository.
fn not_a_repo_path(word: &str) -> bool {
    word.is_empty()
        || word.contains("://")
        || word.starts_with('/')
        || word.starts_with('~')
        || word.starts_with('-')
        || word.contains('=')
        || word.contains("...")
        || word.contains('…')
        || word
            .chars()
            .any(|c| matches!(c, '*' | '?' | '<' | '>' | '{' | '}' | '$' | '[' | ']' | '|'))
        || word
            .split('/')
            .any(|segment| segment == "target" || is_placeholder_segment(segment))
}

/// `NAME`, `NAME.jsonl`, `DIR`, `PID`: a stand-in in capitals. Markdown
/// files are named in capitals by convention (`README.md`), so a segment
/// ending in `.md` is a name.
fn is_placeholder_segment(segment: &str) -> bool {
    let stem = segment.split('.').next().unwrap_or("");
    stem.len() >= 2
        && stem
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !segment.ends_with(".md")
}

/// A word of code that names a file of the repository, cleaned of the
/// quotes and punctuation around it; `None` for any other word.
fn code_path(word: &str) -> Option<String> {
    let word = word
        .trim_start_matches(['(', '"', '\'', '`'])
        .trim_end_matches([')', '"', '\'', '`', ',', ';', '.', ':']);
    let word = word.strip_prefix("./").unwrap_or(word);
    if not_a_repo_path(word) {
        return None;
    }
    // `file.rs:12`: a source location, as an output prints it.
    if let Some((_, after)) = word.rsplit_once(':') {
        if !after.is_empty() && after.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    if word.contains(':') {
        return None;
    }
    let rooted = ROOT_FOLDERS.iter().any(|f| word.starts_with(f));
    let source = if word.contains('/') {
        SOURCE_EXTENSIONS.iter().any(|e| word.ends_with(e))
    } else {
        word.ends_with(".rs")
    };
    (rooted || source).then(|| word.to_owned())
}

/// Every path `text` (a Markdown document) mentions.
fn mentions(text: &str) -> Vec<Mention> {
    let mut found = Vec::new();
    // The open fence's language while inside a code block.
    let mut fence: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(info.trim().to_owned()),
            };
            continue;
        }
        match &fence {
            Some(lang) => {
                if CHECKED_FENCES.contains(&lang.as_str()) {
                    for word in line.split_whitespace() {
                        if let Some(path) = code_path(word) {
                            found.push(Mention {
                                line: number,
                                path,
                                link: false,
                            });
                        }
                    }
                }
            }
            None => {
                found.extend(links(line).into_iter().map(|path| Mention {
                    line: number,
                    path,
                    link: true,
                }));
                for span in code_spans(line) {
                    for word in span.split_whitespace() {
                        if let Some(path) = code_path(word) {
                            found.push(Mention {
                                line: number,
                                path,
                                link: false,
                            });
                        }
                    }
                }
            }
        }
    }
    found
}

/// The relative targets of the Markdown links of `line`, without their
/// anchors.
fn links(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or("").trim();
        if !target.is_empty() && !target.starts_with("mailto:") && !not_a_repo_path(target) {
            found.push(target.to_owned());
        }
        rest = &rest[end..];
    }
    found
}

/// The inline code spans of `line` (text between single backticks).
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Whether a mention in the document `doc` (from the root) names a file
/// or folder that exists; `names` holds every file name of the repository,
/// for bare names.
fn exists(root: &Path, doc: &Path, mention: &Mention, names: &BTreeSet<String>) -> bool {
    let folder = root.join(doc.parent().unwrap_or(Path::new("")));
    let path = mention.path.trim_end_matches('/');
    if mention.link {
        return folder.join(path).exists();
    }
    if !path.contains('/') {
        return names.contains(path) || root.join(path).exists() || folder.join(path).exists();
    }
    root.join(path).exists() || folder.join(path).exists()
}

/// The names of every file below `dir`, build outputs and `.git` left out.
fn file_names(dir: &Path, names: &mut BTreeSet<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            if name != "target" && name != ".git" && name != "node_modules" {
                file_names(&path, names);
            }
        } else {
            names.insert(name);
        }
    }
}

#[test]
fn every_path_the_docs_mention_exists() {
    let root = repo_file("");
    let mut names = BTreeSet::new();
    file_names(&root, &mut names);
    let docs = documents(&root);
    assert!(docs.len() >= 10, "too few documents found: {docs:?}");
    let mut dead = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = fs::read_to_string(root.join(doc)).expect("a document");
        for mention in mentions(&text) {
            checked += 1;
            if !exists(&root, doc, &mention, &names) {
                dead.push(format!(
                    "{}:{}: {}",
                    doc.display(),
                    mention.line,
                    mention.path
                ));
            }
        }
    }
    assert!(checked > 100, "only {checked} paths found in {docs:?}");
    assert!(
        dead.is_empty(),
        "paths the docs mention that do not exist:\n{}",
        dead.join("\n")
    );
}

/// The rules on a small document: links, code spans and commands are
/// found; URLs, placeholders, outputs and source locations are not.
#[test]
fn the_docs_path_rules_find_paths_and_leave_the_rest() {
    let text = "\
See [the format](../schemas/trace-format.md#header) and [a site](https://example.com/x.md).
Run `crates/mtrace/examples/readme.rs` or `cargo run -p x -- sample-traces/gone.bin`.
A label `apply (src/cmd/get.rs:12)`, a glob `sample-traces/*.bin`, a stand-in `out/NAME/x.rs`,
`$TMPDIR/x.rs`, `target/release/mtanalyze`, `/tmp/synth.bin`, `trace.bin`, `crash.rs`.

```sh
bash crates/mtrace-python/run-tests.sh --out /tmp/x MTRACE_WHEELS=target/wheels
```

```text
/tmp/mtanalyze-bench-synth.bin crates/printed-by-a-program.rs
```

```toml
mtrace = { path = \"crates/mtrace\" }
```
";
    let found: Vec<(usize, String, bool)> = mentions(text)
        .into_iter()
        .map(|m| (m.line, m.path, m.link))
        .collect();
    assert_eq!(
        found,
        vec![
            (1, "../schemas/trace-format.md".to_owned(), true),
            (2, "crates/mtrace/examples/readme.rs".to_owned(), false),
            (2, "sample-traces/gone.bin".to_owned(), false),
            (4, "crash.rs".to_owned(), false),
            (7, "crates/mtrace-python/run-tests.sh".to_owned(), false),
            (15, "crates/mtrace".to_owned(), false),
        ]
    );
    // Resolved as the real test resolves them, from a document in docs/.
    let root = repo_file("");
    let mut names = BTreeSet::new();
    file_names(&root, &mut names);
    let doc = Path::new("docs/GUIDE.md");
    let missing: Vec<String> = mentions(text)
        .into_iter()
        .filter(|m| !exists(&root, doc, m, &names))
        .map(|m| m.path)
        .collect();
    assert_eq!(missing, vec!["sample-traces/gone.bin".to_owned()]);
}

/// A crate and the crates of this repository it depends on.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The normal (not dev, not build) dependencies on crates of this
/// repository (path dependencies), of every package of the root workspace
/// and of the two workspaces of their own, as `cargo metadata` reads the
/// manifests.
fn cargo_graph(root: &Path) -> Graph {
    let mut graph = Graph::new();
    for manifest in [
        "Cargo.toml",
        "crates/mtrace-python/Cargo.toml",
        "crates/mtrace-fuzz/Cargo.toml",
    ] {
        let out = std::process::Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--no-deps",
                "--offline",
                "--format-version",
                "1",
            ])
            .arg("--manifest-path")
            .arg(root.join(manifest))
            .output()
            .expect("cargo metadata runs");
        assert!(
            out.status.success(),
            "cargo metadata --manifest-path {manifest}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let metadata: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
        for package in metadata["packages"].as_array().expect("packages") {
            let name = package["name"].as_str().expect("a name").to_owned();
            let deps = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null() && d["path"].is_string())
                .map(|d| d["name"].as_str().expect("a name").to_owned())
                .collect();
            graph.insert(name, deps);
        }
    }
    graph
}

/// The graph of `docs/ARCHITECTURE.md`'s text block by layer (`layer N
/// crate -> dep, dep (note)`), and each crate's layer.
fn text_graph(doc: &str) -> (Graph, BTreeMap<String, usize>) {
    let start = doc.find("```text\nlayer 0").expect("the graph by layer") + "```text\n".len();
    let len = doc[start..].find("```").expect("the block's end");
    let mut graph = Graph::new();
    let mut layers = BTreeMap::new();
    let mut layer = 0;
    for line in doc[start..start + len].lines() {
        let mut rest = line.trim();
        if let Some(after) = rest.strip_prefix("layer ") {
            let (n, after) = after.split_once(' ').expect("layer N crate");
            layer = n.parse().expect("a layer number");
            rest = after.trim();
        }
        let rest = rest.split('(').next().unwrap_or("").trim();
        let (name, deps) = match rest.split_once("->") {
            Some((name, deps)) => (name.trim(), deps),
            None => (rest, ""),
        };
        let deps = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
            .collect();
        graph.insert(name.to_owned(), deps);
        layers.insert(name.to_owned(), layer);
    }
    (graph, layers)
}

/// The graph of `docs/ARCHITECTURE.md`'s mermaid block: nodes `id[label]`
/// (the label's first word is the crate) and edges `a --> b`.
fn mermaid_graph(doc: &str) -> Graph {
    let start = doc.find("```mermaid\n").expect("the mermaid graph") + "```mermaid\n".len();
    let len = doc[start..].find("```").expect("the block's end");
    let mut names = BTreeMap::new();
    let mut edges = Vec::new();
    for line in doc[start..start + len].lines().skip(1) {
        let mut ids = Vec::new();
        for node in line.split("-->") {
            let node = node.trim();
            let id = match node.split_once('[') {
                Some((id, label)) => {
                    let krate = label.trim_end_matches(']').split([',', ' ']).next();
                    names.insert(id.to_owned(), krate.expect("a label").to_owned());
                    id
                }
                None => node,
            };
            ids.push(id.to_owned());
        }
        match ids.as_slice() {
            [_] => {}
            [from, to] => edges.push((from.clone(), to.clone())),
            _ => panic!("a mermaid line of one node or one edge: {line}"),
        }
    }
    let mut graph: Graph = names
        .values()
        .map(|n| (n.clone(), BTreeSet::new()))
        .collect();
    for (from, to) in edges {
        graph
            .get_mut(&names[&from])
            .expect("a declared node")
            .insert(names[&to].clone());
    }
    graph
}

#[test]
fn the_architectures_crate_graph_is_cargos() {
    let root = repo_file("");
    let doc = fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let cargo = cargo_graph(&root);
    let (text, layers) = text_graph(&doc);
    assert_eq!(
        text, cargo,
        "docs/ARCHITECTURE.md's graph by layer is not Cargo's"
    );
    assert_eq!(
        mermaid_graph(&doc),
        cargo,
        "docs/ARCHITECTURE.md's mermaid graph is not Cargo's"
    );
    // One way: every crate depends only on crates of earlier layers.
    for (name, deps) in &cargo {
        for dep in deps {
            assert!(
                layers[dep] < layers[name],
                "{name} (layer {}) depends on {dep} (layer {})",
                layers[name],
                layers[dep]
            );
        }
    }
}

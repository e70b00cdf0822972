//! Labels that never merge (issue 50): two functions that share a name but
//! not a file are two frames in every output, Rust-style (`apply` of two
//! command modules) and Python-style (`Handler.handle` of two modules);
//! and names are data, never commands: control characters reach no text
//! output raw.

use std::ffi::OsStr;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{mtanalyze, Run, TempDir};

const GET: &str = "apply (src/cmd/get.rs:12)";
const SET: &str = "apply (src/cmd/set.rs:30)";
const PY_A: &str = "Handler.handle (app/a.py:5)";
const PY_B: &str = "Handler.handle (app/b.py:5)";

/// `main` calls `apply` of get.rs (100ns), `apply` of set.rs (200ns), and
/// Python's `Handler.handle` of a.py (50ns) and of b.py (70ns); with
/// `both` false, only the get.rs and a.py ones (no name is shared).
fn twins_jsonl(both: bool) -> String {
    let mut lines = vec![
        r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main", "file": "src/main.rs", "line": 1}"#,
        r#"{"ts": 10, "tid": 1, "ev": "enter", "fn": "apply", "file": "src/cmd/get.rs", "line": 12}"#,
        r#"{"ts": 110, "tid": 1, "ev": "exit", "fn": "apply"}"#,
    ];
    if both {
        lines.extend([
            r#"{"ts": 120, "tid": 1, "ev": "enter", "fn": "apply", "file": "src/cmd/set.rs", "line": 30}"#,
            r#"{"ts": 320, "tid": 1, "ev": "exit", "fn": "apply"}"#,
        ]);
    }
    lines.extend([
        r#"{"ts": 330, "tid": 1, "ev": "enter", "fn": "Handler.handle", "file": "app/a.py", "line": 5}"#,
        r#"{"ts": 380, "tid": 1, "ev": "exit", "fn": "Handler.handle"}"#,
    ]);
    if both {
        lines.extend([
            r#"{"ts": 390, "tid": 1, "ev": "enter", "fn": "Handler.handle", "file": "app/b.py", "line": 5}"#,
            r#"{"ts": 460, "tid": 1, "ev": "exit", "fn": "Handler.handle"}"#,
        ]);
    }
    lines.push(r#"{"ts": 500, "tid": 1, "ev": "exit", "fn": "main"}"#);
    lines.join("\n") + "\n"
}

/// The trace of [`twins_jsonl`], converted to a binary trace (what `top`
/// and the exports read like a recording).
fn twins(dir: &TempDir, both: bool) -> PathBuf {
    let name = if both { "twins" } else { "single" };
    let text = dir.write(&format!("{name}.jsonl"), twins_jsonl(both));
    let bin = dir.join(&format!("{name}.bin"));
    run(&[OsStr::new("convert"), text.as_os_str(), bin.as_os_str()]).success();
    bin
}

fn run(args: &[&OsStr]) -> Run {
    mtanalyze(args.iter().copied())
}

/// What `mtanalyze ARGS -o OUT` wrote to `out`, as text.
fn written(args: &[&OsStr], out: &Path) -> String {
    let mut all = args.to_vec();
    all.extend([OsStr::new("-o"), out.as_os_str()]);
    run(&all).success();
    std::fs::read_to_string(out).expect("the output was written")
}

fn run_on(trace: &Path, args: &[&str]) -> Run {
    let mut all: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    all.push(trace.as_os_str());
    run(&all).success()
}

/// Asserts that `text` names each of `labels` (the four functions).
#[track_caller]
fn has_all(what: &str, text: &str, labels: &[&str]) {
    for l in labels {
        assert!(text.contains(l), "{what} lacks {l:?}:\n{text:.3000}");
    }
}

const ALL: [&str; 4] = [GET, SET, PY_A, PY_B];

#[test]
fn same_named_functions_are_two_rows_in_the_tables() {
    let dir = TempDir::new("labels-tables");
    let trace = twins(&dir, true);
    let table = run_on(&trace, &[]);
    has_all("the table", &table.stdout, &ALL);
    let md = run_on(&trace, &["--format", "markdown"]);
    for row in [
        "`apply` (get.rs:12)",
        "`apply` (set.rs:30)",
        "`Handler.handle` (a.py:5)",
        "`Handler.handle` (b.py:5)",
    ] {
        assert!(
            md.stdout.contains(row),
            "markdown lacks {row}:\n{}",
            md.stdout
        );
    }
    let top = run(&[OsStr::new("top"), OsStr::new("--once"), trace.as_os_str()]).success();
    has_all("top", &top.stdout, &ALL);
    // JSON carries the identity: two rows of each name, with their files.
    let json = run_on(&trace, &["--format", "json"]).json();
    let rows: Vec<(String, String)> = json["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().expect("text").to_owned();
            (s("function"), s("file"))
        })
        .collect();
    for (name, file) in [
        ("apply", "src/cmd/get.rs"),
        ("apply", "src/cmd/set.rs"),
        ("Handler.handle", "app/a.py"),
        ("Handler.handle", "app/b.py"),
    ] {
        assert!(
            rows.contains(&(name.to_owned(), file.to_owned())),
            "{rows:?}"
        );
    }
}

#[test]
fn same_named_functions_are_two_frames_in_folded_lines_and_flame_graphs() {
    let dir = TempDir::new("labels-folded");
    let trace = twins(&dir, true);
    let folded = run_on(&trace, &["--format", "folded"]);
    let lines: Vec<&str> = folded.stdout.lines().collect();
    for want in [
        format!("main;{GET} 100"),
        format!("main;{SET} 200"),
        format!("main;{PY_A} 50"),
        format!("main;{PY_B} 70"),
    ] {
        assert!(lines.contains(&want.as_str()), "{want}:\n{}", folded.stdout);
    }
    // A name that one function has stays plain.
    assert!(lines.contains(&"main 80"), "{}", folded.stdout);

    let svg = dir.join("twins.svg");
    let svg = written(&[OsStr::new("flamegraph"), trace.as_os_str()], &svg);
    has_all("the flame graph", &svg, &ALL);

    let html = written(
        &[
            trace.as_os_str(),
            OsStr::new("--format"),
            OsStr::new("html"),
        ],
        &dir.join("twins.html"),
    );
    let data = page_data(&html);
    let labels: Vec<&str> = data["labels"]
        .as_array()
        .expect("the page's frame labels")
        .iter()
        .map(|l| l.as_str().expect("a label"))
        .collect();
    for l in ALL {
        assert!(labels.contains(&l), "{labels:?}");
    }
}

/// The JSON data the HTML page inlines.
fn page_data(html: &str) -> Value {
    let open = r#"<script type="application/json" id="data">"#;
    let start = html.find(open).expect("the data element") + open.len();
    let end = start + html[start..].find("</script>").expect("its end");
    serde_json::from_str(&html[start..end]).expect("the data is JSON")
}

#[test]
fn same_named_functions_are_two_frames_in_every_export() {
    let dir = TempDir::new("labels-exports");
    let trace = twins(&dir, true);
    let export = |format: &str| -> Vec<u8> {
        let out = dir.join(&format!("twins.{format}"));
        run(&[
            OsStr::new("export"),
            OsStr::new("--format"),
            OsStr::new(format),
            trace.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
        ])
        .success();
        std::fs::read(&out).expect("the export was written")
    };

    let chrome: Value = serde_json::from_slice(&export("chrome")).expect("chrome JSON");
    let names: Vec<&str> = chrome["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["cat"] == "function")
        .filter_map(|e| e["name"].as_str())
        .collect();
    for l in ALL {
        assert!(names.contains(&l), "chrome: {names:?}");
    }

    let speedscope: Value = serde_json::from_slice(&export("speedscope")).expect("speedscope JSON");
    let frames: Vec<&str> = speedscope["shared"]["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    for l in ALL {
        assert!(frames.contains(&l), "speedscope: {frames:?}");
    }

    let callgrind = String::from_utf8(export("callgrind")).expect("text");
    for l in ALL {
        assert!(
            callgrind
                .lines()
                .any(|line| line.starts_with("fn=(") && line.ends_with(l)),
            "callgrind lacks fn= {l}:\n{callgrind}"
        );
    }

    // pprof merges functions by name: each of the four has a name of its own
    // in the profile's string table.
    let mut proto = Vec::new();
    flate2::read::GzDecoder::new(&export("pprof")[..])
        .read_to_end(&mut proto)
        .expect("gzip");
    for l in ALL {
        assert!(
            proto.windows(l.len()).any(|w| w == l.as_bytes()),
            "pprof lacks {l}"
        );
    }
}

#[test]
fn a_diff_pairs_a_function_whose_name_is_shared_in_one_run_only() {
    let dir = TempDir::new("labels-diff");
    let base = twins(&dir, false);
    let new = twins(&dir, true);
    let diff = |extra: &[&str]| {
        let mut args: Vec<&OsStr> = vec![OsStr::new("diff"), base.as_os_str(), new.as_os_str()];
        args.extend(extra.iter().map(OsStr::new));
        run(&args).success()
    };
    // In BASE, `apply` is get.rs's alone; it still meets NEW's get.rs
    // `apply` on one line, and set.rs's is a line of its own.
    let folded = diff(&["--format", "folded"]);
    let lines: Vec<&str> = folded.stdout.lines().collect();
    for want in [
        format!("main;{GET} 100 100"),
        format!("main;{SET} 0 200"),
        format!("main;{PY_A} 50 50"),
        format!("main;{PY_B} 0 70"),
    ] {
        assert!(lines.contains(&want.as_str()), "{want}:\n{}", folded.stdout);
    }
    has_all("the diff's table", &diff(&[]).stdout, &ALL);
    let svg = dir.join("diff.svg");
    diff(&["--flamegraph", svg.to_str().expect("a UTF-8 temp path")]);
    let svg = std::fs::read_to_string(&svg).expect("the SVG was written");
    has_all("the diff's flame graph", &svg, &ALL);
    let md = diff(&["--format", "markdown"]);
    for row in ["`apply` (get.rs:12)", "`apply` (set.rs:30)"] {
        assert!(md.stdout.contains(row), "{row}:\n{}", md.stdout);
    }
}

/// A trace whose names hold terminal commands: a function that clears the
/// screen and rings the bell, a task that recolours the terminal, a thread
/// that retitles the window.
fn hostile(dir: &TempDir) -> PathBuf {
    let text = dir.write(
        "hostile.jsonl",
        r#"{"ev": "thread", "tid": 1, "name": "worker\u001b]0;pwned\u0007"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "evil\u001b[2J\u0007", "file": "src/e.rs", "line": 1}
{"ts": 5, "tid": 1, "ev": "switch", "stack": "task\u001b[31m"}
{"ts": 5, "tid": 1, "ev": "enter", "fn": "inner\u0007", "file": "src/e.rs", "line": 2}
{"ts": 10, "tid": 1, "ev": "exit", "fn": "inner\u0007"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": null}
{"ts": 20, "tid": 1, "ev": "exit", "fn": "evil\u001b[2J\u0007"}
"#,
    );
    let bin = dir.join("hostile.bin");
    run(&[OsStr::new("convert"), text.as_os_str(), bin.as_os_str()]).success();
    bin
}

/// Asserts that `run` wrote no control character but newlines, and that
/// its output shows each of `shown`.
#[track_caller]
fn escaped(what: &str, run: &Run, shown: &[&str]) {
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{what}: a raw control character on {stream}: {text:?}"
        );
    }
    for s in shown {
        assert!(
            run.stdout.contains(s),
            "{what} lacks {s:?}:\n{}",
            run.stdout
        );
    }
}

#[test]
fn control_characters_in_names_are_escaped_in_every_text_output() {
    let dir = TempDir::new("labels-escape");
    let trace = hostile(&dir);
    let name = r"evil\x1b[2J\x07";
    escaped("the table", &run_on(&trace, &[]), &[name, r"inner\x07"]);
    escaped(
        "--stacks",
        &run_on(&trace, &["--stacks"]),
        &[r"task\x1b[31m"],
    );
    escaped(
        "the folded lines",
        &run_on(&trace, &["--format", "folded"]),
        &[&format!(r"{name} 15"), r"inner\x07 5"],
    );
    escaped(
        "the folded lines per stack",
        &run_on(&trace, &["--format", "folded", "--per-thread"]),
        &[r"task\x1b[31m;inner\x07 5"],
    );
    escaped(
        "the markdown",
        &run_on(&trace, &["--format", "markdown"]),
        &[r"evil\\x1b[2J\\x07"],
    );
    escaped(
        "check",
        &run(&[OsStr::new("check"), trace.as_os_str()]).success(),
        &[r"worker\x1b]0;pwned\x07"],
    );
    escaped(
        "the diff",
        &run(&[OsStr::new("diff"), trace.as_os_str(), trace.as_os_str()]).success(),
        &[name],
    );
    escaped(
        "the diff's folded lines",
        &run(&[
            OsStr::new("diff"),
            trace.as_os_str(),
            trace.as_os_str(),
            OsStr::new("--format"),
            OsStr::new("folded"),
        ])
        .success(),
        &[name],
    );
    escaped(
        "top",
        &run(&[OsStr::new("top"), OsStr::new("--once"), trace.as_os_str()]).success(),
        &[name],
    );
    escaped(
        "top --stacks",
        &run(&[
            OsStr::new("top"),
            OsStr::new("--once"),
            OsStr::new("--stacks"),
            trace.as_os_str(),
        ])
        .success(),
        &[r"task\x1b[31m"],
    );
    let callgrind = written(
        &[
            OsStr::new("export"),
            OsStr::new("--format"),
            OsStr::new("callgrind"),
            trace.as_os_str(),
        ],
        &dir.join("hostile.callgrind"),
    );
    assert!(
        !callgrind.chars().any(|c| c.is_control() && c != '\n'),
        "{callgrind:?}"
    );
    assert!(callgrind.contains(name), "{callgrind}");
    // JSON keeps the true name, escaped as JSON escapes it.
    let json = run_on(&trace, &["--format", "json"]);
    assert!(
        json.stdout.contains(r"evil\u001b[2J\u0007"),
        "{}",
        json.stdout
    );
    let names: Vec<String> = json.json()["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .filter_map(|f| f["function"].as_str().map(str::to_owned))
        .collect();
    assert!(
        names.contains(&"evil\u{1b}[2J\u{7}".to_owned()),
        "{names:?}"
    );
}

#[test]
fn the_html_page_carries_hostile_names_as_data_never_raw() {
    let dir = TempDir::new("labels-escape-html");
    let trace = hostile(&dir);
    let html = written(
        &[
            trace.as_os_str(),
            OsStr::new("--format"),
            OsStr::new("html"),
        ],
        &dir.join("hostile.html"),
    );
    assert!(!html.contains('\u{1b}') && !html.contains('\u{7}'));
    let data = page_data(&html);
    let names: Vec<String> = data["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .filter_map(|f| f["function"].as_str().map(str::to_owned))
        .collect();
    assert!(
        names.contains(&"evil\u{1b}[2J\u{7}".to_owned()),
        "{names:?}"
    );
}

//! `--format html`: the page of a report and of a diff.
//!
//! Structural tests read the file with no browser: one file, no URL to
//! fetch, the data JSON parses and its rows are the CLI's JSON report's,
//! names that look like markup stay text. The browser test loads every
//! page from `file://` in headless Chromium (Debian's `chromium`, driven by
//! Playwright for Python in `target/playwright-venv`, see
//! `html_browser.py`) and clicks through it; it skips, saying why, when
//! either cannot be had.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::util::{mtanalyze, python_with, repo_file, TempDir};

/// A function name that would end the data's script element if it were
/// not escaped.
const SCRIPT_NAME: &str = "</script><script>alert(1)</script>";

/// A trace whose function names look like markup (and a quoted file).
fn markup_trace(dir: &TempDir) -> PathBuf {
    let jsonl = format!(
        r#"{{"ts": 0, "tid": 1, "ev": "enter", "fn": "main", "file": "src/main.rs", "line": 1}}
{{"ts": 5, "tid": 1, "ev": "enter", "fn": "{n}", "file": "src/\"q\".rs", "line": 2}}
{{"ts": 9, "tid": 1, "ev": "exit", "fn": "{n}"}}
{{"ts": 10, "tid": 1, "ev": "enter", "fn": "BADNAME_X", "file": "src/<b>.rs", "line": 3}}
{{"ts": 15, "tid": 1, "ev": "exit", "fn": "BADNAME_X"}}
{{"ts": 20, "tid": 1, "ev": "exit", "fn": "main"}}
"#,
        n = SCRIPT_NAME.replace('"', "\\\"")
    );
    let text = dir.write("markup.jsonl", jsonl);
    let bin = dir.join("markup.bin");
    run(&["convert".as_ref(), text.as_os_str(), bin.as_os_str()]).success();
    // A name that is not UTF-8: two bytes of BADNAME_X made invalid.
    let mut bytes = std::fs::read(&bin).expect("reads");
    let at = bytes
        .windows(9)
        .position(|w| w == b"BADNAME_X")
        .expect("the name is in the file");
    bytes[at + 1] = 0xff;
    bytes[at + 2] = 0xfe;
    dir.write("markup.bin", bytes)
}

/// The binary with these arguments.
fn run(args: &[&OsStr]) -> crate::util::Run {
    mtanalyze(args.iter().copied())
}

/// `mtanalyze ARGS... --format html -o OUT`, which must succeed.
fn page(args: &[&Path], extra: &[&str], out: &Path) -> String {
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|p| p.as_os_str()).collect();
    all.extend(extra.iter().map(OsStr::new));
    all.extend([
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    mtanalyze(all).success();
    std::fs::read_to_string(out).expect("the page is text")
}

/// The page's data: the JSON between `<script type="application/json"
/// id="data">` and the next `</script>`.
fn data(html: &str) -> Value {
    let open = r#"<script type="application/json" id="data">"#;
    let start = html.find(open).expect("the data element") + open.len();
    let end = start + html[start..].find("</script>").expect("its end");
    serde_json::from_str(&html[start..end]).expect("the data is JSON")
}

/// What every page must be: one file with no URL to fetch, and only its
/// own two script elements.
fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for attr in ["src", "href"] {
        for (at, _) in lower.match_indices(&format!("{attr}=")) {
            let value = lower[at + attr.len() + 1..].trim_start_matches(['"', '\'', ' ']);
            for bad in ["http:", "https:", "//"] {
                assert!(
                    !value.starts_with(bad),
                    "{attr}= names a URL: {}",
                    &html[at..(at + 60).min(html.len())]
                );
            }
        }
    }
    for tag in ["<link", "<img", "<iframe", "@import", "url("] {
        assert!(!lower.contains(tag), "the page holds {tag}");
    }
    assert_eq!(lower.matches("<script").count(), 2, "two script elements");
    assert_eq!(
        lower.matches("</script").count(),
        2,
        "no name ends a script"
    );
    assert!(
        lower.contains("default-src 'none'"),
        "the page forbids requests"
    );
}

/// The label the page's table shows for a JSON function row.
fn label(f: &Value) -> String {
    let name = f["function"].as_str().unwrap_or_default();
    match f["file"].as_str().unwrap_or_default() {
        "" => name.to_owned(),
        file => format!("{name} ({file}:{})", f["line"]),
    }
}

#[test]
fn html_report_is_one_file_whose_rows_are_the_json_reports() {
    let dir = TempDir::new("html-report");
    for name in ["workload.bin", "workload-ring.bin", "workload-full.bin"] {
        let trace = repo_file(&format!("sample-traces/{name}"));
        let html = page(&[&trace], &[], &dir.join("report.html"));
        assert_self_contained(&html);
        let d = data(&html);
        let json = run(&[trace.as_os_str(), "--format".as_ref(), "json".as_ref()])
            .success()
            .json();
        let want = json["functions"].as_array().expect("rows");
        let functions = d["functions"].as_array().expect("rows");
        let order: Vec<usize> = d["order"]
            .as_array()
            .expect("order")
            .iter()
            .map(|i| i.as_u64().expect("index") as usize)
            .collect();
        assert_eq!(order.len(), want.len(), "{name}: every function");
        for (k, (i, w)) in order.iter().zip(want).enumerate() {
            assert_eq!(&functions[*i], w, "{name}: row {k}");
        }
        // The header is the table's.
        let table = run(&[trace.as_os_str()]).success().stdout;
        let header: Vec<&str> = d["header"]
            .as_array()
            .expect("lines")
            .iter()
            .map(|l| l.as_str().expect("text"))
            .collect();
        assert_eq!(header, table.lines().take(header.len()).collect::<Vec<_>>());
        // The warnings, with what the analyzer did about each.
        assert_eq!(
            d["warnings"].as_array().map(Vec::len),
            json["warnings"].as_array().map(Vec::len)
        );
        // A timeline of the stacks, none longer than the trace.
        let tl = d["timeline"]["stacks"].as_array().expect("timeline");
        assert!(!tl.is_empty(), "{name}: a timeline");
        let end = d["trace"]["end_ns"].as_u64().expect("end");
        for s in tl {
            let run = s["running"].as_array().expect("stretches");
            assert!(run.iter().all(|t| t.as_u64().is_some_and(|t| t <= end)));
        }
        // The flame graph's total is the table's total self time.
        let total: u64 = want
            .iter()
            .map(|f| f["tottime_ns"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(
            d["trees"]["trees"][0]["total"][0].as_u64(),
            Some(total),
            "{name}"
        );
    }
}

#[test]
fn html_keeps_names_that_look_like_markup_as_text() {
    let dir = TempDir::new("html-markup");
    let trace = markup_trace(&dir);
    let html = page(&[&trace], &[], &dir.join("markup.html"));
    assert_self_contained(&html);
    assert!(
        !html.contains(SCRIPT_NAME),
        "the name is escaped in the file"
    );
    assert!(!html.contains("<b>"), "no data is markup");
    let d = data(&html);
    let names: Vec<&str> = d["functions"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|f| f["function"].as_str().expect("name"))
        .collect();
    assert!(names.contains(&SCRIPT_NAME), "{names:?}");
    // The invalid bytes arrive as U+FFFD, as in every other output.
    assert!(names.contains(&"B\u{fffd}\u{fffd}NAME_X"), "{names:?}");
}

#[test]
fn html_of_a_damaged_trace_shows_what_was_salvaged_with_the_warnings() {
    let dir = TempDir::new("html-damaged");
    let bytes = std::fs::read(repo_file("sample-traces/workload.bin")).expect("reads");
    let cut = dir.write("cut.bin", &bytes[..bytes.len() / 2]);
    let out = dir.join("cut.html");
    let run = run(&[
        cut.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ])
    .success();
    let html = std::fs::read_to_string(&out).expect("a page");
    assert_self_contained(&html);
    let d = data(&html);
    assert!(
        !d["functions"].as_array().expect("rows").is_empty(),
        "rows salvaged"
    );
    let notes: Vec<&str> = d["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The CLI's summary on stderr is the page's first note.
    let said = run.stderr.lines().next().expect("a warnings line");
    assert_eq!(notes.first().copied(), Some(said), "{notes:?}");
    // Each warning with the sentence saying what the analyzer did.
    let warnings = d["warnings"].as_array().expect("warnings");
    assert!(!warnings.is_empty());
    assert!(warnings
        .iter()
        .all(|w| w["repair"].as_str().is_some_and(|r| !r.is_empty())));
}

#[test]
fn html_diff_shows_the_regression_first_and_the_gate() {
    let dir = TempDir::new("html-diff");
    let out = dir.join("diff.html");
    let (base, new) = (
        repo_file("sample-traces/workload.bin"),
        repo_file("sample-traces/workload-ring.bin"),
    );
    let html = gated_diff_page(&base, &new, &out);
    assert_self_contained(&html);
    let d = data(&html);
    let breaches = d["gate"]["breaches"].as_array().expect("breaches");
    assert_eq!(breaches.len(), 1);
    assert!(breaches[0]
        .as_str()
        .is_some_and(|b| b.contains("parse_term")));
    // The rows are the CLI's JSON diff's, in its order.
    let json = run(&[
        "diff".as_ref(),
        base.as_os_str(),
        new.as_os_str(),
        "--confidence".as_ref(),
        "0".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ])
    .success()
    .json();
    assert_eq!(d["functions"], json["functions"]);
    assert!(d["tree"]["parent"].as_array().is_some_and(|p| p.len() > 1));
}

#[test]
fn html_of_several_traces_has_each_traces_rows_and_no_timeline() {
    let dir = TempDir::new("html-many");
    let (a, b) = (
        repo_file("sample-traces/workload.bin"),
        repo_file("sample-traces/workload-ring.bin"),
    );
    let html = page(&[&a, &b], &[], &dir.join("many.html"));
    assert_self_contained(&html);
    let d = data(&html);
    assert_eq!(d["by_trace"].as_array().map(Vec::len), Some(2));
    assert!(d["timeline"].is_null());
    let json = run(&[
        a.as_os_str(),
        b.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ])
    .success()
    .json();
    let first = d["order"][0].as_u64().expect("a row") as usize;
    assert_eq!(d["functions"][first], json["functions"][0]);
}

/// The page of a diff gated on `parse.*`'s self time, written to `out`
/// (`mtanalyze diff` exits 1: the gate fails on the samples).
fn gated_diff_page(base: &Path, new: &Path, out: &Path) -> String {
    let gated = run(&[
        "diff".as_ref(),
        base.as_os_str(),
        new.as_os_str(),
        "--fail-if".as_ref(),
        "parse.*: tottime > +10%".as_ref(),
        // parse_term's +2168% is one long frame of the ring trace (p =
        // 0.34): noise to the test, so the gate is on the raw changes.
        "--confidence".as_ref(),
        "0".as_ref(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(gated.code, Some(1), "the gate fails: {}", gated.stderr);
    std::fs::read_to_string(out).expect("a page")
}

/// The data of [`gated_diff_page`]'s page.
fn gated_diff_data(base: &Path, new: &Path, out: &Path) -> Value {
    data(&gated_diff_page(base, new, out))
}

#[test]
fn html_data_validates_against_its_schema() {
    let dir = TempDir::new("html-schema");
    let out = dir.join("page.html");
    let mut samples: Vec<PathBuf> = std::fs::read_dir(repo_file("sample-traces"))
        .expect("the sample traces")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin" || x == "json"))
        .collect();
    samples.sort();
    assert!(samples.len() >= 2, "sample traces: {samples:?}");
    let (a, b) = (
        &repo_file("sample-traces/workload.bin"),
        &repo_file("sample-traces/workload-ring.bin"),
    );
    let markup = markup_trace(&dir);
    let marked = dir.write("marked.jsonl", crate::marks::MARKED);
    // Every sample trace under every clock, then the shapes the options
    // give the data: a window, collapsed paths, several traces.
    let mut reports: Vec<(String, Value)> = Vec::new();
    for trace in samples.iter().chain([&markup, &marked]) {
        for clock in ["stack", "gil", "wall"] {
            let d = data(&page(&[trace], &["--clock", clock], &out));
            reports.push((format!("{} --clock {clock}", trace.display()), d));
        }
    }
    for (what, args) in [
        ("a window", &["--from", "1ms", "--to", "5ms"][..]),
        ("collapsed paths", &["--collapse-recursion", "direct"][..]),
    ] {
        reports.push((what.to_owned(), data(&page(&[a], args, &out))));
    }
    let many = data(&page(&[a, b], &["--by-trace"], &out));
    reports.push(("several traces".to_owned(), many));
    for (what, d) in &reports {
        assert_eq!(d["kind"], "report", "{what}");
        let errors = crate::schema::violations("html-page.schema.json", d);
        assert!(errors.is_empty(), "{what}:\n{}", errors.join("\n"));
    }
    // The shapes the validation met: null and non-null of each nullable.
    let met = |f: &dyn Fn(&Value) -> bool| reports.iter().any(|(_, d)| f(d));
    assert!(met(&|d| d["trace"]["window"].is_array()));
    assert!(met(&|d| d["collapse"].is_string()));
    assert!(met(&|d| d["timeline"].is_null()));
    assert!(met(&|d| d["by_trace"]
        .as_array()
        .is_some_and(|t| !t.is_empty())));
    assert!(met(&|d| d["timeline"]["stacks"]
        .as_array()
        .is_some_and(|s| !s.is_empty())));
    assert!(met(&|d| d["marks"]
        .as_array()
        .is_some_and(|m| !m.is_empty())));
    assert!(met(&|d| d["warnings"]
        .as_array()
        .is_some_and(|w| !w.is_empty())));

    let diffs = [
        data(&page(&[Path::new("diff"), a, b], &[], &out)),
        data(&page(
            &[Path::new("diff"), a, b],
            &["--collapse-recursion", "all"],
            &out,
        )),
        gated_diff_data(a, b, &out),
    ];
    for d in &diffs {
        assert_eq!(d["kind"], "diff");
        crate::schema::assert_valid("html-page.schema.json", d);
    }
    assert!(diffs[2]["gate"]["breaches"]
        .as_array()
        .is_some_and(|b| !b.is_empty()));

    // The schema is not one that takes anything: a field the page does
    // not know, a wrong type deep in a tree, a report field missing, a
    // model row that is not the report's shape, a diff without its gate.
    let report = &reports[0].1;
    let broken: Vec<(&str, Value)> = vec![
        ("unknown field", with(report, |d| d["extra"] = 1.into())),
        (
            "tree type",
            with(report, |d| d["trees"]["trees"][0]["parent"][0] = "x".into()),
        ),
        (
            "missing field",
            with(report, |d| {
                d.as_object_mut().expect("an object").remove("order");
            }),
        ),
        (
            "model row",
            with(report, |d| d["functions"][0]["ncalls"] = (-1).into()),
        ),
        (
            "diff gate",
            with(&diffs[0], |d| {
                d.as_object_mut().expect("an object").remove("gate");
            }),
        ),
        (
            "diff kind",
            with(&diffs[0], |d| d["kind"] = "report".into()),
        ),
    ];
    for (what, d) in broken {
        assert!(
            !crate::schema::violations("html-page.schema.json", &d).is_empty(),
            "the schema accepts a page with a broken {what}"
        );
    }
}

/// `v` changed by `change`.
fn with(v: &Value, change: impl FnOnce(&mut Value)) -> Value {
    let mut v = v.clone();
    change(&mut v);
    v
}

#[test]
fn html_refuses_the_flags_the_page_does_itself() {
    let trace = repo_file("sample-traces/workload.bin");
    for flag in [&["--limit", "3"][..], &["--stacks"], &["--filter", "x"]] {
        let mut args = vec![trace.as_os_str()];
        args.extend(flag.iter().map(OsStr::new));
        args.extend([OsStr::new("--format"), OsStr::new("html")]);
        let line = mtanalyze(args).fails_with_one_line();
        assert!(line.contains(flag[0]) && line.contains("html"), "{line}");
    }
}

/// Python with Playwright in `target/playwright-venv` (made and installed
/// once), and Chromium, or why they cannot be had.
fn browser() -> Result<PathBuf, String> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let chromium = Path::new("/usr/bin/chromium");
            if !chromium.exists() {
                return Err(format!(
                    "{} is missing (Debian's `chromium` package: apt-get install chromium)",
                    chromium.display()
                ));
            }
            // Only the Python package: its browsers are never downloaded
            // (`playwright install` is not run), Debian's Chromium is used.
            python_with("playwright-venv", "playwright", "playwright.sync_api")
        })
        .clone()
}

/// Where the screenshots go: `target/html-screenshots/`.
fn screenshots() -> PathBuf {
    let target = Path::new(env!("CARGO_BIN_EXE_mtanalyze"))
        .ancestors()
        .nth(2)
        .expect("a target directory")
        .to_path_buf();
    let dir = target.join("html-screenshots");
    std::fs::create_dir_all(&dir).expect("creates the screenshot directory");
    dir
}

#[test]
fn html_pages_work_in_headless_chromium() {
    let python = match browser() {
        Ok(p) => p,
        Err(why) => {
            println!("SKIPPED: html_pages_work_in_headless_chromium: {why}");
            eprintln!("SKIPPED: html_pages_work_in_headless_chromium: {why}");
            return;
        }
    };
    let dir = TempDir::new("html-browser");
    let shots = screenshots();
    let mut cases: Vec<Value> = Vec::new();
    let mut report_case = |name: &str, traces: &[&Path], more: Value| {
        let out = dir.join(&format!("{name}.html"));
        page(traces, &[], &out);
        let mut json_args: Vec<&std::ffi::OsStr> = traces.iter().map(|p| p.as_os_str()).collect();
        json_args.extend([OsStr::new("--format"), OsStr::new("json")]);
        let json = mtanalyze(json_args).success().json();
        let rows = json["functions"].as_array().cloned().unwrap_or_default();
        let mut case = serde_json::json!({
            "name": name,
            "url": format!("file://{}", out.display()),
            "kind": "report",
            "screenshot": shots.join(format!("{name}.png")),
            "first_rows": rows.iter().take(8).map(label).collect::<Vec<_>>(),
            "first_name": rows.first().map(|f| f["function"].clone()),
            "first_self": rows.first().map(|f| f["tottime_ns"].clone()),
        });
        if let (Some(c), Some(m)) = (case.as_object_mut(), more.as_object()) {
            c.extend(m.clone());
        }
        cases.push(case);
    };
    for name in ["workload", "workload-ring", "workload-full"] {
        let trace = repo_file(&format!("sample-traces/{name}.bin"));
        report_case(name, &[&trace], serde_json::json!({}));
    }
    let (a, b) = (
        repo_file("sample-traces/workload.bin"),
        repo_file("sample-traces/workload-ring.bin"),
    );
    report_case(
        "merged",
        &[&a, &b],
        serde_json::json!({"expect_timeline": false, "expect_by_trace": true}),
    );
    let markup = markup_trace(&dir);
    report_case(
        "markup",
        &[&markup],
        serde_json::json!({"expect_text": SCRIPT_NAME}),
    );
    let bytes = std::fs::read(&a).expect("reads");
    let cut = dir.write("cut.bin", &bytes[..bytes.len() / 2]);
    report_case(
        "damaged",
        &[&cut],
        serde_json::json!({"expect_warnings": ["1 warning: truncated_chunk", "truncated_chunk ×1"]}),
    );
    // Many tasks: 20,000 (200,000 takes about 10 s in a debug build; see
    // docs/GUIDE.md for the page of 200,000 measured by hand).
    let tasks = dir.join("tasks.bin");
    let opts = mtanalyze_testkit::synth::TaskOptions {
        tasks: 20_000,
        ..Default::default()
    };
    mtanalyze_testkit::synth::generate_tasks(&opts, &tasks, "test".into()).expect("writes");
    report_case("tasks-20000", &[&tasks], serde_json::json!({}));
    let diff_out = dir.join("diff.html");
    run(&[
        "diff".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        diff_out.as_os_str(),
        "--fail-if".as_ref(),
        "parse.*: tottime > +10%".as_ref(),
        "--confidence".as_ref(),
        "0".as_ref(),
    ]);
    cases.push(serde_json::json!({
        "name": "diff",
        "url": format!("file://{}", diff_out.display()),
        "kind": "diff",
        "screenshot": shots.join("diff.png"),
        // docs/GUIDE.md, "Compare two traces": parse_term got slower.
        "first_function": "parse_term",
        "first_slower": true,
        "gate_failed": true,
    }));
    let spec = dir.write("spec.json", serde_json::to_vec(&cases).expect("JSON"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/html_browser.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&spec)
        .output()
        .expect("runs the driver");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        println!(
            "SKIPPED: html_pages_work_in_headless_chromium: {}",
            stderr.trim()
        );
        eprintln!(
            "SKIPPED: html_pages_work_in_headless_chromium: {}",
            stderr.trim()
        );
        return;
    }
    assert!(out.status.success(), "the driver failed:\n{stderr}");
    let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a result line"))
        .collect();
    assert_eq!(results.len(), cases.len(), "every page checked:\n{stderr}");
    let mut failures = Vec::new();
    for r in &results {
        println!(
            "{}: loaded in {} ms; screenshot {}",
            r["name"].as_str().unwrap_or("?"),
            r["load_ms"],
            shots
                .join(format!("{}.png", r["name"].as_str().unwrap_or("?")))
                .display()
        );
        for f in r["failures"].as_array().into_iter().flatten() {
            failures.push(format!("{}: {}", r["name"], f));
        }
        // The command a stretch shows runs, and counts that window.
        if let Some(cmd) = r["command"].as_str() {
            let words: Vec<&str> = cmd.split(' ').collect();
            let from = words.iter().position(|w| *w == "--from").expect("--from");
            let (lo, hi) = (words[from + 1], words[from + 3]);
            let json = run(&[
                words[1].as_ref(),
                "--from".as_ref(),
                lo.as_ref(),
                "--to".as_ref(),
                hi.as_ref(),
                "--format".as_ref(),
                "json".as_ref(),
            ])
            .success()
            .json();
            let window = &json["trace"]["window"];
            let ns = |s: &str| s.trim_end_matches("ns").parse::<u64>().expect("ns");
            assert_eq!(window["from_ns"].as_u64(), Some(ns(lo)), "{cmd}");
            assert_eq!(window["to_ns"].as_u64(), Some(ns(hi)), "{cmd}");
        }
    }
    assert!(
        failures.is_empty(),
        "in the browser:\n{}",
        failures.join("\n")
    );
}

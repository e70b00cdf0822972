//! `mtanalyze diff` on saved reports (`mtanalyze TRACE --format json`): the
//! same diff, verdicts and p-values included, as of the traces they were
//! made from, on either side and in any mix with traces; told apart from
//! a JSON-lines trace by content, whatever the file is named; refused,
//! with the reason, where the diff needs what a report does not hold.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{mtanalyze, repo_file, vector, Run, TempDir};

/// The two bundled traces of the guide's diff section.
fn traces() -> (PathBuf, PathBuf) {
    (
        repo_file("sample-traces/workload.bin"),
        repo_file("sample-traces/workload-ring.bin"),
    )
}

/// Saves `trace`'s report as `dir/name` with `mtanalyze TRACE --format
/// json ARGS... -o FILE`.
fn save(dir: &TempDir, name: &str, trace: &Path, args: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut all = vec![trace.as_os_str(), "--format".as_ref(), "json".as_ref()];
    all.extend(args.iter().map(OsStr::new));
    all.extend(["-o".as_ref(), out.as_os_str()]);
    mtanalyze(all).success();
    out
}

/// `mtanalyze diff BASE NEW ARGS...`.
fn diff(base: &Path, new: &Path, args: &[&str]) -> Run {
    let mut all = vec!["diff".as_ref(), base.as_os_str(), new.as_os_str()];
    all.extend(args.iter().map(OsStr::new));
    mtanalyze(all)
}

/// Each function's (name, verdict, p-value) in a diff's JSON.
fn verdicts(diff: &Value) -> Vec<(String, String, String)> {
    diff["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap_or_default().to_owned(),
                f["verdict"].as_str().unwrap_or_default().to_owned(),
                f["p_value"].to_string(),
            )
        })
        .collect()
}

#[test]
fn saved_reports_diff_as_their_traces_do() {
    let dir = TempDir::new("saved");
    let (base, new) = traces();
    let (a, b) = (
        save(&dir, "a.json", &base, &[]),
        save(&dir, "b.json", &new, &[]),
    );
    let of_traces = diff(&base, &new, &["--format", "json"]).success().json();
    let want = verdicts(&of_traces);
    // The test has something to tell apart: both verdicts occur.
    assert!(want.iter().any(|(_, v, _)| v == "noise"), "{want:?}");
    assert!(want.iter().any(|(_, v, _)| v != "noise"), "{want:?}");
    assert_eq!(of_traces["significance"]["method"], "call_medians");

    // Saved on both sides, and mixed either way: the same diff.
    for (b_side, n_side) in [(&a, &b), (&a, &new), (&base, &b)] {
        let got = diff(b_side, n_side, &["--format", "json"]).success().json();
        assert_eq!(verdicts(&got), want, "{b_side:?} {n_side:?}");
        assert_eq!(got, of_traces, "{b_side:?} {n_side:?}");
    }
    // The table too, and the gates read the same verdicts.
    assert_eq!(
        diff(&a, &b, &[]).success().stdout,
        diff(&base, &new, &[]).success().stdout
    );
    let gate = ["--fail-if", "tottime > +10%", "--fail-if", "tottime < -10%"];
    let (gated, gated_traces) = (diff(&a, &b, &gate), diff(&base, &new, &gate));
    assert_eq!(gated.code, Some(1), "{}", gated.stderr);
    assert_eq!(gated.stderr, gated_traces.stderr);

    // Repeat runs: saved reports and traces mixed on each side.
    let runs = |base_runs: [&Path; 2], new_runs: [&Path; 2]| {
        let mut all = vec!["diff".as_ref(), "--format".as_ref(), "json".as_ref()];
        all.push(OsStr::new("--base"));
        all.extend(base_runs.iter().map(|p| p.as_os_str()));
        all.push(OsStr::new("--new"));
        all.extend(new_runs.iter().map(|p| p.as_os_str()));
        mtanalyze(all).success().json()
    };
    assert_eq!(
        runs([&a, &base], [&new, &b]),
        runs([&base, &base], [&new, &new])
    );

    // `--by-trace`'s object: its merged report is compared.
    let by_trace = save(&dir, "by-trace.json", &base, &["--by-trace"]);
    let got = diff(&by_trace, &b, &["--format", "json"]).success().json();
    assert_eq!(got, of_traces);
}

#[test]
fn a_saved_report_is_told_by_content_not_by_name() {
    let dir = TempDir::new("saved-names");
    let (base, new) = traces();
    // A report under any name, and a JSON-lines trace named `.json`.
    let report = save(&dir, "report.trace", &base, &[]);
    let events = dir.write(
        "events.json",
        std::fs::read(vector("fibers.jsonl")).expect("read the vector"),
    );
    let want = diff(&base, &new, &["--format", "json"]).success().json();
    assert_eq!(
        diff(&report, &new, &["--format", "json"]).success().json(),
        want
    );
    let as_trace = diff(&events, &events, &["--format", "json"])
        .success()
        .json();
    let jsonl = vector("fibers.jsonl");
    let of_jsonl = diff(&jsonl, &jsonl, &["--format", "json"]).success().json();
    assert_eq!(verdicts(&as_trace), verdicts(&of_jsonl));
    assert!(!verdicts(&as_trace).is_empty());
}

#[test]
fn what_a_saved_report_does_not_hold_is_refused_with_the_reason() {
    let dir = TempDir::new("saved-refused");
    let (base, new) = traces();
    let (a, b) = (
        save(&dir, "a.json", &base, &[]),
        save(&dir, "b.json", &new, &[]),
    );
    let svg = dir.join("diff.svg");
    let svg = svg.to_str().expect("a UTF-8 temporary path");
    for args in [
        &["--format", "folded"][..],
        &["--format", "html"][..],
        &["--flamegraph", svg][..],
    ] {
        let line = diff(&a, &b, args).fails_with_one_line();
        assert!(
            line.contains("a.json: a saved report holds no call paths"),
            "{args:?}: {line}"
        );
    }
    let line = diff(&a, &new, &["--clock", "wall"]).fails_with_one_line();
    assert!(
        line.contains("a.json: a saved report was analyzed with --clock stack, not wall"),
        "{line}"
    );
    let line = diff(&a, &b, &["--from", "1ms"]).fails_with_one_line();
    assert!(line.contains("--from and --to apply to traces"), "{line}");
    // A report saved with some of its functions or edges left out would
    // show them as gone: refused, saying why. A whole one is not marked.
    let whole: Value =
        serde_json::from_slice(&std::fs::read(&a).expect("read a.json")).expect("a.json is JSON");
    assert!(whole.get("functions_total").is_none() && whole.get("edges_total").is_none());
    let limited = save(&dir, "limited.json", &base, &["--limit", "2"]);
    let report: Value = serde_json::from_slice(&std::fs::read(&limited).expect("read"))
        .expect("limited.json is JSON");
    let total = report["functions_total"].as_u64().expect("functions_total");
    assert_eq!(report["functions"].as_array().expect("functions").len(), 2);
    assert!(total > 2, "{total}");
    let line = diff(&limited, &b, &[]).fails_with_one_line();
    assert!(
        line.contains(&format!(
            "limited.json: a saved report lists 2 of its {total} functions (it was saved with --filter or --limit)"
        )),
        "{line}"
    );
    let filtered = save(&dir, "filtered.json", &new, &["--filter", "^work"]);
    let line = diff(&a, &filtered, &[]).fails_with_one_line();
    assert!(
        line.contains("filtered.json: a saved report lists "),
        "{line}"
    );
    let callers = save(
        &dir,
        "callers.json",
        &new,
        &["--callers", "^nothing-calls-this$"],
    );
    let line = diff(&a, &callers, &[]).fails_with_one_line();
    assert!(
        line.contains("callers.json: a saved report lists 0 of its "),
        "{line}"
    );
    // A saved report cut short is an error, not a trace.
    let text = std::fs::read_to_string(&a).expect("read the report");
    let cut = dir.write("cut.json", &text[..text.len() / 2]);
    let line = diff(&cut, &b, &[]).fails_with_one_line();
    assert!(
        line.contains("cut.json: a saved report (JSON) that does not read back"),
        "{line}"
    );
}

//! `--from`/`--to` on the real binary: windows that split the sample trace
//! add up, every command that analyzes takes them, and bad times are
//! one-line errors.

use std::collections::BTreeMap;

use mtanalyze_testkit::sums::summed;
use serde_json::Value;

use crate::pictures::{check_nesting, chrome_tracks};
use crate::util::{mtanalyze, repo_file, TempDir};

fn workload() -> std::path::PathBuf {
    repo_file("sample-traces/workload.bin")
}

/// The JSON report of the sample trace under `clock`, with `window` args.
fn report(clock: &str, window: &[&str]) -> Value {
    let trace = workload();
    let mut args: Vec<&std::ffi::OsStr> = vec![
        trace.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--clock".as_ref(),
        clock.as_ref(),
    ];
    args.extend(window.iter().map(std::ffi::OsStr::new));
    mtanalyze(args).success().json()
}

const FUNCTION_FIELDS: [&str; 8] = [
    "ncalls",
    "primitive_calls",
    "tottime_ns",
    "cumtime_ns",
    "paused_ns",
    "open_at_end",
    "scheduled_ns",
    "waiting_ns",
];

/// Each function's additive fields, by `file:line name`.
fn function_sums(v: &Value) -> BTreeMap<String, Vec<u64>> {
    let mut m = BTreeMap::new();
    for f in v["functions"].as_array().expect("functions") {
        let key = format!("{}:{} {}", f["file"], f["line"], f["function"]);
        let row = FUNCTION_FIELDS
            .iter()
            .map(|k| f[*k].as_u64().unwrap_or(0))
            .collect();
        m.insert(key, row);
    }
    m
}

#[test]
fn windows_that_split_the_sample_trace_add_up_under_every_clock() {
    for clock in ["stack", "gil", "wall"] {
        let whole = report(clock, &[]);
        let early = report(clock, &["--to", "123.456789ms"]);
        let middle = report(clock, &["--from", "123.456789ms", "--to", "0.3s"]);
        let late = report(clock, &["--from", "300000us"]);
        let sum = summed(
            &summed(&function_sums(&early), &function_sums(&middle)),
            &function_sums(&late),
        );
        assert_eq!(sum, function_sums(&whole), "clock {clock}");
        // Each window holds part of the calls, and says which it is.
        let calls = |v: &Value| function_sums(v).values().map(|r| r[0]).sum::<u64>();
        assert!(
            calls(&middle) > 0 && calls(&middle) < calls(&whole),
            "clock {clock}"
        );
        assert_eq!(middle["trace"]["window"]["from_ns"], 123_456_789);
        assert_eq!(middle["trace"]["window"]["to_ns"], 300_000_000);
        assert_eq!(late["trace"]["window"]["to_ns"], whole["trace"]["end_ns"]);
        assert!(whole["trace"].get("window").is_none());
        // Stack rows too: running time splits the same way.
        let running = |v: &Value| -> u64 {
            v["stacks"]
                .as_array()
                .expect("stacks")
                .iter()
                .map(|s| s["running_ns"].as_u64().unwrap_or(0))
                .sum()
        };
        assert_eq!(
            running(&early) + running(&middle) + running(&late),
            running(&whole),
            "clock {clock}"
        );
    }
}

#[test]
fn the_table_names_the_window_and_a_window_past_the_end_is_the_whole_trace() {
    let trace = workload();
    let run = mtanalyze([
        trace.as_os_str(),
        "--from".as_ref(),
        "100ms".as_ref(),
        "--to".as_ref(),
        "250ms".as_ref(),
        "--width".as_ref(),
        "0".as_ref(),
    ])
    .success();
    run.stdout_has("window: 100ms..250ms (150ms)");
    let whole = report("stack", &[]);
    let past = report("stack", &["--from", "0", "--to", "1min"]);
    assert_eq!(past["functions"], whole["functions"]);
    assert_eq!(past["edges"], whole["edges"]);
}

#[test]
fn diff_folded_and_chrome_export_take_the_window() {
    let trace = workload();
    let dir = TempDir::new("windows");
    let window = ["--from", "100ms", "--to", "200ms"];
    // diff: both sides counted in the window; a trace against itself has no change.
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "diff".as_ref(),
        trace.as_os_str(),
        trace.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ];
    args.extend(window.iter().map(std::ffi::OsStr::new));
    let diff = mtanalyze(args).success().json();
    let windowed = report("stack", &window);
    let functions = diff["functions"].as_array().expect("functions");
    assert_eq!(
        functions.len(),
        windowed["functions"].as_array().map_or(0, Vec::len)
    );
    for f in functions {
        assert_eq!(f["delta"]["tottime_ns"], 0);
        let base_calls = f["base"]["ncalls"].as_u64().expect("base ncalls");
        let want = windowed["functions"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|g| g["function"] == f["function"] && g["line"] == f["line"])
            })
            .expect("the same function in the windowed report");
        assert_eq!(base_calls, want["ncalls"].as_u64().unwrap_or(u64::MAX));
    }
    // folded: self time per path sums to the window's tottime.
    let mut args: Vec<&std::ffi::OsStr> =
        vec![trace.as_os_str(), "--format".as_ref(), "folded".as_ref()];
    args.extend(window.iter().map(std::ffi::OsStr::new));
    let folded = mtanalyze(args).success();
    let folded_ns: u64 = folded
        .stdout
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    let tottime: u64 = function_sums(&windowed).values().map(|r| r[2]).sum();
    assert_eq!(folded_ns, tottime);
    // chrome: every slice lies in the window, tracks still nest.
    let out = dir.join("w.json");
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "export".as_ref(),
        trace.as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    args.extend(window.iter().map(std::ffi::OsStr::new));
    mtanalyze(args).success();
    let text = std::fs::read_to_string(&out).expect("export written");
    let tracks = chrome_tracks(&text);
    let slices: Vec<_> = tracks.values().flat_map(|(_, s)| s.iter()).collect();
    assert!(!slices.is_empty());
    let first = slices.iter().map(|s| s.2).min().unwrap_or(0);
    let last = slices.iter().map(|s| s.3).max().unwrap_or(0);
    assert!(
        last - first <= 100_000_000,
        "slices span {} ns, more than the window",
        last - first
    );
    for (_, s) in tracks.values() {
        check_nesting(s);
    }
}

#[test]
fn bad_windows_are_one_line_errors() {
    let trace = workload();
    for (args, needle) in [
        (vec!["--from", "5"], "bad time `5`"),
        (vec!["--from", "1.5xs"], "bad time"),
        (vec!["--to", "0.5ns"], "finer than a nanosecond"),
        (vec!["--from", "2s", "--to", "1s"], "ends"),
        (
            vec!["--from", "mark:warm-up done"],
            "no mark named `warm-up done`",
        ),
    ] {
        let mut all: Vec<&std::ffi::OsStr> = vec![trace.as_os_str()];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        let run = mtanalyze(all);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn the_diff_header_names_the_window_of_both_sides() {
    let trace = workload();
    let run = mtanalyze([
        "diff".as_ref(),
        trace.as_os_str(),
        trace.as_os_str(),
        "--from".as_ref(),
        "100ms".as_ref(),
        "--to".as_ref(),
        "200ms".as_ref(),
        "--width".as_ref(),
        "0".as_ref(),
    ])
    .success();
    run.stdout_has("window: 100ms..200ms (100ms)");
}

/// A start-up, then a service, with marks where the phases change.
const PHASES: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "startup"}
{"ts": 100, "tid": 1, "ev": "exit", "fn": "startup"}
{"ts": 100, "tid": 1, "ev": "mark", "name": "warm-up done"}
{"ts": 100, "tid": 1, "ev": "enter", "fn": "serve"}
{"ts": 150, "tid": 1, "ev": "mark", "name": "half"}
{"ts": 170, "tid": 1, "ev": "mark", "name": "half"}
{"ts": 300, "tid": 1, "ev": "exit", "fn": "serve"}
"#;

#[test]
fn windows_name_marks_and_a_mark_is_its_first_instance() {
    let dir = TempDir::new("marks-window");
    let trace = dir.write("phases.jsonl", PHASES);
    let rows = |args: &[&str]| -> BTreeMap<String, (u64, u64)> {
        let mut all: Vec<&std::ffi::OsStr> =
            vec![trace.as_os_str(), "--format".as_ref(), "json".as_ref()];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        let v = mtanalyze(all).success().json();
        v["functions"]
            .as_array()
            .expect("functions")
            .iter()
            .map(|f| {
                let name = f["function"].as_str().unwrap_or_default().to_owned();
                (
                    name,
                    (
                        f["ncalls"].as_u64().unwrap_or(0),
                        f["tottime_ns"].as_u64().unwrap_or(0),
                    ),
                )
            })
            .collect()
    };
    let steady = rows(&["--from", "mark:warm-up done"]);
    assert_eq!(steady, BTreeMap::from([("serve".to_owned(), (1, 200))]));
    let early = rows(&["--to", "mark:half"]);
    assert_eq!(
        early,
        BTreeMap::from([
            ("serve".to_owned(), (1, 50)),
            ("startup".to_owned(), (1, 100))
        ])
    );
    let late = rows(&["--from", "mark:half", "--to", "1us"]);
    assert_eq!(late, BTreeMap::from([("serve".to_owned(), (0, 150))]));
}

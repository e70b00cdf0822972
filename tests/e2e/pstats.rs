//! `--format pstats -o FILE` (or `-o -`, stdout): Python's `pstats.Stats` loads the file, and
//! its numbers are the report's (calls, primitive calls, times in seconds,
//! caller edges with `nc` first as cProfile writes them).

use std::ffi::OsStr;
use std::process::Command;

use serde_json::Value;

use crate::util::{command, mtanalyze, vector, TempDir};

/// Loads a pstats file with Python and prints it as JSON:
/// `{"file:line:name": [cc, nc, tt, ct, {"file:line:name": [nc, cc, tt, ct]}]}`.
const LOAD: &str = r#"
import json, pstats, sys
s = pstats.Stats(sys.argv[1])
k = lambda f: "%s:%d:%s" % f
print(json.dumps({k(f): [cc, nc, tt, ct, {k(c): list(v) for c, v in callers.items()}]
                  for f, (cc, nc, tt, ct, callers) in s.stats.items()}))
"#;

/// Runs `python3 -c LOAD FILE`; `None` (the test skips) without python3.
fn load_with_python(path: &std::path::Path) -> Option<Value> {
    let out = match Command::new("python3")
        .arg("-c")
        .arg(LOAD)
        .arg(path)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("SKIPPED: python3 is not available ({e}); the pstats file was not loaded");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "pstats.Stats could not load {}:\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("the loader prints JSON"))
}

fn key(name: &Value, file: &Value, line: &Value) -> String {
    let file = file.as_str().unwrap();
    let file = if file.is_empty() { "~" } else { file };
    format!("{file}:{}:{}", line, name.as_str().unwrap())
}

fn seconds(ns: &Value) -> f64 {
    ns.as_u64().unwrap() as f64 / 1e9
}

#[track_caller]
fn close(a: &Value, b: f64, what: &str) {
    let a = a.as_f64().unwrap();
    assert!(
        (a - b).abs() <= 1e-12,
        "{what}: {a} in pstats, {b} in the report"
    );
}

#[test]
fn pstats_file_loads_in_python_with_the_reports_numbers() {
    for (name, clock) in [("recursion-a", "stack"), ("gil-threads", "gil")] {
        let dir = TempDir::new("pstats");
        let trace = vector(&format!("{name}.jsonl"));
        let prof = dir.join("out.prof");
        let clock_args = ["--clock", clock];
        let run = mtanalyze(
            [trace.as_os_str()]
                .into_iter()
                .chain(clock_args.iter().map(|a| a.as_ref()))
                .chain([
                    "--format".as_ref(),
                    "pstats".as_ref(),
                    "-o".as_ref(),
                    prof.as_os_str(),
                ]),
        )
        .success();
        assert!(run.stdout.is_empty(), "pstats goes to the file only");
        let report = mtanalyze(
            [trace.as_os_str()]
                .into_iter()
                .chain(clock_args.iter().map(|a| a.as_ref()))
                .chain(["--format".as_ref(), "json".as_ref()]),
        )
        .success()
        .json();
        let Some(stats) = load_with_python(&prof) else {
            return;
        };
        let functions = report["functions"].as_array().unwrap();
        assert_eq!(stats.as_object().unwrap().len(), functions.len(), "{name}");
        for f in functions {
            let k = key(&f["function"], &f["file"], &f["line"]);
            let s = &stats[&k];
            assert_eq!(s[0], f["primitive_calls"], "{name} {k} cc");
            assert_eq!(s[1], f["ncalls"], "{name} {k} nc");
            close(&s[2], seconds(&f["tottime_ns"]), &format!("{name} {k} tt"));
            close(&s[3], seconds(&f["cumtime_ns"]), &format!("{name} {k} ct"));
        }
        let edges = report["edges"].as_array().unwrap();
        let caller_entries: usize = stats
            .as_object()
            .unwrap()
            .values()
            .map(|s| s[4].as_object().unwrap().len())
            .sum();
        assert_eq!(
            caller_entries,
            edges.len(),
            "{name}: one caller entry per edge"
        );
        for e in edges {
            let callee = key(&e["callee"], &e["callee_file"], &e["callee_line"]);
            let caller = key(&e["caller"], &e["caller_file"], &e["caller_line"]);
            let c = &stats[&callee][4][&caller];
            assert_eq!(c[0], e["ncalls"], "{name} {caller} -> {callee} nc");
            assert_eq!(c[1], e["primitive_calls"], "{name} {caller} -> {callee} cc");
            close(&c[2], seconds(&e["tottime_ns"]), "edge tt");
            close(&c[3], seconds(&e["cumtime_ns"]), "edge ct");
        }
    }
}

#[test]
fn pstats_needs_an_output_file_or_stdout_by_name() {
    let trace = vector("recursion-a.jsonl");
    let line = mtanalyze([trace.as_os_str(), "--format".as_ref(), "pstats".as_ref()])
        .fails_with_one_line();
    assert!(line.contains("-o FILE"), "{line}");
    // `-o -`: the file's bytes on stdout (what a binding reads in memory).
    let dir = TempDir::new("pstats-stdout");
    let prof = dir.join("out.prof");
    let args = |o: &OsStr| -> Vec<std::ffi::OsString> {
        [
            trace.as_os_str(),
            "--format".as_ref(),
            "pstats".as_ref(),
            "-o".as_ref(),
            o,
        ]
        .into_iter()
        .map(OsStr::to_owned)
        .collect()
    };
    mtanalyze(args(prof.as_os_str())).success();
    let piped = command()
        .args(args(OsStr::new("-")))
        .output()
        .expect("mtanalyze runs");
    assert!(piped.status.success(), "{piped:?}");
    let file = std::fs::read(&prof).expect("the pstats file");
    assert!(!file.is_empty());
    assert_eq!(piped.stdout, file, "-o - writes the file's bytes");
    let line = mtanalyze([
        trace.as_os_str(),
        "--format".as_ref(),
        "pstats".as_ref(),
        "-o".as_ref(),
        trace.as_os_str(),
    ])
    .fails_with_one_line();
    assert!(line.contains("same file"), "{line}");
}

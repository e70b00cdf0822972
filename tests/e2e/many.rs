//! Many traces, one report (issue 18): `mtanalyze A B DIR` sums the
//! reports of every trace, leaves out (and names) the ones that fail, and
//! fails only when all do.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::util::{mtanalyze, vector, TempDir};

const VECTORS: [&str; 4] = ["fibers", "gil-threads", "recursion-a", "recursion-b"];

fn json(args: &[&std::ffi::OsStr]) -> Value {
    let mut a: Vec<&std::ffi::OsStr> = args.to_vec();
    a.extend([
        std::ffi::OsStr::new("--format"),
        std::ffi::OsStr::new("json"),
    ]);
    mtanalyze(a).success().json()
}

/// (ncalls, tottime, cumtime, paused) per function name.
fn totals(reports: &[Value]) -> BTreeMap<String, [u64; 4]> {
    let mut m: BTreeMap<String, [u64; 4]> = BTreeMap::new();
    for r in reports {
        for f in r["functions"].as_array().unwrap() {
            let e = m
                .entry(f["function"].as_str().unwrap().to_owned())
                .or_default();
            for (a, k) in e
                .iter_mut()
                .zip(["ncalls", "tottime_ns", "cumtime_ns", "paused_ns"])
            {
                *a += f[k].as_u64().unwrap();
            }
        }
    }
    m
}

#[test]
fn the_report_of_several_traces_is_the_sum_of_theirs() {
    let dir = TempDir::new("many");
    let paths: Vec<_> = VECTORS
        .iter()
        .map(|v| vector(&format!("{v}.jsonl")))
        .collect();
    let each: Vec<Value> = paths.iter().map(|p| json(&[p.as_os_str()])).collect();
    let args: Vec<&std::ffi::OsStr> = paths.iter().map(|p| p.as_os_str()).collect();
    let all = json(&args);
    assert_eq!(totals(std::slice::from_ref(&all)), totals(&each));
    assert_eq!(all["trace"]["traces"], 4);
    let events: u64 = each
        .iter()
        .map(|r| r["trace"]["events"].as_u64().unwrap())
        .sum();
    assert_eq!(all["trace"]["events"], events);
    // A directory of them is the same report.
    for p in &paths {
        std::fs::copy(p, dir.join(p.file_name().unwrap().to_str().unwrap())).unwrap();
    }
    let from_dir = json(&[dir.path().as_os_str()]);
    assert_eq!(totals(&[from_dir]), totals(&each));
}

#[test]
fn a_trace_that_fails_is_left_out_and_named_unless_all_fail() {
    let dir = TempDir::new("many-bad");
    let good = vector("fibers.jsonl");
    let bad = dir.write("bad.bin", "not a trace at all");
    let r = mtanalyze([
        good.as_os_str(),
        bad.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ])
    .success();
    assert!(
        r.stderr.contains("bad.bin") && r.stderr.contains("(left out)"),
        "{}",
        r.stderr
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(totals(&[v]), totals(&[json(&[good.as_os_str()])]));
    let worse = dir.write("worse.bin", "nor this");
    let line = mtanalyze([bad.as_os_str(), worse.as_os_str()]).fails_with_one_line();
    assert!(
        line.contains("bad.bin") && line.contains("not a trace"),
        "{line}"
    );
}

#[test]
fn by_trace_keeps_each_trace_as_a_column_and_in_json() {
    let a = vector("recursion-a.jsonl");
    let b = vector("recursion-b.jsonl");
    let r = mtanalyze([
        a.as_os_str(),
        b.as_os_str(),
        "--by-trace".as_ref(),
        "--width".as_ref(),
        "0".as_ref(),
    ])
    .success();
    let header = r
        .stdout
        .lines()
        .find(|l| l.contains("ncalls"))
        .expect("a table");
    assert!(header.contains("trace"), "{header}");
    for name in ["recursion-a.jsonl", "recursion-b.jsonl"] {
        assert!(
            r.stdout.lines().skip(4).any(|l| l.contains(name)),
            "{}",
            r.stdout
        );
    }
    let v = mtanalyze([
        a.as_os_str(),
        b.as_os_str(),
        "--by-trace".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ])
    .success()
    .json();
    let each: Vec<Value> = v["by_trace"].as_array().unwrap().clone();
    assert_eq!(each.len(), 2);
    assert_eq!(totals(&[v["merged"].clone()]), totals(&each));
    assert_eq!(totals(&each[..1]), totals(&[json(&[a.as_os_str()])]));
}

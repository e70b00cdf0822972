//! Rotating series (`trace.bin`, `trace.1.bin`, ...): read as one trace,
//! by its first path, a directory or a glob's files, with `--from/--to`
//! in the series' time. The series is the sample trace twice, the second
//! copy's header starting where the first ends, so every expectation is
//! a single-file report of the sample with the window moved by hand.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{mtanalyze, repo_file, TempDir};

/// The sample trace with its header's start moved by `shift_ns`.
fn shifted_copy(to: &Path, shift_ns: u64) {
    let mut bytes = std::fs::read(repo_file("sample-traces/workload.bin")).unwrap();
    let mut header = mtrace_format::Header::decode(&bytes).unwrap();
    header.clock.start_unix_ns += shift_ns;
    let encoded = header.encode();
    bytes[..encoded.len()].copy_from_slice(&encoded);
    std::fs::write(to, bytes).unwrap();
}

/// The sample's own time from time zero to its end marker (ns).
fn sample_end_ns() -> u64 {
    let r = report(&[repo_file("sample-traces/workload.bin")], &[]);
    r["trace"]["end_ns"].as_u64().unwrap()
}

fn report(traces: &[PathBuf], extra: &[&str]) -> Value {
    let mut args: Vec<std::ffi::OsString> = traces.iter().map(|t| t.clone().into()).collect();
    args.extend(["--format", "json"].map(Into::into));
    args.extend(extra.iter().map(Into::into));
    mtanalyze(args).success().json()
}

/// Calls and self time per function name.
fn counts(r: &Value) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for f in r["functions"].as_array().unwrap() {
        let e = out
            .entry(f["function"].as_str().unwrap().to_owned())
            .or_insert((0, 0));
        e.0 += f["ncalls"].as_u64().unwrap();
        e.1 += f["tottime_ns"].as_u64().unwrap();
    }
    out
}

fn sum(
    a: &BTreeMap<String, (u64, u64)>,
    b: &BTreeMap<String, (u64, u64)>,
) -> BTreeMap<String, (u64, u64)> {
    let mut out = a.clone();
    for (k, v) in b {
        let e = out.entry(k.clone()).or_insert((0, 0));
        e.0 += v.0;
        e.1 += v.1;
    }
    out
}

/// `trace.bin` then `trace.1.bin`, the second starting `gap_ns` after the
/// first's time zero.
fn series(dir: &TempDir, gap_ns: u64) -> (PathBuf, PathBuf) {
    let (first, second) = (dir.join("trace.bin"), dir.join("trace.1.bin"));
    shifted_copy(&first, 0);
    shifted_copy(&second, gap_ns);
    (first, second)
}

#[test]
fn a_series_is_read_as_one_by_its_first_path_a_directory_or_a_glob() {
    let dir = TempDir::new("series");
    let (first, second) = series(&dir, sample_end_ns());
    // A child's trace and its own series stay children, not members.
    shifted_copy(&dir.join("trace.pid7.1.bin"), 0);
    let one = counts(&report(&[repo_file("sample-traces/workload.bin")], &[]));
    let both = sum(&one, &one);
    let by_path = report(std::slice::from_ref(&first), &["--no-children"]);
    assert_eq!(by_path["trace"]["traces"], 2, "{}", by_path["trace"]);
    assert_eq!(counts(&by_path), both);
    let source = by_path["trace"]["source"].as_str().unwrap();
    assert!(
        source.contains("series of 2") && source.find("trace.bin") < source.find("trace.1.bin"),
        "{source}"
    );
    // A glob in the shell's order (trace.1.bin first) is the same series.
    assert_eq!(
        counts(&report(
            &[second.clone(), first.clone()],
            &["--no-children"]
        )),
        both
    );
    // The directory holds the child's series too: three traces.
    std::fs::remove_file(dir.join("trace.pid7.1.bin")).unwrap();
    assert_eq!(counts(&report(&[dir.path().to_path_buf()], &[])), both);
    // The first path deleted (MTRACE_KEEP): what is left is the series.
    std::fs::remove_file(&first).unwrap();
    shifted_copy(&dir.join("trace.2.bin"), 2 * sample_end_ns());
    let kept = report(std::slice::from_ref(&first), &[]);
    assert_eq!(kept["trace"]["traces"], 2);
    assert_eq!(counts(&kept), both);
}

#[test]
fn a_window_is_in_the_series_time() {
    let dir = TempDir::new("series-window");
    let end = sample_end_ns();
    let (first, _) = series(&dir, end);
    let sample = [repo_file("sample-traces/workload.bin")];
    let ns = |n: u64| format!("{n}ns");
    // Wholly in the first file: the second is not read.
    let to = end / 2;
    let early = report(std::slice::from_ref(&first), &["--to", &ns(to)]);
    // One trace read: the merge says nothing of traces, the header names it.
    assert_eq!(early["trace"]["traces"], Value::Null, "{}", early["trace"]);
    assert!(!early["trace"]["source"]
        .as_str()
        .unwrap()
        .contains("trace.1.bin"));
    assert_eq!(counts(&early), counts(&report(&sample, &["--to", &ns(to)])));
    // Wholly in the second file: its own time is the series' less `end`.
    let (from, to) = (end + end / 4, end + end / 2);
    let late = report(
        std::slice::from_ref(&first),
        &["--from", &ns(from), "--to", &ns(to)],
    );
    let alone = report(&sample, &["--from", &ns(end / 4), "--to", &ns(end / 2)]);
    assert_eq!(counts(&late), counts(&alone));
    assert_eq!(late["trace"]["window"]["from_ns"], from);
    assert_eq!(late["trace"]["window"]["to_ns"], to);
    // Across the two: the end of the first plus the start of the second.
    let (from, to) = (end / 2, end + end / 3);
    let across = report(&[first], &["--from", &ns(from), "--to", &ns(to)]);
    let tail = counts(&report(&sample, &["--from", &ns(end / 2)]));
    let head = counts(&report(&sample, &["--to", &ns(end / 3)]));
    assert_eq!(counts(&across), sum(&tail, &head));
}

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

pub(crate) fn report(traces: &[PathBuf], extra: &[&str]) -> Value {
    let mut args: Vec<std::ffi::OsString> = traces.iter().map(|t| t.clone().into()).collect();
    args.extend(["--format", "json"].map(Into::into));
    args.extend(extra.iter().map(Into::into));
    mtanalyze(args).success().json()
}

/// Calls and self time per function name.
pub(crate) fn counts(r: &Value) -> BTreeMap<String, (u64, u64)> {
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
    // The child's first file brings its own series, as a child.
    shifted_copy(&dir.join("trace.pid7.bin"), 0);
    let with_child = report(std::slice::from_ref(&first), &[]);
    assert_eq!(with_child["trace"]["traces"], 4, "{}", with_child["trace"]);
    assert_eq!(counts(&with_child), sum(&both, &both));
    let source = with_child["trace"]["source"].as_str().unwrap();
    assert!(source.contains("trace.pid7.1.bin"), "{source}");
    std::fs::remove_file(dir.join("trace.pid7.bin")).unwrap();
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

/// A JSON-lines trace converted to a binary `name`, its header's start
/// moved `shift_ns` after that of the first file converted this way.
fn converted(dir: &TempDir, name: &str, jsonl: &str, shift_ns: u64) -> PathBuf {
    let source = dir.write(&format!("{name}.jsonl"), jsonl);
    let out = dir.join(name);
    mtanalyze([
        std::ffi::OsStr::new("convert"),
        source.as_os_str(),
        out.as_os_str(),
    ])
    .success();
    let mut bytes = std::fs::read(&out).unwrap();
    let mut header = mtrace_format::Header::decode(&bytes).unwrap();
    header.clock.start_unix_ns = 1_000_000_000 + shift_ns;
    let encoded = header.encode();
    bytes[..encoded.len()].copy_from_slice(&encoded);
    std::fs::write(&out, bytes).unwrap();
    std::fs::remove_file(source).unwrap();
    out
}

#[test]
fn marks_bound_a_window_in_the_series_time() {
    let dir = TempDir::new("series-marks");
    // The first file: `main` from 100 to 400, marked `early` at 300.
    let first = converted(
        &dir,
        "m.bin",
        r#"{"ev": "thread", "tid": 1, "name": "main"}
{"ts": 100, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 300, "tid": 1, "ev": "mark", "name": "early"}
{"ts": 400, "tid": 1, "ev": "exit", "fn": "main"}
"#,
        0,
    );
    // The second, 1000 ns later: `work` from 100 to 600, marked `go` at
    // 200 (1200 in the series) and `early` again (not the first).
    converted(
        &dir,
        "m.1.bin",
        r#"{"ev": "thread", "tid": 1, "name": "main"}
{"ts": 100, "tid": 1, "ev": "enter", "fn": "work"}
{"ts": 200, "tid": 1, "ev": "mark", "name": "go"}
{"ts": 250, "tid": 1, "ev": "mark", "name": "early"}
{"ts": 600, "tid": 1, "ev": "exit", "fn": "work"}
"#,
        1000,
    );
    let r = report(
        std::slice::from_ref(&first),
        &["--from", "mark:early", "--to", "mark:go"],
    );
    // main from 300 to 400 in the first file; work from 1100 to 1200 of
    // the series, 100 to 200 in the second's own time.
    let c = counts(&r);
    assert_eq!(c["main"].1, 100, "{c:?}");
    assert_eq!(c["work"].1, 100, "{c:?}");
    assert_eq!(r["trace"]["window"]["from_ns"], 300);
    assert_eq!(r["trace"]["window"]["to_ns"], 1200);
    // The report lists the marks in the series' time.
    let whole = report(std::slice::from_ref(&first), &[]);
    let marks: Vec<(String, u64)> = whole["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["time_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [("early", 300), ("go", 1200), ("early", 1250)];
    assert_eq!(
        marks,
        expected.map(|(n, t)| (n.to_owned(), t)).to_vec(),
        "{}",
        whole["marks"]
    );
    // A mark no file holds is a one-line error.
    let mut args: Vec<std::ffi::OsString> = vec![first.into()];
    args.extend(["--from", "mark:nowhere"].map(Into::into));
    let line = mtanalyze(args).fails_with_one_line();
    assert!(
        line.contains("no mark named `nowhere` in the series"),
        "{line}"
    );
}

/// Calls per function of a report.
fn calls(r: &Value) -> BTreeMap<String, u64> {
    counts(r).into_iter().map(|(f, (n, _))| (f, n)).collect()
}

#[test]
fn a_recorded_rotating_series_of_tokio_tasks_reads_as_one_recording() {
    use crate::async_tasks::service::{record, Service};
    let dir = TempDir::new("rotated-tokio");
    let first = dir.join("trace.bin");
    let requests = 600;
    let service = Service {
        requests,
        workers: 2,
        // Long enough for several switches while every task waits in
        // `fetch` with `handle` open on its own stack.
        wait: std::time::Duration::from_millis(40),
        logical_stacks: true,
        rotate: Some(mtrace::Rotation::Every(std::time::Duration::from_millis(
            10,
        ))),
    };
    let summary = {
        let _one_at_a_time = crate::async_tasks::RECORDER
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        record(&first, &service).expect("recorded")
    };
    assert!(summary.files >= 3, "{} files", summary.files);
    let members: Vec<PathBuf> = (0..summary.files)
        .map(|k| match k {
            0 => first.clone(),
            k => dir.join(&format!("trace.{k}.bin")),
        })
        .collect();
    // Each file alone (copied where no other member lies): no warning,
    // no repair, whatever was open at its start.
    for (k, member) in members.iter().enumerate() {
        let alone = TempDir::new(&format!("rotated-tokio-{k}"));
        let copy = alone.join("one.bin");
        std::fs::copy(member, &copy).unwrap();
        let r = report(&[copy], &[]);
        assert_eq!(r["warnings"], serde_json::json!([]), "{}", member.display());
    }
    // The series, by its first path, its directory or a glob's files:
    // every request's functions once, as one recording of them has.
    let glob: Vec<PathBuf> = members.iter().rev().cloned().collect();
    for r in [
        report(std::slice::from_ref(&first), &[]),
        report(&[dir.path().to_path_buf()], &[]),
        report(&glob, &[]),
    ] {
        assert_eq!(r["warnings"], serde_json::json!([]));
        // Each worker once, not once a file.
        let threads = r["trace"]["threads"].as_array().unwrap();
        let mut os_tids: Vec<u64> = threads
            .iter()
            .map(|t| t["os_tid"].as_u64().unwrap())
            .collect();
        os_tids.sort_unstable();
        os_tids.dedup();
        assert_eq!(os_tids.len(), threads.len(), "{threads:?}");
        assert!(threads.len() <= service.workers + 1, "{threads:?}");
        // Each stack once (a request's task ran in several files), on the
        // series' threads, and counted once in the summary.
        let tids: Vec<u64> = threads.iter().map(|t| t["tid"].as_u64().unwrap()).collect();
        let stacks = r["stacks"].as_array().unwrap();
        let mut ids: Vec<&str> = stacks.iter().map(|s| s["id"].as_str().unwrap()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), stacks.len(), "a stack listed twice");
        assert_eq!(r["trace"]["stacks"].as_u64(), Some(stacks.len() as u64));
        let mut requests_seen: Vec<&str> = stacks
            .iter()
            .filter(|s| s["id"].as_str().unwrap().starts_with("stack:"))
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        requests_seen.sort_unstable();
        requests_seen.dedup();
        assert_eq!(requests_seen.len() as u64, requests);
        for s in stacks {
            let ran_on = s["threads"].as_array().unwrap();
            assert!(!ran_on.is_empty(), "{s}");
            for t in ran_on {
                assert!(tids.contains(&t.as_u64().unwrap()), "{s} on {threads:?}");
            }
            if let Some(tid) = s["id"].as_str().unwrap().strip_prefix("thread:") {
                assert!(tids.contains(&tid.parse().unwrap()), "{s}");
            }
        }
        let c = calls(&r);
        for name in ["handle", "parse", "fetch", "render"] {
            assert_eq!(c.get(name), Some(&requests), "{name}: {c:?}");
        }
    }
    // The table, which shows no stack row, counts them as JSON does.
    let stacks = report(std::slice::from_ref(&first), &[])["stacks"]
        .as_array()
        .unwrap()
        .len();
    mtanalyze([&first])
        .success()
        .stdout_has(&format!("  stacks: {stacks}  "));
}

#[test]
fn numbered_files_older_than_the_first_are_an_earlier_recordings() {
    let dir = TempDir::new("stale-series");
    let first = dir.join("trace.bin");
    // The recording read now, and a numbered file an earlier rotating
    // recording to the same path left (its start is before this one's).
    shifted_copy(&first, 10_000_000_000);
    shifted_copy(&dir.join("trace.1.bin"), 0);
    let run = mtanalyze([first.as_os_str(), "--format".as_ref(), "json".as_ref()]).success();
    assert!(run.stderr.contains("left out"), "{}", run.stderr);
    let r = run.json();
    // One trace read: no series in the header.
    assert!(r["trace"]["traces"].is_null(), "{}", r["trace"]);
    assert!(!r["trace"]["source"].as_str().unwrap().contains("series of"));
    let one = counts(&report(&[repo_file("sample-traces/workload.bin")], &[]));
    assert_eq!(counts(&r), one);
}

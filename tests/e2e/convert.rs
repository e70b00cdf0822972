//! `mtanalyze convert IN OUT.bin`.

use serde_json::Value;

use crate::util::{assert_json_eq, mtanalyze, vector, TempDir, REPAIRS};

/// The JSON report of `trace` under `clock`, without the fields that name
/// where it came from.
fn report_without_origin(trace: &std::path::Path, clock: &str) -> Value {
    let mut v = mtanalyze([
        trace.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--clock".as_ref(),
        clock.as_ref(),
    ])
    .success()
    .json();
    let t = v["trace"].as_object_mut().expect("trace object");
    for origin in ["source", "input_format"] {
        assert!(t.remove(origin).is_some(), "report lacks trace.{origin}");
    }
    v
}

#[test]
fn converted_traces_report_the_same_as_their_jsonl() {
    let dir = TempDir::new("convert");
    let repairs = dir.write("repairs.jsonl", REPAIRS);
    for input in [vector("fibers.jsonl"), vector("recursion-b.jsonl"), repairs] {
        let name = input
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        let out = dir.join(&format!("{name}.bin"));
        let run = mtanalyze(["convert".as_ref(), input.as_os_str(), out.as_os_str()]).success();
        assert!(
            run.stdout.is_empty() && run.stderr.is_empty(),
            "convert is quiet: {}{}",
            run.stdout,
            run.stderr
        );
        for clock in ["stack", "gil", "wall"] {
            assert_json_eq(
                &format!("{name} --clock {clock}: jsonl vs converted"),
                &report_without_origin(&input, clock),
                &report_without_origin(&out, clock),
            );
        }
        let bin = mtanalyze([out.as_os_str(), "--format".as_ref(), "json".as_ref()])
            .success()
            .json();
        assert_eq!(bin["trace"]["input_format"], "binary");
        assert_eq!(bin["trace"]["source"], out.display().to_string());
    }
}

#[test]
fn converting_a_binary_trace_copies_its_bytes() {
    let dir = TempDir::new("convert-copy");
    let first = dir.join("first.bin");
    let second = dir.join("second.bin");
    mtanalyze([
        "convert".as_ref(),
        vector("gil-threads.jsonl").as_os_str(),
        first.as_os_str(),
    ])
    .success();
    mtanalyze([
        "convert",
        first.to_str().unwrap_or_default(),
        second.to_str().unwrap_or_default(),
    ])
    .success();
    let (a, b) = (
        std::fs::read(&first).unwrap_or_default(),
        std::fs::read(&second).unwrap_or_default(),
    );
    assert!(
        !a.is_empty() && a == b,
        "binary input must be copied byte for byte"
    );
    assert!(a.starts_with(b"MTRACE\0\x01"));
}

#[test]
fn converting_a_file_onto_itself_is_refused() {
    let dir = TempDir::new("convert-self");
    let bin = dir.join("self.bin");
    mtanalyze([
        "convert".as_ref(),
        vector("recursion-a.jsonl").as_os_str(),
        bin.as_os_str(),
    ])
    .success();
    let before = std::fs::read(&bin).unwrap_or_default();
    let line =
        mtanalyze(["convert".as_ref(), bin.as_os_str(), bin.as_os_str()]).fails_with_one_line();
    assert!(line.contains("same file"), "{line}");
    assert_eq!(
        std::fs::read(&bin).unwrap_or_default(),
        before,
        "input left intact"
    );
}

#[test]
fn converting_to_an_unwritable_place_fails_with_one_line() {
    let dir = TempDir::new("convert-unwritable");
    let out = dir.join("no-such-dir/out.bin");
    let line = mtanalyze([
        "convert".as_ref(),
        vector("recursion-a.jsonl").as_os_str(),
        out.as_os_str(),
    ])
    .fails_with_one_line();
    assert!(line.contains("out.bin"), "{line}");
}

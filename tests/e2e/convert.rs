//! `mtanalyze convert IN OUT.bin`.

use serde_json::Value;

use crate::util::{
    assert_json_eq, assert_text_eq, json_report_run, mtanalyze, repo_file, vector, TempDir, REPAIRS,
};

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

/// The JSON report of `trace` under `clock`, as text, with the lines that
/// say where it came from and in which format version cut out; and that
/// version.
fn report_text(trace: &std::path::Path, clock: &str) -> (String, u64) {
    let run = json_report_run(trace, clock);
    let version = run.json()["trace"]["format_version"]
        .as_u64()
        .unwrap_or_default();
    let text = run
        .stdout
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !l.starts_with("\"source\":") && !l.starts_with("\"format_version\":")
        })
        .collect::<Vec<_>>()
        .join("\n");
    (text, version)
}

#[test]
fn compact_conversions_of_the_sample_traces_report_byte_for_byte_the_same() {
    let dir = TempDir::new("convert-compact");
    for name in ["workload", "workload-ring", "workload-full"] {
        let original = repo_file(&format!("sample-traces/{name}.bin"));
        let compact = dir.join(&format!("{name}-v4.bin"));
        let run = mtanalyze([
            "convert".as_ref(),
            "--compact".as_ref(),
            original.as_os_str(),
            compact.as_os_str(),
        ])
        .success();
        assert!(
            run.stdout.is_empty() && run.stderr.is_empty(),
            "{}",
            run.stderr
        );
        let (bytes_in, bytes_out) = (
            std::fs::metadata(&original).map_or(0, |m| m.len()),
            std::fs::metadata(&compact).map_or(0, |m| m.len()),
        );
        assert!(
            bytes_out * 2 < bytes_in,
            "{name}: {bytes_out} of {bytes_in} bytes"
        );
        for clock in ["stack", "gil", "wall"] {
            let (want, old) = report_text(&original, clock);
            let (got, new) = report_text(&compact, clock);
            assert!(old < 4, "{name}: a 16-byte trace");
            assert_eq!(new, 4, "{name}: the compact file's own version is reported");
            assert_text_eq(&want, &got);
        }
    }
    // The committed compact sample is workload.bin's conversion, byte
    // for byte (the converter is deterministic), and reads as it does.
    let committed = std::fs::read(repo_file("sample-traces/workload-v4.bin")).unwrap_or_default();
    let fresh = std::fs::read(dir.join("workload-v4.bin")).unwrap_or_default();
    assert!(
        !committed.is_empty() && committed == fresh,
        "sample-traces/workload-v4.bin is stale"
    );
}

#[test]
fn a_compact_trace_converts_back_to_16_byte_events_and_once_only_to_compact() {
    let dir = TempDir::new("convert-compact-back");
    let compact = repo_file("sample-traces/workload-v4.bin");
    let back = dir.join("back.bin");
    mtanalyze(["convert".as_ref(), compact.as_os_str(), back.as_os_str()]).success();
    let check = mtanalyze(["check".as_ref(), back.as_os_str()]).success();
    check.stdout_has("version 3");
    let (want, _) = report_text(&repo_file("sample-traces/workload.bin"), "stack");
    assert_text_eq(&want, &report_text(&back, "stack").0);
    // Compacting a compact trace gives the same file again.
    let again = dir.join("again.bin");
    mtanalyze([
        "convert".as_ref(),
        "--compact".as_ref(),
        compact.as_os_str(),
        again.as_os_str(),
    ])
    .success();
    assert!(
        std::fs::read(&again).unwrap_or_default() == std::fs::read(&compact).unwrap_or_default()
    );
}

#[test]
fn a_torn_compact_trace_keeps_the_events_before_the_tear() {
    let dir = TempDir::new("convert-compact-torn");
    let whole = std::fs::read(repo_file("sample-traces/workload-v4.bin")).unwrap_or_default();
    // Cut inside the chunk region, mid-event most likely: the file reads,
    // and `check` names the cut chunk with an offset inside the file.
    let cut = whole.len() / 3 + 7;
    let torn = dir.write("torn.bin", &whole[..cut]);
    let check = mtanalyze([
        "check".as_ref(),
        torn.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ])
    .success()
    .json();
    assert_eq!(check["format_version"], 4);
    let cuts = check["chunks_cut"].as_array().cloned().unwrap_or_default();
    assert_eq!(cuts.len(), 1, "{check}");
    let offset = cuts[0]["offset"].as_u64().unwrap_or(u64::MAX);
    assert!(
        offset <= cut as u64 && offset + 17 >= cut as u64,
        "{offset} vs {cut}"
    );
    assert!(check["events"].as_u64().unwrap_or(0) > 0);
    mtanalyze([torn.as_os_str(), "--format".as_ref(), "json".as_ref()]).success();
}

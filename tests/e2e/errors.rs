//! Inputs that cannot be analyzed: one line on stderr naming the file,
//! exit status 2, no panic, for every command.

use std::path::Path;

use crate::util::{mtanalyze, vector, TempDir};

/// Runs the report, `check` and `convert` on `trace`; each must fail with
/// one line naming the file and containing `what`.
#[track_caller]
fn every_command_fails(trace: &Path, what: &str) {
    let name = trace
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let out = trace.with_extension("out.bin");
    let runs = [
        mtanalyze([trace.as_os_str()]),
        mtanalyze([trace.as_os_str(), "--format".as_ref(), "json".as_ref()]),
        mtanalyze(["check".as_ref(), trace.as_os_str()]),
        mtanalyze(["convert".as_ref(), trace.as_os_str(), out.as_os_str()]),
    ];
    for run in runs {
        let args = run.args.clone();
        let line = run.fails_with_one_line();
        assert!(
            line.contains(&name),
            "`{args}`: {line:?} does not name {name}"
        );
        assert!(
            line.contains(what),
            "`{args}`: {line:?} does not say {what:?}"
        );
    }
    assert!(!out.exists(), "convert wrote output for a bad input");
}

#[test]
fn a_missing_file() {
    let dir = TempDir::new("missing");
    every_command_fails(&dir.join("no-such-trace.bin"), "No such file");
}

#[test]
fn a_png_file() {
    let dir = TempDir::new("png");
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend([0x5au8; 300]);
    let path = dir.write("picture.png", png);
    every_command_fails(&path, "not a trace");
}

#[test]
fn an_empty_file_and_a_directory() {
    let dir = TempDir::new("empty");
    every_command_fails(&dir.write("empty.trace", b""), "not a trace");
    let sub = dir.join("a-directory");
    std::fs::create_dir(&sub).expect("mkdir");
    every_command_fails(&sub, "directory");
}

#[test]
fn an_unsupported_format_version() {
    let dir = TempDir::new("version");
    let bin = dir.join("good.bin");
    mtanalyze([
        "convert".as_ref(),
        vector("recursion-a.jsonl").as_os_str(),
        bin.as_os_str(),
    ])
    .success();
    let mut bytes = std::fs::read(&bin).expect("converted trace");
    // The version is the u32 at byte offset 8.
    assert_eq!(&bytes[8..12], &3u32.to_le_bytes());
    // Versions 1 and 2 are version 3 without `lost`, `wake` and `end`
    // events: still read, alike.
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    let v2 = dir.write("v2.bin", &bytes);
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let older = dir.write("older.bin", &bytes);
    let report = |p: &std::path::Path| {
        let out = mtanalyze([p.as_os_str(), "--format".as_ref(), "json".as_ref()]).success();
        let mut v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
        v["trace"]["source"] = serde_json::Value::Null;
        v["trace"]["format_version"] = serde_json::Value::Null;
        v
    };
    assert_eq!(report(&older), report(&bin));
    assert_eq!(report(&v2), report(&bin));
    bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
    let future = dir.write("future.bin", &bytes);
    every_command_fails(&future, "unsupported format version 7");
}

#[test]
fn a_bad_json_line_names_its_line() {
    let dir = TempDir::new("bad-jsonl");
    let path = dir.write(
        "bad.jsonl",
        "{\"ts\": 0, \"tid\": 1, \"ev\": \"enter\", \"fn\": \"f\"}\n{\"ts\": 1, \"tid\": 1, \"ev\": \"jump\"}\n",
    );
    every_command_fails(&path, "line 2");
}

/// Options that do not go together are refused before any input is read
/// (the command line is resolved into its plan first): the message is the
/// options', even when the input would fail too.
#[test]
fn options_are_judged_before_the_inputs() {
    let dir = TempDir::new("options-first");
    let empty = dir.join("no-traces");
    std::fs::create_dir(&empty).expect("mkdir");
    let line = mtanalyze([empty.as_os_str(), "--per-thread".as_ref()]).fails_with_one_line();
    assert_eq!(line, "mtanalyze: --per-thread applies to --format folded");
    let missing = dir.join("no-such-trace.bin");
    let line = mtanalyze([
        "diff".as_ref(),
        missing.as_os_str(),
        empty.as_os_str(),
        "--collapse-recursion".as_ref(),
        "all".as_ref(),
    ])
    .fails_with_one_line();
    assert_eq!(
        line,
        "mtanalyze: --collapse-recursion applies to --format folded and html, and --flamegraph"
    );
}

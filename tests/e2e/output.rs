//! `-o FILE`: every output format of the report, `diff`, `check`,
//! `flamegraph` and `export` can go to a file, with the same bytes as on
//! stdout; a file that is one of the inputs is refused and left intact.

use std::ffi::OsStr;

use crate::util::{mtanalyze, TempDir, HANDOFF};

/// Runs `args` once to stdout and once with `-o FILE`; the file holds
/// what stdout did, and stdout is empty then.
fn same_bytes_to_a_file(dir: &TempDir, args: &[&OsStr]) {
    let to_stdout = mtanalyze(args.iter().copied()).success();
    let file = dir.join("out");
    let mut with_o = args.to_vec();
    with_o.extend([OsStr::new("-o"), file.as_os_str()]);
    let to_file = mtanalyze(with_o.iter().copied()).success();
    assert_eq!(to_file.stdout, "", "{args:?}: nothing on stdout with -o");
    let written = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(written, to_stdout.stdout, "{args:?}");
    assert!(!written.is_empty(), "{args:?}: wrote something");
    std::fs::remove_file(&file).ok();
}

#[test]
fn every_format_can_be_written_to_a_file() {
    let dir = TempDir::new("output-formats");
    let trace = dir.write("handoff.jsonl", HANDOFF);
    let slower = dir.write(
        "slower.jsonl",
        HANDOFF.replace("\"ts\": 75,", "\"ts\": 78,"),
    );
    let t = trace.as_os_str();
    let s = slower.as_os_str();
    let o = OsStr::new;
    for format in ["table", "json", "folded"] {
        same_bytes_to_a_file(&dir, &[t, o("--format"), o(format)]);
        same_bytes_to_a_file(&dir, &[o("diff"), t, s, o("--format"), o(format)]);
    }
    same_bytes_to_a_file(&dir, &[t, o("--stacks")]);
    same_bytes_to_a_file(&dir, &[t, o("--callers"), o("query")]);
    for format in ["table", "json"] {
        same_bytes_to_a_file(&dir, &[o("check"), t, o("--format"), o(format)]);
    }
    for format in ["chrome", "speedscope", "callgrind"] {
        same_bytes_to_a_file(&dir, &[o("export"), t, o("--format"), o(format)]);
    }
    same_bytes_to_a_file(&dir, &[o("flamegraph"), t]);
}

#[test]
fn an_input_is_never_the_output() {
    let dir = TempDir::new("output-same-file");
    let trace = dir.write("handoff.jsonl", HANDOFF);
    let other = dir.write("other.jsonl", HANDOFF);
    let (t, b) = (trace.as_os_str(), other.as_os_str());
    let o = OsStr::new;
    let runs: [Vec<&OsStr>; 4] = [
        vec![t, o("--format"), o("json"), o("-o"), t],
        vec![o("diff"), b, t, o("-o"), t],
        vec![o("diff"), t, b, o("-o"), b],
        vec![o("check"), t, o("-o"), t],
    ];
    for args in runs {
        let line = mtanalyze(args.iter().copied()).fails_with_one_line();
        assert!(line.contains("same file"), "{args:?}: {line}");
    }
    assert_eq!(
        std::fs::read_to_string(&trace).ok().as_deref(),
        Some(HANDOFF)
    );
    assert_eq!(
        std::fs::read_to_string(&other).ok().as_deref(),
        Some(HANDOFF)
    );
}

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

/// Every output of the analyzer for `trace.bin` in `dir` (run there, so
/// the file is named alike whatever its directory): (what, bytes).
fn every_output(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut outputs = Vec::new();
    let mut run = |what: &str, args: &[&str], file: Option<&str>| {
        let run = crate::util::mtanalyze_in(Some(dir), args).success();
        let bytes = match file {
            Some(f) => std::fs::read(dir.join(f)).unwrap_or_default(),
            None => run.stdout.into_bytes(),
        };
        assert!(!bytes.is_empty(), "{what}: no output");
        outputs.push((what.to_owned(), bytes));
    };
    for clock in ["stack", "gil", "wall"] {
        for format in ["table", "json", "folded", "markdown"] {
            let args = ["trace.bin", "--format", format, "--clock", clock];
            run(&format!("{format} --clock {clock}"), &args, None);
        }
    }
    run("table --stacks", &["trace.bin", "--stacks"], None);
    run(
        "pstats",
        &["trace.bin", "--format", "pstats", "-o", "out.prof"],
        Some("out.prof"),
    );
    run(
        "html",
        &["trace.bin", "--format", "html", "-o", "out.html"],
        Some("out.html"),
    );
    run(
        "flamegraph",
        &["flamegraph", "trace.bin", "-o", "out.svg"],
        Some("out.svg"),
    );
    for format in ["chrome", "speedscope", "callgrind", "pprof"] {
        let out = format!("out.{format}");
        let args = ["export", "trace.bin", "--format", format, "-o", &out];
        run(&format!("export {format}"), &args, Some(&out));
    }
    outputs
}

/// An output with what may differ between a 16-byte trace and its
/// compact twin, the file's own format version, made the same.
fn without_version(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for key in [
        &b"\"format_version\": "[..],
        b"\"format_version\":",
        b"binary, format ",
        b"format version ",
    ] {
        let mut at = 0;
        while let Some(found) = out[at..].windows(key.len()).position(|w| w == key) {
            let digit = at + found + key.len();
            if out.get(digit).is_some_and(u8::is_ascii_digit) {
                out[digit] = b'?';
            }
            at = digit;
        }
    }
    out
}

/// Checks that `original` (16-byte events) and its `convert --compact`
/// twin give the same bytes in every output.
fn assert_compact_twin_reads_alike(label: &str, original: &std::path::Path) {
    let dir = TempDir::new(&format!("compact-twin-{label}"));
    let (a, b) = (dir.join("v3"), dir.join("v4"));
    for d in [&a, &b] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::copy(original, a.join("trace.bin")).expect("copy");
    let compact = b.join("trace.bin");
    let convert = [
        "convert".as_ref(),
        "--compact".as_ref(),
        original.as_os_str(),
        compact.as_os_str(),
    ];
    mtanalyze(convert).success();
    let check = mtanalyze(["check".as_ref(), compact.as_os_str()]).success();
    check.stdout_has("version 4");
    let (want, got) = (every_output(&a), every_output(&b));
    let mut differ = String::new();
    for ((what, want), (_, got)) in want.iter().zip(&got) {
        let (want, got) = (without_version(want), without_version(got));
        if want != got {
            match (std::str::from_utf8(&want), std::str::from_utf8(&got)) {
                (Ok(w), Ok(g)) => {
                    let diff = crate::util::line_diff(w, g);
                    differ += &format!("{label}: {what}:\n{diff}\n");
                }
                _ => differ += &format!("{label}: {what}: the binary outputs differ\n"),
            }
        }
    }
    assert!(differ.is_empty(), "{differ}");
}

#[test]
fn a_compact_twin_gives_every_output_byte_for_byte() {
    // The samples are older versions (a version-4 file can hold what
    // theirs cannot, such as the ends of stacks, and says so): each is
    // made a version-3 file first, by way of its compact conversion.
    let dir = TempDir::new("compact-twin-samples");
    for name in ["workload", "workload-ring", "workload-full"] {
        let sample = repo_file(&format!("sample-traces/{name}.bin"));
        let (compact, v3) = (
            dir.join(&format!("{name}-v4.bin")),
            dir.join(&format!("{name}.bin")),
        );
        let to_compact = [
            "convert".as_ref(),
            "--compact".as_ref(),
            sample.as_os_str(),
            compact.as_os_str(),
        ];
        mtanalyze(to_compact).success();
        mtanalyze(["convert".as_ref(), compact.as_os_str(), v3.as_os_str()]).success();
        mtanalyze(["check".as_ref(), v3.as_os_str()])
            .success()
            .stdout_has("version 3");
        assert_compact_twin_reads_alike(name, &v3);
    }
    // Several threads, logical stacks that migrate between them, and
    // deep stacks: every form of the compact encoding, and exits whose
    // frames were named in another chunk.
    let dir = TempDir::new("compact-twin-synth");
    let synth = dir.join("synth.bin");
    let opts = mtanalyze_testkit::synth::SynthOptions {
        events: 60_000,
        threads: 4,
        fibers: 12,
        functions: 300,
        seed: 7,
    };
    mtanalyze_testkit::synth::generate(&opts, &synth, "test".into()).expect("writes");
    assert_compact_twin_reads_alike("synth", &synth);
    let tasks = dir.join("tasks.bin");
    let opts = mtanalyze_testkit::synth::TaskOptions {
        tasks: 300,
        workers: 3,
        in_flight: 40,
        seed: 3,
    };
    mtanalyze_testkit::synth::generate_tasks(&opts, &tasks, "test".into()).expect("writes");
    assert_compact_twin_reads_alike("tasks", &tasks);
}

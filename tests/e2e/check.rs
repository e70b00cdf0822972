//! `mtanalyze check`: a good trace, a truncated one, a damaged chunk, garbage.

use crate::util::{converted_vector, mtanalyze, vector, TempDir};

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// (chunks_offset, chunk_size) from the header (bytes 0x28 and 0x18).
fn chunk_layout(bytes: &[u8]) -> (usize, usize) {
    let size = u32::from_le_bytes([bytes[0x18], bytes[0x19], bytes[0x1a], bytes[0x1b]]);
    (u64_at(bytes, 0x28) as usize, size as usize)
}

/// The value after `label:` on its line of the human output.
fn field<'a>(stdout: &'a str, label: &str) -> &'a str {
    let prefix = format!("{label}:");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {label:?} line in\n{stdout}"))
}

#[test]
fn check_describes_a_good_trace() {
    let dir = TempDir::new("check-good");
    let (bin, _) = converted_vector(&dir, "fibers.jsonl");
    let run = mtanalyze(["check".as_ref(), bin.as_os_str()]).success();
    let out = &run.stdout;
    assert_eq!(field(out, "file"), format!("{} (binary)", bin.display()));
    assert_eq!(field(out, "format"), "version 3");
    assert_eq!(field(out, "finished"), "yes");
    assert_eq!(field(out, "ring"), "no");
    assert!(field(out, "clock").starts_with("ns: "), "{out}");
    assert_eq!(field(out, "events"), "804");
    assert_eq!(field(out, "damaged chunks"), "0");
    assert_eq!(field(out, "cut chunks"), "0");
    assert!(field(out, "lost chunks").starts_with('0'));
    assert_eq!(field(out, "dropped events"), "0");
    assert_eq!(field(out, "stacks"), "6");
    assert_eq!(field(out, "threads"), "2");
    assert_eq!(field(out, "warnings"), "0");
    let threads: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("tid"))
        .skip(1)
        .take(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        threads,
        [vec!["1", "-", "404"], vec!["2", "-", "400"]],
        "{out}"
    );

    // JSONL input is checked after conversion; thread names come through.
    let named = mtanalyze(["check".as_ref(), vector("recursion-a.jsonl").as_os_str()]).success();
    assert!(field(&named.stdout, "file").ends_with("(jsonl)"));
    named.stdout_has("worker-1");

    let v = mtanalyze([
        "check".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        bin.as_os_str(),
    ])
    .success()
    .json();
    assert_eq!(v["events"], 804);
    assert_eq!(v["format_version"], 3);
    assert_eq!(v["finished"], true);
    assert_eq!(v["chunks_damaged"], serde_json::json!([]));
    assert_eq!(v["threads"][1]["events"], 400);
}

#[test]
fn check_lists_the_cut_chunk_of_a_truncated_trace_and_exits_0() {
    let dir = TempDir::new("check-cut");
    let (_, bytes) = converted_vector(&dir, "fibers.jsonl");
    let (chunks_offset, chunk_size) = chunk_layout(&bytes);
    // Cut inside the second chunk, a little after its header and snapshot.
    let cut_at = chunks_offset + chunk_size + 368;
    let cut = dir.write("cut.bin", &bytes[..cut_at]);
    let run = mtanalyze(["check".as_ref(), cut.as_os_str()]).success();
    assert_eq!(field(&run.stdout, "cut chunks"), "1");
    run.stdout_has(&format!(
        "  chunk 1 at byte {cut_at}: file ends inside the chunk"
    ));
    assert_eq!(field(&run.stdout, "damaged chunks"), "0");
    run.stdout_has("truncated_chunk x1");
    // The metadata region, after the chunks, is gone too.
    assert!(
        field(&run.stdout, "metadata").contains("damaged at byte"),
        "{}",
        run.stdout
    );
    // Whole events before the cut are kept: the first thread's 404, and
    // (368 - 64 - 32) / 16 = 17 of the second thread's.
    assert_eq!(field(&run.stdout, "events"), "421");

    let v = mtanalyze([
        "check".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        cut.as_os_str(),
    ])
    .success()
    .json();
    assert_eq!(v["chunks_cut"][0]["offset"], cut_at as u64);
    assert_eq!(v["chunks_cut"][0]["index"], 1);

    // The report still works on what survived.
    let report = mtanalyze([cut.as_os_str()]).success();
    report.stdout_has("events: 421");
    assert!(
        report.stderr.contains("truncated_chunk x1 (first at byte"),
        "{}",
        report.stderr
    );
}

#[test]
fn check_lists_a_damaged_chunk_by_offset_and_exits_0() {
    let dir = TempDir::new("check-damaged");
    let (_, mut bytes) = converted_vector(&dir, "fibers.jsonl");
    let (chunks_offset, _) = chunk_layout(&bytes);
    // Chunk 0's body starts after its 64-byte header with the "SNAP" marker.
    let snap = chunks_offset + 64;
    assert_eq!(&bytes[snap..snap + 4], b"SNAP");
    bytes[snap..snap + 4].copy_from_slice(b"JUNK");
    let damaged = dir.write("damaged.bin", &bytes);
    let run = mtanalyze(["check".as_ref(), damaged.as_os_str()]).success();
    assert_eq!(field(&run.stdout, "damaged chunks"), "1");
    run.stdout_has(&format!(
        "  chunk 0 at byte {snap}: bad snapshot record: no SNAP marker"
    ));
    assert_eq!(field(&run.stdout, "events"), "400");
}

#[test]
fn check_of_garbage_exits_2_with_one_line() {
    let dir = TempDir::new("check-garbage");
    let garbage = dir.write("garbage.dat", [0x13u8, 0x37, 0, 0, 0xff, 0xfe, 1, 2, 3, 4]);
    let line = mtanalyze(["check".as_ref(), garbage.as_os_str()]).fails_with_one_line();
    assert!(line.contains("garbage.dat"), "{line}");
    assert!(line.contains("not a trace"), "{line}");
    let missing = dir.join("missing.bin");
    let line = mtanalyze(["check".as_ref(), missing.as_os_str()]).fails_with_one_line();
    assert!(line.contains("missing.bin"), "{line}");
    // A binary header cut short is unreadable too.
    let (_, bytes) = converted_vector(&dir, "fibers.jsonl");
    let stub = dir.write("stub.bin", &bytes[..100]);
    let line = mtanalyze(["check".as_ref(), stub.as_os_str()]).fails_with_one_line();
    assert!(
        line.contains("stub.bin") && line.contains("header"),
        "{line}"
    );
}

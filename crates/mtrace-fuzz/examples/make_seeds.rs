//! Writes the fuzzers' seed corpora from `sample-traces/`:
//!
//! * `seeds/binary/`: small binary traces made of the samples' own events
//!   (names, nesting, switches, ticks), rewritten with 1 KiB chunks so one
//!   seed holds several chunks with snapshots; variants with a lost chunk
//!   (a gap restarted from a snapshot) and an unfinished (killed) file; and
//!   each real recorder file cut after its first two chunks; and variants
//!   where every logical stack ends (format version 3's `end`) when it was
//!   last left, or after the last event if it still runs; and each seed
//!   with compact events (format version 4), whole and torn mid-chunk; and
//!   each seed with its metadata log in segments (the first record in the
//!   region, the rest in chunk slots, in reverse order as a ring may place
//!   them), whole and cut inside its last segment.
//! * `seeds/jsonl/`: the same events as JSON lines, and the semantics
//!   vectors of `tests/e2e/vectors/`.
//! * `seeds/chrome/`: the same traces exported as Chrome Trace Event JSON by
//!   `mtanalyze`'s own exporter, and small files shaped like VizTracer's
//!   and `tracing-chrome`'s output.
//!
//! Both also get the committed crash inputs of `crates/mtanalyze/tests/regressions/`.
//!
//! ```sh
//! cargo run --manifest-path crates/mtrace-fuzz/Cargo.toml --example make_seeds
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use mtrace_format::layout::{
    pack_state, read_u64, unpack_state, FLAG_FINISHED, H_CHUNKS_OFFSET, H_CHUNK_SIZE, H_FLAGS,
    META_NEXT_SEGMENT_LEN, SEGMENT_HEADER_SIZE, SEGMENT_MAGIC, SEGMENT_STATE, S_META_LEN,
};
use mtrace_format::meta::{encode_next_segment, for_each_record_located};
use mtrace_format::{
    EventKind, FunctionId, MetaRecord, StackId, ThreadId, TraceFile, TraceWriter, WriterOptions,
};

/// One event of a sample, with names instead of ids.
#[derive(Clone, Debug)]
struct Named {
    ns: u64,
    tid: u64,
    what: What,
}

#[derive(Clone, Debug)]
enum What {
    Enter(String, String, u32),
    Exit(String, String, u32),
    Switch(Option<String>),
    /// The named logical stack ended.
    End(String),
}

/// Every thread's events, in order, with names.
fn read_sample(bytes: &[u8]) -> (BTreeMap<u64, Vec<Named>>, HashMap<u64, String>) {
    let file = TraceFile::parse(bytes).expect("a sample trace");
    let clock = file.header().clock;
    let (records, _) = file.metadata();
    let mut functions: HashMap<u32, (String, String, u32)> = HashMap::new();
    let mut stacks: HashMap<u64, String> = HashMap::new();
    let mut thread_names = HashMap::new();
    for r in records {
        match r {
            MetaRecord::Function(f) => {
                functions.insert(f.id.0, (f.name, f.file, f.line));
            }
            MetaRecord::Stack { id, name, .. } => {
                stacks.insert(id.0, name);
            }
            MetaRecord::Thread { tid, name, .. } => {
                thread_names.insert(tid.0, name);
            }
            MetaRecord::Host { .. }
            | MetaRecord::Mark { .. }
            | MetaRecord::ContinuedStack { .. } => {}
        }
    }
    let mut chunks: BTreeMap<u64, Vec<(u64, Vec<mtrace_format::Event>)>> = BTreeMap::new();
    for i in 0..file.chunk_slots() {
        if let Ok(Some(c)) = file.chunk(i) {
            let events = c.events().map_while(Result::ok).collect();
            chunks
                .entry(c.thread.0)
                .or_default()
                .push((c.thread_chunk_no, events));
        }
    }
    let name_of = |id: FunctionId| {
        functions
            .get(&id.0)
            .cloned()
            .unwrap_or_else(|| (format!("fn#{}", id.0), String::new(), 0))
    };
    let mut threads = BTreeMap::new();
    for (tid, mut list) in chunks {
        list.sort_by_key(|c| c.0);
        let events = list
            .into_iter()
            .flat_map(|c| c.1)
            .filter_map(|e| {
                let what = match e.kind {
                    EventKind::Enter(f) => {
                        let (n, file, line) = name_of(f);
                        What::Enter(n, file, line)
                    }
                    EventKind::Exit(f) => {
                        let (n, file, line) = name_of(f);
                        What::Exit(n, file, line)
                    }
                    EventKind::Switch(StackId::OWN) => What::Switch(None),
                    EventKind::Switch(s) => Some(What::Switch(Some(
                        stacks
                            .get(&s.0)
                            .cloned()
                            .unwrap_or_else(|| format!("stack-{}", s.0)),
                    )))?,
                    EventKind::End(s) => What::End(
                        stacks
                            .get(&s.0)
                            .cloned()
                            .unwrap_or_else(|| format!("stack-{}", s.0)),
                    ),
                    EventKind::ThreadStart
                    | EventKind::ThreadExit
                    | EventKind::Lost
                    | EventKind::Wake(_) => return None,
                };
                Some(Named {
                    ns: clock.ticks_to_ns(e.tick),
                    tid,
                    what,
                })
            })
            .collect();
        threads.insert(tid, events);
    }
    (threads, thread_names)
}

/// `per_thread` events of each of the first `threads` threads, starting at
/// each thread's `skip`-th event, merged in time order and rebased to 0.
fn pick(
    all: &BTreeMap<u64, Vec<Named>>,
    threads: usize,
    skip: usize,
    per_thread: usize,
) -> Vec<Named> {
    let mut out: Vec<Named> = all
        .values()
        .filter(|v| v.len() > skip)
        .take(threads)
        .flat_map(|v| v.iter().skip(skip).take(per_thread).cloned())
        .collect();
    out.sort_by_key(|e| (e.ns, e.tid));
    let zero = out.first().map_or(0, |e| e.ns);
    for e in &mut out {
        e.ns -= zero;
    }
    out
}

/// `events` with an `end` of every logical stack they switch onto, by the
/// first thread: when the stack was last left (an end that counts), or one
/// ns after the last event if a thread still runs it (one that does not).
fn with_ends(events: &[Named]) -> Vec<Named> {
    let mut out = events.to_vec();
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return out;
    };
    // Per stack: when it was last left, `None` while a thread runs it.
    let mut left: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut on: HashMap<u64, String> = HashMap::new();
    for e in events {
        if let What::Switch(to) = &e.what {
            if let Some(from) = on.remove(&e.tid) {
                left.insert(from, Some(e.ns));
            }
            if let Some(to) = to {
                left.insert(to.clone(), None);
                on.insert(e.tid, to.clone());
            }
        }
    }
    for (stack, at) in left {
        out.push(Named {
            ns: at.unwrap_or(last.ns + 1),
            tid: first.tid,
            what: What::End(stack),
        });
    }
    // In time order; an end goes after the events of its time.
    out.sort_by_key(|e| e.ns);
    out
}

/// The events as a binary trace with 1 KiB chunks.
fn binary(events: &[Named], names: &HashMap<u64, String>) -> Vec<u8> {
    let options = WriterOptions {
        chunk_size: 1024,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), options).unwrap();
    let mut named = Vec::new();
    for e in events {
        if !named.contains(&e.tid) {
            named.push(e.tid);
            let name = names.get(&e.tid).cloned().unwrap_or_default();
            w.thread_name(ThreadId(e.tid), 1000 + e.tid, &name);
        }
        let kind = match &e.what {
            What::Enter(n, f, l) => EventKind::Enter(w.function(n, f, *l, "sample")),
            What::Exit(n, f, l) => EventKind::Exit(w.function(n, f, *l, "sample")),
            What::Switch(None) => EventKind::Switch(StackId::OWN),
            What::Switch(Some(s)) => EventKind::Switch(w.stack(s)),
            What::End(s) => EventKind::End(w.stack(s)),
        };
        w.event(ThreadId(e.tid), e.ns, kind).unwrap();
    }
    w.finish(None).unwrap().into_inner()
}

/// The events as JSON lines.
fn jsonl(events: &[Named], names: &HashMap<u64, String>) -> String {
    let mut s = String::new();
    let q = |t: &str| serde_json_string(t);
    for e in events {
        let _ = match &e.what {
            What::Enter(n, f, l) | What::Exit(n, f, l) => {
                let ev = if matches!(e.what, What::Enter(..)) {
                    "enter"
                } else {
                    "exit"
                };
                writeln!(
                    s,
                    r#"{{"ts": {}, "tid": {}, "ev": "{ev}", "fn": {}, "file": {}, "line": {l}}}"#,
                    e.ns,
                    e.tid,
                    q(n),
                    q(f)
                )
            }
            What::Switch(None) => writeln!(
                s,
                r#"{{"ts": {}, "tid": {}, "ev": "switch", "stack": null}}"#,
                e.ns, e.tid
            ),
            What::Switch(Some(st)) => writeln!(
                s,
                r#"{{"ts": {}, "tid": {}, "ev": "switch", "stack": {}}}"#,
                e.ns,
                e.tid,
                q(st)
            ),
            What::End(st) => writeln!(
                s,
                r#"{{"ts": {}, "tid": {}, "ev": "end", "stack": {}}}"#,
                e.ns,
                e.tid,
                q(st)
            ),
        };
    }
    let mut tids: Vec<u64> = events.iter().map(|e| e.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    for tid in tids {
        if let Some(n) = names.get(&tid) {
            let _ = writeln!(s, r#"{{"ev": "thread", "tid": {tid}, "name": {}}}"#, q(n));
        }
    }
    s
}

/// A JSON string literal (the sample names are plain, but be exact).
fn serde_json_string(t: &str) -> String {
    let mut s = String::from('"');
    for c in t.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// A binary trace exported as Chrome JSON by mtanalyze's own exporter.
fn chrome(binary: &[u8]) -> Vec<u8> {
    let trace = mtanalyze::from_bytes("seed", binary.to_vec()).unwrap();
    let t = mtanalyze::timeline::Timelines::new(&trace, &Default::default()).unwrap();
    let mut out = Vec::new();
    mtanalyze::render::chrome::chrome(&mut out, &t, &mut |_| {}).unwrap();
    out
}

/// Chrome JSON as other tools write it (`schemas/chrome-import.md`).
const CHROME_SHAPES: &[(&str, &str)] = &[
    (
        "viztracer.json",
        r#"{"traceEvents": [
{"ph": "M", "pid": 7, "tid": 7, "name": "process_name", "args": {"name": "python"}},
{"ph": "M", "pid": 7, "tid": 7, "name": "thread_name", "args": {"name": "MainThread"}},
{"ph": "X", "pid": 7, "tid": 7, "ts": 12.5, "dur": 3.25, "name": "parse (app/parse.py:10)", "cat": "FEE"},
{"ph": "X", "pid": 7, "tid": 7, "ts": 10.0, "dur": 9.0, "name": "main (app/main.py:3)", "cat": "FEE"},
{"ph": "X", "pid": 7, "tid": 8, "ts": 11.0, "dur": 2.0, "name": "worker (app/w.py:1)", "cat": "FEE"},
{"ph": "i", "pid": 7, "tid": 7, "ts": 30.0, "name": "marker", "s": "t"}
], "viztracer_metadata": {"version": "0.16.0"}}"#,
    ),
    (
        "tracing-chrome.json",
        r#"[
{"ph":"B","pid":1,"tid":1,"ts":1.0,"name":"request","cat":"app","file":"src/main.rs","line":12,"args":{}},
{"ph":"B","pid":1,"tid":1,"ts":2.5,"name":"query","cat":"db","args":{"[file]":"src/db.rs","[line]":40}},
{"ph":"E","pid":1,"tid":1,"ts":7.0,"name":"query","cat":"db"},
{"ph":"B","pid":1,"tid":2,"ts":3.0,"name":"flush","cat":"io"},
{"ph":"E","pid":1,"tid":1,"ts":9.0},
{"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{"name":"io-worker"}},
"#,
    ),
    (
        "paused.json",
        r#"{"traceEvents": [
{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "name": "task", "args": {"file": "t.rs", "line": 2}},
{"ph": "X", "pid": 1, "tid": 1, "ts": 4, "dur": 3, "name": "paused", "cat": "mtrace.paused"},
{"ph": "X", "pid": 2, "tid": "worker", "ts": -5, "dur": 1e3, "name": "other"}
]}"#,
    ),
];

/// Chunk slot offsets of a trace written by [`binary`].
fn slots(bytes: &[u8]) -> Vec<usize> {
    let f = TraceFile::parse(bytes).unwrap();
    let off = read_u64(bytes, H_CHUNKS_OFFSET).unwrap() as usize;
    let size = f.header().chunk_size as usize;
    (0..f.chunk_slots() as usize)
        .map(|i| off + i * size)
        .collect()
}

/// The recorder's view of a killed process: not finished, every chunk still owned.
fn unfinished(mut bytes: Vec<u8>) -> Vec<u8> {
    let flags = u32::from_le_bytes(bytes[H_FLAGS..H_FLAGS + 4].try_into().unwrap());
    bytes[H_FLAGS..H_FLAGS + 4].copy_from_slice(&(flags & !FLAG_FINISHED).to_le_bytes());
    for at in slots(&bytes) {
        let s = unpack_state(read_u64(&bytes, at).unwrap());
        if let Some(seq) = s.seq {
            let word = pack_state(seq, s.committed_bytes, true);
            bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
        }
    }
    bytes
}

/// A chunk of the middle zeroed: its thread has a gap and restarts from the next snapshot.
fn lost_chunk(mut bytes: Vec<u8>) -> Vec<u8> {
    let s = slots(&bytes);
    let size = u32::from_le_bytes(bytes[H_CHUNK_SIZE..H_CHUNK_SIZE + 4].try_into().unwrap());
    if let Some(&at) = s.get(s.len() / 2) {
        bytes[at..at + size as usize].fill(0);
    }
    bytes
}

/// `bytes` (a 16-byte-event trace) with compact events.
fn compact(bytes: &[u8]) -> Vec<u8> {
    let file = TraceFile::parse(bytes).unwrap();
    mtrace_format::convert::compact(&file).unwrap().bytes
}

/// A compact trace cut in the middle of its last used chunk's events, the
/// header still claiming every slot.
fn torn_compact(mut bytes: Vec<u8>) -> Vec<u8> {
    let file = TraceFile::parse(&bytes).unwrap();
    let last = (0..file.chunk_slots())
        .rev()
        .find_map(|i| file.chunk(i).ok().flatten())
        .map(|c| c.events_offset() as usize + c.event_bytes().len() / 2);
    if let Some(cut) = last {
        bytes.truncate(cut);
    }
    bytes
}

/// `bytes` (a trace written by [`binary`], whose metadata follows its
/// chunks) with its metadata log in segments: the region holds the first
/// record and a link, and the rest go on in segments, chunk slots after
/// the trace's own, the later ones first in the file. Also returns the
/// offset of the middle of the last segment's log.
fn segmented(bytes: &[u8]) -> (Vec<u8>, usize) {
    let file = TraceFile::parse(bytes).unwrap();
    let h = file.header().clone();
    let log = file.metadata_log();
    let mut starts = Vec::new();
    for_each_record_located(&log, 0, |at, _| starts.push(at));
    starts.push(log.len());
    let records: Vec<&[u8]> = starts.windows(2).map(|w| &log[w[0]..w[1]]).collect();
    let chunk = h.chunk_size as usize;
    let room = chunk - SEGMENT_HEADER_SIZE - META_NEXT_SEGMENT_LEN;
    // The records of each segment, filled in order.
    let mut parts: Vec<Vec<u8>> = vec![Vec::new()];
    for r in records.iter().skip(1) {
        let last = parts.last_mut().unwrap();
        if !last.is_empty() && last.len() + r.len() > room {
            parts.push(Vec::new());
        }
        parts.last_mut().unwrap().extend_from_slice(r);
    }
    let own = h.chunk_count as usize;
    let slot_at = |i: usize| h.chunks_offset as usize + i * chunk;
    // Segment k (from 0) in slot own + (n - 1 - k).
    let n = parts.len();
    let segment_at = |k: usize| slot_at(own + n - 1 - k);
    let meta_offset = slot_at(own + n);
    let mut first = records.first().map(|r| r.to_vec()).unwrap_or_default();
    encode_next_segment(&mut first, segment_at(0) as u64, chunk as u64);
    let mut out = vec![0u8; meta_offset + first.len()];
    out[..slot_at(own)].copy_from_slice(&bytes[..slot_at(own)]);
    out[meta_offset..].copy_from_slice(&first);
    let mut last_middle = 0;
    for (k, part) in parts.iter().enumerate() {
        let mut log = part.clone();
        if k + 1 < n {
            encode_next_segment(&mut log, segment_at(k + 1) as u64, chunk as u64);
        }
        let at = segment_at(k);
        out[at..at + 8].copy_from_slice(&SEGMENT_STATE.to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&SEGMENT_MAGIC.to_le_bytes());
        out[at + S_META_LEN..at + S_META_LEN + 8]
            .copy_from_slice(&(log.len() as u64).to_le_bytes());
        out[at + SEGMENT_HEADER_SIZE..at + SEGMENT_HEADER_SIZE + log.len()].copy_from_slice(&log);
        last_middle = at + SEGMENT_HEADER_SIZE + log.len() / 2;
    }
    let mut header = h;
    header.chunk_count = (own + n) as u64;
    header.meta_offset = meta_offset as u64;
    header.meta_capacity = first.len() as u64;
    header.meta_len = first.len() as u64;
    out[..4096].copy_from_slice(&header.encode());
    (out, last_middle)
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = root.join("../..");
    let out = |target: &str| -> PathBuf {
        let d = root.join("seeds").join(target);
        fs::create_dir_all(&d).unwrap();
        d
    };
    let (bin_dir, jsonl_dir, chrome_dir) = (out("binary"), out("jsonl"), out("chrome"));
    let mut written = 0;
    let mut put = |dir: &Path, name: String, bytes: &[u8]| {
        fs::write(dir.join(name), bytes).unwrap();
        written += 1;
    };
    let mut samples: Vec<_> = fs::read_dir(repo.join("sample-traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    samples.sort();
    for path in samples {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let bytes = fs::read(&path).unwrap();
        let (threads, names) = read_sample(&bytes);
        for (label, n_threads, skip, per_thread) in [
            ("head", 3, 0, 40),
            ("middle", 4, 500, 120),
            ("wide", 8, 0, 12),
        ] {
            let events = pick(&threads, n_threads, skip, per_thread);
            if events.is_empty() {
                continue;
            }
            let b = binary(&events, &names);
            put(
                &jsonl_dir,
                format!("{stem}-{label}.jsonl"),
                jsonl(&events, &names).as_bytes(),
            );
            put(
                &bin_dir,
                format!("{stem}-{label}-unfinished.bin"),
                &unfinished(b.clone()),
            );
            put(
                &bin_dir,
                format!("{stem}-{label}-lost.bin"),
                &lost_chunk(b.clone()),
            );
            put(&chrome_dir, format!("{stem}-{label}.json"), &chrome(&b));
            put(&bin_dir, format!("{stem}-{label}.bin"), &b);
            // The same events as compact ones (format version 4), whole
            // and with a torn last chunk.
            let compact = compact(&b);
            put(&bin_dir, format!("{stem}-{label}-v4.bin"), &compact);
            put(
                &bin_dir,
                format!("{stem}-{label}-v4-torn.bin"),
                &torn_compact(compact),
            );
            // The names in segments, whole and with the last one damaged
            // (its log zeroed from the middle on).
            let (in_segments, middle) = segmented(&b);
            let check = TraceFile::parse(&in_segments).unwrap().metadata();
            assert_eq!(check, TraceFile::parse(&b).unwrap().metadata());
            put(
                &bin_dir,
                format!("{stem}-{label}-segments.bin"),
                &in_segments,
            );
            let mut damaged = in_segments;
            damaged[middle..middle + 16].fill(0xff);
            put(
                &bin_dir,
                format!("{stem}-{label}-segments-damaged.bin"),
                &damaged,
            );
            let ended = with_ends(&events);
            if ended.len() > events.len() {
                put(
                    &bin_dir,
                    format!("{stem}-{label}-ends.bin"),
                    &binary(&ended, &names),
                );
                put(
                    &jsonl_dir,
                    format!("{stem}-{label}-ends.jsonl"),
                    jsonl(&ended, &names).as_bytes(),
                );
            }
        }
        // The recorder's own layout: header, metadata, the first two chunks.
        let f = TraceFile::parse(&bytes).unwrap();
        let h = f.header();
        let cut = (h.chunks_offset + 2 * h.chunk_size as u64).min(bytes.len() as u64);
        let meta_end = (h.meta_offset + h.meta_len).min(bytes.len() as u64);
        put(
            &bin_dir,
            format!("{stem}-cut.bin"),
            &bytes[..cut.max(meta_end) as usize],
        );
    }
    for entry in fs::read_dir(repo.join("tests/e2e/vectors")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|x| x == "jsonl") {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            put(&jsonl_dir, name, &fs::read(&p).unwrap());
        }
    }
    for (name, text) in CHROME_SHAPES {
        put(&chrome_dir, (*name).to_owned(), text.as_bytes());
    }
    let regressions = repo.join("crates/mtanalyze/tests/regressions");
    if let Ok(list) = fs::read_dir(&regressions) {
        for entry in list {
            let p = entry.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".md") {
                continue;
            }
            let b = fs::read(&p).unwrap();
            let dir = match b.iter().find(|c| !c.is_ascii_whitespace()) {
                _ if b.starts_with(b"MTRACE") => &bin_dir,
                Some(b'[') => &chrome_dir,
                _ if b.windows(11).any(|w| w == b"traceEvents") => &chrome_dir,
                _ => &jsonl_dir,
            };
            put(dir, name, &b);
        }
    }
    println!(
        "wrote {written} seeds under {}",
        root.join("seeds").display()
    );
}

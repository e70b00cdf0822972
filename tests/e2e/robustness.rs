//! Untrusted traces: whatever bytes `mtanalyze` is given, it exits 0
//! (warnings printed) or 2 (one line on stderr), never panics (101), never
//! uses more than [`CPU_LIMIT_S`] seconds of CPU (nor hangs past
//! [`WALL_LIMIT`]) and never needs more than [`MEMORY_LIMIT_KIB`] of address
//! space; and it keeps every intact event.
//!
//! * Mutations: deterministic (seeded) bit flips, byte sets, truncations,
//!   chunk-header and snapshot smashes, huge header counts, damaged metadata
//!   records, of each sample trace and of JSON-lines traces, each run through
//!   the real binary under `ulimit -v -t` and a timer. The normal run tries 200;
//!   the soak tries 2500 per input (`MTANALYZE_SOAK=N` for another number):
//!
//!   ```sh
//!   cargo test -p mtanalyze-cli --test e2e robustness -- --ignored
//!   ```
//!
//!   A failing input is kept in `$TMPDIR/mtanalyze-robustness-failures/`.
//! * Salvage: a truncated file keeps every whole event before the cut, a
//!   damaged chunk is skipped and listed by offset, a killed recording is
//!   analyzed with its open frames closed at the last timestamp, and header
//!   claims (2^40 chunks, a 4 GB string) are errors, not allocations.
//! * The inputs of `crates/mtanalyze/tests/regressions/` (found by the fuzz
//!   targets of `crates/mtrace-fuzz`) through the library and the binary.

use std::ffi::OsStr;
use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mtanalyze::RecursionCollapse;
use mtanalyze::{report::Clock, AnalyzeOptions, PathMode};
use mtrace_format::layout::*;
use mtrace_format::{EventKind, FunctionId, StackId, ThreadId, TraceFile, TraceWriter};

use crate::util::{mtanalyze, repo_file, vector, TempDir, HANDOFF};

/// Address space one run may map (`ulimit -v`, in KiB): the 4 MB sample
/// traces need about 130 MiB (debug build, two rayon threads).
const MEMORY_LIMIT_KIB: u64 = 512 * 1024;
/// CPU time one run may use (`ulimit -t`, all threads): a debug build takes
/// ~50 ms on a sample trace and ~1 s on the largest inputs here. CPU time,
/// not wall time, so a loaded machine does not fail the test.
const CPU_LIMIT_S: u64 = 10;
/// Wall time after which a run counts as hung (blocked, not computing).
const WALL_LIMIT: Duration = Duration::from_secs(120);
/// Mutations in the normal test run, over all inputs.
const NORMAL_MUTATIONS: usize = 200;
/// Mutations per input in the soak.
const SOAK_MUTATIONS: usize = 2500;

// ------------------------------------------------------------------ running

/// How one limited run ended.
#[derive(Debug)]
struct Outcome {
    args: String,
    /// Exit status; `None`: killed by a signal (abort on a failed allocation, or our timeout).
    code: Option<i32>,
    /// The signal that ended it, if one did.
    signal: Option<i32>,
    stderr: String,
    elapsed: Duration,
    timed_out: bool,
}

impl Outcome {
    /// Why this run breaks the contract, if it does.
    fn problem(&self) -> Option<String> {
        let why = if self.timed_out {
            format!("hung: still running after {WALL_LIMIT:?}")
        } else if self.signal == Some(24) {
            format!("used more than {CPU_LIMIT_S} s of CPU (SIGXCPU)")
        } else if self.code == Some(101) || self.stderr.contains("panicked") {
            "panicked".to_owned()
        } else if self.code.is_none() {
            "killed by a signal (a failed allocation aborts)".to_owned()
        } else if !matches!(self.code, Some(0) | Some(2)) {
            format!("exit status {:?}", self.code)
        } else if self.code == Some(2)
            && (self.stderr.lines().count() != 1 || !self.stderr.starts_with("mtanalyze: "))
        {
            "exit 2 without exactly one `mtanalyze: ` line".to_owned()
        } else {
            return None;
        };
        Some(format!(
            "`mtanalyze {}`: {why} (exit {:?}, {:?})\n{}",
            self.args,
            self.code,
            self.elapsed,
            self.stderr.chars().take(2000).collect::<String>()
        ))
    }
}

/// Runs the binary under `ulimit -v MEMORY_LIMIT_KIB -t CPU_LIMIT_S`,
/// stdout discarded, killed after `WALL_LIMIT`.
fn run_limited(dir: &Path, args: &[&OsStr]) -> Outcome {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let err_path = dir.join(format!("stderr-{n}"));
    let err = fs::File::create(&err_path).expect("stderr file");
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "ulimit -v {MEMORY_LIMIT_KIB} && ulimit -t {CPU_LIMIT_S} && exec \"$@\""
        ))
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_mtanalyze"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err);
    let shown = args
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let start = Instant::now();
    let mut child = c.spawn().expect("spawn sh");
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > WALL_LIMIT {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let elapsed = start.elapsed();
    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    let _ = fs::remove_file(&err_path);
    Outcome {
        args: shown,
        code: status.code(),
        signal: std::os::unix::process::ExitStatusExt::signal(&status),
        stderr,
        elapsed,
        timed_out,
    }
}

/// Runs the report (with `clock`) and `check` on `path`; returns the problems.
fn run_both(dir: &Path, path: &Path, clock: &str) -> Vec<String> {
    let p = path.as_os_str();
    let runs = [
        run_limited(dir, &[p, "--clock".as_ref(), clock.as_ref()]),
        run_limited(dir, &["check".as_ref(), p]),
    ];
    runs.iter().filter_map(Outcome::problem).collect()
}

/// Where the segment pass's replay of own stacks (call paths off) and the
/// replay pass (call paths on) disagree on `bytes`: they must not, damaged
/// input or not.
fn fused_replay_differs(bytes: &[u8], clock: &str) -> Option<String> {
    let clock = match clock {
        "stack" => Clock::Stack,
        "wall" => Clock::Wall,
        _ => return None, // gil never fuses
    };
    let trace = mtanalyze::from_bytes("mutated", bytes.to_vec()).ok()?;
    let (fused, replayed) = mtanalyze_testkit::fusion::fused_and_replayed(&trace, clock)?;
    (fused != replayed)
        .then(|| format!("clock {clock}: own stacks replayed by the segment pass differ"))
}

/// Asserts that every run of `path` keeps the contract.
#[track_caller]
fn assert_survives(dir: &Path, path: &Path) {
    for clock in ["stack", "gil", "wall"] {
        let problems = run_both(dir, path, clock);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

// ------------------------------------------------------------------ mutating

/// splitmix64: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Values that break naive size arithmetic.
const HUGE: [u64; 8] = [
    0,
    1,
    u64::MAX,
    u64::MAX - 1,
    1 << 40,
    1 << 32,
    u32::MAX as u64,
    1 << 63,
];

/// An input to mutate.
struct Base {
    name: String,
    bytes: Vec<u8>,
    binary: bool,
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    if let Some(s) = b.get_mut(at..at + 8) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = b.get_mut(at..at + 4) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Chunk slot offsets of a binary trace.
fn slot_offsets(bytes: &[u8]) -> Vec<usize> {
    let Ok(t) = TraceFile::parse(bytes) else {
        return Vec::new();
    };
    let h = t.header();
    (0..t.chunk_slots())
        .map(|i| (h.chunks_offset + i * h.chunk_size as u64) as usize)
        .collect()
}

/// One mutation of a binary trace; returns what it did.
fn mutate_binary(b: &mut Vec<u8>, slots: &[usize], meta: (usize, usize), rng: &mut Rng) -> String {
    let len = b.len();
    match rng.below(7) {
        0 => {
            let n = 1 + rng.below(16);
            for _ in 0..n {
                // Half of the flips land in the header's fields.
                let at = if rng.below(2) == 0 {
                    rng.below(0x100.min(len))
                } else {
                    rng.below(len)
                };
                b[at] ^= 1 << rng.below(8);
            }
            format!("{n} bit flips")
        }
        1 => {
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let at = rng.below(len);
                let r = rng.next() as u8;
                b[at] = rng.pick(&[0, 0xff, 0x7f, 0x80, r]);
            }
            format!("{n} byte sets")
        }
        2 => {
            let cut = if !slots.is_empty() && rng.below(2) == 0 {
                let s = slots[rng.below(slots.len())];
                {
                    let r = rng.below(16384);
                    s + rng.pick(&[0, 1, 8, 24, 64, 65, 96, 100, 1000, r])
                }
            } else {
                rng.below(len)
            };
            b.truncate(cut.min(len));
            format!("truncated to {} bytes", b.len())
        }
        3 if !slots.is_empty() => {
            let s = slots[rng.below(slots.len())];
            let what = rng.below(8);
            match what {
                0 => put_u64(b, s + C_STATE, rng.next()),
                1 => put_u64(
                    b,
                    s + C_STATE,
                    pack_state(rng.below(100) as u64, MAX_CHUNK_SIZE, false),
                ),
                2 => put_u64(b, s + C_THREAD, rng.pick(&HUGE)),
                3 => put_u64(b, s + C_THREAD_CHUNK_NO, rng.pick(&HUGE)),
                4 => put_u32(b, s + CHUNK_HEADER_SIZE, rng.next() as u32),
                5 => put_u32(b, s + CHUNK_HEADER_SIZE + 4, rng.pick(&HUGE) as u32),
                6 => put_u32(b, s + CHUNK_HEADER_SIZE + 16, rng.pick(&HUGE) as u32),
                _ => {
                    let at = s + CHUNK_HEADER_SIZE + 32 + 16 * rng.below(64);
                    put_u64(b, at, rng.next());
                    put_u64(b, at + 8, rng.pick(&HUGE));
                }
            }
            format!("chunk header/snapshot smash {what} at {s}")
        }
        4 => {
            let fields: [(usize, bool); 16] = [
                (H_CHUNK_COUNT, true),
                (H_CHUNKS_OFFSET, true),
                (H_META_OFFSET, true),
                (H_META_CAPACITY, true),
                (H_META_LEN, true),
                (H_START_TICK, true),
                (H_CALIB_TICKS, true),
                (H_CALIB_NS, true),
                (H_END_TICK, true),
                (H_NEXT_SEQ, true),
                (H_DROPPED_EVENTS, true),
                (H_DROPPED_CHUNKS, true),
                (H_META_DROPPED, true),
                (H_CHUNK_SIZE, false),
                (H_CMDLINE_LEN, false),
                (H_FLAGS, false),
            ];
            let (at, wide) = rng.pick(&fields);
            let v = rng.pick(&HUGE);
            if wide {
                put_u64(b, at, v);
            } else {
                put_u32(b, at, v as u32);
            }
            format!("header field at {at:#x} = {v}")
        }
        5 if meta.1 > META_RECORD_HEADER => {
            // A record header inside the metadata region (8-aligned).
            let at = meta.0 + rng.below(meta.1 / META_ALIGN) * META_ALIGN;
            if rng.below(2) == 0 {
                put_u32(b, at, rng.pick(&HUGE) as u32);
            } else {
                // A string length right after the fixed fields of a record.
                put_u32(
                    b,
                    at + META_RECORD_HEADER + rng.pick(&[0, 4, 8, 16]),
                    u32::MAX,
                );
            }
            format!("metadata record smash at {at}")
        }
        _ => {
            let a = mutate_binary(b, slots, meta, rng);
            let c = mutate_binary(b, slots, meta, rng);
            format!("{a}; {c}")
        }
    }
}

/// One mutation of a JSON-lines trace.
fn mutate_text(b: &mut Vec<u8>, rng: &mut Rng) -> String {
    let len = b.len().max(1);
    match rng.below(6) {
        0 => {
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let at = rng.below(len);
                if let Some(x) = b.get_mut(at) {
                    *x ^= 1 << rng.below(8);
                }
            }
            format!("{n} bit flips")
        }
        1 => {
            b.truncate(rng.below(len));
            format!("truncated to {}", b.len())
        }
        2 => {
            // A number replaced by one that does not fit.
            let text = String::from_utf8_lossy(b).into_owned();
            let digits: Vec<usize> = text
                .char_indices()
                .filter(|(i, c)| {
                    c.is_ascii_digit() && (*i == 0 || !text.as_bytes()[i - 1].is_ascii_digit())
                })
                .map(|(i, _)| i)
                .collect();
            if digits.is_empty() {
                return "nothing".into();
            }
            let at = digits[rng.below(digits.len())];
            let end = at
                + text[at..]
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(text.len() - at);
            let with = rng.pick(&[
                "18446744073709551615",
                "1152921504606846975",
                "99999999999999999999999",
                "4294967295",
                "0",
                "-1",
                "1e308",
            ]);
            *b = format!("{}{with}{}", &text[..at], &text[end..]).into_bytes();
            format!("number at {at} = {with}")
        }
        3 => {
            // Lines duplicated or dropped.
            let text = String::from_utf8_lossy(b).into_owned();
            let mut lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return "nothing".into();
            }
            let i = rng.below(lines.len());
            if rng.below(2) == 0 {
                lines.remove(i);
            } else {
                let l = lines[i];
                lines.insert(i, l);
            }
            *b = (lines.join("\n") + "\n").into_bytes();
            format!("line {i} dropped or doubled")
        }
        4 => {
            let text = String::from_utf8_lossy(b).into_owned();
            let (from, to) = rng.pick(&[
                ("\"enter\"", "\"exit\""),
                ("\"exit\"", "\"enter\""),
                ("\"switch\"", "\"enter\""),
                ("null", "\"thread:1\""),
                ("\"tid\": 1", "\"tid\": 0"),
                ("\"tid\": 2", "\"tid\": 18446744073709551615"),
            ]);
            *b = text.replacen(from, to, 1 + rng.below(3)).into_bytes();
            format!("{from} -> {to}")
        }
        _ => {
            let a = mutate_text(b, rng);
            let c = mutate_text(b, rng);
            format!("{a}; {c}")
        }
    }
}

/// The inputs: the sample traces and JSON-lines traces.
fn bases() -> Vec<Base> {
    let mut out = Vec::new();
    for name in ["workload.bin", "workload-ring.bin", "workload-full.bin"] {
        out.push(Base {
            name: name.into(),
            bytes: fs::read(repo_file(&format!("sample-traces/{name}"))).expect("sample trace"),
            binary: true,
        });
    }
    let mut text = HANDOFF.to_owned();
    text.push_str(&fs::read_to_string(vector("fibers.jsonl")).expect("vector"));
    out.push(Base {
        name: "handoff+fibers.jsonl".into(),
        bytes: text.into_bytes(),
        binary: false,
    });
    out
}

/// Runs `per_base` mutations of each input on two threads; panics with
/// every problem found (inputs kept for a regression test).
fn mutation_run(label: &str, per_base: &[usize], seed: u64) {
    let dir = TempDir::new(label);
    let keep = std::env::temp_dir().join("mtanalyze-robustness-failures");
    let bases = bases();
    let mut jobs = Vec::new();
    for (bi, &n) in per_base.iter().enumerate().take(bases.len()) {
        for k in 0..n {
            jobs.push((bi, k));
        }
    }
    let slowest = std::sync::Mutex::new(Duration::ZERO);
    let problems = std::sync::Mutex::new(Vec::<String>::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(bi, k)) = jobs.get(j) else { break };
                let base = &bases[bi];
                let mut rng = Rng(seed ^ (bi as u64) << 32 ^ k as u64);
                let mut bytes = base.bytes.clone();
                let what = if base.binary {
                    let slots = slot_offsets(&bytes);
                    let meta = TraceFile::parse(&bytes)
                        .map(|t| {
                            let h = t.header();
                            (
                                h.meta_offset as usize,
                                h.meta_len.min(h.meta_capacity) as usize,
                            )
                        })
                        .unwrap_or((0, 0));
                    mutate_binary(&mut bytes, &slots, meta, &mut rng)
                } else {
                    mutate_text(&mut bytes, &mut rng)
                };
                let name = format!("{}-{k}", base.name.replace('.', "-"));
                let path = dir.write(&name, &bytes);
                let clock = ["stack", "gil", "wall"][k % 3];
                let start = Instant::now();
                let mut found = run_both(dir.path(), &path, clock);
                let took = start.elapsed();
                if found.is_empty() {
                    // The binary stayed within its limits, so the library can
                    // run it here too.
                    found.extend(fused_replay_differs(&bytes, clock));
                }
                {
                    let mut m = slowest.lock().unwrap();
                    *m = (*m).max(took);
                }
                if !found.is_empty() {
                    let _ = fs::create_dir_all(&keep);
                    let kept = keep.join(&name);
                    let _ = fs::write(&kept, &bytes);
                    let mut p = problems.lock().unwrap();
                    for f in found {
                        p.push(format!(
                            "{} ({what}; kept as {}):\n{f}",
                            base.name,
                            kept.display()
                        ));
                    }
                }
                let _ = fs::remove_file(&path);
            });
        }
    });
    let problems = problems.into_inner().unwrap();
    eprintln!(
        "{label}: {} mutations, slowest input {:?} for both runs",
        jobs.len(),
        slowest.into_inner().unwrap()
    );
    assert!(
        problems.is_empty(),
        "{} problems, the first ones:\n{}",
        problems.len(),
        problems
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

#[test]
fn mutated_and_truncated_traces_never_crash_hang_or_balloon() {
    let per = NORMAL_MUTATIONS / 4;
    mutation_run("mutations", &[per, per, per, per], 0x6d74_7261_6365);
}

#[test]
#[ignore = "soak: thousands of mutations (minutes); run with -- --ignored"]
fn soak_thousands_of_mutations_per_input() {
    let n = std::env::var("MTANALYZE_SOAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SOAK_MUTATIONS);
    mutation_run("soak", &[n, n, n, n], 0x736f_616b);
}

// ------------------------------------------------------------------ salvage

/// Events a reader must find in `orig` cut to `cut` bytes: in each chunk whose
/// header and snapshot are before the cut, its whole events before the cut.
fn events_before(orig: &[u8], cut: usize) -> u64 {
    let t = TraceFile::parse(orig).unwrap();
    let mut n = 0;
    for i in 0..t.chunk_slots() {
        let Ok(Some(c)) = t.chunk(i) else { continue };
        let first = c.events_offset() as usize;
        if first > cut {
            continue;
        }
        let whole = (cut - first) / EVENT_SIZE;
        n += c.events().take(whole).take_while(Result::is_ok).count() as u64;
    }
    n
}

fn check_json(path: &Path) -> serde_json::Value {
    mtanalyze([
        "check".as_ref(),
        path.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ])
    .success()
    .json()
}

#[test]
fn a_truncated_trace_keeps_every_whole_event_before_the_cut() {
    let dir = TempDir::new("truncated");
    let orig = fs::read(repo_file("sample-traces/workload.bin")).unwrap();
    let total = events_before(&orig, orig.len());
    let slots = slot_offsets(&orig);
    assert!(slots.len() > 8);
    let mut cuts = vec![orig.len(), orig.len() - 1];
    for &s in &[slots[1], slots[slots.len() / 2], slots[slots.len() - 1]] {
        // At a slot, inside its header, inside its snapshot, mid-event, after some events.
        cuts.extend([s, s + 40, s + 80, s + 64 + 32 + 16 * 7 + 5, s + 4000]);
    }
    for cut in cuts {
        let path = dir.write(&format!("cut-{cut}.bin"), &orig[..cut]);
        let expected = events_before(&orig, cut);
        let c = check_json(&path);
        assert_eq!(c["events"], expected, "cut at {cut} of {}", orig.len());
        assert!(expected <= total);
        // The report runs too, within the limits.
        let problems = run_both(dir.path(), &path, "stack");
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
    // A cut inside a chunk: check names the chunk, and the slots beyond the file.
    let mid = slots[slots.len() / 2] + 4000;
    let c = check_json(&dir.write("mid.bin", &orig[..mid]));
    let cut = c["chunks_cut"].as_array().unwrap();
    assert_eq!(cut.len(), 1, "{cut:?}");
    assert_eq!(cut[0]["index"].as_u64(), Some(slots.len() as u64 / 2));
    assert!(c["chunk_slots"].as_u64() > c["chunk_slots_in_file"].as_u64());
    // Inside the header: unreadable, exit 2 with one line.
    let path = dir.write("cut-header.bin", &orig[..100]);
    let line = mtanalyze([path.as_os_str()]).fails_with_one_line();
    assert!(line.contains("cut short inside the header"), "{line}");
}

#[test]
fn a_damaged_chunk_is_skipped_listed_by_offset_and_the_rest_analyzed() {
    let dir = TempDir::new("damaged");
    let orig = fs::read(repo_file("sample-traces/workload.bin")).unwrap();
    let t = TraceFile::parse(&orig).unwrap();
    let slots = slot_offsets(&orig);
    let events_in = |i: usize| {
        t.chunk(i as u64)
            .unwrap()
            .map_or(0, |c| c.event_count() as u64)
    };
    let total = events_before(&orig, orig.len());
    let (a, b) = (3, slots.len() / 2);
    let mut bytes = orig.clone();
    // Slot a: a committed length longer than the chunk. Slot b: no snapshot marker.
    put_u64(
        &mut bytes,
        slots[a] + C_STATE,
        pack_state(7, MAX_CHUNK_SIZE, false),
    );
    put_u32(&mut bytes, slots[b] + CHUNK_HEADER_SIZE, 0xdead_beef);
    let path = dir.write("damaged.bin", &bytes);
    let c = check_json(&path);
    let damaged: Vec<(u64, u64)> = c["chunks_damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["index"].as_u64().unwrap(), d["offset"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        damaged,
        vec![
            (a as u64, slots[a] as u64),
            (b as u64, (slots[b] + CHUNK_HEADER_SIZE) as u64)
        ]
    );
    assert_eq!(c["events"], total - events_in(a) - events_in(b));
    // The report analyzes the rest and says what it skipped.
    let run = mtanalyze([path.as_os_str()]).success();
    assert!(run.stderr.contains("damaged_chunk x2"), "{}", run.stderr);
    run.stdout_has("parse_expr");
}

/// Frames still open when the recorder died are closed at the last event's
/// time, and the trace says it is unfinished.
#[test]
fn a_killed_recording_closes_open_frames_at_the_last_timestamp() {
    let dir = TempDir::new("killed");
    // Thread 1 is inside main and spin when the process dies; the last event
    // of the trace is thread 2's, at 90 ns.
    let text = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "work"}
{"ts": 40, "tid": 1, "ev": "exit", "fn": "work"}
{"ts": 50, "tid": 1, "ev": "enter", "fn": "spin"}
{"ts": 0, "tid": 2, "ev": "enter", "fn": "idle"}
{"ts": 90, "tid": 2, "ev": "exit", "fn": "idle"}
"#;
    let finished = mtanalyze::jsonl_to_binary(text).unwrap();
    // What SIGKILL leaves: FINISHED clear (no end tick) and chunks still owned.
    let mut bytes = finished.clone();
    let flags = u32::from_le_bytes(bytes[H_FLAGS..H_FLAGS + 4].try_into().unwrap());
    put_u32(&mut bytes, H_FLAGS, flags & !FLAG_FINISHED);
    put_u64(&mut bytes, H_END_TICK, 0);
    for s in slot_offsets(&finished) {
        let st = unpack_state(u64::from_le_bytes(bytes[s..s + 8].try_into().unwrap()));
        if let Some(seq) = st.seq {
            put_u64(&mut bytes, s, pack_state(seq, st.committed_bytes, true));
        }
    }
    let path = dir.write("killed.bin", &bytes);
    let run = mtanalyze([path.as_os_str(), "--format".as_ref(), "json".as_ref()]).success();
    let r = run.json();
    assert_eq!(r["trace"]["finished"], false);
    assert_eq!(r["trace"]["end_ns"], 90);
    let f = |name: &str| {
        r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    assert_eq!(
        (f("main")["ncalls"].clone(), f("main")["cumtime_ns"].clone()),
        (1.into(), 90.into())
    );
    assert_eq!(f("spin")["cumtime_ns"], 40);
    assert_eq!(f("work")["cumtime_ns"], 30);
    // Marked: main and spin were open when it died, work and idle were not.
    let open: Vec<_> = ["main", "spin", "work", "idle"]
        .map(|n| f(n)["open_at_end"].clone())
        .into();
    assert_eq!(open, vec![1, 1, 0, 0]);
    let table = mtanalyze([path.as_os_str()]).success().stdout;
    assert!(table.contains("frames open at the end: 2"), "{table}");
    let w = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "unfinished_trace")
        .expect("unfinished_trace warning");
    assert_eq!(w["repair"], "closed open frames at the last timestamp");
    let c = check_json(&path);
    assert_eq!(c["finished"], false);
    assert_eq!(c["chunks_unreleased"], 2);
    // A real recorder file with its FINISHED flag cleared analyzes too.
    let mut real = fs::read(repo_file("sample-traces/workload.bin")).unwrap();
    let flags = u32::from_le_bytes(real[H_FLAGS..H_FLAGS + 4].try_into().unwrap());
    put_u32(&mut real, H_FLAGS, flags & !FLAG_FINISHED);
    let path = dir.write("workload-killed.bin", &real);
    let run = mtanalyze([path.as_os_str()]).success();
    assert!(run.stderr.contains("unfinished_trace x1"), "{}", run.stderr);
}

/// A stop-when-full file that filled up: the report says how many events were dropped.
#[test]
fn a_full_file_reports_its_dropped_events() {
    let path = repo_file("sample-traces/workload-full.bin");
    let run = mtanalyze([path.as_os_str()]).success();
    let dropped = check_json(&path)["dropped_events"].as_u64().unwrap();
    assert!(dropped > 0);
    assert!(
        run.stderr
            .contains(&format!("dropped_events ({dropped} events)")),
        "{}",
        run.stderr
    );
}

/// A ring that wrapped: the oldest chunks are gone; each thread restarts
/// from the snapshot of its first surviving chunk.
#[test]
fn a_wrapped_ring_is_analyzed_from_its_snapshots() {
    let path = repo_file("sample-traces/workload-ring.bin");
    let c = check_json(&path);
    assert_eq!(c["ring"], true);
    assert!(c["chunks_lost"].as_u64().unwrap() > 0);
    assert_eq!(c["chunks_damaged"].as_array().unwrap().len(), 0);
    let run = mtanalyze([path.as_os_str(), "--format".as_ref(), "json".as_ref()]).success();
    let r = run.json();
    let kinds: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"lost_chunks"), "{kinds:?}");
    assert!(kinds.contains(&"frames_from_snapshot"), "{kinds:?}");
    assert!(r["functions"].as_array().unwrap().len() > 5);
}

#[test]
fn header_claims_are_errors_not_allocations() {
    let dir = TempDir::new("claims");
    let orig = fs::read(repo_file("sample-traces/workload-ring.bin")).unwrap();
    let t = TraceFile::parse(&orig).unwrap();
    let (in_file, meta_at) = (t.chunk_slots(), t.header().meta_offset as usize);
    let with = |name: &str, edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = orig.clone();
        edit(&mut b);
        dir.write(name, b)
    };
    // 2^40 chunks: only those in the file are visited.
    let p = with("chunks.bin", &|b| put_u64(b, H_CHUNK_COUNT, 1 << 40));
    assert_survives(dir.path(), &p);
    let c = check_json(&p);
    assert_eq!(
        (c["chunk_slots"].as_u64(), c["chunk_slots_in_file"].as_u64()),
        (Some(1 << 40), Some(in_file))
    );
    // A 4 GB string in the first metadata record (the first string of its payload).
    let first_str = match read_u16(&orig, meta_at + 4) {
        Some(META_THREAD) => 16,
        _ => 8,
    };
    let p = with("string.bin", &|b| {
        put_u32(b, meta_at + META_RECORD_HEADER + first_str, u32::MAX)
    });
    assert_survives(dir.path(), &p);
    let c = check_json(&p);
    assert_eq!(c["metadata_records"], 0);
    assert!(
        c["metadata_problem"].as_str().unwrap().contains("string"),
        "{}",
        c["metadata_problem"]
    );
    // A record, a region, a snapshot, a command line all claiming 4 GB or more.
    for (name, at, v) in [
        ("record.bin", meta_at, u32::MAX as u64),
        ("meta-len.bin", H_META_LEN, u64::MAX),
        ("meta-capacity.bin", H_META_CAPACITY, u64::MAX),
        ("meta-offset.bin", H_META_OFFSET, u64::MAX),
        ("chunks-offset.bin", H_CHUNKS_OFFSET, u64::MAX),
        (
            "own-depth.bin",
            slot_offsets(&orig)[0] + CHUNK_HEADER_SIZE + 4,
            u32::MAX as u64,
        ),
    ] {
        let p = with(name, &|b| {
            if v > u32::MAX as u64 {
                put_u64(b, at, v)
            } else {
                put_u32(b, at, v as u32)
            }
        });
        assert_survives(dir.path(), &p);
    }
    let p = with("cmdline.bin", &|b| put_u32(b, H_CMDLINE_LEN, u32::MAX));
    assert_survives(dir.path(), &p);
}

// ------------------------------------------------------------------ shapes

/// Many threads of one event each (one chunk per thread in a binary trace,
/// one line per thread in JSON lines): memory must follow the file.
#[test]
fn many_one_event_threads_stay_within_the_memory_limit() {
    let dir = TempDir::new("threads");
    let text: String = (1..=10_000)
        .map(|t| format!("{{\"ts\": {t}, \"tid\": {t}, \"ev\": \"enter\", \"fn\": \"f\"}}\n"))
        .collect();
    assert_survives(dir.path(), &dir.write("threads.jsonl", text));
    let mut w = TraceWriter::new(
        Cursor::new(Vec::new()),
        mtrace_format::WriterOptions {
            chunk_size: MIN_CHUNK_SIZE,
            ..Default::default()
        },
    )
    .unwrap();
    let f = w.function("f", "", 0, "");
    for t in 1..=5_000 {
        w.event(ThreadId(t), t, EventKind::Enter(f)).unwrap();
    }
    let bytes = w.finish(None).unwrap().into_inner();
    assert_survives(dir.path(), &dir.write("threads.bin", bytes));
}

/// Adversarial but valid shapes: thousands of stacks times thousands of
/// unnamed functions, and very deep nesting.
#[test]
fn wide_and_deep_traces_finish_in_time() {
    let dir = TempDir::new("shapes");
    let opts = mtrace_format::WriterOptions::default();
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), opts.clone()).unwrap();
    let mut tick = 0;
    let mut ev = |w: &mut TraceWriter<Cursor<Vec<u8>>>, tid: u64, kind| {
        tick += 1;
        w.event(ThreadId(tid), tick, kind).unwrap();
    };
    // 20,000 unnamed function ids, then 20,000 logical stacks entering one each.
    for id in 1..=20_000u32 {
        ev(&mut w, 1, EventKind::Enter(FunctionId(id)));
    }
    for s in 1..=20_000u64 {
        ev(&mut w, 2, EventKind::Switch(StackId(s)));
        ev(&mut w, 2, EventKind::Enter(FunctionId(s as u32)));
    }
    assert_survives(
        dir.path(),
        &dir.write("wide.bin", w.finish(None).unwrap().into_inner()),
    );
    // 100,000 nested frames, alternating two functions, then closed.
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), opts).unwrap();
    let (f, g) = (w.function("f", "", 0, ""), w.function("g", "", 0, ""));
    for i in 0..100_000u64 {
        w.event(
            ThreadId(1),
            i,
            EventKind::Enter(if i % 2 == 0 { f } else { g }),
        )
        .unwrap();
    }
    for i in (0..100_000u64).rev() {
        w.event(
            ThreadId(1),
            200_000 - i,
            EventKind::Exit(if i % 2 == 0 { f } else { g }),
        )
        .unwrap();
    }
    assert_survives(
        dir.path(),
        &dir.write("deep.bin", w.finish(None).unwrap().into_inner()),
    );
}

// ------------------------------------------------------------------ regressions

fn regression_inputs() -> Vec<PathBuf> {
    let dir = repo_file("crates/mtanalyze/tests/regressions");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("regressions dir")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_none_or(|x| x != "md"))
        .collect();
    files.sort();
    files
}

#[test]
fn fuzz_regressions_never_panic_in_the_library_or_the_binary() {
    let dir = TempDir::new("regressions");
    let files = regression_inputs();
    assert!(!files.is_empty());
    for path in files {
        let bytes = fs::read(&path).unwrap();
        let name = path.display().to_string();
        if let Ok(trace) = mtanalyze::from_bytes(&name, bytes) {
            for (clock, paths, collapse) in [
                (
                    Clock::Stack,
                    PathMode::PerStack,
                    Some(RecursionCollapse::All),
                ),
                (
                    Clock::Gil,
                    PathMode::Merged,
                    Some(RecursionCollapse::Direct),
                ),
                (Clock::Stack, PathMode::Merged, None),
                (Clock::Wall, PathMode::Off, None),
            ] {
                let options = AnalyzeOptions {
                    clock: Some(clock),
                    paths,
                    collapse_recursion: collapse,
                    ..Default::default()
                };
                if let Ok(report) = mtanalyze::analyze(&trace, &options) {
                    let mut out = Vec::new();
                    mtanalyze::render::table::header(&mut out, &report, Some(40)).unwrap();
                    mtanalyze::render::json::report(&mut out, &(&report).into()).unwrap();
                    mtanalyze::render::callgrind::callgrind(&mut out, &report).unwrap();
                    let _ = mtanalyze::render::folded::lines(&report, None);
                }
            }
            if let Ok(c) = mtanalyze::check(&trace) {
                mtanalyze::render::check::human(&mut Vec::new(), &c).unwrap();
            }
            // The streamed analysis, where it streams, gives the batch
            // report (the fuzz harness's differential, on every file here).
            // Also every warning's places (`--warnings all`), once.
            let cases = [
                (Clock::Stack, false),
                (Clock::Gil, false),
                (Clock::Wall, false),
                (Clock::Stack, true),
            ];
            for (clock, warning_details) in cases {
                let options = AnalyzeOptions {
                    clock: Some(clock),
                    warning_details,
                    ..Default::default()
                };
                if let (Ok(Some(streamed)), Ok(batch)) = (
                    mtanalyze::testing::analyze_streamed_with(&trace, &options, 1),
                    mtanalyze::testing::analyze_batched(&trace, &options),
                ) {
                    assert!(
                        streamed == batch,
                        "{name}, clock {clock}, details {warning_details}: streamed differs"
                    );
                }
            }
        }
        assert_survives(dir.path(), &path);
    }
}

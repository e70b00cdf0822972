//! `mtanalyze top` on a recording while it is written: the recorder runs
//! in this test's process (two threads calling `step` until told to
//! stop), the view in the real binary's, which maps the file read-only.
//! `--once --format json` shows counts that grow and never a damaged
//! chunk; the live view under tmux (a pty) shows the table, `s` changes
//! the sort and `q` ends it; a rotating series is followed to its newest
//! file. Three recordings one after the other, named as a rotation names
//! them, read as one series whose `--from/--to` are in the series' time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

static STOP: AtomicBool = AtomicBool::new(false);
static STEPS: AtomicU64 = AtomicU64::new(0);
/// One recording per process: the tests that record take turns.
static RECORDER: Mutex<()> = Mutex::new(());

#[mtrace::profile]
fn step() {
    STEPS.fetch_add(1, Ordering::Relaxed);
    leaf();
}

#[mtrace::profile]
fn leaf() -> u64 {
    (0..64u64).map(|i| i * i).sum()
}

/// A recording into `path` by two threads until [`Recorder::stop`].
struct Recorder {
    recording: Option<mtrace::Recording>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Recorder {
    fn start(path: &Path) -> Recorder {
        STOP.store(false, Ordering::Relaxed);
        STEPS.store(0, Ordering::Relaxed);
        // Small chunks: new ones are committed every few ms.
        let recording = mtrace::start(mtrace::Config::new(path).chunk_size(4096)).unwrap();
        let threads = (0..2)
            .map(|_| {
                std::thread::spawn(|| {
                    while !STOP.load(Ordering::Relaxed) {
                        step();
                        std::thread::sleep(Duration::from_micros(200));
                    }
                })
            })
            .collect();
        Recorder {
            recording: Some(recording),
            threads,
        }
    }

    /// Stops the threads and finishes the file; returns the steps taken.
    fn stop(mut self) -> u64 {
        STOP.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
        drop(self.recording.take());
        STEPS.load(Ordering::Relaxed)
    }
}

fn temp_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mtanalyze-top-{}-{label}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mtanalyze() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mtanalyze"))
}

/// `mtanalyze top --once --format json TRACE`, parsed.
fn once(trace: &Path) -> Value {
    let out = mtanalyze()
        .args(["top", "--once", "--format", "json"])
        .arg(trace)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "top --once failed: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Calls of the function `name` in a `top` JSON output (0 if absent).
fn calls(top: &Value, name: &str) -> u64 {
    top["report"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["function"] == name)
        .map(|f| f["ncalls"].as_u64().unwrap())
        .sum()
}

/// No chunk damaged, in the view's fields and in the report's warnings.
fn assert_undamaged(top: &Value) {
    assert_eq!(top["top"]["chunks_damaged"], 0, "{}", top["top"]);
    assert_eq!(top["report"]["trace"]["chunks_damaged"], 0);
    for w in top["report"]["warnings"].as_array().into_iter().flatten() {
        let kind = w["kind"].as_str().unwrap_or_default();
        assert!(!kind.contains("damage"), "a live file read as damaged: {w}");
    }
}

/// Polls `f` until it gives `Some`, for at most `secs` seconds.
fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn once_on_a_file_being_written_shows_growing_counts_and_no_damage() {
    let _turn = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("once");
    let trace = dir.join("live.bin");
    let recorder = Recorder::start(&trace);
    let first = wait_for(20, "the first committed steps", || {
        let top = once(&trace);
        (calls(&top, "step") > 0).then_some(top)
    });
    assert_undamaged(&first);
    assert_eq!(first["top"]["finished"], false);
    let mut last = calls(&first, "step");
    // Several refreshes while it runs: each at least the one before, and
    // the count grows.
    let grown = wait_for(20, "the step count to grow", || {
        let top = once(&trace);
        assert_undamaged(&top);
        let n = calls(&top, "step");
        assert!(n >= last, "calls went down: {n} after {last}");
        let grew = n > last;
        last = n;
        grew.then_some(n)
    });
    assert!(grown > calls(&first, "step"));
    let steps = recorder.stop();
    // Finished: every step the threads took is counted.
    let done = once(&trace);
    assert_undamaged(&done);
    assert_eq!(done["top"]["finished"], true);
    assert_eq!(calls(&done, "step"), steps);
    assert_eq!(calls(&done, "leaf"), steps);
    assert!(done["top"]["events_per_second"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_not_yet_a_trace_is_a_one_line_error_not_a_panic() {
    let dir = temp_dir("empty");
    let trace = dir.join("new.bin");
    // Created but not written yet, and its header half written.
    for bytes in [&b""[..], &b"MTRACE\0\0"[..]] {
        std::fs::write(&trace, bytes).unwrap();
        let out = mtanalyze()
            .args(["top", "--once"])
            .arg(&trace)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("mtanalyze: "), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_series_is_followed_to_its_newest_file() {
    let dir = temp_dir("series");
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../sample-traces/workload.bin"
    );
    for name in ["run.bin", "run.1.bin", "run.2.bin", "run.pid9.3.bin"] {
        std::fs::copy(sample, dir.join(name)).unwrap();
    }
    let top = once(&dir.join("run.bin"));
    assert!(
        top["top"]["file"].as_str().unwrap().ends_with("/run.2.bin"),
        "{}",
        top["top"]
    );
    assert_eq!(top["top"]["files"].as_array().unwrap().len(), 3);
    // MTRACE_KEEP deleted the first path: the series is still followed.
    std::fs::remove_file(dir.join("run.bin")).unwrap();
    let top = once(&dir.join("run.bin"));
    assert!(top["top"]["file"].as_str().unwrap().ends_with("/run.2.bin"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// tmux on a socket of this test's own (never the user's server).
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap()
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    /// Waits until the screen holds `needle`; returns it.
    fn wait_for_screen(&self, needle: &str) -> String {
        let mut last = String::new();
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end {
            last = self.screen();
            if last.contains(needle) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the screen never showed `{needle}`:\n{last}");
    }

    fn alive(&self) -> bool {
        self.run(&["has-session", "-t", "top"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

#[test]
fn the_live_view_under_tmux_shows_the_table_sorts_and_quits() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("SKIPPED: tmux is not installed (apt-get install tmux)");
        return;
    }
    let _turn = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("tmux");
    let trace = dir.join("live.bin");
    let tmux = Tmux {
        socket: format!("mtanalyze-top-test-{}", std::process::id()),
    };
    let command = format!(
        "{} top {}; echo exited $? > {}",
        env!("CARGO_BIN_EXE_mtanalyze"),
        trace.display(),
        dir.join("status").display()
    );
    // The view starts before the recording: it waits for the file.
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "120",
        "-y",
        "30",
        &command,
    ]);
    assert!(started.status.success(), "{:?}", started);
    tmux.wait_for_screen("waiting for");
    let recorder = Recorder::start(&trace);
    let screen = tmux.wait_for_screen("function (file:line)");
    assert!(screen.contains("sort: tottime"), "{screen}");
    assert!(screen.contains("mtanalyze top: "), "{screen}");
    let screen = tmux.wait_for_screen("step (");
    assert!(screen.contains("events/s"), "{screen}");
    tmux.run(&["send-keys", "-t", "top", "s"]);
    let screen = tmux.wait_for_screen("sort: cumtime");
    assert!(!screen.contains("sort: tottime"), "{screen}");
    tmux.run(&["send-keys", "-t", "top", "q"]);
    let status = dir.join("status");
    wait_for(10, "the view to end on q", || {
        std::fs::read_to_string(&status)
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "exited 0");
    assert!(!tmux.alive() || !tmux.screen().contains("function (file:line)"));
    // Ctrl-C ends it the same way (the view reads it as a key).
    std::fs::remove_file(&status).unwrap();
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "100",
        "-y",
        "20",
        &command,
    ]);
    assert!(started.status.success(), "{:?}", started);
    tmux.wait_for_screen("function (file:line)");
    tmux.run(&["send-keys", "-t", "top", "C-c"]);
    wait_for(10, "the view to end on Ctrl-C", || {
        std::fs::read_to_string(&status)
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "exited 0");
    recorder.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn once_with_stacks_is_the_report_s_stack_table() {
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../sample-traces/workload.bin"
    );
    let run = |args: &[&str]| {
        let out = mtanalyze().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let top = run(&[
        "top", "--once", "--stacks", "--limit", "4", "--sort", "ncalls", sample,
    ]);
    let report = run(&["--stacks", "--limit", "4", "--sort", "ncalls", sample]);
    // The rows from the column header on are the report's, line for line.
    let table = |text: &str| {
        let at = text.find("id ").expect("a stack table");
        text[at..].to_owned()
    };
    assert_eq!(table(&top), table(&report));
    assert!(top.contains("showing 4 of "), "{top}");
    assert!(top.contains("sort: ncalls"), "{top}");
}

/// The JSON report of `args` (the default command).
fn report(args: &[&std::ffi::OsStr]) -> Value {
    let out = mtanalyze()
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_recorded_series_reads_as_one_in_its_own_time() {
    let _turn = RECORDER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("recorded-series");
    let files = ["run.bin", "run.1.bin", "run.2.bin"].map(|n| dir.join(n));
    // Three recordings one after the other, as a rotation writes them.
    let mut steps = Vec::new();
    for file in &files {
        let recorder = Recorder::start(file);
        wait_for(20, "some steps", || {
            (STEPS.load(Ordering::Relaxed) >= 100).then_some(())
        });
        steps.push(recorder.stop());
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = |f: &Path| {
        report(&[f.as_os_str(), "--no-children".as_ref()])["trace"]["start_unix_ns"]
            .as_u64()
            .unwrap()
    };
    let offsets: Vec<u64> = files.iter().map(|f| start(f) - start(&files[0])).collect();
    let first = files[0].as_os_str();
    let step_calls = |r: &Value| {
        r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["function"] == "step")
            .map(|f| f["ncalls"].as_u64().unwrap())
            .sum::<u64>()
    };
    let whole = report(&[first]);
    assert_eq!(step_calls(&whole), steps.iter().sum::<u64>());
    assert!(whole["trace"]["source"]
        .as_str()
        .unwrap()
        .starts_with("series of 3: "));
    // From the third file's start: only its steps.
    let from = format!("{}ns", offsets[2]);
    let late = report(&[first, "--from".as_ref(), from.as_ref()]);
    assert_eq!(step_calls(&late), steps[2], "{}", late["trace"]);
    // Up to the second file's start: only the first's, which alone is read.
    let to = format!("{}ns", offsets[1]);
    let early = report(&[first, "--to".as_ref(), to.as_ref()]);
    assert_eq!(step_calls(&early), steps[0]);
    assert_eq!(early["trace"]["traces"], Value::Null, "{}", early["trace"]);
    let _ = std::fs::remove_dir_all(&dir);
}

//! Recording on demand: a server started armed but idle (the
//! `armed_server` example) is switched on and off from outside with
//! `kill -USR2`, and the trace holds exactly the work done between the
//! two signals.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use mtanalyze::{AnalyzeOptions, TimeBound};

#[allow(dead_code)] // its `main`
#[path = "../examples/armed_server.rs"]
mod armed_server;

/// Set in the child process this test binary starts as the server: the
/// trace path.
const SERVE_VAR: &str = "MTRACE_TEST_ARMED_SERVER";

/// Not a test of its own: in a child process of this binary (started by
/// [`start_server`], with [`SERVE_VAR`] set), the `armed_server` example.
/// It says `ready` first, after libtest's own lines. Passes at once in a
/// normal run.
#[test]
fn armed_server_in_a_child_process() {
    let Some(path) = std::env::var_os(SERVE_VAR) else {
        return;
    };
    println!("ready");
    armed_server::serve_commands(&path.to_string_lossy());
    // Nothing of libtest's after the server's last line.
    std::process::exit(0);
}

/// Runs the `armed_server` example in a child process of this test
/// binary (so the test needs nothing built beside it), recording into `path`.
fn start_server(path: &std::path::Path) -> Server {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "armed_server_in_a_child_process",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(SERVE_VAR, path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("server");
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        let n = stdout.read_line(&mut line).expect("server output");
        assert!(n > 0, "the server ended before it was ready");
        if line.trim_end().ends_with("ready") {
            break;
        }
    }
    Server {
        child,
        stdin,
        stdout,
    }
}

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("send");
        self.stdin.flush().expect("send");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("answer");
        line.trim().to_owned()
    }

    fn signal(&self) {
        // SAFETY: signalling our own child.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as i32, libc::SIGUSR2) },
            0
        );
    }

    /// Waits until the server says it is (not) paused: the signal is acted
    /// on by the recorder's thread, a moment after `kill` returns. A
    /// liveness bound, not a timing.
    fn wait_paused(&mut self, paused: bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let want = format!("paused {paused}");
        while self.ask("paused?") != want {
            assert!(Instant::now() < deadline, "the server never became {want}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn two_signals_record_exactly_the_work_between_them() {
    let path = std::env::temp_dir().join(format!("mtrace-on-demand-{}.mtrace", std::process::id()));
    let mut server = start_server(&path);

    server.wait_paused(true);
    assert_eq!(server.ask("work 500"), "done 500", "armed: not recorded");
    server.signal();
    server.wait_paused(false);
    assert_eq!(server.ask("work 700"), "done 700");
    assert_eq!(server.ask("work 77"), "done 77");
    server.signal();
    server.wait_paused(true);
    assert_eq!(
        server.ask("work 300"),
        "done 300",
        "paused again: not recorded"
    );
    writeln!(server.stdin, "quit").unwrap();
    let mut last = String::new();
    server.stdout.read_line(&mut last).unwrap();
    assert!(server.child.wait().unwrap().success());
    let counts: Vec<u64> = last
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(counts, vec![1577, 777], "the server's own count: {last}");

    let loaded = mtanalyze::load(&path).expect("load");
    let whole = mtanalyze::analyze(&loaded, &AnalyzeOptions::default()).expect("analyze");
    let calls = |report: &mtanalyze::Report, name: &str| {
        report
            .functions
            .iter()
            .find(|f| f.function == name)
            .map_or(0, |f| f.ncalls)
    };
    assert_eq!(calls(&whole, "handle"), 777, "{:?}", whole.functions);
    assert_eq!(calls(&whole, "checksum"), 2 * 777);
    // No repairs, nothing lost: the only note is the frames each worker
    // had open at the resume (`serve`), opened from its chunk's snapshot.
    let kinds: Vec<(&str, u64)> = whole
        .warnings
        .iter()
        .map(|w| (w.kind.as_str(), w.count))
        .collect();
    assert_eq!(kinds, [("frames_from_snapshot", 3)], "{:?}", whole.warnings);
    let serve = whole
        .functions
        .iter()
        .find(|f| f.function == "serve")
        .expect("serve");
    assert_eq!(
        serve.ncalls, 3,
        "one open frame per worker, from the resume"
    );
    let names: Vec<&str> = whole.marks.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["mtrace:resume:1", "mtrace:pause:1"]);

    // The stretch between the marks holds the same.
    let stretch = AnalyzeOptions {
        from: Some(TimeBound::Mark("mtrace:resume:1".into())),
        to: Some(TimeBound::Mark("mtrace:pause:1".into())),
        ..AnalyzeOptions::default()
    };
    let window = mtanalyze::analyze(&loaded, &stretch).expect("analyze the stretch");
    assert_eq!(calls(&window, "handle"), 777);
    assert_eq!(calls(&window, "checksum"), 2 * 777);
    let _ = std::fs::remove_file(&path);
}

/// In-process: `resume` and `pause` say whether they changed anything,
/// a frame opened while armed is in the trace from the resume on, and
/// calls made while paused are not counted, though their frames were
/// followed (the exits after the resume match their enters).
#[test]
fn pause_and_resume_in_process_keep_the_frames_open_across_them() {
    let path = std::env::temp_dir().join(format!(
        "mtrace-on-demand-api-{}.mtrace",
        std::process::id()
    ));
    let recording = mtrace::start(mtrace::Config::new(&path).armed(true)).expect("trace file");
    assert!(recording.is_paused() && mtrace::is_paused() && mtrace::is_recording());
    assert!(!recording.pause(), "armed is paused already");
    let outer = mtrace::scope!("outer");
    for _ in 0..5 {
        let _unseen = mtrace::scope!("inner");
    }
    assert!(recording.resume());
    assert!(!recording.resume(), "recording already");
    for _ in 0..7 {
        let _seen = mtrace::scope!("inner");
    }
    // A frame opened in the stretch and left while paused, and one opened
    // while paused and left after the next resume.
    let middle = mtrace::scope!("middle");
    assert!(mtrace::pause());
    drop(middle);
    let late = mtrace::scope!("late");
    for _ in 0..3 {
        let _unseen = mtrace::scope!("inner");
    }
    assert!(mtrace::resume());
    drop(late);
    for _ in 0..2 {
        let _seen = mtrace::scope!("inner");
    }
    drop(outer);
    assert!(recording.pause());
    recording.finish().expect("finished");

    let loaded = mtanalyze::load(&path).expect("load");
    let report = mtanalyze::analyze(&loaded, &AnalyzeOptions::default()).expect("analyze");
    // Each `scope!` is a call site of its own: sum the sites of a name.
    let calls = |name: &str| -> u64 {
        report
            .functions
            .iter()
            .filter(|f| f.function == name)
            .map(|f| f.ncalls)
            .sum()
    };
    assert_eq!(calls("inner"), 9, "7 + 2 recorded, 8 paused");
    assert_eq!(
        calls("outer"),
        1,
        "opened at the first resume, closed in the stretch"
    );
    assert_eq!(
        calls("late"),
        1,
        "opened while paused: from the second resume"
    );
    assert_eq!(calls("middle"), 1);
    let names: Vec<&str> = report.marks.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mtrace:resume:1",
            "mtrace:pause:1",
            "mtrace:resume:2",
            "mtrace:pause:2"
        ]
    );
    let kinds: Vec<&str> = report.warnings.iter().map(|w| w.kind.as_str()).collect();
    assert!(
        kinds.iter().all(|k| *k == "frames_from_snapshot"),
        "no repairs: {:?}",
        report.warnings
    );
    let _ = std::fs::remove_file(&path);
}

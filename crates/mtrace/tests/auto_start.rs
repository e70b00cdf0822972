//! `MTRACE_OUT` starts a recording at the first event and finishes it when
//! the process exits; a bad variable leaves the program running unprofiled.
//! Each case runs `auto_child` in a child process (this test binary again).

mod common;

use std::process::Command;

use common::{decode, steps, Step, TempTrace};

const CHILD_ENV: &str = "MTRACE_TEST_AUTO_CHILD";

/// Not a test on its own: the body of the child process.
#[test]
fn auto_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    for _ in 0..10 {
        let _frame = mtrace::scope!("auto-frame");
    }
    println!("recording: {}", mtrace::is_recording());
}

fn run_child(vars: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "auto_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env_remove("MTRACE_OUT")
        .env_remove("MTRACE_CAPACITY")
        .env_remove("MTRACE_MODE");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mtrace_out_records_the_whole_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let trace = TempTrace::new("auto");
    let path = trace.path().to_str().unwrap();
    let (ok, stdout, stderr) = run_child(&[
        ("MTRACE_OUT", path),
        ("MTRACE_CAPACITY", "1M"),
        ("MTRACE_MODE", "ring"),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("recording: true"), "{stdout}");
    let d = decode(trace.path());
    assert!(d.header.finished(), "finished at exit");
    assert!(d.header.ring());
    assert_eq!(
        d.header.chunk_count,
        (1 << 20) / mtrace_format::layout::DEFAULT_CHUNK_SIZE as u64
    );
    let got = steps(&d, &d.events(d.tid("auto_child")));
    // Start, ten frames, and the test thread's exit.
    assert_eq!(got.len(), 22, "{got:?}");
    assert_eq!(got[1], Step::Enter("auto-frame".into()));
    assert_eq!(got[21], Step::End);
}

#[test]
fn bad_environment_leaves_the_program_unprofiled() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let trace = TempTrace::new("auto-bad");
    let path = trace.path().to_str().unwrap();
    let (ok, stdout, stderr) = run_child(&[("MTRACE_OUT", path), ("MTRACE_MODE", "sometimes")]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("recording: false"), "{stdout}");
    assert!(
        stderr
            .contains("mtrace: not recording: MTRACE_MODE=`sometimes`: expected `ring` or `stop`"),
        "{stderr}"
    );
    assert!(!trace.path().exists());

    let (ok, stdout, stderr) = run_child(&[("MTRACE_OUT", "/proc/nonexistent/x.mtrace")]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("recording: false"), "{stdout}");
    assert!(
        stderr.contains("mtrace: not recording: cannot create trace file"),
        "{stderr}"
    );
}

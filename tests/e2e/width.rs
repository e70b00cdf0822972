//! Tables that fit the terminal (issue 17): with a width, no line of any
//! table is wider, function names stay whole and keep their file name and
//! line, spare columns are hidden and say so; without one (a pipe or a
//! file), full names as always.

use crate::util::{mtanalyze, repo_file, Run};

const WORKLOAD: &str = "sample-traces/workload.bin";
const RING: &str = "sample-traces/workload-ring.bin";

fn run(args: &[&str]) -> Run {
    let args: Vec<std::ffi::OsString> = args
        .iter()
        .map(|a| {
            if a.starts_with("sample-traces/") {
                repo_file(a).into_os_string()
            } else {
                a.into()
            }
        })
        .collect();
    mtanalyze(args).success()
}

#[track_caller]
fn assert_fits(out: &str, width: usize) {
    for line in out.lines() {
        assert!(
            line.chars().count() <= width,
            "{} columns > {width}: {line:?}\n{out}",
            line.chars().count()
        );
    }
}

#[test]
fn every_table_fits_the_width_it_is_given() {
    let cases: [&[&str]; 7] = [
        &[WORKLOAD],
        &[WORKLOAD, "--callers", "fib"],
        &[WORKLOAD, "--callees", "fiber step"],
        &[WORKLOAD, "--stacks"],
        &[WORKLOAD, "--stacks", "--group"],
        &["diff", WORKLOAD, RING],
        &["diff", WORKLOAD, RING, "--callers", "parse_term"],
    ];
    for width in [80, 60, 120] {
        for args in cases {
            let mut args = args.to_vec();
            let w = width.to_string();
            args.extend(["--width", &w]);
            let r = run(&args);
            assert_fits(&r.stdout, width);
        }
    }
}

#[test]
fn names_stay_whole_with_their_file_and_line_and_hidden_columns_are_named() {
    let r = run(&[WORKLOAD, "--width", "80"]);
    let out = &r.stdout;
    // The README's table, which wrapped at 105-111 columns, in 80.
    assert!(
        out.contains("wait for input (") && out.contains("workload.rs:198)"),
        "{out}"
    );
    assert!(
        out.contains("critical section (") && out.contains("workload.rs:172)"),
        "{out}"
    );
    assert!(
        out.contains("hidden to fit 80 columns: tottime percall, cumtime percall"),
        "{out}"
    );
    let r = run(&[WORKLOAD, "--width", "60"]);
    assert!(r.stdout.contains("wait for input ("), "{}", r.stdout);
    assert_fits(&r.stdout, 60);
    // The header's items wrap between items, never inside one.
    assert!(
        r.stdout.lines().any(|l| l.starts_with("clock: stack")),
        "{}",
        r.stdout
    );
}

#[test]
fn without_a_width_a_pipe_gets_full_names_whatever_columns_says() {
    let full = "wait for input (crates/mtrace/examples/workload.rs:198)";
    let r = mtanalyze_with_columns(&[WORKLOAD], "40");
    assert!(r.stdout.contains(full), "{}", r.stdout);
    assert!(!r.stdout.contains("hidden to fit"));
    // --width 0 is no limit, as is a pipe.
    let r = run(&[WORKLOAD, "--width", "0"]);
    assert!(r.stdout.contains(full));
    let r = run(&["diff", WORKLOAD, RING, "--width", "0"]);
    assert!(r.stdout.contains("ncalls (base -> new)"));
}

fn mtanalyze_with_columns(args: &[&str], columns: &str) -> Run {
    let out = crate::util::command()
        .args(args.iter().map(|a| repo_file(a)))
        .env("COLUMNS", columns)
        .output()
        .expect("mtanalyze runs");
    assert!(out.status.success());
    Run {
        args: args.join(" "),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// On a terminal, the table fits `COLUMNS` (run under `script`, which gives
/// the command a pseudo-terminal; skipped, saying so, without it).
#[test]
fn on_a_terminal_the_table_fits_columns() {
    let script = std::process::Command::new("script")
        .arg("--version")
        .output();
    if script.is_err() {
        eprintln!("skipped: `script` (util-linux) is not installed to run mtanalyze on a terminal");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_mtanalyze");
    let trace = repo_file(WORKLOAD);
    let command = format!("{bin} {} --limit 5", trace.display());
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("COLUMNS", "72")
        .output()
        .expect("script runs");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(out.status.success(), "{text}");
    assert!(text.contains("wait for input ("), "{text}");
    assert!(text.contains("hidden to fit 72 columns"), "{text}");
    assert_fits(&text, 72);
}

//! `mtanalyze trace | head`: a reader that goes away early must not make
//! the command print an error or panic.

use std::io::Read;
use std::process::Stdio;

use crate::util::{command, many_functions, TempDir};

pub(crate) fn read_a_little_then_close(args: &[&std::ffi::OsStr]) {
    let mut child = command()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mtanalyze");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 64];
    stdout.read_exact(&mut first).expect("some output");
    drop(stdout);
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.is_empty(),
        "{args:?}: stderr after a closed pipe:\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{args:?}: {:?}", out.status);
}

#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    let dir = TempDir::new("pipe");
    // About 40 000 rows: far more than a pipe buffer holds.
    let trace = dir.write("many.jsonl", many_functions(40_000));
    read_a_little_then_close(&[trace.as_os_str()]);
    read_a_little_then_close(&[trace.as_os_str(), "--format".as_ref(), "json".as_ref()]);
    read_a_little_then_close(&[trace.as_os_str(), "--callees".as_ref(), ".".as_ref()]);
}

//! `--debug-plan` (issue 51): how each trace is analyzed and why, on
//! stderr before the report, for each kind of input; the report itself is
//! the same as without it.

use crate::util::{converted_vector, mtanalyze, repo_file, vector, TempDir};

/// The plan lines `mtanalyze --debug-plan ARGS` printed, and its stdout.
fn plan(args: &[&str]) -> (String, String) {
    let mut all = vec!["--debug-plan"];
    all.extend(args);
    let run = mtanalyze(&all).success();
    let without = mtanalyze(args).success();
    assert_eq!(
        run.stdout, without.stdout,
        "--debug-plan changes only stderr"
    );
    (run.stderr, run.stdout)
}

/// A JSON lines trace whose thread runs `n` tasks, each one call.
fn tasks(dir: &TempDir, n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        let ts = 10 * i;
        text.push_str(&format!(
            "{{\"ts\": {ts}, \"tid\": 1, \"ev\": \"switch\", \"stack\": \"task-{i}\"}}\n\
             {{\"ts\": {}, \"tid\": 1, \"ev\": \"enter\", \"fn\": \"handle\"}}\n\
             {{\"ts\": {}, \"tid\": 1, \"ev\": \"exit\", \"fn\": \"handle\"}}\n\
             {{\"ts\": {}, \"tid\": 1, \"ev\": \"switch\", \"stack\": null}}\n",
            ts + 1,
            ts + 5,
            ts + 6
        ));
    }
    dir.write("tasks.jsonl", text).display().to_string()
}

#[test]
fn a_few_long_lived_stacks_are_streamed_in_long_steps() {
    let trace = repo_file("sample-traces/workload.bin");
    let (plan, _) = plan(&[trace.to_str().unwrap()]);
    assert!(
        plan.starts_with(&format!("plan for {}\n", trace.display())),
        "{plan}"
    );
    assert!(
        plan.contains("  engine: stream: cut and replay in steps of about 4194304 events,"),
        "{plan}"
    );
    assert!(
        plan.contains("events: 214178 | named stacks: 151 (short steps from 1024) | threads: 7"),
        "{plan}"
    );
    assert!(
        plan.contains("own stacks replayed by their threads' passes where the clock allows (a running sum a thread fits): yes"),
        "{plan}"
    );
    // The compact twin is planned alike.
    let v4 = repo_file("sample-traces/workload-v4.bin");
    let (twin, _) = self::plan(&[v4.to_str().unwrap()]);
    assert_eq!(
        twin.lines().skip(1).collect::<Vec<_>>(),
        plan.lines().skip(1).collect::<Vec<_>>()
    );
}

#[test]
fn many_stacks_are_streamed_in_short_steps_whatever_the_options() {
    let dir = TempDir::new("debug-plan");
    let trace = tasks(&dir, 1100);
    let (plan, _) = plan(&[&trace]);
    assert!(
        plan.contains(
            "  engine: stream: cut and replay in steps of about 65536 events, or 64 for each \
             open frame the step before set aside if that is more;"
        ),
        "{plan}"
    );
    assert!(
        plan.contains("named stacks: 1100 (short steps from 1024) | threads: 1"),
        "{plan}"
    );
    // Call paths, merged or per stack, stream too.
    for args in [
        &["--format", "folded"][..],
        &["--format", "folded", "--per-thread"],
    ] {
        let mut all = vec![trace.as_str()];
        all.extend(args);
        let (plan, _) = self::plan(&all);
        assert!(plan.contains("  engine: stream: "), "{args:?}: {plan}");
    }
    // So does a selection of stacks, by stack or by thread.
    for args in [["--stack", "task-7"], ["--thread", "1"]] {
        let mut all = vec![trace.as_str()];
        all.extend(args);
        let (plan, _) = self::plan(&all);
        assert!(plan.contains("  engine: stream: "), "{args:?}: {plan}");
    }
}

#[test]
fn lost_names_do_not_send_a_trace_the_batch_way_and_several_traces_say_how_they_are_summed() {
    let dir = TempDir::new("debug-plan-cut");
    // A chunk the file's end cuts is no reason for the batch, and nor are
    // names lost with the metadata (a converted trace keeps it after its
    // chunks, which a cut takes with it): either engine shows an unnamed
    // function as `fn#<id>`.
    let whole = std::fs::read(repo_file("sample-traces/workload.bin")).unwrap();
    let cut = dir.write("cut.bin", &whole[..whole.len() * 2 / 3]);
    let (_, bytes) = converted_vector(&dir, "fibers.jsonl");
    let fibers_cut = dir.write("fibers-cut.bin", &bytes[..bytes.len() * 2 / 3]);
    for trace in [cut, fibers_cut] {
        let (plan, _) = self::plan(&[trace.to_str().unwrap()]);
        assert!(
            plan.contains(
                "own stacks replayed by their threads' passes where the clock allows (a running sum a thread fits): yes\n"
            ),
            "{plan}"
        );
        assert!(!plan.contains("function name"), "{plan}");
        assert!(plan.contains("  engine: stream: "), "{plan}");
    }
    let a = vector("fibers.jsonl");
    let b = vector("recursion-a.jsonl");
    let (plan, _) = self::plan(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    let lines: Vec<&str> = plan.lines().collect();
    assert!(
        lines[0].starts_with("2 traces: analyzed in parallel and summed;"),
        "{plan}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("plan for ")).count(),
        2,
        "{plan}"
    );
}

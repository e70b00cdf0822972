//! `threads::on_the_calling_thread`: the analysis of every trace gives the
//! same report on the calling thread alone as on rayon's pool (byte for
//! byte as JSON), for each clock, with call paths, and summed over several
//! traces; and it starts no thread.

use std::path::{Path, PathBuf};

use mtanalyze::threads::on_the_calling_thread;
use mtanalyze::{analyze, analyze_many, report::Clock, AnalyzeOptions, ManyTraces, PathMode};
use mtanalyze_testkit::worked_examples::{ENDS, FIBER_HANDOFF, GIL_TURNS, RECURSION, REPAIRS};

fn sample_traces() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample-traces");
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("sample-traces")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    traces.sort();
    assert!(!traces.is_empty());
    traces
}

fn options() -> Vec<AnalyzeOptions> {
    let mut all = Vec::new();
    for clock in [
        None,
        Some(Clock::Stack),
        Some(Clock::Gil),
        Some(Clock::Wall),
    ] {
        for paths in [PathMode::Off, PathMode::Merged, PathMode::PerStack] {
            all.push(AnalyzeOptions {
                clock,
                paths,
                ..AnalyzeOptions::default()
            });
        }
    }
    all
}

fn tasks() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Every report of `loaded` and the sum of the sample traces, as JSON.
fn all_reports(loaded: &[(String, mtanalyze::LoadedTrace)], traces: &[PathBuf]) -> Vec<String> {
    let json = |r: Result<mtanalyze::Report, String>| match r {
        Ok(report) => serde_json::to_string(&report).expect("json"),
        Err(e) => format!("error: {e}"),
    };
    let mut out = Vec::new();
    for (_, trace) in loaded {
        for opts in options() {
            out.push(json(analyze(trace, &opts).map_err(|e| e.to_string())));
        }
    }
    let opts = AnalyzeOptions::default();
    let merged = analyze_many(traces, &opts, ManyTraces::Merge, |_, _, r| {
        r.map(|_| ()).map_err(|e| e.to_string())
    });
    out.push(json(
        merged.and_then(|m| m.finish().ok_or_else(|| "no report".to_owned())),
    ));
    out
}

// One test in this binary: no other test's threads start while it counts.
#[test]
fn on_the_calling_thread_the_reports_are_the_same_and_no_thread_starts() {
    let traces = sample_traces();
    let mut loaded: Vec<(String, mtanalyze::LoadedTrace)> = traces
        .iter()
        .map(|p| (p.display().to_string(), mtanalyze::load(p).expect("load")))
        .collect();
    for (name, text) in [
        ("fiber handoff", FIBER_HANDOFF),
        ("gil turns", GIL_TURNS),
        ("recursion", RECURSION),
        ("ends", ENDS),
        ("repairs", REPAIRS),
    ] {
        let trace = mtanalyze::from_bytes(name, text.as_bytes().to_vec()).expect("jsonl");
        loaded.push((name.to_owned(), trace));
    }
    // First, before rayon's pool exists: counted while the analyses run.
    let before = tasks();
    let (here, during) = on_the_calling_thread(|| (all_reports(&loaded, &traces), tasks()));
    assert_eq!(
        during, before,
        "a thread started on the calling thread's analysis"
    );
    let pooled = all_reports(&loaded, &traces);
    assert_eq!(here.len(), pooled.len());
    for (i, (h, p)) in here.iter().zip(&pooled).enumerate() {
        assert_eq!(h, p, "report {i} differs");
    }
}

//! `mtanalyze diff` at the library level: matching, deltas, normalizing.

use std::io::Cursor;

use mtanalyze::from_bytes;
use mtanalyze::{analyze, report::Clock, AnalyzeOptions, PathMode, Report};
use mtanalyze::{
    diff,
    diff::{DiffOptions, Match},
};
use mtrace_format::{EventKind, ThreadId, TraceWriter, WriterOptions};
use proptest::prelude::*;

/// One call of each (name, file, line, self ns) under a root `main`, on one thread.
fn trace(calls: &[(&str, &str, u32, u64)]) -> Report {
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), WriterOptions::default()).unwrap();
    let main = w.function("main", "main.rs", 1, "");
    let t = ThreadId(1);
    let mut now = 0;
    w.event(t, now, EventKind::Enter(main)).unwrap();
    for &(name, file, line, ns) in calls {
        let f = w.function(name, file, line, "");
        w.event(t, now, EventKind::Enter(f)).unwrap();
        now += ns;
        w.event(t, now, EventKind::Exit(f)).unwrap();
    }
    now += 100;
    w.event(t, now, EventKind::Exit(main)).unwrap();
    let bytes = w.finish(None).unwrap().into_inner();
    let trace = from_bytes("mem", bytes).unwrap();
    let opts = AnalyzeOptions {
        clock: Some(Clock::Stack),
        paths: PathMode::Merged,
        ..Default::default()
    };
    analyze(&trace, &opts).unwrap()
}

#[test]
fn a_trace_against_itself_changes_nothing() {
    let r = trace(&[
        ("parse", "p.rs", 10, 500),
        ("eval", "e.rs", 5, 300),
        ("parse", "p.rs", 10, 200),
    ]);
    let dr = diff(&r, &r, DiffOptions::default());
    assert_eq!(dr.functions.len(), r.functions.len());
    assert!(dr.functions.iter().all(|f| f.matched == Match::Site));
    for f in &dr.functions {
        assert_eq!(f.delta, Default::default(), "{}", f.function);
    }
    for e in &dr.edges {
        assert_eq!(e.delta, Default::default(), "{} -> {}", e.caller, e.callee);
    }
    assert!(!dr.paths.is_empty());
    assert!(dr.paths.iter().all(|p| p.base_ns == p.new_ns));
}

#[test]
fn known_changes_are_reported_exactly() {
    let base = trace(&[
        ("doubles", "a.rs", 1, 1000),
        ("same", "a.rs", 2, 400),
        ("gone", "a.rs", 3, 250),
        ("moves", "b.rs", 10, 700),
    ]);
    let new = trace(&[
        ("doubles", "a.rs", 1, 2000),
        ("same", "a.rs", 2, 400),
        ("fresh", "a.rs", 4, 90),
        ("moves", "b.rs", 42, 700),
    ]);
    let dr = diff(&base, &new, DiffOptions::default());
    let by_name = |n: &str| dr.functions.iter().find(|f| f.function == n).unwrap();
    assert_eq!(by_name("doubles").delta.tottime_ns, 1000);
    assert_eq!(by_name("doubles").matched, Match::Site);
    assert_eq!(by_name("same").delta, Default::default());
    let gone = by_name("gone");
    assert_eq!(
        (
            gone.matched,
            gone.new.is_none(),
            gone.delta.tottime_ns,
            gone.delta.ncalls
        ),
        (Match::Gone, true, -250, -1)
    );
    let fresh = by_name("fresh");
    assert_eq!(
        (fresh.matched, fresh.base.is_none(), fresh.delta.tottime_ns),
        (Match::New, true, 90)
    );
    let moved = by_name("moves");
    assert_eq!(
        (moved.matched, moved.line, moved.delta),
        (Match::Name, 42, Default::default())
    );
    assert_eq!(dr.matched_by_name, 1);
    // main's own time is unchanged (100 ns at the end); its cumulative time
    // moves by its children's changes.
    assert_eq!(by_name("main").delta.tottime_ns, 0);
    assert_eq!(by_name("main").delta.cumtime_ns, 1000 - 250 + 90);
    let changed: Vec<&str> = dr
        .functions
        .iter()
        .filter(|f| f.delta.tottime_ns != 0 || f.delta.ncalls != 0)
        .map(|f| f.function.as_str())
        .collect();
    assert_eq!(
        changed,
        vec!["doubles", "gone", "fresh"],
        "sorted by |change of tottime|"
    );
    // Edges follow the function matching: main -> moves is one edge.
    let e = dr.edges.iter().find(|e| e.callee == "moves").unwrap();
    assert!(e.base.is_some() && e.new.is_some());
    assert_eq!(e.delta, Default::default());
}

#[test]
fn normalizing_scales_the_base_to_the_new_total() {
    let base = trace(&[("work", "w.rs", 1, 1000)]);
    let new = trace(&[("work", "w.rs", 1, 2200)]);
    let plain = diff(&base, &new, DiffOptions::default());
    assert_eq!(plain.base_scale, 1.0);
    let norm = diff(
        &base,
        &new,
        DiffOptions {
            normalize: true,
            ..DiffOptions::default()
        },
    );
    assert!(norm.normalized);
    assert_eq!(norm.base_total_ns, norm.new_total_ns);
    // Both traces are 100 ns of main plus work: the shares stay, so work barely moves.
    let work = norm
        .functions
        .iter()
        .find(|f| f.function == "work")
        .unwrap();
    assert!(
        work.delta.tottime_ns.unsigned_abs() < plain.functions[0].delta.tottime_ns.unsigned_abs()
    );
    let total: i64 = norm.functions.iter().map(|f| f.delta.tottime_ns).sum();
    assert!(
        total.abs() <= norm.functions.len() as i64,
        "rounding only: {total}"
    );
}

fn calls() -> impl Strategy<Value = Vec<(u8, u8, u64)>> {
    proptest::collection::vec((0u8..6, 0u8..3, 1u64..5000), 0..30)
}

fn build(spec: &[(u8, u8, u64)]) -> Report {
    let names = ["a", "b", "c", "d", "e", "f"];
    let owned: Vec<(String, u32, u64)> = spec
        .iter()
        .map(|&(n, line, ns)| (names[n as usize].to_owned(), line as u32, ns))
        .collect();
    let calls: Vec<(&str, &str, u32, u64)> = owned
        .iter()
        .map(|(n, l, ns)| (n.as_str(), "f.rs", *l, *ns))
        .collect();
    trace(&calls)
}

proptest! {
    /// Deltas are the difference of the two single-trace reports, field by
    /// field, for every function present in both at the same site.
    #[test]
    fn deltas_are_the_difference_of_the_two_reports(a in calls(), b in calls()) {
        let (base, new) = (build(&a), build(&b));
        let dr = diff(&base, &new, DiffOptions::default());
        let find = |r: &Report, f: &mtanalyze::diff::FunctionDiff| {
            r.functions.iter().find(|x| x.function == f.function && x.file == f.file && x.line == f.line).cloned()
        };
        let mut seen_base = 0;
        let mut seen_new = 0;
        for f in &dr.functions {
            let (b, n) = (f.base.unwrap_or_default(), f.new.unwrap_or_default());
            prop_assert_eq!(f.delta.ncalls, n.ncalls as i64 - b.ncalls as i64);
            prop_assert_eq!(f.delta.primitive_calls, n.primitive_calls as i64 - b.primitive_calls as i64);
            prop_assert_eq!(f.delta.tottime_ns, n.tottime_ns as i64 - b.tottime_ns as i64);
            prop_assert_eq!(f.delta.cumtime_ns, n.cumtime_ns as i64 - b.cumtime_ns as i64);
            prop_assert_eq!(f.delta.paused_ns, n.paused_ns as i64 - b.paused_ns as i64);
            if f.matched == Match::Site {
                let (rb, rn) = (find(&base, f).unwrap(), find(&new, f).unwrap());
                prop_assert_eq!(f.delta.tottime_ns, rn.tottime_ns as i64 - rb.tottime_ns as i64);
                prop_assert_eq!(f.delta.cumtime_ns, rn.cumtime_ns as i64 - rb.cumtime_ns as i64);
                prop_assert_eq!(f.delta.ncalls, rn.ncalls as i64 - rb.ncalls as i64);
            }
            seen_base += f.base.is_some() as usize;
            seen_new += f.new.is_some() as usize;
        }
        // Nothing dropped.
        prop_assert_eq!(seen_base, base.functions.len());
        prop_assert_eq!(seen_new, new.functions.len());
        let total: i64 = dr.functions.iter().map(|f| f.delta.tottime_ns).sum();
        let want = new.functions.iter().map(|f| f.tottime_ns as i64).sum::<i64>()
            - base.functions.iter().map(|f| f.tottime_ns as i64).sum::<i64>();
        prop_assert_eq!(total, want);
    }
}

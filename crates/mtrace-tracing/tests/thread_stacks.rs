//! `with_own_stacks(false)`: synchronous spans on a plain thread open on
//! its own stack, nested under the mtrace frames around them, with no
//! logical stack of their own.

use tracing_subscriber::layer::SubscriberExt;

#[tracing::instrument]
fn outer(i: u64) -> u64 {
    inner(i) + 1
}

#[tracing::instrument]
fn inner(i: u64) -> u64 {
    std::hint::black_box(i * 3)
}

#[mtrace::profile]
fn work() -> u64 {
    (0..10).map(outer).sum()
}

#[test]
fn synchronous_spans_nest_on_the_threads_own_stack() {
    let path = std::env::temp_dir().join(format!(
        "mtrace-tracing-thread-{}.mtrace",
        std::process::id()
    ));
    let recording = mtrace::start(mtrace::Config::new(&path).capacity(16 << 20)).expect("start");
    let subscriber =
        tracing_subscriber::registry().with(mtrace_tracing::layer().with_own_stacks(false));
    tracing::subscriber::with_default(subscriber, || assert_eq!(work(), 145));
    recording.finish().expect("finish");

    let loaded = mtanalyze::load(&path).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    std::fs::remove_file(&path).ok();
    let function = |name: &str| {
        report
            .functions
            .iter()
            .find(|f| f.function == name)
            .unwrap()
    };
    assert_eq!(function("outer").ncalls, 10);
    assert_eq!(function("inner").ncalls, 10);
    let edge = |a: &str, b: &str| report.edges.iter().any(|e| e.caller == a && e.callee == b);
    assert!(edge("work", "outer") && edge("outer", "inner"));
    assert!(
        report
            .stacks
            .iter()
            .all(|s| !matches!(s.id, mtanalyze::report::StackKey::Logical(_))),
        "no logical stacks"
    );
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

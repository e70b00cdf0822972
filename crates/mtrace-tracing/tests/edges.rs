//! Spans the layer cannot close where they opened, and a global filter:
//! a span entered in one task and closed in another, a span never
//! closed, and a span a global `EnvFilter` disables. Each leaves a report
//! (no panic), with the unclosed frames counted as the analyzer counts
//! frames it closes itself (`cut_short` at their stack's end, with a
//! `frames_open_at_stack_end` warning; `open_at_end` at the trace's).

use mtrace::LogicalStackExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::EnvFilter;

mod noisy {
    /// Disabled by the filter (`edges::noisy=off`).
    #[tracing::instrument]
    pub fn filtered_out() {}
}

#[test]
fn spans_closed_elsewhere_or_never_leave_a_report() {
    let dir = std::env::temp_dir().join(format!("mtrace-tracing-edges-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("edges.mtrace");
    let recording = mtrace::start(mtrace::Config::new(&path).capacity(16 << 20)).expect("start");
    // A global filter: the layer never hears of `filtered_out`.
    let subscriber = tracing_subscriber::registry()
        .with(EnvFilter::new("trace,edges::noisy=off"))
        .with(mtrace_tracing::layer().with_marks(true));
    let _default = tracing::subscriber::set_default(subscriber);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let (send, receive) = tokio::sync::oneshot::channel::<tracing::Span>();
        let a = tokio::spawn(
            async move {
                // Opens on task-A's stack; task-B drops the last handle.
                let span = tracing::info_span!("moved");
                span.in_scope(|| tracing::info!("inside moved"));
                send.send(span).unwrap();
                tokio::task::yield_now().await;
            }
            .on_logical_stack("task-A"),
        );
        let b = tokio::spawn(
            async move {
                let span = receive.await.unwrap();
                span.in_scope(|| {}); // entered in B: records nothing
                drop(span);
            }
            .on_logical_stack("task-B"),
        );
        a.await.unwrap();
        b.await.unwrap();
    });
    // Never closed: its own stack stays open to the end of the trace.
    std::mem::forget(tracing::info_span!("leaked").entered().exit());
    noisy::filtered_out();
    drop(rt);
    recording.finish().expect("finish");

    let loaded = mtanalyze::load(&path).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    let function = |name: &str| report.functions.iter().find(|f| f.function == name);
    let moved = function("moved").expect("moved recorded");
    assert_eq!(
        (moved.ncalls, moved.cut_short),
        (1, 1),
        "closed by task-A's end"
    );
    let leaked = function("leaked").expect("leaked recorded");
    assert_eq!((leaked.ncalls, leaked.open_at_end), (1, 1));
    assert!(function("filtered_out").is_none());
    // `moved`, open on task-A's stack when it ended, is warned of; `leaked`
    // is open at the end as a task still running would be, which is not.
    let kinds: Vec<(&str, u64)> = report
        .warnings
        .iter()
        .map(|w| (w.kind.as_str(), w.count))
        .collect();
    assert_eq!(kinds, [("frames_open_at_stack_end", 1)]);
    // Said of the kind of stack it was left on: a future on a stack of its own.
    let left_open = &report.warnings[0];
    let by_kind: Vec<(&str, u64)> = left_open
        .by_stack_kind
        .iter()
        .map(|(k, n)| (k.as_str(), *n))
        .collect();
    assert_eq!(by_kind, [("future", 1)]);
    let task_a = report.stacks.iter().find(|s| &*s.name == "task-A");
    assert_eq!(task_a.map(|s| s.kind), Some(mtrace::StackKind::Future));
    assert_eq!(
        mtanalyze::render::warnings_summary(&report.warnings).as_deref(),
        Some("1 warning: frames_open_at_stack_end x1 (1 on futures)")
    );
    assert!(
        report.marks.iter().any(|m| &*m.name == "inside moved"),
        "{:?}",
        report.marks
    );
    std::fs::remove_dir_all(&dir).ok();
}

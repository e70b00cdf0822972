//! The layer beside `tracing_subscriber::fmt`: the printing layer keeps
//! its output and its own filter (`with_filter`), which hides nothing from
//! this one; a global filter under the layer is named at start-up (see
//! the unit tests of `filter_warning` for its words).

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

#[tracing::instrument]
fn handle(i: u64) -> u64 {
    if i == 3 {
        tracing::warn!("slow request {i}");
    }
    tracing::info!("handled {i}");
    lookup(i) + 1
}

#[tracing::instrument(level = "debug")]
fn lookup(i: u64) -> u64 {
    std::hint::black_box(i * 3)
}

/// What the fmt layer printed.
#[derive(Clone, Default)]
struct Printed(Arc<Mutex<Vec<u8>>>);

impl Write for Printed {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut printed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        printed.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn fmt_prints_what_its_filter_passes_and_the_layer_records_every_span() {
    let path =
        std::env::temp_dir().join(format!("mtrace-tracing-fmt-{}.mtrace", std::process::id()));
    let recording = mtrace::start(mtrace::Config::new(&path).capacity(16 << 20)).expect("start");
    let printed = Printed::default();
    let writer = printed.clone();
    let subscriber = tracing_subscriber::registry()
        .with(mtrace_tracing::layer())
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .with_filter(tracing_subscriber::EnvFilter::new("warn")),
        );
    let sum: u64 = tracing::subscriber::with_default(subscriber, || (0..5).map(handle).sum());
    recording.finish().expect("finish");
    assert_eq!(sum, 35);

    let printed = String::from_utf8(printed.0.lock().unwrap().clone()).expect("utf-8");
    assert!(printed.contains("slow request 3"), "{printed}");
    assert!(
        !printed.contains("handled"),
        "info is filtered from fmt: {printed}"
    );

    let loaded = mtanalyze::load(&path).expect("load");
    let report =
        mtanalyze::analyze(&loaded, &mtanalyze::AnalyzeOptions::default()).expect("analyze");
    std::fs::remove_file(&path).ok();
    let calls = |name: &str| {
        report
            .functions
            .iter()
            .find(|f| f.function == name)
            .map(|f| f.ncalls)
    };
    assert_eq!(
        calls("handle"),
        Some(5),
        "INFO spans, though fmt prints only WARN"
    );
    assert_eq!(calls("lookup"), Some(5), "DEBUG spans too");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

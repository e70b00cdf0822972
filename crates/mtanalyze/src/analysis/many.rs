//! Many traces, one pass: [`analyze_each`] loads and analyzes traces in
//! parallel and hands their reports over one at a time, in the order given.
//!
//! ```text
//! paths   a b c d | e f g h | i j ...     a batch: 4 per rayon thread
//!         \ analyzed in parallel /
//! each    a, b, c, d, then e, f, ...      in order, one report at a time
//! ```
//!
//! A batch is analyzed at once (each trace's stacks in parallel as well),
//! then its reports go to the caller in order, so at most one batch of
//! reports is alive however many traces there are: the caller folds them
//! into a [`crate::Merged`] report, writes them out (the Parquet export) or
//! keeps them (`--by-trace`). A trace that fails is handed over as its
//! error, in its place; the caller decides whether that ends the run.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::analysis::options::{AnalyzeError, AnalyzeOptions};
use crate::analysis::pipeline::analyze;
use crate::input::{load, LoadError};
use crate::model::report::Report;

/// Why one of several traces gave no report.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// It could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// It could not be analyzed.
    #[error(transparent)]
    Analyze(#[from] AnalyzeError),
}

/// Traces analyzed at once per rayon thread: enough to keep every thread
/// busy while one trace's last stacks finish, few enough that the reports
/// waiting to be handed over stay small.
const PER_THREAD: usize = 4;

/// Loads and analyzes every trace in `paths` with `opts`, calling `each`
/// with its index and its report (or why there is none), in the order of
/// `paths`. Stops at the first error `each` returns.
pub fn analyze_each<E>(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    mut each: impl FnMut(usize, &Path, Result<Report, TraceError>) -> Result<(), E>,
) -> Result<(), E> {
    let batch = PER_THREAD * rayon::current_num_threads().max(1);
    for (b, chunk) in paths.chunks(batch).enumerate() {
        let reports: Vec<Result<Report, TraceError>> = chunk
            .par_iter()
            .map(|p| Ok(analyze(&load(p)?, opts)?))
            .collect();
        for (i, (path, r)) in chunk.iter().zip(reports).enumerate() {
            each(b * batch + i, path, r)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtanalyze_testkit::worked_examples::{FIBER_HANDOFF, GIL_TURNS};

    #[test]
    fn reports_come_in_order_with_failures_in_their_place() {
        let dir = std::env::temp_dir().join(format!("mtanalyze-many-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut paths = Vec::new();
        // More traces than one batch, so batches follow each other in order.
        let n = 2 * PER_THREAD * rayon::current_num_threads() + 3;
        for i in 0..n {
            let p = dir.join(format!("{i}.jsonl"));
            let text = if i % 2 == 0 { FIBER_HANDOFF } else { GIL_TURNS };
            std::fs::write(&p, text).unwrap();
            paths.push(p);
        }
        paths[5] = dir.join("missing.jsonl");
        let mut seen = Vec::new();
        let r: Result<(), ()> = analyze_each(&paths, &AnalyzeOptions::default(), |i, p, r| {
            assert_eq!(p, paths[i]);
            seen.push((i, r.map(|r| r.functions.len()).map_err(|e| e.to_string())));
            Ok(())
        });
        assert!(r.is_ok());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(seen.len(), n);
        for (k, (i, r)) in seen.into_iter().enumerate() {
            assert_eq!(i, k);
            match (k, r) {
                (5, Err(e)) => assert!(e.contains("missing.jsonl"), "{e}"),
                (k, Ok(functions)) => assert_eq!(functions, if k % 2 == 0 { 3 } else { 2 }),
                (k, Err(e)) => panic!("trace {k}: {e}"),
            }
        }
    }

    #[test]
    fn an_error_from_the_caller_stops_the_run() {
        let paths = vec![
            PathBuf::from("/nonexistent/a"),
            PathBuf::from("/nonexistent/b"),
        ];
        let mut calls = 0;
        let r = analyze_each(&paths, &AnalyzeOptions::default(), |_, _, _| {
            calls += 1;
            Err("stop")
        });
        assert_eq!((r, calls), (Err("stop"), 1));
    }
}

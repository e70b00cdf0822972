//! A trace's child processes: the Python recorder writes each descendant
//! of the process that recorded `NAME.EXT` into `NAME.pid<PID>.EXT` beside
//! it, and a child that could not record leaves `NAME.pid<PID>.failed`, a
//! line saying why. `mtanalyze NAME.EXT` reports the whole process tree
//! (the several-traces merge; `--by-trace` shows each process) unless
//! `--no-children`. A child's file that holds no trace (a worker killed
//! while it started, before its recording began: `with Pool` terminates
//! its pool) is left out with the same warning, not a failure of the
//! parent's report.

use std::path::{Path, PathBuf};

use mtanalyze::{Report, Warning, WarningKind};

use crate::series::is_number;

/// What was found beside the traces given.
#[derive(Default)]
pub(crate) struct Children {
    /// The children's traces, in name order.
    pub(crate) traces: Vec<PathBuf>,
    /// The `.failed` notes' lines.
    pub(crate) failures: Vec<String>,
}

/// Whether `name` is `stem.pid<digits>suffix`.
fn is_child_name(name: &str, stem: &str, suffix: &str) -> bool {
    name.strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix(".pid"))
        .and_then(|rest| rest.strip_suffix(suffix))
        .is_some_and(is_number)
}

/// The children of each of `traces` that is itself no child's trace.
pub(crate) fn find(traces: &[PathBuf]) -> Children {
    let mut found = Children::default();
    for trace in traces {
        let (Some(stem), Some(folder)) =
            (trace.file_stem().and_then(|s| s.to_str()), trace.parent())
        else {
            continue;
        };
        let ext = trace
            .extension()
            .and_then(|e| e.to_str())
            .map_or(String::new(), |e| format!(".{e}"));
        // A child's own trace: its siblings belong to its parent.
        if stem
            .rsplit_once(".pid")
            .is_some_and(|(_, pid)| is_number(pid))
        {
            continue;
        }
        let folder = if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        };
        let Ok(entries) = std::fs::read_dir(folder) else {
            continue;
        };
        let mut names: Vec<(PathBuf, bool)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let path = trace.with_file_name(&name);
                if !ext.is_empty() && is_child_name(&name, stem, &ext) {
                    Some((path, true))
                } else if is_child_name(&name, stem, ".failed") {
                    Some((path, false))
                } else {
                    None
                }
            })
            .collect();
        names.sort();
        for (path, is_trace) in names {
            if is_trace {
                if traces.contains(&path) || found.traces.contains(&path) {
                    continue;
                }
                match mtanalyze::load(&path) {
                    Ok(_) => found.traces.push(path),
                    Err(e) => found.failures.push(format!(
                        "{} holds no trace (the process ended before it recorded): {e}",
                        path.display()
                    )),
                }
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                found.failures.extend(
                    text.lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(str::to_owned),
                );
            }
        }
    }
    found
}

/// The children that could not record, as one warning of the report.
pub(crate) fn warn(report: &mut Report, failures: &[String]) {
    let Some(first) = failures.first() else {
        return;
    };
    let kind = WarningKind::ChildNotRecorded;
    report.warnings.push(Warning {
        kind: kind.name().to_owned(),
        count: failures.len() as u64,
        first: first.clone(),
        repair: kind.repair().to_owned(),
        by_stack_kind: Default::default(),
        details: Vec::new(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_names_are_the_stem_a_pid_and_the_suffix() {
        assert!(is_child_name("mtrace.pid123.bin", "mtrace", ".bin"));
        assert!(!is_child_name("mtrace.pid.bin", "mtrace", ".bin"));
        assert!(!is_child_name("mtrace.pid12x.bin", "mtrace", ".bin"));
        assert!(!is_child_name("mtrace.1.bin", "mtrace", ".bin"));
        assert!(!is_child_name("other.pid1.bin", "mtrace", ".bin"));
        assert!(is_child_name("mtrace.pid7.failed", "mtrace", ".failed"));
    }

    #[test]
    fn a_trace_brings_its_children_and_their_failures() {
        let dir = tempfile_dir();
        let touch = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
        let trace = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../sample-traces/workload.bin"
        );
        let copy = |name: &str| std::fs::copy(trace, dir.join(name)).unwrap();
        copy("run.bin");
        copy("run.pid20.bin");
        copy("run.pid3.bin");
        // Killed before its recording began.
        touch("run.pid8.bin", "");
        touch("run.pid9.failed", "process 9 could not record: disk full\n");
        touch("runner.pid4.bin", "");
        touch("run.pid5.json", "");
        let found = find(&[dir.join("run.bin")]);
        assert_eq!(
            found.traces,
            vec![dir.join("run.pid20.bin"), dir.join("run.pid3.bin")]
        );
        assert_eq!(found.failures.len(), 2, "{:?}", found.failures);
        assert!(
            found.failures[0].starts_with(&format!(
                "{} holds no trace",
                dir.join("run.pid8.bin").display()
            )),
            "{:?}",
            found.failures
        );
        assert_eq!(found.failures[1], "process 9 could not record: disk full");
        // A child's trace given alone is that process alone.
        assert!(find(&[dir.join("run.pid3.bin")]).traces.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mtanalyze-children-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

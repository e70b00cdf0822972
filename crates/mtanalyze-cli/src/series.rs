//! Rotating series: a recording started with path `DIR/STEM.EXT` and
//! rotated writes `DIR/STEM.EXT`, then `DIR/STEM.1.EXT`, `DIR/STEM.2.EXT`,
//! ... (no extension: `STEM`, `STEM.1`, ...), each file a complete trace;
//! `MTRACE_KEEP` may have deleted the oldest, the first path included.
//! This module finds a series (beside a path given, in a directory, or
//! among the files a shell glob gave) and places each file in the series'
//! time: time zero is the series' first file's, and a file's offset is its
//! header's start (`start_unix_ns`) less the first's, so `--from/--to`
//! (durations and `mark:` names) mean the same instant in every file.
//!
//! A Python child's trace `STEM.pid<PID>.EXT` (and its own series
//! `STEM.pid<PID>.1.EXT`, ...) is never a member of `STEM.EXT`'s series:
//! `children.rs` finds those.

use std::path::{Path, PathBuf};

use mtanalyze::{AnalyzeOptions, TimeBound};

/// One file's place in its series.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    /// The file.
    pub(crate) path: PathBuf,
    /// Its number in the series (0: the path the recording started with).
    pub(crate) number: u64,
}

/// Which series a file name belongs to: (folder, stem, extension with its
/// dot or ""), and its number in it.
fn series_key(path: &Path) -> Option<((PathBuf, String, String), u64)> {
    let name = path.file_name()?.to_str()?;
    let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
    // `STEM.N.EXT` or `STEM.N` (N digits), else `STEM.EXT` or `STEM`.
    let (base, ext) = match name.rsplit_once('.') {
        Some((base, ext)) if !base.is_empty() && !is_number(ext) => (base, format!(".{ext}")),
        _ => (name, String::new()),
    };
    if let Some((stem, number)) = base.rsplit_once('.') {
        if !stem.is_empty() && is_number(number) {
            let n = number.parse().ok()?;
            return Some(((folder, stem.to_owned(), ext), n));
        }
    }
    Some(((folder, base.to_owned(), ext), 0))
}

/// Whether `text` is a whole number: digits, at least one (a series
/// number, a child's process id).
pub(crate) fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The series whose first path is `first`: the files `STEM.N.EXT` beside
/// it, and `first` itself if it exists, in series order. Empty when no
/// numbered file exists (a single trace, not a series).
pub(crate) fn beside(first: &Path) -> Vec<Member> {
    let Some((key, 0)) = series_key(first) else {
        return Vec::new();
    };
    let folder = if key.0.as_os_str().is_empty() {
        Path::new(".")
    } else {
        key.0.as_path()
    };
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut members: Vec<Member> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|name| {
            let path = first.with_file_name(&name);
            match series_key(&path) {
                Some((k, number)) if k.1 == key.1 && k.2 == key.2 && number > 0 => {
                    Some(Member { path, number })
                }
                _ => None,
            }
        })
        .collect();
    if members.is_empty() {
        return members;
    }
    if first.is_file() {
        // Numbered files older than the first are an earlier recording's
        // (a rotating one, then one to the same path that did not rotate):
        // not this series.
        if let Some(start) = start_unix_ns(first) {
            members.retain(|m| {
                let older = start_unix_ns(&m.path).is_some_and(|s| s < start);
                if older {
                    crate::output::say(&format!(
                        "mtanalyze: left out {}: older than {} (an earlier recording's)",
                        m.path.display(),
                        first.display()
                    ));
                }
                !older
            });
        }
        members.push(Member {
            path: first.to_path_buf(),
            number: 0,
        });
    }
    members.sort_by_key(|m| m.number);
    members
}

/// The traces given, with each series among them in series order: a path
/// that starts a series (`STEM.EXT` with `STEM.1.EXT` beside it, or no
/// `STEM.EXT` at all but numbered files) brings its other files; files of
/// one series given apart (a glob, a directory) are put in their order.
/// Returns the traces and the series found (each as its members).
pub(crate) fn gather(traces: &[PathBuf]) -> (Vec<PathBuf>, Vec<Vec<Member>>) {
    let mut series: Vec<((PathBuf, String, String), Vec<Member>)> = Vec::new();
    let mut singles: Vec<PathBuf> = Vec::new();
    let mut order: Vec<Result<usize, usize>> = Vec::new();
    for path in traces {
        let Some((key, number)) = series_key(path) else {
            order.push(Err(singles.len()));
            singles.push(path.clone());
            continue;
        };
        // A Python child's trace is its own series (stem `STEM.pid<PID>`).
        let found = match series.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                series.push((key.clone(), Vec::new()));
                order.push(Ok(series.len() - 1));
                series.len() - 1
            }
        };
        let members = &mut series[found].1;
        if number == 0 {
            for m in beside(path) {
                if !members.contains(&m) {
                    members.push(m);
                }
            }
        }
        let m = Member {
            path: path.clone(),
            number,
        };
        // A first path `MTRACE_KEEP` deleted is not read (its series is).
        let gone = number == 0 && !path.exists() && !members.is_empty();
        if !gone && !members.contains(&m) {
            members.push(m);
        }
    }
    let mut out = Vec::new();
    let mut found = Vec::new();
    for o in order {
        match o {
            Err(i) => out.push(singles[i].clone()),
            Ok(i) => {
                let members = &mut series[i].1;
                members.sort_by_key(|m| m.number);
                members.dedup_by_key(|m| m.number);
                out.extend(members.iter().map(|m| m.path.clone()));
                if members.len() > 1 {
                    found.push(members.clone());
                }
            }
        }
    }
    (out, found)
}

/// The header's start of the trace at `path` (ns since the Unix epoch),
/// `None` for a file whose header cannot be read (or not a binary trace).
pub(crate) fn start_unix_ns(path: &Path) -> Option<u64> {
    let trace = mtanalyze::load(path).ok()?;
    let header = mtrace_format::Header::decode(trace.bytes()).ok()?;
    Some(header.clock.start_unix_ns)
}

/// The offsets of a series' files from its first (ns), in member order;
/// a file whose start cannot be read (or is before the first's) is at 0.
pub(crate) fn offsets(members: &[Member]) -> Vec<u64> {
    let starts: Vec<Option<u64>> = members.iter().map(|m| start_unix_ns(&m.path)).collect();
    let zero = starts.iter().flatten().copied().next().unwrap_or(0);
    starts
        .iter()
        .map(|s| s.map_or(0, |s| s.saturating_sub(zero)))
        .collect()
}

/// The series-time window of `options` resolved to ns: `mark:NAME` is the
/// first mark of that name in the series (in series order, each file's
/// marks moved by its offset). `Err` names a mark no file holds.
pub(crate) fn resolve(
    options: &AnalyzeOptions,
    members: &[Member],
    offsets: &[u64],
) -> Result<(Option<u64>, Option<u64>), String> {
    let mut marks: Option<Vec<(String, u64)>> = None;
    let mut bound = |b: &Option<TimeBound>| -> Result<Option<u64>, String> {
        match b {
            None => Ok(None),
            Some(TimeBound::At(ns)) => Ok(Some(*ns)),
            Some(TimeBound::Mark(name)) => {
                let all = marks.get_or_insert_with(|| series_marks(members, offsets));
                all.iter()
                    .find(|(n, _)| n == name)
                    .map(|&(_, ns)| Some(ns))
                    .ok_or_else(|| {
                        format!(
                            "no mark named `{name}` in the series {}",
                            members
                                .first()
                                .map(|m| m.path.display().to_string())
                                .unwrap_or_default()
                        )
                    })
            }
        }
    };
    let from = bound(&options.from)?;
    let to = bound(&options.to)?;
    Ok((from, to))
}

/// Every mark of the series, in series order, at series times.
fn series_marks(members: &[Member], offsets: &[u64]) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (m, &offset) in members.iter().zip(offsets) {
        let Ok(trace) = mtanalyze::load(&m.path) else {
            continue;
        };
        let Ok(marks) = mtanalyze::marks(&trace) else {
            continue;
        };
        out.extend(
            marks
                .into_iter()
                .map(|mark| (mark.name, mark.time_ns.saturating_add(offset))),
        );
    }
    out
}

/// The window `[from, to)` of the series' time in the time of a file at
/// `offset`: `None` when the file lies wholly before it (its own time
/// starts at `to` or later: it contributes nothing). A file whose own
/// times are all before `from` gets an empty window from the analysis.
pub(crate) fn window_in_file(
    from: Option<u64>,
    to: Option<u64>,
    offset: u64,
) -> Option<(Option<u64>, Option<u64>)> {
    if to.is_some_and(|to| to <= offset) {
        return None;
    }
    Some((
        from.map(|f| f.saturating_sub(offset)),
        to.map(|t| t - offset),
    ))
}

/// Whether any of `series` has several files. Their reports then keep a
/// row per stack even for outputs that show none: the merge counts a
/// stack met in several files once only by its row (see
/// `mtanalyze::Merged`), so that the header's count of stacks is the
/// series'.
pub(crate) fn rotated(series: &[Vec<Member>]) -> bool {
    series.iter().any(|s| s.len() > 1)
}

/// The file names of a series, for the report's header: all of them up to
/// eight, else the first and the last with the count.
pub(crate) fn describe(members: &[Member]) -> String {
    let name = |m: &Member| m.path.display().to_string();
    match members {
        [] => String::new(),
        [one] => name(one),
        many if many.len() <= 8 => format!(
            "series of {}: {}",
            many.len(),
            many.iter().map(name).collect::<Vec<_>>().join(", ")
        ),
        many => format!(
            "series of {}: {} .. {}",
            many.len(),
            name(&many[0]),
            name(&many[many.len() - 1])
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_place_files_in_their_series() {
        let key = |p: &str| series_key(Path::new(p)).unwrap();
        let k = |stem: &str, ext: &str| (PathBuf::from("d"), stem.to_owned(), ext.to_owned());
        assert_eq!(key("d/trace.bin"), (k("trace", ".bin"), 0));
        assert_eq!(key("d/trace.1.bin"), (k("trace", ".bin"), 1));
        assert_eq!(key("d/trace.12.bin"), (k("trace", ".bin"), 12));
        assert_eq!(key("d/trace"), (k("trace", ""), 0));
        assert_eq!(key("d/trace.3"), (k("trace", ""), 3));
        // A child's trace and its series are another series.
        assert_eq!(key("d/trace.pid42.bin"), (k("trace.pid42", ".bin"), 0));
        assert_eq!(key("d/trace.pid42.2.bin"), (k("trace.pid42", ".bin"), 2));
    }

    #[test]
    fn a_window_moves_into_each_file() {
        // The second file starts 10 ns into the series.
        assert_eq!(
            window_in_file(Some(15), Some(30), 10),
            Some((Some(5), Some(20)))
        );
        assert_eq!(window_in_file(Some(5), None, 10), Some((Some(0), None)));
        assert_eq!(window_in_file(None, Some(10), 10), None);
        assert_eq!(window_in_file(None, Some(9), 0), Some((None, Some(9))));
    }

    #[test]
    fn series_and_children_never_mix() {
        let dir = std::env::temp_dir().join(format!("mtanalyze-series-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "run.bin",
            "run.1.bin",
            "run.2.bin",
            "run.10.bin",
            "run.pid7.bin",
            "run.pid7.1.bin",
            "runner.1.bin",
            "run.1.json",
        ] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        let numbers = |ms: &[Member]| ms.iter().map(|m| m.number).collect::<Vec<_>>();
        let names = |ms: &[Member]| {
            ms.iter()
                .map(|m| m.path.file_name().unwrap().to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let run = beside(&dir.join("run.bin"));
        assert_eq!(numbers(&run), [0, 1, 2, 10]);
        assert_eq!(
            names(&run),
            ["run.bin", "run.1.bin", "run.2.bin", "run.10.bin"]
        );
        let child = beside(&dir.join("run.pid7.bin"));
        assert_eq!(names(&child), ["run.pid7.bin", "run.pid7.1.bin"]);
        // A glob's files, in the shell's order, become two series.
        let mut glob: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "bin"))
            .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("run."))
            .collect();
        glob.sort();
        let (traces, found) = gather(&glob);
        assert_eq!(found.len(), 2, "{found:?}");
        let order: Vec<_> = traces
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
            .collect();
        let run_at = order.iter().position(|n| n == "run.bin").unwrap();
        assert_eq!(
            order[run_at..run_at + 4],
            ["run.bin", "run.1.bin", "run.2.bin", "run.10.bin"]
        );
        // The first path deleted (MTRACE_KEEP): the rest is the series.
        std::fs::remove_file(dir.join("run.bin")).unwrap();
        assert_eq!(numbers(&beside(&dir.join("run.bin"))), [1, 2, 10]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

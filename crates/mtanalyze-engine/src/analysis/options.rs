//! What an analysis is asked for ([`AnalyzeOptions`]): the clock, which
//! stacks, and whether call paths are kept; which stacks those options
//! select; and why an analysis can fail.

use mtrace_format::FormatError;

use crate::analysis::decode::StackNames;
use crate::analysis::paths::RecursionCollapse;
use crate::analysis::segment::StackKey;
use crate::analysis::window::Window;
use mtanalyze_model::report::{Clock, StackRows};

/// What to analyze and how.
#[derive(Clone, Debug, Default)]
pub struct AnalyzeOptions {
    /// The clock; `None`: the one the trace prefers, else `stack`.
    pub clock: Option<Clock>,
    /// Only stacks that ran on one of these threads (empty: all).
    pub threads: Vec<u64>,
    /// Only these stacks, by id (`thread:3`, `stack:7`) or name (empty: all).
    pub stacks: Vec<String>,
    /// Whether to collect call paths (for folded stacks and flame graphs).
    pub paths: PathMode,
    /// Fold recursive frames of the call paths into their outer frame
    /// (`None`: every frame on its own path). Function and edge statistics
    /// are not affected.
    pub collapse_recursion: Option<RecursionCollapse>,
    /// Count only the time from here on (`--from`; `None`: from the
    /// start). See "Time windows" in `schemas/semantics.md`.
    pub from: Option<TimeBound>,
    /// Count only the time before this (`--to`; `None`: to the end).
    pub to: Option<TimeBound>,
    /// Keep a row per stack in the report, or only count the stacks.
    pub stack_rows: StackRows,
    /// Keep every place each warning happened ([`mtanalyze_model::report::Warning::details`];
    /// `--warnings all`), not only counts and the first place.
    pub warning_details: bool,
}

/// One end of a time window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeBound {
    /// This many ns from time zero (when the recording started).
    At(u64),
    /// The first mark of this name the trace holds (`mtrace::mark`).
    Mark(String),
}

impl std::str::FromStr for TimeBound {
    type Err = String;

    /// `mark:NAME`, or a duration from time zero: a decimal number and a
    /// unit (`ns`, `us` or `µs`, `ms`, `s`, `min`), e.g. `5.5s`, `250ms`;
    /// `0` needs no unit. Exact to the ns: no floating point.
    fn from_str(s: &str) -> Result<TimeBound, String> {
        if let Some(name) = s.strip_prefix("mark:") {
            return Ok(TimeBound::Mark(name.to_owned()));
        }
        parse_duration_ns(s.trim()).map(TimeBound::At)
    }
}

/// `5.5s` -> 5_500_000_000 (see [`TimeBound`]'s `FromStr`).
fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let bad = || {
        format!("bad time `{s}`: give a duration from the start with a unit (2s, 5.5s, 150ms, 20us, 500ns) or mark:NAME")
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let per_unit: u64 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        "" if number.bytes().all(|b| b == b'0' || b == b'.') && !number.is_empty() => 1,
        _ => return Err(bad()),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    // The fraction, digit by digit, in units of `per_unit / 10^k`: digits
    // below a ns must be zero.
    let mut frac_ns: u64 = 0;
    let mut scale = per_unit;
    for d in frac.bytes() {
        let d = (d - b'0') as u64;
        if !scale.is_multiple_of(10) {
            if d != 0 {
                return Err(format!("bad time `{s}`: finer than a nanosecond"));
            }
            continue;
        }
        scale /= 10;
        frac_ns += d * scale;
    }
    whole
        .checked_mul(per_unit)
        .and_then(|w| w.checked_add(frac_ns))
        .ok_or_else(|| format!("bad time `{s}`: too large"))
}

impl AnalyzeOptions {
    /// Whether only some stacks are analyzed (`threads` or `stacks` given).
    pub fn selects_stacks(&self) -> bool {
        !self.threads.is_empty() || !self.stacks.is_empty()
    }

    /// Whether the stacks' names are needed: for their rows, for selecting
    /// stacks by name, or to label call paths per stack.
    pub(crate) fn shows_stack_names(&self) -> bool {
        self.stack_rows != StackRows::Counted
            || !self.stacks.is_empty()
            || self.paths == PathMode::PerStack
            || self.warning_details
    }

    /// The time window these options ask for, `mark_ns` giving the time
    /// of the first mark of a name (ns from time zero).
    pub(crate) fn window(
        &self,
        mark_ns: impl Fn(&str) -> Option<u64>,
        source: &str,
    ) -> Result<Window, AnalyzeError> {
        let resolve = |b: &Option<TimeBound>| match b {
            None => Ok(None),
            Some(TimeBound::At(ns)) => Ok(Some(*ns)),
            Some(TimeBound::Mark(name)) => {
                mark_ns(name)
                    .map(Some)
                    .ok_or_else(|| AnalyzeError::NoSuchMark {
                        source_name: source.to_owned(),
                        name: name.clone(),
                    })
            }
        };
        let (from, to) = (resolve(&self.from)?, resolve(&self.to)?);
        if let (Some(from_ns), Some(to_ns)) = (from, to) {
            if to_ns < from_ns {
                return Err(AnalyzeError::WindowBackwards {
                    source_name: source.to_owned(),
                    from_ns,
                    to_ns,
                });
            }
        }
        Ok(Window::new(from, to))
    }
}

/// Whether and how the report keeps call paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathMode {
    /// No call paths (the cheapest).
    #[default]
    Off,
    /// Paths of all stacks merged.
    Merged,
    /// Paths kept apart per stack, under the stack's name.
    PerStack,
}

/// Why a trace could not be analyzed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// The header is unreadable.
    #[error("{source_name}: {error}")]
    Format {
        /// The trace's source.
        source_name: String,
        /// The cause.
        error: FormatError,
    },
    /// A time window names a mark the trace does not hold.
    #[error("{source_name}: no mark named `{name}` (mtanalyze check lists the trace's marks)")]
    NoSuchMark {
        /// The trace's source.
        source_name: String,
        /// The name asked for.
        name: String,
    },
    /// A time window that ends before it starts.
    #[error("{source_name}: the time window ends ({to_ns} ns) before it starts ({from_ns} ns)")]
    WindowBackwards {
        /// The trace's source.
        source_name: String,
        /// Its start, ns from time zero.
        from_ns: u64,
        /// Its end.
        to_ns: u64,
    },
}

/// Whether `opts` select stack `key`, which ran on the threads `tids`
/// yields (asked only if needed).
pub(crate) fn wanted<I: Iterator<Item = u64>>(
    key: &StackKey,
    tids: impl FnOnce() -> I,
    names: &StackNames<'_>,
    opts: &AnalyzeOptions,
) -> bool {
    if let StackKey::Own(tid) = key {
        return own_stack_wanted(*tid, opts);
    }
    let thread_ok = opts.threads.is_empty() || tids().any(|t| opts.threads.contains(&t));
    thread_ok && named(key, names, &opts.stacks)
}

/// Whether stack `key` is among `stacks` (`--stack`: a stack's key, or a
/// logical stack's name; every stack if none is given): known when the
/// stack first runs, which a selection by thread is not.
pub(crate) fn named(key: &StackKey, names: &StackNames<'_>, stacks: &[String]) -> bool {
    stacks.is_empty() || stacks.iter().any(|want| {
        *want == key.to_string()
            || matches!(key, StackKey::Logical(id) if names.get(*id).is_some_and(|n| *n == **want))
    })
}

/// Whether `opts` select the own stack of thread `tid` (it runs on that
/// thread only, so this is known before its segments are).
pub(crate) fn own_stack_wanted(tid: u64, opts: &AnalyzeOptions) -> bool {
    own_stack_selected(tid, &opts.threads, &opts.stacks)
}

/// Whether the selection `threads` (`--thread`) and `stacks` (`--stack`)
/// takes the own stack of thread `tid` (all if both are empty).
pub(crate) fn own_stack_selected(tid: u64, threads: &[u64], stacks: &[String]) -> bool {
    let thread_ok = threads.is_empty() || threads.contains(&tid);
    let id = StackKey::Own(tid).to_string();
    thread_ok && (stacks.is_empty() || stacks.contains(&id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_names_are_decoded_only_where_something_shows_them() {
        let counted = || AnalyzeOptions {
            stack_rows: StackRows::Counted,
            ..AnalyzeOptions::default()
        };
        assert!(AnalyzeOptions::default().shows_stack_names());
        assert!(!counted().shows_stack_names());
        let by_name = AnalyzeOptions {
            stacks: vec!["request-7".into()],
            ..counted()
        };
        assert!(by_name.shows_stack_names());
        let labelled = AnalyzeOptions {
            paths: PathMode::PerStack,
            ..counted()
        };
        assert!(labelled.shows_stack_names());
        let merged_paths = AnalyzeOptions {
            paths: PathMode::Merged,
            ..counted()
        };
        assert!(!merged_paths.shows_stack_names());
    }
}

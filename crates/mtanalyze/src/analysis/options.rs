//! What an analysis is asked for ([`AnalyzeOptions`]): the clock, which
//! stacks, and whether call paths are kept; which stacks those options
//! select; and why an analysis can fail.

use mtrace_format::FormatError;

use crate::analysis::decode::StackNames;
use crate::analysis::paths::RecursionCollapse;
use crate::analysis::segment::StackKey;
use crate::model::report::Clock;

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
}

/// Whether `opts` select stack `key`, which ran on the threads `tids`
/// yields (asked only if needed).
pub(crate) fn wanted<I: Iterator<Item = u64>>(
    key: &StackKey,
    tids: impl FnOnce() -> I,
    names: &StackNames,
    opts: &AnalyzeOptions,
) -> bool {
    if let StackKey::Own(tid) = key {
        return own_stack_wanted(*tid, opts);
    }
    let thread_ok = opts.threads.is_empty() || tids().any(|t| opts.threads.contains(&t));
    let stack_ok = opts.stacks.is_empty()
        || opts.stacks.iter().any(|want| {
            *want == key.to_string()
                || matches!(key, StackKey::Logical(id) if names.get(*id).is_some_and(|n| n == want))
        });
    thread_ok && stack_ok
}

/// Whether `opts` select the own stack of thread `tid` (it runs on that
/// thread only, so this is known before its segments are).
pub(crate) fn own_stack_wanted(tid: u64, opts: &AnalyzeOptions) -> bool {
    let thread_ok = opts.threads.is_empty() || opts.threads.contains(&tid);
    let id = StackKey::Own(tid).to_string();
    thread_ok && (opts.stacks.is_empty() || opts.stacks.contains(&id))
}

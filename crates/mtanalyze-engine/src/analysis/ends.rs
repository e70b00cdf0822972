//! Ends of logical stacks (`end` events, format version 3): which ends
//! count, and where each stack's life ends ("Ends of logical stacks" in
//! `schemas/semantics.md`).
//!
//! ```text
//! task-7:  [run..)     [run....)              end          (counts: left before it)
//! task-8:  [run..)          end   [run..)                  (ignored: run again after it)
//! task-9:  [run.......... end ......)                      (ignored: running at it)
//! ```
//! An end of stack S at t counts if it is S's latest end and every stretch
//! a thread ran S (every segment of S) began before t and was left, by a
//! switch away or a `lost` mark, at or before t. Every other end is
//! ignored with an `end_ignored` warning. Times are compared in ns, so
//! ties do not depend on the order of lines or ticks. The replay
//! (`replay.rs`) closes the frames still open on a stack at its end.
//!
//! Only in traces that have ends: while judging, each grouped stack's
//! latest end (32 bytes); after, 24 bytes per selected stack. No time is
//! taken to mean "no end": a trace's times saturate at `u64::MAX` ns, and
//! an end there is an end (the fuzz target found the batch analysis
//! dropping one, with no warning, where the streamed one ignored it).

use mtrace_format::TickScale;

use crate::analysis::decode::ThreadChunks;
use crate::analysis::segment::{Segment, StackKey, RUNS_TO_END};
use mtanalyze_model::warnings::{Location, WarningKind, Warnings};

/// The end of each selected stack, by its index among them; empty when
/// the trace has no end that counts.
#[derive(Debug, Default)]
pub(crate) struct StackEnds {
    ends: Vec<Option<StackEnd>>,
}

/// An `end` that counts: when, and the thread that recorded it (where a
/// warning of the frames it left open says the stack ended).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StackEnd {
    /// ns from time zero.
    pub ns: u64,
    /// The recording thread's id.
    pub thread: u64,
}

impl StackEnds {
    /// The ends of `stacks` (keys ascending) among `counting` (see
    /// [`counting_ends`]).
    pub(crate) fn new(
        counting: &[(u64, StackEnd)],
        stacks: impl Iterator<Item = StackKey>,
    ) -> Self {
        if counting.is_empty() {
            return StackEnds::default();
        }
        let mut ends = counting.iter().peekable();
        let ends = stacks
            .map(|key| {
                let StackKey::Logical(id) = key else {
                    return None;
                };
                while ends.next_if(|(s, _)| *s < id).is_some() {}
                ends.next_if(|(s, _)| *s == id).map(|&(_, end)| end)
            })
            .collect();
        StackEnds { ends }
    }

    /// Where selected stack `i`'s life ended, if it did.
    pub(crate) fn of(&self, i: usize) -> Option<StackEnd> {
        self.ends.get(i).copied().flatten()
    }
}

/// The ends that count, as (stack id, end) ascending by id, of every `end`
/// the segment pass found (`ends`: each thread's (stack id, tick), in
/// `threads`' order); each other end adds an `end_ignored` warning to
/// `warnings`. The stacks that have segments are numbered `0..stacks`
/// ascending by key; `index(id)` is logical stack `id`'s number (`None`:
/// it never ran) and `segments(i)` the segments of stack `i`.
///
/// Each end goes straight to its stack's slot, which keeps the latest:
/// no list of every end, no sort (a task-per-request trace has an end a
/// task, and sorting them took a third of what ends cost its analysis).
pub(crate) fn counting_ends<'s, I>(
    ends: Vec<Vec<(u64, u64)>>,
    threads: &[ThreadChunks],
    scale: TickScale,
    stacks: usize,
    index: impl Fn(u64) -> Option<usize>,
    segments: impl Fn(usize) -> I,
    warnings: &mut Warnings,
) -> Vec<(u64, StackEnd)>
where
    I: Iterator<Item = &'s Segment>,
{
    if ends.iter().all(Vec::is_empty) {
        return Vec::new();
    }
    let mut ignored = |ns: u64, thread: u64| ignore_end(warnings, ns, thread);
    // By stack number: its latest end so far (ns, writing thread, id).
    let mut latest: Vec<Option<(u64, u64, u64)>> = vec![None; stacks];
    for (thread_ends, thread) in ends.into_iter().zip(threads) {
        let tid = thread.tid.0;
        for (id, tick) in thread_ends {
            let ns = scale.ns(tick);
            let Some(slot) = index(id).and_then(|i| latest.get_mut(i)) else {
                // A stack that never ran.
                ignored(ns, tid);
                continue;
            };
            // Every end but the latest (of equal ones, the last met).
            match slot {
                None => *slot = Some((ns, tid, id)),
                Some((t, by, _)) if !replaces(ns, tid, *t, *by) => ignored(ns, tid),
                Some(earlier) => {
                    ignored(earlier.0, earlier.1);
                    *earlier = (ns, tid, id);
                }
            }
        }
    }
    let mut counting = Vec::new();
    for (i, end) in latest.into_iter().enumerate() {
        let Some((t, tid, id)) = end else {
            continue;
        };
        if segments(i).all(|s| fits_end(s, t, scale)) {
            counting.push((id, StackEnd { ns: t, thread: tid }));
        } else {
            ignored(t, tid);
        }
    }
    counting
}

/// Whether segment `s` allows an end at `t` ns to count: it began before
/// `t` and was left, by a switch away or a `lost` mark, at or before it.
pub(crate) fn fits_end(s: &Segment, t: u64, scale: TickScale) -> bool {
    scale.ns(s.start_tick) < t && s.end_tick != RUNS_TO_END && scale.ns(s.end_tick) <= t
}

/// Whether an end at `ns` by thread `thread` replaces a stack's latest end
/// so far, at `latest_ns` by `latest_thread`, as its latest. Ends are met
/// thread after thread (threads ascending by id), each thread's in order:
/// of equal times the one met last is kept, so an end of the same time by
/// an earlier thread, met after (as a streamed analysis can), does not.
pub(crate) fn replaces(ns: u64, thread: u64, latest_ns: u64, latest_thread: u64) -> bool {
    ns > latest_ns || (ns == latest_ns && thread >= latest_thread)
}

/// An end that does not count: one `end_ignored` warning at its place.
pub(crate) fn ignore_end(warnings: &mut Warnings, ns: u64, tid: u64) {
    warnings.add(WarningKind::EndIgnored, Location::Time { ns, thread: tid });
}

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
//! Per stack this keeps one `u64`, and only in traces that have ends: the
//! segment pass's list of ends is sorted, judged and dropped here.

use mtrace_format::TickScale;

use crate::analysis::cut::ThreadPass;
use crate::analysis::decode::ThreadChunks;
use crate::analysis::segment::{Segment, StackKey, RUNS_TO_END};
use crate::model::warnings::{Location, WarningKind, Warnings};

/// [`StackEnds`]' mark of a stack that did not end.
const NO_END: u64 = u64::MAX;

/// The end of each selected stack, in ns, by its index among them; empty
/// when the trace has no end that counts.
#[derive(Debug, Default)]
pub(crate) struct StackEnds {
    ns: Vec<u64>,
}

impl StackEnds {
    /// The ends of `stacks` (keys ascending) among `counting` (see
    /// [`counting_ends`]).
    pub(crate) fn new(counting: &[(u64, u64)], stacks: impl Iterator<Item = StackKey>) -> Self {
        if counting.is_empty() {
            return StackEnds::default();
        }
        let mut ends = counting.iter().peekable();
        let ns = stacks
            .map(|key| {
                let StackKey::Logical(id) = key else {
                    return NO_END;
                };
                while ends.next_if(|(s, _)| *s < id).is_some() {}
                ends.next_if(|(s, _)| *s == id).map_or(NO_END, |&(_, t)| t)
            })
            .collect();
        StackEnds { ns }
    }

    /// Where selected stack `i`'s life ended, if it did.
    pub(crate) fn of(&self, i: usize) -> Option<u64> {
        self.ns.get(i).copied().filter(|&t| t != NO_END)
    }
}

/// Takes every `end` the segment pass found out of `passes`: (stack id,
/// ns, id of the thread that wrote it).
pub(crate) fn take_ends(
    passes: &mut [ThreadPass],
    threads: &[ThreadChunks],
    scale: TickScale,
) -> Vec<(u64, u64, u64)> {
    let mut all = Vec::new();
    for (pass, thread) in passes.iter_mut().zip(threads) {
        let tid = thread.tid.0;
        for (stack, tick) in std::mem::take(&mut pass.ends) {
            all.push((stack, scale.ns(tick), tid));
        }
    }
    all
}

/// The ends of `all` (see [`take_ends`]) that count, as (stack id, ns),
/// ascending by id; each other end adds an `end_ignored` warning to
/// `warnings`. `segments(id)`: the segments of logical stack `id`, `None`
/// if it has none (it never ran).
pub(crate) fn counting_ends<'s, I>(
    mut all: Vec<(u64, u64, u64)>,
    scale: TickScale,
    segments: impl Fn(u64) -> Option<I>,
    warnings: &mut Warnings,
) -> Vec<(u64, u64)>
where
    I: Iterator<Item = &'s Segment>,
{
    if all.is_empty() {
        return Vec::new();
    }
    // Sorted, each stack's latest end is the last of its run.
    all.sort_unstable();
    let mut ignored = |ns: u64, thread: u64| {
        warnings.add(WarningKind::EndIgnored, Location::Time { ns, thread });
    };
    let mut counting = Vec::new();
    let mut rest = &all[..];
    while let Some(&(stack, _, _)) = rest.first() {
        let n = rest.iter().take_while(|e| e.0 == stack).count();
        let (this, tail) = rest.split_at(n);
        rest = tail;
        let Some((&(_, t, tid), earlier)) = this.split_last() else {
            continue;
        };
        for &(_, ns, thread) in earlier {
            ignored(ns, thread);
        }
        let fits = segments(stack).is_some_and(|mut segs| {
            segs.all(|s| {
                scale.ns(s.start_tick) < t && s.end_tick != RUNS_TO_END && scale.ns(s.end_tick) <= t
            })
        });
        if fits {
            counting.push((stack, t));
        } else {
            ignored(t, tid);
        }
    }
    counting
}

//! [`analyze`]: every stage in order, the stacks replayed in parallel.

use rayon::prelude::*;

use crate::analysis::assemble::assemble;
use crate::analysis::cut::OwnReplay;
use crate::analysis::frames::{Acc, NoObserver};
use crate::analysis::options::{AnalyzeError, AnalyzeOptions, PathMode};
use crate::analysis::paths::{ROOT, STACK_LABEL};
use crate::analysis::replay::StackReplay;
use crate::analysis::segment::StackKey;
use crate::analysis::stacks::Analysis;
use crate::input::LoadedTrace;
use crate::model::report::{Report, StackStats};
use crate::model::warnings::Warnings;

/// Analyzes a loaded trace.
pub fn analyze(trace: &LoadedTrace, opts: &AnalyzeOptions) -> Result<Report, AnalyzeError> {
    analyze_in_stages(trace, opts, &mut |_| {})
}

/// [`analyze`], calling `stage_done` with each stage's name as it ends:
/// `decode`, `cut`, `group`, `replay`, `assemble` (see the `analysis`
/// module). What each costs is then measurable from outside; the analyzer
/// bench's `--stages` prints time and heap per stage.
pub fn analyze_in_stages(
    trace: &LoadedTrace,
    opts: &AnalyzeOptions,
    stage_done: &mut dyn FnMut(&'static str),
) -> Result<Report, AnalyzeError> {
    let mut analysis = Analysis::build(trace, opts, true, stage_done)?;
    // Own stacks the segment pass replayed wait only for the end of the trace.
    let fused: Vec<(u64, OwnReplay)> = {
        let prep = &mut analysis.prep;
        prep.passes
            .iter_mut()
            .zip(&prep.decoded.threads)
            .filter_map(|(p, t)| Some((t.tid.0, p.own_replay.take()?)))
            .collect()
    };
    let (mut acc, mut stacks, mut warnings) = replay_stacks(&analysis, opts.paths);
    let end_ns = analysis.end_ns();
    let finished: Vec<_> = fused
        .into_par_iter()
        .map(|(tid, mut own)| {
            let stats = StackReplay::resume(
                own.state,
                &mut own.tally,
                &mut NoObserver,
                analysis.clock,
                StackKey::Own(tid),
                end_ns,
            );
            (own.tally.into_acc(), stats, own.warnings)
        })
        .collect();
    for (a, stats, w) in finished {
        acc.merge(a);
        stacks.push(stats);
        warnings.merge(w);
    }
    stage_done("replay");
    let report = assemble(trace, analysis, opts, acc, stacks, warnings);
    stage_done("assemble");
    Ok(report)
}

/// How many of the biggest stacks are replayed first, biggest first.
const BIGGEST_FIRST: usize = 4096;

/// Replays every selected stack that has segments, in parallel; returns
/// the summed statistics, each stack's own and the problems found.
fn replay_stacks(analysis: &Analysis<'_>, paths: PathMode) -> (Acc, Vec<StackStats>, Warnings) {
    let with_paths = paths != PathMode::Off;
    // Biggest stacks first: the last stacks replayed are then short ones,
    // and all workers finish at about the same time. (The fused own stacks
    // have no segments, so they are not among these.)
    let mut order: Vec<(u64, usize)> = (0..analysis.stack_count())
        .into_par_iter()
        .map(|i| (analysis.stack_weight(i), i))
        .collect();
    // With many stacks only the biggest need to go first (the rest are
    // many to a job); sorting half a million short tasks bought nothing.
    let first = BIGGEST_FIRST.min(order.len());
    if first < order.len() {
        order.select_nth_unstable_by(first, |a, b| b.cmp(a));
    }
    order[..first].sort_unstable_by(|a, b| b.cmp(a));
    // One slot per stack, in that order, filled where it lies: the
    // statistics of half a million tasks are never moved from vector to
    // growing vector (which doubled the peak heap while they were merged).
    let mut slots: Vec<(usize, Option<StackStats>)> =
        order.into_iter().map(|(_, i)| (i, None)).collect();
    // Each fold job starts a tally (O(functions)): with thousands of short
    // stacks, every job takes a run of them rather than one each. Jobs are
    // no longer than that either, so an idle worker always finds one to
    // steal (rayon stops splitting a range once it runs).
    let per_job = (slots.len() / (rayon::current_num_threads() * 16)).max(1);
    let (acc, warnings) = slots
        .par_iter_mut()
        .with_min_len(per_job)
        .with_max_len(per_job)
        .fold(
            || (analysis.new_tally(with_paths), Warnings::default()),
            |(mut tally, mut warnings), (i, slot)| {
                let root = match paths {
                    PathMode::PerStack => STACK_LABEL | *i as u32,
                    _ => ROOT,
                };
                *slot = analysis.replay(*i, &mut tally, &mut warnings, root, &mut NoObserver);
                (tally, warnings)
            },
        )
        .map(|(tally, warnings)| (tally.into_acc(), warnings))
        .reduce_with(|(mut a, mut wa), (b, wb)| {
            a.merge(b);
            wa.merge(wb);
            (a, wa)
        })
        .unwrap_or_else(|| {
            let empty = analysis.new_tally(with_paths).into_acc();
            (empty, Warnings::default())
        });
    // In place: the statistics are smaller than the slots, so the allocation is reused.
    let stacks = slots.into_iter().filter_map(|(_, s)| s).collect();
    (acc, stacks, warnings)
}

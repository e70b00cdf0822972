//! Repeat runs of one benchmark as one side of a diff: each function's
//! median over the runs (a function missing from a run counts 0 there),
//! and the range its self time took, so a change can be told from the
//! run-to-run variation (`diff --base RUNS... --new RUNS...`).

use std::collections::HashMap;

use crate::model::diff::DiffReport;
use crate::model::merge::Merged;
use crate::model::report::{FunctionKey, Report};

/// Several runs reduced to one report of medians.
#[derive(Debug)]
pub struct Runs {
    /// Per function (and edge, and call path) the median of every field
    /// over the runs; the summary sums the runs' (see [`Merged`]).
    pub median: Report,
    /// Per function, the smallest and largest self time of a run (ns).
    pub tottime_range: HashMap<FunctionKey, [u64; 2]>,
    /// How many runs.
    pub runs: usize,
}

/// The median of `v` (sorted in place); for an even count the lower of the
/// two middle values, so a median is always a value some run had.
fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get((v.len().max(1) - 1) / 2).copied().unwrap_or(0)
}

/// The runs' medians (`None` without runs).
pub fn runs(reports: Vec<Report>) -> Option<Runs> {
    let n = reports.len();
    if n == 0 {
        return None;
    }
    // Per function, per field, the value of each run (0 where absent).
    let mut per_fn: HashMap<FunctionKey, Vec<[u64; 9]>> = HashMap::new();
    let mut per_edge: HashMap<(FunctionKey, FunctionKey), Vec<[u64; 5]>> = HashMap::new();
    let mut per_path: HashMap<(String, Vec<FunctionKey>), Vec<[u64; 2]>> = HashMap::new();
    for (run, r) in reports.iter().enumerate() {
        for f in &r.functions {
            let v = per_fn.entry(f.key()).or_insert_with(|| vec![[0; 9]; n]);
            v[run] = f.sums();
        }
        for e in &r.edges {
            let v = per_edge
                .entry((e.caller_key(), e.callee_key()))
                .or_insert_with(|| vec![[0; 5]; n]);
            v[run] = e.sums();
        }
        for p in &r.paths {
            let frames = p
                .frames
                .iter()
                .filter_map(|&i| r.functions.get(i as usize).map(|f| f.key()))
                .collect();
            let v = per_path
                .entry((p.stack.clone(), frames))
                .or_insert_with(|| vec![[0; 2]; n]);
            v[run] = [p.ncalls, p.self_ns];
        }
    }
    let column = |rows: &[[u64; 9]], i: usize| -> Vec<u64> { rows.iter().map(|r| r[i]).collect() };
    let mut tottime_range = HashMap::new();
    for (k, rows) in &per_fn {
        let t = column(rows, 2);
        let lo = t.iter().copied().min().unwrap_or(0);
        let hi = t.iter().copied().max().unwrap_or(0);
        tottime_range.insert(k.clone(), [lo, hi]);
    }
    // The summary, stacks and warnings as a merge gives them; then every
    // number replaced by its median.
    let mut merged = Merged::new();
    for r in reports {
        merged.add(r);
    }
    let mut m = merged.finish()?;
    m.stacks.clear();
    for f in &mut m.functions {
        if let Some(rows) = per_fn.get(&f.key()) {
            f.set_sums(std::array::from_fn(|i| median(&mut column(rows, i))));
        }
    }
    for e in &mut m.edges {
        if let Some(rows) = per_edge.get(&(e.caller_key(), e.callee_key())) {
            e.set_sums(std::array::from_fn(|i| {
                median(&mut rows.iter().map(|r| r[i]).collect::<Vec<_>>())
            }));
        }
    }
    let keys: Vec<FunctionKey> = m.functions.iter().map(|f| f.key()).collect();
    for p in &mut m.paths {
        let frames = p
            .frames
            .iter()
            .filter_map(|&i| keys.get(i as usize).cloned())
            .collect();
        if let Some(rows) = per_path.get(&(p.stack.clone(), frames)) {
            p.ncalls = median(&mut rows.iter().map(|r| r[0]).collect::<Vec<_>>());
            p.self_ns = median(&mut rows.iter().map(|r| r[1]).collect::<Vec<_>>());
        }
    }
    Some(Runs {
        median: m,
        tottime_range,
        runs: n,
    })
}

/// Puts each side's self-time range on the diff's functions (see
/// `FunctionDiff::base_range`).
pub fn attach_ranges(diff: &mut DiffReport, base: &Runs, new: &Runs) {
    for f in &mut diff.functions {
        let key = f.key();
        f.base_range = base
            .tottime_range
            .get(&key)
            .copied()
            .filter(|_| base.runs > 1);
        f.new_range = new
            .tottime_range
            .get(&key)
            .copied()
            .filter(|_| new.runs > 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_are_values_a_run_had() {
        assert_eq!(median(&mut [5, 1, 3]), 3);
        assert_eq!(median(&mut [4, 1, 3, 2]), 2);
        assert_eq!(median(&mut [7]), 7);
    }
}

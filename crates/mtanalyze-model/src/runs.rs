//! Repeat runs of one benchmark as one side of a diff: each function's
//! median over the runs (a function missing from a run counts 0 there),
//! the range its self time took, and its self time in each run, so a
//! change can be told from the run-to-run variation (`diff --base RUNS...
//! --new RUNS...`): with two runs or more on both sides, the diff's
//! significance test takes the runs as its samples.

use std::collections::HashMap;

use crate::diff::{ComparedTimes, DiffReport};
use crate::histogram::SelfTimeHistogram;
use crate::merge::Merged;
use crate::report::{FunctionKey, FunctionStats, Report};
use crate::significance::{Estimate, Method, Samples, MIN_FOR_DRIFT, MIN_FRAMES_FOR_RANKS};
use crate::sums::{median, EdgeSums, FunctionSums};

/// Several runs reduced to one report of medians.
#[derive(Debug)]
pub struct Runs {
    /// Per function (and edge, and call path) the median of every field
    /// over the runs; the summary sums the runs' (see [`Merged`]).
    pub median: Report,
    /// Per function, its self time in each run (ns; 0 where it did not run).
    pub tottime_runs: HashMap<FunctionKey, Vec<u64>>,
    /// The total self time of each run.
    pub total_runs: Vec<u64>,
    /// Per function, its self time in each run as the runs' test takes it:
    /// frames times median frame, its sum below 8 frames or without a
    /// histogram (0 where it did not run).
    pub estimated_runs: HashMap<FunctionKey, Vec<f64>>,
    /// The sum of each run's estimated self times.
    pub estimated_total_runs: Vec<f64>,
    /// How many runs.
    pub runs: usize,
}

/// The runs' medians (`None` without runs).
pub fn runs(reports: Vec<Report>) -> Option<Runs> {
    let n = reports.len();
    if n == 0 {
        return None;
    }
    // Per function, per field, the value of each run (0 where absent).
    let mut per_fn: HashMap<FunctionKey, Vec<FunctionSums>> = HashMap::new();
    let mut total_runs = vec![0u64; n];
    let mut estimated_runs: HashMap<FunctionKey, Vec<f64>> = HashMap::new();
    let mut estimated_total_runs = vec![0.0; n];
    let mut per_edge: HashMap<(FunctionKey, FunctionKey), Vec<EdgeSums>> = HashMap::new();
    let mut per_path: HashMap<(String, Vec<FunctionKey>), Vec<[u64; 2]>> = HashMap::new();
    for (run, r) in reports.iter().enumerate() {
        for f in &r.functions {
            let v = per_fn
                .entry(f.key())
                .or_insert_with(|| vec![FunctionSums::default(); n]);
            v[run] = f.sums();
            total_runs[run] = total_runs[run].saturating_add(f.tottime_ns);
            let estimated = estimated_self_time(f);
            estimated_runs
                .entry(f.key())
                .or_insert_with(|| vec![0.0; n])[run] = estimated;
            estimated_total_runs[run] += estimated;
        }
        for e in &r.edges {
            let v = per_edge
                .entry((e.caller_key(), e.callee_key()))
                .or_insert_with(|| vec![EdgeSums::default(); n]);
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
    let tottime_runs = per_fn
        .iter()
        .map(|(k, rows)| (k.clone(), rows.iter().map(|r| r.tottime_ns).collect()))
        .collect();
    // The merge adds up the frames' spread (the histograms, the squares),
    // which would make the side's frames several runs' against NEW's one:
    // the median run's go with the medians (what a side of one run has).
    let median_run: HashMap<&FunctionKey, usize> = estimated_runs
        .iter()
        .map(|(k, v)| {
            let mut order: Vec<usize> = (0..v.len()).collect();
            order.sort_by(|&a, &b| v[a].total_cmp(&v[b]).then(a.cmp(&b)));
            (k, order[(order.len().max(1) - 1) / 2])
        })
        .collect();
    let mut spread: HashMap<FunctionKey, (SelfTimeHistogram, u128)> = HashMap::new();
    for (run, r) in reports.iter().enumerate() {
        for f in &r.functions {
            if median_run.get(&f.key()) == Some(&run) {
                spread.insert(f.key(), (f.tottime_hist.clone(), f.tottime_sq));
            }
        }
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
            f.set_sums(FunctionSums::median_of(rows));
        }
        // Absent from the median run: no frames there.
        (f.tottime_hist, f.tottime_sq) = spread.remove(&f.key()).unwrap_or_default();
    }
    for e in &mut m.edges {
        if let Some(rows) = per_edge.get(&(e.caller_key(), e.callee_key())) {
            e.set_sums(EdgeSums::median_of(rows));
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
            p.ncalls = median(rows.iter().map(|r| r[0]));
            p.self_ns = median(rows.iter().map(|r| r[1]));
        }
    }
    Some(Runs {
        median: m,
        tottime_runs,
        total_runs,
        estimated_runs,
        estimated_total_runs,
        runs: n,
    })
}

/// A function's self time in one run as the runs' test takes it: its
/// frames times its median frame, as `call_medians` weighs a side; its
/// sum below [`MIN_FRAMES_FOR_RANKS`] frames, or without a histogram (a
/// report saved before they were kept). On a busy machine a few frames of
/// a run lose whole time slices and move its sum by tens of percent, from
/// run to run: with a few runs a side, a sum's spread then hides a real
/// change, or, when the few runs of one side happen to agree, shows one
/// where there is none.
fn estimated_self_time(f: &FunctionStats) -> f64 {
    match f.tottime_hist.count() >= MIN_FRAMES_FOR_RANKS {
        true => f.tottime_hist.frames_times_median(),
        false => f.tottime_ns as f64,
    }
}

/// Puts each side's self-time range on the diff's functions (see
/// `FunctionDiff::base_range`), and with two runs or more on both sides,
/// and the test on (a confidence above 0), tests each function's change
/// (and the total's) on the runs' self times in place of the frames
/// ([`Method::Runs`]): the verdicts then hold
/// against the variation from run to run. Each run's times are first
/// divided by its machine's speed (`run_speeds`), as a single pair's are
/// by the drift between them.
pub fn attach_runs(diff: &mut DiffReport, base: &Runs, new: &Runs) {
    for f in &mut diff.functions {
        let key = f.key();
        let range = |v: Option<&Vec<u64>>, runs: usize| {
            let v = v.filter(|_| runs > 1)?;
            Some([v.iter().copied().min()?, v.iter().copied().max()?])
        };
        f.base_range = range(base.tottime_runs.get(&key), base.runs);
        f.new_range = range(new.tottime_runs.get(&key), new.runs);
    }
    let opts = diff.significance.options;
    // With the test off, the medians' raw changes stand (no samples needed).
    if base.runs < 2 || new.runs < 2 || opts.confidence <= 0.0 {
        return;
    }
    let scale = diff.base_scale;
    // The larger side's mean total of estimated self times, the unit the
    // minimum share is of (as `call_medians` takes it).
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let largest_total =
        (mean(&base.estimated_total_runs) * scale).max(mean(&new.estimated_total_runs));
    let (base_speed, new_speed) =
        run_speeds(base, new, scale, opts.min_share_pct / 100.0 * largest_total);
    let divided = |v: &[f64], k: f64, speed: &[f64]| -> Vec<f64> {
        v.iter().zip(speed).map(|(&t, s)| t * k / s).collect()
    };
    // Absent from every run of a side: zero in each.
    let none = |speed: &[f64]| vec![0.0; speed.len()];
    for f in &mut diff.functions {
        let key = f.key();
        let b = base
            .estimated_runs
            .get(&key)
            .map_or_else(|| none(&base_speed), |v| divided(v, scale, &base_speed));
        let n = new
            .estimated_runs
            .get(&key)
            .map_or_else(|| none(&new_speed), |v| divided(v, 1.0, &new_speed));
        // What a gate on time reads: the means the test compared.
        f.compared = Some(ComparedTimes {
            base_ns: mean(&b).round() as u64,
            new_ns: mean(&n).round() as u64,
        });
        let e = Estimate::of(Samples::of(b), Samples::of(n), false);
        let t = e.test(opts, largest_total);
        (f.verdict, f.p_value) = (t.verdict, t.p_value);
    }
    diff.significance.method = Method::Runs;
    diff.significance.drift = mean(&new_speed) / mean(&base_speed);
    // The total by the runs' sums, as `call_medians` tests it: a median
    // frame says nothing of the time slices a busy machine adds to a sum.
    let sums = |v: &[u64], k: f64, speed: &[f64]| {
        Samples::of(v.iter().zip(speed).map(|(&t, s)| t as f64 * k / s))
    };
    let e = Estimate::of(
        sums(&base.total_runs, scale, &base_speed),
        sums(&new.total_runs, 1.0, &new_speed),
        false,
    );
    diff.set_total(e.test(opts, 0.0));
}

/// Each run's machine speed: the median, over functions in both sides
/// whose mean estimated self time (over all runs, the base's scaled by
/// `scale`) is at least `floor`, of the run's estimated self time over
/// that mean; 1 for every run with fewer than [`MIN_FOR_DRIFT`] such
/// functions. A change of code moves a few
/// functions, a busy machine all of one run's: the median function is
/// taken as unchanged ("Significance of a diff" in `semantics.md`).
fn run_speeds(base: &Runs, new: &Runs, scale: f64, floor: f64) -> (Vec<f64>, Vec<f64>) {
    let runs = (base.runs + new.runs) as f64;
    let means: Vec<(&Vec<f64>, &Vec<f64>, f64)> = base
        .estimated_runs
        .iter()
        .filter_map(|(k, b)| {
            let n = new.estimated_runs.get(k)?;
            let sum = b.iter().map(|&t| t * scale).sum::<f64>() + n.iter().sum::<f64>();
            let m = sum / runs;
            (m > 0.0 && m >= floor).then_some((b, n, m))
        })
        .collect();
    let speeds = |runs: usize, of_new: bool, k: f64| {
        (0..runs)
            .map(|r| {
                let mut ratios: Vec<f64> = means
                    .iter()
                    .filter_map(|f| {
                        let side = if of_new { f.1 } else { f.0 };
                        Some(*side.get(r)? * k / f.2)
                    })
                    .collect();
                if ratios.len() < MIN_FOR_DRIFT {
                    return 1.0;
                }
                ratios.sort_by(f64::total_cmp);
                let mid = ratios.len() / 2;
                let m = match ratios.len() % 2 {
                    1 => ratios[mid],
                    _ => (ratios[mid - 1] + ratios[mid]) / 2.0,
                };
                if m > 0.0 {
                    m
                } else {
                    1.0
                }
            })
            .collect()
    };
    (speeds(base.runs, false, scale), speeds(new.runs, true, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_are_values_a_run_had() {
        assert_eq!(median([5, 1, 3].into_iter()), 3);
        assert_eq!(median([4, 1, 3, 2].into_iter()), 2);
        assert_eq!(median([7].into_iter()), 7);
    }
}

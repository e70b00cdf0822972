//! Comparing two reports: what got faster or slower, per function, per call
//! edge and per call path.
//!
//! Functions match by (name, file, line); those left over match by name
//! alone (the code moved), pairing same-named leftovers in (file, line)
//! order. Edges and call paths match through the function matching (paths
//! by identity, printed with labels made once over the diff's rows). With `normalize`, the
//! base's times are scaled so its total self time equals the new trace's
//! before subtracting (runs of different length). Nothing is dropped: a
//! function in only one trace appears with the other side empty.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::labels::{LabelSite, Labels};
use crate::report::Clock;
use crate::report::{EdgeStats, FunctionKey, FunctionStats, Report, TraceSummary};
use crate::significance::{
    Estimate, MedianChange, Method, Samples, Significance, SignificanceOptions, Tested, Verdict,
    MIN_FOR_DRIFT, MIN_FRAMES_FOR_RANKS,
};

/// How to compare.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DiffOptions {
    /// Scale the base so its total self time equals the new trace's.
    pub normalize: bool,
    /// When a change of self time counts (see `model/significance.rs`).
    pub significance: SignificanceOptions,
}

/// One side's numbers for a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FunctionSide {
    /// Frames.
    pub ncalls: u64,
    /// Non-recursive frames.
    pub primitive_calls: u64,
    /// Self time.
    pub tottime_ns: u64,
    /// Cumulative time.
    pub cumtime_ns: u64,
    /// Paused time.
    pub paused_ns: u64,
}

/// New minus base (base scaled when normalizing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FunctionDelta {
    /// Change in frames.
    pub ncalls: i64,
    /// Change in non-recursive frames.
    pub primitive_calls: i64,
    /// Change in self time.
    pub tottime_ns: i64,
    /// Change in cumulative time.
    pub cumtime_ns: i64,
    /// Change in paused time.
    pub paused_ns: i64,
}

/// How a function was matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// Same name, file and line.
    Site,
    /// Same name; the file or line differ.
    Name,
    /// Only in the base trace.
    Gone,
    /// Only in the new trace.
    New,
}

/// One function's comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionDiff {
    /// Name.
    pub function: String,
    /// File (the new trace's when both have it).
    pub file: String,
    /// Line (the new trace's when both have it).
    pub line: u32,
    /// How it was matched.
    #[serde(rename = "match")]
    pub matched: Match,
    /// The base trace's numbers (scaled when normalizing), if it has the function.
    pub base: Option<FunctionSide>,
    /// The new trace's numbers, if it has the function.
    pub new: Option<FunctionSide>,
    /// New minus base; a missing side counts as zero.
    pub delta: FunctionDelta,
    /// Whether the self-time change stands out of the noise
    /// ([`DiffReport::significance`] says how that was decided).
    #[serde(default)]
    pub verdict: Verdict,
    /// The test's two-sided p-value (`None`: no test could be made, as for
    /// a function of one call a side).
    #[serde(default)]
    pub p_value: Option<f64>,
    /// By [`crate::significance::Method::CallMedians`]: the self times
    /// the test compared, each side's frames times its median frame (the
    /// base's times the drift): what time gates read, since on a busy
    /// machine a few preempted frames can hold most of a sum. By
    /// [`crate::significance::Method::Runs`]: the means of the runs' self
    /// times the test compared (see [`crate::runs::attach_runs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared: Option<ComparedTimes>,
    /// With several runs of BASE: the smallest and largest self time of a
    /// run (the side's numbers are then medians).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_range: Option<[u64; 2]>,
    /// With several runs of NEW: likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_range: Option<[u64; 2]>,
}

/// A function's self times as the rank test compared them (see
/// [`FunctionDiff::compared`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparedTimes {
    /// The base's frames times its median frame, times the drift (and
    /// `--normalize`'s factor), ns.
    pub base_ns: u64,
    /// NEW's frames times its median frame, ns.
    pub new_ns: u64,
}

impl FunctionDiff {
    /// The function's identity, as shown.
    pub fn key(&self) -> FunctionKey {
        FunctionKey::new(&self.function, &self.file, self.line)
    }
}

/// One side's numbers for an edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct EdgeSide {
    /// Frames.
    pub ncalls: u64,
    /// Frames whose edge is not recursive.
    pub primitive_calls: u64,
    /// Self time.
    pub tottime_ns: u64,
    /// Cumulative time.
    pub cumtime_ns: u64,
}

/// New minus base for an edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct EdgeDelta {
    /// Change in frames.
    pub ncalls: i64,
    /// Change in non-recursive frames.
    pub primitive_calls: i64,
    /// Change in self time.
    pub tottime_ns: i64,
    /// Change in cumulative time.
    pub cumtime_ns: i64,
}

/// One edge's comparison. The sites are the ones its functions are shown
/// with in [`DiffReport::functions`] (the new trace's when both have them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeDiff {
    /// Caller name.
    pub caller: String,
    /// Caller's source file.
    pub caller_file: String,
    /// Caller's source line.
    pub caller_line: u32,
    /// Callee name.
    pub callee: String,
    /// Callee's source file.
    pub callee_file: String,
    /// Callee's source line.
    pub callee_line: u32,
    /// The base trace's numbers, if it has the edge.
    pub base: Option<EdgeSide>,
    /// The new trace's numbers, if it has the edge.
    pub new: Option<EdgeSide>,
    /// New minus base.
    pub delta: EdgeDelta,
}

/// One call path's self time on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathDiff {
    /// The functions' labels from the root (those of the diff's rows, see
    /// [`crate::labels::Labels`]: one function, one label on both sides),
    /// `;`-separated; with the stack's name first when paths are kept per stack.
    pub path: String,
    /// Base self time (scaled when normalizing).
    pub base_ns: u64,
    /// New self time.
    pub new_ns: u64,
}

/// A whole comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffReport {
    /// The base trace.
    pub base: TraceSummary,
    /// The new trace.
    pub new: TraceSummary,
    /// The clock both were analyzed with.
    pub clock: Clock,
    /// Whether the base was scaled.
    pub normalized: bool,
    /// The factor base times were multiplied by (1.0 without normalizing).
    pub base_scale: f64,
    /// Total self time of the base (scaled) and of the new trace.
    pub base_total_ns: u64,
    /// Total self time of the new trace.
    pub new_total_ns: u64,
    /// Functions matched by name only (their file or line moved).
    pub matched_by_name: u64,
    /// How the verdicts were decided.
    #[serde(default)]
    pub significance: Significance,
    /// The total self time's verdict (its change is the functions' summed).
    #[serde(default)]
    pub total_verdict: Verdict,
    /// Its p-value.
    #[serde(default)]
    pub total_p_value: Option<f64>,
    /// Per function, ordered by the absolute change of self time, largest first.
    pub functions: Vec<FunctionDiff>,
    /// Per edge, ordered the same way.
    pub edges: Vec<EdgeDiff>,
    /// Per call path (when both reports carry paths), ordered by path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathDiff>,
}

impl DiffReport {
    /// Sets the total's verdict.
    pub(crate) fn set_total(&mut self, t: Tested) {
        self.total_verdict = t.verdict;
        self.total_p_value = t.p_value;
    }
}

impl EdgeDiff {
    /// The caller's identity, as shown.
    pub fn caller_key(&self) -> FunctionKey {
        FunctionKey::new(&self.caller, &self.caller_file, self.caller_line)
    }

    /// The callee's identity, as shown.
    pub fn callee_key(&self) -> FunctionKey {
        FunctionKey::new(&self.callee, &self.callee_file, self.callee_line)
    }
}

/// Both sides of an edge, keyed by its (caller, callee) as shown.
type EdgeSides = BTreeMap<(FunctionKey, FunctionKey), (Option<EdgeSide>, Option<EdgeSide>)>;

fn scale(v: u64, s: f64) -> u64 {
    if s == 1.0 {
        v
    } else {
        (v as f64 * s).round() as u64
    }
}

fn d(new: u64, base: u64) -> i64 {
    (new as i128 - base as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// A function's frames as samples of self time (scaled by `s`).
fn frames(f: Option<&FunctionStats>, s: f64) -> Samples {
    f.map_or(Samples::default(), |f| {
        Samples {
            // A window's frame entered before it adds time but no call.
            n: f.ncalls.max(1) as f64,
            sum: f.tottime_ns as f64,
            sum_sq: f.tottime_sq as f64,
        }
        .scaled(s)
    })
}

fn side(f: &FunctionStats, s: f64) -> FunctionSide {
    FunctionSide {
        ncalls: f.ncalls,
        primitive_calls: f.primitive_calls,
        tottime_ns: scale(f.tottime_ns, s),
        cumtime_ns: scale(f.cumtime_ns, s),
        paused_ns: scale(f.paused_ns, s),
    }
}

fn edge_side(e: &EdgeStats, s: f64) -> EdgeSide {
    EdgeSide {
        ncalls: e.ncalls,
        primitive_calls: e.primitive_calls,
        tottime_ns: scale(e.tottime_ns, s),
        cumtime_ns: scale(e.cumtime_ns, s),
    }
}

/// Pairs base functions with new ones: by site, then by name. Returns
/// (base index, new index) pairs and how each was matched.
fn match_functions(
    base: &[FunctionStats],
    new: &[FunctionStats],
) -> Vec<(Option<usize>, Option<usize>, Match)> {
    let new_by_key: HashMap<FunctionKey, usize> =
        new.iter().enumerate().map(|(i, f)| (f.key(), i)).collect();
    let mut used_new = vec![false; new.len()];
    let mut pairs = Vec::new();
    let mut left_base: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, f) in base.iter().enumerate() {
        match new_by_key.get(&f.key()) {
            Some(&j) => {
                used_new[j] = true;
                pairs.push((Some(i), Some(j), Match::Site));
            }
            None => left_base.entry(&f.function).or_default().push(i),
        }
    }
    let mut left_new: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (j, f) in new.iter().enumerate() {
        if !used_new[j] {
            left_new.entry(&f.function).or_default().push(j);
        }
    }
    // Same-named leftovers pair up in (file, line) order; both lists are
    // already in that order because reports sort functions by key.
    for (name, bs) in &left_base {
        let ns = left_new.remove(name).unwrap_or_default();
        let mut ns = ns.into_iter();
        for &i in bs {
            match ns.next() {
                Some(j) => pairs.push((Some(i), Some(j), Match::Name)),
                None => pairs.push((Some(i), None, Match::Gone)),
            }
        }
        pairs.extend(ns.map(|j| (None, Some(j), Match::New)));
    }
    for (_, ns) in left_new {
        pairs.extend(ns.into_iter().map(|j| (None, Some(j), Match::New)));
    }
    pairs
}

/// The machine's drift between the traces: the median, over functions
/// with at least the minimum share of the total on both sides, of the
/// ratio of NEW's self time to BASE's (scaled by `s`); 1 with fewer than
/// [`MIN_FOR_DRIFT`] such functions. A busy machine slows every function of a run
/// alike, a change of code a few: the median function is taken as
/// unchanged (see "Significance of a diff" in `semantics.md`).
///
/// By [`Method::CallMedians`] the ratios are of the functions' median
/// frames (NEW's over BASE's times `s`), over those of at least
/// [`MIN_FRAMES_FOR_RANKS`] frames a side besides the share: preemption
/// moves a sum by whole time slices, a median hardly.
fn drift(
    base: &Report,
    new: &Report,
    pairs: &[(Option<usize>, Option<usize>, Match)],
    s: f64,
    largest_total: f64,
    opts: SignificanceOptions,
    method: Method,
) -> Drift {
    let floor = opts.min_share_pct / 100.0 * largest_total;
    let mut ratios: Vec<f64> = pairs
        .iter()
        .filter_map(|&(bi, ni, _)| {
            let (fb, fnew) = (base.functions.get(bi?)?, new.functions.get(ni?)?);
            if method != Method::CallMedians {
                let b = fb.tottime_ns as f64 * s;
                let n = fnew.tottime_ns as f64;
                return (b > 0.0 && b >= floor && n >= floor).then(|| n / b);
            }
            let frames = |f: &FunctionStats| f.tottime_hist.count() >= MIN_FRAMES_FOR_RANKS;
            if !(frames(fb) && frames(fnew)) {
                return None;
            }
            let mb = fb.tottime_hist.median()? * s;
            let mn = fnew.tottime_hist.median()?;
            // The share of frames times median frame, as the test weighs.
            let eb = mb * fb.tottime_hist.count() as f64;
            let en = mn * fnew.tottime_hist.count() as f64;
            (mb > 0.0 && eb >= floor && en >= floor).then(|| mn / mb)
        })
        .collect();
    if ratios.len() < MIN_FOR_DRIFT {
        return Drift::NONE;
    }
    let k = median(&mut ratios);
    if method == Method::CallMedians {
        // The rank test has no place for the drift's own error: the
        // minimum effect stands in for it (see `semantics.md`).
        return Drift { k, ..Drift::NONE };
    }
    // The median's standard error from the ratios' spread (the median
    // absolute deviation, 1.4826 MAD estimating a standard deviation; a
    // median's error is 1.2533 times a mean's).
    let m = ratios.len() as f64;
    let mut deviations: Vec<f64> = ratios.iter().map(|r| (r - k).abs()).collect();
    let sd = 1.4826 * median(&mut deviations);
    Drift {
        k,
        se: 1.2533 * sd / m.sqrt(),
        df: m - 1.0,
    }
}

/// The median of `v` (sorted in place; the mean of the middle two for an
/// even count).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    match v.len() % 2 {
        _ if v.is_empty() => 0.0,
        1 => v[mid],
        _ => (v[mid - 1] + v[mid]) / 2.0,
    }
}

/// The machine's drift and how well the functions told it.
#[derive(Clone, Copy, Debug)]
struct Drift {
    /// The factor.
    k: f64,
    /// Its standard error.
    se: f64,
    /// The degrees of freedom of that error (functions - 1).
    df: f64,
}

impl Drift {
    /// No drift taken.
    const NONE: Drift = Drift {
        k: 1.0,
        se: 0.0,
        df: 1.0,
    };
}

/// Compares two reports (analyzed with the same clock).
pub fn diff(base: &Report, new: &Report, opts: DiffOptions) -> DiffReport {
    let total = |r: &Report| {
        r.functions
            .iter()
            .fold(0u64, |t, f| t.saturating_add(f.tottime_ns))
    };
    let base_raw = total(base);
    let new_total = total(new);
    let s = if opts.normalize && base_raw > 0 {
        new_total as f64 / base_raw as f64
    } else {
        1.0
    };
    let pairs = match_functions(&base.functions, &new.functions);
    let largest_total = (base_raw as f64 * s).max(new_total as f64);
    // Decided once: ranks of frames when both reports kept them.
    let has_hist = |r: &Report| r.functions.iter().any(|f| !f.tottime_hist.is_empty());
    let method = match opts.significance.confidence > 0.0 && has_hist(base) && has_hist(new) {
        true => Method::CallMedians,
        false => Method::Calls,
    };
    // The share a rank-tested change needs is of the total the test
    // weighs: frames times median frame, summed (a busy machine's time
    // slices, in the sums, would raise the floor by whatever they add).
    let estimated = |r: &Report| {
        r.functions
            .iter()
            .fold(0.0, |t, f| t + f.tottime_hist.frames_times_median())
    };
    let share_total = match method {
        Method::CallMedians => (estimated(base) * s).max(estimated(new)),
        _ => largest_total,
    };
    let drift_by = |method| {
        let total = match method {
            Method::CallMedians => share_total,
            _ => largest_total,
        };
        match opts.significance.confidence > 0.0 {
            true => drift(base, new, &pairs, s, total, opts.significance, method),
            false => Drift::NONE,
        }
    };
    let drift = drift_by(method);
    // The sums' test (the total's, and a function's on one side only)
    // takes the drift of the sums: a median frame's drift says nothing of
    // the time slices a busy machine adds to a sum.
    let sums_drift = match method {
        Method::CallMedians => drift_by(Method::Calls),
        _ => drift,
    };
    let mut functions = Vec::with_capacity(pairs.len());
    // Base function key -> the new key it matched, to translate edges.
    let mut renamed: HashMap<FunctionKey, FunctionKey> = HashMap::new();
    let mut matched_by_name = 0;
    let mut total = Estimate::default();
    for &(bi, ni, matched) in &pairs {
        let b = bi.map(|i| &base.functions[i]);
        let n = ni.map(|j| &new.functions[j]);
        if let (Some(b), Some(n)) = (b, n) {
            renamed.insert(b.key(), n.key());
        }
        matched_by_name += (matched == Match::Name) as u64;
        let bs = b.map(|f| side(f, s));
        let ns = n.map(|f| side(f, 1.0));
        let (b0, n0) = (bs.unwrap_or_default(), ns.unwrap_or_default());
        let shown = n.or(b).map(FunctionStats::key).unwrap_or_default();
        let mut estimate = Estimate::of(frames(b, s * sums_drift.k), frames(n, 1.0), true);
        // The drift is an estimate too: its error, times the base, is part
        // of the change's spread.
        let err = sums_drift.se * s * b.map_or(0.0, |f| f.tottime_ns as f64);
        estimate.var += err * err;
        estimate.var2_df += err.powi(4) / sums_drift.df;
        total = total.plus(estimate);
        let (tested, compared) = match (method, b, n) {
            (Method::CallMedians, Some(b), Some(n)) => {
                let m = MedianChange::of(&b.tottime_hist, &n.tottime_hist, s * drift.k);
                let compared = ComparedTimes {
                    base_ns: m.base.round() as u64,
                    new_ns: (m.base + m.delta).round() as u64,
                };
                (m.test(opts.significance, share_total), Some(compared))
            }
            // A function on one side only: all its time came or went, and
            // the sums say how surely.
            _ => (estimate.test(opts.significance, largest_total), None),
        };
        functions.push(FunctionDiff {
            function: shown.function,
            file: shown.file,
            line: shown.line,
            matched,
            base: bs,
            new: ns,
            delta: FunctionDelta {
                ncalls: d(n0.ncalls, b0.ncalls),
                primitive_calls: d(n0.primitive_calls, b0.primitive_calls),
                tottime_ns: d(n0.tottime_ns, b0.tottime_ns),
                cumtime_ns: d(n0.cumtime_ns, b0.cumtime_ns),
                paused_ns: d(n0.paused_ns, b0.paused_ns),
            },
            verdict: tested.verdict,
            p_value: tested.p_value,
            compared,
            base_range: None,
            new_range: None,
        });
    }
    functions.sort_by(|a, b| {
        b.delta
            .tottime_ns
            .unsigned_abs()
            .cmp(&a.delta.tottime_ns.unsigned_abs())
            .then_with(|| (&a.function, &a.file, a.line).cmp(&(&b.function, &b.file, b.line)))
    });

    let translate = |k: FunctionKey| renamed.get(&k).cloned().unwrap_or(k);
    let mut sides = EdgeSides::new();
    for e in &base.edges {
        let key = (translate(e.caller_key()), translate(e.callee_key()));
        sides.entry(key).or_default().0 = Some(edge_side(e, s));
    }
    for e in &new.edges {
        let key = (e.caller_key(), e.callee_key());
        sides.entry(key).or_default().1 = Some(edge_side(e, 1.0));
    }
    let mut edges: Vec<EdgeDiff> = sides
        .into_iter()
        .map(|((caller, callee), (b, n))| {
            let (b0, n0) = (b.unwrap_or_default(), n.unwrap_or_default());
            EdgeDiff {
                caller: caller.function,
                caller_file: caller.file,
                caller_line: caller.line,
                callee: callee.function,
                callee_file: callee.file,
                callee_line: callee.line,
                base: b,
                new: n,
                delta: EdgeDelta {
                    ncalls: d(n0.ncalls, b0.ncalls),
                    primitive_calls: d(n0.primitive_calls, b0.primitive_calls),
                    tottime_ns: d(n0.tottime_ns, b0.tottime_ns),
                    cumtime_ns: d(n0.cumtime_ns, b0.cumtime_ns),
                },
            }
        })
        .collect();
    edges.sort_by(|a, b| {
        b.delta
            .tottime_ns
            .unsigned_abs()
            .cmp(&a.delta.tottime_ns.unsigned_abs())
            .then_with(|| (&a.caller, &a.callee).cmp(&(&b.caller, &b.callee)))
    });

    // Paths pair up by the functions' identities (a base function as the
    // new one it matched), and print with the labels of the diff's rows:
    // a name that two functions share in either trace is qualified on both
    // sides, so the sides' paths meet whatever each trace alone would say.
    let labels = Labels::new(functions.iter().map(|f| LabelSite {
        function: &f.function,
        file: &f.file,
        line: f.line,
        module: "",
    }));
    let label_of: HashMap<FunctionKey, &str> = functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.key(), labels.get(i)))
        .collect();
    let mut paths: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (r, is_new) in [(base, false), (new, true)] {
        for p in &r.paths {
            let mut frames: Vec<&str> = Vec::with_capacity(p.frames.len() + 1);
            if !p.stack.is_empty() {
                frames.push(&p.stack);
            }
            frames.extend(p.frames.iter().filter_map(|&i| {
                let f = r.functions.get(i as usize)?;
                let key = match is_new {
                    true => f.key(),
                    false => translate(f.key()),
                };
                label_of.get(&key).copied()
            }));
            let e = paths.entry(frames.join(";")).or_default();
            if is_new {
                e.1 = e.1.saturating_add(p.self_ns);
            } else {
                e.0 = e.0.saturating_add(scale(p.self_ns, s));
            }
        }
    }

    let total = total.test(opts.significance, 0.0);
    DiffReport {
        base: base.trace.clone(),
        new: new.trace.clone(),
        clock: new.clock,
        normalized: opts.normalize,
        base_scale: s,
        base_total_ns: scale(base_raw, s),
        new_total_ns: new_total,
        matched_by_name,
        significance: Significance {
            method,
            drift: drift.k,
            options: opts.significance,
        },
        total_verdict: total.verdict,
        total_p_value: total.p_value,
        functions,
        edges,
        paths: paths
            .into_iter()
            .map(|(path, (base_ns, new_ns))| PathDiff {
                path,
                base_ns,
                new_ns,
            })
            .collect(),
    }
}

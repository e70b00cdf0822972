//! Whether a function's change of self time stands out of the noise: the
//! tests a diff runs per function, and the verdict every output shows
//! ("Significance of a diff" in `schemas/semantics.md`).
//!
//! The frames are the samples, compared one of two ways ([`Method`]).
//! With per-frame histograms on both sides
//! ([`crate::report::FunctionStats::tottime_hist`]), by rank: Mann-Whitney's
//! test of NEW's frames against the base's, stretched by the machine's
//! drift ([`mann_whitney`], [`MedianChange`]). On a busy machine a few
//! percent of the frames lose whole time slices; they hold most of a sum's
//! variance, and a test of sums then sees nothing, where ranks and
//! medians hardly move. Without histograms (a report saved before they
//! were kept), by sums: given the number of frames (counted exactly), a
//! sum's variance is the frame count times the per-frame variance, kept
//! as the sum of squares ([`crate::report::FunctionStats::tottime_sq`]),
//! and the difference of two sums is tested with Welch's t-test
//! ([`Estimate`]). With several runs on both sides, the samples are the
//! runs' self times instead, each estimated as frames times median frame
//! ([`crate::runs`]): run-to-run noise (another process, a colder cache)
//! then counts as noise, where frames of one run share it.
//!
//! A change is called `slower` or `faster` only when the test rejects
//! "no change" at the stated confidence *and* the change is at least a
//! minimum share of the base (`min_effect_pct`): frames of one run are not
//! independent samples of the machine's speed (a busy machine slows them
//! all at once), so with many frames the test alone would call a few
//! percent of drift significant.

use serde::{Deserialize, Serialize};

use crate::histogram::{bucket_middle, SelfTimeHistogram};

/// What makes a change significant.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignificanceOptions {
    /// The confidence level of the test (`0.999`: a change is significant
    /// when noise alone would give one at least as large less than 0.1%
    /// of the time: a diff tests every function, and one in a hundred
    /// would be one false verdict in most diffs of a large program). `0` turns the test off: every change of at least
    /// `min_effect_pct` counts.
    pub confidence: f64,
    /// The smallest change, in percent of the base's self time, that counts.
    pub min_effect_pct: f64,
    /// ... and in percent of the larger of the two traces' total self
    /// times: a function whose time is mostly the machine's (the
    /// recorder's own cost in a parent of many calls, a page fault)
    /// drifts by more than `min_effect_pct` from run to run, by an amount
    /// no one would fail a build for.
    #[serde(default)]
    pub min_share_pct: f64,
}

impl Default for SignificanceOptions {
    fn default() -> SignificanceOptions {
        SignificanceOptions {
            confidence: 0.999,
            min_effect_pct: 10.0,
            min_share_pct: 0.5,
        }
    }
}

/// Which samples the test compared (decided once per diff).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// One trace a side (or a side of one run), from reports without
    /// per-frame histograms (or the test off): the frames are the samples,
    /// Welch's t-test on their sums.
    #[default]
    Calls,
    /// One trace a side, both with per-frame histograms: each function's
    /// frames compared by rank (Mann-Whitney), the base's taken at the
    /// self time that would leave the function's time unchanged beyond
    /// the machine's drift; the drift and the effect from per-call medians
    /// ([`MedianChange`]).
    CallMedians,
    /// At least two runs on both sides: the runs' self times are the
    /// samples (each frames times median frame), Welch's t-test.
    Runs,
}

/// What the diff concludes about a function's self time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Significantly more self time.
    Slower,
    /// Significantly less self time.
    Faster,
    /// Within the noise: not significant, or smaller than the minimum effect.
    #[default]
    Noise,
}

impl Verdict {
    /// Whether the function changed (slower or faster).
    pub fn changed(self) -> bool {
        self != Verdict::Noise
    }

    /// Its name as every output prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::Noise => "noise",
        }
    }
}

/// How a diff decided what changed: its options and the samples it tested.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Significance {
    /// Which samples.
    pub method: Method,
    /// The machine's drift: what the base's self times were multiplied by
    /// before testing (the median function's ratio of NEW to BASE, of
    /// median frames by [`Method::CallMedians`]; 1 with the test off or
    /// fewer than five functions to take it from).
    #[serde(default = "one")]
    pub drift: f64,
    /// The level and the minimum effect.
    #[serde(flatten)]
    pub options: SignificanceOptions,
}

/// How many functions a drift is taken from at least: a median of fewer
/// is one or two functions' word, and in a small program the changed
/// function is among them.
pub(crate) const MIN_FOR_DRIFT: usize = 5;

fn one() -> f64 {
    1.0
}

impl Default for Significance {
    fn default() -> Significance {
        Significance {
            method: Method::default(),
            drift: 1.0,
            options: SignificanceOptions::default(),
        }
    }
}

/// One side's samples, reduced to what the test needs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Samples {
    /// How many.
    pub n: f64,
    /// Their sum.
    pub sum: f64,
    /// The sum of their squares.
    pub sum_sq: f64,
}

impl Samples {
    /// The samples `xs`.
    pub fn of(xs: impl IntoIterator<Item = f64>) -> Samples {
        xs.into_iter().fold(Samples::default(), |s, x| Samples {
            n: s.n + 1.0,
            sum: s.sum + x,
            sum_sq: s.sum_sq + x * x,
        })
    }

    /// Every sample multiplied by `k` (a normalized base).
    pub fn scaled(self, k: f64) -> Samples {
        Samples {
            n: self.n,
            sum: self.sum * k,
            sum_sq: self.sum_sq * k * k,
        }
    }

    /// The unbiased sample variance (`None` below two samples). Rounding
    /// can make it a hair negative when every sample is equal: that is 0.
    fn variance(&self) -> Option<f64> {
        if self.n < 2.0 {
            return None;
        }
        let v = (self.sum_sq - self.sum * self.sum / self.n) / (self.n - 1.0);
        Some(v.max(0.0))
    }
}

/// The test's outcome for one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tested {
    /// The verdict.
    pub verdict: Verdict,
    /// The two-sided p-value: how often noise alone would give a change at
    /// least this large. `None` when no test could be made (a side with
    /// time but fewer than two samples).
    pub p_value: Option<f64>,
}

/// A change and its spread: what the test reads, and what adds up over
/// functions (the total self time's change is the sum of theirs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    /// BASE's value (a sum, or a mean over runs).
    pub base: f64,
    /// NEW minus BASE.
    pub delta: f64,
    /// The variance of `delta`.
    pub var: f64,
    /// Σ (a term's variance)² / (its degrees of freedom), for the
    /// Welch–Satterthwaite degrees of freedom `var² / var2_df`.
    pub var2_df: f64,
    /// False when a side has time but fewer than two samples: its spread
    /// is unknown, and no test can be made.
    pub testable: bool,
}

impl Estimate {
    /// NEW against BASE. `totals`: the sums are compared (per-frame
    /// samples, the frame counts taken as exact); else the means (per-run
    /// samples). A side without the function is an empty [`Samples`].
    pub fn of(base: Samples, new: Samples, totals: bool) -> Estimate {
        let value = |s: &Samples| match totals {
            true => s.sum,
            false => s.sum / s.n.max(1.0),
        };
        // A side's variance, and that variance squared over its df.
        let spread = |s: &Samples| -> Option<(f64, f64)> {
            if s.n == 0.0 || s.sum == 0.0 && s.sum_sq == 0.0 {
                // No time on this side: exactly zero, no variance.
                return Some((0.0, 0.0));
            }
            if s.sum_sq == 0.0 {
                // Time without squares: a report from before they were kept.
                return None;
            }
            let var = s.variance()?;
            // Variance of the sum (n s²) or of the mean (s² / n).
            let v = if totals { s.n * var } else { var / s.n };
            Some((v, v * v / (s.n - 1.0)))
        };
        let (b, n) = (value(&base), value(&new));
        let mut e = Estimate {
            base: b,
            delta: n - b,
            ..Estimate::default()
        };
        if let (Some(sb), Some(sn)) = (spread(&base), spread(&new)) {
            e.var = sb.0 + sn.0;
            e.var2_df = sb.1 + sn.1;
            e.testable = true;
        }
        e
    }

    /// The sum of two independent changes (two functions' self times).
    /// An untestable term adds its change but no spread (a function of one
    /// call a side, `main` often): the sum is testable if any term is.
    pub fn plus(self, other: Estimate) -> Estimate {
        Estimate {
            base: self.base + other.base,
            delta: self.delta + other.delta,
            var: self.var + other.var,
            var2_df: self.var2_df + other.var2_df,
            testable: self.testable || other.testable,
        }
    }

    /// The two-sided p-value of Welch's t-test, if one can be made.
    pub fn p_value(&self) -> Option<f64> {
        if !self.testable {
            return None;
        }
        if self.var <= 0.0 {
            // No spread at all: a difference is certain, none is none.
            return Some(if self.delta == 0.0 { 1.0 } else { 0.0 });
        }
        let t = self.delta / self.var.sqrt();
        let df = if self.var2_df > 0.0 {
            self.var * self.var / self.var2_df
        } else {
            f64::INFINITY
        };
        Some(student_t_p(t, df))
    }

    /// The verdict at `opts`; `total` is the larger of the two traces'
    /// total self times (in the estimate's units: a mean run's with runs).
    pub fn test(&self, opts: SignificanceOptions, total: f64) -> Tested {
        decide(self.base, self.delta, self.p_value(), opts, total)
    }
}

/// The verdict on a change `delta` of a function whose base is `base`,
/// given the test's p-value: significant at `opts`' level, at least the
/// minimum effect of `base`, and the minimum share of `total`.
fn decide(
    base: f64,
    delta: f64,
    p_value: Option<f64>,
    opts: SignificanceOptions,
    total: f64,
) -> Tested {
    let share = delta.abs() * 100.0 >= opts.min_share_pct * total;
    let big_enough = share
        && if base > 0.0 {
            (delta / base).abs() * 100.0 >= opts.min_effect_pct
        } else {
            delta != 0.0
        };
    let significant = match p_value {
        _ if opts.confidence <= 0.0 => delta != 0.0,
        Some(p) => p < 1.0 - opts.confidence,
        None => false,
    };
    let verdict = match (significant && big_enough, delta > 0.0) {
        (false, _) => Verdict::Noise,
        (true, true) => Verdict::Slower,
        (true, false) => Verdict::Faster,
    };
    Tested { verdict, p_value }
}

/// The fewest frames a side the rank test is made with: below, the normal
/// approximation of Mann-Whitney's U is too rough at the levels a diff is
/// read at, and no test is made (`p_value` null, `noise`). Eight a side
/// can reach p < 0.001 when every frame of one side is the slower.
pub const MIN_FRAMES_FOR_RANKS: u64 = 8;

/// Mann-Whitney's U of one side's frames against another's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankTest {
    /// NEW's U: the pairs (a base frame, a NEW frame) in which NEW's is the
    /// longer, ties counting one half.
    pub u: f64,
    /// `(U − n_base n_new / 2) / σ`, σ with the tie correction: positive
    /// when NEW's frames tend to be the longer.
    pub z: f64,
    /// The two-sided p-value of `z` (normal approximation, no continuity
    /// correction); 1 when every frame ties.
    pub p: f64,
}

/// Mann-Whitney's test of `new`'s frames against `base`'s, each of the
/// base's multiplied by `scale`. A bucket's frames all take its middle
/// value ([`bucket_middle`]): frames of one bucket tie, and so do frames
/// of the two sides at one value; ties take their mean rank and reduce
/// the variance by `Σ (t³ − t) / (N (N − 1))`. `None` when a side has no
/// frame.
pub fn mann_whitney(
    base: &SelfTimeHistogram,
    scale: f64,
    new: &SelfTimeHistogram,
) -> Option<RankTest> {
    let (nb, nn) = (base.count() as f64, new.count() as f64);
    if nb == 0.0 || nn == 0.0 {
        return None;
    }
    let mut b = base
        .iter()
        .map(|(k, c)| (bucket_middle(k) * scale, c))
        .peekable();
    let mut n = new.iter().map(|(k, c)| (bucket_middle(k), c)).peekable();
    let (mut below, mut rank_sum_new, mut ties) = (0f64, 0f64, 0f64);
    loop {
        let v = match (b.peek(), n.peek()) {
            (Some(x), Some(y)) => x.0.min(y.0),
            (Some(x), None) => x.0,
            (None, Some(y)) => y.0,
            (None, None) => break,
        };
        let cb = b.next_if(|x| x.0 == v).map_or(0, |x| x.1) as f64;
        let cn = n.next_if(|y| y.0 == v).map_or(0, |y| y.1) as f64;
        let t = cb + cn;
        // Ranks below + 1 ..= below + t: their mean.
        rank_sum_new += cn * (below + (t + 1.0) / 2.0);
        ties += t * t * t - t;
        below += t;
    }
    let total = nb + nn;
    let u = rank_sum_new - nn * (nn + 1.0) / 2.0;
    let var = nb * nn / 12.0 * ((total + 1.0) - ties / (total * (total - 1.0)));
    if var <= 0.0 {
        return Some(RankTest { u, z: 0.0, p: 1.0 });
    }
    let z = (u - nb * nn / 2.0) / var.sqrt();
    Some(RankTest {
        u,
        z,
        // The fit's error above 1 at z = 0 is not a probability.
        p: erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0),
    })
}

/// A function's change under [`Method::CallMedians`]: its self time
/// estimated as frames times median frame, NEW's against the base's times
/// `scale` (the machine's drift, and `--normalize`'s factor).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MedianChange {
    /// The base's estimate: `scale × n_base × median_base`.
    pub base: f64,
    /// NEW's estimate minus it: `n_new × median_new − base`.
    pub delta: f64,
    /// Mann-Whitney's two-sided p-value of NEW's frames against the
    /// base's multiplied by `scale × n_base / n_new` (each base frame as
    /// long as it would have to be for the function's time to be
    /// unchanged); `None` below [`MIN_FRAMES_FOR_RANKS`] frames a side.
    pub p_value: Option<f64>,
}

impl MedianChange {
    /// NEW's frames against the base's multiplied by `scale`.
    pub fn of(base: &SelfTimeHistogram, new: &SelfTimeHistogram, scale: f64) -> MedianChange {
        let (nb, nn) = (base.count(), new.count());
        let b = scale * base.frames_times_median();
        let p_value = match nb.min(nn) >= MIN_FRAMES_FOR_RANKS {
            true => mann_whitney(base, scale * nb as f64 / nn as f64, new).map(|t| t.p),
            false => None,
        };
        MedianChange {
            base: b,
            delta: new.frames_times_median() - b,
            p_value,
        }
    }

    /// The verdict at `opts`; `total` is the larger of the two traces'
    /// total self times.
    pub fn test(&self, opts: SignificanceOptions, total: f64) -> Tested {
        decide(self.base, self.delta, self.p_value, opts, total)
    }
}

/// The two-sided p-value of Student's t with `df` degrees of freedom.
pub(crate) fn student_t_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return if t.is_nan() { 1.0 } else { 0.0 };
    }
    if df > 1e5 || !df.is_finite() {
        // The normal limit (the continued fraction converges slowly there).
        return erfc(t.abs() / std::f64::consts::SQRT_2);
    }
    let x = df / (df + t * t);
    incomplete_beta(df / 2.0, 0.5, x).clamp(0.0, 1.0)
}

/// The complementary error function (Numerical Recipes' Chebyshev fit,
/// relative error below 1.2e-7: far below any level a diff is read at).
pub(crate) fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the series where it is accurate.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast on this side of the mean.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..10_000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-12 {
            break;
        }
    }
    h
}

/// A p-value as the outputs print it: three significant digits, `<0.001`
/// below that, `-` when no test was made.
pub fn format_p(p: Option<f64>) -> String {
    match p {
        None => "-".to_owned(),
        Some(p) if p < 0.001 => "<0.001".to_owned(),
        Some(p) => format!("{p:.3}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(base: Samples, new: Samples, totals: bool, opts: SignificanceOptions) -> Tested {
        Estimate::of(base, new, totals).test(opts, 0.0)
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn distributions_match_their_tables() {
        // erfc(1), erfc(0), and the normal's two-sided 5% at 1.959964.
        assert!(close(erfc(1.0), 0.157_299_207, 1e-7));
        assert!(close(erfc(0.0), 1.0, 1e-7));
        assert!(close(student_t_p(1.959_964, f64::INFINITY), 0.05, 1e-6));
        // Student's t two-sided critical values: 2.228139 for 10 df and
        // 5%, 4.032143 for 5 df and 1%, 12.7062 for 1 df and 5%.
        assert!(close(student_t_p(2.228_139, 10.0), 0.05, 1e-6));
        assert!(close(student_t_p(-4.032_143, 5.0), 0.01, 1e-6));
        assert!(close(student_t_p(12.706_2, 1.0), 0.05, 1e-5));
        assert!(close(student_t_p(0.0, 7.0), 1.0, 1e-12));
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-12));
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-12
        ));
    }

    #[test]
    fn welch_on_means_matches_a_worked_example() {
        // Two runs' samples: means 20 and 22, variances 2.5 and 2.5, five
        // each: t = -2 / sqrt(0.5 + 0.5) = -2, df = 8; p = 0.0805.
        let a = Samples::of([18.0, 19.0, 20.0, 21.0, 22.0]);
        let b = Samples::of([20.0, 21.0, 22.0, 23.0, 24.0]);
        let loose = SignificanceOptions {
            confidence: 0.9,
            min_effect_pct: 5.0,
            min_share_pct: 0.0,
        };
        let t = test(a, b, false, loose);
        assert!(close(t.p_value.unwrap(), 0.080_5, 1e-4), "{t:?}");
        assert_eq!(t.verdict, Verdict::Slower, "+10% at 90%");
        let strict = test(a, b, false, SignificanceOptions::default());
        assert_eq!(strict.verdict, Verdict::Noise, "not at 99.9%");
    }

    #[test]
    fn totals_count_frames_and_their_spread() {
        // 1000 frames of 100 +- 10 against 1000 of 125 +- 10: +25%, far
        // beyond the spread of a sum (sd of each sum: sqrt(1000) * 10).
        let frames = |mean: f64| Samples {
            n: 1000.0,
            sum: 1000.0 * mean,
            sum_sq: 1000.0 * (mean * mean + 100.0 * 0.999),
        };
        let t = test(frames(100.0), frames(125.0), true, Default::default());
        assert_eq!(t.verdict, Verdict::Slower);
        assert!(t.p_value.unwrap() < 1e-12);
        // +2% is significant with so many frames (t = 2000 / sqrt(2e5) =
        // 4.5), but below the 10% minimum.
        let t = test(frames(100.0), frames(102.0), true, Default::default());
        assert!(t.p_value.unwrap() < 0.01);
        assert_eq!(t.verdict, Verdict::Noise);
        // The test off (confidence 0) and no minimum: any change counts.
        let off = SignificanceOptions {
            confidence: 0.0,
            min_effect_pct: 0.0,
            min_share_pct: 0.0,
        };
        assert_eq!(
            test(frames(100.0), frames(102.0), true, off).verdict,
            Verdict::Slower
        );
    }

    #[test]
    fn a_change_too_small_a_share_of_the_total_is_noise() {
        let frames = |mean: f64| Samples {
            n: 1000.0,
            sum: 1000.0 * mean,
            sum_sq: 1000.0 * (mean * mean + 1.0),
        };
        // +25% of 100 000 is 25 000: 0.25% of a 10 000 000 total.
        let e = Estimate::of(frames(100.0), frames(125.0), true);
        assert_eq!(e.test(Default::default(), 1e7).verdict, Verdict::Noise);
        assert_eq!(e.test(Default::default(), 1e6).verdict, Verdict::Slower);
    }

    #[test]
    fn one_frame_cannot_be_tested_and_is_noise() {
        let one = |x: f64| Samples::of([x]);
        let t = test(one(40.0), one(50.0), true, Default::default());
        assert_eq!((t.verdict, t.p_value), (Verdict::Noise, None));
        // A function new in NEW with many equal frames: certainly there.
        let t = test(
            Samples::default(),
            Samples::of([5.0; 4]),
            true,
            Default::default(),
        );
        assert_eq!((t.verdict, t.p_value), (Verdict::Slower, Some(0.0)));
        // Gone: faster.
        let t = test(
            Samples::of([5.0, 6.0, 5.0, 6.0, 5.0, 6.0]),
            Samples::default(),
            true,
            Default::default(),
        );
        assert_eq!(t.verdict, Verdict::Faster);
    }

    fn hist(values: &[u64]) -> SelfTimeHistogram {
        values.iter().copied().collect()
    }

    #[test]
    fn mann_whitney_matches_hand_computations() {
        // No ties: every NEW value above every base value. U = 25,
        // mean 12.5, σ² = 5·5·11/12 = 22.917, z = 12.5/4.787 = 2.611,
        // two-sided p = 0.00902.
        let t = mann_whitney(&hist(&[1, 2, 3, 4, 5]), 1.0, &hist(&[6, 7, 8, 9, 10])).unwrap();
        assert_eq!(t.u, 25.0);
        assert!(close(t.z, 2.611_165, 1e-5), "{t:?}");
        assert!(close(t.p, 0.009_023, 1e-5), "{t:?}");
        // Ties: base 1 2 2 3, NEW 2 3 3 4. Pooled ranks: 1 -> 1, the
        // three 2s -> 3, the three 3s -> 6, 4 -> 8; NEW's rank sum 23, U =
        // 23 − 10 = 13, mean 8; σ² = 16/12 · (9 − (24 + 24)/56) = 10.857,
        // z = 5/3.2950 = 1.5174, p = 0.1292.
        let t = mann_whitney(&hist(&[1, 2, 2, 3]), 1.0, &hist(&[2, 3, 3, 4])).unwrap();
        assert_eq!(t.u, 13.0);
        assert!(close(t.z, 1.517_42, 1e-4), "{t:?}");
        assert!(close(t.p, 0.129_2, 1e-4), "{t:?}");
        // The sides swapped: the same p, z negated.
        let back = mann_whitney(&hist(&[2, 3, 3, 4]), 1.0, &hist(&[1, 2, 2, 3])).unwrap();
        assert_eq!((back.u, back.p), (3.0, t.p));
        assert!(close(back.z, -t.z, 1e-12));
        // The base scaled: 1..5 times 2 is 2 4 6 8 10 against 1 3 5 7 9:
        // NEW is the longer in 10 of the 25 pairs.
        let t = mann_whitney(&hist(&[1, 2, 3, 4, 5]), 2.0, &hist(&[1, 3, 5, 7, 9])).unwrap();
        assert_eq!(t.u, 10.0);
        // All tied: no spread, p = 1; a side without frames: no test.
        let same = mann_whitney(&hist(&[7; 10]), 1.0, &hist(&[7; 10])).unwrap();
        assert_eq!((same.u, same.p), (50.0, 1.0));
        assert_eq!(mann_whitney(&hist(&[]), 1.0, &hist(&[7])), None);
    }

    #[test]
    fn medians_flag_a_shift_that_preempted_frames_hide_from_the_sums() {
        // 2000 frames of 100..=139 ns, 3% of them preempted for 4 ms; NEW
        // runs each frame 25% longer. The sums' spread is the time
        // slices'; the ranks see every frame move.
        let frames = |stretch: f64, seed: u64| -> Vec<u64> {
            (0..2000u64)
                .map(|i| match (i * 7919 + seed) % 100 < 3 {
                    true => 4_000_000,
                    false => ((100 + (i * 31 + seed) % 40) as f64 * stretch) as u64,
                })
                .collect()
        };
        let (a, a2, b) = (frames(1.0, 0), frames(1.0, 5), frames(1.25, 11));
        let sums = |x: &[u64]| Samples::of(x.iter().map(|&v| v as f64));
        let welch = Estimate::of(sums(&a), sums(&b), true).test(Default::default(), 0.0);
        assert_eq!(welch.verdict, Verdict::Noise, "{welch:?}");
        let m = MedianChange::of(&hist(&a), &hist(&b), 1.0);
        let t = m.test(Default::default(), 0.0);
        assert_eq!(t.verdict, Verdict::Slower, "{m:?}");
        assert!(t.p_value.unwrap() < 1e-12, "{m:?}");
        assert!(close(m.delta / m.base, 0.25, 0.03), "{m:?}");
        // A/A: noise.
        let m = MedianChange::of(&hist(&a), &hist(&a2), 1.0);
        assert_eq!(
            m.test(Default::default(), 0.0).verdict,
            Verdict::Noise,
            "{m:?}"
        );
        // The same frames on a machine 25% slower, the drift taken out.
        let m = MedianChange::of(&hist(&a), &hist(&b), 1.25);
        assert_eq!(
            m.test(Default::default(), 0.0).verdict,
            Verdict::Noise,
            "{m:?}"
        );
        // Twice the frames, each as long: the function's time doubled.
        let twice: Vec<u64> = a.iter().chain(&a2).copied().collect();
        let m = MedianChange::of(&hist(&a), &hist(&twice), 1.0);
        assert_eq!(
            m.test(Default::default(), 0.0).verdict,
            Verdict::Slower,
            "{m:?}"
        );
        // Seven frames a side: no test.
        let m = MedianChange::of(&hist(&[100; 7]), &hist(&[200; 7]), 1.0);
        assert_eq!(
            m.test(Default::default(), 0.0),
            Tested {
                verdict: Verdict::Noise,
                p_value: None
            }
        );
        let m = MedianChange::of(&hist(&[100; 8]), &hist(&[200; 8]), 1.0);
        assert_eq!(m.test(Default::default(), 0.0).verdict, Verdict::Slower);
    }

    #[test]
    fn p_values_print_short() {
        assert_eq!(format_p(None), "-");
        assert_eq!(format_p(Some(0.0004)), "<0.001");
        assert_eq!(format_p(Some(0.0123)), "0.012");
    }
}

//! Each function's frames by self time, on a log scale: the per-call
//! samples a diff compares ("Significance of a diff" in
//! `schemas/semantics.md`), kept in a few hundred bytes however many
//! calls there were.
//!
//! **The bucket rule.** A self time of `v` ns below 32 is its own bucket
//! (`v`). From 32 on, with `e` the position of `v`'s leading one bit
//! (`2^e ≤ v < 2^(e+1)`) and `m` the 4 bits below it, the bucket is
//! `16 (e − 3) + m`: 16 buckets a doubling, each `2^(e−4)` ns wide, so a
//! bucket's width is at most 1/16 of its values. The buckets follow each
//! other without gap (bucket 32 holds 32 and 33); the last one, 975,
//! ends at `u64::MAX`. Counts add: histograms merge in any order
//! (traces, runs, the replay's workers) to the same one.
//!
//! A histogram keeps one contiguous window of counts (from the smallest
//! bucket used to the largest), so adding a frame is an index and an
//! increment; a function's frames fill a few dozen to a few hundred
//! buckets. In a report's JSON it is sparse, one string of
//! `bucket:count` pairs (`"5:1 57:2 270:1"`), buckets ascending, no zero
//! count: a pretty-printed array would take four lines a bucket.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bits of a value kept below its leading one: 16 buckets a doubling.
const SUB_BITS: u32 = 4;
/// Values below this are their own bucket (the rule is exact there).
const EXACT: u64 = 2 << SUB_BITS;
/// How many buckets there are (the largest is `BUCKETS - 1`).
pub const BUCKETS: u16 = (16 * (63 - 3) + 15 + 1) as u16;

/// The bucket of a self time of `ns` nanoseconds (the module doc's rule).
#[inline(always)]
pub fn bucket_of(ns: u64) -> u16 {
    // Without branches: `shift` is e − 4 (0 below 32, where the rule is
    // the identity), and `ns >> shift` is the leading one and the 4 bits
    // below it, 16 + m.
    let e = 63 - (ns | (1 << SUB_BITS)).leading_zeros();
    let shift = e - SUB_BITS;
    ((u64::from(shift) << SUB_BITS) + (ns >> shift)) as u16
}

/// The smallest and the largest self time bucket `b` holds (`None` past
/// the last bucket).
pub fn bucket_bounds(b: u16) -> Option<(u64, u64)> {
    if b >= BUCKETS {
        return None;
    }
    let b = u64::from(b);
    if b < EXACT {
        return Some((b, b));
    }
    let e = (b >> SUB_BITS) as u32 + (SUB_BITS - 1);
    let m = b & ((1 << SUB_BITS) - 1);
    let shift = e - SUB_BITS;
    let lo = ((1 << SUB_BITS) + m) << shift;
    Some((lo, lo + ((1u64 << shift) - 1)))
}

/// Per-frame self times of one function, counted by bucket (see the
/// module doc). Equal when they count the same frames in the same
/// buckets, however their windows were grown.
#[derive(Clone, Debug, Default)]
pub struct SelfTimeHistogram {
    /// The bucket of `counts[0]`.
    first: u16,
    /// Counts of buckets `first..first + counts.len()`.
    counts: Vec<u64>,
}

impl SelfTimeHistogram {
    /// Counts a frame of `ns` nanoseconds of self time.
    #[inline(always)]
    pub fn add(&mut self, ns: u64) {
        self.add_frames(ns, 1);
    }

    /// Counts `n` frames (0 or 1, from a flag: no branch on it) of `ns`
    /// nanoseconds of self time.
    #[inline(always)]
    pub fn add_frames(&mut self, ns: u64, n: u64) {
        let b = bucket_of(ns);
        match self.counts.get_mut(usize::from(b.wrapping_sub(self.first))) {
            // No count reaches 2^64 frames.
            Some(c) => *c += n,
            None => self.add_count(b, n),
        }
    }

    /// Counts `count` frames in bucket `b` (below [`BUCKETS`]).
    pub fn add_count(&mut self, b: u16, count: u64) {
        debug_assert!(b < BUCKETS);
        if count == 0 {
            return;
        }
        if self.counts.is_empty() {
            self.first = b;
        } else if b < self.first {
            let grow = usize::from(self.first - b);
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.first = b;
        }
        let i = usize::from(b - self.first);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] = self.counts[i].saturating_add(count);
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &SelfTimeHistogram) {
        if self.counts.is_empty() {
            self.first = other.first;
            self.counts.clear();
            self.counts.extend_from_slice(&other.counts);
            return;
        }
        for (b, c) in other.iter() {
            self.add_count(b, c);
        }
    }

    /// Forgets every frame, keeping the memory.
    pub fn clear(&mut self) {
        self.counts.clear();
    }

    /// Whether no frame was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }

    /// Every bucket with frames and its count, buckets ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        let first = self.first;
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c != 0)
            .map(move |(i, &c)| (first + i as u16, c))
    }

    /// How many frames.
    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |n, &c| n.saturating_add(c))
    }

    /// The median self time (`None` without frames). A bucket's `c`
    /// frames are taken as spread evenly over the values it holds, the
    /// `j`-th (from 1) at `lo + (hi − lo)(j − ½)/c`: exact below 32 ns,
    /// within a sixteenth above; of an even count, the mean of the two
    /// middle frames.
    pub fn median(&self) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let at = |k: u64| self.value_at(k);
        Some(match n % 2 {
            1 => at(n / 2),
            _ => (at(n / 2 - 1) + at(n / 2)) / 2.0,
        })
    }

    /// The self time the frames add up to as a rank test weighs it: frames
    /// times median frame (0 without frames). Preemption lands whole time
    /// slices in a few frames, which move a sum by tens of percent and a
    /// median hardly ("Significance of a diff" in `schemas/semantics.md`).
    pub fn frames_times_median(&self) -> f64 {
        self.median().unwrap_or(0.0) * self.count() as f64
    }

    /// The `k`-th frame's value (from 0, ascending), as [`SelfTimeHistogram::median`] spreads them.
    fn value_at(&self, k: u64) -> f64 {
        let mut before = 0u64;
        for (b, c) in self.iter() {
            if k < before + c {
                let (lo, hi) = bucket_bounds(b).unwrap_or((0, 0));
                let j = (k - before) as f64 + 0.5;
                return lo as f64 + (hi - lo) as f64 * j / c as f64;
            }
            before += c;
        }
        0.0
    }
}

/// A bucket's frames represented by one value: the middle of the values it
/// holds (exact below 32 ns). What the rank test compares.
pub fn bucket_middle(b: u16) -> f64 {
    let (lo, hi) = bucket_bounds(b).unwrap_or((0, 0));
    lo as f64 + (hi - lo) as f64 / 2.0
}

impl FromIterator<u64> for SelfTimeHistogram {
    /// The histogram of these self times (ns), one frame each.
    fn from_iter<I: IntoIterator<Item = u64>>(values: I) -> SelfTimeHistogram {
        let mut h = SelfTimeHistogram::default();
        for v in values {
            h.add(v);
        }
        h
    }
}

impl PartialEq for SelfTimeHistogram {
    fn eq(&self, other: &SelfTimeHistogram) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for SelfTimeHistogram {}

impl std::fmt::Display for SelfTimeHistogram {
    /// The JSON form: `bucket:count` for each bucket with frames, buckets
    /// ascending, separated by one space (`"5:1 57:2 270:1"`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (b, c)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{b}:{c}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for SelfTimeHistogram {
    type Err = String;

    /// Reads the [`Display`](std::fmt::Display) form; buckets in any
    /// order, a bucket given twice adds its counts. Whatever the text
    /// says, the window is at most [`BUCKETS`] counts: a bucket past the
    /// last is refused, not allocated.
    fn from_str(s: &str) -> Result<SelfTimeHistogram, String> {
        let mut h = SelfTimeHistogram::default();
        for pair in s.split_ascii_whitespace() {
            let bad = || format!("self time histogram: {pair:?} is not bucket:count");
            let (b, c) = pair.split_once(':').ok_or_else(bad)?;
            let (b, c) = (
                b.parse::<u16>().map_err(|_| bad())?,
                c.parse::<u64>().map_err(|_| bad())?,
            );
            if b >= BUCKETS {
                return Err(format!(
                    "self time histogram: bucket {b} past the last ({})",
                    BUCKETS - 1
                ));
            }
            h.add_count(b, c);
        }
        Ok(h)
    }
}

impl Serialize for SelfTimeHistogram {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SelfTimeHistogram {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<SelfTimeHistogram, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_below_32_and_a_sixteenth_wide_above() {
        for v in 0..32 {
            assert_eq!(bucket_of(v), v as u16);
            assert_eq!(bucket_bounds(v as u16), Some((v, v)));
        }
        assert_eq!(bucket_of(32), 32);
        assert_eq!(bucket_of(33), 32);
        assert_eq!(bucket_of(34), 33);
        assert_eq!(bucket_bounds(32), Some((32, 33)));
        // 100 = 0b1100100: e = 6, m = 0b1001 = 9: bucket 16 * 3 + 9.
        assert_eq!(bucket_of(100), 57);
        assert_eq!(bucket_bounds(57), Some((100, 103)));
        // 1 ms = 1_000_000 ns: e = 19, m = (1e6 >> 15) & 15 = 30 & 15 = 14.
        assert_eq!(bucket_of(1_000_000), 16 * 16 + 14);
        assert_eq!(
            bucket_bounds(16 * 16 + 14),
            Some((30 << 15, (31 << 15) - 1))
        );
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_bounds(BUCKETS - 1).map(|b| b.1), Some(u64::MAX));
        assert_eq!(bucket_bounds(BUCKETS), None);
        // Every bucket starts one past the previous one's end, and every
        // value lands in the bucket whose bounds hold it.
        let mut next = 0u64;
        for b in 0..BUCKETS {
            let (lo, hi) = bucket_bounds(b).unwrap();
            assert_eq!(lo, next, "bucket {b}");
            assert!(hi - lo <= lo / 16 || lo < 32, "bucket {b}");
            for v in [lo, hi, lo + (hi - lo) / 2] {
                assert_eq!(bucket_of(v), b, "{v}");
            }
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    fn of(values: &[u64]) -> SelfTimeHistogram {
        values.iter().copied().collect()
    }

    #[test]
    fn merged_counts_add_in_any_order() {
        let a = of(&[5, 100, 101, 4000, 7]);
        let b = of(&[1_000_000, 3, 100]);
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        assert_eq!(ab, ba);
        assert_eq!(ab, of(&[5, 100, 101, 4000, 7, 1_000_000, 3, 100]));
        assert_eq!(ab.count(), 8);
        assert_eq!(
            ab.iter().collect::<Vec<_>>(),
            [
                (3, 1),
                (5, 1),
                (7, 1),
                (57, 3),
                (bucket_of(4000), 1),
                (270, 1)
            ]
        );
        let mut cleared = ab.clone();
        cleared.clear();
        assert!(cleared.is_empty());
        assert_eq!(cleared, SelfTimeHistogram::default());
        cleared.add(9);
        assert_eq!(cleared, of(&[9]));
    }

    #[test]
    fn medians_are_exact_small_and_interpolated_large() {
        assert_eq!(of(&[]).median(), None);
        assert_eq!(of(&[3, 9, 20]).median(), Some(9.0));
        assert_eq!(of(&[3, 9, 20, 30]).median(), Some(14.5));
        // Four frames in bucket 57 (100..=103): at 100 + 3 (j - 1/2) / 4,
        // the middle two at 101.125 and 101.875.
        assert_eq!(of(&[100, 100, 103, 103]).median(), Some(101.5));
        // One frame in a bucket: its middle.
        assert_eq!(
            of(&[5, 1_000_000, 2_000_000]).median(),
            Some(f64::from(30 << 15) + (32767.0 / 2.0))
        );
    }

    #[test]
    fn json_is_sparse_pairs_and_refuses_a_bucket_past_the_last() {
        let h = of(&[5, 100, 100, 1_000_000]);
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, "\"5:1 57:2 270:1\"");
        let back: SelfTimeHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        // Out of order and repeated: counts add.
        let back: SelfTimeHistogram = serde_json::from_str("\"57:1 5:1 57:1 270:1\"").unwrap();
        assert_eq!(back, h);
        assert_eq!(
            serde_json::from_str::<SelfTimeHistogram>("\"\"").unwrap(),
            SelfTimeHistogram::default()
        );
        for bad in ["\"976:1\"", "\"5\"", "\"a:1\"", "\"5:-1\"", "[[5,1]]"] {
            assert!(
                serde_json::from_str::<SelfTimeHistogram>(bad).is_err(),
                "{bad}"
            );
        }
        assert!(serde_json::from_str::<SelfTimeHistogram>("\"975:1\"").is_ok());
    }
}

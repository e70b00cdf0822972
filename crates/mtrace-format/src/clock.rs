//! How a trace's ticks turn into nanoseconds and dates.
//!
//! The recorder stamps events with raw ticks (the TSC on x86-64, the monotonic
//! clock in nanoseconds elsewhere). The header carries a calibration pair
//! (`calib_ticks` ticks took `calib_ns` nanoseconds) and an anchor
//! (`start_tick` happened at `start_unix_ns`), so
//! `ns = (tick - start_tick) * calib_ns / calib_ticks` and
//! `date = start_unix_ns + ns`.

/// Where ticks come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockKind {
    /// Ticks are nanoseconds (the monotonic clock, or an imported/JSONL trace).
    Nanoseconds,
    /// Ticks are x86-64 time-stamp-counter cycles.
    Tsc,
}

impl ClockKind {
    /// The on-disk code.
    pub fn code(self) -> u16 {
        match self {
            ClockKind::Nanoseconds => 0,
            ClockKind::Tsc => 1,
        }
    }

    /// Parses the on-disk code.
    pub fn from_code(code: u16) -> Option<ClockKind> {
        match code {
            0 => Some(ClockKind::Nanoseconds),
            1 => Some(ClockKind::Tsc),
            _ => None,
        }
    }
}

/// Which analysis clock suits the trace (the analyzer's default when the user gives none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PreferredClock {
    /// No preference: the analyzer uses its own default (`stack`).
    #[default]
    Unspecified,
    /// Stacks of different threads run in parallel.
    Stack,
    /// One thread at a time (an interpreter lock, as in CPython).
    Gil,
    /// Nothing is subtracted.
    Wall,
}

impl PreferredClock {
    /// The on-disk code.
    pub fn code(self) -> u16 {
        match self {
            PreferredClock::Unspecified => 0,
            PreferredClock::Stack => 1,
            PreferredClock::Gil => 2,
            PreferredClock::Wall => 3,
        }
    }

    /// Parses the on-disk code; unknown codes read as `Unspecified`.
    pub fn from_code(code: u16) -> PreferredClock {
        match code {
            1 => PreferredClock::Stack,
            2 => PreferredClock::Gil,
            3 => PreferredClock::Wall,
            _ => PreferredClock::Unspecified,
        }
    }
}

/// The clock description stored in the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockInfo {
    /// Where ticks come from.
    pub kind: ClockKind,
    /// The tick that is time zero of the trace.
    pub start_tick: u64,
    /// The wall-clock date of `start_tick`, in ns since the Unix epoch (0 if unknown).
    pub start_unix_ns: u64,
    /// Calibration: this many ticks ...
    pub calib_ticks: u64,
    /// ... took this many nanoseconds.
    pub calib_ns: u64,
}

impl ClockInfo {
    /// A clock whose ticks are already nanoseconds and whose zero is tick 0.
    pub fn nanoseconds() -> ClockInfo {
        ClockInfo {
            kind: ClockKind::Nanoseconds,
            start_tick: 0,
            start_unix_ns: 0,
            calib_ticks: 1,
            calib_ns: 1,
        }
    }

    /// Nanoseconds since the trace's zero; ticks before `start_tick` read as 0.
    #[inline]
    pub fn ticks_to_ns(&self, tick: u64) -> u64 {
        let elapsed = tick.saturating_sub(self.start_tick);
        if self.calib_ticks == self.calib_ns {
            return elapsed;
        }
        let ns = elapsed as u128 * self.calib_ns as u128 / self.calib_ticks.max(1) as u128;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// A precomputed converter for hot loops (see [`TickScale`]).
    pub fn scale(&self) -> TickScale {
        let (ticks, ns) = (self.calib_ticks.max(1), self.calib_ns);
        let how = if ticks == ns {
            Scale::Identity
        } else if ns == 1 && ticks.is_power_of_two() {
            Scale::Shift(ticks.trailing_zeros())
        } else if ns < ticks {
            // ns / ticks < 1, so 2^64 * ns / ticks fits in 64 bits.
            Scale::Mul((((ns as u128) << 64) / ticks as u128) as u64)
        } else {
            Scale::Exact { ticks, ns }
        };
        TickScale {
            start: self.start_tick,
            how,
        }
    }

    /// Ticks per second, for display.
    pub fn ticks_per_second(&self) -> f64 {
        self.calib_ticks as f64 * 1e9 / self.calib_ns.max(1) as f64
    }
}

/// Ticks to nanoseconds without a division per call: identity, a shift
/// (exact: the JSON-lines converter's power-of-two tick rates), or a 64-bit
/// fixed-point multiply (within 1 ns of [`ClockInfo::ticks_to_ns`];
/// monotone, so ordering is kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickScale {
    start: u64,
    how: Scale,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    Identity,
    Shift(u32),
    Mul(u64),
    Exact { ticks: u64, ns: u64 },
}

impl TickScale {
    /// Nanoseconds since the trace's zero.
    #[inline(always)]
    pub fn ns(&self, tick: u64) -> u64 {
        let elapsed = tick.saturating_sub(self.start);
        match self.how {
            Scale::Identity => elapsed,
            Scale::Shift(s) => elapsed >> s,
            Scale::Mul(m) => ((elapsed as u128 * m as u128) >> 64) as u64,
            Scale::Exact { ticks, ns } => {
                u64::try_from(elapsed as u128 * ns as u128 / ticks as u128).unwrap_or(u64::MAX)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_scale_stays_within_a_nanosecond_of_the_exact_one() {
        let clocks = [
            (1, 1),
            (8, 1),
            (3_000_000_000u64, 1_000_000_000u64),
            (2_894_561_237, 1_000_000_007),
            (1, 3),
        ];
        for (ticks, ns) in clocks {
            let c = ClockInfo {
                kind: ClockKind::Tsc,
                start_tick: 77,
                start_unix_ns: 0,
                calib_ticks: ticks,
                calib_ns: ns,
            };
            let s = c.scale();
            let mut prev = 0;
            for t in [0u64, 77, 78, 1000, 123_456_789, 1 << 40, (1 << 60) - 1] {
                let (fast, exact) = (s.ns(t), c.ticks_to_ns(t));
                assert!(
                    exact.abs_diff(fast) <= 1,
                    "{ticks}/{ns} at {t}: {fast} vs {exact}"
                );
                assert!(fast >= prev);
                prev = fast;
            }
        }
        // Power-of-two rates (the JSON-lines converter's) are exact.
        let c = ClockInfo {
            calib_ticks: 16,
            calib_ns: 1,
            ..ClockInfo::nanoseconds()
        };
        assert_eq!(c.scale().ns(16 * 12345 + 15), 12345);
    }

    #[test]
    fn nanosecond_clock_is_identity() {
        let c = ClockInfo::nanoseconds();
        assert_eq!(c.ticks_to_ns(12345), 12345);
    }

    #[test]
    fn tsc_clock_scales_without_overflow() {
        let c = ClockInfo {
            kind: ClockKind::Tsc,
            start_tick: 1000,
            start_unix_ns: 0,
            calib_ticks: 3_000_000_000,
            calib_ns: 1_000_000_000,
        };
        assert_eq!(c.ticks_to_ns(1000 + 3_000), 1_000);
        assert_eq!(c.ticks_to_ns(500), 0);
        assert_eq!(c.ticks_to_ns(u64::MAX), (u64::MAX - 1000) / 3);
    }
}

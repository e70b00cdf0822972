//! The event clock: the time-stamp counter when it is invariant, else the
//! monotonic clock in nanoseconds.
//!
//! The TSC is read with one `rdtsc` (no fence: events of one thread are
//! ordered by program order, and a few cycles of skew do not matter to a
//! profiler). It is only used when CPUID says it is invariant (leaf
//! `0x8000_0007`, EDX bit 8): it then ticks at a constant rate on every core,
//! through frequency changes and idle states.
//!
//! A recording calibrates twice against `CLOCK_MONOTONIC`: a short spin at
//! start (so a killed recording still has a usable rate) and the whole run
//! at finish (a longer baseline, so a more exact rate). The header keeps the
//! longer of the two.
//!
//! The rate is the machine's, not the recording's (the TSC is invariant), so
//! the process keeps the best one measured ([`best_rate`]): only its first
//! recording spins, and each later one starts with the longest baseline any
//! recording before it had. A binding that starts a recording per
//! `enable()` (a profile per web request) pays the spin once.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use mtrace_format::ClockKind;

use crate::config::ClockSource;

/// How long the start calibration spins: 1 ms, a rate within about 1e-4
/// (the bracketing reads are tens of nanoseconds wide), which the finish
/// calibration over the whole run refines. It is the cost of a process's
/// first start only (see [`best_rate`]), kept short because a language
/// binding's first `enable()` pays it.
const CALIBRATION_NS: u64 = 1_000_000;

/// The process's best TSC rate so far: `(ticks, ns)`, this many ticks took
/// this many nanoseconds, over the longest baseline measured (a start's
/// spin or a whole recording). None until the first calibration.
static BEST_RATE: Mutex<Option<(u64, u64)>> = Mutex::new(None);

/// The process's best TSC rate so far (see [`BEST_RATE`]). (Not
/// `shared::lock`: `shared` builds on this module, which must not import it.)
pub(crate) fn best_rate() -> Option<(u64, u64)> {
    *BEST_RATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Offers a TSC rate measured over `ns` nanoseconds: kept if its baseline
/// is longer than the best one's.
fn offer_rate(ticks: u64, ns: u64) {
    let mut best = BEST_RATE.lock().unwrap_or_else(|e| e.into_inner());
    if best.is_none_or(|(_, best_ns)| ns > best_ns) {
        *best = Some((ticks, ns));
    }
}

/// Reads the event clock: the TSC when `tsc`, else monotonic nanoseconds.
#[inline(always)]
pub(crate) fn ticks(tsc: bool) -> u64 {
    if tsc {
        read_tsc()
    } else {
        monotonic_ns()
    }
}

/// Reads the time-stamp counter (x86-64) or the monotonic clock (elsewhere).
#[inline(always)]
pub fn read_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc exists on every x86-64 CPU and has no preconditions.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
#[inline]
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Nanoseconds since the Unix epoch (0 if the system clock is before it).
pub(crate) fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Whether the CPU has an invariant time-stamp counter: asked once a
/// process. `cpuid` traps to the hypervisor in a virtual machine, which
/// costs more than the rest of a recording's start (a profile per request
/// starts one per request).
pub fn has_invariant_tsc() -> bool {
    static INVARIANT_TSC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INVARIANT_TSC.get_or_init(cpu_has_invariant_tsc)
}

/// [`has_invariant_tsc`], asked of the CPU.
fn cpu_has_invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::__cpuid;
        // SAFETY: cpuid exists on every x86-64 CPU; leaves above the
        // reported maximum are not queried. (Newer compilers call it safe.)
        #[allow(unused_unsafe)]
        unsafe {
            let max_extended = __cpuid(0x8000_0000).eax;
            max_extended >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The clock of one recording: what it reads and where it started.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunClock {
    /// Ticks are TSC cycles (else monotonic nanoseconds).
    pub tsc: bool,
    /// The tick of the anchor.
    pub start_tick: u64,
    /// The monotonic time of the anchor.
    pub start_mono_ns: u64,
    /// The wall-clock date of the anchor.
    pub start_unix_ns: u64,
    /// Start calibration: this many ticks ...
    pub calib_ticks: u64,
    /// ... took this many nanoseconds.
    pub calib_ns: u64,
}

impl RunClock {
    /// Picks the clock and calibrates it (spins about 1 ms for the TSC).
    #[cfg(test)]
    pub fn start(source: ClockSource) -> RunClock {
        Calibration::begin(source).finish()
    }

    pub fn kind(&self) -> ClockKind {
        if self.tsc {
            ClockKind::Tsc
        } else {
            ClockKind::Nanoseconds
        }
    }

    /// Reads the end of the run: `(end_tick, end_unix_ns, calib_ticks, calib_ns)`,
    /// with the calibration over the whole run if that baseline is longer.
    /// The clock of the file after the one whose clock is `self` in a
    /// rotating series: it starts now, on the same ticks, and its start's
    /// wall time is the last file's plus the monotonic time since (so,
    /// from the first file on, a step of the wall clock never moves a file
    /// within its series). The TSC's rate is measured over the last file.
    pub fn next_in_series(&self) -> RunClock {
        let (start_tick, start_mono_ns) = pair(self.tsc);
        let since_ns = start_mono_ns.saturating_sub(self.start_mono_ns);
        let (calib_ticks, calib_ns) = if self.tsc && since_ns > self.calib_ns {
            (start_tick.saturating_sub(self.start_tick).max(1), since_ns)
        } else {
            (self.calib_ticks, self.calib_ns)
        };
        RunClock {
            tsc: self.tsc,
            start_tick,
            start_mono_ns,
            start_unix_ns: self.start_unix_ns.saturating_add(since_ns),
            calib_ticks,
            calib_ns,
        }
    }

    /// Nanoseconds from this clock's start to `tick`, at `calib_ticks`
    /// ticks per `calib_ns` (saturating).
    pub fn ns_since_start(&self, tick: u64, calib_ticks: u64, calib_ns: u64) -> u64 {
        let ticks = u128::from(tick.saturating_sub(self.start_tick));
        let ns = ticks * u128::from(calib_ns) / u128::from(calib_ticks.max(1));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    pub fn finish(&self) -> (u64, u64, u64, u64) {
        let (end_tick, end_mono) = pair(self.tsc);
        let end_unix_ns = unix_ns();
        let run_ns = end_mono.saturating_sub(self.start_mono_ns);
        let (calib_ticks, calib_ns) = if self.tsc && run_ns > self.calib_ns {
            let ticks = end_tick.saturating_sub(self.start_tick).max(1);
            offer_rate(ticks, run_ns);
            (ticks, run_ns)
        } else {
            (self.calib_ticks, self.calib_ns)
        };
        (end_tick, end_unix_ns, calib_ticks, calib_ns)
    }
}

/// A clock calibration under way: the start is taken; the spin that
/// measures the tick rate ends in [`Calibration::finish`]. Work done between
/// the two (creating the trace file) costs the start nothing, as long as it
/// takes less than the calibration's 1 ms.
pub(crate) struct Calibration {
    tsc: bool,
    start_tick: u64,
    start_mono_ns: u64,
    start_unix_ns: u64,
}

impl Calibration {
    /// Picks the clock and reads the start.
    pub fn begin(source: ClockSource) -> Calibration {
        let tsc = source == ClockSource::Auto && has_invariant_tsc();
        let (start_tick, start_mono_ns) = pair(tsc);
        Calibration {
            tsc,
            start_tick,
            start_mono_ns,
            start_unix_ns: unix_ns(),
        }
    }

    /// Waits until the calibration has run 1 ms since [`Calibration::begin`]
    /// and returns the clock: the TSC only, and only the process's first
    /// time (later ones take [`best_rate`]); the monotonic clock needs none.
    pub fn finish(self) -> RunClock {
        let Calibration {
            tsc,
            start_tick,
            start_mono_ns,
            start_unix_ns,
        } = self;
        let (calib_ticks, calib_ns) = if !tsc {
            (1, 1)
        } else if let Some(rate) = best_rate() {
            rate
        } else {
            let mut now = pair(tsc);
            while now.1.saturating_sub(start_mono_ns) < CALIBRATION_NS {
                std::hint::spin_loop();
                now = pair(tsc);
            }
            let rate = (
                now.0.saturating_sub(start_tick).max(1),
                now.1.saturating_sub(start_mono_ns).max(1),
            );
            offer_rate(rate.0, rate.1);
            rate
        };
        RunClock {
            tsc,
            start_tick,
            start_mono_ns,
            start_unix_ns,
            calib_ticks,
            calib_ns,
        }
    }
}

/// A tick and a monotonic time read as close together as possible: the
/// monotonic read is bracketed by two tick reads and paired with their middle.
fn pair(tsc: bool) -> (u64, u64) {
    if !tsc {
        let ns = monotonic_ns();
        return (ns, ns);
    }
    let mut best = (0, 0, u64::MAX);
    for _ in 0..5 {
        let t0 = read_tsc();
        let ns = monotonic_ns();
        let t1 = read_tsc();
        let width = t1.wrapping_sub(t0);
        if width < best.2 {
            best = (t0 + width / 2, ns, width);
        }
    }
    (best.0, best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_gives_a_plausible_rate() {
        let c = RunClock::start(ClockSource::Auto);
        let hz = c.calib_ticks as f64 * 1e9 / c.calib_ns as f64;
        if c.tsc {
            assert!((1e8..1e11).contains(&hz), "{hz} Hz");
        } else {
            assert_eq!(hz, 1e9);
        }
        let (end, _, ticks, ns) = c.finish();
        assert!(end >= c.start_tick);
        assert!(ticks > 0 && ns > 0);
    }

    #[test]
    fn only_the_first_calibration_spins_later_ones_take_the_best_rate() {
        let first = RunClock::start(ClockSource::Auto);
        if !first.tsc {
            return; // no TSC here: nothing is calibrated
        }
        let best = best_rate().expect("the first calibration keeps its rate");
        // A later start takes the process's rate as it is, without a spin
        // of its own (which would measure another baseline).
        let later = RunClock::start(ClockSource::Auto);
        assert_eq!((later.calib_ticks, later.calib_ns), best);
        // A longer baseline replaces it; a shorter one does not.
        offer_rate(best.0 * 3, best.1 * 3);
        assert_eq!(best_rate(), Some((best.0 * 3, best.1 * 3)));
        offer_rate(1, 1);
        assert_eq!(best_rate(), Some((best.0 * 3, best.1 * 3)));
    }

    #[test]
    fn monotonic_clock_is_nanoseconds() {
        let c = RunClock::start(ClockSource::Monotonic);
        assert!(!c.tsc);
        assert_eq!((c.calib_ticks, c.calib_ns), (1, 1));
        assert_eq!(c.kind(), ClockKind::Nanoseconds);
    }
}

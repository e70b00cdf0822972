//! Time windows (`--from`/`--to`): the part of a trace an analysis counts.
//!
//! A window `[from, to)` (ns from time zero) clips every duration to the
//! time inside it and counts a frame's call, a segment's switch in and an
//! event when they happen inside it. The replay applies it where time
//! accrues: the running clock advances only inside the window, and a
//! frame's wall span is clipped to it. Every additive field of a report is
//! then the sum of its values over windows that split the trace
//! (`schemas/semantics.md`, "Time windows").

/// What the per-event code asks of a window. Two kinds, so the replay of
/// the whole trace (nearly every run) compiles to the code it had before
/// windows: [`WholeTrace`] answers at compile time.
pub(crate) trait Span: Copy {
    /// Whether this is the whole trace (known at compile time).
    const WHOLE: bool;
    /// `ns` moved into the window.
    fn clamp(self, ns: u64) -> u64;
    /// Whether something at `ns` counts.
    fn contains(self, ns: u64) -> bool;
    /// How much of `[start, end)` lies inside.
    #[inline(always)]
    fn clip(self, start: u64, end: u64) -> u64 {
        self.clamp(end).saturating_sub(self.clamp(start))
    }
}

/// The whole trace: everything counts, nothing moves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WholeTrace;

impl Span for WholeTrace {
    const WHOLE: bool = true;
    #[inline(always)]
    fn clamp(self, ns: u64) -> u64 {
        ns
    }
    #[inline(always)]
    fn contains(self, _ns: u64) -> bool {
        true
    }
}

impl Span for Window {
    const WHOLE: bool = false;
    /// The running clocks advance only inside the window.
    #[inline(always)]
    fn clamp(self, ns: u64) -> u64 {
        ns.max(self.from).min(self.to)
    }
    /// A call, a switch in or an event counts at `ns` in `[from, to)`.
    #[inline(always)]
    fn contains(self, ns: u64) -> bool {
        (ns >= self.from) & (ns <= self.last)
    }
}

/// A half-open span of time, in ns from time zero; [`Window::ALL`] is the
/// whole trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    from: u64,
    /// Where time stops counting (`u64::MAX`: never).
    to: u64,
    /// The last ns an event counts at (`to - 1`; `u64::MAX` for
    /// [`Window::ALL`], so no event of the whole trace is left out; less
    /// than `from` for an empty window).
    last: u64,
}

impl Window {
    /// The whole trace.
    pub(crate) const ALL: Window = Window {
        from: 0,
        to: u64::MAX,
        last: u64::MAX,
    };

    /// `[from, to)`; `None` bounds are open. `to` before `from` is empty.
    pub(crate) fn new(from: Option<u64>, to: Option<u64>) -> Window {
        let from = from.unwrap_or(0);
        match to {
            None => Window {
                from,
                to: u64::MAX,
                last: u64::MAX,
            },
            Some(to) if to <= from => {
                // Empty: no ns is both >= from and <= from - 1 (an empty
                // window at 0 moves to 1 for that).
                let from = from.max(1);
                Window {
                    from,
                    to: from,
                    last: from - 1,
                }
            }
            Some(to) => Window {
                from,
                to,
                last: to - 1,
            },
        }
    }

    /// Where the window starts and ends (`None`: open at the end).
    pub(crate) fn bounds(self) -> (u64, Option<u64>) {
        (self.from, (self.to != u64::MAX).then_some(self.to))
    }

    /// Whether this is the whole trace.
    pub(crate) fn is_all(self) -> bool {
        self == Window::ALL
    }

    /// Whether `[start, end]` touches the window (a stretch that ran in it).
    pub(crate) fn touches(self, start: u64, end: u64) -> bool {
        start < self.to && end >= self.from && self.to > self.from
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_trace_counts_everything() {
        let w = Window::ALL;
        assert!(w.is_all());
        for ns in [0, 1, u64::MAX - 1, u64::MAX] {
            assert!(w.contains(ns));
            assert_eq!(w.clamp(ns), ns);
        }
        assert_eq!(w.clip(3, 10), 7);
        assert_eq!(Window::new(None, None), Window::ALL);
    }

    #[test]
    fn a_window_clips_and_counts_half_open() {
        let w = Window::new(Some(10), Some(20));
        assert!(!w.contains(9) && w.contains(10) && w.contains(19) && !w.contains(20));
        assert_eq!(w.clip(0, 100), 10);
        assert_eq!(w.clip(15, 100), 5);
        assert_eq!(w.clip(0, 12), 2);
        assert_eq!(w.clip(20, 30), 0);
        assert_eq!(w.clip(12, 5), 0, "a reversed stretch is empty");
        assert!(w.touches(0, 10) && w.touches(19, 30) && !w.touches(20, 30) && !w.touches(0, 9));
    }

    #[test]
    fn windows_that_split_a_span_add_up() {
        let (a, b, c) = (
            Window::new(Some(5), Some(12)),
            Window::new(Some(12), Some(40)),
            Window::new(Some(5), Some(40)),
        );
        for (s, e) in [(0, 50), (6, 13), (11, 12), (12, 12), (39, 41), (0, 5)] {
            assert_eq!(a.clip(s, e) + b.clip(s, e), c.clip(s, e), "[{s}, {e})");
        }
        for ns in 0..50 {
            assert_eq!(
                a.contains(ns) as u8 + b.contains(ns) as u8,
                c.contains(ns) as u8
            );
        }
    }

    #[test]
    fn an_empty_window_counts_nothing() {
        for w in [
            Window::new(Some(7), Some(7)),
            Window::new(Some(9), Some(3)),
            Window::new(Some(0), Some(0)),
        ] {
            for ns in 0..20 {
                assert!(!w.contains(ns), "{w:?} {ns}");
            }
            assert_eq!(w.clip(0, 100), 0);
            assert!(!w.touches(0, 100));
        }
        assert!(!Window::new(None, Some(0)).contains(0));
    }
}

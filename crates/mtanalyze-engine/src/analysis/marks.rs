//! Marks: the metadata's mark records (`mtrace::mark`, a JSON-lines `mark`
//! line) as [`Mark`]s, their ticks converted with the one [`TickScale`]
//! every stage uses, so a mark's `time_ns` is on the report's scale to
//! the nanosecond.
//!
//! [`marks`] reads only the header and the metadata region (no chunk), so a
//! caller can resolve mark names before it analyzes; the report and
//! `check` take theirs from the decode stage's pass over the same records.

use mtrace_format::{MetaRecord, TickScale, TraceFile};

use crate::analysis::decode::RawMark;
use crate::analysis::AnalyzeError;
use crate::input::LoadedTrace;
use mtanalyze_model::marks::Mark;

/// The marks of `trace`, in time order (marks at the same tick in the
/// order they were written), with times in ns from the trace's time zero,
/// the scale of every time of its [`mtanalyze_model::report::Report`].
///
/// Reads the header and the metadata region only. Damage in the region
/// ends the read: the marks before it are returned ([`crate::check()`]
/// and [`crate::analyze`] report the damage). A mark's tick is never
/// judged: one before time zero reads 0 ns, an absurd one saturates.
///
/// ```no_run
/// let trace = mtanalyze_engine::load(std::path::Path::new("app.mtrace"))?;
/// for m in mtanalyze_engine::marks(&trace)? {
///     println!("{} at {} ns (thread {})", m.name, m.time_ns, m.thread);
/// }
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn marks(trace: &LoadedTrace) -> Result<Vec<Mark>, AnalyzeError> {
    let file = TraceFile::parse(trace.bytes()).map_err(|error| AnalyzeError::Format {
        source_name: trace.source.clone(),
        error,
    })?;
    let mut raw = Vec::new();
    // The damage, if any, is reported by the commands; the marks before it stand.
    let _damage = file.for_each_metadata(|r| {
        if let MetaRecord::Mark { tick, tid, name } = r {
            raw.push(RawMark { tick, tid, name });
        }
    });
    Ok(to_marks(raw, file.header().clock.scale()))
}

/// `raw` (in the order written) as marks sorted by tick, stably: by time,
/// then by the order written.
pub(crate) fn to_marks(mut raw: Vec<RawMark>, scale: TickScale) -> Vec<Mark> {
    // The scale is monotone: tick order is time order.
    raw.sort_by_key(|m| m.tick);
    raw.into_iter()
        .map(|m| Mark {
            name: m.name,
            time_ns: scale.ns(m.tick),
            thread: u64::from(m.tid),
            trace: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtrace_format::{ClockInfo, ClockKind};

    fn raw(tick: u64, name: &str) -> RawMark {
        RawMark {
            tick,
            tid: 1,
            name: name.into(),
        }
    }

    #[test]
    fn marks_sort_by_tick_then_write_order_and_absurd_ticks_saturate() {
        let clock = ClockInfo {
            kind: ClockKind::Tsc,
            start_tick: 1000,
            start_unix_ns: 0,
            calib_ticks: 4,
            calib_ns: 1,
        };
        let got = to_marks(
            vec![
                raw(5000, "b"),
                raw(u64::MAX, "absurd"),
                raw(1004, "a"),
                raw(5000, "c"),
                raw(5, "before zero"),
            ],
            clock.scale(),
        );
        let got: Vec<(&str, u64)> = got.iter().map(|m| (m.name.as_str(), m.time_ns)).collect();
        assert_eq!(
            got,
            [
                ("before zero", 0),
                ("a", 1),
                ("b", 1000),
                ("c", 1000),
                ("absurd", clock.scale().ns(u64::MAX)),
            ]
        );
    }
}

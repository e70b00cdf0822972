//! The running sums of the report's rows: what adds up over the stacks
//! of a trace, the traces of a merge and the time windows that split a
//! trace, one named type per kind of row. A function's row
//! ([`crate::report::FunctionStats`]) and an edge's
//! ([`crate::report::EdgeStats`]) hand theirs over and take them back
//! ([`FunctionStats::sums`](crate::report::FunctionStats::sums),
//! `set_sums`); the merge, the runs' medians and the engine's edge totals
//! add them here, field by field, by name.
//!
//! What does not simply add is not here: a function's sum of squared self
//! times (`u128`) and its histogram of self times travel beside these
//! (`merge.rs`'s per-frame numbers).

/// Declares a sums type: its fields (`u64`, summed saturating), `add`,
/// `fields` (by name) and `median_of` (each field the median of its
/// values).
macro_rules! sums {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: u64,)*
        }

        impl $name {
            /// Adds `other`'s sums, field by field (saturating).
            #[inline]
            pub fn add(&mut self, other: &$name) {
                $(self.$field = self.$field.saturating_add(other.$field);)*
            }

            /// Each field's name and value, in declaration order.
            pub fn fields(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($field), self.$field),)*].into_iter()
            }

            /// Each field the median of its values in `rows` (the lower
            /// of the two middle values: a value some row had; 0 without
            /// rows).
            pub fn median_of(rows: &[$name]) -> $name {
                $name {
                    $($field: median(rows.iter().map(|r| r.$field)),)*
                }
            }
        }
    };
}

sums! {
    /// A function's sums: the numbers of its row that add up.
    FunctionSums {
        /// Frames.
        ncalls,
        /// Frames with no frame of the same function open below them.
        primitive_calls,
        /// Self time.
        tottime_ns,
        /// Active time of non-recursive frames.
        cumtime_ns,
        /// Paused time of non-recursive frames.
        paused_ns,
        /// Frames still open at the end of the trace.
        open_at_end,
        /// Frames the trace does not see whole.
        cut_short,
        /// The part of `paused_ns` its task waited for a thread.
        scheduled_ns,
        /// `paused_ns - scheduled_ns`.
        waiting_ns,
    }
}

sums! {
    /// A caller -> callee edge's sums: the numbers of its row.
    EdgeSums {
        /// Frames.
        ncalls,
        /// Frames whose edge is not recursive.
        primitive_calls,
        /// Self time.
        tottime_ns,
        /// Active time of non-recursive edge frames.
        cumtime_ns,
        /// Active time of the frames that are not recursive calls of the
        /// callee.
        callee_cumtime_ns,
    }
}

/// The median of `values`: for an even count the lower of the two middle
/// values, so a median is always a value some run had; 0 for none.
pub(crate) fn median(values: impl Iterator<Item = u64>) -> u64 {
    let mut v: Vec<u64> = values.collect();
    v.sort_unstable();
    v.get((v.len().max(1) - 1) / 2).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_add_by_name_and_saturate() {
        let mut a = EdgeSums {
            ncalls: 2,
            tottime_ns: u64::MAX - 1,
            ..EdgeSums::default()
        };
        a.add(&EdgeSums {
            ncalls: 3,
            tottime_ns: 5,
            callee_cumtime_ns: 7,
            ..EdgeSums::default()
        });
        assert_eq!(
            a,
            EdgeSums {
                ncalls: 5,
                tottime_ns: u64::MAX,
                callee_cumtime_ns: 7,
                ..EdgeSums::default()
            }
        );
    }

    #[test]
    fn medians_are_taken_field_by_field() {
        let rows = [
            FunctionSums {
                ncalls: 3,
                tottime_ns: 10,
                ..FunctionSums::default()
            },
            FunctionSums {
                ncalls: 1,
                tottime_ns: 30,
                ..FunctionSums::default()
            },
            FunctionSums {
                ncalls: 2,
                tottime_ns: 20,
                ..FunctionSums::default()
            },
            FunctionSums {
                ncalls: 9,
                tottime_ns: 40,
                ..FunctionSums::default()
            },
        ];
        let m = FunctionSums::median_of(&rows);
        // Four values: the lower middle one.
        assert_eq!((m.ncalls, m.tottime_ns, m.paused_ns), (2, 20, 0));
        assert_eq!(FunctionSums::median_of(&[]), FunctionSums::default());
        let names: Vec<_> = m.fields().map(|(name, _)| name).collect();
        assert_eq!(names[..3], ["ncalls", "primitive_calls", "tottime_ns"]);
        assert_eq!(names.len(), 9);
    }
}

//! mtanalyze's report model, the lowest layer of the analyzer (the
//! `mtanalyze` crate re-exports it): the values the analysis produces and every renderer reads: the
//! [`report::Report`] of one trace, the [`check::CheckReport`] of a file,
//! the [`diff::DiffReport`] of two reports, the [`marks::Mark`]s a program
//! recorded, the timelines the exports draw, the label each function is
//! shown by, and the warnings about damaged or unusual input. Plain data with serde shapes (`schemas/`),
//! plus the diff of two reports and the regression gates over a diff,
//! which need nothing else.

#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod check;
pub mod compact;
pub mod diff;
pub mod functions;
pub mod gate;
pub mod histogram;
pub mod inline;
pub mod labels;
pub mod marks;
pub mod merge;
pub mod report;
pub mod runs;
pub mod significance;
pub mod sink;
pub mod sums;
pub mod timeline;
pub mod warnings;

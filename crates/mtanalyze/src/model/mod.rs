//! The values the analysis produces and every renderer reads: the
//! [`report::Report`] of one trace, the [`check::CheckReport`] of a file,
//! the [`diff::DiffReport`] of two reports, the [`marks::Mark`]s a program
//! recorded, the timelines the exports draw, the label each function is
//! shown by, and the warnings about damaged or unusual input. Plain data with serde shapes (`schemas/`),
//! plus the diff of two reports and the regression gates over a diff,
//! which need nothing else.

pub(crate) mod check;
pub(crate) mod compact;
pub(crate) mod diff;
pub(crate) mod functions;
pub(crate) mod gate;
pub(crate) mod inline;
pub(crate) mod labels;
pub(crate) mod marks;
pub(crate) mod merge;
pub(crate) mod report;
pub(crate) mod runs;
pub(crate) mod significance;
pub(crate) mod sink;
pub(crate) mod timeline;
pub(crate) mod warnings;

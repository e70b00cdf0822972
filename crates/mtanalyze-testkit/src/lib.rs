//! Test support for `mtanalyze`, shared by its unit tests, its integration
//! tests, the end-to-end tests in the repository's `tests/` folder and its
//! benchmark:
//!
//! * [`reference`](mod@reference): the literal reference implementation of
//!   `schemas/semantics.md` (obviously correct, not fast), which the
//!   property tests compare the engine against;
//! * [`worked_examples`]: the document's worked examples as data;
//! * [`fusion`]: the two ways the analyzer replays a thread's own stack,
//!   side by side;
//! * [`synth`]: the deterministic synthetic trace generators (the `synth`
//!   example and the throughput benchmark);
//! * [`sums`]: reports' additive fields by row, summed (the time window
//!   tests);
//! * [`counts`]: the event counts in compact chunks' headers, found and
//!   cleared (the tests of the decode that takes them).
//!
//! `mtanalyze`'s own unit tests use this crate too (a dev-dependency cycle
//! cargo allows); they take only plain data from it (JSON-lines text), since
//! its `mtanalyze` types are those of a separate build of the crate.

pub mod counts;
pub mod fusion;
pub mod reference;
pub mod sums;
pub mod synth;
pub mod worked_examples;

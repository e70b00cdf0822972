//! mtanalyze: turns an mtrace trace into cProfile-style statistics that stay
//! correct when work is spread over many threads, fibers and async tasks.
//!
//! Data flows one way:
//!
//! ```text
//! input (load: binary map | JSON lines -> binary)
//!   -> decode   (chunks in parallel -> each thread's chunk sequence, names)
//!   -> segment  (each thread's events cut into stretches on one stack)
//!   -> replay   (stacks in parallel: frames, recursion, clock-model time)
//!   -> Report   (one value)
//!   -> render   (table, JSON, ...)
//! ```
//!
//! [`analyze`] runs the pipeline; [`check()`] stops after segmenting and
//! describes the file. The replay engine knows nothing about tables or
//! command-line flags; `schemas/semantics.md` is its contract.
#![deny(missing_docs)]

// The shared test support (`tests/common`, also compiled into the unit
// tests) names this crate as its integration tests see it.
#[cfg(test)]
extern crate self as mtanalyze;

pub mod check;
pub mod clock;
pub mod decode;
pub mod diff;
pub mod engine;
pub mod import;
pub mod input;
pub mod jsonl;
pub mod paths;
pub mod render;
pub mod replay;
pub mod report;
pub mod segment;
pub mod timeline;
pub mod view;
pub mod warnings;

pub use check::{check, CheckReport};
pub use clock::Clock;
pub use engine::{analyze, Analysis, AnalyzeError, AnalyzeOptions, PathMode};
pub use input::{load, InputFormat, LoadError, LoadedTrace};
pub use report::Report;

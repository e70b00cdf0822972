//! mtanalyze's engine, the layer between the report model
//! (`mtanalyze-model`) and the renderers (`mtanalyze-render`); the
//! `mtanalyze` crate re-exports it. `input/` loads a trace (binary map,
//! JSON lines, Chrome JSON) into the binary layout; `analysis/` decodes it,
//! cuts it into per-stack segments and replays each stack into a
//! [`mtanalyze_model::report::Report`]; [`threads`] runs the parallel parts
//! on rayon's pool or, for a program that embeds the analyzer, all on the
//! calling thread. It knows nothing about tables or command-line flags;
//! `schemas/semantics.md` is its contract.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod analysis;
mod input;
pub mod threads;

#[cfg(feature = "testing")]
pub use analysis::testing;
pub use analysis::timeline::Timelines;
pub use analysis::{
    analyze, analyze_compact, analyze_many, analyze_with_sink, check, marks, plan, AnalyzeError,
    AnalyzeOptions, Engine, ManyTraces, PathMode, Plan, RecursionCollapse, TimeBound, TraceError,
};
pub use input::chrome::ImportError;
pub use input::jsonl::{to_binary as jsonl_to_binary, JsonlError};
pub use input::{from_bytes, load, InputFormat, LoadError, LoadedTrace};

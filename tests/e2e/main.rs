//! End-to-end tests: run the real `mtanalyze` binary on real files.
//!
//! One test target with a module per topic; `util` builds temporary
//! directories, runs the binary and prints readable diffs on failure.
//! `vectors/` holds the shared semantics vectors (`NAME.jsonl` with the
//! expected `NAME.CLOCK.json`).

mod async_tasks;
mod check;
mod cli;
mod convert;
mod debug_plan;
mod diff;
mod docs;
mod ends;
mod errors;
mod gates;
mod html;
mod import;
mod json;
mod labels;
mod layout;
mod lost;
mod many;
mod marks;
mod options;
mod output;
mod parquet;
mod pictures;
mod pipe;
mod pprof;
mod pstats;
mod robustness;
mod rotated;
mod saved;
mod schema;
mod series;
mod significance;
mod util;
mod vectors;
mod wakes;
mod warnings;
mod width;
mod windows;

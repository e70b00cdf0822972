//! mtanalyze's views and renderers, the top layer of the analyzer (the
//! `mtanalyze` crate re-exports both modules): [`view`] sorts, filters,
//! limits and groups the rows a user asked for; [`render`] turns report
//! values into every output format. They read model values
//! (`mtanalyze-model`) and never recompute statistics; the engine
//! (`mtanalyze-engine`) gives them the timelines the exports draw and the
//! thread pool.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod render;
pub mod view;

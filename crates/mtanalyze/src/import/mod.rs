//! Importers: traces written by other tools, converted in memory to the
//! binary layout through the format crate's writer, as JSON lines are
//! (`crate::jsonl`). The rest of the analyzer never learns where a trace
//! came from, except through `Report::trace.input_format`.
//!
//! * [`chrome`]: Chrome Trace Event JSON (VizTracer, the `tracing-chrome`
//!   crate, Perfetto's and `chrome://tracing`'s legacy format), described in
//!   `schemas/chrome-import.md`.
//!
//! [`crate::input`] picks the importer from the content, never from the
//! file name.

pub mod chrome;

/// Why a file could not be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    /// What is wrong, with the place in the file when known (`line 3 column 7: ...`).
    pub message: String,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ImportError {}

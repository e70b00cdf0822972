//! Loading a trace: detect its kind from the content (never the file name),
//! map binary traces (zero-copy), and convert other kinds to the binary
//! layout in memory so the rest of the analyzer reads one format.
//!
//! A binary trace of compact events (format version 4) is mapped as it
//! is, like any other: the passes expand a compact chunk's events to
//! 16 bytes each when they reach it, into a buffer a worker reuses
//! (`analysis::decode`, its `cursor.rs`), so the memory a compact trace
//! takes is its file's, not 16 bytes an event.
//!
//! ```text
//! starts with the binary magic           -> binary (mapped; compact chunks expanded as read)
//! a JSON array                           -> Chrome Trace Event JSON (crate::input::chrome)
//! a first JSON object with `traceEvents` -> Chrome Trace Event JSON
//! any other JSON object                  -> JSON lines (crate::jsonl)
//! anything else                          -> not a trace
//! ```

pub(crate) mod chrome;
pub(crate) mod jsonl;

use std::fs::File;
use std::path::Path;

use mtrace_format::layout::MAGIC;
use mtrace_format::TraceFile;

/// The kind of input a trace came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// The recorder's binary format.
    Binary,
    /// JSON lines (`schemas/events-jsonl.md`).
    Jsonl,
    /// Chrome Trace Event JSON (`schemas/chrome-import.md`).
    Chrome,
}

impl InputFormat {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            InputFormat::Binary => "binary",
            InputFormat::Jsonl => "jsonl",
            InputFormat::Chrome => "chrome",
        }
    }
}

enum TraceBytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
    /// Bytes someone else holds (see [`LoadedTrace::from_shared`]).
    Shared(Box<dyn AsRef<[u8]> + Send + Sync>),
}

/// A trace ready for analysis: its bytes in the binary layout.
pub struct LoadedTrace {
    /// Where it came from (a path, or a name given by the caller).
    pub source: String,
    /// What kind of input it was.
    pub format: InputFormat,
    data: TraceBytes,
}

impl LoadedTrace {
    /// The trace in the binary layout.
    pub fn bytes(&self) -> &[u8] {
        match &self.data {
            TraceBytes::Mapped(m) => m,
            TraceBytes::Owned(v) => v,
            TraceBytes::Shared(s) => (**s).as_ref(),
        }
    }
}

/// Why a trace could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The content is not a kind of trace this build reads.
    #[error(
        "{path}: not a trace (expected an mtrace binary trace, JSON lines or Chrome trace JSON)"
    )]
    UnknownFormat {
        /// The file.
        path: String,
    },
    /// A JSON-lines file has a line that is not an event (line 0: the file as a whole).
    #[error("{path}: {}{message}", if *line > 0 { format!("line {line}: ") } else { String::new() })]
    Jsonl {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A file of another tool's format could not be imported.
    #[error("{path}: {source}")]
    Import {
        /// The file.
        path: String,
        /// What is wrong.
        source: crate::input::chrome::ImportError,
    },
    /// The binary trace's header cannot be read.
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: String,
        /// The cause.
        source: mtrace_format::FormatError,
    },
}

/// Loads a trace from a file, detecting its kind from its first bytes.
pub fn load(path: &Path) -> Result<LoadedTrace, LoadError> {
    let source = path.display().to_string();
    let io = |e| LoadError::Io {
        path: source.clone(),
        source: e,
    };
    let file = File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.is_dir() {
        return Err(io(std::io::Error::other("is a directory")));
    }
    // SAFETY: the map is read-only; a file truncated by another process while
    // mapped can still fault, which no reader of a live file can prevent.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    if map.starts_with(&MAGIC) {
        return finish(source, InputFormat::Binary, TraceBytes::Mapped(map));
    }
    from_bytes_inner(source, &map)
}

/// Loads a trace held in memory (`source` names it in messages).
pub fn from_bytes(source: &str, bytes: Vec<u8>) -> Result<LoadedTrace, LoadError> {
    if bytes.starts_with(&MAGIC) {
        return finish(
            source.to_owned(),
            InputFormat::Binary,
            TraceBytes::Owned(bytes),
        );
    }
    from_bytes_inner(source.to_owned(), &bytes)
}

impl LoadedTrace {
    /// Loads a binary trace from bytes the caller holds and keeps them as
    /// they are, without a copy: a recording into memory read in place (a
    /// profile per request, analyzed where the recorder wrote it). The
    /// bytes must not change while the trace is analyzed. A text trace
    /// (JSON lines, Chrome JSON) is converted, as [`from_bytes`] does.
    pub fn from_shared(
        source: &str,
        bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
    ) -> Result<LoadedTrace, LoadError> {
        if (*bytes).as_ref().starts_with(&MAGIC) {
            return finish(
                source.to_owned(),
                InputFormat::Binary,
                TraceBytes::Shared(bytes),
            );
        }
        from_bytes_inner(source.to_owned(), (*bytes).as_ref())
    }
}

/// What a text trace is, from its content: a JSON array, or a first JSON
/// value that is an object with `traceEvents`, is Chrome Trace Event JSON;
/// any other object starts JSON lines (whose reader reports what is wrong
/// with it, line by line).
fn detect_text(bytes: &[u8]) -> Option<InputFormat> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace())? {
        b'[' => Some(InputFormat::Chrome),
        b'{' => {
            #[derive(serde::Deserialize)]
            struct Probe {
                #[serde(rename = "traceEvents")]
                trace_events: Option<serde::de::IgnoredAny>,
            }
            let first = serde_json::Deserializer::from_slice(bytes)
                .into_iter::<Probe>()
                .next();
            match first {
                Some(Ok(Probe {
                    trace_events: Some(_),
                })) => Some(InputFormat::Chrome),
                _ => Some(InputFormat::Jsonl),
            }
        }
        _ => None,
    }
}

fn from_bytes_inner(source: String, bytes: &[u8]) -> Result<LoadedTrace, LoadError> {
    let Some(format) = detect_text(bytes) else {
        return Err(LoadError::UnknownFormat { path: source });
    };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        match format {
            InputFormat::Chrome => LoadError::Import {
                path: source.clone(),
                source: crate::input::chrome::ImportError {
                    message: format!("Chrome trace JSON: line {line}: not UTF-8"),
                },
            },
            _ => LoadError::Jsonl {
                path: source.clone(),
                line,
                message: "not UTF-8".into(),
            },
        }
    })?;
    match format {
        InputFormat::Chrome => {
            let converted =
                crate::input::chrome::to_binary(text).map_err(|e| LoadError::Import {
                    path: source.clone(),
                    source: e,
                })?;
            finish(source, format, TraceBytes::Owned(converted))
        }
        _ => {
            let converted = crate::input::jsonl::to_binary(text).map_err(|e| LoadError::Jsonl {
                path: source.clone(),
                line: e.line,
                message: e.message,
            })?;
            finish(source, InputFormat::Jsonl, TraceBytes::Owned(converted))
        }
    }
}

fn finish(source: String, format: InputFormat, data: TraceBytes) -> Result<LoadedTrace, LoadError> {
    let trace = LoadedTrace {
        source,
        format,
        data,
    };
    // Check the header now so every later stage can rely on it.
    TraceFile::parse(trace.bytes()).map_err(|e| LoadError::Format {
        path: trace.source.clone(),
        source: e,
    })?;
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes held elsewhere load as the same trace as a file's, read in
    /// place (no copy); text is converted.
    #[test]
    fn shared_bytes_load_as_the_file_does() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample-traces");
        for name in ["workload.bin", "workload-v4.bin", "viztracer-shape.json"] {
            let path = root.join(name);
            let bytes = std::fs::read(&path).expect("sample trace");
            let held: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            let shared = LoadedTrace::from_shared(name, Box::new(held)).expect("loads");
            let file = load(&path).expect("loads");
            assert_eq!(shared.bytes(), file.bytes(), "{name}");
            assert_eq!(shared.format, file.format, "{name}");
            if name.ends_with(".bin") {
                assert_eq!(shared.bytes().as_ptr(), held.as_ptr(), "read in place");
            }
        }
    }
}

//! `export --format pprof`: a gzipped `profile.proto`, the format `go tool
//! pprof`, Pyroscope, Parca and Grafana read.
//!
//! One sample per call path (the report's merged paths), leaf first, with
//! two values: the path's self time in ns under the report's clock, and the
//! calls that ended on it. One location per function, at its definition
//! line (the trace records no call sites), so `pprof -top`'s flat column is
//! the report's `tottime` and the call counts add up to `ncalls`. The
//! messages are the subset of `profile.proto`
//! (github.com/google/pprof/proto/profile.proto) this file fills in, with
//! that file's field numbers.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use mtanalyze_model::labels::Labels;
use mtanalyze_model::report::Report;

/// `Profile`: the whole file.
#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    /// Index 0 must be "".
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    /// The sample type readers show first: `time`.
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

/// `ValueType`: what a value counts and in which unit (string indices).
#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

/// `Sample`: a call path (leaf first) and its values.
#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}

/// `Mapping`: the one "binary", the trace, whose functions are all known.
#[derive(Clone, PartialEq, Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
    #[prost(bool, tag = "9")]
    has_line_numbers: bool,
}

/// `Location`: here, one per function.
#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

/// `Line`: a function and a line in it.
#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

/// `Function`: name, file and first line (string indices).
#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
    #[prost(int64, tag = "5")]
    start_line: i64,
}

/// The string table, each string once.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// Writes the report's call paths (it must have been analyzed with merged
/// paths, [`mtanalyze_engine::PathMode::Merged`]) as a gzipped pprof profile.
pub fn pprof(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let mut strings = Strings::new();
    let ns = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let time = strings.get("time");
    let sample_type = vec![
        ValueType {
            r#type: time,
            unit: strings.get("nanoseconds"),
        },
        ValueType {
            r#type: strings.get("calls"),
            unit: strings.get("count"),
        },
    ];
    // pprof merges functions by name (its default granularity): the name
    // is the label, the system name the function's own.
    let labels = Labels::of_functions(&report.functions);
    let function = report
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| Function {
            id: i as u64 + 1,
            name: strings.get(labels.get(i)),
            system_name: strings.get(&f.function),
            filename: strings.get(&f.file),
            start_line: i64::from(f.line),
        })
        .collect();
    let location = report
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| Location {
            id: i as u64 + 1,
            mapping_id: 1,
            line: vec![Line {
                function_id: i as u64 + 1,
                line: i64::from(f.line),
            }],
        })
        .collect();
    let sample = report
        .paths
        .iter()
        .filter(|p| p.self_ns > 0 || p.ncalls > 0)
        .map(|p| Sample {
            location_id: p.frames.iter().rev().map(|&f| u64::from(f) + 1).collect(),
            value: vec![ns(p.self_ns), ns(p.ncalls)],
        })
        .collect();
    let mapping = vec![Mapping {
        id: 1,
        filename: strings.get(&report.trace.source),
        has_functions: true,
        has_line_numbers: true,
    }];
    let comment = vec![
        strings.get(&format!("mtanalyze {}", env!("CARGO_PKG_VERSION"))),
        strings.get(&format!(
            "clock: {} (time: self time under it; calls: frames ended on the path)",
            report.clock
        )),
    ];
    let period_type = Some(ValueType {
        r#type: strings.get("time"),
        unit: strings.get("nanoseconds"),
    });
    let profile = Profile {
        sample_type,
        sample,
        mapping,
        location,
        function,
        string_table: strings.table,
        // The first event's date, when the recorder knew the date.
        time_nanos: match report.trace.start_unix_ns {
            0 => 0,
            start => ns(start.saturating_add(report.trace.first_event_ns)),
        },
        duration_nanos: ns(report.trace.duration_ns),
        period_type,
        period: 1,
        comment,
        default_sample_type: time,
    };
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

//! `export --format parquet -o DIR` (the `parquet` feature): the report as
//! Parquet tables that SQL engines query directly, DuckDB or DataFusion on
//! a laptop, Spark, Trino or ClickHouse on a cluster.
//!
//! ```text
//! DIR/traces.parquet      one row per trace: what it holds (events, duration, ...)
//! DIR/functions.parquet   one row per (trace, function): the function table
//! DIR/edges.parquet       one row per (trace, caller -> callee edge)
//! DIR/stacks.parquet      one row per (trace, stack)
//! DIR/warnings.parquet    one row per (trace, kind of warning)
//! DIR/frames.parquet      with frames: one row per frame (enter, exit, active, self, paused)
//! ```
//!
//! Every row starts with its trace's identity (`trace`, `host`, `pid`,
//! `start_unix_ns`) and the `clock` its times are under, so the tables of
//! many exports (a directory per run, per host) can be read as one
//! (`FROM 'runs/*/functions.parquet'`) and grouped or filtered by trace.
//! Several traces exported together are added one report at a time, each
//! trace's rows with its own identity: summed over the traces, the numbers
//! are the merged report's. Integers are `Int64` (every engine reads
//! signed 64-bit integers; a time in ns fits until the year 2262), text is
//! `Utf8`, thread lists and command lines are lists. `schemas/parquet.md`
//! lists every column and what it means; the numbers are those of the JSON
//! report (`schemas/report.schema.json`).
//!
//! Rows are gathered into Arrow arrays a batch at a time and written with
//! the `parquet` crate's Arrow writer (snappy pages, dictionary-encoded
//! strings, row groups of at most [`ROW_GROUP`] rows), so memory stays at
//! a batch and a row group per table however many traces or frames there
//! are. Frames come in the order they close (a callee before its caller),
//! stack after stack, straight from the engine's replay.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int64Builder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;

use mtanalyze_model::report::Report;
use mtanalyze_model::timeline::{ClosedFrame, TimelineSource};

/// Rows gathered before they go to the writer.
const BATCH: usize = 64 * 1024;

/// Rows per row group (a unit engines read and skip as a whole).
pub const ROW_GROUP: usize = 256 * 1024;

/// Why the tables could not be written. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ParquetExportError {
    /// Creating the directory or a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The directory or file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The Parquet writer failed (writing the file, most often).
    #[error("{path}: {source}")]
    Parquet {
        /// The file.
        path: String,
        /// The cause.
        source: ParquetError,
    },
    /// A batch of rows did not fit the table's schema (a bug).
    #[error("{path}: {source}")]
    Arrow {
        /// The file.
        path: String,
        /// The cause.
        source: ArrowError,
    },
}

/// The type of a column.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Int,
    Bool,
    IntList,
    TextList,
}

/// Columns every table starts with: which trace a row comes from, and the
/// clock its times are under.
const IDENTITY: &[(&str, Kind)] = &[
    ("trace", Kind::Text),
    ("host", Kind::Text),
    ("pid", Kind::Int),
    ("start_unix_ns", Kind::Int),
    ("clock", Kind::Text),
];

const TRACES: &[(&str, Kind)] = &[
    ("input_format", Kind::Text),
    ("producer", Kind::Text),
    ("cmdline", Kind::TextList),
    ("first_event_ns", Kind::Int),
    ("end_ns", Kind::Int),
    ("duration_ns", Kind::Int),
    ("finished", Kind::Bool),
    ("ring", Kind::Bool),
    ("threads", Kind::Int),
    ("stacks", Kind::Int),
    ("events", Kind::Int),
    ("chunks", Kind::Int),
    ("chunks_lost", Kind::Int),
    ("chunks_damaged", Kind::Int),
    ("dropped_events", Kind::Int),
];

const FUNCTIONS: &[(&str, Kind)] = &[
    ("function", Kind::Text),
    ("file", Kind::Text),
    ("line", Kind::Int),
    ("module", Kind::Text),
    ("ncalls", Kind::Int),
    ("primitive_calls", Kind::Int),
    ("tottime_ns", Kind::Int),
    ("cumtime_ns", Kind::Int),
    ("paused_ns", Kind::Int),
    ("scheduled_ns", Kind::Int),
    ("waiting_ns", Kind::Int),
    ("open_at_end", Kind::Int),
    ("cut_short", Kind::Int),
];

const EDGES: &[(&str, Kind)] = &[
    ("caller", Kind::Text),
    ("caller_file", Kind::Text),
    ("caller_line", Kind::Int),
    ("callee", Kind::Text),
    ("callee_file", Kind::Text),
    ("callee_line", Kind::Int),
    ("ncalls", Kind::Int),
    ("primitive_calls", Kind::Int),
    ("tottime_ns", Kind::Int),
    ("cumtime_ns", Kind::Int),
    ("callee_cumtime_ns", Kind::Int),
];

const STACKS: &[(&str, Kind)] = &[
    ("stack", Kind::Text),
    ("name", Kind::Text),
    ("threads", Kind::IntList),
    ("running_ns", Kind::Int),
    ("paused_ns", Kind::Int),
    ("scheduled_ns", Kind::Int),
    ("waiting_ns", Kind::Int),
    ("switches_in", Kind::Int),
    ("max_depth", Kind::Int),
    ("events", Kind::Int),
    ("ended", Kind::Bool),
];

const WARNINGS: &[(&str, Kind)] = &[
    ("kind", Kind::Text),
    ("count", Kind::Int),
    ("first", Kind::Text),
    ("repair", Kind::Text),
];

const FRAMES: &[(&str, Kind)] = &[
    ("stack", Kind::Text),
    ("stack_name", Kind::Text),
    ("function", Kind::Text),
    ("file", Kind::Text),
    ("line", Kind::Int),
    ("parent", Kind::Text),
    ("parent_file", Kind::Text),
    ("parent_line", Kind::Int),
    ("depth", Kind::Int),
    ("enter_ns", Kind::Int),
    ("exit_ns", Kind::Int),
    ("active_ns", Kind::Int),
    ("self_ns", Kind::Int),
    ("paused_ns", Kind::Int),
    ("recursive", Kind::Bool),
    ("counted", Kind::Bool),
];

/// Columns that may be null: a root frame has no parent.
const NULLABLE: &[&str] = &["parent", "parent_file", "parent_line"];

/// An unsigned count or time as the `Int64` every engine reads (saturating:
/// 2^63 ns is 292 years).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// One column's rows not yet written.
enum Column {
    Text(StringBuilder),
    Int(Int64Builder),
    Bool(BooleanBuilder),
    IntList(ListBuilder<Int64Builder>),
    TextList(ListBuilder<StringBuilder>),
}

impl Column {
    fn new(kind: Kind) -> Column {
        match kind {
            Kind::Text => Column::Text(StringBuilder::new()),
            Kind::Int => Column::Int(Int64Builder::new()),
            Kind::Bool => Column::Bool(BooleanBuilder::new()),
            Kind::IntList => Column::IntList(ListBuilder::new(Int64Builder::new())),
            Kind::TextList => Column::TextList(ListBuilder::new(StringBuilder::new())),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Text(b) => Arc::new(b.finish()),
            Column::Int(b) => Arc::new(b.finish()),
            Column::Bool(b) => Arc::new(b.finish()),
            Column::IntList(b) => Arc::new(b.finish()),
            Column::TextList(b) => Arc::new(b.finish()),
        }
    }
}

fn data_type(kind: Kind) -> DataType {
    let item = |t| Arc::new(Field::new("item", t, true));
    match kind {
        Kind::Text => DataType::Utf8,
        Kind::Int => DataType::Int64,
        Kind::Bool => DataType::Boolean,
        Kind::IntList => DataType::List(item(DataType::Int64)),
        Kind::TextList => DataType::List(item(DataType::Utf8)),
    }
}

/// The values of one row, column by column in the table's order. A value
/// of the wrong type is not appended, so the batch's columns differ in
/// length and writing it fails with an error instead of a wrong file.
struct Row<'a> {
    columns: &'a mut [Column],
    at: usize,
}

impl Row<'_> {
    fn next(&mut self) -> Option<&mut Column> {
        let c = self.columns.get_mut(self.at);
        self.at += 1;
        c
    }

    fn text(&mut self, v: &str) -> &mut Self {
        if let Some(Column::Text(b)) = self.next() {
            b.append_value(v);
        }
        self
    }

    fn opt_text(&mut self, v: Option<&str>) -> &mut Self {
        if let Some(Column::Text(b)) = self.next() {
            b.append_option(v);
        }
        self
    }

    fn int(&mut self, v: u64) -> &mut Self {
        if let Some(Column::Int(b)) = self.next() {
            b.append_value(int(v));
        }
        self
    }

    fn opt_int(&mut self, v: Option<u64>) -> &mut Self {
        if let Some(Column::Int(b)) = self.next() {
            b.append_option(v.map(int));
        }
        self
    }

    fn bool(&mut self, v: bool) -> &mut Self {
        if let Some(Column::Bool(b)) = self.next() {
            b.append_value(v);
        }
        self
    }

    fn ints(&mut self, v: &[u64]) -> &mut Self {
        if let Some(Column::IntList(b)) = self.next() {
            b.append_value(v.iter().map(|&x| Some(int(x))));
        }
        self
    }

    fn texts(&mut self, v: &[String]) -> &mut Self {
        if let Some(Column::TextList(b)) = self.next() {
            b.append_value(v.iter().map(Some));
        }
        self
    }

    /// The identity columns of `report`'s trace.
    fn identity(&mut self, report: &Report) -> &mut Self {
        let t = &report.trace;
        self.text(&t.source)
            .text(&t.host)
            .int(u64::from(t.pid))
            .int(t.start_unix_ns)
            .text(report.clock.name())
    }
}

/// One file being written.
struct Table {
    path: PathBuf,
    schema: SchemaRef,
    columns: Vec<Column>,
    rows: usize,
    writer: ArrowWriter<File>,
}

impl Table {
    fn create(dir: &Path, name: &str, own: &[(&str, Kind)]) -> Result<Table, ParquetExportError> {
        let path = dir.join(format!("{name}.parquet"));
        let all: Vec<(&str, Kind)> = IDENTITY.iter().chain(own).copied().collect();
        let fields: Vec<Field> = all
            .iter()
            .map(|&(n, k)| Field::new(n, data_type(k), NULLABLE.contains(&n)))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let file = File::create(&path).map_err(|source| ParquetExportError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .set_created_by(format!("mtanalyze {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|source| parquet_error(&path, source))?;
        Ok(Table {
            columns: all.iter().map(|&(_, k)| Column::new(k)).collect(),
            path,
            schema,
            rows: 0,
            writer,
        })
    }

    /// Appends one row (`fill` gives its values in column order).
    fn row(&mut self, fill: impl FnOnce(&mut Row<'_>)) -> Result<(), ParquetExportError> {
        fill(&mut Row {
            columns: &mut self.columns,
            at: 0,
        });
        self.rows += 1;
        if self.rows >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the gathered rows.
    fn flush(&mut self) -> Result<(), ParquetExportError> {
        if self.rows == 0 {
            return Ok(());
        }
        self.rows = 0;
        let arrays: Vec<ArrayRef> = self.columns.iter_mut().map(Column::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays).map_err(|source| {
            ParquetExportError::Arrow {
                path: self.path.display().to_string(),
                source,
            }
        })?;
        self.writer
            .write(&batch)
            .map_err(|source| parquet_error(&self.path, source))
    }

    fn close(mut self) -> Result<(), ParquetExportError> {
        self.flush()?;
        self.writer
            .close()
            .map(drop)
            .map_err(|source| parquet_error(&self.path, source))
    }
}

fn parquet_error(path: &Path, source: ParquetError) -> ParquetExportError {
    ParquetExportError::Parquet {
        path: path.display().to_string(),
        source,
    }
}

/// The tables of one export, written as reports are added.
pub struct ParquetTables {
    traces: Table,
    functions: Table,
    edges: Table,
    stacks: Table,
    warnings: Table,
    frames: Option<Table>,
}

impl ParquetTables {
    /// The files [`ParquetTables::create`] writes into `dir` (`frames`:
    /// with `frames.parquet`).
    pub fn paths(dir: &Path, frames: bool) -> Vec<PathBuf> {
        let mut names = vec!["traces", "functions", "edges", "stacks", "warnings"];
        if frames {
            names.push("frames");
        }
        names
            .into_iter()
            .map(|n| dir.join(format!("{n}.parquet")))
            .collect()
    }

    /// Creates `dir` (and its parents) if missing, and the tables in it,
    /// replacing files of the same names. `frames`: also `frames.parquet`,
    /// filled by [`ParquetTables::add_frames`].
    pub fn create(dir: &Path, frames: bool) -> Result<ParquetTables, ParquetExportError> {
        std::fs::create_dir_all(dir).map_err(|source| ParquetExportError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(ParquetTables {
            traces: Table::create(dir, "traces", TRACES)?,
            functions: Table::create(dir, "functions", FUNCTIONS)?,
            edges: Table::create(dir, "edges", EDGES)?,
            stacks: Table::create(dir, "stacks", STACKS)?,
            warnings: Table::create(dir, "warnings", WARNINGS)?,
            frames: match frames {
                true => Some(Table::create(dir, "frames", FRAMES)?),
                false => None,
            },
        })
    }

    /// Adds one trace's report: its rows in every table but the frames.
    pub fn add(&mut self, report: &Report) -> Result<(), ParquetExportError> {
        let t = &report.trace;
        self.traces.row(|r| {
            r.identity(report)
                .text(&t.input_format)
                .text(&t.producer)
                .texts(&t.cmdline)
                .int(t.first_event_ns)
                .int(t.end_ns)
                .int(t.duration_ns)
                .bool(t.finished)
                .bool(t.ring)
                .int(t.threads.len() as u64)
                .int(t.stacks)
                .int(t.events)
                .int(t.chunks)
                .int(t.chunks_lost)
                .int(t.chunks_damaged)
                .int(t.dropped_events);
        })?;
        for f in &report.functions {
            self.functions.row(|r| {
                r.identity(report)
                    .text(&f.function)
                    .text(&f.file)
                    .int(u64::from(f.line))
                    .text(&f.module)
                    .int(f.ncalls)
                    .int(f.primitive_calls)
                    .int(f.tottime_ns)
                    .int(f.cumtime_ns)
                    .int(f.paused_ns)
                    .int(f.scheduled_ns)
                    .int(f.waiting_ns)
                    .int(f.open_at_end)
                    .int(f.cut_short);
            })?;
        }
        for e in &report.edges {
            self.edges.row(|r| {
                r.identity(report)
                    .text(&e.caller)
                    .text(&e.caller_file)
                    .int(u64::from(e.caller_line))
                    .text(&e.callee)
                    .text(&e.callee_file)
                    .int(u64::from(e.callee_line))
                    .int(e.ncalls)
                    .int(e.primitive_calls)
                    .int(e.tottime_ns)
                    .int(e.cumtime_ns)
                    .int(e.callee_cumtime_ns);
            })?;
        }
        for s in &report.stacks {
            self.stacks.row(|r| {
                r.identity(report)
                    .text(&s.id.to_string())
                    .text(&s.name)
                    .ints(&s.threads)
                    .int(s.running_ns)
                    .int(s.paused_ns)
                    .int(s.scheduled_ns)
                    .int(s.waiting_ns)
                    .int(s.switches_in)
                    .int(u64::from(s.max_depth))
                    .int(s.events)
                    .bool(s.ended);
            })?;
        }
        for w in &report.warnings {
            self.warnings.row(|r| {
                r.identity(report)
                    .text(&w.kind)
                    .int(w.count)
                    .text(&w.first)
                    .text(&w.repair);
            })?;
        }
        Ok(())
    }

    /// Adds one row per frame of every stack of `timelines`, the same
    /// trace and options as `report` (whose identity the rows carry).
    /// Nothing without `frames.parquet`. `progress` is called after each
    /// stack with the events its replay read.
    pub fn add_frames(
        &mut self,
        report: &Report,
        timelines: &dyn TimelineSource,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ParquetExportError> {
        let Some(table) = &mut self.frames else {
            return Ok(());
        };
        let functions = timelines.functions();
        let key = |f: u32| functions.get(f as usize).map(|e| &e.key);
        for (i, stack) in timelines.stacks().iter().enumerate() {
            let mut result = Ok(());
            timelines.frames(i, &mut |f: &ClosedFrame| {
                if result.is_err() {
                    return;
                }
                let callee = key(f.func);
                let parent = f.parent.and_then(key);
                result = table.row(|r| {
                    r.identity(report)
                        .text(&stack.id)
                        .text(&stack.name)
                        .text(callee.map_or("?", |k| &k.function))
                        .text(callee.map_or("", |k| &k.file))
                        .int(callee.map_or(0, |k| u64::from(k.line)))
                        .opt_text(parent.map(|k| &*k.function))
                        .opt_text(parent.map(|k| &*k.file))
                        .opt_int(parent.map(|k| u64::from(k.line)))
                        .int(u64::from(f.depth))
                        .int(f.enter_ns)
                        .int(f.exit_ns)
                        .int(f.active_ns)
                        .int(f.self_ns)
                        .int(f.paused_ns)
                        .bool(f.recursive)
                        .bool(f.counted);
                });
            });
            result?;
            progress(stack.events);
        }
        Ok(())
    }

    /// Writes what is left and closes every file (a Parquet file is
    /// readable only once closed).
    pub fn finish(self) -> Result<(), ParquetExportError> {
        let tables = [
            Some(self.traces),
            Some(self.functions),
            Some(self.edges),
            Some(self.stacks),
            Some(self.warnings),
            self.frames,
        ];
        for t in tables.into_iter().flatten() {
            t.close()?;
        }
        Ok(())
    }
}

//! `export --format parquet -o DIR` (issue 18, "Tables for SQL engines"),
//! read back twice: by the `parquet` crate's own reader, and by DuckDB
//! (PyPI's `duckdb`, installed into a virtual environment under
//! `target/`; the DuckDB tests skip, saying so, when it cannot be had).
//! Both readers' rows must be the JSON report's numbers: each trace's rows
//! its `--by-trace` report, and their sums the merged report. Without the
//! `parquet` feature the format is refused with one line.

#[cfg(not(feature = "parquet"))]
#[test]
fn without_the_feature_the_format_is_refused_with_one_line() {
    use crate::util::{mtanalyze, repo_file, TempDir};
    let dir = TempDir::new("parquet-off");
    let trace = repo_file("sample-traces/workload.bin");
    let out = dir.join("out");
    let line = mtanalyze([
        "export".as_ref(),
        trace.as_os_str(),
        "--format".as_ref(),
        "parquet".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ])
    .fails_with_one_line();
    assert!(
        line.contains("cargo build --release -p mtanalyze-cli --features parquet"),
        "{line}"
    );
    assert!(!out.exists());
}

#[cfg(feature = "parquet")]
mod tables {
    use std::collections::BTreeMap;
    use std::ffi::OsStr;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::Array;
    use arrow_schema::DataType;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use serde_json::{json, Value};

    use crate::util::{mtanalyze, python_with, repo_file, vector, TempDir};

    const TABLES: [&str; 6] = [
        "traces",
        "functions",
        "edges",
        "stacks",
        "warnings",
        "frames",
    ];

    /// A table's cells, column by column (a hundred thousand frames cost
    /// no map per row).
    #[derive(Debug, Default, PartialEq)]
    struct Table {
        columns: BTreeMap<String, Vec<Value>>,
    }

    /// One row of a table: `row["column"]` is a cell.
    #[derive(Clone, Copy)]
    struct Row<'t> {
        table: &'t Table,
        i: usize,
    }

    impl std::ops::Index<&str> for Row<'_> {
        type Output = Value;

        fn index(&self, column: &str) -> &Value {
            let cells = self.table.columns.get(column);
            cells.and_then(|c| c.get(self.i)).unwrap_or(&Value::Null)
        }
    }

    impl Table {
        fn len(&self) -> usize {
            self.columns.values().next().map_or(0, Vec::len)
        }

        fn rows(&self) -> impl Iterator<Item = Row<'_>> {
            (0..self.len()).map(move |i| Row { table: self, i })
        }

        /// A JSON report's list of objects as a table.
        fn from_objects(list: &Value) -> Table {
            let mut t = Table::default();
            let objects = list.as_array().expect("a list");
            for (i, o) in objects.iter().enumerate() {
                for (k, v) in o.as_object().expect("an object") {
                    let column = t.columns.entry(k.clone()).or_default();
                    column.resize(i, Value::Null);
                    column.push(v.clone());
                }
            }
            for column in t.columns.values_mut() {
                column.resize(objects.len(), Value::Null);
            }
            t
        }
    }

    /// Every table by name.
    type Tables = BTreeMap<String, Table>;

    /// The traces of the several-trace cases: recorded ones (a ring that
    /// lost chunks, a file that filled up: warnings), fibers, recursion.
    fn several() -> Vec<PathBuf> {
        vec![
            repo_file("sample-traces/workload-ring.bin"),
            repo_file("sample-traces/workload-full.bin"),
            vector("fibers.jsonl"),
            vector("recursion-b.jsonl"),
        ]
    }

    /// [`several`] copied into `dir`/traces, as a directory argument
    /// names them (sorted by file name).
    fn several_in(dir: &TempDir) -> (PathBuf, Vec<PathBuf>) {
        let traces = dir.join("traces");
        std::fs::create_dir_all(&traces).expect("traces dir");
        let mut copies: Vec<PathBuf> = several()
            .iter()
            .map(|t| {
                let copy = traces.join(t.file_name().expect("a file name"));
                std::fs::copy(t, &copy).expect("copy a trace");
                copy
            })
            .collect();
        copies.sort();
        (traces, copies)
    }

    /// `export TRACES --format parquet -o DIR --frames --clock CLOCK`.
    fn export(traces: &[PathBuf], dir: &Path, clock: &str) {
        let mut args: Vec<&OsStr> = vec!["export".as_ref()];
        args.extend(traces.iter().map(|t| t.as_os_str()));
        args.extend::<[&OsStr; 7]>([
            "--format".as_ref(),
            "parquet".as_ref(),
            "--frames".as_ref(),
            "--clock".as_ref(),
            clock.as_ref(),
            "-o".as_ref(),
            dir.as_os_str(),
        ]);
        mtanalyze(args).success();
    }

    /// `{"merged": REPORT, "by_trace": [REPORT, ...]}` of the same traces.
    fn reports(traces: &[PathBuf], clock: &str) -> Value {
        let mut args: Vec<&OsStr> = traces.iter().map(|t| t.as_os_str()).collect();
        args.extend::<[&OsStr; 5]>([
            "--by-trace".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            "--clock".as_ref(),
            clock.as_ref(),
        ]);
        mtanalyze(args).success().json()
    }

    /// One cell as JSON (lists as arrays, nulls as null).
    fn cell(col: &dyn Array, i: usize) -> Value {
        if col.is_null(i) {
            return Value::Null;
        }
        match col.data_type() {
            DataType::Int64 => col.as_primitive::<Int64Type>().value(i).into(),
            DataType::Utf8 => col.as_string::<i32>().value(i).into(),
            DataType::Boolean => col.as_boolean().value(i).into(),
            DataType::List(_) => {
                let items = col.as_list::<i32>().value(i);
                (0..items.len()).map(|j| cell(items.as_ref(), j)).collect()
            }
            other => {
                panic!("a column of type {other}: the tables use Int64, Utf8, Boolean and lists")
            }
        }
    }

    /// Every table of `dir` through the `parquet` crate's Arrow reader.
    fn read_with_parquet_crate(dir: &Path) -> Tables {
        let mut out = Tables::new();
        for name in TABLES {
            let file = std::fs::File::open(dir.join(format!("{name}.parquet"))).expect(name);
            let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("a Parquet file");
            let table = out.entry(name.to_owned()).or_default();
            for f in builder.schema().fields() {
                table.columns.insert(f.name().clone(), Vec::new());
            }
            for batch in builder.build().expect("a reader") {
                let batch = batch.expect("a batch");
                let schema = batch.schema();
                for (f, c) in schema.fields().iter().zip(batch.columns()) {
                    let cells = table.columns.entry(f.name().clone()).or_default();
                    cells.extend((0..c.len()).map(|i| cell(c.as_ref(), i)));
                }
            }
        }
        out
    }

    /// The Python of a virtual environment under `target/` that has PyPI's
    /// `duckdb`, made on first use; why not, when it cannot be had.
    fn duckdb_python() -> Result<PathBuf, String> {
        static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        PYTHON
            .get_or_init(|| python_with("duckdb-venv", "duckdb", "duckdb"))
            .clone()
    }

    /// Every table of `dir` through DuckDB (`SELECT *`).
    fn read_with_duckdb(python: &Path, dir: &Path) -> Tables {
        const SCRIPT: &str = r#"
import duckdb, json, sys
con = duckdb.connect()
out = {}
for name in sys.argv[2:]:
    cur = con.execute("SELECT * FROM read_parquet(?)", [f"{sys.argv[1]}/{name}.parquet"])
    rows = cur.fetchall()
    out[name] = {d[0]: [r[i] for r in rows] for i, d in enumerate(cur.description)}
print(json.dumps(out))
"#;
        let o = Command::new(python)
            .args(["-c", SCRIPT])
            .arg(dir)
            .args(TABLES)
            .output()
            .expect("run python");
        assert!(
            o.status.success(),
            "DuckDB failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let tables: BTreeMap<String, BTreeMap<String, Vec<Value>>> =
            serde_json::from_slice(&o.stdout).expect("DuckDB's rows as JSON");
        tables
            .into_iter()
            .map(|(name, columns)| (name, Table { columns }))
            .collect()
    }

    fn u(v: &Value) -> u64 {
        v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
    }

    /// Sums `fields` of `rows` by the values of `key` (as JSON text).
    fn sums<'r>(
        rows: impl IntoIterator<Item = Row<'r>>,
        key: &[&str],
        fields: &[&str],
    ) -> BTreeMap<Vec<String>, Vec<u64>> {
        let mut out: BTreeMap<Vec<String>, Vec<u64>> = BTreeMap::new();
        for r in rows {
            let k = key.iter().map(|k| r[*k].to_string()).collect();
            let e = out.entry(k).or_insert_with(|| vec![0; fields.len()]);
            for (a, f) in e.iter_mut().zip(fields) {
                *a += u(&r[*f]);
            }
        }
        out
    }

    /// The same sums over a JSON report's list of objects.
    fn report_sums(list: &Value, key: &[&str], fields: &[&str]) -> BTreeMap<Vec<String>, Vec<u64>> {
        sums(Table::from_objects(list).rows(), key, fields)
    }

    const FUNCTION: [&str; 3] = ["function", "file", "line"];
    const FUNCTION_SUMS: [&str; 9] = [
        "ncalls",
        "primitive_calls",
        "tottime_ns",
        "cumtime_ns",
        "paused_ns",
        "scheduled_ns",
        "waiting_ns",
        "open_at_end",
        "cut_short",
    ];
    const EDGE: [&str; 6] = [
        "caller",
        "caller_file",
        "caller_line",
        "callee",
        "callee_file",
        "callee_line",
    ];
    const EDGE_SUMS: [&str; 5] = [
        "ncalls",
        "primitive_calls",
        "tottime_ns",
        "cumtime_ns",
        "callee_cumtime_ns",
    ];
    const STACK_SUMS: [&str; 7] = [
        "running_ns",
        "paused_ns",
        "scheduled_ns",
        "waiting_ns",
        "switches_in",
        "max_depth",
        "events",
    ];

    /// Asserts that `tables` hold exactly the numbers of `reports`
    /// (`--by-trace` JSON): each trace's rows its report, their sums the
    /// merged one, the frames the function table.
    fn check(tables: &Tables, reports: &Value) {
        let by_trace = reports["by_trace"].as_array().expect("by_trace");
        let merged = &reports["merged"];
        assert_eq!(tables["traces"].len(), by_trace.len());
        for r in by_trace {
            let t = &r["trace"];
            let source = t["source"].clone();
            let identity = json!({
                "trace": source,
                "host": t.get("host").cloned().unwrap_or(json!("")),
                "pid": t["pid"],
                "start_unix_ns": t["start_unix_ns"],
                "clock": r["clock"],
            });
            let mine = |table: &str| -> Vec<Row<'_>> {
                tables[table]
                    .rows()
                    .filter(|row| row["trace"] == source)
                    .collect()
            };
            for table in TABLES {
                for row in mine(table) {
                    for (k, v) in identity.as_object().expect("identity") {
                        assert_eq!(&row[k], v, "{table}.{k} of {source}");
                    }
                }
            }
            let trace_row = mine("traces");
            assert_eq!(trace_row.len(), 1, "{source}");
            for k in [
                "events",
                "duration_ns",
                "stacks",
                "chunks_lost",
                "dropped_events",
            ] {
                assert_eq!(trace_row[0][k], t[k], "traces.{k} of {source}");
            }
            assert_eq!(trace_row[0]["cmdline"], t["cmdline"]);
            let functions = sums(mine("functions"), &FUNCTION, &FUNCTION_SUMS);
            assert!(!functions.is_empty(), "{source} has functions");
            assert_eq!(
                functions,
                report_sums(&r["functions"], &FUNCTION, &FUNCTION_SUMS),
                "functions of {source}"
            );
            assert_eq!(
                sums(mine("edges"), &EDGE, &EDGE_SUMS),
                report_sums(&r["edges"], &EDGE, &EDGE_SUMS),
                "edges of {source}"
            );
            let stacks = sums(mine("stacks"), &["stack", "name", "threads"], &STACK_SUMS);
            assert_eq!(
                stacks,
                report_sums(&r["stacks"], &["id", "name", "threads"], &STACK_SUMS),
                "stacks of {source}"
            );
            // Which stacks ended: the column is the JSON's flag (absent: false).
            let ended_in_table: BTreeMap<String, bool> = mine("stacks")
                .into_iter()
                .map(|s| (s["stack"].to_string(), s["ended"] == json!(true)))
                .collect();
            let ended_in_report: BTreeMap<String, bool> = r["stacks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| (s["id"].to_string(), s.get("ended") == Some(&json!(true))))
                .collect();
            assert_eq!(ended_in_table, ended_in_report, "ended of {source}");
            assert_eq!(
                sums(mine("warnings"), &["kind", "first"], &["count"]),
                report_sums(&r["warnings"], &["kind", "first"], &["count"]),
                "warnings of {source}"
            );
            // The frames are the function table, frame by frame.
            let frames = mine("frames");
            let mut from_frames: BTreeMap<Vec<String>, [u64; 5]> = BTreeMap::new();
            for f in &frames {
                let key = FUNCTION.iter().map(|k| f[*k].to_string()).collect();
                let e = from_frames.entry(key).or_default();
                let outer = f["recursive"] == json!(false);
                e[0] += 1;
                e[1] += u64::from(outer);
                e[2] += u(&f["self_ns"]);
                if outer {
                    e[3] += u(&f["active_ns"]);
                    e[4] += u(&f["paused_ns"]);
                }
                assert_eq!(
                    u(&f["exit_ns"]) - u(&f["enter_ns"]),
                    u(&f["active_ns"]) + u(&f["paused_ns"]),
                    "a frame's length is its active and paused time"
                );
                assert_eq!(f["parent"].is_null(), f["depth"] == json!(0));
            }
            let expected: BTreeMap<Vec<String>, [u64; 5]> = functions
                .iter()
                .filter(|(_, v)| v[0] > 0)
                .map(|(k, v)| (k.clone(), [v[0], v[1], v[2], v[3], v[4]]))
                .collect();
            assert_eq!(from_frames, expected, "frames of {source}");
        }
        // Summed over the traces: the merged report.
        let all = |t: &str| tables[t].rows();
        assert_eq!(
            sums(all("functions"), &FUNCTION, &FUNCTION_SUMS),
            report_sums(&merged["functions"], &FUNCTION, &FUNCTION_SUMS),
            "the functions' sums are the merged report's"
        );
        assert_eq!(
            sums(all("edges"), &EDGE, &EDGE_SUMS),
            report_sums(&merged["edges"], &EDGE, &EDGE_SUMS),
            "the edges' sums are the merged report's"
        );
        assert_eq!(
            sums(all("warnings"), &["kind"], &["count"]),
            report_sums(&merged["warnings"], &["kind"], &["count"]),
        );
        assert_eq!(
            all("stacks").count(),
            merged["stacks"].as_array().map_or(0, Vec::len)
        );
        let events: u64 = all("traces").map(|t| u(&t["events"])).sum();
        assert_eq!(events, u(&merged["trace"]["events"]));
    }

    #[test]
    fn the_parquet_crate_reads_back_the_reports_numbers() {
        let dir = TempDir::new("parquet");
        // Two stacks that ended (one with frames left open), one that did not.
        let ends = dir.write(
            "ends.jsonl",
            r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "task-1"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "handle"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": "task-2"}
{"ts": 10, "tid": 1, "ev": "enter", "fn": "step"}
{"ts": 20, "tid": 1, "ev": "exit", "fn": "step"}
{"ts": 20, "tid": 1, "ev": "switch", "stack": "task-3"}
{"ts": 20, "tid": 1, "ev": "enter", "fn": "step"}
{"ts": 25, "tid": 1, "ev": "switch", "stack": null}
{"ts": 30, "tid": 2, "ev": "end", "stack": "task-1"}
{"ts": 30, "tid": 2, "ev": "end", "stack": "task-2"}
{"ts": 90, "tid": 1, "ev": "enter", "fn": "idle"}
"#,
        );
        let cases: [(Vec<PathBuf>, &str); 4] = [
            (vec![repo_file("sample-traces/workload.bin")], "stack"),
            (several(), "stack"),
            (
                vec![vector("fibers.jsonl"), vector("gil-threads.jsonl")],
                "gil",
            ),
            (vec![ends, vector("fibers.jsonl")], "stack"),
        ];
        for (i, (traces, clock)) in cases.iter().enumerate() {
            let out = dir.join(&format!("out{i}"));
            export(traces, &out, clock);
            let tables = read_with_parquet_crate(&out);
            check(&tables, &reports(traces, clock));
            if i == 0 {
                // workload.bin's frames, all of them.
                assert_eq!(tables["frames"].len(), 106_330);
                assert_eq!(tables["functions"].len(), 10);
            }
        }
    }

    #[test]
    fn the_schema_is_int64_utf8_and_lists() {
        let dir = TempDir::new("parquet-schema");
        let out = dir.join("out");
        export(&[vector("fibers.jsonl")], &out, "stack");
        let file = std::fs::File::open(out.join("stacks.parquet")).expect("stacks.parquet");
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("a Parquet file");
        let schema = builder.schema();
        let ty = |name: &str| {
            schema
                .field_with_name(name)
                .expect(name)
                .data_type()
                .clone()
        };
        assert_eq!(ty("trace"), DataType::Utf8);
        assert_eq!(ty("pid"), DataType::Int64);
        assert_eq!(ty("running_ns"), DataType::Int64);
        assert!(matches!(ty("threads"), DataType::List(f) if f.data_type() == &DataType::Int64));
    }

    /// DuckDB's rows, or why the test skips.
    fn duckdb_or_skip() -> Option<PathBuf> {
        match duckdb_python() {
            Ok(p) => Some(p),
            Err(why) => {
                eprintln!(
                    "SKIPPED: DuckDB (PyPI's duckdb in target/duckdb-venv) cannot be had: {why}"
                );
                None
            }
        }
    }

    #[test]
    fn duckdb_reads_back_the_reports_numbers() {
        let Some(python) = duckdb_or_skip() else {
            return;
        };
        let dir = TempDir::new("parquet-duckdb");
        let (traces_dir, traces) = several_in(&dir);
        let cases = [
            (
                vec![repo_file("sample-traces/workload.bin")],
                vec![repo_file("sample-traces/workload.bin")],
            ),
            (vec![traces_dir], traces),
        ];
        for (i, (args, traces)) in cases.iter().enumerate() {
            let out = dir.join(&format!("out{i}"));
            export(args, &out, "stack");
            let duck = read_with_duckdb(&python, &out);
            check(&duck, &reports(traces, "stack"));
            if i == 0 {
                assert_eq!(duck["frames"].len(), 106_330);
            } else {
                // Row for row what the parquet crate reads.
                assert_eq!(duck, read_with_parquet_crate(&out));
            }
        }
    }

    /// The guide's DuckDB query (`docs/GUIDE.md`, "Tables for SQL engines"): the SQL of its heredoc (`<<'SQL'` to `SQL`).
    fn readme_query() -> String {
        let readme = std::fs::read_to_string(repo_file("docs/GUIDE.md")).expect("docs/GUIDE.md");
        let start = readme.find("<<'SQL'\n").expect("the guide's DuckDB query") + 8;
        let len = readme[start..].find("\nSQL\n").expect("the query's end");
        readme[start..start + len].to_owned()
    }

    #[test]
    fn the_readmes_duckdb_query_gives_the_tables_top_functions_across_exports() {
        let Some(python) = duckdb_or_skip() else {
            return;
        };
        let dir = TempDir::new("parquet-readme");
        // As the guide makes them: one export per trace, out/NAME/.
        let traces = [
            repo_file("sample-traces/workload.bin"),
            repo_file("sample-traces/workload-ring.bin"),
            repo_file("sample-traces/workload-full.bin"),
        ];
        for t in &traces {
            let name = t.file_stem().and_then(|s| s.to_str()).expect("a name");
            mtanalyze([
                "export".as_ref(),
                t.as_os_str(),
                "--format".as_ref(),
                "parquet".as_ref(),
                "-o".as_ref(),
                dir.join(&format!("out/{name}")).as_os_str(),
            ])
            .success();
        }
        let o = Command::new(&python)
            .args([
                "-c",
                "import duckdb, json, sys; print(json.dumps(duckdb.sql(sys.argv[1]).fetchall()))",
                &readme_query(),
            ])
            .current_dir(dir.path())
            .output()
            .expect("run python");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows: Vec<Value> = serde_json::from_slice(&o.stdout).expect("rows");
        // The merged report's table, sorted by tottime as the query sorts.
        let report = reports(&traces, "stack");
        let mut functions = report["merged"]["functions"]
            .as_array()
            .expect("functions")
            .clone();
        functions.sort_by(|a, b| {
            u(&b["tottime_ns"])
                .cmp(&u(&a["tottime_ns"]))
                .then(a["function"].as_str().cmp(&b["function"].as_str()))
        });
        let expected: Vec<Value> = functions
            .iter()
            .take(10)
            .map(|f| {
                json!([
                    f["function"],
                    f["ncalls"],
                    f["tottime_ns"],
                    f["cumtime_ns"],
                    f["paused_ns"],
                    format!("{}:{}", f["file"].as_str().unwrap_or(""), f["line"])
                ])
            })
            .collect();
        assert_eq!(rows.len(), 10);
        assert_eq!(rows, expected);
    }

    /// With a time window, the frames table holds the frames that ran in
    /// it, clipped; those whose call counts (`counted`) are the report's
    /// calls, and self times add up to its tottime.
    #[test]
    fn a_time_window_clips_the_frames_and_counts_the_calls_in_it() {
        let trace = repo_file("sample-traces/workload.bin");
        let dir = TempDir::new("parquet-window");
        let out = dir.join("out");
        let window: [&OsStr; 4] = [
            "--from".as_ref(),
            "100ms".as_ref(),
            "--to".as_ref(),
            "200ms".as_ref(),
        ];
        let mut args: Vec<&OsStr> = vec!["export".as_ref(), trace.as_os_str()];
        args.extend(["--format", "parquet", "--frames", "-o"].map(OsStr::new));
        args.push(out.as_os_str());
        args.extend(window);
        mtanalyze(args).success();
        let tables = read_with_parquet_crate(&out);
        let frames = &tables["frames"];
        let mut calls: BTreeMap<Vec<String>, Vec<u64>> = BTreeMap::new();
        for r in frames.rows() {
            assert!(u(&r["enter_ns"]) >= 100_000_000 && u(&r["exit_ns"]) <= 200_000_000);
            let k = FUNCTION.iter().map(|k| r[*k].to_string()).collect();
            let e = calls.entry(k).or_insert_with(|| vec![0, 0]);
            e[0] += (r["counted"] == Value::Bool(true)) as u64;
            e[1] += u(&r["self_ns"]);
        }
        let mut args: Vec<&OsStr> = vec![trace.as_os_str(), "--format".as_ref(), "json".as_ref()];
        args.extend(window);
        let report = mtanalyze(args).success().json();
        let want = report_sums(&report["functions"], &FUNCTION, &["ncalls", "tottime_ns"]);
        assert!(frames.len() > 0);
        assert_eq!(calls, want);
    }
}

//! The JSON outputs agree with `schemas/report.schema.json` and
//! `schemas/check.schema.json`, checked with a small validator for the
//! subset of JSON Schema the files use (`$ref` into `$defs`, its own or
//! another file's; `type`, `enum`, `const`, `properties`, `required`,
//! `additionalProperties: false`, `items`, `minimum`, `maximum`, `allOf`,
//! `if`/`then`), and every property there is described (the HTML page's
//! data and `schemas/html-page.schema.json`: `html.rs`). `schemas/events.schema.json` accepts exactly the
//! JSON lines the analyzer accepts, on a set of good and bad lines.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::util::{mtanalyze, repo_file, vector, TempDir, HANDOFF, RECURSION, REPAIRS};

fn load_schema(name: &str) -> Value {
    let path = repo_file(&format!("schemas/{name}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

/// A schema of `schemas/` loaded once for the whole test run, for the
/// `$ref`s of one schema into another's `$defs`.
fn shared_schema(name: &str) -> &'static Value {
    static LOADED: Mutex<BTreeMap<String, &'static Value>> = Mutex::new(BTreeMap::new());
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    loaded
        .entry(name.to_owned())
        .or_insert_with(|| Box::leak(Box::new(load_schema(name))))
}

/// The schema `schema` stands for, and the root its own `$ref`s resolve
/// in: a `$ref` is `#/$defs/NAME` in `root`, or `FILE#/$defs/NAME` in
/// another file of `schemas/` (the HTML page's data embeds the report's
/// and the diff's objects).
fn resolve<'s>(root: &'s Value, schema: &'s Value) -> (&'s Value, &'s Value) {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let (file, pointer) = r
                .split_once('#')
                .unwrap_or_else(|| panic!("unsupported $ref {r}"));
            let root = match file {
                "" => root,
                file => shared_schema(file),
            };
            let name = pointer
                .strip_prefix("/$defs/")
                .unwrap_or_else(|| panic!("unsupported $ref {r}"));
            let target = &root["$defs"][name];
            assert!(!target.is_null(), "dangling $ref {r}");
            resolve(root, target)
        }
        None => (root, schema),
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "null" => v.is_null(),
        other => panic!("unsupported type {other}"),
    }
}

/// Collects every violation of `schema` by `v` at `path`.
fn validate(root: &Value, schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let (root, s) = resolve(root, schema);
    // Keywords next to a `$ref` (descriptions) add no constraints here.
    match &s["type"] {
        Value::String(t) if !type_ok(t, v) => errors.push(format!("{path}: {v} is not {t}")),
        Value::Array(ts) if !ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)) => {
            errors.push(format!("{path}: {v} is none of {ts:?}"))
        }
        _ => {}
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errors.push(format!("{path}: {v} is not {c}"));
        }
    }
    if let (Some(max), Some(n)) = (s["maximum"].as_f64(), v.as_f64()) {
        if n > max {
            errors.push(format!("{path}: {n} > {max}"));
        }
    }
    for sub in s["allOf"].as_array().into_iter().flatten() {
        validate(root, sub, v, path, errors);
    }
    if let Some(cond) = s.get("if") {
        let mut failed = Vec::new();
        validate(root, cond, v, path, &mut failed);
        if failed.is_empty() {
            if let Some(then) = s.get("then") {
                validate(root, then, v, path, errors);
            }
        }
    }
    if let Some(options) = s["enum"].as_array() {
        if !options.contains(v) {
            errors.push(format!("{path}: {v} is not one of {options:?}"));
        }
    }
    if let (Some(min), Some(n)) = (s["minimum"].as_f64(), v.as_f64()) {
        if n < min {
            errors.push(format!("{path}: {n} < {min}"));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = s["properties"].as_object();
        for req in s["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !obj.contains_key(req) {
                errors.push(format!("{path}: missing required {req}"));
            }
        }
        for (k, child) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => validate(root, ps, child, &format!("{path}.{k}"), errors),
                None if s["additionalProperties"] == Value::Bool(false) => {
                    errors.push(format!("{path}: undocumented field {k}"))
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, child) in arr.iter().enumerate() {
            validate(root, items, child, &format!("{path}[{i}]"), errors);
        }
    }
}

/// Every way `v` breaks the schema `schemas/SCHEMA_NAME`.
pub(crate) fn violations(schema_name: &str, v: &Value) -> Vec<String> {
    let root = load_schema(schema_name);
    let mut errors = Vec::new();
    validate(&root, &root, v, "$", &mut errors);
    errors
}

#[track_caller]
pub(crate) fn assert_valid(schema_name: &str, v: &Value) {
    let errors = violations(schema_name, v);
    assert!(
        errors.is_empty(),
        "output violates {schema_name}:\n{}",
        errors.join("\n")
    );
}

/// Every property of every object schema has a description, and every
/// required field is a documented property. Only the fields listed in
/// `optional` (as `$.name` or `Def.name`) may be left out of `required`.
pub(crate) fn assert_documented(schema_name: &str, optional: &[&str]) {
    let root = load_schema(schema_name);
    let mut objects = vec![("$".to_owned(), &root)];
    if let Some(defs) = root["$defs"].as_object() {
        objects.extend(defs.iter().map(|(k, v)| (k.clone(), v)));
    }
    for (name, obj) in objects {
        let Some(props) = obj["properties"].as_object() else {
            continue;
        };
        let required: Vec<&str> = obj["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for (k, p) in props {
            let described = p["description"].as_str().is_some_and(|d| !d.is_empty());
            assert!(described, "{schema_name}: {name}.{k} has no description");
            let path = format!("{name}.{k}");
            assert!(
                required.contains(&k.as_str()) || optional.contains(&path.as_str()),
                "{schema_name}: {path} is not required"
            );
        }
        for r in &required {
            assert!(
                props.contains_key(*r),
                "{schema_name}: {name} requires undocumented {r}"
            );
        }
    }
}

#[test]
fn schemas_describe_and_require_every_field() {
    assert_documented(
        "report.schema.json",
        &[
            "$.paths",
            "$.functions_total",
            "$.edges_total",
            "ThreadSummary.lost_from_ns",
            "TraceSummary.traces",
            "TraceSummary.host",
            "TraceSummary.window",
            "FunctionStats.tottime_hist",
            "Mark.trace",
            "StackStats.ended",
            "StackStats.kind",
            "Warning.by_stack_kind",
            "Warning.details",
            "WarningDetail.thread",
            "WarningDetail.stack",
            "WarningDetail.stack_name",
            "WarningDetail.stack_kind",
            "WarningDetail.ns",
            "WarningDetail.byte",
            "WarningDetail.open_frames",
        ],
    );
    assert_documented("check.schema.json", &["ThreadSummary.lost_from_ns"]);
    assert_documented("html-page.schema.json", &[]);
}

#[test]
fn report_json_validates_against_its_schema() {
    let dir = TempDir::new("schema");
    let repairs = dir.write("repairs.jsonl", REPAIRS);
    for trace in [vector("fibers.jsonl"), vector("recursion-b.jsonl"), repairs] {
        for clock in ["stack", "gil", "wall"] {
            let run = mtanalyze([
                trace.as_os_str(),
                "--format".as_ref(),
                "json".as_ref(),
                "--clock".as_ref(),
                clock.as_ref(),
            ]);
            assert_valid("report.schema.json", &run.success().json());
        }
        // With a time window, which the report then names.
        let run = mtanalyze([
            trace.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
            "--from".as_ref(),
            "20ns".as_ref(),
            "--to".as_ref(),
            "1us".as_ref(),
        ]);
        let json = run.success().json();
        assert_valid("report.schema.json", &json);
        assert_eq!(json["trace"]["window"]["from_ns"], 20);
    }
}

#[test]
fn check_json_validates_against_its_schema() {
    let dir = TempDir::new("check-schema");
    let bin = dir.join("fibers.bin");
    mtanalyze([
        "convert".as_ref(),
        vector("fibers.jsonl").as_os_str(),
        bin.as_os_str(),
    ])
    .success();
    let bytes = std::fs::read(&bin).unwrap_or_default();
    let cut = dir.write("cut.bin", &bytes[..bytes.len() * 2 / 3]);
    for trace in [vector("fibers.jsonl"), bin, cut] {
        let run = mtanalyze([
            "check".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            trace.as_os_str(),
        ]);
        assert_valid("check.schema.json", &run.success().json());
    }
}

fn schema_errors(schema_name: &str, v: &Value) -> Vec<String> {
    let root = load_schema(schema_name);
    let mut errors = Vec::new();
    validate(&root, &root, v, "$", &mut errors);
    errors
}

#[test]
fn every_line_of_the_vectors_and_examples_fits_the_events_schema() {
    let mut texts: Vec<String> = ["fibers", "gil-threads", "recursion-a", "recursion-b"]
        .iter()
        .map(|n| std::fs::read_to_string(vector(&format!("{n}.jsonl"))).unwrap_or_default())
        .collect();
    texts.extend([HANDOFF, RECURSION, REPAIRS].map(str::to_owned));
    let mut lines = 0;
    for text in &texts {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let errors = schema_errors("events.schema.json", &v);
            assert!(errors.is_empty(), "{line}: {errors:?}");
            lines += 1;
        }
    }
    assert!(lines > 2000, "read {lines} lines");
}

#[test]
fn the_events_schema_and_the_analyzer_agree_on_good_and_bad_lines() {
    let good = [
        r#"{"ts": 5, "tid": 1, "ev": "enter", "fn": "f", "file": "a.rs", "line": 3}"#,
        r#"{"ts": 5, "tid": 1, "ev": "switch"}"#,
        r#"{"ts": 5, "tid": 1, "ev": "switch", "stack": null}"#,
        r#"{"ts": 5, "tid": 1, "ev": "switch", "stack": "task"}"#,
        r#"{"ev": "thread", "tid": 9, "name": "w"}"#,
        r#"{"ev": "thread", "tid": 9, "ts": 1}"#,
        r#"{"ts": 5, "tid": 4294967295, "ev": "mark", "name": "warm-up done"}"#,
        r#"{"ts": 5, "tid": 1, "ev": "mark", "name": ""}"#,
    ];
    let bad = [
        r#"{"ts": 5, "tid": 1, "ev": "enter"}"#,
        r#"{"tid": 1, "ev": "exit", "fn": "f"}"#,
        r#"{"tid": 1, "ev": "switch", "stack": "x"}"#,
        r#"{"ts": 5, "tid": 0, "ev": "enter", "fn": "f"}"#,
        r#"{"ts": 5, "tid": 1, "ev": "jump", "fn": "f"}"#,
        r#"{"ts": 5, "tid": 1, "ev": "enter", "fn": "f", "colour": "red"}"#,
        r#"{"ts": -5, "tid": 1, "ev": "enter", "fn": "f"}"#,
        r#"{"ts": 5.5, "tid": 1, "ev": "enter", "fn": "f"}"#,
        r#"{"ts": 5, "tid": 1, "ev": "switch", "stack": 7}"#,
        r#"{"ts": 5, "tid": 1, "ev": "enter", "fn": "f", "line": 4294967296}"#,
        r#"{"ts": 5, "ev": "enter", "fn": "f"}"#,
        r#"{"ts": 5, "tid": 1, "ev": "mark"}"#,
        r#"{"tid": 1, "ev": "mark", "name": "m"}"#,
        r#"{"ts": 5, "tid": 4294967296, "ev": "mark", "name": "m"}"#,
        r#"{"ts": 5, "tid": 1, "ev": "mark", "name": 7}"#,
    ];
    let dir = TempDir::new("events-schema");
    for (line, ok) in good
        .iter()
        .map(|l| (l, true))
        .chain(bad.iter().map(|l| (l, false)))
    {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let errors = schema_errors("events.schema.json", &v);
        assert_eq!(errors.is_empty(), ok, "schema on {line}: {errors:?}");
        let trace = dir.write("line.jsonl", format!("{line}\n"));
        let run = mtanalyze([&trace]);
        let want = if ok { 0 } else { 2 };
        assert_eq!(run.code, Some(want), "mtanalyze on {line}: {}", run.stderr);
    }
}

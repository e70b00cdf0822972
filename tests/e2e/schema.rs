//! The JSON outputs agree with `schemas/report.schema.json` and
//! `schemas/check.schema.json`, checked with a small validator for the
//! subset of JSON Schema the files use (`$ref` into `$defs`, `type`, `enum`,
//! `properties`, `required`, `additionalProperties: false`, `items`,
//! `minimum`), and every property there is described.

use serde_json::Value;

use crate::util::{mtanalyze, repo_file, vector, TempDir, REPAIRS};

fn load_schema(name: &str) -> Value {
    let path = repo_file(&format!("schemas/{name}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

fn resolve<'s>(root: &'s Value, schema: &'s Value) -> &'s Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r
                .strip_prefix("#/$defs/")
                .unwrap_or_else(|| panic!("unsupported $ref {r}"));
            let target = &root["$defs"][name];
            assert!(!target.is_null(), "dangling $ref {r}");
            resolve(root, target)
        }
        None => schema,
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
    let s = resolve(root, schema);
    // Keywords next to a `$ref` (descriptions) add no constraints here.
    match &s["type"] {
        Value::String(t) if !type_ok(t, v) => errors.push(format!("{path}: {v} is not {t}")),
        Value::Array(ts) if !ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)) => {
            errors.push(format!("{path}: {v} is none of {ts:?}"))
        }
        _ => {}
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

#[track_caller]
fn assert_valid(schema_name: &str, v: &Value) {
    let root = load_schema(schema_name);
    let mut errors = Vec::new();
    validate(&root, &root, v, "$", &mut errors);
    assert!(
        errors.is_empty(),
        "output violates {schema_name}:\n{}",
        errors.join("\n")
    );
}

/// Every property of every object schema has a description, and every
/// required field is a documented property. Only the fields listed in
/// `optional` (as `$.name` or `Def.name`) may be left out of `required`.
fn assert_documented(schema_name: &str, optional: &[&str]) {
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
    assert_documented("report.schema.json", &["$.paths"]);
    assert_documented("check.schema.json", &[]);
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

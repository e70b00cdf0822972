//! `mtanalyze diff BASE NEW`: what got faster or slower, per function and
//! per call edge, in table, JSON and folded form, on binary and JSON-lines
//! inputs in any mix.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::Value;

use crate::pipe::read_a_little_then_close;
use crate::schema::{assert_documented, assert_valid};
use crate::util::{
    assert_text_eq, many_functions, mtanalyze, repo_file, vector, Run, TempDir, HANDOFF,
};

/// Runs `mtanalyze diff BASE NEW ARGS...`.
fn diff(base: &Path, new: &Path, args: &[&str]) -> Run {
    let mut all = vec!["diff".as_ref(), base.as_os_str(), new.as_os_str()];
    all.extend(args.iter().map(OsStr::new));
    mtanalyze(all)
}

/// The diff of BASE and NEW as JSON.
fn diff_json(base: &Path, new: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--format", "json"];
    all.extend(args);
    diff(base, new, &all).success().json()
}

/// The single-trace JSON report.
fn report_json(trace: &Path, args: &[&str]) -> Value {
    let mut all = vec![trace.as_os_str(), "--format".as_ref(), "json".as_ref()];
    all.extend(args.iter().map(OsStr::new));
    mtanalyze(all).success().json()
}

fn array(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// The table without its first two lines (they name the temporary files).
fn without_source_lines(stdout: &str) -> String {
    let mut lines = stdout.splitn(3, '\n');
    let base = lines.next().unwrap_or_default();
    let new = lines.next().unwrap_or_default();
    assert!(base.starts_with("base: "), "first line: {base:?}");
    assert!(new.starts_with("new:  "), "second line: {new:?}");
    lines.next().unwrap_or_default().to_owned()
}

/// The rows of the function table: the lines after the rule.
fn table_rows(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("---"))
        .skip(1)
        .map(str::to_owned)
        .collect()
}

/// One function row cut into its cells: the three `base -> new` pairs,
/// then the changes and percentages, then the function label (its words
/// joined by single spaces).
struct FunctionRow {
    pairs: Vec<(String, String)>,
    cells: Vec<String>,
    function: String,
}

fn parse_row(row: &str) -> FunctionRow {
    let pair = Regex::new(r"(\S+) -> +(\S+)").expect("regex");
    let pairs: Vec<(String, String)> = pair
        .captures_iter(row)
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect();
    assert_eq!(pairs.len(), 3, "three base -> new cells in {row:?}");
    let rest = pair.replace_all(row, " ");
    let mut words = rest.split_whitespace();
    // tottime change and %, p, verdict, cumtime change and %, paused change.
    let cells: Vec<String> = words.by_ref().take(7).map(str::to_owned).collect();
    let function = words.collect::<Vec<_>>().join(" ");
    FunctionRow {
        pairs,
        cells,
        function,
    }
}

// Base and new trace of the known-changes example: `doubles` takes twice
// as long, `gone` is gone, `fresh` is new, `moves` moved from line 10 to
// line 42 of b.rs, `same` and main's own 100 ns are unchanged.
const KNOWN_BASE: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main", "file": "m.rs", "line": 1}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "doubles", "file": "a.rs", "line": 1}
{"ts": 1000, "tid": 1, "ev": "exit", "fn": "doubles"}
{"ts": 1000, "tid": 1, "ev": "enter", "fn": "same", "file": "a.rs", "line": 2}
{"ts": 1400, "tid": 1, "ev": "exit", "fn": "same"}
{"ts": 1400, "tid": 1, "ev": "enter", "fn": "gone", "file": "a.rs", "line": 3}
{"ts": 1650, "tid": 1, "ev": "exit", "fn": "gone"}
{"ts": 1650, "tid": 1, "ev": "enter", "fn": "moves", "file": "b.rs", "line": 10}
{"ts": 2350, "tid": 1, "ev": "exit", "fn": "moves"}
{"ts": 2450, "tid": 1, "ev": "exit", "fn": "main"}
"#;

const KNOWN_NEW: &str = r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "main", "file": "m.rs", "line": 1}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "doubles", "file": "a.rs", "line": 1}
{"ts": 2000, "tid": 1, "ev": "exit", "fn": "doubles"}
{"ts": 2000, "tid": 1, "ev": "enter", "fn": "same", "file": "a.rs", "line": 2}
{"ts": 2400, "tid": 1, "ev": "exit", "fn": "same"}
{"ts": 2400, "tid": 1, "ev": "enter", "fn": "fresh", "file": "a.rs", "line": 4}
{"ts": 2490, "tid": 1, "ev": "exit", "fn": "fresh"}
{"ts": 2490, "tid": 1, "ev": "enter", "fn": "moves", "file": "b.rs", "line": 42}
{"ts": 3190, "tid": 1, "ev": "exit", "fn": "moves"}
{"ts": 3290, "tid": 1, "ev": "exit", "fn": "main"}
"#;

fn known(dir: &TempDir) -> (PathBuf, PathBuf) {
    (
        dir.write("base.jsonl", KNOWN_BASE),
        dir.write("new.jsonl", KNOWN_NEW),
    )
}

#[test]
fn a_trace_against_itself_changes_nothing() {
    let dir = TempDir::new("diff-self");
    let handoff = dir.write("handoff.jsonl", HANDOFF);
    for trace in [
        repo_file("sample-traces/workload.bin"),
        vector("fibers.jsonl"),
        handoff,
    ] {
        let run = diff(&trace, &trace, &[]).success();
        assert!(
            run.stdout.contains("change: 0ns (0.0%)") && run.stdout.contains(", 0 new, 0 gone"),
            "{}",
            run.stdout
        );
        let rows = table_rows(&run.stdout);
        assert!(rows.len() > 2, "{}", run.stdout);
        for row in &rows {
            let r = parse_row(row);
            for (b, n) in &r.pairs {
                assert_eq!(b, n, "{row}");
            }
            // p is 1 where the test could be made, `-` for one call a side.
            assert!(["1.000", "-"].contains(&r.cells[2].as_str()), "{row}");
            let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
            assert_eq!(
                [&cells[..2], &cells[3..]].concat(),
                ["0ns", "0.0%", "noise", "0ns", "0.0%", "0ns"],
                "no change in {row}"
            );
            assert!(!r.function.contains('['), "marked: {row}");
        }

        let v = diff_json(&trace, &trace, &[]);
        assert_eq!(v["base_total_ns"], v["new_total_ns"]);
        let functions = array(&v["functions"]);
        assert_eq!(
            functions.len(),
            array(&report_json(&trace, &[])["functions"]).len()
        );
        for f in &functions {
            assert_eq!(f["match"], "site", "{f}");
            assert_eq!(f["base"], f["new"], "{f}");
            for (k, d) in f["delta"].as_object().into_iter().flatten() {
                assert_eq!(d, 0, "{k} of {f}");
            }
        }
        let edges = array(&v["edges"]);
        assert!(!edges.is_empty() || functions.len() < 2);
        for e in &edges {
            assert_eq!(e["base"], e["new"], "{e}");
            for (k, d) in e["delta"].as_object().into_iter().flatten() {
                assert_eq!(d, 0, "{k} of {e}");
            }
        }
    }
}

#[test]
fn known_changes_are_reported_exactly() {
    let dir = TempDir::new("diff-known");
    let (base, new) = known(&dir);
    let run = diff(&base, &new, &[]).success();
    assert!(run.stdout.starts_with(&format!(
        "base: {} (jsonl, format 3)  duration: 2.45µs  events: 10  stacks: 1\n\
         new:  {} (jsonl, format 3)  duration: 3.29µs  events: 10  stacks: 1\n",
        base.display(),
        new.display()
    )));
    assert_text_eq(
        "\
clock: stack  total self time: 2.45µs -> 3.29µs  change: +840ns (+34.3%)
functions: 4 in both (1 matched by name only), 1 new, 1 gone
significance: p < 0.001 (Mann-Whitney on the calls, medians)  min effect: 10% (0.5% of the total)  total: noise (no test)

tottime (base -> new)   change        %  p  verdict  cumtime (base -> new)   change        %  ncalls (base -> new)  paused change  function (file:line)
---------------------------------------------------------------------------------------------------------------------------------------------------------------------
     1.00µs -> 2.00µs  +1.00µs  +100.0%  -    noise       1.00µs -> 2.00µs  +1.00µs  +100.0%                1 -> 1            0ns  doubles (a.rs:1)
      250ns ->      -   -250ns  -100.0%  -    noise        250ns ->      -   -250ns  -100.0%                1 -> -            0ns  gone (a.rs:3)  [gone]
          - ->   90ns    +90ns      new  -    noise            - ->   90ns    +90ns      new                - -> 1            0ns  fresh (a.rs:4)  [new]
      100ns ->  100ns      0ns     0.0%  -    noise       2.45µs -> 3.29µs   +840ns   +34.3%                1 -> 1            0ns  main (m.rs:1)
      700ns ->  700ns      0ns     0.0%  -    noise        700ns ->  700ns      0ns     0.0%                1 -> 1            0ns  moves (b.rs:42)  [matched by name]
      400ns ->  400ns      0ns     0.0%  -    noise        400ns ->  400ns      0ns     0.0%                1 -> 1            0ns  same (a.rs:2)
",
        &without_source_lines(&run.stdout),
    );

    let v = diff_json(&base, &new, &[]);
    assert_eq!(v["matched_by_name"], 1);
    assert_eq!(
        (&v["base_total_ns"], &v["new_total_ns"]),
        (&2450.into(), &3290.into())
    );
    let functions = array(&v["functions"]);
    let names: Vec<&str> = functions
        .iter()
        .filter_map(|f| f["function"].as_str())
        .collect();
    assert_eq!(names, ["doubles", "gone", "fresh", "main", "moves", "same"]);
    let by_name = |n: &str| {
        functions
            .iter()
            .find(|f| f["function"] == n)
            .cloned()
            .unwrap_or_default()
    };
    let d = by_name("doubles");
    assert_eq!(
        (
            &d["match"],
            &d["base"]["tottime_ns"],
            &d["new"]["tottime_ns"],
            &d["delta"]["tottime_ns"]
        ),
        (&"site".into(), &1000.into(), &2000.into(), &1000.into())
    );
    let g = by_name("gone");
    assert_eq!((&g["match"], &g["new"]), (&"gone".into(), &Value::Null));
    assert_eq!(
        g["delta"],
        serde_json::json!({"ncalls": -1, "primitive_calls": -1, "tottime_ns": -250, "cumtime_ns": -250, "paused_ns": 0})
    );
    let f = by_name("fresh");
    assert_eq!((&f["match"], &f["base"]), (&"new".into(), &Value::Null));
    assert_eq!(f["delta"]["tottime_ns"], 90);
    let m = by_name("moves");
    assert_eq!(
        (&m["match"], &m["file"], &m["line"]),
        (&"name".into(), &"b.rs".into(), &42.into())
    );
    assert_eq!(m["base"], m["new"]);
    let main = by_name("main");
    assert_eq!(main["delta"]["tottime_ns"], 0);
    assert_eq!(main["delta"]["cumtime_ns"], 1000 - 250 + 90);
    // Exactly doubles, gone and fresh changed (main only through its children).
    let changed: Vec<&str> = functions
        .iter()
        .filter(|f| f["delta"]["tottime_ns"] != 0 || f["delta"]["ncalls"] != 0)
        .filter_map(|f| f["function"].as_str())
        .collect();
    assert_eq!(changed, ["doubles", "gone", "fresh"]);
    // main -> moves is one edge across the move, unchanged.
    let edges = array(&v["edges"]);
    let to_moves = edges
        .iter()
        .find(|e| e["callee"] == "moves")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&to_moves["callee_line"], &to_moves["delta"]["cumtime_ns"]),
        (&42.into(), &0.into())
    );
    assert!(!to_moves["base"].is_null() && !to_moves["new"].is_null());
    assert_eq!(edges.len(), 5, "main -> doubles, same, gone, fresh, moves");
}

/// splitmix64: a small deterministic generator for the random traces.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// A random trace as JSON lines: up to three threads, each entering and
/// leaving functions (fixed sites per name, recursion allowed) on its own
/// stack and on two logical stacks it switches between, so frames are
/// paused while another stack runs; every frame is closed at the end.
fn random_trace(seed: u64) -> String {
    const NAMES: [&str; 6] = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
    let mut rng = Rng(seed);
    let mut out = String::new();
    let stack_name = |tid: u64, s: Option<u64>| match s {
        None => "null".to_owned(),
        Some(k) => format!("\"task-{tid}-{k}\""),
    };
    for tid in 1..=1 + rng.below(3) {
        let mut ts = rng.below(50);
        let mut open: BTreeMap<Option<u64>, Vec<&str>> = BTreeMap::new();
        let mut current = None;
        for _ in 0..20 + rng.below(60) {
            ts += 1 + rng.below(100);
            let depth = open.get(&current).map_or(0, Vec::len);
            let roll = rng.below(10);
            if roll == 0 {
                current = if rng.below(3) == 0 {
                    None
                } else {
                    Some(rng.below(2))
                };
                let _ = writeln!(
                    out,
                    r#"{{"ts": {ts}, "tid": {tid}, "ev": "switch", "stack": {}}}"#,
                    stack_name(tid, current)
                );
            } else if roll <= 5 && depth < 6 || depth == 0 {
                let i = rng.below(NAMES.len() as u64) as usize;
                let _ = writeln!(
                    out,
                    r#"{{"ts": {ts}, "tid": {tid}, "ev": "enter", "fn": "{}", "file": "src/{}.rs", "line": {}}}"#,
                    NAMES[i],
                    NAMES[i],
                    10 * (i + 1)
                );
                open.entry(current).or_default().push(NAMES[i]);
            } else if let Some(name) = open.get_mut(&current).and_then(Vec::pop) {
                let _ = writeln!(
                    out,
                    r#"{{"ts": {ts}, "tid": {tid}, "ev": "exit", "fn": "{name}"}}"#
                );
            }
        }
        for (stack, frames) in open {
            ts += 1;
            let _ = writeln!(
                out,
                r#"{{"ts": {ts}, "tid": {tid}, "ev": "switch", "stack": {}}}"#,
                stack_name(tid, stack)
            );
            for name in frames.iter().rev() {
                ts += 1 + rng.below(20);
                let _ = writeln!(
                    out,
                    r#"{{"ts": {ts}, "tid": {tid}, "ev": "exit", "fn": "{name}"}}"#
                );
            }
        }
        let _ = writeln!(
            out,
            r#"{{"ts": {}, "tid": {tid}, "ev": "switch", "stack": null}}"#,
            ts + 1
        );
    }
    out
}

/// `key` -> the object, for a report's functions or edges.
fn index(items: &Value, key: &[&str]) -> BTreeMap<String, Value> {
    array(items)
        .into_iter()
        .map(|item| {
            let k: Vec<String> = key.iter().map(|f| item[*f].to_string()).collect();
            (k.join(" "), item)
        })
        .collect()
}

/// Checks a diff entry's sides against the two reports' entries and its
/// delta against their difference, for `fields`.
#[track_caller]
fn check_entry(
    what: &str,
    entry: &Value,
    base: Option<&Value>,
    new: Option<&Value>,
    fields: &[&str],
) {
    for (side, report) in [("base", base), ("new", new)] {
        match report {
            None => assert!(
                entry[side].is_null(),
                "{what}: {side} should be null: {entry}"
            ),
            Some(r) => {
                for f in fields {
                    assert_eq!(entry[side][f], r[f], "{what}: {side}.{f}");
                }
            }
        }
    }
    for f in fields {
        let get = |r: Option<&Value>| r.and_then(|r| r[f].as_i64()).unwrap_or(0);
        assert_eq!(
            entry["delta"][f].as_i64(),
            Some(get(new) - get(base)),
            "{what}: delta.{f}"
        );
    }
}

#[test]
fn deltas_are_the_difference_of_the_two_single_trace_reports() {
    let dir = TempDir::new("diff-random");
    const FUNCTION_FIELDS: [&str; 5] = [
        "ncalls",
        "primitive_calls",
        "tottime_ns",
        "cumtime_ns",
        "paused_ns",
    ];
    const EDGE_FIELDS: [&str; 4] = ["ncalls", "primitive_calls", "tottime_ns", "cumtime_ns"];
    // What the generated traces exercised, so they cannot quietly degenerate.
    let (mut paused, mut one_sided, mut recursive) = (false, false, false);
    for seed in 1..=5u64 {
        let base = dir.write(&format!("base-{seed}.jsonl"), random_trace(seed));
        let new = dir.write(&format!("new-{seed}.jsonl"), random_trace(seed + 1000));
        for clock in ["stack", "gil"] {
            let args = ["--clock", clock];
            let (rb, rn) = (report_json(&base, &args), report_json(&new, &args));
            let v = diff_json(&base, &new, &args);
            let what = format!("seed {seed}, --clock {clock}");
            assert_eq!(v["base"], rb["trace"], "{what}");
            assert_eq!(v["new"], rn["trace"], "{what}");
            let site = ["function", "file", "line"];
            let (fb, fn_) = (
                index(&rb["functions"], &site),
                index(&rn["functions"], &site),
            );
            let functions = index(&v["functions"], &site);
            assert_eq!(
                functions.keys().collect::<Vec<_>>(),
                fb.keys()
                    .chain(fn_.keys())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>(),
                "{what}: every function of either report, once"
            );
            for (k, f) in &functions {
                check_entry(
                    &format!("{what}: {k}"),
                    f,
                    fb.get(k),
                    fn_.get(k),
                    &FUNCTION_FIELDS,
                );
            }
            let ends = [
                "caller",
                "caller_file",
                "caller_line",
                "callee",
                "callee_file",
                "callee_line",
            ];
            let (eb, en) = (index(&rb["edges"], &ends), index(&rn["edges"], &ends));
            let edges = index(&v["edges"], &ends);
            assert_eq!(
                edges.len(),
                eb.keys()
                    .chain(en.keys())
                    .collect::<std::collections::BTreeSet<_>>()
                    .len(),
                "{what}"
            );
            for (k, e) in &edges {
                check_entry(
                    &format!("{what}: edge {k}"),
                    e,
                    eb.get(k),
                    en.get(k),
                    &EDGE_FIELDS,
                );
            }
            let total = |r: &Value| -> u64 {
                array(&r["functions"])
                    .iter()
                    .filter_map(|f| f["tottime_ns"].as_u64())
                    .sum()
            };
            assert_eq!(v["base_total_ns"], total(&rb), "{what}");
            assert_eq!(v["new_total_ns"], total(&rn), "{what}");
            for f in functions.values() {
                paused |= f["delta"]["paused_ns"] != 0;
                one_sided |= f["base"].is_null() || f["new"].is_null();
                recursive |= f["delta"]["ncalls"] != f["delta"]["primitive_calls"];
            }
        }
    }
    assert!(
        paused && one_sided && recursive,
        "paused {paused}, one-sided {one_sided}, recursive {recursive}"
    );
}

#[test]
fn jsonl_against_its_binary_conversion_changes_nothing() {
    let dir = TempDir::new("diff-mixed");
    for name in ["fibers", "gil-threads"] {
        let jsonl = vector(&format!("{name}.jsonl"));
        let bin = dir.join(&format!("{name}.bin"));
        mtanalyze(["convert".as_ref(), jsonl.as_os_str(), bin.as_os_str()]).success();
        for (base, new) in [(&jsonl, &bin), (&bin, &jsonl)] {
            let run = diff(base, new, &[]).success();
            run.stdout_has("(jsonl, format 3)")
                .stdout_has("(binary, format 3)")
                .stdout_has("change: 0ns (0.0%)");
            let v = diff_json(base, new, &[]);
            let functions = array(&v["functions"]);
            assert!(!functions.is_empty());
            for item in functions.iter().chain(array(&v["edges"]).iter()) {
                assert_eq!(item["base"], item["new"], "{name}: {item}");
                assert!(
                    item["delta"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .all(|(_, d)| d == 0),
                    "{name}: {item}"
                );
            }
        }
    }
}

#[test]
fn normalize_scales_the_base_to_the_new_total_and_says_so() {
    let dir = TempDir::new("diff-normalize");
    let (base, new) = known(&dir);
    let plain = diff(&base, &new, &[]).success();
    plain.stdout_lacks("normalized");
    let run = diff(&base, &new, &["--normalize"]).success();
    // 3290 / 2450: the base's total becomes the new total.
    run.stdout_has(
        "normalized: base times multiplied by 1.3429 so its total self time equals the new trace's",
    )
    .stdout_has("total self time: 3.29µs -> 3.29µs  change: 0ns (0.0%)");
    let v = diff_json(&base, &new, &["--normalize"]);
    assert_eq!(v["normalized"], true);
    assert_eq!(v["base_total_ns"], v["new_total_ns"]);
    let scale = v["base_scale"].as_f64().unwrap_or_default();
    assert!((scale - 3290.0 / 2450.0).abs() < 1e-12, "{scale}");
    // The base's times are scaled, its call counts are not.
    let doubles = array(&v["functions"])
        .into_iter()
        .find(|f| f["function"] == "doubles")
        .unwrap_or_default();
    assert_eq!(
        doubles["base"]["tottime_ns"],
        (1000.0 * scale).round() as u64
    );
    assert_eq!(doubles["base"]["ncalls"], 1);
    let sum: i64 = array(&v["functions"])
        .iter()
        .filter_map(|f| f["delta"]["tottime_ns"].as_i64())
        .sum();
    assert!(sum.abs() <= 6, "only rounding: {sum}");
}

#[test]
fn min_change_hides_rows_below_a_share_of_the_larger_total() {
    let dir = TempDir::new("diff-min-change");
    let (base, new) = known(&dir);
    // 5% of max(2450, 3290) ns is 164.5 ns: doubles (+1000) and gone (-250)
    // stay; fresh (+90) and the unchanged rows go.
    let run = diff(&base, &new, &["--min-change", "5"]).success();
    run.stdout_has("showing 2 of 6 functions");
    let shown: Vec<String> = table_rows(&run.stdout)
        .iter()
        .map(|r| parse_row(r).function)
        .collect();
    assert_eq!(shown, ["doubles (a.rs:1)", "gone (a.rs:3) [gone]"]);
    let v = diff_json(&base, &new, &["--min-change", "5"]);
    let names: Vec<Value> = array(&v["functions"])
        .iter()
        .map(|f| f["function"].clone())
        .collect();
    assert_eq!(names, ["doubles", "gone"]);
    // Rows at least as large as the threshold stay: 90 / 3290 is 2.7%.
    let v = diff_json(&base, &new, &["--min-change", "2.7"]);
    assert_eq!(array(&v["functions"]).len(), 3);
    // With --sort cumtime the cumulative change counts: main moved by 840 ns.
    let v = diff_json(&base, &new, &["--min-change", "5", "--sort", "cumtime"]);
    let names: Vec<Value> = array(&v["functions"])
        .iter()
        .map(|f| f["function"].clone())
        .collect();
    assert_eq!(names, ["doubles", "main", "gone"]);
    let all = diff(&base, &new, &["--min-change", "0"]).success();
    all.stdout_lacks("showing");
}

#[test]
fn sort_orders_by_the_size_of_the_change_either_way() {
    let dir = TempDir::new("diff-sort");
    let (base, new) = known(&dir);
    let order = |sort: &str| -> Vec<Value> {
        array(&diff_json(&base, &new, &["--sort", sort])["functions"])
            .iter()
            .map(|f| f["function"].clone())
            .collect()
    };
    assert_eq!(
        order("tottime"),
        ["doubles", "gone", "fresh", "main", "moves", "same"]
    );
    assert_eq!(
        order("cumtime"),
        ["doubles", "main", "gone", "fresh", "moves", "same"]
    );
    assert_eq!(
        order("ncalls"),
        ["fresh", "gone", "doubles", "main", "moves", "same"]
    );
    assert_eq!(
        order("name"),
        ["doubles", "fresh", "gone", "main", "moves", "same"]
    );
    // The report's sort keys all order a diff: the numbers by their
    // change, the text keys as a report orders them.
    assert_eq!(order("pcalls"), order("ncalls"));
    assert_eq!(order("time"), order("tottime"));
    assert_eq!(order("cumulative"), order("cumtime"));
    assert_eq!(
        order("file"),
        ["doubles", "fresh", "gone", "same", "moves", "main"]
    );
    assert_eq!(
        order("line"),
        ["doubles", "main", "same", "gone", "fresh", "moves"]
    );
    assert_eq!(
        order("stdname"),
        ["doubles", "same", "gone", "fresh", "moves", "main"]
    );
    let limited = diff(
        &base,
        &new,
        &["--limit", "2", "--filter", "^(gone|fresh|same)$"],
    )
    .success();
    let shown: Vec<String> = table_rows(&limited.stdout)
        .iter()
        .map(|r| parse_row(r).function)
        .collect();
    assert_eq!(shown, ["gone (a.rs:3) [gone]", "fresh (a.rs:4) [new]"]);
}

/// Parses folded output: `path base new` per line.
fn parse_folded(text: &str) -> Vec<(String, u64, u64)> {
    text.lines()
        .map(|line| {
            let mut parts = line.rsplitn(3, ' ');
            let new = parts.next().and_then(|n| n.parse().ok());
            let base = parts.next().and_then(|n| n.parse().ok());
            let path = parts.next().filter(|p| !p.is_empty());
            match (path, base, new) {
                (Some(p), Some(b), Some(n)) => (p.to_owned(), b, n),
                _ => panic!("not `path base new`: {line:?}"),
            }
        })
        .collect()
}

#[test]
fn folded_has_one_line_per_call_path_with_both_sides() {
    let dir = TempDir::new("diff-folded");
    let (base, new) = known(&dir);
    let run = diff(&base, &new, &["--format", "folded"]).success();
    assert_text_eq(
        "\
main 100 100
main;doubles 1000 2000
main;fresh 0 90
main;gone 250 0
main;moves 700 700
main;same 400 400
",
        &run.stdout,
    );
    let filtered = diff(
        &base,
        &new,
        &["--format", "folded", "--filter", "^(gone|fresh)$"],
    )
    .success();
    assert_text_eq("main;fresh 0 90\nmain;gone 250 0\n", &filtered.stdout);

    // The sums are each side's total self time, for multi-stack traces too.
    let random = dir.write("random.jsonl", random_trace(7));
    let handoff = dir.write("handoff.jsonl", HANDOFF);
    let pairs = [
        (vector("fibers.jsonl"), vector("gil-threads.jsonl")),
        (random, handoff),
        (
            repo_file("sample-traces/workload.bin"),
            repo_file("sample-traces/workload-ring.bin"),
        ),
    ];
    for (a, b) in pairs {
        let lines = parse_folded(&diff(&a, &b, &["--format", "folded"]).success().stdout);
        assert!(!lines.is_empty());
        let v = diff_json(&a, &b, &[]);
        let base_sum: u64 = lines.iter().map(|l| l.1).sum();
        let new_sum: u64 = lines.iter().map(|l| l.2).sum();
        assert_eq!(
            (Value::from(base_sum), Value::from(new_sum)),
            (v["base_total_ns"].clone(), v["new_total_ns"].clone()),
            "{} vs {}",
            a.display(),
            b.display()
        );
    }
    let line = diff(&base, &new, &["--format", "folded", "--limit", "3"]).fails_with_one_line();
    assert!(line.contains("--limit"), "{line}");
}

#[test]
fn callers_and_callees_diff_the_edge_tables() {
    let dir = TempDir::new("diff-edges");
    let (base, new) = known(&dir);
    let run = diff(&base, &new, &["--callers", "^(fresh|moves)$"]).success();
    assert_text_eq(
        "\
function (file:line)                was called by         ncalls (base -> new)  tottime (base -> new)  change  cumtime (base -> new)  change
--------------------------------------------------------------------------------------------------------------------------------------------
fresh (a.rs:4)  [new]               main (m.rs:1)  [new]                - -> 1             - ->  90ns   +90ns             - ->  90ns   +90ns
moves (b.rs:42)  [matched by name]  main (m.rs:1)                       1 -> 1         700ns -> 700ns     0ns         700ns -> 700ns     0ns
",
        without_source_lines(&run.stdout)
            .split_once("\n\n")
            .map_or("", |(_, table)| table),
    );
    let run = diff(&base, &new, &["--callees", "^main$", "--min-change", "5"]).success();
    let rows = table_rows(&run.stdout);
    assert_eq!(rows.len(), 2, "{}", run.stdout);
    assert!(rows[0].starts_with("main (m.rs:1)") && rows[0].contains("doubles (a.rs:1)"));
    assert!(rows[1].contains("gone (a.rs:3)  [gone]") && rows[1].contains("250ns ->      -"));
    // Both at once: two tables, callers first.
    let both = diff(&base, &new, &["--callers", "^same$", "--callees", "^same$"]).success();
    both.stdout_has("was called by").stdout_has("  called  ");
    // JSON: only the selected edges.
    let v = diff_json(&base, &new, &["--callers", "^gone$"]);
    let edges = array(&v["edges"]);
    assert_eq!(edges.len(), 1);
    assert_eq!(
        (&edges[0]["caller"], &edges[0]["callee"], &edges[0]["new"]),
        (&"main".into(), &"gone".into(), &Value::Null)
    );
}

#[test]
fn bad_input_on_either_side_names_that_file() {
    let dir = TempDir::new("diff-bad");
    let good = dir.write("good.jsonl", KNOWN_BASE);
    let bad_line = dir.write(
        "bad-line.jsonl",
        "{\"ts\": 0, \"tid\": 1, \"ev\": \"enter\", \"fn\": \"f\"}\n{\"ts\": 1, \"tid\": 1, \"ev\": \"jump\"}\n",
    );
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend([0x5au8; 300]);
    let picture = dir.write("picture.png", png);
    let missing = dir.join("no-such-trace.bin");
    for (bad, what) in [
        (&bad_line, "line 2"),
        (&picture, "not a trace"),
        (&missing, "No such file"),
    ] {
        let name = bad.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        for (base, new) in [(bad, &good), (&good, bad)] {
            for format in ["table", "json", "folded"] {
                let run = diff(base, new, &["--format", format]);
                let args = run.args.clone();
                let line = run.fails_with_one_line();
                assert!(
                    line.contains(name),
                    "`{args}`: {line:?} does not name {name}"
                );
                assert!(
                    line.contains(what),
                    "`{args}`: {line:?} does not say {what:?}"
                );
                assert!(!line.contains("good.jsonl"), "`{args}`: {line:?}");
            }
        }
    }
}

#[test]
fn traces_preferring_different_clocks_need_clock() {
    use mtrace_format::{EventKind, PreferredClock, ThreadId, TraceWriter, WriterOptions};
    let options = WriterOptions {
        preferred_clock: PreferredClock::Gil,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), options).expect("writer");
    let f = w.function("main", "m.rs", 1, "");
    w.event(ThreadId(1), 0, EventKind::Enter(f)).expect("enter");
    w.event(ThreadId(1), 500, EventKind::Exit(f)).expect("exit");
    let bytes = w.finish(None).expect("finish").into_inner();
    let dir = TempDir::new("diff-clocks");
    let gil = dir.write("gil.bin", bytes);
    let plain = dir.write("plain.jsonl", KNOWN_BASE);
    let line = diff(&gil, &plain, &[]).fails_with_one_line();
    assert!(
        line.contains("gil.bin: gil")
            && line.contains("plain.jsonl: stack")
            && line.contains("--clock"),
        "{line}"
    );
    diff(&gil, &plain, &["--clock", "stack"])
        .success()
        .stdout_has("clock: stack");
    diff(&gil, &gil, &[]).success().stdout_has("clock: gil");
}

#[test]
fn diff_json_validates_against_its_schema() {
    assert_documented(
        "diff.schema.json",
        &[
            "$.paths",
            "ThreadSummary.lost_from_ns",
            "TraceSummary.traces",
            "TraceSummary.host",
            "FunctionDiff.compared",
            "FunctionDiff.base_range",
            "FunctionDiff.new_range",
        ],
    );
    let dir = TempDir::new("diff-schema");
    let (base, new) = known(&dir);
    let random = dir.write("random.jsonl", random_trace(3));
    for (a, b) in [
        (&base, &new),
        (&random, &base),
        (&vector("fibers.jsonl"), &vector("recursion-b.jsonl")),
    ] {
        let arg_sets: [&[&str]; 3] = [
            &[],
            &["--normalize"],
            &["--clock", "wall", "--callers", "."],
        ];
        for args in arg_sets {
            assert_valid("diff.schema.json", &diff_json(a, b, args));
        }
    }
}

#[test]
fn a_closed_pipe_ends_a_diff_quietly() {
    let dir = TempDir::new("diff-pipe");
    let trace = dir.write("many.jsonl", many_functions(20_000));
    let other = dir.write("other.jsonl", many_functions(19_000));
    for format in ["table", "json", "folded"] {
        read_a_little_then_close(&[
            "diff".as_ref(),
            trace.as_os_str(),
            other.as_os_str(),
            "--format".as_ref(),
            format.as_ref(),
        ]);
    }
}

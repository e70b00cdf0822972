//! The shared semantics vectors: `--format json` of `vectors/NAME.jsonl`
//! under `--clock CLOCK` matches `vectors/NAME.CLOCK.json` for every
//! function and edge (ncalls, primitive_calls, tottime_ns, cumtime_ns).

use serde_json::{json, Value};

use crate::util::{assert_json_eq, json_report, vector};

const FIELDS: [&str; 4] = ["ncalls", "primitive_calls", "tottime_ns", "cumtime_ns"];

/// The vector's fields of each row, sorted by the given key fields.
fn project(rows: &Value, keys: &[&str]) -> Value {
    let mut out: Vec<Value> = rows
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let mut o = serde_json::Map::new();
            for k in keys.iter().chain(FIELDS.iter()) {
                o.insert((*k).to_owned(), r[*k].clone());
            }
            Value::Object(o)
        })
        .collect();
    out.sort_by_key(|r| keys.iter().map(|k| r[*k].to_string()).collect::<Vec<_>>());
    Value::Array(out)
}

fn check_vector(name: &str, clock: &str) {
    let expected_path = vector(&format!("{name}.{clock}.json"));
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(&expected_path).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
    let trace = vector(&format!("{name}.jsonl"));
    let got = json_report(&trace, clock);
    assert_eq!(got["clock"], json!(clock));
    assert_json_eq(
        &format!("{name} --clock {clock}: functions"),
        &project(&expected["functions"], &["function"]),
        &project(&got["functions"], &["function"]),
    );
    assert_json_eq(
        &format!("{name} --clock {clock}: edges"),
        &project(&expected["edges"], &["caller", "callee"]),
        &project(&got["edges"], &["caller", "callee"]),
    );
}

macro_rules! vector_tests {
    ($($test:ident: $name:literal $clock:literal;)*) => {
        $(
            #[test]
            fn $test() {
                check_vector($name, $clock);
            }
        )*
    };
}

vector_tests! {
    fibers_stack: "fibers" "stack";
    fibers_gil: "fibers" "gil";
    fibers_wall: "fibers" "wall";
    gil_threads_stack: "gil-threads" "stack";
    gil_threads_gil: "gil-threads" "gil";
    gil_threads_wall: "gil-threads" "wall";
    recursion_a_stack: "recursion-a" "stack";
    recursion_a_gil: "recursion-a" "gil";
    recursion_a_wall: "recursion-a" "wall";
    recursion_b_stack: "recursion-b" "stack";
    recursion_b_gil: "recursion-b" "gil";
    recursion_b_wall: "recursion-b" "wall";
}

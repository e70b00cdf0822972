//! `export --format callgrind`: the callgrind profile format, for
//! KCachegrind and QCachegrind.
//!
//! ```text
//! # callgrind format
//! version: 1
//! creator: mtanalyze 0.1.0
//! positions: line
//! events: ns
//! event: ns : Time (ns, clock stack)
//! summary: 120
//!
//! fl=(1) src/h.rs
//! fn=(1) handler
//! 5 15                      self time of handler, at its definition line
//! cfl=(2) src/db.rs
//! cfn=(2) query
//! calls=1 42                calls of handler -> query, the callee's line
//! 5 25                      inclusive time of those calls
//! ```
//!
//! Costs are nanoseconds under the report's clock. A function's self cost
//! is its `tottime`; a call edge's inclusive cost is the edge's `cumtime`
//! (recursive calls are counted once, as `schemas/semantics.md` says), so
//! the file's total is the report's total self time. The trace records no
//! call sites: every cost sits at the caller's definition line. Unknown
//! files are `???`, as valgrind writes them; functions that share a name
//! are told apart by their `(file:line)`.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use crate::model::report::{FunctionKey, Report};

/// Numbers names the first time they are written (`fl=(1) a.rs`, then `fl=(1)`).
#[derive(Default)]
struct Names {
    ids: HashMap<String, usize>,
}

impl Names {
    fn get(&mut self, name: &str) -> String {
        if let Some(id) = self.ids.get(name) {
            return format!("({id})");
        }
        let id = self.ids.len() + 1;
        self.ids.insert(name.to_owned(), id);
        format!("({id}) {name}")
    }
}

/// One line of the format: no line breaks inside names.
fn clean(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// Writes the report's functions and edges in the callgrind format.
pub fn callgrind(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let total = report
        .functions
        .iter()
        .fold(0u64, |t, f| t.saturating_add(f.tottime_ns));
    writeln!(out, "# callgrind format")?;
    writeln!(out, "version: 1")?;
    writeln!(out, "creator: mtanalyze {}", env!("CARGO_PKG_VERSION"))?;
    let cmd = if report.trace.cmdline.is_empty() {
        report.trace.source.clone()
    } else {
        report.trace.cmdline.join(" ")
    };
    writeln!(out, "cmd: {}", clean(&cmd))?;
    if report.trace.pid != 0 {
        writeln!(out, "pid: {}", report.trace.pid)?;
    }
    writeln!(out, "positions: line")?;
    writeln!(out, "events: ns")?;
    writeln!(out, "event: ns : Time (ns, clock {})", report.clock)?;
    writeln!(out, "summary: {total}")?;

    // Names that two functions share get their site added.
    let mut seen = HashSet::new();
    let shared: HashSet<&str> = report
        .functions
        .iter()
        .filter(|f| !seen.insert(f.function.as_str()))
        .map(|f| f.function.as_str())
        .collect();
    let label = |k: &FunctionKey| {
        if shared.contains(k.function.as_str()) {
            clean(&format!("{} ({}:{})", k.function, k.file, k.line))
        } else {
            clean(&k.function)
        }
    };
    let file = |k: &FunctionKey| {
        if k.file.is_empty() {
            "???".to_owned()
        } else {
            clean(&k.file)
        }
    };

    let mut files = Names::default();
    let mut fns = Names::default();
    let mut callees: HashMap<FunctionKey, Vec<usize>> = HashMap::new();
    for (i, e) in report.edges.iter().enumerate() {
        callees.entry(e.caller_key()).or_default().push(i);
    }
    for f in &report.functions {
        let key = f.key();
        writeln!(out)?;
        writeln!(out, "fl={}", files.get(&file(&key)))?;
        writeln!(out, "fn={}", fns.get(&label(&key)))?;
        writeln!(out, "{} {}", f.line, f.tottime_ns)?;
        for &i in callees.get(&key).map_or(&[][..], |v| &v[..]) {
            let e = &report.edges[i];
            let callee = e.callee_key();
            writeln!(out, "cfl={}", files.get(&file(&callee)))?;
            writeln!(out, "cfn={}", fns.get(&label(&callee)))?;
            writeln!(out, "calls={} {}", e.ncalls, e.callee_line)?;
            writeln!(out, "{} {}", f.line, e.cumtime_ns)?;
        }
    }
    writeln!(out)?;
    writeln!(out, "totals: {total}")
}

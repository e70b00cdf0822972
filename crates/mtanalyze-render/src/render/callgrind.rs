//! `export --format callgrind`: the callgrind profile format, for
//! KCachegrind and QCachegrind.
//!
//! ```text
//! # callgrind format
//! version: 1
//! creator: mtanalyze 0.1.0
//! positions: line
//! event: ns : Time (ns, clock stack)
//! events: ns
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
//! is its `tottime`, so the file's total is the report's total self time.
//! A call's cost is the callee's inclusive time from that caller: readers
//! (`callgrind_annotate --inclusive=yes`, KCachegrind) take a called
//! function's inclusive cost as the sum of the costs of the calls into it,
//! so that sum must be its `cumtime`. Each call therefore costs the edge's
//! `callee_cumtime_ns`, the active time of the callee's frames there that
//! are not recursive calls of it: a recursive `fib`'s calls of itself cost
//! nothing (their time is already in the outer `fib`), where the edge's
//! `cumtime` would count it twice (`fib` showed twice its cumtime).
//! Root frames (no caller) are calls from a function named `(root)`, which
//! costs nothing itself. The trace records no
//! call sites: every cost sits at the caller's definition line. Unknown
//! files are `???`, as valgrind writes them; functions are named by their
//! labels ([`mtanalyze_model::labels::Labels`]: those that share a name are told apart by
//! their `(file:line)`), control characters escaped.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::render::escape::escape;
use mtanalyze_model::labels::Labels;
use mtanalyze_model::report::{FunctionKey, Report};

/// The caller of every root frame.
pub const ROOT: &str = "(root)";

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

/// One line of the format: no line breaks (nor other control characters)
/// inside names.
fn clean(s: &str) -> String {
    escape(s).into_owned()
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
    // The event's description before the list that uses it:
    // callgrind_annotate rejects `event:` after `events:`.
    writeln!(out, "event: ns : Time (ns, clock {})", report.clock)?;
    writeln!(out, "events: ns")?;
    writeln!(out, "summary: {total}")?;

    let labels = Labels::of_functions(&report.functions);
    let label_of: HashMap<FunctionKey, String> = report
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.key(), clean(labels.get(i))))
        .collect();
    // An edge's function is one of the report's; a damaged report's stray
    // one is named by its name.
    let label = |k: &FunctionKey| {
        label_of
            .get(k)
            .cloned()
            .unwrap_or_else(|| clean(&k.function))
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
    // What reaches each function from no caller: its root frames.
    let mut called: HashMap<FunctionKey, (u64, u64)> = HashMap::new();
    for (i, e) in report.edges.iter().enumerate() {
        callees.entry(e.caller_key()).or_default().push(i);
        let c = called.entry(e.callee_key()).or_default();
        c.0 += e.ncalls;
        c.1 = c.1.saturating_add(e.callee_cumtime_ns);
    }
    // Root frames are calls from a `(root)` function, so that a function
    // that is both a root somewhere and called elsewhere still has its
    // cumtime as the sum of the calls into it.
    let roots: Vec<_> = report
        .functions
        .iter()
        .filter_map(|f| {
            let (calls, cost) = called.get(&f.key()).copied().unwrap_or_default();
            let calls = f.ncalls.saturating_sub(calls);
            (calls > 0).then(|| (f, calls, f.cumtime_ns.saturating_sub(cost)))
        })
        .collect();
    if !roots.is_empty() {
        writeln!(out)?;
        writeln!(out, "fl={}", files.get("???"))?;
        writeln!(out, "fn={}", fns.get(ROOT))?;
        for (f, calls, cost) in roots {
            let key = f.key();
            writeln!(out, "cfl={}", files.get(&file(&key)))?;
            writeln!(out, "cfn={}", fns.get(&label(&key)))?;
            writeln!(out, "calls={calls} {}", f.line)?;
            writeln!(out, "0 {cost}")?;
        }
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
            writeln!(out, "{} {}", f.line, e.callee_cumtime_ns)?;
        }
    }
    writeln!(out)?;
    writeln!(out, "totals: {total}")
}

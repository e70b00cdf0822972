//! `--format pstats -o FILE`: the file `cProfile` writes and Python's
//! `pstats.Stats(FILE)` loads (and so snakeviz, gprof2dot, tuna...).
//!
//! The file is one `marshal`-encoded dict, as `cProfile.Profile.dump_stats`
//! writes it:
//!
//! ```text
//! {(file, line, name): (cc, nc, tt, ct, {(caller file, line, name): (nc, cc, tt, ct)})}
//! ```
//!
//! `cc` is primitive calls, `nc` all calls, `tt` self time and `ct`
//! cumulative time, in seconds (floats). Note the order inside a caller
//! entry: `nc` comes first there, as `cProfile` writes it and `pstats`
//! reads it. Functions come from the report's function table, caller
//! entries from its edges (a root frame has no callers, as in cProfile).
//! A function with no file gets pstats' built-in key `('~', line, name)`.
//!
//! **Keys of a Python trace** (`producer` `python`) are cProfile's, so the
//! two profilers' files line up key by key: a Python function is keyed by
//! `(co_filename, co_firstlineno, co_name)`, where the trace (and the
//! report) name it by its `co_qualname` (`Tree.size`, `main.<locals>.<lambda>`).
//! `co_name` is the qualified name's last `.`-separated part: CPython builds
//! `co_qualname` as the enclosing scopes' names, each followed by a dot,
//! then `co_name`, and `co_name` never holds a dot for code the compiler
//! makes (only a hand-made code object, `code.replace(co_name=...)`, can
//! break this). Built-ins (file `~`) keep their names, which are cProfile's
//! already (`<method 'append' of 'list' objects>` has dots of its own).
//! Functions that share a key (two generator expressions or two lambdas on
//! one line, even nested ones whose qualified names differ) are summed,
//! callers included; cProfile's own dump keeps only one of them.
//!
//! Only the marshal types this needs are encoded: dict, tuple, str, int
//! and float (marshal version 2+ binary floats).

use std::io::{self, Write};

use mtanalyze_model::compact::CompactReport;
use mtanalyze_model::report::{Report, BUILTIN_FILE, PRODUCER_PYTHON};

/// A pstats function key: (file, line, name), borrowed from the report
/// (a profile per request renders one of these files per request: no
/// string is copied for it).
pub type Key<'r> = (&'r str, u32, &'r str);

/// A function as the report names it: (name, file, line).
type Name<'r> = (&'r str, &'r str, u32);

/// The sums behind one stats entry or one caller entry: primitive calls,
/// all calls, self and cumulative time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Primitive (non-recursive) calls.
    pub cc: u64,
    /// All calls.
    pub nc: u64,
    /// Self time, ns.
    pub tt_ns: u64,
    /// Cumulative time, ns.
    pub ct_ns: u64,
}

impl Counts {
    fn of(cc: u64, nc: u64, tt_ns: u64, ct_ns: u64) -> Counts {
        Counts {
            cc,
            nc,
            tt_ns,
            ct_ns,
        }
    }

    fn add(&mut self, other: Counts) {
        self.cc = self.cc.saturating_add(other.cc);
        self.nc = self.nc.saturating_add(other.nc);
        self.tt_ns = self.tt_ns.saturating_add(other.tt_ns);
        self.ct_ns = self.ct_ns.saturating_add(other.ct_ns);
    }
}

/// `items` sorted by key, the counts of equal keys summed (functions
/// that share a pstats key, see the module doc).
fn summed<K: Ord + Copy>(mut items: Vec<(K, Counts)>) -> Vec<(K, Counts)> {
    items.sort_unstable_by_key(|item| item.0);
    let mut out: Vec<(K, Counts)> = Vec::with_capacity(items.len());
    for (k, counts) in items {
        match out.last_mut() {
            Some((last, sum)) if *last == k => sum.add(counts),
            _ => out.push((k, counts)),
        }
    }
    out
}

/// How the trace's names become key names.
#[derive(Clone, Copy)]
enum Names {
    /// As they are.
    AsRecorded,
    /// A Python trace: qualified names of Python functions become `co_name`.
    Python,
}

/// cProfile's `co_name` of a function a Python trace names by `co_qualname`.
fn co_name(qualname: &str) -> &str {
    qualname.rsplit_once('.').map_or(qualname, |(_, name)| name)
}

fn key<'r>(names: Names, function: &'r str, file: &'r str, line: u32) -> Key<'r> {
    let function = match names {
        Names::Python if file != BUILTIN_FILE => co_name(function),
        _ => function,
    };
    let file = if file.is_empty() { BUILTIN_FILE } else { file };
    (file, line, function)
}

/// A report's statistics as pstats holds them, keyed and summed once for
/// both encodings: the marshal bytes of [`pstats`] and, in the Python
/// binding, the dict itself (a profile per request builds it directly,
/// with no bytes encoded and decoded between).
pub struct PstatsTable<'r> {
    /// Each function's own counts, sorted by key.
    rows: Vec<(Key<'r>, Counts)>,
    /// `(callee, caller)` counts, sorted by callee then caller.
    calls: Vec<((Key<'r>, Key<'r>), Counts)>,
}

impl<'r> PstatsTable<'r> {
    /// The table of `report`.
    pub fn of(report: &'r Report) -> PstatsTable<'r> {
        let edges = report.edges.iter().map(|e| {
            let callee = (e.callee.as_str(), e.callee_file.as_str(), e.callee_line);
            let caller = (e.caller.as_str(), e.caller_file.as_str(), e.caller_line);
            let counts = Counts::of(e.primitive_calls, e.ncalls, e.tottime_ns, e.cumtime_ns);
            (callee, caller, counts)
        });
        PstatsTable::from_parts(report, edges)
    }

    /// The table of a report whose edges are numbered: what
    /// [`PstatsTable::of`] gives for its full report, without the edges'
    /// rows made (no name copied per edge, no sort by names).
    pub fn of_compact(compact: &'r CompactReport) -> PstatsTable<'r> {
        let keys = &compact.keys;
        let edges = compact.edges.iter().filter_map(|e| {
            let (from, to) = (keys.get(e.caller as usize)?, keys.get(e.callee as usize)?);
            let callee = (to.function.as_str(), to.file.as_str(), to.line);
            let caller = (from.function.as_str(), from.file.as_str(), from.line);
            let (ncalls, primitive, tottime, cumtime) = e.calls_and_times();
            Some((
                callee,
                caller,
                Counts::of(primitive, ncalls, tottime, cumtime),
            ))
        });
        PstatsTable::from_parts(compact.report(), edges)
    }

    /// The table of `report`'s functions and of `edges`: (callee, caller)
    /// as (name, file, line), and their counts.
    fn from_parts(
        report: &'r Report,
        edges: impl Iterator<Item = (Name<'r>, Name<'r>, Counts)>,
    ) -> PstatsTable<'r> {
        let names = if report.trace.producer == PRODUCER_PYTHON {
            Names::Python
        } else {
            Names::AsRecorded
        };
        let key = |(function, file, line): Name<'r>| key(names, function, file, line);
        // Sorted lists rather than maps of maps: the same order (a dict's
        // keys sorted, each function's callers sorted) with two allocations.
        let rows = summed(
            report
                .functions
                .iter()
                .map(|f| {
                    let k = key((&f.function, &f.file, f.line));
                    let counts =
                        Counts::of(f.primitive_calls, f.ncalls, f.tottime_ns, f.cumtime_ns);
                    (k, counts)
                })
                .collect(),
        );
        let calls = summed(
            edges
                .map(|(callee, caller, counts)| ((key(callee), key(caller)), counts))
                .collect(),
        );
        PstatsTable { rows, calls }
    }

    /// How many functions have rows and how many (callee, caller) pairs
    /// there are, for sizing what is built.
    pub fn sizes(&self) -> (usize, usize) {
        (self.rows.len(), self.calls.len())
    }

    /// Calls `entry` once per stats entry in key order: the key, its
    /// counts and its callers (caller key and counts) in caller order.
    /// Every function with a row or a caller has an entry: a callee with
    /// no row of its own gets zero counts, as pstats' entries do.
    pub fn for_each<E>(
        &self,
        mut entry: impl FnMut(Key<'r>, Counts, &[((Key<'r>, Key<'r>), Counts)]) -> Result<(), E>,
    ) -> Result<(), E> {
        let (mut r, mut calls) = (self.rows.iter().peekable(), self.calls.as_slice());
        loop {
            let k = match (r.peek(), calls.first()) {
                (Some((row, _)), Some(((callee, _), _))) => *row.min(callee),
                (Some((row, _)), None) => *row,
                (None, Some(((callee, _), _))) => *callee,
                (None, None) => return Ok(()),
            };
            let counts = match r.next_if(|(row, _)| *row == k) {
                Some((_, counts)) => *counts,
                None => Counts::default(),
            };
            let n = calls
                .iter()
                .take_while(|((callee, _), _)| *callee == k)
                .count();
            let (callers, rest) = calls.split_at(n);
            calls = rest;
            entry(k, counts, callers)?;
        }
    }
}

/// Writes the report as a pstats file (marshal bytes).
pub fn pstats(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    let table = PstatsTable::of(report);
    let (rows, calls) = table.sizes();
    let mut m = Marshal {
        // Enough for most functions' keys and counts at once.
        bytes: Vec::with_capacity(128 * (rows + calls)),
    };
    m.dict_start();
    table.for_each(|k, counts, callers| -> Result<(), io::Error> {
        m.key(&k);
        m.tuple(5);
        m.int(counts.cc);
        m.int(counts.nc);
        m.seconds(counts.tt_ns);
        m.seconds(counts.ct_ns);
        m.dict_start();
        for ((_, caller), cc) in callers {
            m.key(caller);
            m.tuple(4);
            m.int(cc.nc);
            m.int(cc.cc);
            m.seconds(cc.tt_ns);
            m.seconds(cc.ct_ns);
        }
        m.dict_end();
        Ok(())
    })?;
    m.dict_end();
    out.write_all(&m.bytes)
}

/// A marshal encoder for the few types a pstats file holds.
#[derive(Default)]
struct Marshal {
    bytes: Vec<u8>,
}

impl Marshal {
    fn dict_start(&mut self) {
        self.bytes.push(b'{');
    }

    /// A dict ends with the null marker.
    fn dict_end(&mut self) {
        self.bytes.push(b'0');
    }

    /// A tuple header; its `len` items follow.
    fn tuple(&mut self, len: u32) {
        self.bytes.push(b'(');
        self.bytes.extend_from_slice(&len.to_le_bytes());
    }

    fn key(&mut self, (file, line, name): &Key) {
        self.tuple(3);
        self.str(file);
        self.int(u64::from(*line));
        self.str(name);
    }

    /// A str (UTF-8).
    fn str(&mut self, s: &str) {
        self.bytes.push(b'u');
        self.bytes
            .extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(s.as_bytes());
    }

    /// A non-negative int: 32-bit when it fits, else a long in 15-bit digits.
    fn int(&mut self, n: u64) {
        if n <= i32::MAX as u64 {
            self.bytes.push(b'i');
            self.bytes.extend_from_slice(&(n as i32).to_le_bytes());
            return;
        }
        let mut digits = Vec::new();
        let mut rest = n;
        while rest > 0 {
            digits.push((rest & 0x7fff) as u16);
            rest >>= 15;
        }
        self.bytes.push(b'l');
        self.bytes
            .extend_from_slice(&(digits.len() as i32).to_le_bytes());
        for d in digits {
            self.bytes.extend_from_slice(&d.to_le_bytes());
        }
    }

    /// Nanoseconds as a float of seconds.
    fn seconds(&mut self, ns: u64) {
        self.bytes.push(b'g');
        self.bytes
            .extend_from_slice(&(ns as f64 / 1e9).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marshal_bytes_match_python() {
        // marshal.dumps({('a', 1, 'f'): (1, 2**40)}) in Python, with the
        // tuple and string types this encoder uses.
        let mut m = Marshal::default();
        m.dict_start();
        m.key(&("a", 1, "f"));
        m.tuple(2);
        m.int(1);
        m.int(1 << 40);
        m.dict_end();
        let mut want = vec![
            b'{', b'(', 3, 0, 0, 0, b'u', 1, 0, 0, 0, b'a', b'i', 1, 0, 0, 0,
        ];
        want.extend_from_slice(&[b'u', 1, 0, 0, 0, b'f', b'(', 2, 0, 0, 0, b'i', 1, 0, 0, 0]);
        // 2**40 = digits (15 bits each) 0, 0, 1024 -> 3 digits.
        want.extend_from_slice(&[b'l', 3, 0, 0, 0, 0, 0, 0, 0, 0, 4, b'0']);
        assert_eq!(m.bytes, want);
    }

    #[test]
    fn python_keys_use_the_last_part_of_the_qualified_name() {
        for (qualname, name) in [
            ("main", "main"),
            ("Tree.size", "size"),
            ("main.<locals>.<lambda>", "<lambda>"),
            ("Tree.size.<locals>.<genexpr>", "<genexpr>"),
            ("Outer.Inner.__private", "__private"),
            ("C.<generic parameters of m>", "<generic parameters of m>"),
            ("<module>", "<module>"),
        ] {
            let got = key(Names::Python, qualname, "app.py", 3);
            assert_eq!(got, ("app.py", 3, name), "{qualname}");
        }
        // A built-in keeps cProfile's name, dots and all.
        let append = "<method 'append' of 'list' objects>";
        let builtin = key(Names::Python, append, "~", 0);
        assert_eq!(builtin, ("~", 0, append));
        // Other traces keep their names.
        let rust = key(Names::AsRecorded, "parser::Parser.parse", "p.rs", 9);
        assert_eq!(rust.2, "parser::Parser.parse");
    }

    #[test]
    fn seconds_are_binary_floats() {
        let mut m = Marshal::default();
        m.seconds(1_500_000_000);
        let mut want = vec![b'g'];
        want.extend_from_slice(&1.5f64.to_le_bytes());
        assert_eq!(m.bytes, want);
    }
}

//! The engine against the contract: the shared vectors, the worked examples
//! of `schemas/semantics.md`, and random traces checked against the literal
//! reference implementation in `mtanalyze-testkit` (`crates/mtanalyze-testkit/src/reference.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;
use std::path::PathBuf;

use mtanalyze::from_bytes;
use mtanalyze::WarningKind;
use mtanalyze::{
    analyze,
    report::{Clock, StackRows},
    AnalyzeOptions, Report,
};
use mtanalyze_testkit::counts::{released_counts, without_released_counts};
use mtanalyze_testkit::reference::{
    self, Clock as RefClock, EdgeStats as RefEdge, FnStats as RefFn, RefReport,
};
use mtanalyze_testkit::worked_examples::worked_examples;
use mtrace_format::{EventKind, FunctionId, StackId, ThreadId, TraceWriter, WriterOptions};
use proptest::prelude::*;

fn engine_clock(c: RefClock) -> Clock {
    match c {
        RefClock::Stack => Clock::Stack,
        RefClock::Gil => Clock::Gil,
        RefClock::Wall => Clock::Wall,
    }
}

fn run(bytes: Vec<u8>, clock: Clock) -> Report {
    let trace = from_bytes("test", bytes).expect("loads");
    let opts = AnalyzeOptions {
        clock: Some(clock),
        ..Default::default()
    };
    analyze(&trace, &opts).expect("analyzes")
}

fn run_jsonl(text: &str, clock: Clock) -> Report {
    run(text.as_bytes().to_vec(), clock)
}

/// The warnings the reference counts (input repairs, and ends that do not
/// count).
const REPAIRS: [&str; 5] = [
    "clock_backwards",
    "exit_mismatch",
    "exit_not_open",
    "exit_on_empty_stack",
    "end_ignored",
];

/// The engine's report in the reference's shape (functions keyed by name).
fn as_ref_report(r: &Report) -> RefReport {
    let mut out = RefReport::default();
    for f in &r.functions {
        let e = out
            .functions
            .entry(f.function.clone())
            .or_insert_with(RefFn::default);
        e.ncalls += f.ncalls;
        e.primitive_calls += f.primitive_calls;
        e.tottime_ns += f.tottime_ns;
        e.cumtime_ns += f.cumtime_ns;
        e.paused_ns += f.paused_ns;
    }
    for e in &r.edges {
        let x = out
            .edges
            .entry((e.caller.clone(), e.callee.clone()))
            .or_insert_with(RefEdge::default);
        x.ncalls += e.ncalls;
        x.primitive_calls += e.primitive_calls;
        x.tottime_ns += e.tottime_ns;
        x.cumtime_ns += e.cumtime_ns;
    }
    out.warnings = r
        .warnings
        .iter()
        .filter(|w| REPAIRS.contains(&w.kind.as_str()))
        .map(|w| w.count)
        .sum();
    out.ended = r
        .stacks
        .iter()
        .filter(|s| s.ended)
        .map(|s| s.name.to_string())
        .collect();
    out
}

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/vectors")
}

#[test]
fn shared_vectors_match_for_every_clock() {
    let mut checked = 0;
    for name in ["fibers", "gil-threads", "recursion-a", "recursion-b"] {
        let text = std::fs::read_to_string(vectors_dir().join(format!("{name}.jsonl"))).unwrap();
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            let path = vectors_dir().join(format!("{name}.{clock}.json"));
            let want: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let got = as_ref_report(&run_jsonl(&text, clock));
            let mut want_fns = BTreeMap::new();
            for f in want["functions"].as_array().unwrap() {
                let n = |k: &str| f[k].as_u64().unwrap();
                want_fns.insert(
                    f["function"].as_str().unwrap().to_owned(),
                    [
                        n("ncalls"),
                        n("primitive_calls"),
                        n("tottime_ns"),
                        n("cumtime_ns"),
                    ],
                );
            }
            let got_fns: BTreeMap<_, _> = got
                .functions
                .iter()
                .map(|(k, f)| {
                    (
                        k.clone(),
                        [f.ncalls, f.primitive_calls, f.tottime_ns, f.cumtime_ns],
                    )
                })
                .collect();
            assert_eq!(got_fns, want_fns, "{name} functions under --clock {clock}");
            let mut want_edges = BTreeMap::new();
            for e in want["edges"].as_array().unwrap() {
                let n = |k: &str| e[k].as_u64().unwrap();
                let key = (
                    e["caller"].as_str().unwrap().to_owned(),
                    e["callee"].as_str().unwrap().to_owned(),
                );
                want_edges.insert(
                    key,
                    [
                        n("ncalls"),
                        n("primitive_calls"),
                        n("tottime_ns"),
                        n("cumtime_ns"),
                    ],
                );
            }
            let got_edges: BTreeMap<_, _> = got
                .edges
                .iter()
                .map(|(k, e)| {
                    (
                        k.clone(),
                        [e.ncalls, e.primitive_calls, e.tottime_ns, e.cumtime_ns],
                    )
                })
                .collect();
            assert_eq!(got_edges, want_edges, "{name} edges under --clock {clock}");
            checked += 1;
        }
    }
    assert_eq!(checked, 12);
}

#[test]
fn worked_examples_of_the_semantics_document() {
    let examples = worked_examples();
    assert!(examples.len() >= 5);
    for (name, text, clock, want) in examples {
        let got = as_ref_report(&run_jsonl(text, engine_clock(clock)));
        assert_eq!(got, want, "worked example {name}");
    }
}

#[test]
fn stack_table_describes_a_handoff() {
    let (_, text, _, _) = worked_examples()
        .into_iter()
        .find(|e| e.0 == "fiber-handoff")
        .unwrap();
    let r = run_jsonl(text, Clock::Stack);
    let task = r
        .stacks
        .iter()
        .find(|s| s.name == "task-1")
        .expect("task-1 listed");
    assert_eq!(task.threads, vec![1, 2]);
    assert_eq!(task.running_ns, 20 + 30);
    assert_eq!(task.paused_ns, 30);
    assert_eq!(task.switches_in, 2);
    assert_eq!(task.max_depth, 2);
    let t1 = r.stacks.iter().find(|s| s.id == "thread:1").unwrap();
    assert_eq!((t1.running_ns, t1.paused_ns), (10 + 60, 20));
}

// ---- random traces ----

/// A generated trace: lines in generation order (timestamps never decrease
/// across it), and the same lines shuffled across threads.
#[derive(Clone, Debug)]
struct Generated {
    lines: Vec<reference::Line>,
}

/// Turns random choices into a valid trace: a stack is only ever current on
/// one thread, time only moves forward (with ties), and some exits are wrong
/// on purpose so the repairs are exercised.
fn generate(threads: u64, stacks: u64, functions: u8, steps: &[(u8, u8, u8)]) -> Generated {
    let names = ["a", "b", "c", "d", "e"];
    let mut now = 0u64;
    let mut current: Vec<Option<u64>> = vec![None; threads as usize];
    let mut open: BTreeMap<(u64, Option<u64>), Vec<&str>> = BTreeMap::new();
    let mut lines = Vec::new();
    for &(who, what, dt) in steps {
        now += (dt % 4) as u64; // 0 makes ties
        let t = (who as u64 % threads) as usize;
        let tid = t as u64 + 1;
        let key = (tid, current[t]);
        let key = match current[t] {
            Some(s) => (0, Some(s)),
            None => key,
        };
        let frames = open.entry(key).or_default();
        let f = names[(what / 8) as usize % functions as usize];
        let ev = match what % 8 {
            0..=2 => {
                frames.push(f);
                reference::Ev::Enter(f.into())
            }
            3..=4 => match frames.pop() {
                Some(top) => reference::Ev::Exit(top.into()),
                None => reference::Ev::Exit(f.into()),
            },
            5 => {
                // a wrong exit: whatever function, closing what the repair closes
                if let Some(pos) = frames.iter().rposition(|x| *x == f) {
                    frames.truncate(pos);
                }
                reference::Ev::Exit(f.into())
            }
            _ => {
                if stacks == 0 {
                    continue;
                }
                let s = (what as u64 / 8) % (stacks + 1);
                let target = (s > 0).then_some(s);
                let taken = current
                    .iter()
                    .enumerate()
                    .any(|(o, c)| o != t && target.is_some() && *c == target);
                if taken || target == current[t] {
                    continue;
                }
                current[t] = target;
                // A switch gets a time of its own: with a tie, shuffling the
                // threads' lines could put a hand-off's "take" line before
                // its "leave" line, which is one stack on two threads at
                // once, outside the contract the reference implements.
                now += 1;
                lines.push(reference::Line {
                    tid,
                    ts: now,
                    ev: reference::Ev::Switch(target.map(|s| format!("co{s}"))),
                });
                now += 1;
                continue;
            }
        };
        lines.push(reference::Line { tid, ts: now, ev });
    }
    Generated { lines }
}

fn to_jsonl(lines: &[reference::Line]) -> String {
    let mut out = String::new();
    for l in lines {
        let body = match &l.ev {
            reference::Ev::Enter(f) => format!("\"ev\": \"enter\", \"fn\": \"{f}\""),
            reference::Ev::Exit(f) => format!("\"ev\": \"exit\", \"fn\": \"{f}\""),
            reference::Ev::Switch(None) => "\"ev\": \"switch\", \"stack\": null".into(),
            reference::Ev::Switch(Some(s)) => format!("\"ev\": \"switch\", \"stack\": \"{s}\""),
            reference::Ev::Lost => "\"ev\": \"lost\"".into(),
            reference::Ev::Wake(s) => format!("\"ev\": \"wake\", \"stack\": \"{s}\""),
            reference::Ev::End(s) => format!("\"ev\": \"end\", \"stack\": \"{s}\""),
        };
        out.push_str(&format!(
            "{{\"ts\": {}, \"tid\": {}, {body}}}\n",
            l.ts, l.tid
        ));
    }
    out
}

/// Interleaves threads' lines differently, keeping each thread's order.
fn shuffle_threads(lines: &[reference::Line], seed: u64) -> Vec<reference::Line> {
    let mut per: BTreeMap<u64, std::collections::VecDeque<reference::Line>> = BTreeMap::new();
    for l in lines {
        per.entry(l.tid).or_default().push_back(l.clone());
    }
    let mut out = Vec::new();
    let mut x = seed | 1;
    while out.len() < lines.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let live: Vec<u64> = per
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(t, _)| *t)
            .collect();
        let t = live[(x % live.len() as u64) as usize];
        out.push(per.get_mut(&t).unwrap().pop_front().unwrap());
    }
    out
}

/// The same events written directly through the format crate's writer.
fn to_binary_direct(lines: &[reference::Line]) -> Vec<u8> {
    to_binary_in_chunks(lines, WriterOptions::default().chunk_size)
}

/// The same, in chunks of `chunk_size` bytes (small ones: every few dozen
/// events a chunk ends and the next starts with a snapshot of open frames).
fn to_binary_in_chunks(lines: &[reference::Line], chunk_size: usize) -> Vec<u8> {
    to_binary_unnamed(lines, chunk_size, 0)
}

/// [`to_binary_in_chunks`], but the functions whose bit is set in
/// `unnamed` (by their index among "a".."e") are written by id with no
/// name in the metadata: "a" and "c" with small ids, "b" and "d" with ids
/// past the analyzer's table of small ids, and "e" with an id whose
/// `fn#<id>`, the name the analyzer gives an unnamed function, the
/// metadata gives another function. Events and chunk snapshots use them.
fn to_binary_unnamed(lines: &[reference::Line], chunk_size: usize, unnamed: u8) -> Vec<u8> {
    const IDS: [u32; 5] = [40_000, 3_000_001, 40_002, 3_000_003, 40_004];
    let options = WriterOptions {
        chunk_size,
        ..Default::default()
    };
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), options).unwrap();
    if unnamed & 1 << 4 != 0 {
        w.function("fn#40004", "", 0, "");
    }
    let id = |w: &mut TraceWriter<_>, f: &str| {
        let index = ["a", "b", "c", "d", "e"].iter().position(|&n| n == f);
        match index.filter(|&i| unnamed & 1 << i != 0) {
            Some(i) => FunctionId(IDS[i]),
            None => w.function(f, "", 0, ""),
        }
    };
    for l in lines {
        let kind = match &l.ev {
            reference::Ev::Enter(f) => EventKind::Enter(id(&mut w, f)),
            reference::Ev::Exit(f) => EventKind::Exit(id(&mut w, f)),
            reference::Ev::Switch(None) => EventKind::Switch(StackId::OWN),
            reference::Ev::Switch(Some(s)) => EventKind::Switch(w.stack(s)),
            reference::Ev::Lost => EventKind::Lost,
            reference::Ev::Wake(s) => EventKind::Wake(w.stack(s)),
            reference::Ev::End(s) => EventKind::End(w.stack(s)),
        };
        w.event(ThreadId(l.tid), l.ts, kind).unwrap();
    }
    w.finish(None).unwrap().into_inner()
}

/// A generated trace's lines in (ts, tid) order: the order a binary trace
/// gives equal timestamps of different threads.
fn ordered_lines(
    threads: u64,
    stacks: u64,
    functions: u8,
    steps: &[(u8, u8, u8)],
) -> Vec<reference::Line> {
    let mut lines = generate(threads, stacks, functions, steps).lines;
    lines.sort_by_key(|l| (l.ts, l.tid));
    lines
}

fn steps() -> impl Strategy<Value = Vec<(u8, u8, u8)>> {
    proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 0..160)
}

/// The engine, fed `lines` as JSON lines, gives the literal reference's
/// report under every clock.
fn engine_matches_reference(lines: &[reference::Line]) -> Result<(), TestCaseError> {
    let text = to_jsonl(lines);
    for clock in [RefClock::Stack, RefClock::Gil, RefClock::Wall] {
        let want = reference::reference(lines, clock, None);
        let got = as_ref_report(&run_jsonl(&text, engine_clock(clock)));
        prop_assert_eq!(&got, &want, "clock {:?}\n{}", clock, text);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The engine (counters, segments, running clocks) equals the literal
    /// reference (interval overlaps, stack walks) under every clock, for any
    /// interleaving of the threads' lines.
    #[test]
    fn engine_equals_literal_reference(
        threads in 1u64..4, stacks in 0u64..4, functions in 1u8..5, steps in steps(), seed in any::<u64>(),
    ) {
        let g = generate(threads, stacks, functions, &steps);
        prop_assume!(!g.lines.is_empty());
        engine_matches_reference(&shuffle_threads(&g.lines, seed))?;
    }

    /// Binary and JSON-lines input of the same events give the same report.
    #[test]
    fn binary_and_jsonl_inputs_agree(
        threads in 1u64..4, stacks in 0u64..4, functions in 1u8..5, steps in steps(),
    ) {
        // Lines in (ts, tid) order so JSON-lines ties (line order) and binary
        // ties (thread id) mean the same thing.
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let text = to_jsonl(&lines);
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            let mut a = run_jsonl(&text, clock);
            let mut b = run(to_binary_direct(&lines), clock);
            // Where the trace came from, and the tick rate the JSON-lines
            // converter picks to keep tie order, are the only differences.
            for r in [&mut a, &mut b] {
                r.trace.input_format.clear();
                r.trace.ticks_per_second = 0;
            }
            prop_assert_eq!(a, b);
        }
    }
}

/// The lines with the recorder's file filling up: thread `i`'s events
/// stop at its `cuts[i]`-th line (in percent of its lines, when below
/// 100), which becomes its `lost` mark, at that line's time.
fn with_marks(lines: &[reference::Line], cuts: &[u8]) -> Vec<reference::Line> {
    let mut per_thread: BTreeMap<u64, usize> = BTreeMap::new();
    for l in lines {
        *per_thread.entry(l.tid).or_default() += 1;
    }
    let cut_of = |tid: u64| {
        let pct = *cuts.get(tid as usize - 1).unwrap_or(&100) as usize;
        (pct < 100).then(|| per_thread[&tid] * pct / 100)
    };
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for l in lines {
        let n = seen.entry(l.tid).or_default();
        match cut_of(l.tid) {
            Some(k) if *n == k => out.push(reference::Line {
                tid: l.tid,
                ts: l.ts,
                ev: reference::Ev::Lost,
            }),
            Some(k) if *n > k => {}
            _ => out.push(l.clone()),
        }
        *n += 1;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// With threads whose events end at a `lost` mark, the engine still
    /// equals the literal reference under every clock, and own stacks
    /// replayed by the segment pass equal the replay pass's.
    #[test]
    fn lost_marks_engine_equals_literal_reference(
        threads in 1u64..4, stacks in 0u64..4, functions in 1u8..5, steps in steps(),
        cuts in proptest::collection::vec(0u8..130, 3), seed in any::<u64>(),
    ) {
        let lines = with_marks(&ordered_lines(threads, stacks, functions, &steps), &cuts);
        prop_assume!(!lines.is_empty());
        engine_matches_reference(&shuffle_threads(&lines, seed))?;
        let bytes = to_binary_direct(&lines);
        for clock in [Clock::Stack, Clock::Wall] {
            let (fused, replayed) = fused_and_replayed(&bytes, clock);
            prop_assert_eq!(fused, replayed, "clock {}", clock);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A one-thread trace under `gil` is replayed under `stack` (no other
    /// thread can pause a stack: the two clocks draw the same intervals);
    /// its report is still the literal `gil` reference's, from JSON lines
    /// and from binary input, with or without a `lost` mark.
    #[test]
    fn one_thread_under_gil_equals_the_literal_reference(
        stacks in 0u64..4, functions in 1u8..5, steps in steps(), cut in 0u8..130,
    ) {
        let lines = with_marks(&ordered_lines(1, stacks, functions, &steps), &[cut]);
        prop_assume!(!lines.is_empty());
        let want = reference::reference(&lines, RefClock::Gil, None);
        let from_text = as_ref_report(&run_jsonl(&to_jsonl(&lines), Clock::Gil));
        prop_assert_eq!(&from_text, &want);
        let from_binary = run(to_binary_direct(&lines), Clock::Gil);
        prop_assert_eq!(from_binary.clock, Clock::Gil);
        prop_assert_eq!(&as_ref_report(&from_binary), &want);
    }
}

/// `lines` as a binary trace whose logical stacks have no names and ids
/// `dense << shift`, where `dense` is the id `TraceWriter::stack` gives.
fn to_binary_with_ids_shifted(lines: &[reference::Line], shift: u32) -> Vec<u8> {
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), WriterOptions::default()).unwrap();
    let mut ids: BTreeMap<String, StackId> = BTreeMap::new();
    for l in lines {
        let kind = match &l.ev {
            reference::Ev::Enter(f) => EventKind::Enter(w.function(f, "", 0, "")),
            reference::Ev::Exit(f) => EventKind::Exit(w.function(f, "", 0, "")),
            reference::Ev::Switch(None) => EventKind::Switch(StackId::OWN),
            reference::Ev::Switch(Some(s)) => {
                let next = StackId(((ids.len() as u64) + 1) << shift);
                EventKind::Switch(*ids.entry(s.clone()).or_insert(next))
            }
            reference::Ev::Lost => EventKind::Lost,
            reference::Ev::Wake(s) => {
                let next = StackId(((ids.len() as u64) + 1) << shift);
                EventKind::Wake(*ids.entry(s.clone()).or_insert(next))
            }
            reference::Ev::End(s) => {
                let next = StackId(((ids.len() as u64) + 1) << shift);
                EventKind::End(*ids.entry(s.clone()).or_insert(next))
            }
        };
        w.event(ThreadId(l.tid), l.ts, kind).unwrap();
    }
    w.finish(None).unwrap().into_inner()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Stacks are grouped by id whether the ids are dense (numbered as the
    /// recorder numbers them) or far apart (grouped through a sorted list
    /// of them): the same report but for the ids.
    #[test]
    fn sparse_stack_ids_group_as_dense_ones(
        threads in 1u64..4, stacks in 1u64..6, functions in 1u8..5, steps in steps(),
    ) {
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        for clock in [Clock::Stack, Clock::Gil] {
            let dense = run(to_binary_with_ids_shifted(&lines, 0), clock);
            let mut sparse = run(to_binary_with_ids_shifted(&lines, 40), clock);
            for s in &mut sparse.stacks {
                if let mtanalyze::report::StackKey::Logical(id) = s.id {
                    s.id = mtanalyze::report::StackKey::Logical(id >> 40);
                }
            }
            prop_assert_eq!(dense, sparse);
        }
    }
}

/// The lines with wakes added: each pick (position, thread, stack) puts a
/// wake of `co<stack>` by that thread at that line's time: wakes while the
/// task runs, several before a poll, of tasks that finished or never ran.
fn with_wakes(lines: &[reference::Line], picks: &[(u16, u8, u8)]) -> Vec<reference::Line> {
    let threads = lines.iter().map(|l| l.tid).max().unwrap_or(1);
    let mut at: Vec<(usize, reference::Line)> = picks
        .iter()
        .filter(|_| !lines.is_empty())
        .map(|&(pos, t, s)| {
            let i = pos as usize % lines.len();
            let wake = reference::Line {
                tid: 1 + u64::from(t) % threads,
                ts: lines[i].ts,
                ev: reference::Ev::Wake(format!("co{}", 1 + s % 3)),
            };
            (i, wake)
        })
        .collect();
    at.sort_by_key(|(i, _)| *i);
    let mut out = Vec::with_capacity(lines.len() + at.len());
    let mut picks = at.into_iter().peekable();
    for (i, l) in lines.iter().enumerate() {
        out.push(l.clone());
        while let Some((_, wake)) = picks.next_if(|(j, _)| *j == i) {
            out.push(wake);
        }
    }
    out
}

/// The report without what wakes add: the split of paused time, and the
/// events that count them.
fn without_split(mut r: Report) -> Report {
    for f in &mut r.functions {
        (f.scheduled_ns, f.waiting_ns) = (0, 0);
    }
    for s in &mut r.stacks {
        (s.scheduled_ns, s.waiting_ns) = (0, 0);
        // A wake may name a stack before its first switch: ids follow first use.
        if let mtanalyze::report::StackKey::Logical(_) = s.id {
            s.id = mtanalyze::report::StackKey::Logical(0);
        }
    }
    r.stacks.sort_by_key(|s| (s.id, s.name.to_string()));
    // A thread that only woke tasks is a thread of the trace, with its
    // chunk and its first event.
    r.trace.events = 0;
    r.trace.wakes = 0;
    r.trace.threads.clear();
    r.trace.chunks = 0;
    (r.trace.first_event_ns, r.trace.duration_ns) = (0, 0);
    r
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Wakes split paused time into scheduled and waiting, exactly, for
    /// every function and stack under every clock (nothing under `wall`),
    /// change nothing else under `stack` and `wall`, and are events of
    /// their thread for the `gil` clock as the reference has them.
    #[test]
    fn wakes_split_paused_time_and_change_nothing_else(
        threads in 1u64..4, stacks in 1u64..4, functions in 1u8..5, steps in steps(),
        picks in proptest::collection::vec((any::<u16>(), any::<u8>(), any::<u8>()), 0..40),
    ) {
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let woken = with_wakes(&lines, &picks);
        engine_matches_reference(&woken)?;
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            let r = run(to_binary_direct(&woken), clock);
            for f in &r.functions {
                prop_assert_eq!(f.scheduled_ns + f.waiting_ns, f.paused_ns, "{}", f.function);
            }
            for s in &r.stacks {
                prop_assert_eq!(s.scheduled_ns + s.waiting_ns, s.paused_ns, "{}", s.id);
                if clock == Clock::Wall {
                    prop_assert_eq!(s.scheduled_ns, 0);
                }
            }
            if clock != Clock::Gil {
                let plain = run(to_binary_direct(&lines), clock);
                prop_assert_eq!(without_split(r), without_split(plain));
            }
        }
    }
}

#[test]
fn same_report_with_one_and_many_rayon_threads() {
    let g = generate(
        3,
        3,
        4,
        &(0..3000u32)
            .map(|i| ((i * 7 % 251) as u8, (i * 13 % 253) as u8, (i % 5) as u8))
            .collect::<Vec<_>>(),
    );
    let text = to_jsonl(&g.lines);
    for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
        let in_pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
                .install(|| run_jsonl(&text, clock))
        };
        let one = in_pool(1);
        assert!(!one.functions.is_empty());
        assert_eq!(one, in_pool(4), "clock {clock}");
        assert_eq!(one, in_pool(3), "clock {clock}");
    }
}

#[test]
fn warnings_name_the_first_place_and_the_repair() {
    let text = r#"{"ts": 10, "tid": 1, "ev": "enter", "fn": "a"}
{"ts": 20, "tid": 1, "ev": "exit", "fn": "b"}
{"ts": 15, "tid": 1, "ev": "exit", "fn": "a"}
{"ts": 30, "tid": 1, "ev": "exit", "fn": "a"}
"#;
    let r = run_jsonl(text, Clock::Stack);
    let by_kind: BTreeMap<_, _> = r.warnings.iter().map(|w| (w.kind.as_str(), w)).collect();
    assert_eq!(by_kind["exit_not_open"].first, "thread 1 at 20 ns");
    assert_eq!(by_kind["clock_backwards"].first, "thread 1 at 20 ns");
    assert_eq!(by_kind["exit_on_empty_stack"].count, 1);
    assert!(!by_kind["exit_on_empty_stack"].repair.is_empty());
    assert_eq!(WarningKind::ExitOnEmpty.name(), "exit_on_empty_stack");
}

fn run_with_paths(text: &str, paths: mtanalyze::PathMode) -> Report {
    let trace = from_bytes("test", text.as_bytes().to_vec()).expect("loads");
    let opts = AnalyzeOptions {
        clock: Some(Clock::Stack),
        paths,
        ..Default::default()
    };
    analyze(&trace, &opts).expect("analyzes")
}

fn named_paths(r: &Report) -> Vec<(String, String, u64, u64)> {
    r.paths
        .iter()
        .map(|p| {
            let names: Vec<&str> = p
                .frames
                .iter()
                .map(|&i| r.functions[i as usize].function.as_str())
                .collect();
            (p.stack.clone(), names.join(";"), p.ncalls, p.self_ns)
        })
        .collect()
}

#[test]
fn call_paths_carry_self_time_merged_and_per_stack() {
    let (_, text, _, _) = worked_examples()
        .into_iter()
        .find(|e| e.0 == "fiber-handoff")
        .unwrap();
    let merged = run_with_paths(text, mtanalyze::PathMode::Merged);
    let mut got = named_paths(&merged);
    got.sort();
    let want = vec![
        (String::new(), "handler".to_owned(), 1, 15),
        (String::new(), "handler;query".to_owned(), 1, 25),
        (String::new(), "main".to_owned(), 1, 20),
    ];
    assert_eq!(got, want);
    let per_stack = run_with_paths(text, mtanalyze::PathMode::PerStack);
    let mut got = named_paths(&per_stack);
    got.sort();
    let want = vec![
        ("task-1".to_owned(), "handler".to_owned(), 1, 15),
        ("task-1".to_owned(), "handler;query".to_owned(), 1, 25),
        ("thread:1".to_owned(), "main".to_owned(), 1, 20),
    ];
    assert_eq!(got, want);
    // Without the option, no paths and the same statistics.
    let plain = run_with_paths(text, mtanalyze::PathMode::Off);
    assert!(plain.paths.is_empty());
    assert_eq!(plain.functions, merged.functions);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// Paths partition self time and calls: per function they add up to the
    /// function's tottime and ncalls.
    #[test]
    fn call_paths_add_up_to_function_totals(
        threads in 1u64..4, stacks in 0u64..4, functions in 1u8..5, steps in steps(),
    ) {
        let g = generate(threads, stacks, functions, &steps);
        prop_assume!(!g.lines.is_empty());
        for mode in [mtanalyze::PathMode::Merged, mtanalyze::PathMode::PerStack] {
            let r = run_with_paths(&to_jsonl(&g.lines), mode);
            let mut per_fn = vec![(0u64, 0u64); r.functions.len()];
            for p in &r.paths {
                let leaf = *p.frames.last().unwrap() as usize;
                per_fn[leaf].0 += p.ncalls;
                per_fn[leaf].1 += p.self_ns;
            }
            let want: Vec<(u64, u64)> = r.functions.iter().map(|f| (f.ncalls, f.tottime_ns)).collect();
            prop_assert_eq!(per_fn, want);
        }
    }
}

#[test]
fn a_finished_task_is_not_paused_for_the_rest_of_the_trace() {
    let text = r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "task"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "step"}
{"ts": 10, "tid": 1, "ev": "exit", "fn": "step"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": null}
{"ts": 20, "tid": 1, "ev": "switch", "stack": "task"}
{"ts": 20, "tid": 1, "ev": "enter", "fn": "step"}
{"ts": 30, "tid": 1, "ev": "exit", "fn": "step"}
{"ts": 30, "tid": 1, "ev": "switch", "stack": null}
{"ts": 30, "tid": 1, "ev": "enter", "fn": "main"}
{"ts": 100, "tid": 1, "ev": "exit", "fn": "main"}
"#;
    let r = run_jsonl(text, Clock::Stack);
    let task = r.stacks.iter().find(|s| s.name == "task").unwrap();
    assert_eq!(
        (task.running_ns, task.paused_ns, task.switches_in),
        (20, 10, 2)
    );
    let own = r.stacks.iter().find(|s| s.id == "thread:1").unwrap();
    assert_eq!((own.running_ns, own.paused_ns), (10 + 70, 20));
}

/// A chunk lost in the middle of a thread (as when a ring overwrites it):
/// the next chunk's snapshot of open frames is the truth. Frames it no
/// longer lists were closed in the lost stretch; frames it adds were
/// opened there.
#[test]
fn lost_chunks_are_bridged_by_the_next_snapshot() {
    use mtrace_format::layout::{CHUNK_HEADER_SIZE, HEADER_SIZE};
    let opts = WriterOptions {
        chunk_size: 1024,
        ..Default::default()
    };
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), opts).unwrap();
    let (f, g, h, k) = (
        w.function("f", "", 0, ""),
        w.function("g", "", 0, ""),
        w.function("h", "", 0, ""),
        w.function("k", "", 0, ""),
    );
    let t = ThreadId(1);
    let mut now = 0;
    let mut ev = |w: &mut TraceWriter<Cursor<Vec<u8>>>, kind| {
        now += 10;
        w.event(t, now, kind).unwrap();
    };
    ev(&mut w, EventKind::Enter(f));
    ev(&mut w, EventKind::Enter(g));
    // Chunk 0 holds f, g and some h calls; 1024-byte chunks hold ~58 events.
    for _ in 0..40 {
        ev(&mut w, EventKind::Enter(h));
        ev(&mut w, EventKind::Exit(h));
    }
    // In what will be the lost chunk (chunk 1): g returns, k is called.
    ev(&mut w, EventKind::Exit(g));
    ev(&mut w, EventKind::Enter(k));
    for _ in 0..60 {
        ev(&mut w, EventKind::Enter(h));
        ev(&mut w, EventKind::Exit(h));
    }
    ev(&mut w, EventKind::Exit(k));
    ev(&mut w, EventKind::Exit(f));
    let mut bytes = w.finish(None).unwrap().into_inner();
    // Lose chunk 1: an unclaimed slot, as a ring leaves when it reuses it.
    let at = HEADER_SIZE + 1024;
    bytes[at..at + CHUNK_HEADER_SIZE].fill(0);
    let r = run(bytes, Clock::Wall);
    let get = |n: &str| {
        r.functions
            .iter()
            .find(|x| x.function == n)
            .unwrap()
            .clone()
    };
    let warn = |k: &str| {
        r.warnings
            .iter()
            .find(|w| w.kind == k)
            .map_or(0, |w| w.count)
    };
    assert_eq!(warn("lost_chunks"), 1);
    assert_eq!(
        warn("exit_not_open") + warn("exit_mismatch") + warn("exit_on_empty_stack"),
        0,
        "{:?}",
        r.warnings
    );
    assert_eq!(get("f").ncalls, 1);
    assert_eq!(
        get("g").ncalls,
        1,
        "g closed where the snapshot no longer lists it"
    );
    assert_eq!(
        get("k").ncalls,
        1,
        "k opened from the snapshot and closed by its exit"
    );
    // k, and h if the chunk began inside an h call.
    assert!(
        (1..=2).contains(&warn("frames_from_snapshot")),
        "{:?}",
        r.warnings
    );
    assert_eq!(get("f").cumtime_ns, now - 10, "f spans the whole trace");
}

#[test]
fn frames_still_open_at_the_end_are_counted_per_function() {
    // Worked example 5: d on thread 1, and b inside a on thread 2, are open at the end.
    let (_, text, _, _) = worked_examples()
        .into_iter()
        .find(|e| e.0 == "repairs")
        .unwrap();
    let r = run_jsonl(text, Clock::Stack);
    let open: BTreeMap<&str, u64> = r
        .functions
        .iter()
        .map(|f| (f.function.as_str(), f.open_at_end))
        .collect();
    assert_eq!(
        open,
        BTreeMap::from([("a", 1), ("b", 1), ("c", 0), ("d", 1)])
    );
}

/// The report of `bytes` under `clock` with own stacks replayed by the
/// segment pass, and by the replay pass.
fn fused_and_replayed(bytes: &[u8], clock: Clock) -> (Report, Report) {
    let trace = from_bytes("test", bytes.to_vec()).expect("loads");
    mtanalyze_testkit::fusion::fused_and_replayed(&trace, clock).expect("analyzes")
}

fn assert_fused_equals_replayed(bytes: &[u8]) {
    for clock in [Clock::Stack, Clock::Wall] {
        let (fused, replayed) = fused_and_replayed(bytes, clock);
        assert_eq!(fused, replayed, "clock {clock}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The segment pass replays a thread's own stack as it reads the thread
    /// (one read instead of two); the result is exactly the replay pass's.
    #[test]
    fn own_stacks_replayed_by_the_segment_pass_equal_the_replay_pass(
        threads in 1u64..4, stacks in 0u64..4, functions in 1u8..5, steps in steps(),
    ) {
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let bytes = to_binary_direct(&lines);
        for clock in [Clock::Stack, Clock::Wall] {
            let (fused, replayed) = fused_and_replayed(&bytes, clock);
            prop_assert_eq!(fused, replayed, "clock {}", clock);
        }
    }
}

/// A one-thread trace of `events` (from `f`, a function id the metadata
/// does not name, and a stack `co`), ending at 100; checked to analyze the
/// same with own stacks replayed by either pass.
fn trace_with_a_stranger(
    events: impl Fn(FunctionId, FunctionId, StackId) -> Vec<(u64, EventKind)>,
) -> Vec<u8> {
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), WriterOptions::default()).unwrap();
    let f = w.function("f", "", 0, "");
    let stranger = FunctionId(4242);
    let co = w.stack("co");
    for (ts, e) in events(f, stranger, co) {
        w.event(ThreadId(1), ts, e).unwrap();
    }
    let bytes = w.finish(Some(100)).unwrap().into_inner();
    assert_fused_equals_replayed(&bytes);
    bytes
}

#[test]
fn an_unknown_function_leaves_the_own_stack_to_the_replay_pass() {
    let bytes = trace_with_a_stranger(|f, stranger, co| {
        vec![
            (10, EventKind::Enter(f)),
            (20, EventKind::Enter(stranger)),
            (30, EventKind::Switch(co)),
            (40, EventKind::Enter(f)),
            (50, EventKind::Switch(StackId::OWN)),
            (60, EventKind::Exit(stranger)),
            (70, EventKind::Enter(f)),
        ]
    });
    let r = run(bytes, Clock::Stack);
    let stranger = r.functions.iter().find(|x| x.function == "fn#4242");
    assert_eq!(stranger.map(|x| (x.ncalls, x.cumtime_ns)), Some((1, 20)));
    assert_eq!(r.stacks.len(), 2);
}

#[test]
fn an_unknown_function_after_a_switch_is_counted_with_the_own_stacks_earlier_segments() {
    // The own stack's first segment ends (switch to `co`) while the pass
    // replays it; the stranger in its second segment is numbered as the
    // pass meets it, and the replay goes on over both segments.
    let bytes = trace_with_a_stranger(|f, stranger, co| {
        vec![
            (10, EventKind::Enter(f)),
            (30, EventKind::Switch(co)),
            (40, EventKind::Enter(f)),
            (50, EventKind::Switch(StackId::OWN)),
            (60, EventKind::Enter(stranger)),
            (70, EventKind::Exit(stranger)),
            (80, EventKind::Exit(f)),
        ]
    });
    let r = run(bytes, Clock::Stack);
    let own = r.stacks.iter().find(|s| s.id == "thread:1").unwrap();
    // Ran 10..30 and 50..100; paused 30..50.
    assert_eq!(
        (own.running_ns, own.paused_ns, own.switches_in),
        (70, 20, 2)
    );
}

#[test]
fn lost_chunks_and_snapshots_replay_the_same_in_the_segment_pass() {
    use mtrace_format::layout::{CHUNK_HEADER_SIZE, HEADER_SIZE};
    let opts = WriterOptions {
        chunk_size: 1024,
        ..Default::default()
    };
    let mut w = TraceWriter::new(Cursor::new(Vec::new()), opts).unwrap();
    let (f, g) = (w.function("f", "", 0, ""), w.function("g", "", 0, ""));
    let co = w.stack("co");
    let mut now = 0;
    for round in 0..40u64 {
        for t in [ThreadId(1), ThreadId(2)] {
            let mut ev = |kind| {
                now += 3;
                w.event(t, now, kind).unwrap();
            };
            ev(EventKind::Enter(f));
            if round % 3 == t.0 {
                // A hand-off to the logical stack, with frames left open
                // below it on the own stack.
                ev(EventKind::Switch(co));
                ev(EventKind::Enter(g));
                ev(EventKind::Exit(g));
                ev(EventKind::Switch(StackId::OWN));
            }
            ev(EventKind::Enter(g));
            ev(EventKind::Exit(g));
            if round % 2 == 0 {
                ev(EventKind::Exit(f));
            }
        }
    }
    let mut bytes = w.finish(None).unwrap().into_inner();
    // Lose a few chunks in the middle: the next chunks restart from their
    // snapshots (own stacks seeded, some while on the logical stack).
    for slot in [2, 5, 6] {
        let at = HEADER_SIZE + slot * 1024;
        bytes[at..at + CHUNK_HEADER_SIZE].fill(0);
    }
    let r = run(bytes.clone(), Clock::Stack);
    assert!(r.warnings.iter().any(|w| w.kind == "lost_chunks"));
    assert!(r.warnings.iter().any(|w| w.kind == "frames_from_snapshot"));
    assert_fused_equals_replayed(&bytes);
}

// ---- many short stacks ----

/// Turns random choices into a trace of many short logical stacks, as an
/// async runtime or a fiber scheduler makes: `threads` workers switch onto
/// tasks (`task-N`, up to `tasks` of them, started in order), call a little
/// on them and switch back to their own stack, or straight onto another
/// task, so each task is switched in and out many times and migrates
/// between the workers. A task that finishes closes its frames and is
/// never run again; tasks suspended with open frames, or still running,
/// when the steps run out stay open at the end. Like [`generate`], a stack
/// is current on one thread at a time, time only moves forward (ties
/// except at switches), and a few exits are wrong on purpose.
///
/// With `ends`, a task that returns is then dropped (an `end` by the
/// thread that ran it, right after its switch back), and some tasks that
/// wait with frames open are abandoned: ended there, never run again.
fn generate_many(
    threads: u64,
    tasks: u64,
    functions: u8,
    steps: &[(u8, u8, u8)],
    ends: bool,
) -> Generated {
    const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];
    /// Frames a task may have open: short stacks, as a task's are.
    const MAX_DEPTH: usize = 6;
    let threads = threads.max(1) as usize;
    let mut now = 0u64;
    // Per thread: the task it runs (None: its own stack).
    let mut current: Vec<Option<u64>> = vec![None; threads];
    let mut own: Vec<Vec<&str>> = vec![Vec::new(); threads];
    let mut task_frames: Vec<Vec<&str>> = vec![Vec::new(); tasks as usize];
    let mut finished = vec![false; tasks as usize];
    let mut started = 0u64;
    let mut lines = Vec::new();
    for &(who, what, dt) in steps {
        now += (dt % 3) as u64; // 0 makes ties
        let t = who as usize % threads;
        let tid = t as u64 + 1;
        let f = NAMES[(what / 16) as usize % functions.max(1) as usize];
        // A switch gets a time of its own (see `generate`).
        let switch = |lines: &mut Vec<reference::Line>, now: &mut u64, to: Option<u64>| {
            *now += 1;
            lines.push(reference::Line {
                tid,
                ts: *now,
                ev: reference::Ev::Switch(to.map(|n| format!("task-{n}"))),
            });
            *now += 1;
        };
        // A task no thread runs: mostly one already started, sometimes a new one.
        let pick = |current: &[Option<u64>], started: &mut u64| -> Option<u64> {
            let waiting: Vec<u64> = (0..*started)
                .filter(|&n| !finished[n as usize] && !current.contains(&Some(n)))
                .collect();
            if (waiting.is_empty() || what % 4 == 0) && *started < tasks {
                *started += 1;
                return Some(*started - 1);
            }
            (!waiting.is_empty()).then(|| waiting[(what as usize / 4) % waiting.len()])
        };
        let ev = match current[t] {
            None => match what % 16 {
                0..=9 => {
                    let Some(n) = pick(&current, &mut started) else {
                        continue;
                    };
                    current[t] = Some(n);
                    switch(&mut lines, &mut now, Some(n));
                    continue;
                }
                10..=12 if own[t].len() < MAX_DEPTH => {
                    own[t].push(f);
                    reference::Ev::Enter(f.into())
                }
                _ => match own[t].pop() {
                    Some(top) => reference::Ev::Exit(top.into()),
                    None => continue,
                },
            },
            Some(n) => {
                let frames = &mut task_frames[n as usize];
                match what % 16 {
                    0..=5 if frames.len() < MAX_DEPTH => {
                        frames.push(f);
                        reference::Ev::Enter(f.into())
                    }
                    0..=8 => match frames.pop() {
                        Some(top) => reference::Ev::Exit(top.into()),
                        None => continue,
                    },
                    9 => {
                        // a wrong exit, closing what the repair closes
                        if let Some(pos) = frames.iter().rposition(|x| *x == f) {
                            frames.truncate(pos);
                        }
                        reference::Ev::Exit(f.into())
                    }
                    10..=12 => {
                        // the task waits: back to the worker's own stack
                        current[t] = None;
                        switch(&mut lines, &mut now, None);
                        if ends && what % 16 == 12 && !frames.is_empty() {
                            // abandoned with its frames open, and dropped
                            finished[n as usize] = true;
                            lines.push(reference::Line {
                                tid,
                                ts: now,
                                ev: reference::Ev::End(format!("task-{n}")),
                            });
                        }
                        continue;
                    }
                    13 => {
                        // straight onto another task, as fibers do
                        let Some(next) = pick(&current, &mut started) else {
                            continue;
                        };
                        current[t] = Some(next);
                        switch(&mut lines, &mut now, Some(next));
                        continue;
                    }
                    _ => {
                        // the task returns: its frames close, innermost first
                        while let Some(top) = frames.pop() {
                            now += (dt % 2) as u64;
                            lines.push(reference::Line {
                                tid,
                                ts: now,
                                ev: reference::Ev::Exit(top.into()),
                            });
                        }
                        finished[n as usize] = true;
                        current[t] = None;
                        switch(&mut lines, &mut now, None);
                        if ends {
                            lines.push(reference::Line {
                                tid,
                                ts: now,
                                ev: reference::Ev::End(format!("task-{n}")),
                            });
                        }
                        continue;
                    }
                }
            }
        };
        lines.push(reference::Line { tid, ts: now, ev });
    }
    Generated { lines }
}

/// `lines` as a binary file in 1 KiB chunks (a task's open frames cross
/// chunk boundaries, in snapshots), in the binary file's order of equal
/// timestamps (see `ordered_lines`): the engine equals the reference, and
/// own stacks replayed by the segment pass equal the replay pass, under
/// every clock.
fn in_small_chunks_equal_the_reference(
    mut lines: Vec<reference::Line>,
) -> Result<(), TestCaseError> {
    lines.sort_by_key(|l| (l.ts, l.tid));
    let bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
    for clock in [RefClock::Stack, RefClock::Gil, RefClock::Wall] {
        let want = reference::reference(&lines, clock, None);
        let (fused, replayed) = fused_and_replayed(&bytes, engine_clock(clock));
        prop_assert_eq!(&as_ref_report(&replayed), &want, "clock {:?}", clock);
        prop_assert_eq!(fused, replayed, "clock {:?}", clock);
    }
    Ok(())
}

/// Enough steps for tens to hundreds of tasks, each switched in a few times.
fn many_steps() -> impl Strategy<Value = Vec<(u8, u8, u8)>> {
    proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 100..2000)
}

proptest! {
    // Each case is a trace of up to ~2500 lines analyzed several times;
    // these counts keep the two tests at a few seconds together.
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Many short stacks migrating between threads: the engine equals the
    /// literal reference under every clock, for any interleaving of the
    /// threads' lines.
    #[test]
    fn many_short_stacks_engine_equals_literal_reference(
        threads in 2u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        seed in any::<u64>(),
    ) {
        let g = generate_many(threads, tasks, functions, &steps, false);
        prop_assume!(!g.lines.is_empty());
        engine_matches_reference(&shuffle_threads(&g.lines, seed))?;
    }

    /// The same traces as binary files in 1 KiB chunks (a task's open
    /// frames cross chunk boundaries, in snapshots): the engine equals the
    /// reference, and own stacks replayed by the segment pass equal the
    /// replay pass, under every clock.
    #[test]
    fn many_short_stacks_in_small_chunks_fused_and_replayed_equal_the_reference(
        threads in 2u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
    ) {
        let lines = generate_many(threads, tasks, functions, &steps, false).lines;
        prop_assume!(!lines.is_empty());
        in_small_chunks_equal_the_reference(lines)?;
    }
}

/// [`generate_many`]'s steps for the tests that take one fixed trace of
/// many short stacks (the generator makes what its tests are about);
/// [`fixed_steps`] gives `ordered_lines`' inputs.
fn one_trace_of_many_stacks() -> Vec<(u8, u8, u8)> {
    (0..1000u32)
        .map(|i| ((i * 7 % 251) as u8, (i * 37 % 253) as u8, (i % 5) as u8))
        .collect()
}

#[test]
fn many_short_stacks_are_many_finished_and_open_migrating_stacks() {
    let steps = one_trace_of_many_stacks();
    let g = generate_many(3, 100, 4, &steps, false);
    let r = run_jsonl(&to_jsonl(&g.lines), Clock::Stack);
    let tasks: Vec<_> = r
        .stacks
        .iter()
        .filter(|s| s.name.starts_with("task-"))
        .collect();
    assert!(tasks.len() >= 30, "{} tasks", tasks.len());
    let migrated = tasks.iter().filter(|s| s.threads.len() > 1).count();
    assert!(
        migrated >= 10,
        "{migrated} tasks ran on more than one thread"
    );
    assert!(
        tasks.iter().any(|s| s.switches_in >= 4),
        "some task is switched in many times"
    );
    let open: u64 = r.functions.iter().map(|f| f.open_at_end).sum();
    assert!(open > 0, "some frames stay open at the end");
}

// ---- ends of logical stacks ----

/// Where each stack a thread switched onto was last left (a switch away or
/// a `lost` mark), if no thread is on it after its thread's last line.
fn last_left(lines: &[reference::Line]) -> BTreeMap<String, Option<u64>> {
    let mut on: BTreeMap<u64, Option<String>> = BTreeMap::new();
    let mut left: BTreeMap<String, Option<u64>> = BTreeMap::new();
    for l in lines {
        let cur = on.entry(l.tid).or_default();
        if let reference::Ev::Switch(_) | reference::Ev::Lost = l.ev {
            if let Some(s) = cur.take() {
                left.insert(s, Some(l.ts));
            }
            if let reference::Ev::Switch(Some(s)) = &l.ev {
                left.insert(s.clone(), None);
                *cur = Some(s.clone());
            }
        }
    }
    left
}

/// The lines with `end` events added ("Ends of logical stacks"). Each of
/// `finals` (stack, delay, thread) ends `names[stack]` by that thread
/// `delay % 3` ns after it was last left (0: at its switch away): ends
/// that count, of stacks that finished or were abandoned with frames open;
/// of a stack still run at the end, or never run, one that does not. Each
/// of `picks` (position, thread, stack) ends a stack at that line's time,
/// wherever that falls: mostly ends that do not count (while the stack
/// runs, before a switch onto it, a second end, a stack that never ran).
/// Each end goes after every line of its time or earlier, so a thread's
/// lines keep their order and time only moves forward.
fn with_ends(
    lines: &[reference::Line],
    names: &[String],
    finals: &[(u8, u8, u8)],
    picks: &[(u16, u8, u8)],
) -> Vec<reference::Line> {
    if lines.is_empty() || names.is_empty() {
        return lines.to_vec();
    }
    let threads = lines.iter().map(|l| l.tid).max().unwrap_or(1);
    let last_ts = lines.iter().map(|l| l.ts).max().unwrap_or(0);
    let left = last_left(lines);
    let end = |s: u8, t: u8, ts: u64| reference::Line {
        tid: 1 + u64::from(t) % threads,
        ts,
        ev: reference::Ev::End(names[s as usize % names.len()].clone()),
    };
    // (insert before line i, the end)
    let mut extra: Vec<(usize, reference::Line)> = Vec::new();
    for &(s, delay, t) in finals {
        let name = &names[s as usize % names.len()];
        let at = match left.get(name) {
            Some(Some(l)) => l + u64::from(delay % 3),
            _ => last_ts + u64::from(delay % 3),
        };
        let i = lines.partition_point(|l| l.ts <= at);
        extra.push((i, end(s, t, at)));
    }
    for &(pos, t, s) in picks {
        let i = pos as usize % lines.len();
        extra.push((i + 1, end(s, t, lines[i].ts)));
    }
    extra.sort_by_key(|(i, _)| *i);
    let mut out = Vec::with_capacity(lines.len() + extra.len());
    let mut extra = extra.into_iter().peekable();
    for (i, l) in lines.iter().enumerate() {
        while let Some((_, e)) = extra.next_if(|(j, _)| *j == i) {
            out.push(e);
        }
        out.push(l.clone());
    }
    out.extend(extra.map(|(_, e)| e));
    out
}

/// `co1`..`co<stacks>`, which the generator runs, and one more that it
/// never does.
fn stack_names(stacks: u64) -> Vec<String> {
    (1..=stacks + 1).map(|s| format!("co{s}")).collect()
}

/// [`ordered_lines`] with ends taken from the steps themselves (the first
/// three choose stacks that end when last left, the next two ends at
/// arbitrary lines): for the properties of many traces, whose strategies
/// stay as they were.
fn lines_with_ends(
    threads: u64,
    stacks: u64,
    functions: u8,
    steps: &[(u8, u8, u8)],
) -> Vec<reference::Line> {
    let lines = ordered_lines(threads, stacks, functions, steps);
    let finals: Vec<(u8, u8, u8)> = steps.iter().take(3).copied().collect();
    let picks: Vec<(u16, u8, u8)> = steps
        .iter()
        .skip(3)
        .take(2)
        .map(|&(a, b, c)| (u16::from(a) * 7, b, c))
        .collect();
    with_ends(&lines, &stack_names(stacks), &finals, &picks)
}

/// [`with_ends`] then [`with_wakes`], in (ts, tid) order: the lines of
/// the streamed tests of odd ends.
fn with_ends_and_wakes(
    lines: &[reference::Line],
    names: &[String],
    finals: &[(u8, u8, u8)],
    ends: &[(u16, u8, u8)],
    wakes: &[(u16, u8, u8)],
) -> Vec<reference::Line> {
    let mut lines = with_wakes(&with_ends(lines, names, finals, ends), wakes);
    lines.sort_by_key(|l| (l.ts, l.tid));
    lines
}

fn finals() -> impl Strategy<Value = Vec<(u8, u8, u8)>> {
    proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 0..5)
}

fn end_picks() -> impl Strategy<Value = Vec<(u16, u8, u8)>> {
    proptest::collection::vec((any::<u16>(), any::<u8>(), any::<u8>()), 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// With ends (that count, and that do not) and threads whose events
    /// end at `lost` marks, the engine equals the literal reference under
    /// every clock, for any interleaving: every number, the warnings that
    /// ignored ends add, and which stacks ended. Own stacks replayed by the
    /// segment pass still equal the replay pass's, and a merge of reports
    /// carries each stack's flag.
    #[test]
    fn ends_engine_equals_literal_reference(
        threads in 1u64..4, stacks in 1u64..4, functions in 1u8..5, steps in steps(),
        finals in finals(), picks in end_picks(),
        cuts in proptest::collection::vec(0u8..130, 0..4), seed in any::<u64>(),
    ) {
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let lines = with_marks(&with_ends(&lines, &stack_names(stacks), &finals, &picks), &cuts);
        engine_matches_reference(&shuffle_threads(&lines, seed))?;
        let bytes = to_binary_direct(&lines);
        for clock in [Clock::Stack, Clock::Wall] {
            let (fused, replayed) = fused_and_replayed(&bytes, clock);
            prop_assert_eq!(fused, replayed, "clock {}", clock);
        }
        let r = run(bytes, Clock::Stack);
        let merged = mtanalyze::report::merge(vec![r.clone(), r.clone()]).expect("two reports");
        let flags = |r: &Report| r.stacks.iter().map(|s| s.ended).collect::<Vec<_>>();
        prop_assert_eq!(flags(&merged), [flags(&r), flags(&r)].concat());
    }
}

/// `n` steps for `ordered_lines`, the same for the same `k`: the inputs
/// of the tests that check what generated traces hold.
fn fixed_steps(k: u32, n: u32) -> Vec<(u8, u8, u8)> {
    (0..n)
        .map(|i| {
            (
                (i * 7 + k) as u8,
                (i * 37 + k * 11) as u8,
                (i + k) as u8 % 5,
            )
        })
        .collect()
}

/// The ends tests' inputs hold what they are about: ends that count on
/// stacks left with frames open (closed there, as cut short) and on
/// finished ones, and ends the rule ignores.
#[test]
fn generated_ends_count_cut_short_and_are_ignored() {
    let (mut ended, mut cut, mut ignored, mut cases) = (0, 0, 0, 0);
    for k in 0..64u32 {
        let steps = fixed_steps(k, 120);
        let lines = ordered_lines(2, 3, 3, &steps);
        let finals = [
            (k as u8, k as u8, 0),
            (k as u8 + 1, 0, 1),
            (k as u8 + 2, 1, 0),
        ];
        let picks = [((k * 13) as u16, 0, k as u8), ((k * 29) as u16, 1, 3)];
        let lines = with_ends(&lines, &stack_names(3), &finals, &picks);
        let r = run_jsonl(&to_jsonl(&lines), Clock::Stack);
        cases += 1;
        ended += r.stacks.iter().filter(|s| s.ended).count();
        cut += r.functions.iter().map(|f| f.cut_short).sum::<u64>();
        ignored += r
            .warnings
            .iter()
            .filter(|w| w.kind == "end_ignored")
            .map(|w| w.count)
            .sum::<u64>();
    }
    eprintln!(
        "{cases} traces: {ended} stacks ended, {cut} frames cut short, {ignored} ends ignored"
    );
    assert!(ended >= 64, "{ended} stacks ended in {cases} traces");
    assert!(cut >= 16, "{cut} frames closed at an end");
    assert!(ignored >= 64, "{ignored} ends ignored");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Many short tasks that return and are dropped, or are abandoned with
    /// frames open and dropped, with a few ends that do not fit: the
    /// engine equals the reference under every clock, for any interleaving
    /// and in small binary chunks (fused and replayed alike).
    #[test]
    fn many_short_stacks_with_ends_equal_the_reference(
        threads in 2u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        picks in end_picks(), seed in any::<u64>(),
    ) {
        let lines = generate_many(threads, tasks, functions, &steps, true).lines;
        prop_assume!(!lines.is_empty());
        let names: Vec<String> = (0..tasks).map(|n| format!("task-{n}")).collect();
        let lines = with_ends(&lines, &names, &[], &picks);
        engine_matches_reference(&shuffle_threads(&lines, seed))?;
        in_small_chunks_equal_the_reference(lines)?;
    }
}

/// The worked example of "Ends of logical stacks" in `schemas/semantics.md`
/// (also `tests/e2e/ends.rs`): the reference and the engine give its
/// numbers, and without the ends the abandoned frames run to the end.
#[test]
fn ends_worked_example_in_engine_and_reference() {
    let text = mtanalyze_testkit::worked_examples::ENDS;
    // The document's events are these, line for line.
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/semantics.md"),
    )
    .expect("semantics.md");
    let section = doc
        .split("## Ends of logical stacks")
        .nth(1)
        .expect("the section");
    let block = section
        .split("```jsonl\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("its events");
    assert_eq!(block, text, "semantics.md and worked_examples::ENDS");
    let want_fns: BTreeMap<&str, [u64; 5]> = BTreeMap::from([
        ("handle", [1, 1, 10, 20, 40]),
        ("query", [1, 1, 10, 10, 40]),
        ("step", [1, 1, 10, 10, 0]),
        ("serve", [1, 1, 100, 100, 0]),
    ]);
    let rows = |r: &RefReport| -> BTreeMap<String, [u64; 5]> {
        r.functions
            .iter()
            .map(|(k, f)| {
                let row = [
                    f.ncalls,
                    f.primitive_calls,
                    f.tottime_ns,
                    f.cumtime_ns,
                    f.paused_ns,
                ];
                (k.clone(), row)
            })
            .collect()
    };
    let want: BTreeMap<String, [u64; 5]> =
        want_fns.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let lines = reference::parse_jsonl(text);
    let by_ref = reference::reference(&lines, RefClock::Stack, None);
    assert_eq!(rows(&by_ref), want);
    assert_eq!(by_ref.warnings, 1, "the end of task-9, which never ran");
    let ended: Vec<&str> = by_ref.ended.iter().map(String::as_str).collect();
    assert_eq!(ended, ["task-1", "task-2"]);
    let r = run_jsonl(text, Clock::Stack);
    assert_eq!(as_ref_report(&r), by_ref);
    let f = |n: &str| r.functions.iter().find(|f| f.function == n).expect(n);
    for n in ["handle", "query"] {
        assert_eq!(
            (f(n).scheduled_ns, f(n).cut_short, f(n).open_at_end),
            (15, 1, 0),
            "{n}"
        );
    }
    let task = |n: &str| r.stacks.iter().find(|s| s.name == n).expect(n);
    let t1 = task("task-1");
    assert_eq!(
        (
            t1.running_ns,
            t1.paused_ns,
            t1.scheduled_ns,
            t1.waiting_ns,
            t1.ended
        ),
        (20, 40, 15, 25, true)
    );
    let t2 = task("task-2");
    assert_eq!((t2.running_ns, t2.paused_ns, t2.ended), (10, 0, true));
    // Without the ends: open until the end of the trace.
    let without = mtanalyze_testkit::worked_examples::without_ends(text);
    let r = run_jsonl(&without, Clock::Stack);
    let f = |n: &str| {
        r.functions
            .iter()
            .find(|f| f.function == n)
            .expect(n)
            .clone()
    };
    assert_eq!(
        (
            f("handle").paused_ns,
            f("handle").scheduled_ns,
            f("handle").open_at_end
        ),
        (80, 55, 1)
    );
    assert!(r.stacks.iter().all(|s| !s.ended));
}

/// Ties and the lost-events rules, one case each: an end at the time of
/// the switch away counts, at the time of a switch onto the stack it does
/// not (whatever the lines' order); a mark that makes the trace incomplete
/// before the end cuts the stack there.
#[test]
fn ends_at_ties_and_with_lost_marks() {
    let frames_of = |text: &str| {
        let r = run_jsonl(text, Clock::Stack);
        let f = r
            .functions
            .iter()
            .find(|f| f.function == "f")
            .expect("f")
            .clone();
        let ended = r.stacks.iter().any(|s| s.ended);
        let ignored = r.warnings.iter().any(|w| w.kind == "end_ignored");
        (f.cumtime_ns + f.paused_ns, f.cut_short, ended, ignored)
    };
    let left_at_10 = |end_line: &str, end_first: bool| {
        let mut lines = vec![
            r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "t"}"#,
            r#"{"ts": 0, "tid": 1, "ev": "enter", "fn": "f"}"#,
        ];
        let away = r#"{"ts": 10, "tid": 1, "ev": "switch", "stack": null}"#;
        if end_first {
            lines.extend([end_line, away]);
        } else {
            lines.extend([away, end_line]);
        }
        lines.push(r#"{"ts": 50, "tid": 1, "ev": "enter", "fn": "g"}"#);
        lines.join("\n")
    };
    let end_by_2 = r#"{"ts": 10, "tid": 2, "ev": "end", "stack": "t"}"#;
    // At the switch away, before or after its line: counts, f spans 0..10.
    assert_eq!(
        frames_of(&left_at_10(end_by_2, false)),
        (10, 1, true, false)
    );
    assert_eq!(frames_of(&left_at_10(end_by_2, true)), (10, 1, true, false));
    // At a switch onto the stack: ignored, f open until the end (50).
    let back = r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "t"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": null}
{"ts": 20, "tid": 2, "ev": "end", "stack": "t"}
{"ts": 20, "tid": 1, "ev": "switch", "stack": "t"}
{"ts": 30, "tid": 1, "ev": "switch", "stack": null}
{"ts": 50, "tid": 1, "ev": "enter", "fn": "g"}"#;
    assert_eq!(frames_of(back), (50, 0, false, true));
    // Switched onto and away at the time of the end: it ran at t, ignored.
    let touched = r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "t"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": null}
{"ts": 20, "tid": 1, "ev": "switch", "stack": "t"}
{"ts": 20, "tid": 1, "ev": "switch", "stack": null}
{"ts": 20, "tid": 2, "ev": "end", "stack": "t"}
{"ts": 50, "tid": 1, "ev": "enter", "fn": "g"}"#;
    assert_eq!(frames_of(touched), (50, 0, false, true));
    // Thread 3 loses its events at 25, before the end at 40: the stack,
    // paused since 10, ends at the mark (rule 3), not at its end.
    let lost = r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "t"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": null}
{"ts": 0, "tid": 3, "ev": "enter", "fn": "h"}
{"ts": 25, "tid": 3, "ev": "lost"}
{"ts": 40, "tid": 2, "ev": "end", "stack": "t"}
{"ts": 50, "tid": 1, "ev": "enter", "fn": "g"}"#;
    assert_eq!(frames_of(lost), (25, 1, true, false));
    // A mark after the end: the end wins.
    let later = lost.replace(
        "\"ts\": 25, \"tid\": 3, \"ev\": \"lost\"",
        "\"ts\": 45, \"tid\": 3, \"ev\": \"lost\"",
    );
    assert_eq!(frames_of(&later), (40, 1, true, false));
}

/// Runs of the merge property so far: each writes its traces into a
/// directory of its own.
static SUMMED_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    /// Many traces, one report: every total of the merged report is the sum
    /// of the per-trace reports' (functions and edges by identity, stacks
    /// and threads listed trace after trace, counts summed), whatever order
    /// the traces come in.
    #[test]
    fn merged_reports_are_the_sums_of_their_traces(
        traces in proptest::collection::vec((1u64..4, 0u64..3, 1u8..5, steps()), 1..5),
        clock in prop_oneof![Just(Clock::Stack), Just(Clock::Gil), Just(Clock::Wall)],
    ) {
        let reports: Vec<Report> = traces
            .iter()
            .map(|(t, s, f, steps)| run(to_binary_direct(&lines_with_ends(*t, *s, *f, steps)), clock))
            .collect();
        let merged = mtanalyze::report::merge(reports.clone()).expect("at least one");
        let dir = std::env::temp_dir().join(format!(
            "mtanalyze-summed-{}-{}",
            std::process::id(),
            SUMMED_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let paths: Vec<PathBuf> = traces
            .iter()
            .enumerate()
            .map(|(i, (t, s, f, steps))| {
                let p = dir.join(format!("{i}.bin"));
                std::fs::write(&p, to_binary_direct(&lines_with_ends(*t, *s, *f, steps))).expect("written");
                p
            })
            .collect();
        let opts = AnalyzeOptions { clock: Some(clock), ..Default::default() };
        // Summed by the caller from each trace's report (edges numbered
        // between the threads), each report handed over being its trace's;
        // and summed by the workers (each its own traces, in whatever
        // order they took them; the sums combined after): the same report,
        // rows in the same order.
        let mut each = Vec::new();
        let reported = mtanalyze::analyze_many(&paths, &opts, mtanalyze::ManyTraces::MergeAndReport, |_, _, r| {
            each.push(r.map_err(|e| e.to_string())?.clone());
            Ok::<(), String>(())
        });
        let summed = mtanalyze::analyze_many(&paths, &opts, mtanalyze::ManyTraces::Merge, |_, _, r| {
            r.map(drop).map_err(|e| e.to_string())
        });
        let _ = std::fs::remove_dir_all(&dir);
        for (mut got, want) in each.into_iter().zip(&reports) {
            got.trace.source.clone_from(&want.trace.source);
            prop_assert_eq!(&got, want);
        }
        for merge in [reported, summed] {
            let mut merge = merge.expect("every trace analyzes").finish().expect("at least one");
            // Named by their files, not "test".
            merge.trace.source.clone_from(&merged.trace.source);
            prop_assert_eq!(merge, merged.clone());
        }
        // Rows in the order first met: a trace's new functions in its
        // order, its new edges in its order (by caller, then callee).
        let mut seen = std::collections::HashSet::new();
        let want_functions: Vec<_> = reports.iter().flat_map(|r| &r.functions).map(|f| f.key()).filter(|k| seen.insert(k.clone())).collect();
        let mut seen = std::collections::HashSet::new();
        let want_edges: Vec<_> = reports.iter().flat_map(|r| &r.edges).map(|e| (e.caller_key(), e.callee_key())).filter(|k| seen.insert(k.clone())).collect();
        prop_assert_eq!(merged.functions.iter().map(|f| f.key()).collect::<Vec<_>>(), want_functions);
        prop_assert_eq!(merged.edges.iter().map(|e| (e.caller_key(), e.callee_key())).collect::<Vec<_>>(), want_edges);
        let mut reversed = mtanalyze::report::merge(reports.iter().rev().cloned()).expect("at least one");
        // Function totals by identity.
        let mut want: BTreeMap<String, [u64; 8]> = BTreeMap::new();
        for r in &reports {
            for f in &r.functions {
                let w = want.entry(format!("{:?}", f.key())).or_default();
                let v = [f.ncalls, f.primitive_calls, f.tottime_ns, f.cumtime_ns, f.paused_ns, f.open_at_end, f.scheduled_ns, f.waiting_ns];
                for (a, b) in w.iter_mut().zip(v) {
                    *a += b;
                }
            }
        }
        let got = |m: &Report| -> BTreeMap<String, [u64; 8]> {
            m.functions
                .iter()
                .map(|f| (format!("{:?}", f.key()), [f.ncalls, f.primitive_calls, f.tottime_ns, f.cumtime_ns, f.paused_ns, f.open_at_end, f.scheduled_ns, f.waiting_ns]))
                .collect()
        };
        prop_assert_eq!(got(&merged), want.clone());
        prop_assert_eq!(got(&reversed), want);
        // Edges by identity.
        let edges = |rs: &[&Report]| -> BTreeMap<String, [u64; 5]> {
            let mut m: BTreeMap<String, [u64; 5]> = BTreeMap::new();
            for r in rs {
                for e in &r.edges {
                    let w = m.entry(format!("{:?}->{:?}", e.caller_key(), e.callee_key())).or_default();
                    for (a, b) in w.iter_mut().zip([e.ncalls, e.primitive_calls, e.tottime_ns, e.cumtime_ns, e.callee_cumtime_ns]) {
                        *a += b;
                    }
                }
            }
            m
        };
        prop_assert_eq!(edges(&[&merged]), edges(&reports.iter().collect::<Vec<_>>()));
        // Counts and lists.
        let t = &merged.trace;
        prop_assert_eq!(t.traces, reports.len() as u64);
        prop_assert_eq!(t.events, reports.iter().map(|r| r.trace.events).sum::<u64>());
        prop_assert_eq!(t.duration_ns, reports.iter().map(|r| r.trace.duration_ns).sum::<u64>());
        prop_assert_eq!(t.threads.len(), reports.iter().map(|r| r.trace.threads.len()).sum::<usize>());
        prop_assert_eq!(merged.stacks.len(), reports.iter().map(|r| r.stacks.len()).sum::<usize>());
        let warnings = |r: &Report| r.warnings.iter().map(|w| w.count).sum::<u64>();
        prop_assert_eq!(warnings(&merged), reports.iter().map(warnings).sum::<u64>());
        reversed.trace.source.clear();
    }
}

/// The report of `bytes` under `clock` counting `[from, to)` (ns; `None`:
/// open), with call paths.
fn run_window(bytes: &[u8], clock: Clock, from: Option<u64>, to: Option<u64>) -> Report {
    let trace = from_bytes("test", bytes.to_vec()).expect("loads");
    let opts = AnalyzeOptions {
        clock: Some(clock),
        paths: mtanalyze::PathMode::Merged,
        from: from.map(mtanalyze::TimeBound::At),
        to: to.map(mtanalyze::TimeBound::At),
        ..Default::default()
    };
    analyze(&trace, &opts).expect("analyzes")
}

/// Every additive field of a report, by the identity of its row: functions,
/// edges, stacks and call paths.
fn additive_fields(r: &Report) -> BTreeMap<String, Vec<u64>> {
    let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut add = |k: String, v: Vec<u64>| {
        let e = m.entry(k).or_insert_with(|| vec![0; v.len()]);
        for (a, b) in e.iter_mut().zip(v) {
            *a += b;
        }
    };
    for f in &r.functions {
        add(
            format!("fn {:?}", f.key()),
            f.sums().fields().map(|(_, v)| v).collect(),
        );
    }
    for e in &r.edges {
        add(
            format!("edge {:?}->{:?}", e.caller_key(), e.callee_key()),
            e.sums().fields().map(|(_, v)| v).collect(),
        );
    }
    for s in &r.stacks {
        add(
            format!("stack {}", s.id),
            vec![
                s.running_ns,
                s.paused_ns,
                s.scheduled_ns,
                s.waiting_ns,
                s.switches_in,
                s.events,
            ],
        );
    }
    for p in &r.paths {
        // Frames are positions in this report's functions: name them.
        let names: Vec<String> = p
            .frames
            .iter()
            .map(|&i| r.functions[i as usize].function.clone())
            .collect();
        add(
            format!("path {}", names.join(";")),
            vec![p.ncalls, p.self_ns],
        );
    }
    // Rows that are all zeros are the same as no row.
    m.retain(|_, v| v.iter().any(|&x| x != 0));
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Time windows: for every clock, with wakes, ends and lost marks, the
    /// windows [a, b) and [b, c) add up to [a, c) in every additive field
    /// of every function, edge, stack and call path; a window holding the
    /// whole trace is the plain report; and the segment pass's replay of
    /// own stacks equals the replay pass's inside a window too.
    #[test]
    fn windows_add_up_for_every_additive_field(
        threads in 1u64..4, stacks in 0u64..4, functions in 1u8..5, steps in steps(),
        picks in proptest::collection::vec((any::<u16>(), any::<u8>(), any::<u8>()), 0..20),
        finals in finals(), end_picks in end_picks(),
        cuts in proptest::collection::vec(0u8..130, 0..4),
        bounds in (any::<u16>(), any::<u16>(), any::<u16>()),
    ) {
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let ended = with_ends(&lines, &stack_names(stacks), &finals, &end_picks);
        let lines = with_marks(&with_wakes(&ended, &picks), &cuts);
        let bytes = to_binary_direct(&lines);
        let end = lines.iter().map(|l| l.ts).max().unwrap_or(0) + 3;
        let mut cut = [bounds.0 as u64 % end, bounds.1 as u64 % end, bounds.2 as u64 % end];
        cut.sort_unstable();
        let [a, b, c] = cut;
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            let plain = run_window(&bytes, clock, None, None);
            let whole = run_window(&bytes, clock, Some(0), Some(end + 1));
            prop_assert_eq!(additive_fields(&whole), additive_fields(&plain), "whole window, clock {}", clock);
            prop_assert_eq!(&whole.functions, &plain.functions, "clock {}", clock);
            let ab = additive_fields(&run_window(&bytes, clock, Some(a), Some(b)));
            let bc = additive_fields(&run_window(&bytes, clock, Some(b), Some(c)));
            let ac = additive_fields(&run_window(&bytes, clock, Some(a), Some(c)));
            prop_assert_eq!(mtanalyze_testkit::sums::summed(&ab, &bc), ac.clone(), "[{}, {}) + [{}, {}), clock {}", a, b, b, c, clock);
            // Open ends: [0, b) + [b, end of trace).
            let to_b = additive_fields(&run_window(&bytes, clock, None, Some(b)));
            let from_b = additive_fields(&run_window(&bytes, clock, Some(b), None));
            prop_assert_eq!(mtanalyze_testkit::sums::summed(&to_b, &from_b), additive_fields(&plain), "split at {}, clock {}", b, clock);
            if clock != Clock::Gil {
                let trace = from_bytes("test", bytes.clone()).expect("loads");
                let opts = AnalyzeOptions {
                    clock: Some(clock),
                    from: Some(mtanalyze::TimeBound::At(a)),
                    to: Some(mtanalyze::TimeBound::At(c)),
                    ..Default::default()
                };
                let (fused, replayed) =
                    mtanalyze_testkit::fusion::fused_and_replayed_with(&trace, &opts).expect("analyzes");
                prop_assert_eq!(fused, replayed, "clock {}", clock);
            }
        }
    }
}

/// The worked examples of "Time windows" in `schemas/semantics.md`: the
/// same events, windows and numbers (rows: ncalls, primitive_calls,
/// tottime_ns, cumtime_ns, paused_ns; edges without paused).
#[test]
fn window_worked_examples() {
    use mtanalyze_testkit::worked_examples::{FIBER_HANDOFF, GIL_TURNS};
    type Rows = Vec<(&'static str, [u64; 5])>;
    /// Events, clock, from, to, function rows, the one edge's row.
    type Case = (&'static str, Clock, u64, u64, Rows, [u64; 4]);
    let cases: [Case; 4] = [
        (
            FIBER_HANDOFF,
            Clock::Stack,
            15,
            70,
            vec![
                ("handler", [0, 0, 5, 25, 30]),
                ("main", [0, 0, 10, 10, 15]),
                ("query", [1, 1, 20, 20, 30]),
            ],
            [1, 1, 20, 20],
        ),
        (
            FIBER_HANDOFF,
            Clock::Stack,
            0,
            15,
            vec![("handler", [1, 1, 5, 5, 0]), ("main", [1, 1, 10, 10, 5])],
            [0, 0, 0, 0],
        ),
        (
            FIBER_HANDOFF,
            Clock::Wall,
            15,
            70,
            vec![
                ("handler", [0, 0, 5, 55, 0]),
                ("main", [0, 0, 25, 25, 0]),
                ("query", [1, 1, 50, 50, 0]),
            ],
            [1, 1, 50, 50],
        ),
        (
            GIL_TURNS,
            Clock::Gil,
            20,
            45,
            vec![("io", [1, 1, 5, 5, 0]), ("work", [0, 0, 15, 20, 25])],
            [1, 1, 5, 5],
        ),
    ];
    for (text, clock, from, to, want, edge) in cases {
        let r = run_window(text.as_bytes(), clock, Some(from), Some(to));
        let got: Vec<(String, [u64; 5])> = r
            .functions
            .iter()
            .map(|f| {
                let row = [
                    f.ncalls,
                    f.primitive_calls,
                    f.tottime_ns,
                    f.cumtime_ns,
                    f.paused_ns,
                ];
                (f.function.clone(), row)
            })
            .collect();
        let want: Vec<(String, [u64; 5])> = want
            .into_iter()
            .map(|(n, row)| (n.to_owned(), row))
            .collect();
        assert_eq!(got, want, "{clock} [{from}, {to})");
        let edges: Vec<[u64; 4]> = r
            .edges
            .iter()
            .map(|e| [e.ncalls, e.primitive_calls, e.tottime_ns, e.cumtime_ns])
            .collect();
        let want_edges = if edge == [0; 4] { vec![] } else { vec![edge] };
        assert_eq!(edges, want_edges, "{clock} [{from}, {to}) edges");
        let w = r.trace.window.expect("the report names its window");
        assert_eq!((w.from_ns, w.to_ns), (from, to));
    }
}

/// A trace whose own stack's replay in the segment pass is given up half
/// way (a function the metadata does not name): the sequential analysis
/// of many traces must start that trace again, not keep what it added.
fn trace_with_a_stranger_midway() -> Vec<u8> {
    trace_with_a_stranger(|f, stranger, co| {
        vec![
            (10, EventKind::Enter(f)),
            (20, EventKind::Enter(f)),
            (30, EventKind::Switch(co)),
            (40, EventKind::Enter(f)),
            (50, EventKind::Switch(StackId::OWN)),
            (60, EventKind::Enter(stranger)),
            (70, EventKind::Exit(stranger)),
            (80, EventKind::Exit(f)),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// `analyze_each` analyzes each small trace on one thread, every stack
    /// into one tally that its worker reuses from trace to trace: each
    /// report is still exactly what `analyze` gives for its trace, under
    /// any clock, call-path mode and window, with damaged traces among
    /// them (stale state of one trace would show in the next).
    #[test]
    fn traces_analyzed_in_a_row_with_reused_tables_equal_analyze(
        traces in proptest::collection::vec((1u64..4, 0u64..4, 1u8..5, steps(), any::<bool>()), 2..10),
        clock in prop_oneof![Just(Clock::Stack), Just(Clock::Gil), Just(Clock::Wall)],
        paths in prop_oneof![
            Just(mtanalyze::PathMode::Off),
            Just(mtanalyze::PathMode::Merged),
            Just(mtanalyze::PathMode::PerStack),
        ],
        window in prop_oneof![Just((None, None)), (0u64..300, 0u64..600).prop_map(|(a, b)| (Some(a), Some(a + b)))],
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static CASE: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mtanalyze-reused-{}-{}",
            std::process::id(),
            CASE.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut files = Vec::new();
        for (i, (t, s, f, steps, stranger)) in traces.iter().enumerate() {
            let bytes = if *stranger && i % 3 == 1 {
                trace_with_a_stranger_midway()
            } else {
                to_binary_direct(&lines_with_ends(*t, *s, *f, steps))
            };
            let p = dir.join(format!("{i}.bin"));
            std::fs::write(&p, bytes).unwrap();
            files.push(p);
        }
        let opts = AnalyzeOptions {
            clock: Some(clock),
            paths,
            from: window.0.map(mtanalyze::TimeBound::At),
            to: window.1.map(mtanalyze::TimeBound::At),
            ..Default::default()
        };
        let want: Vec<Result<Report, String>> = files
            .iter()
            .map(|p| {
                let trace = mtanalyze::load(p).map_err(|e| e.to_string())?;
                analyze(&trace, &opts).map_err(|e| e.to_string())
            })
            .collect();
        // Two rayon threads: from four traces on, each is analyzed on one
        // thread with its worker's tables (fewer go the parallel way),
        // whatever the machine's cores.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut full = Vec::new();
        let r: Result<_, ()> = pool.install(|| mtanalyze::analyze_many(&files, &opts, mtanalyze::ManyTraces::Report, |_, _, r| {
            full.push(r.cloned().map_err(|e| e.to_string()));
            Ok(())
        }));
        prop_assert!(r.is_ok());
        let mut reported = Vec::new();
        let r: Result<_, ()> = pool.install(|| mtanalyze::analyze_many(&files, &opts, mtanalyze::ManyTraces::MergeAndReport, |_, _, r| {
            reported.push(r.cloned().map_err(|e| e.to_string()));
            Ok(())
        }));
        prop_assert!(r.is_ok());
        let _ = std::fs::remove_dir_all(&dir);
        prop_assert_eq!(&full, &want);
        prop_assert_eq!(&reported, &want);
    }
}

/// Found by `ends_engine_equals_literal_reference` (ninth session) and
/// shown here with wakes in place of its ends, so it predates them: a
/// thread's last event goes back in time (repair 1) at a timestamp another
/// thread also has, under `gil`. The contract (and the engine, whose
/// converter gives a clamped event its thread's previous tick) puts it
/// right after its thread's previous event; the reference ordered it by
/// its own line, after the other thread's event, and gave
/// 1 ns less (here: `a` 4 ns where the engine has 5, 101..105 and
/// 105..106). The reference now keeps the previous event's place.
#[test]
fn gil_with_clamped_wakes_at_the_end_equals_the_reference() {
    let text = include_str!("regressions/gil-clamped-wakes.jsonl");
    let lines = reference::parse_jsonl(text);
    let want = reference::reference(&lines, RefClock::Gil, None);
    let got = as_ref_report(&run_jsonl(text, Clock::Gil));
    assert_eq!(got, want);
}

/// Every report the streamed analysis (`stream.rs`) gives for `bytes`
/// under `opts`, in steps of a few events (a chunk a thread, in files of
/// small chunks) up to one step for the whole trace, equals the batch
/// analysis's; so does it with the stacks only counted
/// (`StackRows::Counted`), which is the batch report without its stack
/// rows, and with the rows handed to a sink (`analyze_each_stack`), which
/// gets the batch report's rows. Returns whether it streamed at all (it declines input it does
/// not handle, and stops where an end it judged early turns out not to
/// count: `analyze` then takes the batch way).
fn streamed_equals_batched(bytes: &[u8], opts: &AnalyzeOptions) -> Result<bool, TestCaseError> {
    let trace = from_bytes("test", bytes.to_vec()).expect("loads");
    let batch = mtanalyze::testing::analyze_batched(&trace, opts).expect("analyzes");
    let counted_opts = AnalyzeOptions {
        stack_rows: StackRows::Counted,
        ..opts.clone()
    };
    let counted = Report {
        stacks: Vec::new(),
        stack_rows: StackRows::Counted,
        ..batch.clone()
    };
    let mut streamed = false;
    for step in [1, 3, 40, 1 << 20] {
        if let Some(r) =
            mtanalyze::testing::analyze_streamed_with(&trace, opts, step).expect("analyzes")
        {
            prop_assert_eq!(&r, &batch, "step {}", step);
            streamed = true;
        }
        let r = mtanalyze::testing::analyze_streamed_with(&trace, &counted_opts, step)
            .expect("analyzes");
        if let Some(r) = r {
            prop_assert_eq!(&r, &counted, "rows counted, step {}", step);
        }
        let mut sink = Collect(Vec::new());
        let r = mtanalyze::testing::analyze_with_sink_streamed(&trace, opts, step, &mut sink)
            .expect("analyzes");
        let handed = Report {
            stack_rows: StackRows::Handed,
            ..counted.clone()
        };
        prop_assert_eq!(&r, &handed, "rows handed, step {}", step);
        sink.0.sort_by_key(|s| s.id);
        prop_assert_eq!(&sink.0, &batch.stacks, "the rows handed, step {}", step);
    }
    // `--format json`: the rows handed to a sorter that spills every few
    // rows to disk and merges in tiers of 3 give the batch report's JSON.
    let mut sorted = mtanalyze::view::SortedRows::with_max_runs(1000, 3);
    let r = mtanalyze::testing::analyze_with_sink_streamed(&trace, opts, 3, &mut sorted)
        .expect("analyzes");
    prop_assert!(sorted.spill_error().is_none());
    let rows = sorted.into_sorted().expect("merges");
    let mut json = Vec::new();
    let view = mtanalyze::view::ReportView::from(&r);
    mtanalyze::render::json::report_with_rows(&mut json, &view, rows).expect("writes");
    let mut want = Vec::new();
    let view = mtanalyze::view::ReportView::from(&batch);
    mtanalyze::render::json::report(&mut want, &view).expect("writes");
    prop_assert!(json == want, "JSON of the rows sorted on disk");
    prop_assert_eq!(&analyze(&trace, opts).expect("analyzes"), &batch);
    let r = mtanalyze::testing::analyze_batched(&trace, &counted_opts).expect("analyzes");
    prop_assert_eq!(&r, &counted, "rows counted, batch");
    Ok(streamed)
}

/// Damages the events of `bytes` that `picks` choose (a chunk slot with
/// events, then an event in it); returns how many it damaged. A 16-byte
/// event gets the kind 0, which no event has; a compact one the tag 0 and
/// the kind byte 0, which is damage at an event's start.
fn damage_events(bytes: &mut [u8], picks: &[(u16, u16)]) -> usize {
    let file = mtrace_format::TraceFile::parse(bytes).expect("parses");
    // Each chunk's events' file offsets.
    let chunks: Vec<Vec<usize>> = (0..file.chunk_slots())
        .filter_map(|i| file.chunk(i).ok().flatten())
        .map(|c| match c.compact_events(Vec::new()) {
            Some(mut walk) => {
                let mut at = Vec::new();
                loop {
                    let offset = walk.offset() as usize;
                    if walk.next_raw().is_none() {
                        break at;
                    }
                    at.push(offset);
                }
            }
            None => (0..c.event_count())
                .map(|e| c.events_offset() as usize + e * 16)
                .collect(),
        })
        .filter(|events| !events.is_empty())
        .collect();
    let compact = file.header().version >= 4;
    if chunks.is_empty() {
        return 0;
    }
    let mut at: Vec<usize> = picks
        .iter()
        .map(|&(c, e)| {
            let events = &chunks[c as usize % chunks.len()];
            events[e as usize % events.len()]
        })
        .collect();
    at.sort_unstable();
    at.dedup();
    for &a in &at {
        if compact {
            bytes[a] = 0;
            bytes[a + 1] = 0;
        } else {
            // The kind is the high nibble of the little-endian head's last byte.
            bytes[a + 7] &= 0x0F;
        }
    }
    at.len()
}

/// `lines` with a `lost` mark before the lines `at` choose (modulo their
/// number): the thread's events go on after it, as when a ring-mode
/// recorder got a chunk again.
fn with_mid_marks(lines: &[reference::Line], at: &[u16]) -> Vec<reference::Line> {
    if lines.is_empty() {
        return Vec::new();
    }
    let marked: BTreeSet<usize> = at.iter().map(|&a| a as usize % lines.len()).collect();
    let mut out = Vec::with_capacity(lines.len() + marked.len());
    for (i, l) in lines.iter().enumerate() {
        if marked.contains(&i) {
            out.push(reference::Line {
                tid: l.tid,
                ts: l.ts,
                ev: reference::Ev::Lost,
            });
        }
        out.push(l.clone());
    }
    out
}

/// Empties the chunk slots of `bytes` whose bit `i % 64` of `mask` is set,
/// as a ring that wrapped over them would: their events are lost.
fn drop_chunks(bytes: &mut [u8], mask: u64) {
    for at in chunks_in_mask(bytes, mask) {
        let state = at + mtrace_format::layout::C_STATE;
        bytes[state..state + 8].fill(0);
    }
}

/// [`generate_many`]'s tasks (with their ends) in (ts, tid) order: the
/// order a binary trace gives equal timestamps of different threads.
fn tasks_in_binary_order(
    threads: u64,
    tasks: u64,
    functions: u8,
    steps: &[(u8, u8, u8)],
) -> Vec<reference::Line> {
    let mut lines = generate_many(threads, tasks, functions, steps, true).lines;
    lines.sort_by_key(|l| (l.ts, l.tid));
    lines
}

/// Under every clock, with `window`, the compact file `compact` gives the
/// report of the 16-byte file `fixed` it was converted from: functions,
/// edges, stacks, and each kind of warning's count but `but` (the byte
/// offsets the warnings name differ).
fn compact_reports_as_16_byte(
    fixed: &[u8],
    compact: &[u8],
    window: (u8, u8),
    but: Option<&str>,
) -> Result<(), TestCaseError> {
    for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
        let opts = stream_options(clock, window);
        let [fixed, compact] = [fixed, compact].map(|b| {
            analyze(&from_bytes("test", b.to_vec()).expect("loads"), &opts).expect("analyzes")
        });
        prop_assert_eq!(&fixed.functions, &compact.functions, "clock {}", clock);
        prop_assert_eq!(&fixed.edges, &compact.edges, "clock {}", clock);
        prop_assert_eq!(&fixed.stacks, &compact.stacks, "clock {}", clock);
        let kinds = |r: &Report| -> Vec<(String, u64)> {
            r.warnings
                .iter()
                .filter(|w| Some(w.kind.as_str()) != but)
                .map(|w| (w.kind.clone(), w.count))
                .collect()
        };
        prop_assert_eq!(kinds(&fixed), kinds(&compact), "clock {}", clock);
    }
    Ok(())
}

/// Under every clock, `bytes` streams ([`streamed_equals_batched`]: to the
/// batch analysis's report) with `window`; `what` names the trace in the
/// failure.
fn streams_to_the_batch_report(
    bytes: &[u8],
    window: (u8, u8),
    what: &str,
) -> Result<(), TestCaseError> {
    for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
        let streamed = streamed_equals_batched(bytes, &stream_options(clock, window))?;
        prop_assert!(streamed, "{} streams (clock {})", what, clock);
    }
    Ok(())
}

/// The file offsets of the chunks of `bytes` in the slots whose bit
/// `i % 64` of `mask` is set.
fn chunks_in_mask(bytes: &[u8], mask: u64) -> Vec<usize> {
    let file = mtrace_format::TraceFile::parse(bytes).expect("parses");
    (0..file.chunk_slots())
        .filter(|i| mask >> (i % 64) & 1 == 1)
        .filter_map(|i| file.chunk(i).ok().flatten())
        .map(|c| c.offset as usize)
        .collect()
}

/// A compact chunk whose header counts more events than it holds (a
/// false count, or events the damage took) ends where its events end: the
/// damage is reported at that byte offset, the events before it are all
/// read (the report is the true count's, but for the restart from the
/// next chunk's snapshot and the warning), and the stream agrees with the
/// batch. A count with fewer events reads that many, as a committed
/// length reads that many bytes.
#[test]
fn a_false_count_in_a_compact_chunk_is_damage_where_its_events_end() {
    let steps = one_trace_of_many_stacks();
    let lines = tasks_in_binary_order(3, 100, 4, &steps);
    let whole = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
    let file = mtrace_format::TraceFile::parse(&whole).expect("parses");
    let compact = mtrace_format::convert::compact(&file)
        .expect("converts")
        .bytes;
    let file = mtrace_format::TraceFile::parse(&compact).expect("parses");
    // A chunk in the middle of the file, and the offset where its events end.
    let chunks: Vec<_> = (0..file.chunk_slots())
        .filter_map(|i| file.chunk(i).ok().flatten())
        .collect();
    assert!(chunks.len() > 4, "{} chunks", chunks.len());
    let chunk = &chunks[chunks.len() / 2];
    let count = chunk.released_count().expect("a count");
    let header = chunk.offset as usize + mtrace_format::layout::C_EVENTS_PLUS_ONE;
    let events_end = chunk.events_offset() + chunk.event_bytes().len() as u64;
    drop(file);
    let with_count = |n: u32| {
        let mut bytes = compact.clone();
        bytes[header..header + 4].copy_from_slice(&(n + 1).to_le_bytes());
        bytes
    };
    let opts = stream_options(Clock::Stack, (0, 0));
    let report = |bytes: &[u8]| {
        analyze(&from_bytes("test", bytes.to_vec()).expect("loads"), &opts).expect("analyzes")
    };
    let damage = |r: &Report| -> Vec<(u64, String)> {
        r.warnings
            .iter()
            .filter(|w| w.kind == "damaged_event")
            .map(|w| (w.count, w.first.clone()))
            .collect()
    };
    let truth = report(&compact);
    assert!(damage(&truth).is_empty());

    let more = with_count(count + 3);
    let r = report(&more);
    assert_eq!(damage(&r), vec![(1, format!("byte {events_end}"))]);
    assert_eq!(r.trace.events, truth.trace.events);
    for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
        let streamed = streamed_equals_batched(&more, &stream_options(clock, (0, 0)));
        assert!(streamed.expect("equal"), "clock {clock}");
    }

    // Fewer: the last three events of the chunk are not read, the next
    // chunk goes on from them as the thread's stream (nothing is missing
    // to restart from), which the repairs then see.
    let fewer = report(&with_count(count - 3));
    assert!(damage(&fewer).is_empty());
    assert_eq!(fewer.trace.events, truth.trace.events - 3);
}

/// Flags chunk slot `i` of `bytes` `restart` where bit `i % 64` of `mask`
/// is set; returns how many it flagged.
fn flag_restarts(bytes: &mut [u8], mask: u64) -> usize {
    let offsets = chunks_in_mask(bytes, mask);
    for at in &offsets {
        bytes[at + mtrace_format::layout::C_FLAGS] |=
            mtrace_format::layout::CHUNK_FLAG_RESTART as u8;
    }
    offsets.len()
}

/// A `--stack` selection from `chosen`: stack names of `names`, stack
/// keys and thread keys (some naming no stack of the trace).
fn selected_stacks(chosen: &[u8], names: &[String]) -> Vec<String> {
    chosen
        .iter()
        .map(|&c| match c % 3 {
            0 => names[c as usize % names.len()].clone(),
            1 => format!("stack:{}", c / 3 % 8),
            _ => format!("thread:{}", c / 3 % 4),
        })
        .collect()
}

/// A sink that keeps every row handed to it.
struct Collect(Vec<mtanalyze::StackStats>);

impl mtanalyze::StackSink for Collect {
    fn row(&mut self, row: mtanalyze::StackStats) {
        self.0.push(row);
    }

    fn restart(&mut self) {
        self.0.clear();
    }
}

/// Options for the streamed tests: a clock and, from `window`, no time
/// window or one of the trace's.
fn stream_options(clock: Clock, window: (u8, u8)) -> AnalyzeOptions {
    let (from, to) = match window {
        (0, _) => (None, None),
        (a, b) => (
            Some(u64::from(a % 40)),
            Some(u64::from(a % 40) + u64::from(b)),
        ),
    };
    AnalyzeOptions {
        clock: Some(clock),
        from: from.map(mtanalyze::TimeBound::At),
        to: to.map(mtanalyze::TimeBound::At),
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Many short tasks migrating between threads, returning, abandoned
    /// with frames open, dropped: streamed in steps of a chunk, the report
    /// is the batch analysis's, under every clock, with or without a time
    /// window. These traces are what a recorder writes (no end is
    /// followed by a run), so they always stream.
    #[test]
    fn many_short_stacks_streamed_equal_batched(
        threads in 2u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        window in (any::<u8>(), any::<u8>()),
    ) {
        let lines = tasks_in_binary_order(threads, tasks, functions, &steps);
        prop_assume!(!lines.is_empty());
        for bytes in [
            to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE),
            to_binary_direct(&lines),
        ] {
            streams_to_the_batch_report(&bytes, window, "a recorder's trace")?;
        }
    }

    /// The same traces with damaged events, 16-byte and compact: each
    /// damaged event ends its chunk (a 16-byte one where the segment pass
    /// meets it; a compact one there too when the chunk's header gives
    /// its count, else where the decode counting the chunk's events
    /// does), and the thread restarts from its next chunk's snapshot. The
    /// stream goes on past the damage as the batch does, to the batch's
    /// report; the compact file damaged at the same events gives the
    /// 16-byte one's report (but for the damage's byte offsets), and the
    /// same report, byte offsets and all, whether its chunks carry their
    /// counts or not.
    #[test]
    fn damaged_traces_streamed_equal_batched(
        threads in 1u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        window in (any::<u8>(), any::<u8>()),
        picks in proptest::collection::vec((any::<u16>(), any::<u16>()), 1..4),
        flagged in any::<u64>(),
    ) {
        let lines = tasks_in_binary_order(threads, tasks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let mut whole = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        // About one chunk in eight flagged `restart` (after a pause),
        // which a damaged chunk before it must not hide.
        flag_restarts(&mut whole, flagged & flagged >> 1 & flagged >> 2);
        let file = mtrace_format::TraceFile::parse(&whole).expect("parses");
        let compact = mtrace_format::convert::compact(&file).expect("converts").bytes;
        let mut damaged = Vec::new();
        for mut bytes in [whole, compact] {
            let n = damage_events(&mut bytes, &picks);
            prop_assert!(n > 0);
            streams_to_the_batch_report(&bytes, window, "a damaged trace")?;
            damaged.push((n, bytes));
        }
        prop_assert_eq!(damaged[0].0, damaged[1].0, "the same events damaged");
        compact_reports_as_16_byte(&damaged[0].1, &damaged[1].1, window, None)?;
        let counted = &damaged[1].1;
        prop_assert!(released_counts(counted) > 0, "the converter stores counts");
        let walked = without_released_counts(counted);
        prop_assert_eq!(released_counts(&walked), 0);
        streams_to_the_batch_report(&walked, window, "a damaged trace, counts walked")?;
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            let opts = stream_options(clock, window);
            let [a, b] = [counted, &walked].map(|b| {
                analyze(&from_bytes("test", b.to_vec()).expect("loads"), &opts).expect("analyzes")
            });
            prop_assert_eq!(a, b, "clock {}", clock);
        }
    }

    /// The same traces with ticks that jump ahead, far (as a damaged tick
    /// delta makes them: every later event of the thread clamps to the
    /// jump, so its later stretches begin and end at that one tick, and a
    /// compact chunk's are replayed from the `switch` that opens them
    /// without its own tick) or a little (the clock soon passes the jump
    /// again: the stretches clamped at their start are not flat). The
    /// stream gives the batch's report, and the compact file the 16-byte
    /// one's (but for `clock_backwards`: the compact encoding stores a
    /// tick that goes back inside a chunk as the one before it).
    #[test]
    fn clock_jumps_streamed_equal_batched(
        threads in 1u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        window in (any::<u8>(), any::<u8>()),
        jumps in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..4),
    ) {
        let mut lines = tasks_in_binary_order(threads, tasks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let n = lines.len();
        for (at, by) in jumps {
            lines[at as usize % n].ts += if by < 64 { 1 << 40 } else { u64::from(by) * 8 };
        }
        let whole = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        let file = mtrace_format::TraceFile::parse(&whole).expect("parses");
        let compact = mtrace_format::convert::compact(&file).expect("converts").bytes;
        for bytes in [&whole, &compact] {
            streams_to_the_batch_report(bytes, window, "a trace whose clock jumps")?;
        }
        compact_reports_as_16_byte(&whole, &compact, window, Some("clock_backwards"))?;
    }

    /// Functions the metadata does not name, used by events and by the
    /// snapshots threads restart from (chunks flagged `restart`): the
    /// stream numbers them as its steps meet them, to the batch's report
    /// (the batch numbers them after its passes), and never gives the
    /// trace back for them; both encodings.
    #[test]
    fn unnamed_functions_streamed_equal_batched(
        threads in 1u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        window in (any::<u8>(), any::<u8>()), unnamed in 1u8..32, flagged in any::<u64>(),
    ) {
        let lines = tasks_in_binary_order(threads, tasks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let mut whole = to_binary_unnamed(&lines, mtrace_format::layout::MIN_CHUNK_SIZE, unnamed);
        // About one chunk in eight restarts from its snapshot.
        flag_restarts(&mut whole, flagged & flagged >> 1 & flagged >> 2);
        let file = mtrace_format::TraceFile::parse(&whole).expect("parses");
        let compact = mtrace_format::convert::compact(&file).expect("converts").bytes;
        let used = (0..functions.min(5)).any(|i| unnamed & 1 << i != 0);
        for bytes in [whole, compact] {
            streams_to_the_batch_report(&bytes, window, "a trace with unnamed functions")?;
            let opts = stream_options(Clock::Stack, (0, 0));
            let r = analyze(&from_bytes("test", bytes).expect("loads"), &opts).expect("analyzes");
            let unknown = r.warnings.iter().any(|w| w.kind == "unknown_function");
            prop_assert_eq!(unknown, used, "unknown functions warned of");
        }
    }

    /// The same traces with `lost` marks (threads whose events end at one,
    /// and marks followed by more events, as a ring-mode recorder writes
    /// them) and with chunks lost: the stream judges them as the batch does
    /// (a stack paused when a thread's events ended at a mark ends at the
    /// mark, whether its `end` is judged during a step or at the end), to
    /// the batch's report, and never gives the trace back for them.
    #[test]
    fn lost_marks_and_chunks_streamed_equal_batched(
        threads in 2u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        window in (any::<u8>(), any::<u8>()),
        cuts in proptest::collection::vec(0u8..130, 4),
        marks in proptest::collection::vec(any::<u16>(), 0..4),
        dropped in any::<u64>(),
    ) {
        let lines = tasks_in_binary_order(threads, tasks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let lines = with_mid_marks(&with_marks(&lines, &cuts), &marks);
        let mut bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        // About one chunk in eight.
        drop_chunks(&mut bytes, dropped & dropped >> 1 & dropped >> 2);
        streams_to_the_batch_report(&bytes, window, "a trace with losses")?;
    }

    /// The same traces with call paths, merged or per stack, recursion
    /// collapsed or not, and with `lost` marks followed by more events
    /// (threads restarting from a snapshot): the stream gives the batch's
    /// paths. A stack set aside between steps keeps its own paths until it
    /// finishes (its open frames point into them), own stacks are replayed
    /// in the lanes (the segment pass's replay keeps no paths), and each
    /// per-stack root is labelled with its stack.
    #[test]
    fn call_paths_streamed_equal_batched(
        threads in 2u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        window in (any::<u8>(), any::<u8>()),
        marks in proptest::collection::vec(any::<u16>(), 0..3),
        per_stack in any::<bool>(),
        collapse in prop_oneof![
            Just(None),
            Just(Some(mtanalyze::RecursionCollapse::Direct)),
            Just(Some(mtanalyze::RecursionCollapse::All)),
        ],
    ) {
        let lines = tasks_in_binary_order(threads, tasks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let lines = with_mid_marks(&lines, &marks);
        let bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        let paths = match per_stack {
            true => mtanalyze::PathMode::PerStack,
            false => mtanalyze::PathMode::Merged,
        };
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            let opts = AnalyzeOptions {
                paths,
                collapse_recursion: collapse,
                ..stream_options(clock, window)
            };
            let streamed = streamed_equals_batched(&bytes, &opts)?;
            prop_assert!(streamed, "call paths stream (clock {})", clock);
            let report = analyze(&from_bytes("test", bytes.clone()).expect("loads"), &opts)
                .expect("analyzes");
            prop_assert!(!report.paths.is_empty() || report.functions.iter().all(|f| f.ncalls == 0));
        }
    }

    /// The same traces with a selection of stacks, by stack or by
    /// thread: they still stream, to the batch's report.
    #[test]
    fn many_stacks_selected_streamed_equal_batched(
        threads in 2u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        window in (any::<u8>(), any::<u8>()),
        chosen in proptest::collection::vec(any::<u8>(), 0..4),
        by_thread in proptest::collection::vec(1u64..5, 0..3),
    ) {
        prop_assume!(!chosen.is_empty() || !by_thread.is_empty());
        let lines = tasks_in_binary_order(threads, tasks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        let names: Vec<String> = (0..tasks).map(|t| format!("task-{t}")).collect();
        let selection = selected_stacks(&chosen, &names);
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            let opts = AnalyzeOptions {
                stacks: selection.clone(),
                threads: by_thread.clone(),
                ..stream_options(clock, window)
            };
            let streamed = streamed_equals_batched(&bytes, &opts)?;
            prop_assert!(streamed, "a selection streams (clock {})", clock);
        }
    }

    /// The same traces with chunks flagged `restart`, as the recorder
    /// flags a thread's first chunk after a pause (none missing; a
    /// thread's first chunk too, as after an armed start): the stream
    /// restarts the thread from the snapshot as the batch does, to the
    /// batch's report, and never gives the trace back for it.
    #[test]
    fn restarts_after_pauses_streamed_equal_batched(
        threads in 2u64..=4, tasks in 10u64..300, functions in 1u8..5, steps in many_steps(),
        window in (any::<u8>(), any::<u8>()), flagged in any::<u64>(),
    ) {
        let lines = tasks_in_binary_order(threads, tasks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let mut bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        prop_assume!(flag_restarts(&mut bytes, flagged) > 0);
        streams_to_the_batch_report(&bytes, window, "a paused recording's trace")?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Small traces with wakes and with ends anywhere (mostly ends that do
    /// not count: while the stack runs, before it runs again, twice, of a
    /// stack that never ran): wherever the stream goes, its report is the
    /// batch analysis's; where it stops, `analyze` still is.
    #[test]
    fn odd_ends_and_wakes_streamed_equal_batched(
        threads in 1u64..4, stacks in prop_oneof![1u64..4, 20u64..40], functions in 1u8..5,
        steps in steps(),
        finals in finals(), picks in end_picks(), wakes in end_picks(),
        window in (any::<u8>(), any::<u8>()),
    ) {
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let lines = with_ends_and_wakes(&lines, &stack_names(stacks), &finals, &picks, &wakes);
        let bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            streamed_equals_batched(&bytes, &stream_options(clock, window))?;
        }
    }

    /// The same with a selection of stacks, by stack (`--stack`: stack
    /// names, stack and thread keys) and by thread (`--thread`: the
    /// stacks a selected thread ran), with and without per-stack call
    /// paths: the stream does not replay the stacks it leaves out, holds
    /// those no selected thread ran yet, and judges their ends as the
    /// batch does (an ignored end is a warning either way), to the
    /// batch's report.
    #[test]
    fn stacks_selected_streamed_equal_batched(
        threads in 1u64..4, stacks in prop_oneof![1u64..4, 20u64..40], functions in 1u8..5,
        steps in steps(),
        finals in finals(), picks in end_picks(), wakes in end_picks(),
        window in (any::<u8>(), any::<u8>()),
        chosen in proptest::collection::vec(any::<u8>(), 0..4),
        by_thread in proptest::collection::vec(1u64..5, 0..3),
        per_stack in any::<bool>(),
    ) {
        prop_assume!(!chosen.is_empty() || !by_thread.is_empty());
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let names = stack_names(stacks);
        let lines = with_ends_and_wakes(&lines, &names, &finals, &picks, &wakes);
        let bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        let selection = selected_stacks(&chosen, &names);
        let paths = match per_stack {
            true => mtanalyze::PathMode::PerStack,
            false => mtanalyze::PathMode::Off,
        };
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            let opts = AnalyzeOptions {
                stacks: selection.clone(),
                threads: by_thread.clone(),
                paths,
                ..stream_options(clock, window)
            };
            streamed_equals_batched(&bytes, &opts)?;
        }
    }

    /// The same with `lost` marks, ending threads' events or followed by
    /// more: ends judged against stretches a mark ended, and stacks paused
    /// when a thread's events ended, streamed or not.
    #[test]
    fn odd_ends_and_lost_marks_streamed_equal_batched(
        threads in 1u64..4, stacks in prop_oneof![1u64..4, 20u64..40], functions in 1u8..5,
        steps in steps(),
        finals in finals(), picks in end_picks(), wakes in end_picks(),
        window in (any::<u8>(), any::<u8>()),
        cuts in proptest::collection::vec(0u8..130, 3),
        marks in proptest::collection::vec(any::<u16>(), 0..3),
    ) {
        let lines = ordered_lines(threads, stacks, functions, &steps);
        prop_assume!(!lines.is_empty());
        let lines = with_ends_and_wakes(&lines, &stack_names(stacks), &finals, &picks, &wakes);
        let lines = with_mid_marks(&with_marks(&lines, &cuts), &marks);
        let bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
            streamed_equals_batched(&bytes, &stream_options(clock, window))?;
        }
    }
}

/// Found by the fuzzer (`binary`): the sample trace of one thread whose
/// file filled, cut at 100 KiB, with one event damaged (its kind byte
/// 0xF0, no kind). The thread restarts from its next chunk's snapshot.
/// The batch replays a one-thread `gil` trace under `stack` (the same
/// report, cheaper) and the stream replayed it under `gil`, whose running
/// stretch before a restarted chunk starts differently: 40 ns paused in
/// one and not the other. Both engines now choose the replay clock one
/// way, and a restart after damage keeps the one-thread trace under
/// `stack` in both encodings (the decode sees damage only in compact
/// ones; `damaged_traces_streamed_equal_batched` compares the two).
#[test]
fn a_damaged_one_thread_trace_streams_to_the_batch_report_under_every_clock() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sample-traces/workload-full.bin");
    let mut bytes = std::fs::read(path).expect("the sample trace");
    bytes.truncate(102_400);
    bytes[75_262] = 0xF0;
    for clock in [Clock::Stack, Clock::Gil, Clock::Wall] {
        let opts = stream_options(clock, (0, 0));
        let streamed = streamed_equals_batched(&bytes, &opts).expect("stream = batch");
        assert!(streamed, "clock {clock}");
    }
}

/// Trace `k` of [`streamed_tests_stream_and_stop`], in (ts, tid) order:
/// many stacks on two threads, each waiting long between its runs, so an
/// end while it waits is judged before it runs again.
fn ends_judged_early(k: u32) -> Vec<reference::Line> {
    let steps = fixed_steps(k, 2000);
    let lines = ordered_lines(2, 40, 3, &steps);
    let finals = [(k as u8, k as u8, 0), (k as u8 + 1, 0, 1)];
    let picks: Vec<(u16, u8, u8)> = (0..(k % 3))
        .map(|j| (((k + 1) * (j + 3) * 97) as u16, j as u8, (k + j) as u8))
        .collect();
    let mut lines = with_ends(&lines, &stack_names(40), &finals, &picks);
    lines.sort_by_key(|l| (l.ts, l.tid));
    lines
}

/// The inputs of the streamed tests do stream, in many steps, and also
/// stop the stream: some ends that the stream judged early turn out not to
/// count.
#[test]
fn streamed_tests_stream_and_stop() {
    let (mut streamed, mut stopped) = (0, 0);
    for k in 0..64u32 {
        let bytes =
            to_binary_in_chunks(&ends_judged_early(k), mtrace_format::layout::MIN_CHUNK_SIZE);
        let trace = from_bytes("test", bytes).expect("loads");
        let opts = stream_options(Clock::Stack, (0, 0));
        match mtanalyze::testing::analyze_streamed_with(&trace, &opts, 1).expect("analyzes") {
            Some(_) => streamed += 1,
            None => stopped += 1,
        }
    }
    eprintln!("{streamed} traces streamed, {stopped} stopped");
    assert!(
        streamed >= 8 && stopped >= 8,
        "{streamed} streamed, {stopped} stopped"
    );
}

/// The same traces with functions the metadata does not name: a stream
/// that numbered some of them and then stops (an end it judged early does
/// not count) hands the batch a table that has them, and the batch's
/// report is still the batch's own (the `unknown_function` count too).
#[test]
fn a_stream_that_stops_after_numbering_unnamed_functions_leaves_the_batch_report() {
    let (mut stopped, mut unknown) = (0, 0);
    for k in 0..64u32 {
        let lines = ends_judged_early(k);
        let bytes = to_binary_unnamed(&lines, mtrace_format::layout::MIN_CHUNK_SIZE, 0b101);
        let trace = from_bytes("test", bytes.clone()).expect("loads");
        let opts = stream_options(Clock::Stack, (0, 0));
        if mtanalyze::testing::analyze_streamed_with(&trace, &opts, 1)
            .expect("analyzes")
            .is_none()
        {
            stopped += 1;
        }
        let batch = mtanalyze::testing::analyze_batched(&trace, &opts).expect("analyzes");
        unknown += batch.warnings.iter().any(|w| w.kind == "unknown_function") as u32;
        streamed_equals_batched(&bytes, &opts).expect("the batch's report");
    }
    assert!(
        stopped >= 8 && unknown == 64,
        "{stopped} stopped, {unknown} with unknown functions"
    );
}

/// Two ends of a stack at the same time, by two threads, in either order
/// of lines and in steps of any size: the one of the later thread counts
/// (as `ends.rs` meets them, thread after thread), the other is the
/// warning, streamed or not. Thread 1 is busy before its end, so in small
/// steps thread 2's end is met first.
#[test]
fn equal_ends_by_two_threads_keep_the_later_thread() {
    for (first, second) in [(1, 2), (2, 1)] {
        let mut text = String::from(
            r#"{"ts": 0, "tid": 1, "ev": "switch", "stack": "t"}
{"ts": 0, "tid": 1, "ev": "enter", "fn": "f"}
{"ts": 10, "tid": 1, "ev": "switch", "stack": null}
"#,
        );
        for _ in 0..200 {
            text.push_str(
                "{\"ts\": 15, \"tid\": 1, \"ev\": \"enter\", \"fn\": \"h\"}\n\
                 {\"ts\": 15, \"tid\": 1, \"ev\": \"exit\", \"fn\": \"h\"}\n",
            );
        }
        text.push_str(&format!(
            r#"{{"ts": 20, "tid": {first}, "ev": "end", "stack": "t"}}
{{"ts": 20, "tid": {second}, "ev": "end", "stack": "t"}}
{{"ts": 50, "tid": 1, "ev": "enter", "fn": "g"}}
{{"ts": 50, "tid": 2, "ev": "enter", "fn": "g"}}"#
        ));
        let lines = reference::parse_jsonl(&text);
        let bytes = to_binary_in_chunks(&lines, mtrace_format::layout::MIN_CHUNK_SIZE);
        let trace = from_bytes("test", bytes).expect("loads");
        let opts = stream_options(Clock::Stack, (0, 0));
        let batch = mtanalyze::testing::analyze_batched(&trace, &opts).expect("analyzes");
        let w = batch
            .warnings
            .iter()
            .find(|w| w.kind == "end_ignored")
            .expect("a warning");
        assert_eq!((w.count, w.first.as_str()), (1, "thread 1 at 20 ns"));
        assert!(batch.stacks.iter().any(|s| s.ended));
        for step in [1, 1 << 20] {
            let streamed = mtanalyze::testing::analyze_streamed_with(&trace, &opts, step)
                .expect("analyzes")
                .expect("streams");
            assert_eq!(streamed, batch, "step {step}");
        }
    }
}

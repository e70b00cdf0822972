//! Brute-force reference implementation of the analyzer semantics.
//!
//! This module is the literal oracle for `schemas/semantics.md`: it is written
//! to be obviously correct, not fast. It uses only `std` and no floating
//! point. The steps follow the contract one by one:
//!
//! 1. Normalise each thread's events (per-thread line order; timestamps that
//!    go backwards are clamped to the thread's previous timestamp).
//! 2. Work out which stack every event acts on and, for the chosen clock, the
//!    list of running intervals of every stack.
//! 3. Replay each stack's `enter`/`exit` events in time order with an explicit
//!    `Vec` of open frames. A frame's active time is the total overlap of
//!    `[enter, exit]` with its stack's running intervals, found by iterating
//!    over the intervals. Recursion is found by scanning the open frames below
//!    the frame.
//!
//! Readings adopted where the contract leaves room (all documented in
//! `schemas/semantics.md`):
//! - The end of the trace is `end_ts` if given (raised to the largest input
//!   timestamp if it is smaller), else the largest timestamp in the input.
//! - `stack` clock: the stack a thread is on after its last event keeps running
//!   until the end of the trace; a stack a thread switched away from stays
//!   paused until some thread switches onto it.
//! - `gil` clock: after event k of thread T (global order by timestamp, then
//!   position in `lines`; the contract's "ties by thread id" does not
//!   reproduce the shared vector fibers.gil.json), the stack T is on *after* the event
//!   (for a `switch`, the new stack) runs until the next event of any other
//!   thread or T's own next event, whichever comes first; with no later event
//!   at all it runs until the end of the trace.
//!   So the order of `lines` across threads matters, but only for `gil` ties.
//! - Events of one stack coming from several threads are replayed ordered by
//!   (timestamp, start of the thread segment they belong to, thread id,
//!   per-thread order), so that at a hand-over at time t the events of the
//!   thread that gave the stack away come before those of the thread that took it.
//! - A switch names stacks verbatim: `"stack": "thread:2"` is thread 2's own stack.
//! - Lost events (a thread's last line): the thread's current stack stops
//!   running at the mark (under `gil` the time after it belongs to no
//!   stack); its own stack and its current stack end there if that was
//!   their last stretch; a logical stack paused at the end with frames open
//!   ends at the later of its last switch away and the earliest mark.
//! - Ends of logical stacks: an `end` of S at t counts if it is S's latest
//!   end and every stretch a thread ran S began before t and was left (a
//!   switch away or a mark) at or before t; S's frames still open then
//!   close at t, or at the lost-events point if that is earlier. Every
//!   other end is ignored and counted in `warnings` (`end_ignored`).
//! - `warnings` counts one per repaired input line (a clamped timestamp, an
//!   exit that closed frames above its function, an exit of a function that is
//!   not open, an exit on an empty stack). Frames still open at the end of the
//!   trace are closed there and are not a warning.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

/// One event of the interchange format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ev {
    /// A call of the named function starts on the thread's current stack.
    Enter(String),
    /// A call of the named function ends on the thread's current stack.
    Exit(String),
    /// The thread now runs the named stack; `None` means its own stack.
    Switch(Option<String>),
    /// The recorder lost the thread's events from here on. The reference
    /// takes it only as the thread's last line (see "Lost events" in
    /// `schemas/semantics.md`; a mark followed by more events is covered
    /// by the end-to-end tests).
    Lost,
    /// The task on the named logical stack was woken by this thread: an
    /// event of the thread (the `gil` clock sees it) that changes no stack.
    Wake(String),
    /// The named logical stack ended (recorded by this thread, which it
    /// does not change): see "Ends of logical stacks" in `semantics.md`.
    End(String),
}

/// One event line: lines of one thread are given in that thread's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub tid: u64,
    pub ts: u64,
    pub ev: Ev,
}

/// Which running intervals a stack has.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Clock {
    Stack,
    Gil,
    Wall,
}

#[derive(Default, Clone, PartialEq, Eq, Debug)]
pub struct FnStats {
    pub ncalls: u64,
    pub primitive_calls: u64,
    pub tottime_ns: u64,
    pub cumtime_ns: u64,
    pub paused_ns: u64,
}

#[derive(Default, Clone, PartialEq, Eq, Debug)]
pub struct EdgeStats {
    pub ncalls: u64,
    pub primitive_calls: u64,
    pub tottime_ns: u64,
    pub cumtime_ns: u64,
}

#[derive(Default, Clone, PartialEq, Eq, Debug)]
pub struct RefReport {
    pub functions: BTreeMap<String, FnStats>,
    /// Keyed by (caller, callee).
    pub edges: BTreeMap<(String, String), EdgeStats>,
    pub warnings: u64,
    /// The logical stacks whose life an `end` ended (the stacks' `ended`).
    pub ended: BTreeSet<String>,
}

/// The id of a thread's own stack in reports.
pub fn own_stack(tid: u64) -> String {
    format!("thread:{tid}")
}

/// One event after step 1, with everything the later steps need.
#[derive(Clone, Debug)]
struct Event {
    tid: u64,
    /// Position within the thread's own order.
    seq: usize,
    /// Position in the whole input (only breaks `gil` ties between
    /// threads); a clamped event takes its thread's previous event's.
    input_index: usize,
    /// Timestamp after clamping.
    ts: u64,
    ev: Ev,
    /// The stack the thread runs when the event happens (enter/exit act on it).
    stack_before: String,
    /// The stack the thread runs right after the event (differs only for switch).
    stack_after: String,
    /// When the thread's current stretch on `stack_before` began.
    segment_start: u64,
}

/// A half-open-or-closed interval does not matter for lengths: `[start, end]`.
type Interval = (u64, u64);

/// A frame that has been entered and not yet exited.
struct OpenFrame {
    func: String,
    enter: u64,
    /// Sum of the active time of direct children closed so far.
    children_active: u64,
}

pub fn reference(lines: &[Line], clock: Clock, end_ts: Option<u64>) -> RefReport {
    let mut report = RefReport::default();

    // ---- Step 1: per-thread events, clamped, with their stacks. ----
    let mut by_thread: BTreeMap<u64, Vec<(usize, &Line)>> = BTreeMap::new();
    for (input_index, line) in lines.iter().enumerate() {
        by_thread
            .entry(line.tid)
            .or_default()
            .push((input_index, line));
    }
    let mut threads: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
    for (&tid, tlines) in &by_thread {
        let mut events = Vec::new();
        // The thread's previous event: (timestamp, input position).
        let mut prev: Option<(u64, usize)> = None;
        let mut current = own_stack(tid);
        let mut segment_start: Option<u64> = None;
        for (seq, &(mut input_index, line)) in tlines.iter().enumerate() {
            let mut ts = line.ts;
            if let Some((p, p_index)) = prev {
                if ts < p {
                    // Repair 1: the previous event's time, and its place
                    // among ties, so that under `gil` it comes right after
                    // that event, before another thread's at the same time
                    // ("Running intervals": the converter gives it the
                    // previous event's tick).
                    ts = p;
                    input_index = p_index;
                    report.warnings += 1;
                }
            }
            prev = Some((ts, input_index));
            // The thread's own stack starts running at the thread's first event.
            let seg = *segment_start.get_or_insert(ts);
            let stack_before = current.clone();
            let stack_after = match &line.ev {
                Ev::Switch(None) => own_stack(tid),
                Ev::Switch(Some(name)) => name.clone(),
                // After a mark the thread runs nothing that has frames.
                Ev::Lost => LOST.to_owned(),
                _ => current.clone(),
            };
            events.push(Event {
                tid,
                seq,
                input_index,
                ts,
                ev: line.ev.clone(),
                stack_before,
                stack_after: stack_after.clone(),
                segment_start: seg,
            });
            if let Ev::Switch(_) | Ev::Lost = line.ev {
                current = stack_after;
                segment_start = Some(ts);
            }
        }
        threads.insert(tid, events);
    }

    // ---- End of trace. ----
    let max_ts = lines.iter().map(|l| l.ts).max().unwrap_or(0);
    let end = match end_ts {
        Some(e) => e.max(max_ts),
        None => max_ts,
    };

    // ---- Step 2: running intervals of every stack. ----
    let mut running: BTreeMap<String, Vec<Interval>> = BTreeMap::new();
    match clock {
        Clock::Stack => {
            // A thread's current stack runs from the thread's first event (or
            // the switch onto it) until the next switch away, or the end.
            for events in threads.values() {
                let Some(first) = events.first() else {
                    continue;
                };
                let mut current = first.stack_before.clone();
                let mut since = first.ts;
                for e in events {
                    if let Ev::Switch(_) | Ev::Lost = e.ev {
                        running
                            .entry(current.clone())
                            .or_default()
                            .push((since, e.ts));
                        current = e.stack_after.clone();
                        since = e.ts;
                    }
                }
                if current != LOST {
                    running.entry(current).or_default().push((since, end));
                }
            }
        }
        Clock::Gil => {
            // One global order: timestamp, then position in the input. (The
            // contract's text says ties between threads go by thread id, but
            // the shared vector fibers.gil.json is only reproduced by input
            // order; see semantics.md.) Per-thread order is kept because a
            // thread's clamped timestamps never decrease.
            let mut all: Vec<&Event> = threads.values().flatten().collect();
            all.sort_by_key(|e| (e.ts, e.input_index));
            for (k, e) in all.iter().enumerate() {
                let next_foreign = all[k + 1..].iter().find(|x| x.tid != e.tid).map(|x| x.ts);
                let next_own = all[k + 1..].iter().find(|x| x.tid == e.tid).map(|x| x.ts);
                let until = match (next_foreign, next_own) {
                    (Some(a), Some(b)) => a.min(b),
                    (Some(a), None) => a,
                    (None, Some(b)) => b,
                    (None, None) => end,
                };
                running
                    .entry(e.stack_after.clone())
                    .or_default()
                    .push((e.ts, until));
            }
        }
        Clock::Wall => {
            // Every stack always runs: one interval covering the whole trace.
            for events in threads.values() {
                for e in events {
                    for s in [&e.stack_before, &e.stack_after] {
                        running.entry(s.clone()).or_insert_with(|| vec![(0, end)]);
                    }
                }
            }
        }
    }

    // ---- Step 3: replay each stack's enter/exit events in time order. ----
    let mut per_stack: BTreeMap<String, Vec<&Event>> = BTreeMap::new();
    for events in threads.values() {
        for e in events {
            if let Ev::Enter(_) | Ev::Exit(_) = e.ev {
                per_stack.entry(e.stack_before.clone()).or_default().push(e);
            }
        }
    }
    let (ends, ignored_ends) = counting_ends(&threads);
    report.warnings += ignored_ends;
    report.ended = ends.keys().cloned().collect();
    let no_intervals: Vec<Interval> = Vec::new();
    for (stack_id, mut events) in per_stack {
        events.sort_by_key(|e| (e.ts, e.segment_start, e.tid, e.seq));
        let intervals = running.get(&stack_id).unwrap_or(&no_intervals);
        let mut open: Vec<OpenFrame> = Vec::new();
        for e in events {
            match &e.ev {
                Ev::Enter(func) => open.push(OpenFrame {
                    func: func.clone(),
                    enter: e.ts,
                    children_active: 0,
                }),
                Ev::Exit(func) => {
                    let position = open.iter().rposition(|f| &f.func == func);
                    match position {
                        None => {
                            // Not open at all, or the stack is empty: ignored.
                            report.warnings += 1;
                        }
                        Some(i) => {
                            if i + 1 != open.len() {
                                // Frames above it are closed at this timestamp first.
                                report.warnings += 1;
                            }
                            while open.len() > i {
                                close_top(&mut open, e.ts, intervals, &mut report);
                            }
                        }
                    }
                }
                Ev::Switch(_) | Ev::Lost | Ev::Wake(_) | Ev::End(_) => unreachable!(),
            }
        }
        // Frames still open at the end close at the end of the trace, or
        // where the trace lost the stack's end, or at the stack's end
        // event, whichever is earliest.
        let mut close_at = stack_end(&stack_id, &threads, end);
        if let Some(&t) = ends.get(&stack_id) {
            close_at = close_at.min(t);
        }
        while !open.is_empty() {
            close_top(&mut open, close_at, intervals, &mut report);
        }
    }
    report
}

/// The pseudo-stack a thread runs after its `lost` mark: it has no frames.
const LOST: &str = "(lost)";

/// Where stack `id`'s open frames close: the end of the trace, unless the
/// trace lost the stack's end (see "Lost events" in `semantics.md`).
fn stack_end(id: &str, threads: &BTreeMap<u64, Vec<Event>>, end: u64) -> u64 {
    // The earliest mark, and whether some thread still runs `id` at the end.
    let marks = threads
        .values()
        .filter_map(|evs| evs.last().filter(|e| e.ev == Ev::Lost).map(|e| e.ts));
    let Some(first_mark) = marks.min() else {
        return end;
    };
    if threads
        .values()
        .any(|evs| evs.last().is_some_and(|e| e.stack_after == id))
    {
        return end;
    }
    // When a thread last left it: a switch away, or a mark on it.
    let last_left = threads
        .values()
        .flatten()
        .filter(|e| matches!(e.ev, Ev::Switch(_) | Ev::Lost) && e.stack_before == id)
        .map(|e| e.ts)
        .max();
    if let Some(tid) = id
        .strip_prefix("thread:")
        .and_then(|t| t.parse::<u64>().ok())
    {
        // An own stack ends only with its thread's mark.
        return match threads.get(&tid).and_then(|evs| evs.last()) {
            Some(e) if e.ev == Ev::Lost => e.ts,
            _ => end,
        };
    }
    last_left.map_or(end, |left| left.max(first_mark))
}

/// "Ends of logical stacks": the end that counts of each stack that has
/// one (its latest end, if every stretch a thread ran the stack began
/// before it and was left at or before it), and how many ends were
/// ignored (all others).
fn counting_ends(threads: &BTreeMap<u64, Vec<Event>>) -> (BTreeMap<String, u64>, u64) {
    let mut ends: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in threads.values().flatten() {
        if let Ev::End(s) = &e.ev {
            ends.entry(s.clone()).or_default().push(e.ts);
        }
    }
    // Every stretch a thread ran a stack it switched onto: (start, left),
    // `None` if the thread was still on it at its last event.
    let mut stretches: BTreeMap<String, Vec<(u64, Option<u64>)>> = BTreeMap::new();
    for events in threads.values() {
        let mut on: Option<(String, u64)> = None;
        for e in events {
            if let Ev::Switch(_) | Ev::Lost = e.ev {
                if let Some((s, start)) = on.take() {
                    stretches.entry(s).or_default().push((start, Some(e.ts)));
                }
                if let Ev::Switch(_) = e.ev {
                    on = Some((e.stack_after.clone(), e.ts));
                }
            }
        }
        if let Some((s, start)) = on {
            stretches.entry(s).or_default().push((start, None));
        }
    }
    let mut counting = BTreeMap::new();
    let mut ignored = 0;
    for (stack, times) in ends {
        let Some(&t) = times.iter().max() else {
            continue;
        };
        // Every end but the latest.
        ignored += times.len() as u64 - 1;
        let fits = stretches.get(&stack).is_some_and(|runs| {
            !runs.is_empty()
                && runs
                    .iter()
                    .all(|&(start, left)| start < t && left.is_some_and(|l| l <= t))
        });
        if fits {
            counting.insert(stack, t);
        } else {
            ignored += 1;
        }
    }
    (counting, ignored)
}

/// Total length of `[from, to]` that lies inside the running intervals.
fn overlap(from: u64, to: u64, intervals: &[Interval]) -> u64 {
    let mut total: u64 = 0;
    for &(a, b) in intervals {
        let lo = a.max(from);
        let hi = b.min(to);
        if hi > lo {
            total += hi - lo;
        }
    }
    total
}

/// Close the top open frame at `at` and add it to the report.
fn close_top(open: &mut Vec<OpenFrame>, at: u64, intervals: &[Interval], report: &mut RefReport) {
    let i = open.len() - 1;
    let frame = &open[i];
    let length = at.checked_sub(frame.enter).expect("exit before enter");
    let active = overlap(frame.enter, at, intervals);
    assert!(active <= length, "running intervals of one stack overlap");
    let paused = length - active;
    let self_time = active
        .checked_sub(frame.children_active)
        .expect("children were active longer than their parent");

    // Recursive: another frame of the same function is open below it.
    let recursive = open[..i].iter().any(|below| below.func == frame.func);

    let stats = report.functions.entry(frame.func.clone()).or_default();
    stats.ncalls += 1;
    stats.tottime_ns += self_time;
    if !recursive {
        stats.primitive_calls += 1;
        stats.cumtime_ns += active;
        stats.paused_ns += paused;
    }

    if i > 0 {
        let caller = &open[i - 1].func;
        // Edge-recursive: a frame of the same function with the same caller
        // function is open below it.
        let edge_recursive =
            (1..i).any(|j| open[j].func == frame.func && &open[j - 1].func == caller);
        let edge = report
            .edges
            .entry((caller.clone(), frame.func.clone()))
            .or_default();
        edge.ncalls += 1;
        edge.tottime_ns += self_time;
        if !edge_recursive {
            edge.primitive_calls += 1;
            edge.cumtime_ns += active;
        }
    }

    open.pop();
    if let Some(parent) = open.last_mut() {
        parent.children_active += active;
    }
}

// ---------------------------------------------------------------------------
// JSON-lines loader (std only: a small JSON parser is enough for flat lines).
// ---------------------------------------------------------------------------

/// Parse the JSON-lines interchange format. `thread` lines are skipped; blank
/// lines are ignored. Panics, naming the line, on anything malformed.
pub fn parse_jsonl(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let fail = |msg: &str| -> ! { panic!("line {}: {}: {}", n + 1, msg, raw) };
        let value = match Json::parse(raw) {
            Ok(v) => v,
            Err(e) => fail(&e),
        };
        let Json::Obj(fields) = value else {
            fail("not a JSON object")
        };
        let get = |key: &str| fields.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let str_field = |key: &str| match get(key) {
            Some(Json::Str(s)) => s.clone(),
            _ => fail(&format!("missing string field {key:?}")),
        };
        let u64_field = |key: &str| match get(key) {
            Some(Json::Num(s)) => s
                .parse::<u64>()
                .unwrap_or_else(|_| fail(&format!("{key:?} is not a non-negative integer"))),
            _ => fail(&format!("missing integer field {key:?}")),
        };
        let ev = match str_field("ev").as_str() {
            "thread" => continue,
            "enter" => Ev::Enter(str_field("fn")),
            "exit" => Ev::Exit(str_field("fn")),
            "lost" => Ev::Lost,
            "wake" => match get("stack") {
                Some(Json::Str(s)) => Ev::Wake(s.clone()),
                _ => fail("\"wake\" needs a stack name"),
            },
            "end" => match get("stack") {
                Some(Json::Str(s)) => Ev::End(s.clone()),
                _ => fail("\"end\" needs a stack name"),
            },
            "switch" => match get("stack") {
                Some(Json::Str(s)) => Ev::Switch(Some(s.clone())),
                Some(Json::Null) | None => Ev::Switch(None),
                _ => fail("\"stack\" must be a string or null"),
            },
            other => fail(&format!("unknown event {other:?}")),
        };
        out.push(Line {
            tid: u64_field("tid"),
            ts: u64_field("ts"),
            ev,
        });
    }
    out
}

/// A parsed JSON value; numbers are kept as their source text.
#[derive(Debug)]
enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Result<Json, String> {
        let mut p = JsonParser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("trailing characters at byte {}", p.i));
        }
        Ok(v)
    }
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\r' | b'\n') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", c as char, self.i))
        }
    }

    fn literal(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(format!("bad literal at byte {}", self.i))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.expect(b':')?;
                    let v = self.value()?;
                    fields.push((key, v));
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Obj(fields));
                        }
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Arr(items));
                        }
                        _ => return Err(format!("expected ',' or ']' at byte {}", self.i)),
                    }
                }
            }
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while let Some(c) = self.peek() {
                    if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                Ok(Json::Num(text.to_string()))
            }
            _ => Err(format!("unexpected input at byte {}", self.i)),
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .s
            .get(self.i..self.i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| format!("bad \\u escape at byte {}", self.i))?;
        self.i += 4;
        Ok(digits)
    }

    fn string(&mut self) -> Result<String, String> {
        if self.peek() != Some(b'"') {
            return Err(format!("expected string at byte {}", self.i));
        }
        self.i += 1;
        let mut bytes: Vec<u8> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err("unterminated string".to_string());
            };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(esc) = self.peek() else {
                        return Err("unterminated escape".to_string());
                    };
                    self.i += 1;
                    let ch = match esc {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if !self.s[self.i..].starts_with(b"\\u") {
                                    return Err("lone surrogate".to_string());
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err("bad surrogate pair".to_string());
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            char::from_u32(code).ok_or("bad \\u escape")?
                        }
                        _ => return Err(format!("bad escape at byte {}", self.i)),
                    };
                    let mut buf = [0u8; 4];
                    bytes.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                _ => bytes.push(c),
            }
        }
        String::from_utf8(bytes).map_err(|_| "invalid UTF-8 in string".to_string())
    }
}

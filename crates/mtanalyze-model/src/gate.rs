//! Regression gates: rules over a diff's changes (`diff --fail-if RULE`)
//! and the rows that break them.
//!
//! ```text
//! RULE   := [PATTERN ':'] FIELD OP CHANGE
//! FIELD  := tottime | cumtime | paused | ncalls | total
//! OP     := > | >= | < | <=
//! CHANGE := [+|-] NUMBER UNIT      UNIT: % | ns | us | µs | ms | s | (none: a count)
//! ```
//!
//! `tottime > +10%`: a function's self time grew by more than 10% of its
//! base; `cumtime > +5ms`: by more than 5 ms; `ncalls > +0`: it is called
//! more often; `parse.*: cumtime > +10%`: only functions whose name (or
//! `file:line name`) matches the regex; `total > +2%`: the total self time.
//! A function new in NEW grew by an infinite share of its base (it breaks
//! any `> +N%` rule), one gone from NEW shrank by 100%. With a minimum
//! change (`--fail-min-change 1ms`), a time rule is only broken by a change
//! at least that large either way, so a 1 µs function doubling does not fail
//! a build.
//!
//! A time rule (`tottime`, `cumtime`, `paused`, `total`) is only broken by
//! a row whose self-time change the diff found significant
//! ([`crate::significance::Verdict`]): noise fails no build. Counts are exact and need
//! no test. Base times are compared as the test compared them, multiplied
//! by the machine's drift ([`crate::significance::Significance::drift`]), and shown so;
//! a `tottime` rule on a diff tested by ranks or by runs reads the self
//! times the test compared, frames times median frame
//! ([`crate::diff::FunctionDiff::compared`]).

use std::str::FromStr;

use regex::Regex;

use crate::diff::{DiffReport, FunctionDiff};

/// The column a rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateField {
    /// Self time.
    Tottime,
    /// Cumulative time.
    Cumtime,
    /// Paused time.
    Paused,
    /// Calls.
    Ncalls,
    /// The total self time of the trace.
    Total,
}

/// How a change compares with the rule's threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateOp {
    /// `>`
    Greater,
    /// `>=`
    GreaterOrEqual,
    /// `<`
    Less,
    /// `<=`
    LessOrEqual,
}

/// The threshold: a share of the base, nanoseconds, or a count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GateChange {
    /// Percent of the base value (`+10%`).
    Percent(f64),
    /// Nanoseconds (`+5ms`).
    Nanoseconds(i64),
    /// A count (`+0`, for `ncalls`).
    Count(i64),
}

/// One `--fail-if` rule.
#[derive(Clone, Debug)]
pub struct GateRule {
    /// The rule as written.
    pub text: String,
    /// Only functions matching this (name, or `file:line name`).
    pub pattern: Option<Regex>,
    /// The column.
    pub field: GateField,
    /// The comparison.
    pub op: GateOp,
    /// The threshold.
    pub change: GateChange,
}

/// A rule that holds for a row: which, and the row's values.
#[derive(Clone, Debug, PartialEq)]
pub struct GateBreach {
    /// The rule as written.
    pub rule: String,
    /// The column it read.
    pub field: GateField,
    /// `name (file:line)`, or `total self time`.
    pub what: String,
    /// The base value (ns, or calls), if the row is in BASE.
    pub base: Option<u64>,
    /// The new value, if the row is in NEW.
    pub new: Option<u64>,
}

/// Why a rule could not be read: one line for the user.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad --fail-if rule {rule:?}: {why} (e.g. 'tottime > +10%', 'parse.*: cumtime > +5ms', 'ncalls > +0', 'total > +2%')")]
pub struct GateError {
    rule: String,
    why: String,
}

impl FromStr for GateRule {
    type Err = GateError;

    fn from_str(text: &str) -> Result<GateRule, GateError> {
        let bad = |why: &str| GateError {
            rule: text.to_owned(),
            why: why.to_owned(),
        };
        // The pattern is everything before the last ':' that precedes the
        // field (a regex may hold ':' itself).
        let (pattern, rest) = match text.rfind(':') {
            Some(at) => (Some(text[..at].trim()), text[at + 1..].trim()),
            None => (None, text.trim()),
        };
        let pattern = match pattern {
            Some("") => return Err(bad("nothing before ':'")),
            Some(p) => Some(Regex::new(p).map_err(|e| {
                // The regex crate draws the pattern over several lines: keep the reason.
                let text = e.to_string();
                let why = text.lines().last().unwrap_or_default();
                bad(&format!(
                    "pattern {p:?}: {}",
                    why.trim_start_matches("error: ")
                ))
            })?),
            None => None,
        };
        let op_at = rest.find(['>', '<']).ok_or_else(|| bad("no '>' or '<'"))?;
        let field = match rest[..op_at].trim() {
            "tottime" => GateField::Tottime,
            "cumtime" => GateField::Cumtime,
            "paused" => GateField::Paused,
            "ncalls" => GateField::Ncalls,
            "total" => GateField::Total,
            other => {
                return Err(bad(&format!(
                    "unknown column {other:?} (tottime, cumtime, paused, ncalls or total)"
                )))
            }
        };
        if field == GateField::Total && pattern.is_some() {
            return Err(bad("'total' takes no function pattern"));
        }
        let after = &rest[op_at..];
        let (op, value) = if let Some(v) = after.strip_prefix(">=") {
            (GateOp::GreaterOrEqual, v)
        } else if let Some(v) = after.strip_prefix("<=") {
            (GateOp::LessOrEqual, v)
        } else if let Some(v) = after.strip_prefix('>') {
            (GateOp::Greater, v)
        } else {
            (GateOp::Less, &after[1..])
        };
        let change = parse_change(value.trim()).map_err(|why| bad(&why))?;
        match (field, change) {
            (GateField::Ncalls, GateChange::Nanoseconds(_)) => {
                return Err(bad("ncalls changes are counts or %, not times"))
            }
            (GateField::Ncalls, _) => {}
            (_, GateChange::Count(_)) => {
                return Err(bad("a time change needs a unit: %, ns, us, ms or s"))
            }
            _ => {}
        }
        Ok(GateRule {
            text: text.trim().to_owned(),
            pattern,
            field,
            op,
            change,
        })
    }
}

/// `+10%`, `-5ms`, `+0`.
fn parse_change(v: &str) -> Result<GateChange, String> {
    let (sign, digits) = match v.as_bytes().first() {
        Some(b'+') => (1.0, &v[1..]),
        Some(b'-') => (-1.0, &v[1..]),
        _ => (1.0, v),
    };
    let split = digits
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(digits.len());
    let (number, unit) = digits.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{v:?} is not a change like +10%, +5ms or +0"))?;
    let n = sign * n;
    let ns = |scale: f64| GateChange::Nanoseconds((n * scale).round() as i64);
    Ok(match unit.trim() {
        "%" => GateChange::Percent(n),
        "ns" => ns(1.0),
        "us" | "µs" => ns(1e3),
        "ms" => ns(1e6),
        "s" => ns(1e9),
        "" if n.fract() == 0.0 => GateChange::Count(n as i64),
        other => return Err(format!("unknown unit {other:?} (%, ns, us, ms, s)")),
    })
}

impl GateRule {
    /// Whether a change from `base` to `new` (absent: 0, and a new or gone
    /// row) breaks the rule, ignoring time changes smaller than `min_ns`.
    fn holds(&self, base: Option<u64>, new: Option<u64>, min_ns: u64) -> bool {
        let (b, n) = (base.unwrap_or(0), new.unwrap_or(0));
        let delta = n as i128 - b as i128;
        let is_time = self.field != GateField::Ncalls;
        if is_time && delta.unsigned_abs() < u128::from(min_ns) {
            return false;
        }
        let (value, threshold) = match self.change {
            GateChange::Percent(p) => {
                let share = if b == 0 {
                    match delta.signum() {
                        1 => f64::INFINITY,
                        _ => 0.0,
                    }
                } else {
                    delta as f64 / b as f64 * 100.0
                };
                (share, p)
            }
            GateChange::Nanoseconds(t) | GateChange::Count(t) => (delta as f64, t as f64),
        };
        match self.op {
            GateOp::Greater => value > threshold,
            GateOp::GreaterOrEqual => value >= threshold,
            GateOp::Less => value < threshold,
            GateOp::LessOrEqual => value <= threshold,
        }
    }

    fn applies_to(&self, f: &FunctionDiff) -> bool {
        self.pattern.as_ref().is_none_or(|re| {
            re.is_match(&f.function)
                || re.is_match(&format!("{}:{} {}", f.file, f.line, f.function))
        })
    }
}

/// A base time as the test saw it: multiplied by the machine's drift.
fn drifted(ns: u64, k: f64) -> u64 {
    if k == 1.0 {
        ns
    } else {
        (ns as f64 * k).round() as u64
    }
}

/// Every row of `diff` that breaks one of `rules` (every function, not
/// only the ones a table shows), rule by rule. A time rule only reads rows
/// whose change is significant (see the module doc).
pub fn gate(diff: &DiffReport, rules: &[GateRule], min_ns: u64) -> Vec<GateBreach> {
    let mut out = Vec::new();
    for rule in rules {
        if rule.field == GateField::Total {
            let b = Some(drifted(diff.base_total_ns, diff.significance.drift));
            let n = Some(diff.new_total_ns);
            if diff.total_verdict.changed() && rule.holds(b, n, min_ns) {
                out.push(GateBreach {
                    rule: rule.text.clone(),
                    field: rule.field,
                    what: "total self time".to_owned(),
                    base: b,
                    new: n,
                });
            }
            continue;
        }
        let within = |f: &FunctionDiff| rule.field != GateField::Ncalls && !f.verdict.changed();
        for f in diff
            .functions
            .iter()
            .filter(|f| rule.applies_to(f) && !within(f))
        {
            let get = |s: &crate::diff::FunctionSide| match rule.field {
                GateField::Tottime => s.tottime_ns,
                GateField::Cumtime => s.cumtime_ns,
                GateField::Paused => s.paused_ns,
                GateField::Ncalls | GateField::Total => s.ncalls,
            };
            let k = match rule.field {
                GateField::Ncalls => 1.0,
                _ => diff.significance.drift,
            };
            let (b, n) = match (rule.field, f.compared) {
                // Self time as the test compared it (drift included).
                (GateField::Tottime, Some(c)) => (Some(c.base_ns), Some(c.new_ns)),
                _ => (
                    f.base.as_ref().map(|s| drifted(get(s), k)),
                    f.new.as_ref().map(get),
                ),
            };
            if rule.holds(b, n, min_ns) {
                let site = if f.file.is_empty() {
                    String::new()
                } else {
                    format!(" ({}:{})", f.file, f.line)
                };
                out.push(GateBreach {
                    rule: rule.text.clone(),
                    field: rule.field,
                    what: format!("{}{site}", f.function),
                    base: b,
                    new: n,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> GateRule {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn rules_read_as_written() {
        let r = rule("tottime > +10%");
        assert_eq!(
            (r.field, r.op, r.change),
            (
                GateField::Tottime,
                GateOp::Greater,
                GateChange::Percent(10.0)
            )
        );
        let r = rule("parse.*: cumtime >= +5ms");
        assert!(r.pattern.is_some());
        assert_eq!(
            (r.field, r.op, r.change),
            (
                GateField::Cumtime,
                GateOp::GreaterOrEqual,
                GateChange::Nanoseconds(5_000_000)
            )
        );
        let r = rule("ncalls > +0");
        assert_eq!(r.change, GateChange::Count(0));
        let r = rule("total < -2.5%");
        assert_eq!((r.op, r.change), (GateOp::Less, GateChange::Percent(-2.5)));
        assert_eq!(rule("paused > 1.5us").change, GateChange::Nanoseconds(1500));
    }

    #[test]
    fn bad_rules_say_why_in_one_line() {
        for (text, why) in [
            ("tottime", "no '>' or '<'"),
            ("speed > +1%", "unknown column \"speed\""),
            ("tottime > +5", "a time change needs a unit"),
            ("ncalls > +5ms", "ncalls changes are counts"),
            ("tottime > +5kg", "unknown unit \"kg\""),
            ("(: tottime > +1%", "pattern"),
            ("f: total > +1%", "'total' takes no function pattern"),
            ("tottime > lots", "is not a change"),
        ] {
            let e = text.parse::<GateRule>().unwrap_err().to_string();
            assert!(e.contains(why) && !e.contains('\n'), "{text}: {e}");
        }
    }

    #[test]
    fn changes_hold_by_share_size_and_minimum() {
        let r = rule("tottime > +10%");
        assert!(r.holds(Some(100), Some(111), 0));
        assert!(!r.holds(Some(100), Some(110), 0));
        assert!(
            r.holds(None, Some(1), 0),
            "a new function grew without bound"
        );
        assert!(!r.holds(Some(1), None, 0));
        assert!(
            !r.holds(Some(100), Some(200), 1000),
            "below the minimum change"
        );
        let r = rule("cumtime > +5ms");
        assert!(r.holds(Some(0), Some(5_000_001), 0));
        assert!(!r.holds(Some(0), Some(5_000_000), 0));
        let r = rule("ncalls > +0");
        assert!(
            r.holds(Some(3), Some(4), u64::MAX),
            "counts ignore the time minimum"
        );
        assert!(!r.holds(Some(3), Some(3), 0));
        let r = rule("tottime <= -50%");
        assert!(r.holds(Some(100), Some(50), 0) && r.holds(Some(100), None, 0));
    }
}

//! Additive fields of reports keyed by row, and their sum: what the time
//! window tests compare (the windows `[a, b)` and `[b, c)` of a trace add
//! up to `[a, c)` row by row).

use std::collections::BTreeMap;

/// Rows of additive fields, by a row's name.
pub type Rows = BTreeMap<String, Vec<u64>>;

/// `a + b`, row by row and field by field. A row of zeros is the same as no
/// row: it is left out, so sums compare equal to reports that list no such
/// row.
pub fn summed(a: &Rows, b: &Rows) -> Rows {
    let mut out = a.clone();
    for (k, v) in b {
        let e = out.entry(k.clone()).or_insert_with(|| vec![0; v.len()]);
        for (x, y) in e.iter_mut().zip(v) {
            *x += y;
        }
    }
    out.retain(|_, v| v.iter().any(|&x| x != 0));
    out
}

//! Fitting text tables into a terminal's width.
//!
//! A table row never wraps: when the widest row would not fit, the columns
//! a reader can spare are hidden first (each table says which, and in what
//! order), then the text columns shrink: a function's label keeps its name
//! and its file name and line, losing the middle of the path first
//! (`parse (crates/…/src/p.rs:10)`, then `parse (p.rs:10)`), and only then
//! the middle of the name; other text loses its middle. Header lines wrap
//! between their `key: value` items. Without a width (output that is not a
//! terminal, or `--width 0`) nothing changes. Every cell is shown with its
//! control characters escaped ([`escape`]: names are data from the traced
//! program), and measured as shown.

use std::borrow::Cow;

use crate::render::escape::escape;
use mtanalyze_model::report::FunctionKey;

/// The mark left where text was cut.
const ELLIPSIS: char = '…';

/// Width of `s` in terminal columns (one a character: names are text, and
/// the tables' own characters are all single-width).
pub(crate) fn width_of(s: &str) -> usize {
    s.chars().count()
}

/// `s` in at most `max` columns, its middle replaced by `…` if needed.
pub(crate) fn elide_middle(s: &str, max: usize) -> String {
    let n = width_of(s);
    if n <= max {
        return s.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let keep = max - 1;
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut out: String = s.chars().take(head).collect();
    out.push(ELLIPSIS);
    out.extend(s.chars().skip(n - tail));
    out
}

/// `name (file:line)` in at most `max` columns (`suffix`, such as a diff's
/// match marker, is kept whole after it): the middle of the path goes
/// first, then the directories, then the middle of the file name, then the
/// middle of the function's name.
pub(crate) fn label(key: &FunctionKey, suffix: &str, max: usize) -> String {
    let key = &escaped(key);
    let with = |site: Option<String>, name: &str| match site {
        Some(site) => format!("{name} ({site}){suffix}"),
        None => format!("{name}{suffix}"),
    };
    if key.file.is_empty() {
        let room = max.saturating_sub(width_of(suffix));
        return with(None, &elide_middle(&key.function, room));
    }
    let line = format!(":{}", key.line);
    let file_name = key.file.rsplit('/').next().unwrap_or(&key.file);
    // Paths, longest first: the whole path, then fewer directories around
    // an ellipsis, then the file name alone.
    let parts: Vec<&str> = key.file.split('/').collect();
    let mut sites = vec![format!("{}{line}", key.file)];
    for keep in (1..parts.len().saturating_sub(1)).rev() {
        let head = keep.div_ceil(2);
        let tail = keep - head;
        let mut p: Vec<&str> = parts[..head].to_vec();
        p.push("…");
        p.extend_from_slice(&parts[parts.len() - 1 - tail..]);
        sites.push(format!("{}{line}", p.join("/")));
    }
    sites.push(format!("{file_name}{line}"));
    for site in &sites {
        let s = with(Some(site.clone()), &key.function);
        if width_of(&s) <= max {
            return s;
        }
    }
    // The name whole with the file name alone does not fit: the file name
    // gives way first (down to a few characters), then the name.
    const FILE_MIN: usize = 6;
    let fixed = width_of(suffix) + 3 + width_of(&line); // " (", ")" and ":N"
    let file_room = max.saturating_sub(fixed + width_of(&key.function));
    if file_room >= FILE_MIN.min(width_of(file_name)) {
        let site = format!("{}{line}", elide_middle(file_name, file_room));
        return with(Some(site), &key.function);
    }
    let file = elide_middle(file_name, FILE_MIN);
    let name_room = max.saturating_sub(fixed + width_of(&file));
    if name_room >= 4 {
        let site = format!("{file}{line}");
        return with(Some(site), &elide_middle(&key.function, name_room));
    }
    let site = format!("{file_name}{line}");
    elide_middle(&with(Some(site), &key.function), max)
}

/// `key` as a terminal may show it: its name and file with control
/// characters escaped ([`escape`]), measured and cut as such.
fn escaped(key: &FunctionKey) -> Cow<'_, FunctionKey> {
    match (escape(&key.function), escape(&key.file)) {
        (Cow::Borrowed(_), Cow::Borrowed(_)) => Cow::Borrowed(key),
        (function, file) => Cow::Owned(FunctionKey::new(&function, &file, key.line)),
    }
}

/// The narrowest a label is comfortable at: its name whole, with its file
/// name and line but no directories.
fn short_label_width(key: &FunctionKey, suffix: &str) -> usize {
    let key = &escaped(key);
    if key.file.is_empty() {
        return width_of(&key.function) + width_of(suffix);
    }
    let file_name = key.file.rsplit('/').next().unwrap_or(&key.file);
    width_of(&key.function)
        + width_of(suffix)
        + width_of(file_name)
        + 3
        + 1
        + key.line.to_string().len()
}

/// The `items` on as few lines of at most `width` columns as they fit,
/// two spaces apart (an item wider than a line has a line of its own).
pub(crate) fn wrap_items(items: &[String], width: Option<usize>) -> Vec<String> {
    wrap_with(items, width, "  ")
}

/// The `items` on as few lines of at most `width` columns as they fit,
/// `gap` apart.
pub(crate) fn wrap_with(items: &[String], width: Option<usize>, gap: &str) -> Vec<String> {
    let Some(width) = width else {
        return vec![items.join(gap)];
    };
    let mut lines: Vec<String> = Vec::new();
    for item in items {
        match lines.last_mut() {
            Some(line) if width_of(line) + width_of(gap) + width_of(item) <= width => {
                line.push_str(gap);
                line.push_str(item);
            }
            _ => lines.push(item.clone()),
        }
    }
    lines
}

/// How a column of a table behaves when the table is too wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Give {
    /// Always shown at its full width (the numbers that matter most).
    Nothing,
    /// Hidden when space runs out, lowest rank first.
    Hide(u8),
    /// Text that shrinks, down to this many columns.
    Shrink(usize),
}

/// A table cell before fitting.
#[derive(Clone, Debug)]
pub(crate) enum Text {
    /// Text that is cut in the middle if its column shrinks.
    Plain(String),
    /// A right-aligned number.
    Number(String),
    /// A function's label, with a suffix kept whole.
    Label(FunctionKey, String),
}

impl Text {
    fn natural(&self) -> String {
        match self {
            Text::Plain(s) | Text::Number(s) => escape(s).into_owned(),
            Text::Label(k, suffix) => label(k, suffix, usize::MAX),
        }
    }

    fn fitted(&self, max: usize) -> String {
        match self {
            Text::Plain(s) | Text::Number(s) => elide_middle(&escape(s), max),
            Text::Label(k, suffix) => label(k, suffix, max),
        }
    }

    /// Right-aligned.
    pub(crate) fn is_number(&self) -> bool {
        matches!(self, Text::Number(_))
    }
}

/// A column: its title, whether its title is right-aligned, and what it
/// gives up when the table is too wide.
#[derive(Clone, Debug)]
pub(crate) struct Column {
    pub title: String,
    /// What the column is, where the title alone is ambiguous (`percall`).
    pub name: String,
    /// A shorter title for narrow tables.
    pub short: Option<String>,
    pub right: bool,
    pub give: Give,
}

impl Column {
    /// The same column, called `name` where the tables say it was hidden.
    pub(crate) fn named(mut self, name: &str) -> Column {
        self.name = name.to_owned();
        self
    }

    /// The same column, titled `short` when the table must narrow.
    pub(crate) fn short(mut self, short: &str) -> Column {
        self.short = Some(short.to_owned());
        self
    }
}

/// Padding between two columns.
const GAP: usize = 2;
/// The widest a label column insists on before spare columns are hidden.
const LABEL_COMFORT: usize = 40;
/// The narrowest any text column gets.
const HARD_MIN: usize = 8;

/// A table fitted into a width: the columns shown (by index) and the rows'
/// text, each cut to its column's width.
pub(crate) struct Fitted {
    pub columns: Vec<usize>,
    pub titles: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Titles of the columns hidden to fit.
    pub hidden: Vec<String>,
}

/// How a table fits a width, decided from its columns' widths alone (so a
/// table too big to hold can be planned in one pass and written in a
/// second): the columns shown, each one's width, its title.
pub(crate) struct Plan {
    /// Shown columns, by index.
    pub shown: Vec<usize>,
    /// Width of every column (of the shown ones: what it is cut to).
    pub targets: Vec<usize>,
    /// Natural width of every column (title included).
    widths: Vec<usize>,
    /// Titles of the shown columns.
    pub titles: Vec<String>,
    /// Names of the hidden columns.
    pub hidden: Vec<String>,
}

impl Plan {
    /// Whether column `i` is narrower than its widest cell.
    pub(crate) fn cuts(&self, i: usize) -> bool {
        self.targets[i] < self.widths[i]
    }
}

/// Plans `columns` into `width` columns (`None`: any width). `cells[i]`:
/// the widest cell of column `i`; `comfort[i]`: for a text column, the
/// width it keeps before spare columns are hidden (else its `Give::Shrink`
/// minimum). Titles get their short forms when the full ones do not fit.
pub(crate) fn plan(
    columns: &[Column],
    cells: &[usize],
    comfort: &[Option<usize>],
    width: Option<usize>,
) -> Plan {
    let full = plan_titled(columns, cells, comfort, width, false);
    let natural = full.widths.iter().sum::<usize>() + GAP * full.widths.len().saturating_sub(1);
    match width {
        Some(w) if natural > w => plan_titled(columns, cells, comfort, width, true),
        _ => full,
    }
}

fn plan_titled(
    columns: &[Column],
    cells: &[usize],
    comfort: &[Option<usize>],
    width: Option<usize>,
    short_titles: bool,
) -> Plan {
    let title = |c: &Column| match (&c.short, short_titles) {
        (Some(s), true) => s.clone(),
        _ => c.title.clone(),
    };
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            cells
                .get(i)
                .copied()
                .unwrap_or(0)
                .max(width_of(&title(&columns[i])))
        })
        .collect();
    let give: Vec<Give> = (0..columns.len())
        .map(|i| match columns[i].give {
            Give::Shrink(min) => {
                let keep = comfort
                    .get(i)
                    .copied()
                    .flatten()
                    .map_or(min, |w| w.clamp(min, LABEL_COMFORT));
                Give::Shrink(keep.min(widths[i]))
            }
            g => g,
        })
        .collect();
    let mut shown: Vec<usize> = (0..columns.len()).collect();
    let mut targets = widths.clone();
    if let Some(width) = width {
        let need = |shown: &[usize], min: bool| -> usize {
            let cols: usize = shown
                .iter()
                .map(|&i| match (give[i], min) {
                    (Give::Shrink(m), true) => m.min(widths[i]),
                    _ => widths[i],
                })
                .sum();
            cols + GAP * shown.len().saturating_sub(1)
        };
        // Hide what can be spared until the shrinkable text can fit.
        while need(&shown, false) > width && need(&shown, true) > width {
            let spare = shown
                .iter()
                .enumerate()
                .filter_map(|(pos, &i)| match give[i] {
                    Give::Hide(rank) => Some((rank, std::cmp::Reverse(pos))),
                    _ => None,
                })
                .min();
            let Some((_, std::cmp::Reverse(pos))) = spare else {
                break;
            };
            shown.remove(pos);
        }
        // Shrink the text columns, widest first, to what is left; below
        // their comfortable width (to a hard floor) if nothing else can give.
        let mut over = need(&shown, false).saturating_sub(width);
        while over > 0 {
            let above = |floor: &dyn Fn(usize) -> Option<usize>| {
                shown
                    .iter()
                    .copied()
                    .filter(|&i| floor(i).is_some_and(|m| targets[i] > m))
                    .max_by_key(|&i| targets[i])
            };
            let comfortable = |i: usize| match give[i] {
                Give::Shrink(m) => Some(m),
                _ => None,
            };
            let hard = |i: usize| matches!(give[i], Give::Shrink(_)).then_some(HARD_MIN);
            let Some(i) = above(&comfortable).or_else(|| above(&hard)) else {
                break;
            };
            targets[i] -= 1;
            over -= 1;
        }
    }
    let hidden = (0..columns.len())
        .filter(|i| !shown.contains(i))
        .map(|i| columns[i].name.clone())
        .collect();
    let titles = shown
        .iter()
        .map(|&i| elide_middle(&title(&columns[i]), targets[i]))
        .collect();
    Plan {
        shown,
        targets,
        widths,
        titles,
        hidden,
    }
}

/// Fits `rows` under `columns` into `width` columns (`None`: any width).
pub(crate) fn fit(columns: &[Column], rows: &[Vec<Text>], width: Option<usize>) -> Fitted {
    let natural: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(Text::natural).collect())
        .collect();
    let cells: Vec<usize> = (0..columns.len())
        .map(|i| {
            natural
                .iter()
                .filter_map(|r| r.get(i))
                .map(|s| width_of(s))
                .max()
                .unwrap_or(0)
        })
        .collect();
    // A column of labels is comfortable as narrow as its widest label with
    // the name whole and the file name alone (within bounds): narrower, it
    // is better to hide spare columns first.
    let comfort: Vec<Option<usize>> = (0..columns.len())
        .map(|i| {
            rows.iter()
                .filter_map(|r| match r.get(i) {
                    Some(Text::Label(k, suffix)) => Some(short_label_width(k, suffix)),
                    _ => None,
                })
                .max()
        })
        .collect();
    let plan = plan(columns, &cells, &comfort, width);
    let rows = rows
        .iter()
        .zip(&natural)
        .map(|(row, nat)| {
            plan.shown
                .iter()
                .map(|&i| match row.get(i) {
                    Some(t) if plan.cuts(i) => t.fitted(plan.targets[i]),
                    Some(_) => nat[i].clone(),
                    None => String::new(),
                })
                .collect()
        })
        .collect();
    Fitted {
        columns: plan.shown,
        titles: plan.titles,
        rows,
        hidden: plan.hidden,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(f: &str, file: &str, line: u32) -> FunctionKey {
        FunctionKey::new(f, file, line)
    }

    #[test]
    fn a_label_loses_the_path_before_the_name() {
        let k = key("wait for input", "crates/mtrace/examples/workload.rs", 198);
        let full = "wait for input (crates/mtrace/examples/workload.rs:198)";
        assert_eq!(label(&k, "", 100), full);
        assert_eq!(
            label(&k, "", 50),
            "wait for input (crates/…/examples/workload.rs:198)"
        );
        assert_eq!(
            label(&k, "", 45),
            "wait for input (crates/…/workload.rs:198)"
        );
        assert_eq!(label(&k, "", 32), "wait for input (workload.rs:198)");
        // The file name gives way before the function name.
        assert_eq!(label(&k, "", 28), "wait for input (wor….rs:198)");
        assert_eq!(label(&k, "", 24), "wait …input (wor…rs:198)");
        assert!(width_of(&label(&k, "", 20)) <= 20, "{}", label(&k, "", 20));
        for max in 0..60 {
            assert!(
                width_of(&label(&k, " [new]", max)) <= max.max(8 + 6),
                "{max}"
            );
        }
        assert_eq!(label(&key("main", "", 0), "", 10), "main");
    }

    #[test]
    fn elision_keeps_both_ends() {
        assert_eq!(
            elide_middle("mtrace::thread::Local::write", 12),
            "mtrace…write"
        );
        assert_eq!(elide_middle("short", 12), "short");
        assert_eq!(elide_middle("abc", 1), "…");
    }

    #[test]
    fn items_wrap_between_items() {
        let items: Vec<String> = [
            "duration: 417ms",
            "threads: 7",
            "stacks: 158",
            "events: 214178",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            wrap_items(&items, Some(30)),
            ["duration: 417ms  threads: 7", "stacks: 158  events: 214178"]
        );
        assert_eq!(wrap_items(&items, None).len(), 1);
    }

    #[test]
    fn spare_columns_hide_before_text_shrinks_below_its_minimum() {
        let columns = vec![
            Column {
                title: "n".into(),
                name: "n".into(),
                short: None,
                right: true,
                give: Give::Nothing,
            },
            Column {
                title: "extra".into(),
                name: "extra".into(),
                short: None,
                right: true,
                give: Give::Hide(1),
            },
            Column {
                title: "name".into(),
                name: "name".into(),
                short: None,
                right: false,
                give: Give::Shrink(6),
            },
        ];
        let rows = vec![vec![
            Text::Number("12345".into()),
            Text::Number("99999".into()),
            Text::Plain("a long name of a function".into()),
        ]];
        let all = fit(&columns, &rows, None);
        assert_eq!(all.columns, [0, 1, 2]);
        let narrow = fit(&columns, &rows, Some(24));
        assert_eq!(narrow.columns, [0, 1, 2]);
        assert_eq!(narrow.rows[0][2], "a lon…tion");
        let narrower = fit(&columns, &rows, Some(16));
        assert_eq!(narrower.columns, [0, 2]);
        assert_eq!(narrower.hidden, ["extra"]);
        // The row holds the shown columns only.
        assert!(width_of(&narrower.rows[0][1]) <= 16 - 5 - 2);
    }
}

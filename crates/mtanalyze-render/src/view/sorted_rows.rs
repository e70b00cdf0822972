//! Stack rows handed over in any order (a streamed analysis hands them as
//! their stacks finish), given back in the report's order (by id) in
//! bounded memory: what `--format json` needs to print half a million
//! rows without holding them.
//!
//! An external merge sort. Rows are held until they take more than the
//! budget, then sorted and written to a temporary file (a run); at the end
//! the runs and the rows still held are merged. A trace of a few thousand
//! stacks never touches the disk. The runs are anonymous files in the
//! temporary directory (`$TMPDIR`), removed by the system when closed, even
//! if the process is killed. If a run cannot be written (no space, no
//! temporary directory), the rows are held from then on and
//! [`SortedRows::spill_error`] says why.

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};

use mtrace_format::StackKind;

use mtanalyze_model::report::{StackKey, StackName, StackStats, ThreadList};
use mtanalyze_model::sink::StackSink;

/// What [`SortedRows::new`] holds before writing a run: 2 MB, some
/// 15,000 rows of short-named tasks.
pub const DEFAULT_BUDGET: usize = 2 << 20;

/// Runs of a tier merged into one of the next (each run is an open file
/// and, in a merge, a read buffer).
const MAX_RUNS: usize = 64;

/// A [`StackSink`] that gives the rows back sorted by id
/// ([`SortedRows::into_sorted`]), holding at most about its budget of them.
pub struct SortedRows {
    budget: usize,
    held: Vec<StackStats>,
    /// What `held` takes, as [`row_bytes`] counts it.
    held_bytes: usize,
    /// Oldest first (tiers descending).
    runs: Vec<Run>,
    /// Runs merged at once (`MAX_RUNS`; fewer in tests).
    max_runs: usize,
    rows: u64,
    spill_error: Option<io::Error>,
}

impl SortedRows {
    /// Holds about `budget` bytes of rows before writing them to a run.
    pub fn new(budget: usize) -> SortedRows {
        SortedRows {
            budget,
            held: Vec::new(),
            held_bytes: 0,
            runs: Vec::new(),
            max_runs: MAX_RUNS,
            rows: 0,
            spill_error: None,
        }
    }

    /// [`SortedRows::new`] merging `max_runs` runs at once (at least 2).
    /// For tests.
    #[doc(hidden)]
    pub fn with_max_runs(budget: usize, max_runs: usize) -> SortedRows {
        SortedRows {
            max_runs: max_runs.max(2),
            ..SortedRows::new(budget)
        }
    }

    /// Rows taken so far.
    pub fn len(&self) -> u64 {
        self.rows
    }

    /// Whether no row was taken.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Runs written to disk so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Why rows stopped going to disk, if they did: they were held instead.
    pub fn spill_error(&self) -> Option<&io::Error> {
        self.spill_error.as_ref()
    }

    /// The rows, ascending by id (ties in the order taken).
    pub fn into_sorted(mut self) -> io::Result<Sorted> {
        sort_by_id(&mut self.held);
        let mut sources = Vec::with_capacity(self.runs.len() + 1);
        for run in self.runs {
            sources.push(Source::run(run.file)?);
        }
        sources.push(Source::Held(std::mem::take(&mut self.held).into_iter()));
        Sorted::new(sources)
    }

    /// Writes the held rows as a run. Runs are merged in tiers, as a
    /// log-structured store does: `max_runs` runs of one tier become one
    /// of the next, so each row is rewritten a few times at most, and a
    /// few hundred files at most are open.
    fn spill(&mut self) -> io::Result<()> {
        // Nothing is let go before it is on disk: a run that cannot be
        // written leaves the rows held, a merge that fails leaves its runs.
        // Written in order where they lie: they are dropped next.
        let held = &self.held;
        let run = write_run(
            id_order(held)
                .into_iter()
                .map(|(_, i)| Ok(&held[i as usize])),
        )?;
        self.held.clear();
        self.held_bytes = 0;
        self.runs.push(Run { file: run, tier: 0 });
        loop {
            let Some(tier) = self.runs.last().map(|r| r.tier) else {
                return Ok(());
            };
            let same = self
                .runs
                .iter()
                .rev()
                .take_while(|r| r.tier == tier)
                .count();
            if same < self.max_runs {
                return Ok(());
            }
            let from = self.runs.len() - same;
            let merged = self.runs[from..]
                .iter()
                .map(|r| Source::run(r.file.try_clone()?))
                .collect::<io::Result<Vec<Source>>>()
                .and_then(Sorted::new)
                .and_then(write_run);
            let merged = match merged {
                Ok(merged) => merged,
                Err(e) => {
                    // The clones share their file's position.
                    for r in &mut self.runs[from..] {
                        r.file.rewind()?;
                    }
                    return Err(e);
                }
            };
            self.runs.truncate(from);
            self.runs.push(Run {
                file: merged,
                tier: tier + 1,
            });
        }
    }
}

/// Sorted rows on disk.
struct Run {
    file: File,
    /// 0 for rows written as held, `k + 1` for runs of tier `k` merged.
    tier: u32,
}

impl StackSink for SortedRows {
    fn row(&mut self, row: StackStats) {
        self.rows += 1;
        self.held_bytes += row_bytes(&row);
        self.held.push(row);
        if self.held_bytes > self.budget && self.spill_error.is_none() {
            if let Err(e) = self.spill() {
                self.spill_error = Some(e);
            }
        }
    }

    fn restart(&mut self) {
        self.held.clear();
        self.held_bytes = 0;
        self.runs.clear();
        self.rows = 0;
    }
}

/// What a held row takes: the row and, at most, its name and threads on
/// the heap.
fn row_bytes(row: &StackStats) -> usize {
    std::mem::size_of::<StackStats>() + row.name.len() + 8 * row.threads.len()
}

/// The places of `rows` in the order of their ids, stably (rows of one id
/// keep the order they came in), with each row's id: a few bytes a row,
/// where a sort of the rows themselves takes a scratch as large as they.
fn id_order(rows: &[StackStats]) -> Vec<(StackKey, u32)> {
    let mut order: Vec<(StackKey, u32)> = rows.iter().zip(0..).map(|(r, i)| (r.id, i)).collect();
    // The places break ties, so any sort is stable here; this one finds
    // the runs rows come in (stacks mostly finish in the order they began).
    order.sort();
    order
}

/// Sorts `rows` by id, stably, in place ([`id_order`], then each row
/// moved to its place: each cycle of that permutation followed once, a
/// swap a place).
fn sort_by_id(rows: &mut [StackStats]) {
    let mut order = id_order(rows);
    for start in 0..order.len() {
        let mut place = start;
        loop {
            let from = order[place].1 as usize;
            order[place].1 = place as u32;
            if from == start {
                break;
            }
            rows.swap(place, from);
            place = from;
        }
    }
}

/// Writes `rows` (ascending by id) to a new temporary file, rewound.
fn write_run<R: Borrow<StackStats>>(rows: impl Iterator<Item = io::Result<R>>) -> io::Result<File> {
    let mut file = BufWriter::with_capacity(1 << 16, tempfile::tempfile()?);
    let mut bytes = Vec::new();
    for row in rows {
        bytes.clear();
        encode(row?.borrow(), &mut bytes);
        file.write_all(&bytes)?;
    }
    let mut file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.rewind()?;
    Ok(file)
}

/// The rows of every source merged, ascending by id; of equal ids, the
/// earlier source's first.
pub struct Sorted {
    sources: Vec<Source>,
    /// Each source's next row's id and the source.
    heads: BinaryHeap<Reverse<(StackKey, usize)>>,
    next: Vec<Option<StackStats>>,
}

impl Sorted {
    fn new(mut sources: Vec<Source>) -> io::Result<Sorted> {
        let mut heads = BinaryHeap::with_capacity(sources.len());
        let mut next = Vec::with_capacity(sources.len());
        for (i, source) in sources.iter_mut().enumerate() {
            let row = source.next_row()?;
            if let Some(r) = &row {
                heads.push(Reverse((r.id, i)));
            }
            next.push(row);
        }
        Ok(Sorted {
            sources,
            heads,
            next,
        })
    }

    fn next_row(&mut self) -> io::Result<Option<StackStats>> {
        let Some(Reverse((_, i))) = self.heads.pop() else {
            return Ok(None);
        };
        let following = self.sources[i].next_row()?;
        if let Some(r) = &following {
            self.heads.push(Reverse((r.id, i)));
        }
        Ok(std::mem::replace(&mut self.next[i], following))
    }
}

impl Iterator for Sorted {
    type Item = io::Result<StackStats>;

    fn next(&mut self) -> Option<io::Result<StackStats>> {
        self.next_row().transpose()
    }
}

/// Where [`Sorted`] takes rows from: a run on disk or the rows held.
enum Source {
    Run(BufReader<File>),
    Held(std::vec::IntoIter<StackStats>),
}

impl Source {
    fn run(file: File) -> io::Result<Source> {
        Ok(Source::Run(BufReader::with_capacity(1 << 13, file)))
    }

    fn next_row(&mut self) -> io::Result<Option<StackStats>> {
        match self {
            Source::Run(r) => decode(r),
            Source::Held(rows) => Ok(rows.next()),
        }
    }
}

// A row in a run: id kind (0 own stack, 1 logical) as a byte, the ended
// flag (bit 0) and the stack's kind's value (the bits above) as a byte, max_depth (u32), the id and the six u64 counters, then
// the thread count (u32) and threads (u64 each), then the name's length
// (u32) and its UTF-8 bytes; little-endian. Only this process reads it.

fn encode(row: &StackStats, out: &mut Vec<u8>) {
    let (kind, id) = match row.id {
        StackKey::Own(t) => (0u8, t),
        StackKey::Logical(s) => (1u8, s),
    };
    out.push(kind);
    // Kinds' values are small (see `StackKind::ALL`).
    out.push(row.ended as u8 | (row.kind.value() as u8) << 1);
    out.extend_from_slice(&row.max_depth.to_le_bytes());
    for n in [
        id,
        row.running_ns,
        row.paused_ns,
        row.scheduled_ns,
        row.waiting_ns,
        row.switches_in,
        row.events,
    ] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(&(row.threads.len() as u32).to_le_bytes());
    for t in &row.threads {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.extend_from_slice(&(row.name.len() as u32).to_le_bytes());
    out.extend_from_slice(row.name.as_bytes());
}

/// The next row of a run, `None` at its end.
fn decode(r: &mut impl Read) -> io::Result<Option<StackStats>> {
    let mut head = [0u8; 2 + 4 + 7 * 8];
    match r.read(&mut head[..1])? {
        0 => return Ok(None),
        _ => r.read_exact(&mut head[1..])?,
    }
    let u32_at = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| {
        let at = 6 + 8 * i;
        u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"))
    };
    let id = match head[0] {
        0 => StackKey::Own(u64_at(0)),
        1 => StackKey::Logical(u64_at(0)),
        _ => return Err(bad("stack kind")),
    };
    // Inline when short, as the row held them: no allocation for most.
    let threads = (0..read_u32(r)?)
        .map(|_| read_u64(r))
        .collect::<io::Result<ThreadList>>()?;
    let len = read_u32(r)?;
    let name = if len as usize <= SHORT_NAME {
        let mut bytes = [0; SHORT_NAME];
        r.read_exact(&mut bytes[..len as usize])?;
        StackName::new(std::str::from_utf8(&bytes[..len as usize]).map_err(|_| bad("name"))?)
    } else {
        let mut bytes = Vec::new();
        if r.take(len.into()).read_to_end(&mut bytes)? != len as usize {
            return Err(bad("name length"));
        }
        String::from_utf8(bytes).map_err(|_| bad("name"))?.into()
    };
    Ok(Some(StackStats {
        id,
        name,
        threads,
        running_ns: u64_at(1),
        paused_ns: u64_at(2),
        scheduled_ns: u64_at(3),
        waiting_ns: u64_at(4),
        switches_in: u64_at(5),
        max_depth: u32_at(2),
        events: u64_at(6),
        ended: head[1] & 1 != 0,
        kind: StackKind::from_value(u32::from(head[1] >> 1)),
    }))
}

/// Names up to this long are read without an allocation.
const SHORT_NAME: usize = 64;

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a spilled stack row has a bad {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: StackKey, n: u64) -> StackStats {
        StackStats {
            // Every kind, so the run's byte for it is read back as written.
            kind: StackKind::ALL[(n % StackKind::ALL.len() as u64) as usize],
            id,
            name: format!("task-{n}-{}", "x".repeat((n % 40) as usize))
                .as_str()
                .into(),
            threads: (0..n % 5).map(|t| t * 7 + n).collect(),
            running_ns: n,
            paused_ns: n * 3,
            scheduled_ns: n / 2,
            waiting_ns: n * 3 - n / 2,
            switches_in: n % 11,
            max_depth: (n % 13) as u32,
            events: n * 2,
            ended: n.is_multiple_of(2),
        }
    }

    /// `n` rows, logical ids scrambled, a few own stacks among them.
    fn scrambled(n: u64) -> Vec<StackStats> {
        (0..n)
            .map(|i| {
                let k = (i * 7919) % n.max(1);
                match k % 97 {
                    0 => row(StackKey::Own(k), k),
                    _ => row(StackKey::Logical(k), k),
                }
            })
            .collect()
    }

    #[test]
    fn rows_come_back_by_id_whatever_the_budget() {
        for n in [0u64, 1, 2, 50, 3000] {
            let rows = scrambled(n);
            let mut want = rows.clone();
            want.sort_by_key(|r| r.id);
            for (budget, max_runs) in [(usize::MAX, 64), (1, 64), (1, 2), (1, 3), (5000, 4)] {
                let mut sorted = SortedRows::with_max_runs(budget, max_runs);
                for r in rows.iter().cloned() {
                    sorted.row(r);
                }
                assert_eq!(sorted.len(), n);
                assert!(sorted.spill_error().is_none());
                // Fewer than `max_runs` of each tier.
                let tiers = (n as f64).log(max_runs as f64).ceil() as usize + 1;
                assert!(sorted.runs() < max_runs * tiers, "{} runs", sorted.runs());
                if budget == 1 && n > 0 {
                    assert!(sorted.runs() > 0, "a budget of 1 byte spills");
                }
                let got: Vec<StackStats> = sorted
                    .into_sorted()
                    .expect("merges")
                    .collect::<io::Result<_>>()
                    .expect("reads back");
                assert_eq!(got, want, "{n} rows, budget {budget}, {max_runs} runs");
            }
        }
    }

    #[test]
    fn rows_of_one_id_keep_the_order_they_came_in() {
        // Ids repeat (a few values), so the sort's ties show.
        let rows: Vec<StackStats> = (0..500u64)
            .map(|n| {
                let k = (n * 7919) % 13;
                row(
                    if k % 5 == 0 {
                        StackKey::Own(k)
                    } else {
                        StackKey::Logical(k)
                    },
                    n,
                )
            })
            .collect();
        let mut want = rows.clone();
        want.sort_by_key(|r| r.id);
        for budget in [usize::MAX, 3000] {
            let mut sorted = SortedRows::new(budget);
            for r in rows.iter().cloned() {
                sorted.row(r);
            }
            let got: Vec<StackStats> = sorted.into_sorted().unwrap().map(Result::unwrap).collect();
            assert_eq!(got, want, "budget {budget}");
        }
    }

    #[test]
    fn a_restart_forgets_the_rows_held_and_spilled() {
        let mut sorted = SortedRows::new(1000);
        for r in scrambled(100) {
            sorted.row(r);
        }
        assert!(sorted.runs() > 0);
        sorted.restart();
        assert_eq!((sorted.len(), sorted.runs()), (0, 0));
        let rows = scrambled(10);
        for r in rows.iter().cloned() {
            sorted.row(r);
        }
        let got: Vec<StackStats> = sorted.into_sorted().unwrap().map(Result::unwrap).collect();
        let mut want = rows;
        want.sort_by_key(|r| r.id);
        assert_eq!(got, want);
    }

    #[test]
    fn a_damaged_run_is_an_error_not_a_panic() {
        let mut bytes = Vec::new();
        encode(&row(StackKey::Logical(3), 9), &mut bytes);
        for cut in 1..bytes.len() {
            assert!(decode(&mut &bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(decode(&mut &bytes[..0]).unwrap(), None);
        let mut kind = bytes.clone();
        kind[0] = 9;
        assert!(decode(&mut &kind[..]).is_err());
    }
}

//! Logical stacks' names, by stack id: kept as positions in the file's
//! metadata when the records come sorted and dense, else as names.

use std::borrow::Cow;

use mtrace_format::meta;
use mtrace_format::MetaRecordRef;

use mtanalyze_model::report::StackName;

/// Logical stacks' names, by stack id. The recorder numbers stacks in the
/// order it names them, so the records usually come sorted and dense:
/// then only where each record is is kept (4 bytes a stack, not the
/// name), and a name is read from the file when asked for. Half a
/// million task names are 2 MB, not 16. Records in any other order are
/// kept as names, sorted by id. Either way a later record for an id wins,
/// as it would in a map.
#[derive(Clone, Debug, Default)]
pub(crate) struct StackNames<'a> {
    table: NameTable<'a>,
    /// How many stacks the metadata names when the names are not kept
    /// ([`super::decode`]'s `keep_names`).
    counted: usize,
}

impl StackNames<'_> {
    /// Only counted: the metadata names `counted` stacks.
    pub(super) fn counted(mut self, counted: usize) -> Self {
        self.counted = counted;
        self
    }
}

#[derive(Clone, Debug)]
enum NameTable<'a> {
    /// Stacks `first..first + records.len()`: `records[i]` is the offset
    /// in `region` of the record naming stack `first + i`, or [`UNNAMED`]
    /// (a record past 4 GiB into the file turns the table into names).
    InFile {
        region: &'a [u8],
        first: u64,
        records: Vec<u32>,
        /// Entries that are [`UNNAMED`].
        holes: usize,
    },
    /// (id, name), ascending by id, one an id.
    Owned(Vec<(u64, StackName)>),
}

impl Default for NameTable<'_> {
    fn default() -> Self {
        NameTable::Owned(Vec::new())
    }
}

/// A stack in [`NameTable::InFile`]'s range that no record names.
const UNNAMED: u32 = u32::MAX;

/// Ids a dense table may skip (unnamed stacks) beyond one per name.
const HOLES_ALLOWED: usize = 1024;

impl<'a> StackNames<'a> {
    /// From names in file order.
    #[cfg(test)]
    pub(crate) fn new(names: Vec<(u64, StackName)>) -> StackNames<'static> {
        StackNames {
            table: NameTable::Owned(sorted_by_id(names)),
            counted: 0,
        }
    }

    /// An empty table whose names will be read from `region` (the trace
    /// file, whose metadata log may lie in several parts: a record's place
    /// is its file offset) where they can.
    pub(super) fn in_file(region: &'a [u8]) -> StackNames<'a> {
        StackNames {
            table: NameTable::InFile {
                region,
                first: 0,
                records: Vec::new(),
                holes: 0,
            },
            counted: 0,
        }
    }

    /// Adds the record at `at` in the region, naming stack `id` `name`
    /// (records in file order; the name's bytes are only read, and made
    /// valid UTF-8, if the names are kept rather than their places).
    pub(super) fn push(&mut self, id: u64, at: usize, name: &[u8]) {
        if let NameTable::InFile {
            first,
            records,
            holes,
            ..
        } = &mut self.table
        {
            let at = u32::try_from(at).ok().filter(|&at| at != UNNAMED);
            let next = first.checked_add(records.len() as u64);
            if let (Some(at), Some(next)) = (at, next) {
                match records.last_mut() {
                    None => {
                        *first = id;
                        records.push(at);
                        return;
                    }
                    Some(last) if id == next - 1 => {
                        // Renamed: the later record wins.
                        *last = at;
                        return;
                    }
                    Some(_) => {}
                }
                let gap = id.saturating_sub(next);
                let fits = usize::try_from(gap)
                    .is_ok_and(|gap| *holes + gap <= records.len() - *holes + 1 + HOLES_ALLOWED);
                if id >= next && fits {
                    records.extend(std::iter::repeat_n(UNNAMED, gap as usize));
                    *holes += gap as usize;
                    records.push(at);
                    return;
                }
            }
            self.table =
                NameTable::Owned(self.iter().map(|(i, n)| (i, StackName::new(&n))).collect());
        }
        if let NameTable::Owned(names) = &mut self.table {
            names.push((id, StackName::new(&mtrace_format::meta::text(name))));
        }
    }

    /// Done pushing: owned names are sorted by id, a later record winning.
    pub(super) fn finish(mut self) -> StackNames<'a> {
        if let NameTable::Owned(names) = &mut self.table {
            *names = sorted_by_id(std::mem::take(names));
        }
        self
    }

    /// How many names (at most one an id; if they were only counted, the
    /// records naming a stack other than the record before).
    pub(crate) fn len(&self) -> usize {
        let kept = match &self.table {
            NameTable::InFile { records, holes, .. } => records.len() - holes,
            NameTable::Owned(names) => names.len(),
        };
        kept.max(self.counted)
    }

    /// The name of stack `id`.
    pub(crate) fn get(&self, id: u64) -> Option<Cow<'_, str>> {
        match &self.table {
            NameTable::InFile {
                region,
                first,
                records,
                ..
            } => {
                let i = usize::try_from(id.checked_sub(*first)?).ok()?;
                read_name(region, *records.get(i)?)
            }
            NameTable::Owned(names) => {
                let i = names.binary_search_by_key(&id, |(k, _)| *k).ok()?;
                Some(Cow::Borrowed(&names[i].1))
            }
        }
    }

    /// (id, name) pairs, ascending by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, Cow<'_, str>)> + '_ {
        let (in_file, owned) = match &self.table {
            NameTable::InFile {
                region,
                first,
                records,
                ..
            } => (Some((*region, *first, records)), None),
            NameTable::Owned(names) => (None, Some(names)),
        };
        let in_file = in_file.into_iter().flat_map(|(region, first, records)| {
            // `first + i` is an id some record named, or between two.
            (0u64..)
                .zip(records)
                .filter_map(move |(i, &at)| Some((first + i, read_name(region, at)?)))
        });
        let owned = owned
            .into_iter()
            .flatten()
            .map(|(id, name)| (*id, Cow::Borrowed(name.as_str())));
        in_file.chain(owned)
    }
}

/// The stack name in the record at `at` of `region` (`None` for
/// [`UNNAMED`]; every other offset is one [`decode`](super::decode) read a stack record at).
fn read_name(region: &[u8], at: u32) -> Option<Cow<'_, str>> {
    if at == UNNAMED {
        return None;
    }
    match meta::record_at(region, at as usize)? {
        MetaRecordRef::Stack { name, .. } => Some(mtrace_format::meta::text(name)),
        _ => None,
    }
}

/// `names` (in file order) sorted by id, one an id: the later record wins.
fn sorted_by_id(mut names: Vec<(u64, StackName)>) -> Vec<(u64, StackName)> {
    if !names.is_sorted_by_key(|(id, _)| *id) {
        names.sort_by_key(|(id, _)| *id); // stable: file order within an id
    }
    // `dedup_by` keeps the first of equal ids: hand it the later name.
    names.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(&mut later.1, &mut kept.1);
        }
        same
    });
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::decode::decode;
    use mtrace_format::MetaRecord;

    fn names(pairs: &[(u64, &str)]) -> StackNames<'static> {
        StackNames::new(pairs.iter().map(|&(id, n)| (id, n.into())).collect())
    }

    #[test]
    fn stack_names_sort_by_id_and_a_later_record_wins() {
        let n = names(&[
            (5, "e"),
            (2, "b"),
            (9, "old"),
            (1, "a"),
            (9, "new"),
            (2, "b2"),
        ]);
        assert_eq!(n.get(9).as_deref(), Some("new"));
        assert_eq!(n.get(2).as_deref(), Some("b2"));
        assert_eq!(n.get(3), None);
        let ids: Vec<u64> = n.iter().map(|(id, _)| id).collect();
        assert_eq!(ids, [1, 2, 5, 9]);
        // Already sorted (the recorder's order), with a repeat.
        let n = names(&[(1, "a"), (2, "b"), (2, "c"), (3, "d")]);
        assert_eq!((n.get(2), n.get(3)), (Some("c".into()), Some("d".into())));
    }

    /// The table read from a metadata region holding `pairs`' records (with
    /// a function record between every two, as a recorder writes them).
    fn from_region(region: &[u8]) -> StackNames<'_> {
        let mut n = StackNames::in_file(region);
        meta::for_each_record_located(region, 0, |at, r| {
            if let MetaRecordRef::Stack { id, name, .. } = r {
                n.push(id.0, at, name);
            }
        });
        n.finish()
    }

    #[test]
    fn stack_names_read_from_the_file_are_the_names_a_map_would_keep() {
        let dense: Vec<(u64, String)> = (7..400).map(|i| (i, format!("task-{i}"))).collect();
        let mut renamed = dense.clone();
        renamed.insert(50, (renamed[49].0, "again".into()));
        let gaps: Vec<(u64, String)> = dense.iter().filter(|(i, _)| i % 3 != 0).cloned().collect();
        let mut far = dense.clone();
        far.push((1 << 40, "far".into()));
        let mut back = dense.clone();
        back.push((9, "back".into()));
        back.push((1000, "after".into()));
        let descending: Vec<(u64, String)> = dense.iter().rev().cloned().collect();
        let ends = vec![
            (u64::MAX - 1, "a".into()),
            (u64::MAX, "b".into()),
            (0, "c".into()),
        ];
        let lone = vec![(u64::MAX, "top".into())];
        for (case, pairs) in [
            ("dense", dense),
            ("renamed", renamed),
            ("gaps", gaps),
            ("far", far),
            ("back", back),
            ("descending", descending),
            ("ends", ends),
            ("lone", lone),
            ("none", vec![]),
        ] {
            let mut region = Vec::new();
            for (i, (id, name)) in pairs.iter().enumerate() {
                encode_stack_record(&mut region, *id, name, i as u32);
            }
            let read = from_region(&region);
            let want = names(
                &pairs
                    .iter()
                    .map(|(i, n)| (*i, n.as_str()))
                    .collect::<Vec<_>>(),
            );
            assert_eq!(read.len(), want.len(), "{case}");
            let got: Vec<(u64, String)> = read.iter().map(|(i, n)| (i, n.into())).collect();
            let expected: Vec<(u64, String)> = want.iter().map(|(i, n)| (i, n.into())).collect();
            assert_eq!(got, expected, "{case}");
            for id in pairs
                .iter()
                .flat_map(|(i, _)| [*i, i.wrapping_add(1), i.wrapping_sub(1)])
            {
                assert_eq!(read.get(id), want.get(id), "{case}: stack {id}");
            }
            let in_file = matches!(read.table, NameTable::InFile { .. });
            let expect_in_file = matches!(case, "dense" | "renamed" | "gaps" | "lone" | "none");
            assert_eq!(in_file, expect_in_file, "{case}: where the names are");
        }
    }

    /// A stack record naming `id`, then a function record (`fid`).
    fn encode_stack_record(region: &mut Vec<u8>, id: u64, name: &str, fid: u32) {
        meta::encode_stack(region, mtrace_format::StackId(id), name);
        MetaRecord::Function(mtrace_format::FunctionMeta {
            id: mtrace_format::FunctionId(fid),
            name: format!("f{fid}"),
            file: "x.py".into(),
            line: fid,
            module: String::new(),
        })
        .encode(region);
    }

    #[test]
    fn stack_names_not_kept_are_counted() {
        let text: String = (1..=5)
            .map(|i| {
                format!(
                    "{{\"ts\": {i}, \"tid\": 1, \"ev\": \"switch\", \"stack\": \"task-{i}\"}}\n"
                )
            })
            .collect();
        let trace = crate::input::from_bytes("t", text.into_bytes()).expect("loads");
        let kept = decode(trace.bytes(), None, true).expect("decodes");
        let counted = decode(trace.bytes(), None, false).expect("decodes");
        assert_eq!(kept.stack_names.len(), 5);
        assert_eq!(counted.stack_names.len(), 5);
        let (id, name) = kept.stack_names.iter().next().expect("a name");
        assert_eq!(&*name, "task-1");
        assert_eq!(counted.stack_names.get(id), None);
        assert_eq!(counted.stack_names.iter().count(), 0);
    }
}

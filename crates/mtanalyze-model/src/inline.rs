//! Small values of a stack's row kept inline: its name ([`StackName`]) and
//! the threads it ran on ([`ThreadList`]).
//!
//! A trace of half a million tasks has half a million stack rows. As a
//! `String` and a `Vec<u64>`, each row cost two heap allocations (and the
//! allocator's overhead on each) for a name like `request-123456` and one or
//! two thread ids. These types hold that common case in the row itself, in
//! the 24 bytes a `String` or `Vec` takes anyway; longer names and stacks
//! that ran on more than two threads fall back to one boxed slice.
//! Both read as what they replace (`&str`, `&[u64]`) and are written in
//! JSON the same way.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Bytes of a name kept in the row itself.
const INLINE_NAME: usize = 22;

/// A stack's name: inline up to 22 bytes, else one boxed `str`. Reads as
/// a `&str` (`Deref`, [`StackName::as_str`]); compares, orders, hashes,
/// prints and serializes as its text.
#[derive(Clone)]
pub struct StackName(NameRepr);

#[derive(Clone)]
enum NameRepr {
    Inline { len: u8, bytes: [u8; INLINE_NAME] },
    Heap(Box<str>),
}

const _: () = assert!(std::mem::size_of::<StackName>() == 24);

impl StackName {
    /// The name `s`.
    pub fn new(s: &str) -> StackName {
        if s.len() <= INLINE_NAME {
            let mut bytes = [0u8; INLINE_NAME];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            StackName(NameRepr::Inline {
                len: s.len() as u8,
                bytes,
            })
        } else {
            StackName(NameRepr::Heap(s.into()))
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            NameRepr::Inline { len, bytes } => {
                let bytes = &bytes[..*len as usize];
                debug_assert!(std::str::from_utf8(bytes).is_ok());
                // SAFETY: `new` is the only maker of `Inline`, and it copies
                // `len` bytes of a whole `&str`: valid UTF-8. Checking them
                // again on every read was 7% of a 50,000-task JSON report's
                // instructions (a row's name is read three times).
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
            NameRepr::Heap(s) => s,
        }
    }
}

impl Default for StackName {
    fn default() -> StackName {
        StackName::new("")
    }
}

impl std::ops::Deref for StackName {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for StackName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for StackName {
    fn from(s: &str) -> StackName {
        StackName::new(s)
    }
}

impl From<String> for StackName {
    fn from(s: String) -> StackName {
        if s.len() <= INLINE_NAME {
            StackName::new(&s)
        } else {
            StackName(NameRepr::Heap(s.into_boxed_str()))
        }
    }
}

impl fmt::Display for StackName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl fmt::Debug for StackName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for StackName {
    fn eq(&self, other: &StackName) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for StackName {}

impl PartialOrd for StackName {
    fn partial_cmp(&self, other: &StackName) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StackName {
    fn cmp(&self, other: &StackName) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for StackName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialEq<str> for StackName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for StackName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for StackName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl Serialize for StackName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StackName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<StackName, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Ok(StackName::new(&s))
    }
}

/// Thread ids kept in the row itself.
const INLINE_THREADS: usize = 2;

/// The threads a stack ran on, ascending and distinct: inline up to two
/// (a task that stays on one worker or migrates once), else one boxed
/// slice. Reads as a `&[u64]` (`Deref`, [`ThreadList::as_slice`]) and
/// serializes as a list of numbers.
#[derive(Clone)]
pub struct ThreadList(ThreadRepr);

#[derive(Clone)]
enum ThreadRepr {
    Inline {
        len: u8,
        tids: [u64; INLINE_THREADS],
    },
    Heap(Box<[u64]>),
}

const _: () = assert!(std::mem::size_of::<ThreadList>() == 24);

impl ThreadList {
    /// No threads.
    pub const fn new() -> ThreadList {
        ThreadList(ThreadRepr::Inline {
            len: 0,
            tids: [0; INLINE_THREADS],
        })
    }

    /// The thread ids, ascending.
    pub fn as_slice(&self) -> &[u64] {
        match &self.0 {
            ThreadRepr::Inline { len, tids } => &tids[..*len as usize],
            ThreadRepr::Heap(tids) => tids,
        }
    }

    /// Adds `tid` in its place, if not there yet.
    pub fn insert(&mut self, tid: u64) {
        let at = match self.as_slice().binary_search(&tid) {
            Ok(_) => return,
            Err(at) => at,
        };
        match &mut self.0 {
            ThreadRepr::Inline { len, tids } if (*len as usize) < INLINE_THREADS => {
                let n = *len as usize;
                tids.copy_within(at..n, at + 1);
                tids[at] = tid;
                *len += 1;
            }
            _ => {
                let mut all = self.as_slice().to_vec();
                all.insert(at, tid);
                self.0 = ThreadRepr::Heap(all.into_boxed_slice());
            }
        }
    }
}

impl Default for ThreadList {
    fn default() -> ThreadList {
        ThreadList::new()
    }
}

impl std::ops::Deref for ThreadList {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        self.as_slice()
    }
}

impl AsRef<[u64]> for ThreadList {
    fn as_ref(&self) -> &[u64] {
        self.as_slice()
    }
}

impl FromIterator<u64> for ThreadList {
    /// The distinct ids of `iter`, ascending.
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> ThreadList {
        let mut list = ThreadList::new();
        for tid in iter {
            list.insert(tid);
        }
        list
    }
}

impl From<Vec<u64>> for ThreadList {
    fn from(tids: Vec<u64>) -> ThreadList {
        tids.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a ThreadList {
    type Item = &'a u64;
    type IntoIter = std::slice::Iter<'a, u64>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl fmt::Debug for ThreadList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl PartialEq for ThreadList {
    fn eq(&self, other: &ThreadList) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for ThreadList {}

impl std::hash::Hash for ThreadList {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialEq<[u64]> for ThreadList {
    fn eq(&self, other: &[u64]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Vec<u64>> for ThreadList {
    fn eq(&self, other: &Vec<u64>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<const N: usize> PartialEq<[u64; N]> for ThreadList {
    fn eq(&self, other: &[u64; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Serialize for ThreadList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ThreadList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<ThreadList, D::Error> {
        Ok(Vec::<u64>::deserialize(deserializer)?.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A name reads back, orders and serializes as the text it was
        /// made from, whether it is kept inline or not.
        #[test]
        fn names_read_back_as_their_text(a in ".{0,40}", b in ".{0,40}") {
            let (na, nb) = (StackName::new(&a), StackName::from(b.clone()));
            proptest::prop_assert_eq!(na.as_str(), a.as_str());
            proptest::prop_assert_eq!(nb.as_str(), b.as_str());
            proptest::prop_assert_eq!(na.cmp(&nb), a.cmp(&b));
            proptest::prop_assert_eq!(serde_json::to_string(&na).unwrap(), serde_json::to_string(&a).unwrap());
            let back: StackName = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
            proptest::prop_assert_eq!(back, na);
        }

        /// Inserting ids in any order gives them ascending and distinct,
        /// as a sorted, deduplicated `Vec` would.
        #[test]
        fn thread_lists_are_sorted_sets(tids in proptest::collection::vec(0u64..6, 0..8)) {
            let list: ThreadList = tids.iter().copied().collect();
            let mut want = tids.clone();
            want.sort_unstable();
            want.dedup();
            proptest::prop_assert_eq!(list.as_slice(), want.as_slice());
            proptest::prop_assert_eq!(serde_json::to_string(&list).unwrap(), serde_json::to_string(&want).unwrap());
            let back: ThreadList = serde_json::from_str(&serde_json::to_string(&want).unwrap()).unwrap();
            proptest::prop_assert_eq!(back, list);
        }
    }

    #[test]
    fn short_names_and_few_threads_stay_inline() {
        assert!(matches!(
            StackName::new("request-123456").0,
            NameRepr::Inline { .. }
        ));
        assert!(matches!(
            StackName::new(&"x".repeat(23)).0,
            NameRepr::Heap(_)
        ));
        let two: ThreadList = [4, 2].into_iter().collect();
        assert!(matches!(two.0, ThreadRepr::Inline { len: 2, .. }));
        let three: ThreadList = [4, 2, 3].into_iter().collect();
        assert_eq!(three, [2, 3, 4]);
    }
}

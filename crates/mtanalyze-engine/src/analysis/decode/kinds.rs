//! Logical stacks' kinds (asyncio task, greenlet, tokio task, span...), by
//! stack id, as their name records give them.

use std::collections::BTreeMap;

use mtrace_format::StackKind;

/// Each logical stack's kind. Stored as runs: a program's stacks are
/// mostly of one kind and numbered in the order they are named, so a
/// trace of half a million tasks keeps a handful of entries, not one a
/// stack. A later record for an id wins, as it does for names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StackKinds {
    /// `at -> kind`: stacks from `at` up to the next key are of `kind`;
    /// stacks below the first key are [`StackKind::Unspecified`].
    runs: BTreeMap<u64, StackKind>,
}

impl StackKinds {
    /// The kind of stack `id`.
    pub(crate) fn get(&self, id: u64) -> StackKind {
        self.runs
            .range(..=id)
            .next_back()
            .map_or(StackKind::Unspecified, |(_, &kind)| kind)
    }

    /// Stack `id` is of `kind` (records in file order).
    pub(super) fn set(&mut self, id: u64, kind: StackKind) {
        let was = self.get(id);
        if was == kind {
            return;
        }
        // The stacks after `id` keep the kind they had.
        if let Some(next) = id.checked_add(1) {
            self.runs.entry(next).or_insert(was);
        }
        self.runs.insert(id, kind);
        // Runs that now continue the one before are merged into it.
        if let Some(next) = id.checked_add(1) {
            if self.runs.get(&next) == Some(&kind) {
                self.runs.remove(&next);
            }
        }
        let before = id
            .checked_sub(1)
            .map_or(StackKind::Unspecified, |below| self.get(below));
        if before == kind {
            self.runs.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_kept_per_id_in_any_order_and_a_later_record_wins() {
        let mut kinds = StackKinds::default();
        let mut want = BTreeMap::new();
        // Ascending runs, a stack out of order, a rename to another kind.
        let records = [
            (1, StackKind::AsyncioTask),
            (2, StackKind::AsyncioTask),
            (3, StackKind::AsyncioTask),
            (10, StackKind::Greenlet),
            (11, StackKind::Greenlet),
            (5, StackKind::Program),
            (2, StackKind::CallbackContext),
            (u64::MAX, StackKind::Span),
        ];
        for (id, kind) in records {
            kinds.set(id, kind);
            want.insert(id, kind);
        }
        for id in [0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 12, u64::MAX - 1, u64::MAX] {
            let expected = match want.get(&id) {
                Some(&k) => k,
                // An id no record names: whatever run covers it.
                None => kinds.get(id),
            };
            assert_eq!(kinds.get(id), expected, "{id}");
        }
        assert_eq!(kinds.get(2), StackKind::CallbackContext);
        assert_eq!(kinds.get(3), StackKind::AsyncioTask);
        assert_eq!(kinds.get(5), StackKind::Program);
        assert_eq!(kinds.get(0), StackKind::Unspecified);
        // One kind for a thousand stacks in order: one run.
        let mut many = StackKinds::default();
        for id in 1..=1000 {
            many.set(id, StackKind::TokioTask);
        }
        // One run, and where it stops.
        assert_eq!(many.runs.len(), 2);
    }
}

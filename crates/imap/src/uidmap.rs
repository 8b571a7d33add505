//! Message sequence numbers ↔ UIDs for a selected mailbox, kept in a
//! compressed bitmap (roaring): rank gives a UID's sequence number and
//! select the UID of a sequence number. A session with a 20,000-message
//! mailbox selected holds a few kilobytes whatever holes expunges left,
//! not 20,000 numbers: idle sessions stay small.

use roaring::RoaringBitmap;
use store::Uid;

/// The UIDs of a mailbox view, ascending; position `i` is message `i + 1`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct UidMap {
    set: RoaringBitmap,
}

impl UidMap {
    /// A map from runs `(first, count)`.
    pub(crate) fn from_runs(runs: &[(Uid, u32)]) -> UidMap {
        let mut set = RoaringBitmap::new();
        for &(first, len) in runs.iter().filter(|(_, len)| *len > 0) {
            set.insert_range(first..=first.saturating_add(len - 1));
        }
        UidMap { set }
    }

    /// A map of ascending UIDs.
    #[cfg(test)]
    pub(crate) fn from_sorted(uids: impl IntoIterator<Item = Uid>) -> UidMap {
        UidMap {
            set: uids.into_iter().collect(),
        }
    }

    /// Messages in the view.
    pub(crate) fn len(&self) -> u32 {
        self.set.len() as u32
    }

    /// The highest UID.
    pub(crate) fn last(&self) -> Option<Uid> {
        self.set.max()
    }

    /// Adds a UID higher than every other.
    pub(crate) fn push(&mut self, uid: Uid) {
        debug_assert!(self.last().is_none_or(|l| uid > l));
        self.set.insert(uid);
    }

    /// The UID at position `i` (message `i + 1`).
    pub(crate) fn uid_at(&self, i: u32) -> Option<Uid> {
        self.set.select(i)
    }

    /// Position of a UID in the view.
    pub(crate) fn position(&self, uid: Uid) -> Option<u32> {
        self.set
            .contains(uid)
            .then(|| self.set.rank(uid) as u32 - 1)
    }

    /// How many UIDs are lower than `uid`.
    pub(crate) fn count_below(&self, uid: Uid) -> u32 {
        match uid.checked_sub(1) {
            Some(below) => self.set.rank(below) as u32,
            None => 0,
        }
    }

    /// Removes UIDs (ascending); returns the positions they had, ascending.
    pub(crate) fn remove(&mut self, sorted: &[Uid]) -> Vec<u32> {
        let positions = sorted.iter().filter_map(|u| self.position(*u)).collect();
        for u in sorted {
            self.set.remove(*u);
        }
        positions
    }

    /// Every UID, ascending.
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<Uid> {
        self.set.iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn from_runs_matches_from_sorted() {
        let a = UidMap::from_runs(&[(2, 2), (6, 4)]);
        assert_eq!(a, UidMap::from_sorted([2, 3, 6, 7, 8, 9]));
    }

    #[test]
    fn large_views() {
        let m = UidMap::from_runs(&[(1, 20_000)]);
        assert_eq!(m.len(), 20_000);
        assert_eq!(m.uid_at(19_999), Some(20_000));
        assert_eq!(m.position(1), Some(0));
        assert_eq!(m.last(), Some(20_000));
    }

    proptest! {
        /// The map answers like a plain sorted vector, through pushes and
        /// removals.
        #[test]
        fn behaves_like_a_vector(
            steps in proptest::collection::btree_set(1u32..400, 0..200),
            removals in proptest::collection::vec(proptest::collection::btree_set(1u32..450, 0..40), 0..5),
            more in proptest::collection::btree_set(450u32..500, 0..20),
        ) {
            let mut model: Vec<Uid> = steps.iter().copied().collect();
            let mut map = UidMap::from_sorted(model.iter().copied());
            for r in removals {
                let r: Vec<Uid> = r.into_iter().collect();
                let expected: Vec<u32> = r
                    .iter()
                    .filter_map(|u| model.binary_search(u).ok().map(|i| i as u32))
                    .collect();
                prop_assert_eq!(map.remove(&r), expected);
                model.retain(|u| r.binary_search(u).is_err());
                prop_assert_eq!(map.to_vec(), model.clone());
            }
            for u in more {
                map.push(u);
                model.push(u);
            }
            prop_assert_eq!(map.len() as usize, model.len());
            prop_assert_eq!(map.last(), model.last().copied());
            for (i, u) in model.iter().enumerate() {
                prop_assert_eq!(map.uid_at(i as u32), Some(*u));
                prop_assert_eq!(map.position(*u), Some(i as u32));
            }
            prop_assert_eq!(map.uid_at(model.len() as u32), None);
            for x in 0..510u32 {
                prop_assert_eq!(map.count_below(x) as usize, model.partition_point(|&u| u < x));
                prop_assert_eq!(map.position(x), model.binary_search(&x).ok().map(|i| i as u32));
            }
        }
    }
}

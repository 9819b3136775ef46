//! Sorted 16-bit hashes searched through a table of where each slice of 256 hashes begins.
//!
//! A binary search over all of them costs one dependent load per halving, about ten for the
//! thousand points of a ten-consumer ring, and was most of a `select`; the table narrows a
//! search to the hashes of one slice (a few), for 1 KiB. The ring's points and the
//! entry-bucket selector's bucket starts are searched this way.

use std::ops::Deref;

use super::buckets::RING_SIZE;

/// Hashes in one slice of the table: a lookup's slice is `hash >> SLICE_BITS`.
const SLICE_BITS: u32 = 8;

/// Sorted 16-bit hashes (repeats allowed) and, for each slice of 256 hashes and one past the
/// last, how many of them lie below the slice's first hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortedHashes {
    hashes: Vec<u16>,
    below_slice: Vec<u32>,
}

impl SortedHashes {
    /// The table over `hashes`, which must be in ascending order.
    pub fn new(hashes: Vec<u16>) -> Self {
        debug_assert!(hashes.is_sorted());
        let below_slice = (0..=RING_SIZE >> SLICE_BITS)
            .map(|slice| hashes.partition_point(|&h| u32::from(h) < slice << SLICE_BITS) as u32)
            .collect();
        Self {
            hashes,
            below_slice,
        }
    }

    /// How many hashes lie below `hash`: the index of the first at or above it.
    #[inline]
    pub fn count_below(&self, hash: u16) -> usize {
        let (lo, hi) = self.span(hash);
        lo + self.hashes[lo..hi].partition_point(|&h| h < hash)
    }

    /// How many hashes lie at or below `hash`.
    #[inline]
    pub fn count_at_most(&self, hash: u16) -> usize {
        let (lo, hi) = self.span(hash);
        lo + self.hashes[lo..hi].partition_point(|&h| h <= hash)
    }

    /// The indexes of the hashes in `hash`'s slice: those before lie below the slice, those
    /// from the end on above it.
    #[inline]
    fn span(&self, hash: u16) -> (usize, usize) {
        let slice = usize::from(hash >> SLICE_BITS);
        (
            self.below_slice[slice] as usize,
            self.below_slice[slice + 1] as usize,
        )
    }
}

/// The hashes, ascending.
impl Deref for SortedHashes {
    type Target = [u16];

    fn deref(&self) -> &[u16] {
        &self.hashes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::lcg;

    fn agrees_with_a_binary_search(hashes: Vec<u16>) {
        let sorted = SortedHashes::new(hashes.clone());
        for hash in 0..=u16::MAX {
            assert_eq!(
                sorted.count_below(hash),
                hashes.partition_point(|&h| h < hash)
            );
            assert_eq!(
                sorted.count_at_most(hash),
                hashes.partition_point(|&h| h <= hash)
            );
        }
    }

    #[test]
    fn counts_agree_with_a_binary_search_over_every_hash() {
        agrees_with_a_binary_search(vec![]);
        agrees_with_a_binary_search(vec![0]);
        agrees_with_a_binary_search(vec![u16::MAX]);
        agrees_with_a_binary_search(vec![0, 255, 256, 256, 511, 65_280, u16::MAX]);
        agrees_with_a_binary_search((0..=u16::MAX).collect());
        let mut next = lcg(7);
        for n in [1, 3, 100, 1_000, 20_000] {
            let mut hashes: Vec<u16> = (0..n).map(|_| next() as u16).collect();
            hashes.sort_unstable();
            agrees_with_a_binary_search(hashes);
        }
    }
}

//! The safe cursor (SPEC 8): the last offset such that it and every offset from the first
//! one on are acked or skipped. Out-of-order acks wait in a bitmap that starts at the first
//! offset not yet done, so memory follows the gap between that offset and the furthest ack,
//! not the number of offsets seen; acks further out than the bitmap reaches wait in an
//! ordered set until the bitmap comes to them.
//!
//! Also per-(segment, bucket) checkpoints, one cursor each (PIP-486 checkpoints per bucket).

use std::collections::{BTreeSet, HashMap, VecDeque};

use super::error::{Duplicate, InvalidInput, KernelResult, NotFound, StateResult};

/// The largest offset: offsets are non-negative 64-bit signed integers, like log offsets.
pub const MAX_OFFSET: u64 = i64::MAX as u64;

/// How far past the first offset not done the bitmap reaches (128 KiB of bits).
const DENSE_BITS: u64 = 1 << 20;

/// Checks that `offset` is in `[0, MAX_OFFSET]` and returns it; else an error (`OutOfRange`)
/// that names it `what`.
pub fn check_offset(offset: i128, what: &str) -> KernelResult<u64> {
    u64::try_from(offset)
        .ok()
        .filter(|&o| o <= MAX_OFFSET)
        .ok_or_else(|| InvalidInput::OutOfRange {
            what: what.to_owned(),
            value: offset,
            min: 0,
            max: MAX_OFFSET,
        })
}

/// The safe cursor over offsets from `first_offset` on: its position is the last offset such that
/// it and every offset before it, back to the first, are acked or skipped (done), or None while the
/// first offset is not done.
///
/// Memory follows the gap between the first offset not done and the furthest ack, not the number of
/// offsets seen.
#[derive(Debug, Clone)]
pub struct SafeCursor {
    first: u64,
    /// The first offset not yet done.
    next: u64,
    /// The offset of bit 0 of `words[0]`: a multiple of 64, `next - 64 < word_base <= next`.
    word_base: u64,
    words: VecDeque<u64>,
    far: BTreeSet<u64>,
}

impl SafeCursor {
    /// A cursor with nothing done, at no position. An offset above `MAX_OFFSET` is an error
    /// (`OutOfRange`).
    pub fn new(first_offset: u64) -> KernelResult<Self> {
        let first = check_offset(i128::from(first_offset), "first_offset")?;
        Ok(Self {
            first,
            next: first,
            word_base: first - first % 64,
            words: VecDeque::new(),
            far: BTreeSet::new(),
        })
    }

    /// The offset the cursor starts at: the first one that must be done.
    pub fn first_offset(&self) -> u64 {
        self.first
    }

    /// The last offset with everything from the first offset to it done.
    pub fn position(&self) -> Option<u64> {
        (self.next > self.first).then(|| self.next - 1)
    }

    /// Whether an offset is done: acked, skipped, or before the first offset.
    pub fn is_done(&self, offset: u64) -> bool {
        if offset < self.next {
            return true;
        }
        let bit = offset - self.word_base;
        if bit >= DENSE_BITS {
            return self.far.contains(&offset);
        }
        let word = (bit / 64) as usize;
        self.words
            .get(word)
            .is_some_and(|w| w >> (bit % 64) & 1 == 1)
    }

    /// How many out-of-order acks wait for the gap before them to close.
    pub fn pending(&self) -> usize {
        let below_next = match self.words.front() {
            Some(&w) => (w & ((1u64 << (self.next - self.word_base)) - 1)).count_ones(),
            None => 0,
        };
        let bits: u32 = self.words.iter().map(|w| w.count_ones()).sum();
        (bits - below_next) as usize + self.far.len()
    }

    /// Marks an offset done; the result is the new position when it moved. Duplicate and
    /// already-passed offsets change nothing.
    pub fn ack(&mut self, offset: u64) -> KernelResult<Option<u64>> {
        let offset = check_offset(i128::from(offset), "offset")?;
        let before = self.next;
        self.mark(offset);
        Ok((self.next != before).then(|| self.next - 1))
    }

    /// `ack` for every offset; checked first, so a bad offset changes nothing.
    pub fn ack_many(&mut self, offsets: &[u64]) -> KernelResult<Option<u64>> {
        if let Some(i) = offsets.iter().position(|&o| o > MAX_OFFSET) {
            check_offset(i128::from(offsets[i]), &format!("offsets[{i}]"))?;
        }
        let before = self.next;
        for &offset in offsets {
            self.mark(offset);
        }
        Ok((self.next != before).then(|| self.next - 1))
    }

    fn mark(&mut self, offset: u64) {
        if offset < self.next {
            return;
        }
        let bit = offset - self.word_base;
        if bit >= DENSE_BITS {
            self.far.insert(offset);
            return;
        }
        self.set_bit(bit);
        if offset == self.next {
            self.advance();
        }
    }

    fn set_bit(&mut self, bit: u64) {
        let word = (bit / 64) as usize;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (bit % 64);
    }

    fn advance(&mut self) {
        while let Some(&w) = self.words.front() {
            let shift = self.next - self.word_base;
            let run = u64::from((w >> shift).trailing_ones());
            self.next += run;
            if shift + run < 64 {
                break;
            }
            self.words.pop_front();
            self.word_base += 64;
            self.pull_far();
        }
        if self.words.is_empty() && self.words.capacity() > 1024 {
            self.words.shrink_to_fit();
        }
    }

    /// Moves far acks the bitmap now reaches into it.
    fn pull_far(&mut self) {
        while let Some(&offset) = self.far.first() {
            if offset - self.word_base >= DENSE_BITS {
                break;
            }
            self.far.pop_first();
            self.set_bit(offset - self.word_base);
        }
    }
}

/// One safe cursor per (segment id, bucket index), over that bucket's own offsets.
#[derive(Debug, Clone, Default)]
pub struct BucketCheckpoints {
    cursors: HashMap<(u64, u32), SafeCursor>,
}

impl BucketCheckpoints {
    /// No bucket tracked.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many buckets are tracked (open).
    pub fn len(&self) -> usize {
        self.cursors.len()
    }

    /// True when no bucket is tracked.
    pub fn is_empty(&self) -> bool {
        self.cursors.is_empty()
    }

    /// Starts tracking a bucket from `first_offset`; an open bucket is an error.
    pub fn open(&mut self, segment_id: u64, bucket: u32, first_offset: u64) -> KernelResult<()> {
        if self.cursors.contains_key(&(segment_id, bucket)) {
            return Err(Duplicate::OpenBucket { segment_id, bucket }.into());
        }
        let cursor = SafeCursor::new(first_offset)?;
        self.cursors.insert((segment_id, bucket), cursor);
        Ok(())
    }

    /// Stops tracking a bucket and returns its final position.
    pub fn close(&mut self, segment_id: u64, bucket: u32) -> StateResult<Option<u64>> {
        let cursor = self
            .cursors
            .remove(&(segment_id, bucket))
            .ok_or_else(|| not_open(segment_id, bucket))?;
        Ok(cursor.position())
    }

    /// The cursor of an open bucket; a bucket that is not open is an error (`NotFound::Bucket`).
    pub fn cursor(&self, segment_id: u64, bucket: u32) -> StateResult<&SafeCursor> {
        self.cursors
            .get(&(segment_id, bucket))
            .ok_or_else(|| not_open(segment_id, bucket).into())
    }

    /// Marks `offset` done in an open bucket, as [`SafeCursor::ack`]; the result is the bucket's
    /// new position when it moved. A bucket that is not open (`NotFound::Bucket`) and an offset
    /// above `MAX_OFFSET` (`OutOfRange`) are errors.
    pub fn ack(&mut self, segment_id: u64, bucket: u32, offset: u64) -> StateResult<Option<u64>> {
        let cursor = self
            .cursors
            .get_mut(&(segment_id, bucket))
            .ok_or_else(|| not_open(segment_id, bucket))?;
        Ok(cursor.ack(offset)?)
    }

    /// Acks `(segment_ids[i], buckets[i], offsets[i])` for every i; checked first, so an
    /// unknown bucket or bad offset changes nothing. Returns the buckets whose position
    /// moved, with the new position, in first-moved order.
    pub fn ack_many(
        &mut self,
        segment_ids: &[u64],
        buckets: &[u32],
        offsets: &[u64],
    ) -> StateResult<Vec<((u64, u32), u64)>> {
        if buckets.len() != segment_ids.len() || offsets.len() != segment_ids.len() {
            return Err(InvalidInput::LengthMismatch {
                names: &["segment_ids", "buckets", "offsets"],
                lengths: vec![segment_ids.len(), buckets.len(), offsets.len()],
            }
            .into());
        }
        for (i, (&s, &b)) in segment_ids.iter().zip(buckets).enumerate() {
            if !self.cursors.contains_key(&(s, b)) {
                return Err(not_open(s, b).at(i).into());
            }
            check_offset(i128::from(offsets[i]), &format!("offsets[{i}]"))?;
        }
        let mut moved: Vec<(u64, u32)> = Vec::new();
        for ((&s, &b), &o) in segment_ids.iter().zip(buckets).zip(offsets) {
            let cursor = self
                .cursors
                .get_mut(&(s, b))
                .ok_or_else(|| not_open(s, b))?;
            if cursor.ack(o)?.is_some() && !moved.contains(&(s, b)) {
                moved.push((s, b));
            }
        }
        Ok(moved
            .into_iter()
            .filter_map(|k| Some((k, self.cursors[&k].position()?)))
            .collect())
    }

    /// Every open bucket's position, by (segment id, bucket index).
    pub fn positions(&self) -> Vec<((u64, u32), Option<u64>)> {
        let mut out: Vec<_> = self
            .cursors
            .iter()
            .map(|(&k, c)| (k, c.position()))
            .collect();
        out.sort_unstable();
        out
    }
}

fn not_open(segment_id: u64, bucket: u32) -> NotFound {
    NotFound::Bucket { segment_id, bucket }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_example() {
        let mut c = SafeCursor::new(10).unwrap();
        assert_eq!(c.position(), None);
        assert_eq!(c.ack(10), Ok(Some(10)));
        assert_eq!(c.ack(12), Ok(None));
        assert_eq!(c.ack(13), Ok(None));
        assert_eq!(c.position(), Some(10));
        assert_eq!(c.pending(), 2);
        assert_eq!(c.ack(11), Ok(Some(13)));
        assert_eq!(c.pending(), 0);
    }

    #[test]
    fn duplicates_and_passed_offsets_change_nothing() {
        let mut c = SafeCursor::new(5).unwrap();
        assert_eq!(c.ack(3), Ok(None));
        assert_eq!(c.ack(7), Ok(None));
        assert_eq!(c.ack(7), Ok(None));
        assert_eq!(c.pending(), 1);
        assert_eq!(c.ack_many(&[5, 6, 5]), Ok(Some(7)));
        assert_eq!(c.ack(6), Ok(None));
        assert!(c.is_done(2) && c.is_done(7) && !c.is_done(8));
        assert!(c.ack(MAX_OFFSET + 1).is_err());
        assert!(c.ack_many(&[8, MAX_OFFSET + 1]).is_err());
        assert_eq!(c.position(), Some(7));
    }

    #[test]
    fn far_acks_wait_and_come_back() {
        let mut c = SafeCursor::new(0).unwrap();
        let far = DENSE_BITS * 3 + 5;
        assert_eq!(c.ack(far), Ok(None));
        assert!(c.is_done(far));
        let all: Vec<u64> = (0..far).collect();
        assert_eq!(c.ack_many(&all), Ok(Some(far)));
        assert!(c.far.is_empty());
        assert_eq!(c.pending(), 0);
    }

    #[test]
    fn shuffled_acks_match_a_set_model() {
        let mut c = SafeCursor::new(100).unwrap();
        let mut offsets: Vec<u64> = (100..20_100).collect();
        let mut state = 12345u64;
        for i in (1..offsets.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            offsets.swap(i, (state >> 33) as usize % (i + 1));
        }
        let mut done = std::collections::HashSet::new();
        let mut next = 100;
        for o in offsets {
            done.insert(o);
            while done.contains(&next) {
                next += 1;
            }
            c.ack(o).unwrap();
            assert_eq!(c.position(), (next > 100).then(|| next - 1));
        }
    }

    #[test]
    fn the_top_offset() {
        let mut c = SafeCursor::new(MAX_OFFSET - 1).unwrap();
        assert_eq!(c.ack(MAX_OFFSET), Ok(None));
        assert_eq!(c.ack(MAX_OFFSET - 1), Ok(Some(MAX_OFFSET)));
        assert!(SafeCursor::new(MAX_OFFSET + 1).is_err());
    }

    #[test]
    fn checkpoints_per_bucket() {
        let mut cp = BucketCheckpoints::new();
        cp.open(1, 0, 0).unwrap();
        cp.open(1, 1, 10).unwrap();
        assert!(cp.open(1, 1, 3).is_err());
        assert_eq!(cp.ack(1, 0, 0), Ok(Some(0)));
        assert!(matches!(
            cp.ack(2, 0, 0),
            Err(crate::error::StateError::NotFound(_))
        ));
        assert!(cp.ack_many(&[1, 9], &[1, 9], &[10, 1]).is_err());
        assert_eq!(cp.cursor(1, 1).unwrap().position(), None);
        let moved = cp.ack_many(&[1, 1, 1], &[1, 1, 0], &[10, 11, 2]).unwrap();
        assert_eq!(moved, vec![((1, 1), 11)]);
        assert_eq!(cp.positions(), vec![((1, 0), Some(0)), ((1, 1), Some(11))]);
        assert_eq!(cp.close(1, 1), Ok(Some(11)));
        assert!(cp.close(1, 1).is_err());
    }
}

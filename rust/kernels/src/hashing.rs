//! The pinned key hash (SPEC 1): MurmurHash3_x86_32 with seed 0, split into halves.

use strum::{EnumString, IntoStaticStr, VariantNames};

/// Bumped only if the hash ever changes; routing depends on it never changing.
pub const HASH_VERSION: u32 = 1;

/// MurmurHash3_x86_32, seed 0, of the key's bytes.
#[inline]
pub fn key_hash(key: &[u8]) -> u32 {
    mur3::murmurhash3_x86_32(key, 0)
}

/// The high half of a key hash: which segment (16-bit ring) the key routes to.
#[inline]
pub fn segment_hash(hash: u32) -> u16 {
    (hash >> 16) as u16
}

/// The low half of a key hash: PIP-486's `hashB`, the bucket ring inside a segment.
#[inline]
pub fn bucket_hash(hash: u32) -> u16 {
    hash as u16
}

/// Which half of a key hash picks its segment: the scalable-topic routing rule of a Pulsar
/// release. One rule for every router of a layout (tables, batches, single keys).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, EnumString, IntoStaticStr, VariantNames,
)]
#[strum(serialize_all = "snake_case")]
pub enum SegmentHalf {
    /// Pulsar master since PIP-486: the high half picks the segment and the low half
    /// (hashB) the entry bucket inside it, so the two are independent.
    #[default]
    High,
    /// Pulsar 5.0.0-M1's V5 client: `makeHash(key) & 0xFFFF`, the low half (clearing bit 31
    /// leaves it whole), picks the segment. M1 has no entry buckets: a segment is one
    /// bucket, bucket 0, whatever split points a layout records.
    Low,
}

impl SegmentHalf {
    /// The 16-bit segment-ring hash of a key hash.
    #[inline]
    pub fn segment_hash(self, hash: u32) -> u16 {
        match self {
            Self::High => segment_hash(hash),
            Self::Low => bucket_hash(hash),
        }
    }

    /// The bucket-ring hash (hashB) of a key hash; None where the release has no buckets.
    #[inline]
    pub fn bucket_hash(self, hash: u32) -> Option<u16> {
        match self {
            Self::High => Some(bucket_hash(hash)),
            Self::Low => None,
        }
    }

    /// How many buckets a segment with these split points has under this rule.
    #[inline]
    pub fn bucket_count(self, splits: &[u16]) -> u32 {
        match self {
            // At most 65,535 split points: the count fits in u32.
            Self::High => splits.len() as u32 + 1,
            Self::Low => 1,
        }
    }
}

/// The key hash range of a current Pulsar broker's default (consistent-hashing) selector,
/// `[1, 65535]`: as `(start, size)`.
pub const STICKY_KEY_HASH_RANGE: (u16, u32) = (1, 65_535);

/// Pulsar's `Murmur3_32Hash.makeHash`: the key hash with its sign bit cleared.
#[inline]
pub fn make_hash(hash: u32) -> u32 {
    hash & 0x7FFF_FFFF
}

/// Pulsar's `makeStickyKeyHash(key, range)` from a key hash: `make_hash % size + start`
/// over the range starting at `start` and holding `size` hashes (1 to 65,536, the range
/// inside `[0, 0xFFFF]`); 0 becomes 1, since PIP-379 structures use 0 for "not set".
#[inline]
pub fn sticky_hash_in(hash: u32, start: u16, size: u32) -> u16 {
    // start + (x % size) <= start + size - 1 <= 0xFFFF, so the sum fits in u16.
    let h = u32::from(start) + make_hash(hash) % size;
    match h as u16 {
        0 => 1,
        h => h,
    }
}

/// The classic Key_Shared hash of a current Pulsar broker:
/// `(key_hash & 0x7FFFFFFF) % 65535 + 1`, in `[1, 65535]`.
#[inline]
pub fn sticky_key_hash(key: &[u8]) -> u16 {
    sticky_from_hash(key_hash(key))
}

/// `sticky_key_hash` from a key hash.
#[inline]
pub fn sticky_from_hash(hash: u32) -> u16 {
    let (start, size) = STICKY_KEY_HASH_RANGE;
    sticky_hash_in(hash, start, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(key_hash(b""), 0);
        assert_eq!(key_hash(b"hello"), 0x248B_FA47);
        assert_eq!(
            key_hash(b"The quick brown fox jumps over the lazy dog"),
            0x2E4F_F723
        );
    }

    #[test]
    fn halves_recombine() {
        for key in [
            &b"a"[..],
            b"ab",
            b"abc",
            b"abcd",
            b"abcde",
            "\u{e9}t\u{e9}".as_bytes(),
        ] {
            let h = key_hash(key);
            assert_eq!(
                (u32::from(segment_hash(h)) << 16) | u32::from(bucket_hash(h)),
                h
            );
        }
    }

    #[test]
    fn the_segment_half_picks_the_ring_and_m1_has_one_bucket() {
        let h = 0x1234_ABCD;
        assert_eq!(SegmentHalf::High.segment_hash(h), 0x1234);
        assert_eq!(SegmentHalf::High.bucket_hash(h), Some(0xABCD));
        assert_eq!(SegmentHalf::Low.segment_hash(h), 0xABCD);
        assert_eq!(
            SegmentHalf::Low.segment_hash(make_hash(h | 0x8000_0000)),
            0xABCD
        );
        assert_eq!(SegmentHalf::Low.bucket_hash(h), None);
        assert_eq!(SegmentHalf::High.bucket_count(&[1, 2]), 3);
        assert_eq!(SegmentHalf::Low.bucket_count(&[1, 2]), 1);
        assert_eq!("low".parse::<SegmentHalf>(), Ok(SegmentHalf::Low));
        assert_eq!(SegmentHalf::default(), SegmentHalf::High);
    }

    #[test]
    fn sticky_hash_is_pulsars_make_sticky_key_hash() {
        // (0x248BFA47 & 0x7FFFFFFF) % 65535 + 1
        assert_eq!(sticky_key_hash(b"hello"), 7892);
        assert_eq!(sticky_key_hash(b""), 1);
        assert_eq!(
            sticky_from_hash(0xFFFF_FFFF),
            (0x7FFF_FFFF % 65_535 + 1) as u16
        );
        for h in [0, 1, 65_534, 65_535, 0x8000_0000, 0x8000_FFFE] {
            let s = sticky_from_hash(h);
            assert!((1..=65_535).contains(&s));
            assert_eq!(u32::from(s), (h & 0x7FFF_FFFF) % 65_535 + 1);
        }
    }

    #[test]
    fn zero_becomes_one_only_when_the_range_starts_at_zero() {
        assert_eq!(sticky_hash_in(0, 0, 65_536), 1);
        assert_eq!(sticky_hash_in(65_536, 0, 65_536), 1);
        assert_eq!(sticky_hash_in(0x8000_0005, 0, 65_536), 5);
        assert_eq!(sticky_hash_in(7, 10, 5), 12);
        assert_eq!(sticky_hash_in(u32::MAX, 0xFFFF, 1), 0xFFFF);
    }
}

//! The pinned key hash (SPEC 1): MurmurHash3_x86_32 with seed 0, split into halves.

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

/// The classic Key_Shared hash: `key_hash & 0xFFFF`, with 0 mapped to 1 because
/// PIP-379 structures use 0 for "not set".
#[inline]
pub fn sticky_key_hash(key: &[u8]) -> u16 {
    sticky_from_hash(key_hash(key))
}

#[inline]
pub fn sticky_from_hash(hash: u32) -> u16 {
    match bucket_hash(hash) {
        0 => 1,
        h => h,
    }
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
    fn sticky_hash_is_never_zero() {
        assert_eq!(sticky_from_hash(0x1234_0000), 1);
        assert_eq!(sticky_from_hash(0x1234_0001), 1);
        assert_eq!(sticky_from_hash(0x0000_ABCD), 0xABCD);
        assert_eq!(sticky_key_hash(b""), 1);
    }
}

//! Batches of keys as byte strings: packed from Python objects, or (with the `arrow` feature)
//! Arrow arrays read in place.

use std::mem::MaybeUninit;

#[cfg(feature = "arrow")]
use arrow_array::{Array, BinaryViewArray, GenericBinaryArray, OffsetSizeTrait};

use super::error::{InvalidInput, KernelResult};
use super::hashing::key_hash;
use super::murmur::hash_offsets;
#[cfg(feature = "arrow")]
use super::murmur::Offset;
use super::parallel::collect_pairs;

/// Keys copied end to end into one buffer, Arrow style; never null (nulls are resolved while
/// packing, since that is where the Python objects are seen).
#[derive(Debug, Clone)]
pub struct PackedKeys {
    data: Vec<u8>,
    offsets: Vec<usize>,
}

impl PackedKeys {
    pub fn with_capacity(keys: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(keys + 1);
        offsets.push(0);
        Self {
            data: Vec::with_capacity(bytes),
            offsets,
        }
    }

    pub fn push(&mut self, key: &[u8]) {
        self.data.extend_from_slice(key);
        self.offsets.push(self.data.len());
    }

    /// Pushes a NumPy `U` item: UTF-32 code units in the given byte order, padded with zero
    /// units, as UTF-8. Fails with the first unit that is not a Unicode scalar value, and
    /// then leaves the keys as they were.
    pub fn push_ucs4(&mut self, raw: &[u8], big_endian: bool) -> Result<(), u32> {
        match big_endian {
            true => self.push_utf32::<true>(raw),
            false => self.push_utf32::<false>(raw),
        }
    }

    fn push_utf32<const BIG_ENDIAN: bool>(&mut self, raw: &[u8]) -> Result<(), u32> {
        let unit = |u: &[u8]| {
            let bytes = [u[0], u[1], u[2], u[3]];
            match BIG_ENDIAN {
                true => u32::from_be_bytes(bytes),
                false => u32::from_le_bytes(bytes),
            }
        };
        let len = raw
            .chunks_exact(4)
            .rposition(|u| u != [0; 4])
            .map_or(0, |last| last + 1);
        let units = raw[..len * 4].chunks_exact(4);
        // Keys are mostly ASCII: one byte a unit, in two passes the compiler vectorises.
        if units.clone().all(|u| unit(u) < 0x80) {
            self.data.extend(units.map(|u| unit(u) as u8));
        } else {
            let start = self.data.len();
            for code in units.map(unit) {
                let Some(c) = char::from_u32(code) else {
                    self.data.truncate(start);
                    return Err(code);
                };
                let mut buf = [0u8; 4];
                self.data
                    .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        self.offsets.push(self.data.len());
        Ok(())
    }

    /// The keys, each as its bytes.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.offsets.windows(2).map(|w| &self.data[w[0]..w[1]])
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for PackedKeys {
    fn default() -> Self {
        Self::with_capacity(0, 0)
    }
}

/// One contiguous piece of a key batch. Arrow strings arrive as their binary twins
/// (a zero-copy re-labelling), so only byte layouts differ here. The Arrow layouts come
/// with the `arrow` feature.
#[derive(Debug, Clone)]
pub enum KeyChunk {
    Packed(PackedKeys),
    #[cfg(feature = "arrow")]
    Binary(GenericBinaryArray<i32>),
    #[cfg(feature = "arrow")]
    LargeBinary(GenericBinaryArray<i64>),
    #[cfg(feature = "arrow")]
    BinaryView(BinaryViewArray),
}

impl KeyChunk {
    pub fn len(&self) -> usize {
        match self {
            Self::Packed(k) => k.len(),
            #[cfg(feature = "arrow")]
            Self::Binary(a) => a.len(),
            #[cfg(feature = "arrow")]
            Self::LargeBinary(a) => a.len(),
            #[cfg(feature = "arrow")]
            Self::BinaryView(a) => a.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn first_null(&self) -> Option<usize> {
        match self {
            Self::Packed(_) => None,
            #[cfg(feature = "arrow")]
            Self::Binary(a) => first_null(a),
            #[cfg(feature = "arrow")]
            Self::LargeBinary(a) => first_null(a),
            #[cfg(feature = "arrow")]
            Self::BinaryView(a) => first_null(a),
        }
    }
}

#[cfg(feature = "arrow")]
fn first_null(array: &dyn Array) -> Option<usize> {
    array.nulls()?.iter().position(|valid| !valid)
}

/// A whole batch of keys, with the bytes that stand in for a null key, if any.
#[derive(Debug, Clone, Default)]
pub struct KeyBatch {
    chunks: Vec<KeyChunk>,
    /// Where each chunk starts in the whole batch, and the batch's length last.
    starts: Vec<usize>,
    null_key: Option<Vec<u8>>,
}

impl KeyBatch {
    /// Fails with the position of the first null key when no stand-in is given.
    pub fn new(chunks: Vec<KeyChunk>, null_key: Option<Vec<u8>>) -> KernelResult<Self> {
        let starts: Vec<usize> = std::iter::once(0)
            .chain(chunks.iter().scan(0, |end, c| {
                *end += c.len();
                Some(*end)
            }))
            .collect();
        if null_key.is_none() {
            for (chunk, offset) in chunks.iter().zip(&starts) {
                if let Some(i) = chunk.first_null() {
                    return Err(InvalidInput::NullKey { index: offset + i });
                }
            }
        }
        Ok(Self {
            chunks,
            starts,
            null_key,
        })
    }

    pub fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with every key's bytes in order, the null key's in place of a null.
    pub fn for_each_key(&self, mut f: impl FnMut(&[u8])) {
        #[cfg(feature = "arrow")]
        let null = self.null_key.as_deref().unwrap_or_default();
        for chunk in &self.chunks {
            match chunk {
                KeyChunk::Packed(k) => k.iter().for_each(&mut f),
                #[cfg(feature = "arrow")]
                KeyChunk::Binary(a) => a.iter().for_each(|k| f(k.unwrap_or(null))),
                #[cfg(feature = "arrow")]
                KeyChunk::LargeBinary(a) => a.iter().for_each(|k| f(k.unwrap_or(null))),
                #[cfg(feature = "arrow")]
                KeyChunk::BinaryView(a) => a.iter().for_each(|k| f(k.unwrap_or(null))),
            }
        }
    }

    /// `f(key_hash(key))` for every key, unzipped into two outputs, on up to `threads` threads.
    pub fn map_hashes<A, B, F>(&self, threads: usize, f: F) -> (Vec<A>, Vec<B>)
    where
        A: Send,
        B: Send,
        F: Fn(u32) -> (A, B) + Sync,
    {
        let null_hash = key_hash(self.null_key.as_deref().unwrap_or_default());
        let work = |start: usize, a: &mut [MaybeUninit<A>], b: &mut [MaybeUninit<B>]| {
            let mut buf = [0u32; BLOCK];
            for (k, (a, b)) in a.chunks_mut(BLOCK).zip(b.chunks_mut(BLOCK)).enumerate() {
                let hashes = &mut buf[..a.len()];
                self.hash_range(start + k * BLOCK, hashes, null_hash);
                for ((a, b), &h) in a.iter_mut().zip(b.iter_mut()).zip(hashes.iter()) {
                    let (x, y) = f(h);
                    a.write(x);
                    b.write(y);
                }
            }
        };
        // SAFETY: `work` writes every slot of the equally long chunks it is given.
        unsafe { collect_pairs(self.len(), threads, work) }
    }

    /// Hashes keys `start..start + out.len()` of the whole batch, across chunk boundaries.
    fn hash_range(&self, start: usize, mut out: &mut [u32], null_hash: u32) {
        // Batches may hold many small chunks: find the first one instead of walking to it.
        let first = self
            .starts
            .partition_point(|&s| s <= start)
            .saturating_sub(1);
        let mut at = start;
        for (chunk, &chunk_start) in self.chunks[first..].iter().zip(&self.starts[first..]) {
            if out.is_empty() {
                break;
            }
            let take = (chunk_start + chunk.len() - at).min(out.len());
            let (head, rest) = out.split_at_mut(take);
            chunk.hash_into(at - chunk_start, head, null_hash);
            (out, at) = (rest, at + take);
        }
    }
}

impl KeyChunk {
    /// Hashes keys `s..s + out.len()` of this chunk, nulls as `null_hash`.
    #[cfg_attr(not(feature = "arrow"), allow(unused_variables))]
    fn hash_into(&self, s: usize, out: &mut [u32], null_hash: u32) {
        match self {
            Self::Packed(k) => hash_offsets(&k.data, &k.offsets[s..=s + out.len()], out),
            #[cfg(feature = "arrow")]
            Self::Binary(arr) => hash_binary(arr, s, out, null_hash),
            #[cfg(feature = "arrow")]
            Self::LargeBinary(arr) => hash_binary(arr, s, out, null_hash),
            #[cfg(feature = "arrow")]
            Self::BinaryView(arr) => {
                for (j, slot) in out.iter_mut().enumerate() {
                    *slot = match arr.is_valid(s + j) {
                        true => key_hash(arr.value(s + j)),
                        false => null_hash,
                    };
                }
            }
        }
    }
}

#[cfg(feature = "arrow")]
fn hash_binary<O: OffsetSizeTrait + Offset>(
    arr: &GenericBinaryArray<O>,
    s: usize,
    out: &mut [u32],
    null_hash: u32,
) {
    hash_offsets(
        arr.value_data(),
        &arr.value_offsets()[s..=s + out.len()],
        out,
    );
    if arr.null_count() > 0 {
        for (j, slot) in out.iter_mut().enumerate() {
            if arr.is_null(s + j) {
                *slot = null_hash;
            }
        }
    }
}

/// Keys are hashed a block at a time into a small buffer, so the lane-parallel hash runs
/// over many keys at once and `f` then sees each hash while it is still in cache.
const BLOCK: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "arrow")]
    use arrow_array::{BinaryArray, LargeBinaryArray};

    fn hashes(batch: &KeyBatch, threads: usize) -> Vec<u32> {
        batch.map_hashes(threads, |h| (h, ())).0
    }

    #[cfg(feature = "arrow")]
    #[test]
    fn every_layout_hashes_the_same() {
        let keys: Vec<Vec<u8>> = (0..100_000)
            .map(|i| format!("key-{i}").into_bytes())
            .collect();
        let expected: Vec<u32> = keys.iter().map(|k| key_hash(k)).collect();
        let mut packed = PackedKeys::default();
        keys.iter().for_each(|k| packed.push(k));
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let chunks = vec![
            KeyChunk::Packed(packed),
            KeyChunk::Binary(BinaryArray::from_vec(refs.clone())),
            KeyChunk::LargeBinary(LargeBinaryArray::from_vec(refs.clone())),
            KeyChunk::BinaryView(BinaryViewArray::from_iter_values(refs.iter().copied())),
        ];
        for chunk in chunks {
            let batch = KeyBatch::new(vec![chunk], None).unwrap();
            assert_eq!(hashes(&batch, 1), expected);
            assert_eq!(hashes(&batch, 3), expected);
        }
    }

    #[cfg(feature = "arrow")]
    #[test]
    fn blocks_and_thread_pieces_cross_chunk_boundaries() {
        let keys: Vec<Vec<u8>> = (0..120_000).map(|i| format!("k{i}").into_bytes()).collect();
        let expected: Vec<u32> = keys.iter().map(|k| key_hash(k)).collect();
        let mut chunks = vec![];
        let mut rest: &[Vec<u8>] = &keys;
        for (i, len) in [1, 1500, 0, 40_000, 3, 70_000].into_iter().enumerate() {
            let (head, tail) = rest.split_at(len);
            let refs: Vec<&[u8]> = head.iter().map(Vec::as_slice).collect();
            chunks.push(match i % 3 {
                0 => KeyChunk::Binary(BinaryArray::from_vec(refs)),
                1 => KeyChunk::LargeBinary(LargeBinaryArray::from_vec(refs)),
                _ => KeyChunk::BinaryView(BinaryViewArray::from_iter_values(refs)),
            });
            rest = tail;
        }
        let refs: Vec<&[u8]> = rest.iter().map(Vec::as_slice).collect();
        chunks.push(KeyChunk::Binary(BinaryArray::from_vec(refs)));
        chunks.push(KeyChunk::Binary(BinaryArray::from_vec(vec![])));
        let batch = KeyBatch::new(chunks, None).unwrap();
        for threads in [1, 2, 3] {
            assert_eq!(hashes(&batch, threads), expected);
        }
    }

    #[test]
    fn packed_chunks_hash_across_boundaries() {
        let keys: Vec<Vec<u8>> = (0..5_000).map(|i| format!("k{i}").into_bytes()).collect();
        let expected: Vec<u32> = keys.iter().map(|k| key_hash(k)).collect();
        let mut chunks = vec![];
        let mut rest: &[Vec<u8>] = &keys;
        for len in [1, 1500, 0, 2000, 3] {
            let (head, tail) = rest.split_at(len);
            let mut packed = PackedKeys::default();
            head.iter().for_each(|k| packed.push(k));
            chunks.push(KeyChunk::Packed(packed));
            rest = tail;
        }
        let mut packed = PackedKeys::default();
        rest.iter().for_each(|k| packed.push(k));
        chunks.push(KeyChunk::Packed(packed));
        let batch = KeyBatch::new(chunks, None).unwrap();
        let mut seen = vec![];
        batch.for_each_key(|k| seen.push(k.to_vec()));
        assert_eq!(seen, keys);
        for threads in [1, 2, 3] {
            assert_eq!(hashes(&batch, threads), expected);
        }
    }

    fn utf32(text: &str, big_endian: bool, pad: usize) -> Vec<u8> {
        let units = text
            .chars()
            .map(u32::from)
            .chain(std::iter::repeat_n(0, pad));
        units
            .flat_map(|u| match big_endian {
                true => u.to_be_bytes(),
                false => u.to_le_bytes(),
            })
            .collect()
    }

    #[test]
    fn ucs4_items_decode_in_either_byte_order() {
        let texts = ["Ā", "ab", "", "€uro\u{10FFFF}"];
        for big_endian in [false, true] {
            let mut packed = PackedKeys::default();
            for (text, pad) in texts.iter().zip([0, 2, 3, 1]) {
                packed
                    .push_ucs4(&utf32(text, big_endian, pad), big_endian)
                    .unwrap();
            }
            let keys: Vec<&[u8]> = packed.iter().collect();
            assert_eq!(keys, texts.map(str::as_bytes));
        }
    }

    #[test]
    fn an_invalid_ucs4_unit_leaves_the_keys_as_they_were() {
        let mut packed = PackedKeys::default();
        packed.push(b"x");
        let mut raw = utf32("ab", true, 0);
        raw.extend_from_slice(&0xD800u32.to_be_bytes());
        assert_eq!(packed.push_ucs4(&raw, true), Err(0xD800));
        assert_eq!(
            packed.push_ucs4(&utf32("a", false, 0), true),
            Err(0x6100_0000)
        );
        assert_eq!(packed.iter().collect::<Vec<_>>(), vec![&b"x"[..]]);
        assert_eq!(packed.data, b"x");
    }

    #[cfg(feature = "arrow")]
    #[test]
    fn every_key_is_seen_in_order_with_nulls_as_the_stand_in() {
        let mut packed = PackedKeys::default();
        packed.push(b"p");
        let arr = BinaryArray::from_opt_vec(vec![Some(&b"a"[..]), None]);
        let view = BinaryViewArray::from_iter_values([&b"v"[..]]);
        let chunks = vec![
            KeyChunk::Packed(packed),
            KeyChunk::Binary(arr),
            KeyChunk::BinaryView(view),
        ];
        let batch = KeyBatch::new(chunks, Some(b"n".to_vec())).unwrap();
        let mut seen = vec![];
        batch.for_each_key(|k| seen.push(k.to_vec()));
        assert_eq!(seen, [&b"p"[..], b"a", b"n", b"v"]);
    }

    #[cfg(feature = "arrow")]
    #[test]
    fn nulls_need_a_stand_in() {
        let arr = BinaryArray::from_opt_vec(vec![Some(&b"a"[..]), None]);
        let first = KeyChunk::Binary(BinaryArray::from_vec(vec![&b"x"[..]]));
        let chunks = vec![first, KeyChunk::Binary(arr)];
        let err = KeyBatch::new(chunks.clone(), None).unwrap_err();
        assert_eq!(err, InvalidInput::NullKey { index: 2 });
        let batch = KeyBatch::new(chunks, Some(b"hello".to_vec())).unwrap();
        assert_eq!(
            hashes(&batch, 1),
            vec![key_hash(b"x"), key_hash(b"a"), 0x248B_FA47]
        );
    }
}

//! One key column for every batch call: byte keys (packed from Python objects, or with the
//! `arrow` feature Arrow arrays read in place) or integer keys, each with its nulls. Batch
//! kernels (`KeyMap`) see a run of keys in its own layout, so no layout is matched per key.

use std::mem::MaybeUninit;
use std::ops::Range;

#[cfg(feature = "arrow")]
use arrow_array::{Array, BinaryViewArray, GenericBinaryArray, OffsetSizeTrait};

use super::error::{InvalidInput, KernelResult};
use super::hashing::key_hash;
use super::lanes::{hash_offsets, is_ascii, LaneHash, Offset};
use super::parallel::collect_pairs;

/// Keys copied end to end into one buffer, Arrow style. A null is an empty key whose index
/// is kept, so that the batch replaces it after the keys are mapped.
#[derive(Debug, Clone)]
pub struct PackedKeys {
    data: Vec<u8>,
    offsets: Vec<usize>,
    nulls: Vec<usize>,
}

impl PackedKeys {
    /// No keys yet, with room for `keys` keys of `bytes` bytes in all.
    pub fn with_capacity(keys: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(keys + 1);
        offsets.push(0);
        Self {
            data: Vec::with_capacity(bytes),
            offsets,
            nulls: Vec::new(),
        }
    }

    /// Appends one key. Packing a list of keys runs this once a key, so a short key (most
    /// are) is copied inline, not by a call to `memcpy` for a length it cannot know.
    #[inline]
    pub fn push(&mut self, key: &[u8]) {
        let start = self.data.len();
        self.data.reserve(key.len());
        // SAFETY: the reserve leaves room for `key.len()` bytes after `start`, which the copy
        // writes in full before the length takes them in.
        unsafe {
            copy_short(key, self.data.as_mut_ptr().add(start));
            self.data.set_len(start + key.len());
        }
        self.offsets.push(self.data.len());
    }

    /// Pushes the keys `key(i)` for `i` in `indices` up to the first for which `key` gives
    /// None, and returns that index (`indices.end` when every key was pushed). `push` for a
    /// run of keys: what the run has written is kept in registers, not in the vectors, from
    /// one key to the next.
    #[inline]
    pub fn push_run<'k>(
        &mut self,
        indices: Range<usize>,
        mut key: impl FnMut(usize) -> Option<&'k [u8]>,
    ) -> usize {
        self.offsets.reserve(indices.len());
        let (first_offset, mut end) = (self.offsets.len(), self.data.len());
        let mut pushed = 0;
        let mut stop = indices.end;
        for i in indices {
            let Some(key) = key(i) else {
                stop = i;
                break;
            };
            if self.data.capacity() - end < key.len() {
                self.grow(end, first_offset + pushed, key.len());
            }
            end += key.len();
            // SAFETY: the data has room for the key after its first `end - key.len()` bytes
            // (written), and the offsets room for `indices.len()` more, so for this one.
            unsafe {
                copy_short(key, self.data.as_mut_ptr().add(end - key.len()));
                let offsets = self.offsets.as_mut_ptr().add(first_offset);
                offsets.add(pushed).write(end);
            }
            pushed += 1;
        }
        // SAFETY: the run wrote the bytes and the offsets up to these lengths.
        unsafe {
            self.data.set_len(end);
            self.offsets.set_len(first_offset + pushed);
        }
        stop
    }

    /// Room for `more` bytes after the first `len` bytes of the data, once the keys a run
    /// has written so far (`len` bytes, `offsets` offsets) are taken in.
    #[cold]
    fn grow(&mut self, len: usize, offsets: usize, more: usize) {
        // SAFETY: the run wrote the bytes and the offsets up to these lengths (see push_run).
        unsafe {
            self.data.set_len(len);
            self.offsets.set_len(offsets);
        }
        self.data.reserve(more);
    }

    /// Pushes a null key.
    pub fn push_null(&mut self) {
        self.nulls.push(self.len());
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

    /// The keys, each as its bytes (a null as no bytes).
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.offsets.windows(2).map(|w| &self.data[w[0]..w[1]])
    }

    /// How many keys, nulls included.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there is no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Copies `src` to `dst`: up to 32 bytes as two moves of one power-of-two width that overlap
/// (as `memcpy` does inside), each reading and writing only within the `src.len()` bytes.
///
/// SAFETY: `dst` is valid for writes of `src.len()` bytes and does not overlap `src`.
#[inline(always)]
unsafe fn copy_short(src: &[u8], dst: *mut u8) {
    /// The first and the last `W` bytes of `n >= W`, which together cover all `n <= 2W`.
    #[inline(always)]
    unsafe fn ends<const W: usize>(src: *const u8, dst: *mut u8, n: usize) {
        unsafe {
            let head = src.cast::<[u8; W]>().read_unaligned();
            let tail = src.add(n - W).cast::<[u8; W]>().read_unaligned();
            dst.cast::<[u8; W]>().write_unaligned(head);
            dst.add(n - W).cast::<[u8; W]>().write_unaligned(tail);
        }
    }
    let (s, n) = (src.as_ptr(), src.len());
    // SAFETY: each arm reads `src[..n]` and writes `dst[..n]` only, as the caller allows.
    unsafe {
        match n {
            16..=32 => ends::<16>(s, dst, n),
            8..=15 => ends::<8>(s, dst, n),
            4..=7 => ends::<4>(s, dst, n),
            1..=3 => {
                *dst = *s;
                *dst.add(n / 2) = *s.add(n / 2);
                *dst.add(n - 1) = *s.add(n - 1);
            }
            0 => {}
            _ => std::ptr::copy_nonoverlapping(s, dst, n),
        }
    }
}

impl Default for PackedKeys {
    fn default() -> Self {
        Self::with_capacity(0, 0)
    }
}

#[cfg(test)]
mod packed_tests {
    use super::PackedKeys;

    /// Keys of every length up to past the inline copies, each byte telling its key apart.
    fn keys() -> Vec<Vec<u8>> {
        (0..80u8)
            .map(|n| (0..n).map(|j| n.wrapping_mul(31) ^ j).collect())
            .collect()
    }

    #[test]
    fn push_copies_keys_of_every_length() {
        let keys = keys();
        // No room reserved: every push grows the data at some point.
        let mut packed = PackedKeys::default();
        keys.iter().for_each(|k| packed.push(k));
        assert!(packed.iter().eq(keys.iter().map(Vec::as_slice)));
    }

    #[test]
    fn push_run_stops_at_the_first_key_it_is_not_given() {
        let keys = keys();
        for room in [0, 7, 10_000] {
            let mut packed = PackedKeys::with_capacity(1, room);
            packed.push(b"first");
            let gap = 50;
            let stop = packed.push_run(0..keys.len(), |i| (i != gap).then(|| &keys[i][..]));
            assert_eq!(stop, gap);
            packed.push_null();
            let end = packed.push_run(gap + 1..keys.len(), |i| Some(&keys[i][..]));
            assert_eq!(end, keys.len());
            let mut want: Vec<&[u8]> = vec![b"first"];
            want.extend(keys.iter().enumerate().map(|(i, k)| match i == gap {
                true => &[][..],
                false => &k[..],
            }));
            assert!(packed.iter().eq(want));
            assert_eq!(packed.nulls, [gap + 1]);
        }
    }
}

/// One contiguous piece of a key batch. Arrow strings arrive as their binary twins
/// (a zero-copy re-labelling), so only byte layouts differ here. The Arrow layouts come
/// with the `arrow` feature.
#[derive(Debug, Clone)]
pub enum KeyChunk {
    /// Keys copied end to end into one buffer ([`PackedKeys`]).
    Packed(PackedKeys),
    /// An Arrow binary array with 32-bit offsets (or a string array, relabelled), read in place.
    #[cfg(feature = "arrow")]
    Binary(GenericBinaryArray<i32>),
    /// An Arrow large binary array with 64-bit offsets (or a large string array, relabelled), read
    /// in place.
    #[cfg(feature = "arrow")]
    LargeBinary(GenericBinaryArray<i64>),
    /// An Arrow binary view array (or a string view array, relabelled), read in place.
    #[cfg(feature = "arrow")]
    BinaryView(BinaryViewArray),
}

impl KeyChunk {
    /// How many keys the chunk holds, nulls included.
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

    /// True when the chunk holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn first_null(&self) -> Option<usize> {
        match self {
            Self::Packed(k) => k.nulls.first().copied(),
            #[cfg(feature = "arrow")]
            Self::Binary(a) => first_null(a),
            #[cfg(feature = "arrow")]
            Self::LargeBinary(a) => first_null(a),
            #[cfg(feature = "arrow")]
            Self::BinaryView(a) => first_null(a),
        }
    }

    /// `m` over keys `s..s + a.len()` of this chunk, then `null` where a key is null.
    fn map_piece<M: KeyMap>(
        &self,
        s: usize,
        a: &mut [MaybeUninit<M::A>],
        b: &mut [MaybeUninit<M::B>],
        m: &M,
        null: (M::A, M::B),
    ) {
        let n = a.len();
        match self {
            Self::Packed(k) => m.map(&OffsetKeys::new(&k.data, &k.offsets[s..=s + n]), a, b),
            #[cfg(feature = "arrow")]
            Self::Binary(arr) => m.map(&arrow_keys(arr, s, n), a, b),
            #[cfg(feature = "arrow")]
            Self::LargeBinary(arr) => m.map(&arrow_keys(arr, s, n), a, b),
            #[cfg(feature = "arrow")]
            Self::BinaryView(arr) => m.map(&ViewKeys { arr, s, n }, a, b),
        }
        self.nulls_in(s, n, |i| {
            a[i].write(null.0);
            b[i].write(null.1);
        });
    }

    /// Calls `f(i - s)` for every null key `i` in `s..s + n`.
    fn nulls_in(&self, s: usize, n: usize, mut f: impl FnMut(usize)) {
        #[cfg(feature = "arrow")]
        let from_arrow = |arr: &dyn Array, f: &mut dyn FnMut(usize)| {
            if arr.null_count() > 0 {
                (0..n).filter(|&j| arr.is_null(s + j)).for_each(f);
            }
        };
        match self {
            Self::Packed(k) => {
                let first = k.nulls.partition_point(|&i| i < s);
                let nulls = k.nulls[first..].iter().take_while(|&&i| i < s + n);
                nulls.for_each(|&i| f(i - s));
            }
            #[cfg(feature = "arrow")]
            Self::Binary(arr) => from_arrow(arr, &mut f),
            #[cfg(feature = "arrow")]
            Self::LargeBinary(arr) => from_arrow(arr, &mut f),
            #[cfg(feature = "arrow")]
            Self::BinaryView(arr) => from_arrow(arr, &mut f),
        }
    }
}

#[cfg(feature = "arrow")]
fn first_null(array: &dyn Array) -> Option<usize> {
    array.nulls()?.iter().position(|valid| !valid)
}

#[cfg(feature = "arrow")]
fn arrow_keys<O: OffsetSizeTrait + Offset>(
    arr: &GenericBinaryArray<O>,
    s: usize,
    n: usize,
) -> OffsetKeys<'_, O> {
    OffsetKeys::new(arr.value_data(), &arr.value_offsets()[s..=s + n])
}

/// A run of keys in one layout, as a batch kernel reads it.
pub trait Keys: Sized {
    /// How many keys the run holds.
    fn len(&self) -> usize;

    /// True when the run holds no key.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `out[i] = f(key i)` for every key of the run (`out` is as long as the run).
    fn fill<T>(&self, out: &mut [MaybeUninit<T>], f: impl FnMut(&[u8]) -> T);

    /// `hash` of every key into `out` (as long as the run).
    fn hash_into(&self, hash: LaneHash, out: &mut [u32]);

    /// Keys `start..start + len` of the run.
    fn slice(&self, start: usize, len: usize) -> Self;

    /// Whether every key is ASCII, asked of the whole run at once where it is contiguous
    /// (false where that cannot be told so cheaply).
    fn all_ascii(&self) -> bool;

    /// Whether every key is valid UTF-8, likewise.
    fn all_utf8(&self) -> bool;
}

/// Keys laid end to end: key `i` is `data[offsets[i]..offsets[i + 1]]`.
pub struct OffsetKeys<'a, O> {
    data: &'a [u8],
    /// The run's offsets, then those of the keys after it in the same buffer, whose bytes
    /// the lanes ask for early while they hash the run (`lanes::hash_offsets`).
    offsets: &'a [O],
    len: usize,
}

impl<'a, O: Offset> OffsetKeys<'a, O> {
    /// `offsets` ascend and lie inside `data`; it holds one more entry than there are keys.
    pub fn new(data: &'a [u8], offsets: &'a [O]) -> Self {
        Self {
            data,
            offsets,
            len: offsets.len().saturating_sub(1),
        }
    }

    /// The offsets of the run's own keys.
    fn run(&self) -> &'a [O] {
        &self.offsets[..self.offsets.len().min(self.len + 1)]
    }

    /// The bytes of all the run's keys.
    fn span(&self) -> &'a [u8] {
        match (self.run().first(), self.run().last()) {
            (Some(a), Some(b)) => &self.data[a.to_usize()..b.to_usize()],
            _ => &[],
        }
    }
}

impl<O: Offset> Keys for OffsetKeys<'_, O> {
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn fill<T>(&self, out: &mut [MaybeUninit<T>], mut f: impl FnMut(&[u8]) -> T) {
        let data = self.data;
        for (slot, w) in out.iter_mut().zip(self.run().windows(2)) {
            slot.write(f(&data[w[0].to_usize()..w[1].to_usize()]));
        }
    }

    fn hash_into(&self, hash: LaneHash, out: &mut [u32]) {
        hash_offsets(hash, self.data, self.offsets, out);
    }

    /// The slice keeps the offsets after it, so that hashing it asks for the next keys.
    fn slice(&self, start: usize, len: usize) -> Self {
        assert!(
            start + len <= self.len,
            "keys {start}..{} of {}",
            start + len,
            self.len
        );
        Self {
            data: self.data,
            offsets: &self.offsets[start..],
            len,
        }
    }

    fn all_ascii(&self) -> bool {
        is_ascii(self.span())
    }

    fn all_utf8(&self) -> bool {
        if self.all_ascii() {
            return true;
        }
        // Keys end to end are valid UTF-8 and no key starts inside a character: then each
        // key is valid on its own.
        let starts_whole = self.run().iter().all(|o| {
            self.data
                .get(o.to_usize())
                .is_none_or(|&b| (b as i8) >= -0x40)
        });
        starts_whole && std::str::from_utf8(self.span()).is_ok()
    }
}

/// Keys `s..s + n` of an Arrow view array.
#[cfg(feature = "arrow")]
struct ViewKeys<'a> {
    arr: &'a BinaryViewArray,
    s: usize,
    n: usize,
}

#[cfg(feature = "arrow")]
impl Keys for ViewKeys<'_> {
    fn len(&self) -> usize {
        self.n
    }

    fn fill<T>(&self, out: &mut [MaybeUninit<T>], mut f: impl FnMut(&[u8]) -> T) {
        for (j, slot) in out.iter_mut().enumerate() {
            slot.write(f(self.arr.value(self.s + j)));
        }
    }

    fn hash_into(&self, hash: LaneHash, out: &mut [u32]) {
        for (j, slot) in out.iter_mut().enumerate() {
            *slot = hash.one(self.arr.value(self.s + j));
        }
    }

    fn slice(&self, start: usize, len: usize) -> Self {
        Self {
            arr: self.arr,
            s: self.s + start,
            n: len,
        }
    }

    fn all_ascii(&self) -> bool {
        false
    }

    fn all_utf8(&self) -> bool {
        false
    }
}

/// A batch kernel: two outputs for every key of a run, written by `map` in one pass.
pub trait KeyMap: Sync {
    /// The first output, one per key.
    type A: Copy + Send + Sync;
    /// The second output, one per key.
    type B: Copy + Send + Sync;

    /// Writes every slot of `a` and `b`, which are as long as the run.
    fn map<K: Keys>(
        &self,
        keys: &K,
        a: &mut [MaybeUninit<Self::A>],
        b: &mut [MaybeUninit<Self::B>],
    );
}

/// `f` over the run a block of keys at a time, with the block's outputs: a block is small
/// enough that its keys are still in cache when `f` reads them a second time.
pub fn by_blocks<K: Keys, A, B>(
    keys: &K,
    a: &mut [MaybeUninit<A>],
    b: &mut [MaybeUninit<B>],
    mut f: impl FnMut(&K, &mut [MaybeUninit<A>], &mut [MaybeUninit<B>]),
) {
    for (k, (a, b)) in a.chunks_mut(BLOCK).zip(b.chunks_mut(BLOCK)).enumerate() {
        f(&keys.slice(k * BLOCK, a.len()), a, b);
    }
}

/// `hash` of each key of a run, a block at a time, then `f` of each hash: the
/// lane-parallel hash runs over many keys at once and `f` sees each hash still in cache.
pub fn map_hashed<K: Keys, A, B>(
    keys: &K,
    hash: LaneHash,
    a: &mut [MaybeUninit<A>],
    b: &mut [MaybeUninit<B>],
    f: impl Fn(u32) -> (A, B),
) {
    let mut buf = [0u32; BLOCK];
    by_blocks(keys, a, b, |keys, a, b| {
        let hashes = &mut buf[..a.len()];
        keys.hash_into(hash, hashes);
        for ((a, b), &h) in a.iter_mut().zip(b.iter_mut()).zip(hashes.iter()) {
            let (x, y) = f(h);
            a.write(x);
            b.write(y);
        }
    });
}

/// The batch kernel of `f(key_hash(key))` for every key.
pub struct Hashed<F>(pub F);

impl<A: Copy + Send + Sync, B: Copy + Send + Sync, F: Fn(u32) -> (A, B) + Sync> KeyMap
    for Hashed<F>
{
    type A = A;
    type B = B;

    fn map<K: Keys>(&self, keys: &K, a: &mut [MaybeUninit<A>], b: &mut [MaybeUninit<B>]) {
        map_hashed(keys, LaneHash::Murmur3, a, b, &self.0);
    }
}

/// A whole batch of byte keys, with the bytes that stand in for a null key, if any.
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
        Self::nullable(chunks).with_null_key(null_key)
    }

    /// This batch with `null_key` standing in for its null keys; without one, fails with
    /// the position of the first null key.
    pub fn with_null_key(self, null_key: Option<Vec<u8>>) -> KernelResult<Self> {
        if null_key.is_none() {
            for (chunk, offset) in self.chunks.iter().zip(&self.starts) {
                if let Some(i) = chunk.first_null() {
                    return Err(InvalidInput::NullKey { index: offset + i });
                }
            }
        }
        Ok(Self { null_key, ..self })
    }

    /// A batch whose null keys stay null: kernels that give a null key its own result
    /// (`KeyBatch::map`) take it; hashes hash one as no bytes.
    pub fn nullable(chunks: Vec<KeyChunk>) -> Self {
        let starts: Vec<usize> = std::iter::once(0)
            .chain(chunks.iter().scan(0, |end, c| {
                *end += c.len();
                Some(*end)
            }))
            .collect();
        Self {
            chunks,
            starts,
            null_key: None,
        }
    }

    /// How many keys the batch holds over all its chunks, nulls included.
    pub fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// True when the batch holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with every key's bytes in order, the null key's in place of a null.
    pub fn for_each_key(&self, mut f: impl FnMut(&[u8])) {
        let null = self.null_key.as_deref().unwrap_or_default();
        for chunk in &self.chunks {
            match chunk {
                KeyChunk::Packed(k) => {
                    let mut nulls = k.nulls.iter().peekable();
                    for (i, key) in k.iter().enumerate() {
                        match nulls.next_if_eq(&&i) {
                            Some(_) => f(null),
                            None => f(key),
                        }
                    }
                }
                #[cfg(feature = "arrow")]
                KeyChunk::Binary(a) => a.iter().for_each(|k| f(k.unwrap_or(null))),
                #[cfg(feature = "arrow")]
                KeyChunk::LargeBinary(a) => a.iter().for_each(|k| f(k.unwrap_or(null))),
                #[cfg(feature = "arrow")]
                KeyChunk::BinaryView(a) => a.iter().for_each(|k| f(k.unwrap_or(null))),
            }
        }
    }

    /// `m` over every key, `null` for each null key, on up to `threads` threads.
    pub fn map<M: KeyMap>(
        &self,
        threads: usize,
        m: &M,
        null: (M::A, M::B),
    ) -> (Vec<M::A>, Vec<M::B>) {
        let work = |start: usize, a: &mut [MaybeUninit<M::A>], b: &mut [MaybeUninit<M::B>]| {
            self.map_range(start, a, b, m, null);
        };
        // SAFETY: `map_range` writes every slot of the equally long chunks it is given.
        unsafe { collect_pairs(self.len(), threads, work) }
    }

    /// `f(key_hash(key))` for every key, unzipped into two outputs, on up to `threads` threads.
    pub fn map_hashes<A, B, F>(&self, threads: usize, f: F) -> (Vec<A>, Vec<B>)
    where
        A: Copy + Send + Sync,
        B: Copy + Send + Sync,
        F: Fn(u32) -> (A, B) + Sync,
    {
        let null = f(key_hash(self.null_key.as_deref().unwrap_or_default()));
        self.map(threads, &Hashed(f), null)
    }

    /// `m` of every key into `a` and `b` (as long as the batch), `null` for a null key, on
    /// the calling thread.
    pub fn map_into<M: KeyMap>(
        &self,
        m: &M,
        null: (M::A, M::B),
        a: &mut [MaybeUninit<M::A>],
        b: &mut [MaybeUninit<M::B>],
    ) {
        assert!(
            a.len() == self.len() && b.len() == self.len(),
            "outputs of {} and {} for {} keys",
            a.len(),
            b.len(),
            self.len()
        );
        self.map_range(0, a, b, m, null);
    }

    /// Maps keys `start..start + a.len()` of the whole batch, across chunk boundaries.
    fn map_range<M: KeyMap>(
        &self,
        start: usize,
        mut a: &mut [MaybeUninit<M::A>],
        mut b: &mut [MaybeUninit<M::B>],
        m: &M,
        null: (M::A, M::B),
    ) {
        // Batches may hold many small chunks: find the first one instead of walking to it.
        let first = self
            .starts
            .partition_point(|&s| s <= start)
            .saturating_sub(1);
        let mut at = start;
        for (chunk, &chunk_start) in self.chunks[first..].iter().zip(&self.starts[first..]) {
            if a.is_empty() {
                break;
            }
            let take = (chunk_start + chunk.len() - at).min(a.len());
            let (a_head, a_rest) = std::mem::take(&mut a).split_at_mut(take);
            let (b_head, b_rest) = std::mem::take(&mut b).split_at_mut(take);
            chunk.map_piece(at - chunk_start, a_head, b_head, m, null);
            (a, b, at) = (a_rest, b_rest, at + take);
        }
    }
}

/// Keys are hashed a block at a time into a small buffer (`map_hashed`).
const BLOCK: usize = 1024;

/// The values of an integer key chunk, by the width they came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntValues {
    /// Keys that came as 32-bit integers.
    Int32(Vec<i32>),
    /// Keys that came as 64-bit integers.
    Int64(Vec<i64>),
}

/// Integer keys of one width, with the indices of the null ones (ascending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntChunk {
    /// The keys' values, a null key's value being ignored.
    pub values: IntValues,
    /// The indices of the null keys within this chunk, ascending.
    pub nulls: Vec<usize>,
}

impl IntChunk {
    /// How many keys the chunk holds, nulls included.
    pub fn len(&self) -> usize {
        match &self.values {
            IntValues::Int32(v) => v.len(),
            IntValues::Int64(v) => v.len(),
        }
    }

    /// True when the chunk holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How integer keys are typed: each chunk by its width (int32 an int, int64 a long), or
/// all as one type. Spark hashes an int and a long apart; Iceberg does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntTyping {
    /// Each chunk by its width: int32 keys as ints, int64 keys as longs.
    #[default]
    ByWidth,
    /// Every key as an int; an int64 key that does not fit one stays a long (callers refuse those
    /// first, [`IntBatch::first_beyond_int`]).
    Int,
    /// Every key as a long.
    Long,
}

/// An integer key and the type it has in its system: Spark hashes an int and a long apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntKey {
    /// A 32-bit int, Java's `int`.
    Int(i32),
    /// A 64-bit long, Java's `long`.
    Long(i64),
}

/// The integer type of a NumPy or Arrow key column, by width and sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntColumn {
    /// The width in bits: 8, 16, 32 or 64.
    pub bits: u32,
    /// Whether the type is signed (`intN`) or unsigned (`uintN`).
    pub signed: bool,
}

impl IntColumn {
    /// Whether the column's keys are ints (true) or longs (false) to Spark: its byte, short
    /// and int columns (int8, int16, int32) all hash as an int (`Murmur3Hash` widens byte
    /// and short), long (int64) as a long. Spark has no unsigned types: uint8 and uint16
    /// fit an int, uint32 needs a long, uint64 fits neither (an error). Iceberg hashes an
    /// int as the long of the same value, so only Spark's buckets depend on this.
    pub fn is_int(self) -> KernelResult<bool> {
        match (self.bits, self.signed) {
            (8 | 16 | 32, true) | (8 | 16, false) => Ok(true),
            (64, true) | (32, false) => Ok(false),
            (bits, signed) => Err(InvalidInput::IntTooWide { bits, signed }),
        }
    }
}

/// A batch of integer keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntBatch {
    /// The chunks, in key order.
    pub chunks: Vec<IntChunk>,
}

impl IntBatch {
    /// How many keys the batch holds over all its chunks, nulls included.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(IntChunk::len).sum()
    }

    /// True when the batch holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first non-null key (index, value) that does not fit an int, where keys are
    /// typed as ints.
    pub fn first_beyond_int(&self, typing: IntTyping) -> Option<(usize, i64)> {
        if typing != IntTyping::Int {
            return None;
        }
        let mut start = 0;
        for chunk in &self.chunks {
            if let IntValues::Int64(v) = &chunk.values {
                let beyond = v.iter().enumerate().find(|&(i, &x)| {
                    i32::try_from(x).is_err() && chunk.nulls.binary_search(&i).is_err()
                });
                if let Some((i, &x)) = beyond {
                    return Some((start + i, x));
                }
            }
            start += chunk.len();
        }
        None
    }

    /// `f` of every key as typed (a long that does not fit an int stays a long: refuse
    /// those first, `first_beyond_int`), `null` for each null key.
    pub fn map<T: Copy + Send>(
        &self,
        threads: usize,
        typing: IntTyping,
        f: impl Fn(IntKey) -> T + Sync,
        null: T,
    ) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        for chunk in &self.chunks {
            let (mut part, _) = match &chunk.values {
                IntValues::Int32(v) => {
                    let key = |x: i32| match typing {
                        IntTyping::Long => IntKey::Long(i64::from(x)),
                        _ => IntKey::Int(x),
                    };
                    super::parallel::map_pairs(v.len(), threads, |i| (f(key(v[i])), ()))
                }
                IntValues::Int64(v) => {
                    let key = |x: i64| match (typing, i32::try_from(x)) {
                        (IntTyping::Int, Ok(x)) => IntKey::Int(x),
                        _ => IntKey::Long(x),
                    };
                    super::parallel::map_pairs(v.len(), threads, |i| (f(key(v[i])), ()))
                }
            };
            chunk.nulls.iter().for_each(|&i| part[i] = null);
            out.append(&mut part);
        }
        out
    }
}

/// A batch of keys as read once from the caller: byte keys or integer keys.
#[derive(Debug, Clone)]
pub enum KeyColumn {
    /// Byte keys: str or bytes, packed or read from Arrow.
    Bytes(KeyBatch),
    /// Integer keys.
    Ints(IntBatch),
}

impl KeyColumn {
    /// How many keys the column holds, nulls included.
    pub fn len(&self) -> usize {
        match self {
            Self::Bytes(b) => b.len(),
            Self::Ints(i) => i.len(),
        }
    }

    /// True when the column holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

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
        // Over 1 MB of keys: on one thread the lanes ask for the next block's keys early.
        let keys: Vec<Vec<u8>> = (0..100_000)
            .map(|i| format!("key-{i}-{}", "x".repeat(i % 17)).into_bytes())
            .collect();
        assert!(keys.iter().map(Vec::len).sum::<usize>() > 1 << 20);
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

    /// A slice answers for its own keys only, though it keeps the offsets after it.
    #[test]
    fn a_slice_of_offset_keys_is_its_own_run() {
        let data = b"abcdefgh\xff\xfe".to_vec();
        let offsets = [0usize, 2, 5, 8, 9, 10];
        let keys = OffsetKeys::new(&data, &offsets);
        let head = keys.slice(1, 2);
        assert_eq!(head.len(), 2);
        assert!(head.all_ascii() && head.all_utf8());
        assert!(!keys.slice(2, 2).all_utf8());
        let mut out = [MaybeUninit::<Vec<u8>>::uninit(), MaybeUninit::uninit()];
        head.fill(&mut out, <[u8]>::to_vec);
        // SAFETY: `fill` wrote both slots.
        let out = out.map(|k| unsafe { k.assume_init() });
        assert_eq!(out, [b"cde".to_vec(), b"fgh".to_vec()]);
        let mut hashes = [0u32; 2];
        head.hash_into(LaneHash::Murmur3, &mut hashes);
        assert_eq!(hashes, [key_hash(b"cde"), key_hash(b"fgh")]);
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

    #[test]
    fn int_columns_take_sparks_types() {
        let column = |bits, signed| IntColumn { bits, signed }.is_int();
        for bits in [8, 16, 32] {
            assert!(column(bits, true).unwrap());
        }
        assert!(!column(64, true).unwrap());
        assert!(column(8, false).unwrap() && column(16, false).unwrap());
        assert!(!column(32, false).unwrap());
        assert!(column(64, false)
            .unwrap_err()
            .to_string()
            .contains("uint64"));
    }
}

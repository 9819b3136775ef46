//! 32-bit key hashes over many keys laid end to end, computed side by side in vector lanes:
//! sixteen keys at a time with AVX-512, eight with AVX2 (MurmurHash3 only), one at a time
//! elsewhere. A hash costs a handful of instructions per 4-byte block, so one key at a time
//! is bound by instruction count; the lanes share each instruction.

use super::hashing::key_hash;
use super::system_hashes::{ascii_string_hash, murmur2};

/// Offsets into a key buffer: Arrow's i32/i64 and our own usize.
pub trait Offset: Copy + Send + Sync {
    /// The offset as an index into the buffer.
    fn to_usize(self) -> usize;

    /// The sixteen offsets at `p`, less `first`, as u32 lanes.
    ///
    /// # Safety
    ///
    /// `p` points at sixteen offsets, each `first` or more and under
    /// `first + 2^32`; the CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    unsafe fn lanes16(p: *const Self, first: usize) -> std::arch::x86_64::__m512i;
}

impl Offset for i32 {
    #[inline]
    fn to_usize(self) -> usize {
        self as usize
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn lanes16(p: *const Self, first: usize) -> std::arch::x86_64::__m512i {
        use std::arch::x86_64::*;
        let v = _mm512_loadu_si512(p as *const __m512i);
        _mm512_sub_epi32(v, _mm512_set1_epi32(first as i32))
    }
}

impl Offset for i64 {
    #[inline]
    fn to_usize(self) -> usize {
        self as usize
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn lanes16(p: *const Self, first: usize) -> std::arch::x86_64::__m512i {
        avx512::narrow16(p as *const u64, first as u64)
    }
}

impl Offset for usize {
    #[inline]
    fn to_usize(self) -> usize {
        self
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn lanes16(p: *const Self, first: usize) -> std::arch::x86_64::__m512i {
        avx512::narrow16(p as *const u64, first as u64)
    }
}

/// The hashes computed many keys at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneHash {
    /// MurmurHash3_x86_32, seed 0: `key_hash`.
    Murmur3,
    /// Kafka's MurmurHash2 (`murmur2`), its Java int as the u32 of the same bits.
    Murmur2,
    /// Java's `String.hashCode` of ASCII keys, each byte its own UTF-16 unit
    /// (`ascii_string_hash`); for ASCII keys only.
    JavaAscii,
}

impl LaneHash {
    /// The hash of one key, computed on its own; the lanes give the same.
    #[inline]
    pub fn one(self, key: &[u8]) -> u32 {
        match self {
            Self::Murmur3 => key_hash(key),
            Self::Murmur2 => murmur2(key) as u32,
            Self::JavaAscii => ascii_string_hash(0, key),
        }
    }
}

/// Hashes key `i` = `data[offsets[i]..offsets[i + 1]]` into `out[i]`; offsets ascend within
/// `data`. `offsets` holds `out.len() + 1` entries or more: those past them are the keys that
/// follow in the same buffer, whose bytes are asked for early (a caller hashing a long run a
/// block at a time passes them, so that the next block is on its way from memory).
pub fn hash_offsets<O: Offset>(hash: LaneHash, data: &[u8], offsets: &[O], out: &mut [u32]) {
    assert!(
        out.is_empty() || offsets.len() > out.len(),
        "{} offsets for {} keys",
        offsets.len(),
        out.len()
    );
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() {
            // SAFETY: the CPU has the features, checked just above.
            unsafe { avx512::hash_offsets(hash, data, offsets, out) };
            return;
        }
        if hash == LaneHash::Murmur3 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            unsafe { avx2::hash_offsets(data, offsets, out) };
            return;
        }
    }
    hash_scalar(hash, data, offsets, out);
}

/// Whether every byte is ASCII: keys' bytes are checked a block at a time before a hash that
/// needs them so, 64 bytes an instruction where the CPU has AVX-512.
pub fn is_ascii(bytes: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        // SAFETY: the CPU has the features, checked just above.
        return unsafe { avx512::is_ascii(bytes) };
    }
    bytes.is_ascii()
}

/// Keys ahead of the block being hashed whose bytes the lanes ask for early. Keys that do
/// not fit the core's cache stream from memory, and the hardware's own prefetch starts over
/// at every 4 KB page: asking 256 keys ahead took about a third off hashing 1M keys of 23
/// bytes from memory, and a tenth from the shared cache.
#[cfg(target_arch = "x86_64")]
const PREFETCH_KEYS: usize = 256;
/// Keys spanning fewer bytes than this are taken to be in the core's cache already (a
/// list's packed piece), where asking early only adds instructions.
#[cfg(target_arch = "x86_64")]
const PREFETCH_ABOVE: usize = 1 << 20;
/// The most bytes asked for per block: past that the hardware's prefetch, which follows a
/// long key within its page, does as well.
#[cfg(target_arch = "x86_64")]
const PREFETCH_SPAN: usize = 4096;

/// Asks for the bytes of keys ahead of the lanes, where the keys (those of the run and those
/// after it) span enough bytes to stream from memory; otherwise does nothing.
#[cfg(target_arch = "x86_64")]
struct Prefetch<'a, O> {
    data: &'a [u8],
    offsets: &'a [O],
    streams: bool,
}

#[cfg(target_arch = "x86_64")]
impl<'a, O: Offset> Prefetch<'a, O> {
    fn new(data: &'a [u8], offsets: &'a [O]) -> Self {
        let span = match (offsets.first(), offsets.last()) {
            (Some(first), Some(last)) => last.to_usize().saturating_sub(first.to_usize()),
            _ => 0,
        };
        Self {
            data,
            offsets,
            streams: span > PREFETCH_ABOVE,
        }
    }

    /// Asks for the bytes of the `count` keys `PREFETCH_KEYS` after key `i`, where there are
    /// so many. Offsets from outside are not trusted: any values only bound the loop, and a
    /// prefetch never faults, whatever the address.
    #[inline]
    fn block(&self, i: usize, count: usize) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        if !self.streams {
            return;
        }
        let from = i + PREFETCH_KEYS;
        let (Some(start), Some(end)) = (self.offsets.get(from), self.offsets.get(from + count))
        else {
            return;
        };
        let start = start.to_usize() & !63;
        let end = end.to_usize().min(start.saturating_add(PREFETCH_SPAN));
        for line in (start..end).step_by(64) {
            let at = self.data.as_ptr().wrapping_add(line) as *const i8;
            // SAFETY: a prefetch is a hint and never faults; the address is only computed.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at) };
        }
    }
}

fn hash_scalar<O: Offset>(hash: LaneHash, data: &[u8], offsets: &[O], out: &mut [u32]) {
    for (slot, w) in out.iter_mut().zip(offsets.windows(2)) {
        *slot = hash.one(&data[w[0].to_usize()..w[1].to_usize()]);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;

#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests {
    use super::*;
    /// Every implementation this CPU runs, for both hashes, against one key at a time.
    /// The keys end to end, and their offsets.
    fn laid_out(keys: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
        let mut data: Vec<u8> = Vec::new();
        let mut offsets = vec![0usize];
        for k in keys {
            data.extend_from_slice(k);
            offsets.push(data.len());
        }
        (data, offsets)
    }

    fn check(keys: &[Vec<u8>], slack: usize) {
        let (mut data, offsets) = laid_out(keys);
        data.extend(std::iter::repeat_n(0xAB, slack));
        assert_eq!(is_ascii(&data), data.is_ascii());
        for hash in [LaneHash::Murmur3, LaneHash::Murmur2, LaneHash::JavaAscii] {
            let want: Vec<u32> = keys.iter().map(|k| hash.one(k)).collect();
            let run = |f: &dyn Fn(&mut [u32])| {
                let mut out = vec![0u32; keys.len()];
                f(&mut out);
                assert_eq!(out, want, "{hash:?}");
            };
            run(&|out| hash_offsets(hash, &data, &offsets, out));
            run(&|out| hash_scalar(hash, &data, &offsets, out));
            #[cfg(target_arch = "x86_64")]
            {
                if avx512::available() {
                    // SAFETY: the CPU has the features, checked just above.
                    run(&|out| unsafe { avx512::hash_offsets(hash, &data, &offsets, out) });
                }
                if hash == LaneHash::Murmur3 && std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2, checked just above.
                    run(&|out| unsafe { avx2::hash_offsets(&data, &offsets, out) });
                }
            }
        }
    }

    fn pseudo_random_keys(n: usize, max_len: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut rng = crate::test_rng::lcg(seed);
        let mut next = move || rng() as usize;
        (0..n)
            .map(|_| (0..next() % (max_len + 1)).map(|_| next() as u8).collect())
            .collect()
    }

    #[test]
    fn lanes_agree_with_one_key_at_a_time() {
        for slack in [0, 3, 64] {
            check(&pseudo_random_keys(1000, 40, 1), slack);
            check(&pseudo_random_keys(333, 100, 2), slack);
            check(&pseudo_random_keys(64, 3, 3), slack);
        }
    }

    /// Keys spanning more than `PREFETCH_ABOVE` bytes, which the lanes ask for ahead.
    #[test]
    fn keys_streamed_from_memory_agree() {
        let keys = pseudo_random_keys(90_000, 40, 4);
        assert!(keys.iter().map(Vec::len).sum::<usize>() > 1 << 20);
        check(&keys, 0);
    }

    /// Offsets past the keys hashed are only asked for early: whatever they hold, even
    /// values that go back or lie outside the buffer, the hashes are the same.
    #[test]
    fn offsets_after_the_keys_change_no_hash() {
        let keys = pseudo_random_keys(70_000, 30, 5);
        let (data, offsets) = laid_out(&keys);
        let n = 50_000;
        for hash in [LaneHash::Murmur3, LaneHash::Murmur2, LaneHash::JavaAscii] {
            let want: Vec<u32> = keys[..n].iter().map(|k| hash.one(k)).collect();
            let mut garbage = offsets[..=n].to_vec();
            garbage.extend([usize::MAX, 0, 1 << 40, 3].repeat(2000));
            for following in [&offsets[..], &garbage[..]] {
                let mut out = vec![0u32; n];
                hash_offsets(hash, &data, following, &mut out);
                assert_eq!(out, want, "{hash:?}");
            }
        }
    }

    #[test]
    fn every_length_in_every_lane() {
        for len in 0..=70 {
            for lane in 0..16 {
                let mut keys = pseudo_random_keys(40, 30, len as u64);
                keys[lane] = (0..len).map(|i| (i * 7 + lane) as u8).collect();
                check(&keys, 0);
            }
        }
    }

    #[test]
    fn one_high_byte_anywhere_is_not_ascii() {
        for len in [0, 1, 63, 64, 65, 200] {
            let ascii = vec![b'k'; len];
            assert!(is_ascii(&ascii));
            for at in 0..len {
                let mut bytes = ascii.clone();
                bytes[at] = 0x80;
                assert!(!is_ascii(&bytes), "{len} {at}");
            }
        }
    }

    /// Offsets that go back (malformed input from outside) are never read in lanes, where a
    /// wrapped offset would read outside the buffer: the one-at-a-time path refuses them.
    #[test]
    #[should_panic]
    fn offsets_that_go_back_are_not_read_in_lanes() {
        let data = vec![b'k'; 64];
        let mut offsets: Vec<usize> = (0..=32).collect();
        offsets[5] = 60;
        let mut out = vec![0; 32];
        hash_offsets(LaneHash::Murmur3, &data, &offsets, &mut out);
    }

    #[test]
    fn offsets_of_every_width_agree() {
        let data = b"hellothe quick brown fox jumps over the lazy dog and more".to_vec();
        let cuts = [0usize, 5, 9, 14, 20, 25, 31, 35, 40, 44, 48, data.len()];
        let mut a = vec![0u32; cuts.len() - 1];
        let mut b = a.clone();
        let mut c = a.clone();
        let murmur3 = LaneHash::Murmur3;
        hash_offsets(murmur3, &data, &cuts, &mut a);
        hash_offsets(murmur3, &data, &cuts.map(|x| x as i32), &mut b);
        hash_offsets(murmur3, &data, &cuts.map(|x| x as i64), &mut c);
        assert_eq!((a.clone(), a.clone()), (b, c));
        assert_eq!(a[0], 0x248B_FA47);
    }
}

//! The lane hashes sixteen keys at a time in AVX-512 lanes, and the ASCII check.

use std::arch::x86_64::*;

use super::{hash_scalar, LaneHash, Offset, Prefetch};

const LANES: usize = 16;
/// Groups of sixteen keys hashed side by side.
const GROUPS: usize = 2;
/// Bytes each lane loads at once: eight 4-byte blocks.
const WINDOW: usize = 32;
const WORDS: usize = WINDOW / 4;
/// Longer keys are rare and go one at a time, which keeps a group's offsets in u32.
const MAX_LANE_KEY: usize = 1 << 20;

pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

/// `GROUPS` groups of sixteen keys read side by side: where the first starts, and their
/// lengths.
struct Block {
    first: usize,
    lens: [__m512i; GROUPS],
    longest: usize,
    shortest: usize,
}

/// A hash written for sixteen lanes.
trait Lanes {
    const HASH: LaneHash;
    /// The state before the first block, of keys of `lens` bytes: zero unless said.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn init(_lens: __m512i) -> __m512i {
        _mm512_setzero_si512()
    }
    /// The state after one whole 4-byte block `k`.
    unsafe fn step(h: __m512i, k: __m512i) -> __m512i;
    /// The hash, from the state after the whole blocks and the 0..3 tail bytes as a
    /// little-endian word (zero above them; `has_tail` where there are any).
    unsafe fn finish(h: __m512i, tail: __m512i, has_tail: __mmask16, lens: __m512i) -> __m512i;
}

#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn hash_offsets<O: Offset>(hash: LaneHash, data: &[u8], offsets: &[O], out: &mut [u32]) {
    match hash {
        LaneHash::Murmur3 => run::<Murmur3, O>(data, offsets, out),
        LaneHash::Murmur2 => run::<Murmur2, O>(data, offsets, out),
        LaneHash::JavaAscii => run::<JavaAscii, O>(data, offsets, out),
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn run<H: Lanes, O: Offset>(data: &[u8], offsets: &[O], out: &mut [u32]) {
    let step = LANES * GROUPS;
    let prefetch = Prefetch::new(data, offsets);
    let mut i = 0;
    while i + step <= out.len() {
        prefetch.block(i, step);
        let edges = &offsets[i..=i + step];
        match hash_block::<H, O>(data, edges) {
            Some(hashes) => {
                for (g, h) in hashes.into_iter().enumerate() {
                    let at = out.as_mut_ptr().add(i + g * LANES);
                    _mm512_storeu_si512(at as *mut __m512i, h);
                }
            }
            None => hash_scalar(H::HASH, data, edges, &mut out[i..i + step]),
        }
        i += step;
    }
    hash_scalar(H::HASH, data, &offsets[i..], &mut out[i..]);
}

/// The block of keys between `edges` (`LANES * GROUPS + 1` of them), if each lane's whole
/// windows stay inside the buffer (they read past the key's end) and no key is too long
/// for the lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn block<O: Offset>(edges: &[O], data_len: usize) -> Option<Block> {
    let first = edges[0].to_usize();
    let span = edges[LANES * GROUPS].to_usize().checked_sub(first)?;
    if span > LANES * GROUPS * MAX_LANE_KEY {
        return None;
    }
    let p = edges.as_ptr();
    let begins: [__m512i; GROUPS] = std::array::from_fn(|g| O::lanes16(p.add(g * LANES), first));
    let lens: [__m512i; GROUPS] = std::array::from_fn(|g| {
        _mm512_sub_epi32(O::lanes16(p.add(g * LANES + 1), first), begins[g])
    });
    let longest = _mm512_reduce_max_epu32(_mm512_max_epu32(lens[0], lens[1])) as usize;
    let shortest = _mm512_reduce_min_epu32(_mm512_min_epu32(lens[0], lens[1])) as usize;
    let reach = longest.div_ceil(WINDOW) * WINDOW;
    // Offsets from outside (Arrow's C interface) are not trusted to ascend, but one that
    // goes back makes a length wrap to above MAX_LANE_KEY, refused below: with every
    // length in range, the starts ascend from 0 and the last is the largest.
    let last_start = first + start(edges, LANES * GROUPS - 1, first);
    (longest <= MAX_LANE_KEY && last_start + reach <= data_len).then_some(Block {
        first,
        lens,
        longest,
        shortest,
    })
}

/// Where key `l` of a block starts after its first key: its offset less the first, as the
/// u32 that `block` checks in its lanes. Read from memory: the compiler would otherwise take
/// it out of the vector `block` loaded, two vector-port instructions a key, where a load and
/// a subtraction use ports the lanes leave idle (about a tenth less time a key).
///
/// SAFETY: `l < edges.len()`.
#[inline(always)]
unsafe fn start<O: Offset>(edges: &[O], l: usize, first: usize) -> usize {
    let offset = std::ptr::read_volatile(edges.as_ptr().add(l));
    offset.to_usize().wrapping_sub(first) as u32 as usize
}

#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn is_ascii(bytes: &[u8]) -> bool {
    let mut lines = bytes.chunks_exact(64);
    let mut high = _mm512_setzero_si512();
    for line in &mut lines {
        high = _mm512_or_si512(high, _mm512_loadu_si512(line.as_ptr() as *const __m512i));
    }
    _mm512_movepi8_mask(high) == 0 && lines.remainder().is_ascii()
}

/// Sixteen u64 at `p`, less `first`, as u32 lanes (they must fit).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn narrow16(p: *const u64, first: u64) -> __m512i {
    let first = _mm512_set1_epi64(first as i64);
    let half = |at: usize| {
        let v = _mm512_loadu_si512(p.add(at) as *const __m512i);
        _mm512_cvtepi64_epi32(_mm512_sub_epi64(v, first))
    };
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(half(0)), half(8))
}

/// The hashes of the block of keys between `edges` (see `block`), its `GROUPS` groups
/// side by side: one group's chain of dependent steps alone would leave the vector units
/// waiting. Each copy has one caller, `run::<H, O>`, which takes it inline.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn hash_block<H: Lanes, O: Offset>(data: &[u8], edges: &[O]) -> Option<[__m512i; GROUPS]> {
    let b = block(edges, data.len())?;
    let data = data.as_ptr();
    let words = b.longest.div_ceil(4);
    let whole_words = b.shortest / 4;
    // Past the longest key's whole blocks a column holds tail bytes only: no lane steps.
    let stepped = b.longest / 4;
    let full_blocks = b.lens.map(|lens| _mm512_srli_epi32::<2>(lens));
    let mut h = b.lens.map(|lens| H::init(lens));
    let mut tail = [_mm512_setzero_si512(); GROUPS];
    for window in 0..words.div_ceil(WORDS) {
        let at = data.add(b.first + window * WINDOW);
        let columns: [[__m512i; WORDS]; GROUPS] =
            std::array::from_fn(|k| columns(at, &edges[k * LANES..], b.first));
        let first = window * WORDS;
        let used = (words - first).min(WORDS);
        let unmasked = whole_words.saturating_sub(first).min(used);
        let stepped = stepped.saturating_sub(first).min(used);
        // `j` picks the same column out of every group's.
        #[allow(clippy::needless_range_loop)]
        for j in 0..WORDS {
            if j < unmasked {
                // A whole block in every lane: nothing to mask.
                for k in 0..GROUPS {
                    h[k] = H::step(h[k], columns[k][j]);
                }
            } else if j < used {
                let bv = _mm512_set1_epi32((first + j) as i32);
                for k in 0..GROUPS {
                    if j < stepped {
                        let active = _mm512_cmpgt_epu32_mask(full_blocks[k], bv);
                        let stepped = H::step(h[k], columns[k][j]);
                        h[k] = _mm512_mask_mov_epi32(h[k], active, stepped);
                    }
                    let is_tail = _mm512_cmpeq_epi32_mask(full_blocks[k], bv);
                    tail[k] = _mm512_mask_mov_epi32(tail[k], is_tail, columns[k][j]);
                }
            }
        }
    }
    Some(std::array::from_fn(|k| {
        let lens = b.lens[k];
        let tail_bytes = _mm512_and_si512(lens, _mm512_set1_epi32(3));
        // A shift by 32 (no tail bytes) clears the whole word.
        let shift = _mm512_slli_epi32::<3>(_mm512_sub_epi32(_mm512_set1_epi32(4), tail_bytes));
        let tail = _mm512_and_si512(tail[k], _mm512_srlv_epi32(_mm512_set1_epi32(-1), shift));
        let has_tail = _mm512_test_epi32_mask(tail_bytes, tail_bytes);
        H::finish(h[k], tail, has_tail, lens)
    }))
}

/// Window `at + start(edges, l, first)` of every lane `l`, as eight columns: column `j` holds each
/// lane's `j`-th 4-byte word. Each 32-byte row is loaded whole and the rows transposed,
/// as lane pairs: rows (0, 4), (1, 5), (2, 6), (3, 7), (8, 12), ... share a register, so
/// that the last step puts the lanes in order.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn columns<O: Offset>(at: *const u8, edges: &[O], first: usize) -> [__m512i; WORDS] {
    let row = |l: usize| _mm256_loadu_si256(at.add(start(edges, l, first)) as *const __m256i);
    let pair = |a: usize| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(row(a)), row(a + 4));
    let z = [
        pair(0),
        pair(1),
        pair(2),
        pair(3),
        pair(8),
        pair(9),
        pair(10),
        pair(11),
    ];
    let t = [
        _mm512_unpacklo_epi32(z[0], z[1]),
        _mm512_unpackhi_epi32(z[0], z[1]),
        _mm512_unpacklo_epi32(z[2], z[3]),
        _mm512_unpackhi_epi32(z[2], z[3]),
        _mm512_unpacklo_epi32(z[4], z[5]),
        _mm512_unpackhi_epi32(z[4], z[5]),
        _mm512_unpacklo_epi32(z[6], z[7]),
        _mm512_unpackhi_epi32(z[6], z[7]),
    ];
    let u = [
        _mm512_unpacklo_epi64(t[0], t[2]),
        _mm512_unpackhi_epi64(t[0], t[2]),
        _mm512_unpacklo_epi64(t[1], t[3]),
        _mm512_unpackhi_epi64(t[1], t[3]),
        _mm512_unpacklo_epi64(t[4], t[6]),
        _mm512_unpackhi_epi64(t[4], t[6]),
        _mm512_unpacklo_epi64(t[5], t[7]),
        _mm512_unpackhi_epi64(t[5], t[7]),
    ];
    // 128-bit lanes of u[w]: words w and w + 4 of rows 0-3 (pair's low half), then of
    // rows 4-7; u[w + 4] likewise for rows 8-15.
    [
        _mm512_shuffle_i32x4::<0x88>(u[0], u[4]),
        _mm512_shuffle_i32x4::<0x88>(u[1], u[5]),
        _mm512_shuffle_i32x4::<0x88>(u[2], u[6]),
        _mm512_shuffle_i32x4::<0x88>(u[3], u[7]),
        _mm512_shuffle_i32x4::<0xDD>(u[0], u[4]),
        _mm512_shuffle_i32x4::<0xDD>(u[1], u[5]),
        _mm512_shuffle_i32x4::<0xDD>(u[2], u[6]),
        _mm512_shuffle_i32x4::<0xDD>(u[3], u[7]),
    ]
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn splat(x: u32) -> __m512i {
    _mm512_set1_epi32(x as i32)
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn mul(a: __m512i, x: u32) -> __m512i {
    _mm512_mullo_epi32(a, splat(x))
}

/// MurmurHash3_x86_32, seed 0.
struct Murmur3;

impl Murmur3 {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn mix_k(k: __m512i) -> __m512i {
        mul(_mm512_rol_epi32::<15>(mul(k, 0xcc9e_2d51)), 0x1b87_3593)
    }
}

impl Lanes for Murmur3 {
    const HASH: LaneHash = LaneHash::Murmur3;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn step(h: __m512i, k: __m512i) -> __m512i {
        let h = _mm512_rol_epi32::<13>(_mm512_xor_si512(h, Self::mix_k(k)));
        // h * 5 + c as (h << 2) + (h + c): the shift and the first add run side by side,
        // one step shorter on the chain each block waits on.
        let h_c = _mm512_add_epi32(h, splat(0xe654_6b64));
        _mm512_add_epi32(_mm512_slli_epi32::<2>(h), h_c)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn finish(h: __m512i, tail: __m512i, _: __mmask16, lens: __m512i) -> __m512i {
        // No tail bytes mix in nothing: mix_k(0) is 0.
        let h = _mm512_xor_si512(_mm512_xor_si512(h, Self::mix_k(tail)), lens);
        let h = _mm512_xor_si512(h, _mm512_srli_epi32::<16>(h));
        let h = mul(h, 0x85eb_ca6b);
        let h = _mm512_xor_si512(h, _mm512_srli_epi32::<13>(h));
        let h = mul(h, 0xc2b2_ae35);
        _mm512_xor_si512(h, _mm512_srli_epi32::<16>(h))
    }
}

/// Kafka's MurmurHash2, seed 0x9747b28c.
struct Murmur2;

const M2: u32 = 0x5bd1_e995;

impl Lanes for Murmur2 {
    const HASH: LaneHash = LaneHash::Murmur2;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn init(lens: __m512i) -> __m512i {
        _mm512_xor_si512(splat(0x9747_b28c), lens)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn step(h: __m512i, k: __m512i) -> __m512i {
        let k = mul(k, M2);
        let k = mul(_mm512_xor_si512(k, _mm512_srli_epi32::<24>(k)), M2);
        _mm512_xor_si512(mul(h, M2), k)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn finish(h: __m512i, tail: __m512i, has_tail: __mmask16, _: __m512i) -> __m512i {
        let h = _mm512_mask_mov_epi32(h, has_tail, mul(_mm512_xor_si512(h, tail), M2));
        let h = _mm512_xor_si512(h, _mm512_srli_epi32::<13>(h));
        let h = mul(h, M2);
        _mm512_xor_si512(h, _mm512_srli_epi32::<15>(h))
    }
}

/// Java's `String.hashCode` of ASCII bytes: `h * 31^4` plus the block's four bytes as
/// base-31 digits, a block at a time.
struct JavaAscii;

impl JavaAscii {
    /// `b0*31^3 + b1*31^2 + b2*31 + b3` of each lane's bytes `b0..b3` (low to high).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn digits(k: __m512i) -> __m512i {
        // Byte pairs times (31, 1), then 16-bit pairs times (961, 1): no sum overflows.
        let pairs = _mm512_maddubs_epi16(k, _mm512_set1_epi16(0x011F));
        _mm512_madd_epi16(pairs, _mm512_set1_epi32(0x0001_03C1))
    }
}

impl Lanes for JavaAscii {
    const HASH: LaneHash = LaneHash::JavaAscii;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn step(h: __m512i, k: __m512i) -> __m512i {
        _mm512_add_epi32(mul(h, 31u32.pow(4)), Self::digits(k))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn finish(h: __m512i, tail: __m512i, _: __mmask16, lens: __m512i) -> __m512i {
        // The r tail bytes moved to the top of the word are r digits (a shift by 32, for
        // no tail, leaves none), and h moves up by 31^r.
        let r = _mm512_and_si512(lens, _mm512_set1_epi32(3));
        let up = _mm512_slli_epi32::<3>(_mm512_sub_epi32(_mm512_set1_epi32(4), r));
        let digits = Self::digits(_mm512_sllv_epi32(tail, up));
        let pow = _mm512_permutexvar_epi32(
            r,
            _mm512_setr_epi32(1, 31, 961, 29791, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        );
        _mm512_add_epi32(_mm512_mullo_epi32(h, pow), digits)
    }
}

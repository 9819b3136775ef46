//! MurmurHash3 of eight keys at a time in AVX2 lanes.

use std::arch::x86_64::*;

use super::{hash_scalar, LaneHash, Offset, Prefetch};

const LANES: usize = 8;
/// Groups of eight keys hashed side by side: one group's hash chain alone leaves the
/// vector units idle while each step waits for the one before.
const GROUPS: usize = 2;
/// Bytes each lane loads at once: eight 4-byte blocks.
const WINDOW: usize = 32;
/// Longer keys are rare and would overflow the i32 lane arithmetic sooner or later.
const MAX_LANE_KEY: usize = 1 << 20;

/// Where the keys of one group start and how long they are.
#[derive(Clone, Copy, Default)]
struct Group {
    starts: [usize; LANES],
    lens: [usize; LANES],
}

impl Group {
    fn read<O: Offset>(offsets: &[O]) -> Self {
        let mut g = Self::default();
        for l in 0..LANES {
            g.starts[l] = offsets[l].to_usize();
            g.lens[l] = offsets[l + 1].to_usize() - g.starts[l];
        }
        g
    }

    /// Each lane reads whole windows, past its own key: they must stay inside the buffer.
    fn fits(&self, data_len: usize) -> bool {
        let longest = self.lens.iter().copied().max().unwrap_or(0);
        let reach = longest.div_ceil(WINDOW) * WINDOW;
        longest <= MAX_LANE_KEY && self.starts.iter().all(|&s| s + reach <= data_len)
    }
}

#[target_feature(enable = "avx2")]
pub unsafe fn hash_offsets<O: Offset>(data: &[u8], offsets: &[O], out: &mut [u32]) {
    let step = LANES * GROUPS;
    let prefetch = Prefetch::new(data, offsets);
    let mut i = 0;
    while i + step <= out.len() {
        prefetch.block(i, step);
        let groups: [Group; GROUPS] =
            std::array::from_fn(|g| Group::read(&offsets[i + g * LANES..]));
        let chunk = &mut out[i..i + step];
        if groups.iter().all(|g| g.fits(data.len())) {
            let hashes = hash_groups(data.as_ptr(), &groups);
            for (g, h) in hashes.iter().enumerate() {
                _mm256_storeu_si256(chunk.as_mut_ptr().add(g * LANES) as *mut __m256i, *h);
            }
        } else {
            hash_scalar(LaneHash::Murmur3, data, &offsets[i..=i + step], chunk);
        }
        i += step;
    }
    hash_scalar(LaneHash::Murmur3, data, &offsets[i..], &mut out[i..]);
}

/// The hashes of `GROUPS` groups of eight keys whose windows all fit the buffer.
#[target_feature(enable = "avx2")]
unsafe fn hash_groups(base: *const u8, groups: &[Group; GROUPS]) -> [__m256i; GROUPS] {
    let lens = groups.iter().flat_map(|g| g.lens);
    let longest = lens.clone().max().unwrap_or(0);
    let whole_words = lens.min().unwrap_or(0) / 4;
    let words = longest.div_ceil(4);
    // Past the longest key's whole blocks a column holds tail bytes only: no lane steps.
    let stepped = longest / 4;
    let len_v: [__m256i; GROUPS] = std::array::from_fn(|g| lanes_of(&groups[g].lens));
    let full_blocks = len_v.map(|v| _mm256_srli_epi32::<2>(v));
    let mut h = [_mm256_setzero_si256(); GROUPS];
    let mut tail = h;
    for window in 0..words.div_ceil(LANES) {
        let columns: [[__m256i; LANES]; GROUPS] = std::array::from_fn(|g| {
            transpose(std::array::from_fn(|l| {
                let at = base.add(groups[g].starts[l] + window * WINDOW);
                _mm256_loadu_si256(at as *const __m256i)
            }))
        });
        // `j` picks the same word out of every group's columns.
        #[allow(clippy::needless_range_loop)]
        for j in 0..LANES {
            let b = window * LANES + j;
            if b >= words {
                break;
            }
            if b < whole_words {
                // A whole block in every lane: nothing to mask.
                for g in 0..GROUPS {
                    h[g] = step(h[g], columns[g][j]);
                }
                continue;
            }
            let bv = _mm256_set1_epi32(b as i32);
            for g in 0..GROUPS {
                if b < stepped {
                    let active = _mm256_cmpgt_epi32(full_blocks[g], bv);
                    h[g] = _mm256_blendv_epi8(h[g], step(h[g], columns[g][j]), active);
                }
                let is_tail = _mm256_cmpeq_epi32(full_blocks[g], bv);
                tail[g] = _mm256_blendv_epi8(tail[g], columns[g][j], is_tail);
            }
        }
    }
    std::array::from_fn(|g| finish(h[g], tail[g], len_v[g]))
}

#[inline]
#[target_feature(enable = "avx2")]
fn lanes_of(v: &[usize; LANES]) -> __m256i {
    let v = v.map(|x| x as i32);
    _mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
}

/// Mixes in the 0..3 tail bytes of each lane's partial word and the length, then fmix.
#[inline]
#[target_feature(enable = "avx2")]
fn finish(h: __m256i, tail: __m256i, len_v: __m256i) -> __m256i {
    // A shift by 32 (no tail bytes) clears the whole word.
    let tail_bytes = _mm256_and_si256(len_v, _mm256_set1_epi32(3));
    let shift = _mm256_slli_epi32::<3>(_mm256_sub_epi32(_mm256_set1_epi32(4), tail_bytes));
    let tail = _mm256_and_si256(tail, _mm256_srlv_epi32(_mm256_set1_epi32(-1), shift));
    fmix(_mm256_xor_si256(_mm256_xor_si256(h, mix_k(tail)), len_v))
}

#[inline]
#[target_feature(enable = "avx2")]
fn rotl<const L: i32, const R: i32>(x: __m256i) -> __m256i {
    _mm256_or_si256(_mm256_slli_epi32::<L>(x), _mm256_srli_epi32::<R>(x))
}

#[inline]
#[target_feature(enable = "avx2")]
fn mix_k(k: __m256i) -> __m256i {
    let k = _mm256_mullo_epi32(k, _mm256_set1_epi32(0xcc9e_2d51_u32 as i32));
    let k = rotl::<15, 17>(k);
    _mm256_mullo_epi32(k, _mm256_set1_epi32(0x1b87_3593))
}

#[inline]
#[target_feature(enable = "avx2")]
fn step(h: __m256i, k: __m256i) -> __m256i {
    let h = rotl::<13, 19>(_mm256_xor_si256(h, mix_k(k)));
    let five_h = _mm256_add_epi32(_mm256_slli_epi32::<2>(h), h);
    _mm256_add_epi32(five_h, _mm256_set1_epi32(0xe654_6b64_u32 as i32))
}

#[inline]
#[target_feature(enable = "avx2")]
fn fmix(h: __m256i) -> __m256i {
    let h = _mm256_xor_si256(h, _mm256_srli_epi32::<16>(h));
    let h = _mm256_mullo_epi32(h, _mm256_set1_epi32(0x85eb_ca6b_u32 as i32));
    let h = _mm256_xor_si256(h, _mm256_srli_epi32::<13>(h));
    let h = _mm256_mullo_epi32(h, _mm256_set1_epi32(0xc2b2_ae35_u32 as i32));
    _mm256_xor_si256(h, _mm256_srli_epi32::<16>(h))
}

/// Rows of eight 4-byte words (one key each) to columns (one word index each).
#[inline]
#[target_feature(enable = "avx2")]
fn transpose(r: [__m256i; LANES]) -> [__m256i; LANES] {
    let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
    let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
    let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
    let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
    let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    let u0 = _mm256_unpacklo_epi64(t0, t2);
    let u1 = _mm256_unpackhi_epi64(t0, t2);
    let u2 = _mm256_unpacklo_epi64(t1, t3);
    let u3 = _mm256_unpackhi_epi64(t1, t3);
    let u4 = _mm256_unpacklo_epi64(t4, t6);
    let u5 = _mm256_unpackhi_epi64(t4, t6);
    let u6 = _mm256_unpacklo_epi64(t5, t7);
    let u7 = _mm256_unpackhi_epi64(t5, t7);
    [
        _mm256_permute2x128_si256::<0x20>(u0, u4),
        _mm256_permute2x128_si256::<0x20>(u1, u5),
        _mm256_permute2x128_si256::<0x20>(u2, u6),
        _mm256_permute2x128_si256::<0x20>(u3, u7),
        _mm256_permute2x128_si256::<0x31>(u0, u4),
        _mm256_permute2x128_si256::<0x31>(u1, u5),
        _mm256_permute2x128_si256::<0x31>(u2, u6),
        _mm256_permute2x128_si256::<0x31>(u3, u7),
    ]
}

//! MurmurHash3_x86_32 (seed 0) over many keys laid end to end, eight keys at a time in AVX2
//! lanes where the CPU has it. A key hash costs a handful of instructions per 4-byte block,
//! so one key at a time is bound by instruction count; eight lanes share each instruction.

/// Offsets into a key buffer: Arrow's i32/i64 and our own usize.
pub trait Offset: Copy + Send + Sync {
    fn to_usize(self) -> usize;
}

impl Offset for i32 {
    #[inline]
    fn to_usize(self) -> usize {
        self as usize
    }
}

impl Offset for i64 {
    #[inline]
    fn to_usize(self) -> usize {
        self as usize
    }
}

impl Offset for usize {
    #[inline]
    fn to_usize(self) -> usize {
        self
    }
}

/// Hashes key `i` = `data[offsets[i]..offsets[i + 1]]` into `out[i]`;
/// `offsets.len() == out.len() + 1` and offsets ascend within `data`.
pub fn hash_offsets<O: Offset>(data: &[u8], offsets: &[O], out: &mut [u32]) {
    debug_assert_eq!(offsets.len(), out.len() + 1);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe { avx2::hash_offsets(data, offsets, out) };
        return;
    }
    hash_scalar(data, offsets, out);
}

fn hash_scalar<O: Offset>(data: &[u8], offsets: &[O], out: &mut [u32]) {
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = super::hashing::key_hash(&data[offsets[i].to_usize()..offsets[i + 1].to_usize()]);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{hash_scalar, Offset};

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
        let mut i = 0;
        while i + step <= out.len() {
            let groups: [Group; GROUPS] =
                std::array::from_fn(|g| Group::read(&offsets[i + g * LANES..]));
            let chunk = &mut out[i..i + step];
            if groups.iter().all(|g| g.fits(data.len())) {
                let hashes = hash_groups(data.as_ptr(), &groups);
                for (g, h) in hashes.iter().enumerate() {
                    _mm256_storeu_si256(chunk.as_mut_ptr().add(g * LANES) as *mut __m256i, *h);
                }
            } else {
                hash_scalar(data, &offsets[i..=i + step], chunk);
            }
            i += step;
        }
        hash_scalar(data, &offsets[i..], &mut out[i..]);
    }

    /// The hashes of `GROUPS` groups of eight keys whose windows all fit the buffer.
    #[target_feature(enable = "avx2")]
    unsafe fn hash_groups(base: *const u8, groups: &[Group; GROUPS]) -> [__m256i; GROUPS] {
        let lens = groups.iter().flat_map(|g| g.lens);
        let longest = lens.clone().max().unwrap_or(0);
        let whole_words = lens.min().unwrap_or(0) / 4;
        let words = longest.div_ceil(4);
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
                    let active = _mm256_cmpgt_epi32(full_blocks[g], bv);
                    h[g] = _mm256_blendv_epi8(h[g], step(h[g], columns[g][j]), active);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::key_hash;

    fn check(keys: &[Vec<u8>], slack: usize) {
        let mut data: Vec<u8> = Vec::new();
        let mut offsets = vec![0usize];
        for k in keys {
            data.extend_from_slice(k);
            offsets.push(data.len());
        }
        data.extend(std::iter::repeat_n(0xAB, slack));
        let mut out = vec![0u32; keys.len()];
        hash_offsets(&data, &offsets, &mut out);
        let want: Vec<u32> = keys.iter().map(|k| key_hash(k)).collect();
        assert_eq!(out, want);
        let mut scalar = vec![0u32; keys.len()];
        hash_scalar(&data, &offsets, &mut scalar);
        assert_eq!(scalar, want);
    }

    fn pseudo_random_keys(n: usize, max_len: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (s >> 33) as usize
        };
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

    #[test]
    fn every_length_in_every_lane() {
        for len in 0..=70 {
            for lane in 0..8 {
                let mut keys = pseudo_random_keys(16, 30, len as u64);
                keys[lane] = (0..len).map(|i| (i * 7 + lane) as u8).collect();
                check(&keys, 0);
            }
        }
    }

    #[test]
    fn offsets_of_every_width_agree() {
        let data = b"hellothe quick brown fox jumps over the lazy dog and more".to_vec();
        let cuts = [0usize, 5, 9, 14, 20, 25, 31, 35, 40, 44, 48, data.len()];
        let mut a = vec![0u32; cuts.len() - 1];
        let mut b = a.clone();
        let mut c = a.clone();
        hash_offsets(&data, &cuts, &mut a);
        hash_offsets(&data, &cuts.map(|x| x as i32), &mut b);
        hash_offsets(&data, &cuts.map(|x| x as i64), &mut c);
        assert_eq!((a.clone(), a.clone()), (b, c));
        assert_eq!(a[0], 0x248B_FA47);
    }
}

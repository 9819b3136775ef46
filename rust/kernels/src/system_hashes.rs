//! Other systems' hashes of one key, each bit-exact with its source: Kafka's murmur2,
//! librdkafka's CRC-32 and FNV-1a, Java's `String.hashCode`, Iceberg's murmur3 and Spark's
//! `hash()`. The partitioners reduce them to partitions; the vector lanes compute some of
//! them over many keys at once.

use super::hashing::key_hash;
use super::jdk_utf8::java_decode_utf8;

/// Kafka's `Utils.murmur2` (MurmurHash2, seed 0x9747b28c), as the signed int Java returns.
/// librdkafka's `rd_murmur2` is the same function.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h = 0x9747_b28c_u32 ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        let mut k = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    // The 1..3 tail bytes as one little-endian word, without a loop over them.
    let tail = match *words.remainder() {
        [a] => Some(u32::from(a)),
        [a, b] => Some(u32::from(a) | u32::from(b) << 8),
        [a, b, c] => Some(u32::from(a) | u32::from(b) << 8 | u32::from(c) << 16),
        _ => None,
    };
    if let Some(tail) = tail {
        h = (h ^ tail).wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// CRC-32 (IEEE, zlib's): librdkafka's `rd_crc32`.
#[inline]
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// FNV-1a, 32 bits: librdkafka's `rd_fnv1a`, Go's `hash/fnv.New32a`.
pub fn fnv1a_32(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// librdkafka's `rd_fnv1a`: FNV-1a as a signed int, made positive by `abs` (librdkafka's
/// change to match Sarama, which takes the remainder first: the partitions agree).
pub fn rd_fnv1a(data: &[u8]) -> u32 {
    (fnv1a_32(data) as i32).unsigned_abs()
}

/// Java's `String.hashCode` over UTF-16 code units: `s[0]*31^(n-1) + ... + s[n-1]`.
pub fn java_string_hash(units: impl IntoIterator<Item = u16>) -> i32 {
    units
        .into_iter()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// `new String(bytes, UTF_8).hashCode()`: for valid UTF-8 (every `str`), the hash of its
/// UTF-16 units; malformed input is replaced as the JDK replaces it.
pub fn java_string_hash_utf8(bytes: &[u8]) -> i32 {
    // ASCII bytes are their own UTF-16 units: the hash of the ASCII prefix needs no
    // decoding, and the decoder starts cleanly after it (an ASCII byte ends no sequence).
    let ascii = match bytes.is_ascii() {
        true => bytes.len(),
        false => bytes
            .iter()
            .position(|b| !b.is_ascii())
            .unwrap_or(bytes.len()),
    };
    let mut h = ascii_string_hash(0, &bytes[..ascii]) as i32;
    java_decode_utf8(&bytes[ascii..], |u| {
        h = h.wrapping_mul(31).wrapping_add(i32::from(u));
    });
    h
}

/// `31^i`, wrapping, for `i` in `0..=8`.
const POW31: [u32; 9] = {
    let mut p = [1u32; 9];
    let mut i = 1;
    while i < 9 {
        p[i] = p[i - 1].wrapping_mul(31);
        i += 1;
    }
    p
};

/// `b[0]*31^7 + b[1]*31^6 + ... + b[7]` (wrapping) of eight bytes read as a little-endian
/// u64: eight steps of Java's hash at once, combined pairwise within the word (SWAR) rather
/// than chained a byte at a time.
#[inline(always)]
fn block8(x: u64) -> u32 {
    const BYTES: u64 = 0x00FF_00FF_00FF_00FF;
    const PAIRS: u64 = 0x0000_FFFF_0000_FFFF;
    // b[2i]*31 + b[2i+1] in each 16-bit lane (at most 255*32: no carry across lanes).
    let pairs = (x & BYTES) * 31 + ((x >> 8) & BYTES);
    // Two pairs a 32-bit lane: p[2i]*31^2 + p[2i+1] (under 2^23).
    let quads = (pairs & PAIRS) * 961 + ((pairs >> 16) & PAIRS);
    (quads as u32)
        .wrapping_mul(POW31[4])
        .wrapping_add((quads >> 32) as u32)
}

/// Java's `String.hashCode` continued from `h` over ASCII bytes (each its own unit),
/// eight bytes a step.
#[inline]
pub fn ascii_string_hash(mut h: u32, bytes: &[u8]) -> u32 {
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    let mut blocks = bytes.chunks_exact(8);
    for b in &mut blocks {
        h = h.wrapping_mul(POW31[8]).wrapping_add(block8(word(b)));
    }
    let rest = blocks.remainder().len();
    if rest > 0 {
        // The last 1..7 bytes as the high bytes of a block whose low bytes are zero, which
        // add nothing: from the key's last eight bytes where it has them.
        let x = match bytes.len() >= 8 {
            true => word(&bytes[bytes.len() - 8..]) >> (8 * (8 - rest)) << (8 * (8 - rest)),
            false => {
                let mut b = [0u8; 8];
                b[8 - rest..].copy_from_slice(bytes);
                u64::from_le_bytes(b)
            }
        };
        h = h.wrapping_mul(POW31[rest]).wrapping_add(block8(x));
    }
    h
}

/// An Iceberg value whose bucket is taken: its hash is murmur3_x86_32 (seed 0) of the
/// value's bytes; an int is hashed as the long of the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcebergValue<'a> {
    /// A string's UTF-8 bytes, or a binary value's bytes.
    Bytes(&'a [u8]),
    /// A long, or an int widened to one: hashed as its 8 little-endian bytes.
    Long(i64),
}

/// Iceberg's 32-bit hash of a value (spec appendix B), as Java's signed int.
pub fn iceberg_hash(value: IcebergValue<'_>) -> i32 {
    match value {
        IcebergValue::Bytes(b) => key_hash(b) as i32,
        IcebergValue::Long(v) => key_hash(&v.to_le_bytes()) as i32,
    }
}

/// The seed of Spark's `hash()` (the `Murmur3Hash` expression).
pub const SPARK_SEED: u32 = 42;

/// A Spark value whose `hash()` is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparkValue<'a> {
    /// A string's UTF-8 bytes or a binary value.
    Bytes(&'a [u8]),
    /// An int: Spark's `hashInt`, one 4-byte block.
    Int(i32),
    /// A long: Spark's `hashLong`, its low then its high 4 bytes.
    Long(i64),
}

#[inline]
fn mix_k1(k: u32) -> u32 {
    k.wrapping_mul(0xcc9e_2d51)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593)
}

#[inline]
fn mix_h1(h: u32, k: u32) -> u32 {
    (h ^ k)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64)
}

#[inline]
fn fmix(h: u32, len: u32) -> u32 {
    let mut h = h ^ len;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Spark's `hash()` of one value (seed 42), as Spark's signed int. Strings and binaries go
/// through `Murmur3_x86_32.hashUnsafeBytes`, which is not standard murmur3: each of the
/// 0..3 tail bytes is sign-extended and mixed as a whole block of its own.
pub fn spark_hash(value: SparkValue<'_>) -> i32 {
    let h = match value {
        SparkValue::Int(v) => fmix(mix_h1(SPARK_SEED, mix_k1(v as u32)), 4),
        SparkValue::Long(v) => {
            let low = mix_h1(SPARK_SEED, mix_k1(v as u32));
            fmix(mix_h1(low, mix_k1((v >> 32) as u32)), 8)
        }
        SparkValue::Bytes(b) => {
            let mut words = b.chunks_exact(4);
            let mut h = SPARK_SEED;
            for w in &mut words {
                h = mix_h1(h, mix_k1(u32::from_le_bytes([w[0], w[1], w[2], w[3]])));
            }
            for &byte in words.remainder() {
                h = mix_h1(h, mix_k1(byte as i8 as i32 as u32));
            }
            fmix(h, b.len() as u32)
        }
    };
    h as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_murmur2() {
        // Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{key:?}");
        }
    }

    #[test]
    fn crc32_and_fnv1a_known_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        // The FNV reference's test vectors (fnv1a_32 of "", "a", "foobar").
        assert_eq!(fnv1a_32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a_32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn unittest_fnv1a() {
        // librdkafka's rdfnv1a.c unittest_fnv1a (values from Go's hash/fnv).
        let unaligned = b"PreAmbleWillBeRemoved,ThePrePartThatIs";
        let cases: [(&[u8], u32); 11] = [
            (b"kafka", 0x0d33_c4e1),
            (b"giberish123456789", 0x77a5_8295),
            (b"1234", 0x023b_dd03),
            (b"234", 0x2dea_3cd2),
            (b"34", 0x740f_a83e),
            (b"4", 0x310c_a263),
            (&unaligned[..], 0x65cb_d69c),
            (&unaligned[1..], 0x6e49_c79a),
            (&unaligned[2..], 0x69ee_d356),
            (&unaligned[3..], 0x6abc_c023),
            (b"", 0x7ee3_623b),
        ];
        for (key, want) in cases {
            assert_eq!(rd_fnv1a(key), want, "{key:?}");
        }
    }

    #[test]
    fn java_string_hash_of_utf8_is_that_of_its_utf16() {
        for s in [
            "",
            "a",
            "abcdefgh",
            "abcdefghi",
            "0123456789abcdefghijklm",
            "名前é",
            "ab\u{1F600}cdefghijk€",
        ] {
            assert_eq!(
                java_string_hash_utf8(s.as_bytes()),
                java_string_hash(s.encode_utf16()),
                "{s}"
            );
            if s.is_ascii() {
                assert_eq!(
                    ascii_string_hash(0, s.as_bytes()) as i32,
                    java_string_hash(s.encode_utf16())
                );
            }
        }
    }

    #[test]
    fn java_string_hash_known_values() {
        let hash = |s: &str| java_string_hash(s.encode_utf16());
        assert_eq!(hash(""), 0);
        assert_eq!(hash("hello"), 99_162_322);
        assert_eq!(hash("Aa"), hash("BB"));
        assert_eq!(hash("polygenelubricants"), i32::MIN);
        assert_eq!(hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
        for s in ["", "hello", "名前", "\u{1F600}x", "é"] {
            assert_eq!(java_string_hash_utf8(s.as_bytes()), hash(s));
        }
    }

    #[test]
    fn iceberg_spec_hash_values() {
        // Iceberg spec, appendix B.
        assert_eq!(iceberg_hash(IcebergValue::Long(34)), 2_017_239_379);
        assert_eq!(iceberg_hash(IcebergValue::Bytes(b"iceberg")), 1_210_000_089);
        assert_eq!(
            iceberg_hash(IcebergValue::Bytes(&[0, 1, 2, 3])),
            -188_683_207
        );
    }

    #[test]
    fn spark_hash_values() {
        // Values of Spark 4's own `SELECT hash(...)`.
        let bytes = |b: &'static [u8]| spark_hash(SparkValue::Bytes(b));
        assert_eq!(bytes(b"Spark"), 228_093_765);
        assert_eq!(bytes(b""), 142_593_372);
        assert_eq!(bytes(&[0, 1, 2, 3]), -1_066_376_783);
        // Tail bytes at or above 0x80 are sign-extended, unlike standard murmur3.
        assert_eq!(bytes(&[0xFF]), 1_398_487_324);
        assert_eq!(bytes(&[1, 2, 3, 0x80, 0x81]), 255_108_458);
        assert_eq!(spark_hash(SparkValue::Int(1)), -559_580_957);
        assert_eq!(spark_hash(SparkValue::Long(1)), -1_712_319_331);
        assert_eq!(spark_hash(SparkValue::Int(-1)), -1_604_776_387);
        assert_eq!(spark_hash(SparkValue::Long(i64::MIN)), -853_646_085);
    }
}

//! The key partitioners of other systems, each bit-exact with its source: Kafka's Java
//! producer, librdkafka, the Pulsar Java client, Iceberg's `bucket[N]` transform, Spark's
//! `hash()` as `bucketBy` uses it, Sarama and kafka-go. A partition is `None` where the
//! system picks no fixed partition for the key (a sticky, random or round-robin choice).

use std::borrow::Cow;
use std::mem::MaybeUninit;

use strum::{EnumIter, EnumString, IntoStaticStr, VariantNames};

use super::error::{InvalidInput, KernelResult};
use super::hashing::key_hash;
use super::keys::{by_blocks, map_hashed, IntBatch, IntTyping, KeyBatch, KeyMap, Keys};
use super::lanes::LaneHash;

/// A partition count every system here accepts: `1..=i32::MAX` (Java and Go count in i32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumPartitions(u32);

impl NumPartitions {
    pub fn new(n: i64, what: &str) -> KernelResult<Self> {
        match u32::try_from(n) {
            Ok(n) if (1..=i32::MAX as u32).contains(&n) => Ok(Self(n)),
            _ => Err(InvalidInput::OutOfRange {
                what: what.to_owned(),
                value: n.into(),
                min: 1,
                max: i32::MAX as u64,
            }),
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

/// A partitioner, by the name the Python API and the CLI give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames, EnumIter)]
pub enum Partitioner {
    /// Kafka's Java producer (`BuiltInPartitioner.partitionForKey`).
    #[strum(serialize = "kafka")]
    Kafka,
    #[strum(serialize = "librdkafka:consistent")]
    LibrdkafkaConsistent,
    #[strum(serialize = "librdkafka:consistent_random")]
    LibrdkafkaConsistentRandom,
    #[strum(serialize = "librdkafka:murmur2")]
    LibrdkafkaMurmur2,
    #[strum(serialize = "librdkafka:murmur2_random")]
    LibrdkafkaMurmur2Random,
    #[strum(serialize = "librdkafka:fnv1a")]
    LibrdkafkaFnv1a,
    #[strum(serialize = "librdkafka:fnv1a_random")]
    LibrdkafkaFnv1aRandom,
    /// The Pulsar Java client's default `HashingScheme`.
    #[strum(serialize = "pulsar:JavaStringHash")]
    PulsarJavaStringHash,
    #[strum(serialize = "pulsar:Murmur3_32Hash")]
    PulsarMurmur332Hash,
    #[strum(serialize = "iceberg:bucket")]
    IcebergBucket,
    #[strum(serialize = "spark:bucket")]
    SparkBucket,
    #[strum(serialize = "sarama")]
    Sarama,
    #[strum(serialize = "kafka-go")]
    KafkaGo,
}

impl Partitioner {
    /// The partition of a key (`None`: a null key), or `None` where the system picks none.
    ///
    /// Null keys: every producer here sends them to a sticky, random or round-robin
    /// partition, except Spark, whose `hash()` of a null is its seed, Iceberg, whose bucket
    /// of a null is null, and librdkafka's `consistent`, `murmur2` and `fnv1a`, which
    /// `rd_kafka_msg_partitioner` hands a null key as zero bytes (the `*_random` ones pick
    /// a random partition for it). Empty keys are hashed like any other, except by
    /// librdkafka's `consistent_random`, which treats them as null.
    pub fn partition(self, key: Option<&[u8]>, n: NumPartitions) -> Option<u32> {
        let n = n.get();
        match (self, key) {
            (Self::SparkBucket, None) => Some(pmod(SPARK_SEED as i32, n)),
            (
                Self::LibrdkafkaConsistent | Self::LibrdkafkaMurmur2 | Self::LibrdkafkaFnv1a,
                None,
            ) => Some(self.partition_bytes(&[], n)),
            (_, None) | (Self::LibrdkafkaConsistentRandom, Some([])) => None,
            (_, Some(key)) => Some(self.partition_bytes(key, n)),
        }
    }

    fn partition_bytes(self, key: &[u8], n: u32) -> u32 {
        match self {
            Self::Kafka | Self::LibrdkafkaMurmur2 | Self::LibrdkafkaMurmur2Random => {
                to_positive(murmur2(key)) % n
            }
            Self::LibrdkafkaConsistent | Self::LibrdkafkaConsistentRandom => crc32(key) % n,
            Self::LibrdkafkaFnv1a | Self::LibrdkafkaFnv1aRandom => rd_fnv1a(key) % n,
            Self::PulsarJavaStringHash => to_positive(java_string_hash_utf8(key)) % n,
            Self::PulsarMurmur332Hash => to_positive(key_hash(&java_utf8(key)) as i32) % n,
            Self::IcebergBucket => to_positive(iceberg_hash(IcebergValue::Bytes(key))) % n,
            Self::SparkBucket => pmod(spark_hash(SparkValue::Bytes(key)), n),
            Self::Sarama | Self::KafkaGo => sarama_partition(fnv1a_32(key), n),
        }
    }

    /// The partitioner of integer keys, for the systems that have typed keys.
    pub fn for_ints(self) -> KernelResult<IntPartitioner> {
        match self {
            Self::IcebergBucket => Ok(IntPartitioner::IcebergBucket),
            Self::SparkBucket => Ok(IntPartitioner::SparkBucket),
            partitioner => Err(InvalidInput::IntKeysUnsupported {
                partitioner: partitioner.into(),
            }),
        }
    }
}

/// An integer key and the type it has in its system: Spark hashes an int and a long apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntKey {
    Int(i32),
    Long(i64),
}

/// The integer type of a NumPy or Arrow key column, by width and sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntColumn {
    pub bits: u32,
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

/// The partitioners with integer keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntPartitioner {
    IcebergBucket,
    SparkBucket,
}

impl IntPartitioner {
    pub fn partition(self, key: IntKey, n: NumPartitions) -> u32 {
        match self {
            Self::IcebergBucket => iceberg_bucket(iceberg_hash(key.into()), n),
            Self::SparkBucket => pmod(spark_hash(key.into()), n.get()),
        }
    }
}

/// Kafka's `Utils.toPositive`: the sign bit cleared (not `abs`, which overflows).
#[inline]
pub fn to_positive(h: i32) -> u32 {
    (h & i32::MAX) as u32
}

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

/// Sarama's `hashPartitioner` (and kafka-go's `Hash` balancer, which copies it): the hash
/// as an int32, `%` with Go's truncating sign, and a negative result negated.
#[inline]
pub fn sarama_partition(hash: u32, n: u32) -> u32 {
    ((hash as i32) % (n as i32)).unsigned_abs()
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

/// The UTF-8 bytes of the string a key's bytes stand for in Java, `new String(bytes,
/// UTF_8).getBytes(UTF_8)`: valid UTF-8 as it is, malformed sequences replaced by U+FFFD as
/// the JDK replaces them (`java_decode_utf8`). The Pulsar client's keys are strings, so its
/// `Murmur3_32Hash` hashes these bytes, as its `JavaStringHash` hashes that string's units.
pub fn java_utf8(bytes: &[u8]) -> Cow<'_, [u8]> {
    if std::str::from_utf8(bytes).is_ok() {
        return Cow::Borrowed(bytes);
    }
    let mut units = Vec::with_capacity(bytes.len());
    java_decode_utf8(bytes, |u| units.push(u));
    // The JDK's decoder pairs every surrogate it puts out, so nothing here is replaced.
    let text: String = char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    Cow::Owned(text.into_bytes())
}

const REPLACEMENT: u16 = 0xFFFD;

#[inline]
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// E0 followed by 80..9F is an overlong 3-byte form.
#[inline]
fn is_malformed3_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xE0 && b2 & 0xE0 == 0x80) || !is_continuation(b2)
}

/// F0 followed by 80..8F is overlong, F4 by 90..BF beyond U+10FFFF.
#[inline]
fn is_malformed4_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xF0 && !(0x90..=0xBF).contains(&b2))
        || (b1 == 0xF4 && b2 & 0xF0 != 0x80)
        || !is_continuation(b2)
}

/// Decodes UTF-8 to UTF-16 units as the JDK's `String(byte[], UTF_8)` does
/// (`String.decodeUTF8_UTF16` with replacement). It differs from Python's and Rust's
/// lossy decoders on malformed input: an encoded surrogate (ED A0..BF xx) is one U+FFFD
/// for its three bytes, and a truncated sequence at the end is one U+FFFD.
pub fn java_decode_utf8(src: &[u8], mut put: impl FnMut(u16)) {
    let sl = src.len();
    let mut sp = 0;
    while sp < sl {
        let b1 = src[sp];
        sp += 1;
        if b1 < 0x80 {
            put(u16::from(b1));
        } else if b1 >> 5 == 0b110 && b1 & 0x1E != 0 {
            if sp < sl {
                let b2 = src[sp];
                if is_continuation(b2) {
                    sp += 1;
                    put(u16::from(b1 & 0x1F) << 6 | u16::from(b2 & 0x3F));
                } else {
                    put(REPLACEMENT);
                }
                continue;
            }
            put(REPLACEMENT);
            break;
        } else if b1 >> 4 == 0b1110 {
            if sp + 1 < sl {
                let (b2, b3) = (src[sp], src[sp + 1]);
                if is_malformed3_2(b1, b2) || !is_continuation(b3) {
                    put(REPLACEMENT);
                    // The JDK's `malformed3`: skip b2 too when it began a valid pair.
                    sp += usize::from(!is_malformed3_2(b1, b2));
                } else {
                    sp += 2;
                    let c = u16::from(b1 & 0x0F) << 12
                        | u16::from(b2 & 0x3F) << 6
                        | u16::from(b3 & 0x3F);
                    put(if (0xD800..=0xDFFF).contains(&c) {
                        REPLACEMENT
                    } else {
                        c
                    });
                }
                continue;
            }
            put(REPLACEMENT);
            if sp < sl && is_malformed3_2(b1, src[sp]) {
                continue;
            }
            break;
        } else if b1 >> 3 == 0b11110 {
            if sp + 2 < sl {
                let (b2, b3, b4) = (src[sp], src[sp + 1], src[sp + 2]);
                let uc = u32::from(b1 & 0x07) << 18
                    | u32::from(b2 & 0x3F) << 12
                    | u32::from(b3 & 0x3F) << 6
                    | u32::from(b4 & 0x3F);
                let well_formed = is_continuation(b2)
                    && is_continuation(b3)
                    && is_continuation(b4)
                    && (0x1_0000..0x11_0000).contains(&uc);
                if well_formed {
                    sp += 3;
                    let v = uc - 0x1_0000;
                    put(0xD800 | (v >> 10) as u16);
                    put(0xDC00 | (v & 0x3FF) as u16);
                } else {
                    put(REPLACEMENT);
                    // The JDK's `malformed4`: how many bytes the malformed sequence spans.
                    if !(b1 > 0xF4 || is_malformed4_2(b1, b2)) {
                        sp += if is_continuation(b3) { 2 } else { 1 };
                    }
                }
                continue;
            }
            put(REPLACEMENT);
            if b1 > 0xF4 || (sp < sl && is_malformed4_2(b1, src[sp])) {
                continue;
            }
            sp += 1;
            if sp < sl && !is_continuation(src[sp]) {
                continue;
            }
            break;
        } else {
            put(REPLACEMENT);
        }
    }
}

/// An Iceberg value whose bucket is taken: its hash is murmur3_x86_32 (seed 0) of the
/// value's bytes; an int is hashed as the long of the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcebergValue<'a> {
    /// A string's UTF-8 bytes, or a binary value's bytes.
    Bytes(&'a [u8]),
    Long(i64),
}

impl From<IntKey> for IcebergValue<'_> {
    fn from(key: IntKey) -> Self {
        match key {
            IntKey::Int(v) => Self::Long(i64::from(v)),
            IntKey::Long(v) => Self::Long(v),
        }
    }
}

/// Iceberg's 32-bit hash of a value (spec appendix B), as Java's signed int.
pub fn iceberg_hash(value: IcebergValue<'_>) -> i32 {
    match value {
        IcebergValue::Bytes(b) => key_hash(b) as i32,
        IcebergValue::Long(v) => key_hash(&v.to_le_bytes()) as i32,
    }
}

/// Iceberg's `bucket[N]` of a value's hash: `(hash & Integer.MAX_VALUE) % N`.
#[inline]
pub fn iceberg_bucket(hash: i32, n: NumPartitions) -> u32 {
    to_positive(hash) % n.get()
}

/// The seed of Spark's `hash()` (the `Murmur3Hash` expression).
pub const SPARK_SEED: u32 = 42;

/// A Spark value whose `hash()` is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparkValue<'a> {
    /// A string's UTF-8 bytes or a binary value.
    Bytes(&'a [u8]),
    Int(i32),
    Long(i64),
}

impl From<IntKey> for SparkValue<'_> {
    fn from(key: IntKey) -> Self {
        match key {
            IntKey::Int(v) => Self::Int(v),
            IntKey::Long(v) => Self::Long(v),
        }
    }
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

/// Spark's `pmod(hash, n)`: the remainder in `[0, n)` whatever the hash's sign.
#[inline]
pub fn pmod(hash: i32, n: u32) -> u32 {
    hash.rem_euclid(n as i32) as u32
}

/// `a % n` for a fixed `n` without a division: Lemire's fastmod (Lemire, Kaser, Kurz,
/// "Faster Remainder by Direct Computation", 2019), exact for every u32 `a` and `n >= 1`.
/// A hardware division costs more than the hash of a short key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Divisor {
    n: u32,
    m: u64,
}

impl Divisor {
    pub fn new(n: NumPartitions) -> Self {
        let n = n.get();
        // n = 1 wraps m to 0, and every remainder is then 0, as it should be.
        let m = (u64::MAX / u64::from(n)).wrapping_add(1);
        Self { n, m }
    }

    #[inline(always)]
    pub fn remainder(self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.n)) >> 64) as u32
    }

    /// Spark's `pmod(h, n)` (`h.rem_euclid(n)`): `h + 2^31` is non-negative, and its
    /// remainder less that of `2^31` is the one wanted.
    #[inline(always)]
    pub fn pmod(self, h: i32) -> u32 {
        let shifted = self.remainder((h as u32) ^ 0x8000_0000);
        let offset = self.remainder(0x8000_0000);
        match shifted >= offset {
            true => shifted - offset,
            false => shifted + self.n - offset,
        }
    }
}

impl Partitioner {
    /// The partition of every key of a batch, `-1` where the system picks no fixed
    /// partition (a null key, mostly: see `partition`), on up to `threads` threads.
    pub fn partitions(self, keys: &KeyBatch, n: NumPartitions, threads: usize) -> Vec<i64> {
        let null = self.partition(None, n).map_or(-1, i64::from);
        let m = BytePartitions {
            p: self,
            d: Divisor::new(n),
        };
        keys.map(threads, &m, (null, ())).0
    }
}

/// A partitioner's batch kernel: the partitioner is matched once a run, not once a key.
struct BytePartitions {
    p: Partitioner,
    d: Divisor,
}

impl KeyMap for BytePartitions {
    type A = i64;
    type B = ();

    fn map<K: Keys>(&self, keys: &K, a: &mut [MaybeUninit<i64>], b: &mut [MaybeUninit<()>]) {
        b.fill(MaybeUninit::new(()));
        let d = self.d;
        let part = |x: u32| i64::from(d.remainder(x));
        match self.p {
            Partitioner::Kafka
            | Partitioner::LibrdkafkaMurmur2
            | Partitioner::LibrdkafkaMurmur2Random => {
                map_hashed(keys, LaneHash::Murmur2, a, b, |h| {
                    (part(h & 0x7FFF_FFFF), ())
                });
            }
            Partitioner::LibrdkafkaConsistent => keys.fill(a, |k| part(crc32(k))),
            Partitioner::LibrdkafkaConsistentRandom => keys.fill(a, |k| match k {
                [] => -1,
                k => part(crc32(k)),
            }),
            Partitioner::LibrdkafkaFnv1a | Partitioner::LibrdkafkaFnv1aRandom => {
                keys.fill(a, |k| part(rd_fnv1a(k)));
            }
            Partitioner::PulsarJavaStringHash => by_blocks(keys, a, b, |keys, a, b| {
                match keys.all_ascii() {
                    // ASCII bytes are their own UTF-16 units: hashed many keys at once.
                    true => map_hashed(keys, LaneHash::JavaAscii, a, b, |h| {
                        (part(h & 0x7FFF_FFFF), ())
                    }),
                    false => keys.fill(a, |k| part(to_positive(java_string_hash_utf8(k)))),
                }
            }),
            Partitioner::IcebergBucket => {
                map_hashed(keys, LaneHash::Murmur3, a, b, |h| {
                    (part(h & 0x7FFF_FFFF), ())
                });
            }
            Partitioner::PulsarMurmur332Hash => by_blocks(keys, a, b, |keys, a, b| {
                match keys.all_utf8() {
                    // Valid UTF-8 is its own Java string's bytes: hashed many keys at once.
                    true => map_hashed(keys, LaneHash::Murmur3, a, b, |h| {
                        (part(h & 0x7FFF_FFFF), ())
                    }),
                    false => keys.fill(a, |k| part(key_hash(&java_utf8(k)) & 0x7FFF_FFFF)),
                }
            }),
            Partitioner::SparkBucket => {
                keys.fill(a, |k| i64::from(d.pmod(spark_hash(SparkValue::Bytes(k)))));
            }
            Partitioner::Sarama | Partitioner::KafkaGo => {
                keys.fill(a, |k| part((fnv1a_32(k) as i32).unsigned_abs()));
            }
        }
    }
}

impl IntPartitioner {
    /// The partition of every integer key, typed as `typing` says (refuse longs beyond an
    /// int first where they are typed as ints: `IntBatch::first_beyond_int`); a null key
    /// gets `null`, on up to `threads` threads.
    pub fn partitions(
        self,
        keys: &IntBatch,
        typing: IntTyping,
        n: NumPartitions,
        null: i64,
        threads: usize,
    ) -> Vec<i64> {
        let d = Divisor::new(n);
        match self {
            Self::IcebergBucket => keys.map(
                threads,
                typing,
                |k| i64::from(d.remainder(to_positive(iceberg_hash(k.into())))),
                null,
            ),
            Self::SparkBucket => keys.map(
                threads,
                typing,
                |k| i64::from(d.pmod(spark_hash(k.into()))),
                null,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;
    use strum::IntoEnumIterator;

    fn n(n: i64) -> NumPartitions {
        NumPartitions::new(n, "n").unwrap()
    }

    fn packed(keys: &[&[u8]]) -> KeyBatch {
        let mut p = crate::keys::PackedKeys::default();
        keys.iter().for_each(|k| p.push(k));
        KeyBatch::nullable(vec![crate::keys::KeyChunk::Packed(p)])
    }

    fn pseudo_random_keys(count: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut rng = crate::test_rng::lcg(seed);
        let mut next = move || rng() as u32;
        let alphabets: [&[u8]; 3] = [
            b"abcXYZ0189-_",
            "é名\u{1F600}a".as_bytes(),
            b"\xff\x80\xc3\xed\xa0a",
        ];
        (0..count)
            .map(|i| {
                let alphabet = alphabets[i % 3];
                let len = next() as usize % 40;
                (0..len)
                    .map(|_| alphabet[next() as usize % alphabet.len()])
                    .collect()
            })
            .collect()
    }

    #[test]
    fn fastmod_is_the_remainder() {
        let values = [
            0u32,
            1,
            2,
            7,
            11,
            0x7FFF_FFFF,
            0x8000_0000,
            u32::MAX,
            123_456_789,
        ];
        for count in [
            1i64,
            2,
            3,
            7,
            12,
            16,
            1000,
            65_535,
            1 << 30,
            i64::from(i32::MAX),
        ] {
            let d = Divisor::new(n(count));
            for &a in &values {
                assert_eq!(
                    i64::from(d.remainder(a)),
                    i64::from(a) % count,
                    "{a} % {count}"
                );
                let h = a as i32;
                assert_eq!(d.pmod(h), pmod(h, count as u32), "pmod({h}, {count})");
            }
        }
    }

    #[test]
    fn batches_partition_as_one_key_at_a_time() {
        let keys = pseudo_random_keys(5_000, 3);
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let batch = packed(&refs);
        for p in Partitioner::iter() {
            for count in [1, 12, 1000, i64::from(i32::MAX)] {
                let want: Vec<i64> = refs
                    .iter()
                    .map(|k| p.partition(Some(k), n(count)).map_or(-1, i64::from))
                    .collect();
                for threads in [1, 3] {
                    assert_eq!(p.partitions(&batch, n(count), threads), want, "{p:?}");
                }
            }
        }
    }

    #[test]
    fn blocks_of_each_kind_in_one_batch() {
        // Runs of ASCII, of other UTF-8 and of malformed keys longer than the kernels' blocks:
        // each block takes its own path, and every key gets its own partition.
        let mixed = pseudo_random_keys(3 * 1500, 5);
        let keys: Vec<&[u8]> = (0..3 * 1500)
            .map(|i| mixed[(i / 1500) + 3 * (i % 1500)].as_slice())
            .collect();
        let batch = packed(&keys);
        for p in [
            Partitioner::PulsarJavaStringHash,
            Partitioner::PulsarMurmur332Hash,
            Partitioner::Kafka,
        ] {
            let want: Vec<i64> = keys
                .iter()
                .map(|k| p.partition(Some(k), n(12)).map_or(-1, i64::from))
                .collect();
            for threads in [1, 2, 3] {
                assert_eq!(p.partitions(&batch, n(12), threads), want, "{p:?}");
            }
        }
    }

    #[test]
    fn ascii_batches_take_the_fast_paths() {
        // All-ASCII keys: the JavaStringHash and Murmur3 batches skip decoding.
        let keys: Vec<String> = (0..3_000)
            .map(|i| format!("order-{i}-{}", "x".repeat(i % 30)))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
        let batch = packed(&refs);
        for p in [
            Partitioner::PulsarJavaStringHash,
            Partitioner::PulsarMurmur332Hash,
        ] {
            let got = p.partitions(&batch, n(12), 1);
            for (k, part) in keys.iter().zip(got) {
                let h = match p {
                    Partitioner::PulsarJavaStringHash => java_string_hash(k.encode_utf16()),
                    _ => key_hash(k.as_bytes()) as i32,
                };
                assert_eq!(part, i64::from(to_positive(h) % 12), "{p:?} {k}");
            }
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
    fn null_keys_get_the_partitioners_null_partition() {
        let mut p = crate::keys::PackedKeys::default();
        p.push(b"a");
        p.push_null();
        p.push(b"b");
        let batch = KeyBatch::nullable(vec![crate::keys::KeyChunk::Packed(p)]);
        for part in Partitioner::iter() {
            let got = part.partitions(&batch, n(7), 1);
            let one = |k: Option<&[u8]>| part.partition(k, n(7)).map_or(-1, i64::from);
            assert_eq!(
                got,
                [one(Some(b"a")), one(None), one(Some(b"b"))],
                "{part:?}"
            );
        }
    }

    #[test]
    fn int_batches_partition_as_one_key_at_a_time() {
        use crate::keys::{IntBatch, IntChunk, IntTyping, IntValues};
        let longs = vec![0i64, 1, -1, 34, i64::MIN, i64::MAX, 1 << 40];
        let ints = vec![0i32, 1, -1, 34, i32::MIN, i32::MAX];
        let batch = IntBatch {
            chunks: vec![
                IntChunk {
                    values: IntValues::Int64(longs.clone()),
                    nulls: vec![2],
                },
                IntChunk {
                    values: IntValues::Int32(ints.clone()),
                    nulls: vec![],
                },
            ],
        };
        assert_eq!(batch.first_beyond_int(IntTyping::Int), Some((4, i64::MIN)));
        for p in [IntPartitioner::IcebergBucket, IntPartitioner::SparkBucket] {
            let got = p.partitions(&batch, IntTyping::ByWidth, n(16), -7, 2);
            let mut want: Vec<i64> = longs
                .iter()
                .map(|&v| i64::from(p.partition(IntKey::Long(v), n(16))))
                .collect();
            want[2] = -7;
            want.extend(
                ints.iter()
                    .map(|&v| i64::from(p.partition(IntKey::Int(v), n(16)))),
            );
            assert_eq!(got, want, "{p:?}");
        }
        // Iceberg's bucket of 34 (spec appendix A), through the batch.
        let one = IntBatch {
            chunks: vec![IntChunk {
                values: IntValues::Int32(vec![34]),
                nulls: vec![],
            }],
        };
        let bucket =
            IntPartitioner::IcebergBucket.partitions(&one, IntTyping::ByWidth, n(16), -1, 1);
        assert_eq!(bucket, [3]);
    }

    #[test]
    fn kafka_batch_known_values() {
        // Kafka's UtilsTest.testMurmur2 values, through the batch: toPositive(h) % n.
        let keys: [&[u8]; 3] = [b"21", b"foobar", b"abc"];
        let want =
            [-973_932_308i32, -790_332_482, 479_470_107].map(|h| i64::from(to_positive(h) % 12));
        assert_eq!(
            Partitioner::Kafka.partitions(&packed(&keys), n(12), 1),
            want
        );
    }

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
    fn to_positive_clears_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX as u32);
        assert_eq!(to_positive(5), 5);
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
    fn librdkafka_fnv1a_partitions_as_sarama() {
        for key in [&b""[..], b"a", b"kafka", b"\xff\x00\x12"] {
            for n in [1, 2, 3, 7, 1000, i32::MAX as u32] {
                let h = fnv1a_32(key);
                assert_eq!(rd_fnv1a(key) % n, sarama_partition(h, n));
            }
        }
        // The one hash whose abs overflows: both give 2**31 % n.
        assert_eq!(sarama_partition(0x8000_0000, 7), (1u32 << 31) % 7);
    }

    #[test]
    fn sarama_negates_a_negative_remainder() {
        // int32(0x811c9dc5) = -2128831035; % 7 = -2 in Go; negated, 2.
        assert_eq!(sarama_partition(0x811c_9dc5, 7), 2);
        assert_eq!(sarama_partition(0x8000_0000, 3), 2);
        assert_eq!(sarama_partition(10, 3), 1);
    }

    #[test]
    fn java_utf8_replaces_as_the_jdk_does() {
        const R: &[u8] = "\u{FFFD}".as_bytes();
        assert_eq!(java_utf8(b"order-1"), &b"order-1"[..]);
        assert!(matches!(java_utf8("€uro".as_bytes()), Cow::Borrowed(_)));
        assert_eq!(java_utf8(b"\xff"), R);
        // An encoded surrogate is one U+FFFD for its three bytes, as the JDK decodes it.
        assert_eq!(java_utf8(b"\xED\xA0\x80a"), [R, b"a"].concat());
        assert_eq!(java_utf8(b"\x80\xFF"), [R, R].concat());
    }

    #[test]
    fn pulsar_schemes_take_the_java_string_of_invalid_bytes() {
        // The Java client routes new String(b"\xff", UTF_8), i.e. "\u{FFFD}": partition 5
        // of 7 under Murmur3_32Hash (the raw byte would give 2).
        let p = Partitioner::PulsarMurmur332Hash;
        assert_eq!(p.partition(Some(b"\xff"), n(7)), Some(5));
        for scheme in [Partitioner::PulsarJavaStringHash, p] {
            for (bad, good) in [(&b"\xff"[..], "\u{FFFD}"), (b"a\xE2\x82", "a\u{FFFD}")] {
                let want = scheme.partition(Some(good.as_bytes()), n(1000));
                assert_eq!(scheme.partition(Some(bad), n(1000)), want, "{scheme:?}");
            }
        }
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

    fn java_units(bytes: &[u8]) -> Vec<u16> {
        let mut units = vec![];
        java_decode_utf8(bytes, |u| units.push(u));
        units
    }

    #[test]
    fn java_decoding_replaces_as_the_jdk_does() {
        const R: u16 = REPLACEMENT;
        // An encoded surrogate: one replacement for its three bytes (Python gives three).
        assert_eq!(java_units(b"\xED\xA0\x80a"), [R, 0x61]);
        // Truncated sequences at the end: one replacement.
        assert_eq!(java_units(b"a\xE2\x82"), [0x61, R]);
        assert_eq!(java_units(b"\xF0\x9F\x98"), [R]);
        assert_eq!(java_units(b"\xC3"), [R]);
        // A bad continuation: the lead byte alone is replaced.
        assert_eq!(java_units(b"\xC3A"), [R, 0x41]);
        assert_eq!(java_units(b"\xE2\x82A"), [R, 0x41]);
        // Overlong forms, lone continuations, and bytes that never occur.
        assert_eq!(java_units(b"\xC0\xAF"), [R, R]);
        assert_eq!(java_units(b"\xE0\x80\xAF"), [R, R, R]);
        assert_eq!(java_units(b"\xF0\x80\x80\xAF"), [R, R, R, R]);
        assert_eq!(java_units(b"\x80\xFF"), [R, R]);
        // Beyond U+10FFFF.
        assert_eq!(java_units(b"\xF4\x90\x80\x80"), [R, R, R, R]);
        assert_eq!(java_units("\u{10FFFF}".as_bytes()), [0xDBFF, 0xDFFF]);
    }

    #[test]
    fn iceberg_spec_hash_values() {
        // Iceberg spec, appendix B.
        assert_eq!(iceberg_hash(IntKey::Int(34).into()), 2_017_239_379);
        assert_eq!(iceberg_hash(IntKey::Long(34).into()), 2_017_239_379);
        assert_eq!(iceberg_hash(IcebergValue::Bytes(b"iceberg")), 1_210_000_089);
        assert_eq!(
            iceberg_hash(IcebergValue::Bytes(&[0, 1, 2, 3])),
            -188_683_207
        );
        // Spec appendix A's example: bucket[16] of 34 is 3 (2017239379 % 16).
        assert_eq!(
            IntPartitioner::IcebergBucket.partition(IntKey::Int(34), n(16)),
            3
        );
    }

    #[test]
    fn spark_hash_values() {
        // Values of Spark 4's own `SELECT hash(...)`, `pmod(...)`.
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
        assert_eq!(pmod(bytes(b"Spark"), 7), 4);
        assert_eq!(pmod(bytes(&[0xFF]), 200), 124);
    }

    #[test]
    fn spark_hash_pmod() {
        assert_eq!(pmod(-7, 3), 2);
        // -2147483648 % 7 is -2 in Java; pmod adds 7.
        assert_eq!(pmod(i32::MIN, 7), 5);
        assert_eq!(pmod(7, 3), 1);
    }

    #[test]
    fn spark_hash_of_a_null_is_the_seed() {
        assert_eq!(Partitioner::SparkBucket.partition(None, n(5)), Some(42 % 5));
    }

    #[test]
    fn null_and_empty_keys() {
        for p in Partitioner::iter() {
            let null = p.partition(None, n(7));
            let empty = p.partition(Some(b""), n(7));
            match p {
                Partitioner::LibrdkafkaConsistent
                | Partitioner::LibrdkafkaMurmur2
                | Partitioner::LibrdkafkaFnv1a => assert_eq!(null, empty, "{p:?}"),
                _ => assert_eq!(null.is_some(), p == Partitioner::SparkBucket, "{p:?}"),
            }
            assert_eq!(
                empty.is_none(),
                p == Partitioner::LibrdkafkaConsistentRandom,
                "{p:?}"
            );
        }
        assert_eq!(
            Partitioner::LibrdkafkaConsistent.partition(Some(b""), n(7)),
            Some(0)
        );
    }

    #[test]
    fn names_round_trip() {
        for p in Partitioner::iter() {
            let name: &str = p.into();
            assert_eq!(Partitioner::from_str(name), Ok(p));
        }
        assert_eq!(Partitioner::VARIANTS.len(), Partitioner::iter().count());
    }

    #[test]
    fn partitions_are_in_range() {
        for p in Partitioner::iter() {
            for count in [1, 2, 7, i64::from(i32::MAX)] {
                for key in [&b"a"[..], b"hello", b"\xff\xfe", b"key-123456"] {
                    if let Some(part) = p.partition(Some(key), n(count)) {
                        assert!(i64::from(part) < count, "{p:?} {key:?} {count}");
                    }
                }
            }
        }
    }

    #[test]
    fn partition_counts_are_checked() {
        assert!(NumPartitions::new(0, "n").is_err());
        assert!(NumPartitions::new(-1, "n").is_err());
        assert!(NumPartitions::new(1 << 31, "n").is_err());
        assert_eq!(n(i64::from(i32::MAX)).get(), i32::MAX as u32);
    }

    #[test]
    fn only_typed_systems_take_ints() {
        assert!(Partitioner::Kafka.for_ints().is_err());
        assert_eq!(
            Partitioner::SparkBucket.for_ints(),
            Ok(IntPartitioner::SparkBucket)
        );
    }
}

//! The key partitioners of other systems, each bit-exact with its source: Kafka's Java
//! producer, librdkafka, the Pulsar Java client, Iceberg's `bucket[N]` transform, Spark's
//! `hash()` as `bucketBy` uses it, Sarama and kafka-go. A partition is `None` where the
//! system picks no fixed partition for the key (a sticky, random or round-robin choice).

use std::mem::MaybeUninit;

use strum::{EnumIter, EnumString, IntoStaticStr, VariantNames};

use super::error::{InvalidInput, KernelResult};
use super::hashing::key_hash;
use super::jdk_utf8::java_utf8;
use super::keys::{by_blocks, map_hashed, IntBatch, IntKey, IntTyping, KeyBatch, KeyMap, Keys};
use super::lanes::LaneHash;
use super::system_hashes::{
    crc32, fnv1a_32, iceberg_hash, java_string_hash_utf8, murmur2, rd_fnv1a, spark_hash,
    IcebergValue, SparkValue, SPARK_SEED,
};

/// A partition count every system here accepts: `1..=i32::MAX` (Java and Go count in i32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumPartitions(u32);

impl NumPartitions {
    /// A partition count of `n`, in `[1, i32::MAX]`; else an error (`OutOfRange`) that names it
    /// `what`.
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

    /// The count, in `[1, i32::MAX]`.
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
    /// librdkafka's `consistent`: `crc32(key) % n`; a null key hashes as no bytes.
    #[strum(serialize = "librdkafka:consistent")]
    LibrdkafkaConsistent,
    /// librdkafka's `consistent_random`: as `consistent`, but a null or empty key goes to a random
    /// partition.
    #[strum(serialize = "librdkafka:consistent_random")]
    LibrdkafkaConsistentRandom,
    /// librdkafka's `murmur2`: Kafka's Java producer's `toPositive(murmur2(key)) % n`; a null
    /// key hashes as no bytes.
    #[strum(serialize = "librdkafka:murmur2")]
    LibrdkafkaMurmur2,
    /// librdkafka's `murmur2_random`: as `murmur2`, but a null key goes to a random partition.
    #[strum(serialize = "librdkafka:murmur2_random")]
    LibrdkafkaMurmur2Random,
    /// librdkafka's `fnv1a`: `rd_fnv1a(key) % n`; a null key hashes as no bytes.
    #[strum(serialize = "librdkafka:fnv1a")]
    LibrdkafkaFnv1a,
    /// librdkafka's `fnv1a_random`: as `fnv1a`, but a null key goes to a random partition.
    #[strum(serialize = "librdkafka:fnv1a_random")]
    LibrdkafkaFnv1aRandom,
    /// The Pulsar Java client's default `HashingScheme`.
    #[strum(serialize = "pulsar:JavaStringHash")]
    PulsarJavaStringHash,
    /// The Pulsar Java client's `Murmur3_32Hash` scheme: murmur3 of the UTF-8 of the string the
    /// JDK decodes the key to, sign bit cleared, `% n`.
    #[strum(serialize = "pulsar:Murmur3_32Hash")]
    PulsarMurmur332Hash,
    /// Iceberg's `bucket[N]` transform: `(murmur3(value) & Integer.MAX_VALUE) % N`; a null key has
    /// no bucket.
    #[strum(serialize = "iceberg:bucket")]
    IcebergBucket,
    /// Spark's `pmod(hash(key), n)`, as `bucketBy` buckets; a null key hashes as Spark's seed, 42.
    #[strum(serialize = "spark:bucket")]
    SparkBucket,
    /// Sarama's hash partitioner: FNV-1a 32 of the key as an int32, `% n` with Go's truncating
    /// sign, a negative result negated.
    #[strum(serialize = "sarama")]
    Sarama,
    /// kafka-go's `Hash` balancer, a copy of Sarama's.
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

/// The partitioners with integer keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntPartitioner {
    /// Iceberg's `bucket[N]` of an integer: the long of the same value hashed.
    IcebergBucket,
    /// Spark's `pmod(hash(key), n)`: an int and a long hash apart.
    SparkBucket,
}

impl IntPartitioner {
    /// The partition of an integer key among `n`, in `[0, n)`.
    pub fn partition(self, key: IntKey, n: NumPartitions) -> u32 {
        match self {
            Self::IcebergBucket => iceberg_bucket(iceberg_hash(key.into()), n),
            Self::SparkBucket => pmod(spark_hash(key.into()), n.get()),
        }
    }
}

impl From<IntKey> for IcebergValue<'_> {
    fn from(key: IntKey) -> Self {
        match key {
            IntKey::Int(v) => Self::Long(i64::from(v)),
            IntKey::Long(v) => Self::Long(v),
        }
    }
}

impl From<IntKey> for SparkValue<'_> {
    fn from(key: IntKey) -> Self {
        match key {
            IntKey::Int(v) => Self::Int(v),
            IntKey::Long(v) => Self::Long(v),
        }
    }
}

/// Kafka's `Utils.toPositive`: the sign bit cleared (not `abs`, which overflows).
#[inline]
pub fn to_positive(h: i32) -> u32 {
    (h & i32::MAX) as u32
}

/// Sarama's `hashPartitioner` (and kafka-go's `Hash` balancer, which copies it): the hash
/// as an int32, `%` with Go's truncating sign, and a negative result negated.
#[inline]
pub fn sarama_partition(hash: u32, n: u32) -> u32 {
    ((hash as i32) % (n as i32)).unsigned_abs()
}

/// Iceberg's `bucket[N]` of a value's hash: `(hash & Integer.MAX_VALUE) % N`.
#[inline]
pub fn iceberg_bucket(hash: i32, n: NumPartitions) -> u32 {
    to_positive(hash) % n.get()
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
    /// The divisor `n`, with its fastmod multiplier computed once.
    pub fn new(n: NumPartitions) -> Self {
        let n = n.get();
        // n = 1 wraps m to 0, and every remainder is then 0, as it should be.
        let m = (u64::MAX / u64::from(n)).wrapping_add(1);
        Self { n, m }
    }

    /// `a % n`.
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
        let m = self.key_map(n);
        keys.map(threads, &m, (m.null, ())).0
    }

    /// The batch kernel of `partition` into `n` partitions, for keys in any layout.
    pub fn key_map(self, n: NumPartitions) -> BytePartitions {
        BytePartitions {
            p: self,
            d: Divisor::new(n),
            null: self.partition(None, n).map_or(-1, i64::from),
        }
    }
}

/// A partitioner's batch kernel: the partitioner is matched once a run, not once a key.
pub struct BytePartitions {
    p: Partitioner,
    d: Divisor,
    /// The output for a null key: its partition, or -1 where the system picks none.
    pub null: i64,
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
    use crate::system_hashes::java_string_hash;
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
    fn to_positive_clears_the_sign_bit() {
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX as u32);
        assert_eq!(to_positive(5), 5);
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
    fn iceberg_hashes_an_int_as_its_long() {
        // Iceberg spec, appendix B: 34 as an int and as a long.
        assert_eq!(iceberg_hash(IntKey::Int(34).into()), 2_017_239_379);
        assert_eq!(iceberg_hash(IntKey::Long(34).into()), 2_017_239_379);
        // Spec appendix A's example: bucket[16] of 34 is 3 (2017239379 % 16).
        assert_eq!(
            IntPartitioner::IcebergBucket.partition(IntKey::Int(34), n(16)),
            3
        );
    }

    #[test]
    fn spark_hash_pmod() {
        // Spark 4's own `SELECT pmod(hash(...), n)`.
        assert_eq!(pmod(spark_hash(SparkValue::Bytes(b"Spark")), 7), 4);
        assert_eq!(pmod(spark_hash(SparkValue::Bytes(&[0xFF])), 200), 124);
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

package io.keyshared.spark;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.CRC32;

import org.apache.spark.sql.catalyst.expressions.Murmur3HashFunction$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The key partitioners of other systems, named as {@code keyshared.routing.partitioners.Partitioner}
 * names them, each bit-exact with its system. A partition is {@link #NONE} where the system
 * picks no fixed partition for the key: a null key (except Spark's, whose hash is its seed,
 * and librdkafka's {@code consistent}, {@code murmur2} and {@code fnv1a}, which hash it as no
 * bytes), and an empty key under librdkafka's {@code consistent_random}.
 *
 * <p>Integer keys are Iceberg's and Spark's alone: Iceberg buckets an int as the long of the
 * same value, Spark hashes an int and a bigint apart.
 */
public enum Partitioner {
  /** Kafka's Java producer: {@code toPositive(murmur2(key)) % n}. */
  KAFKA("kafka"),
  /** librdkafka's {@code consistent}: {@code crc32(key) % n}, a null key as an empty one. */
  LIBRDKAFKA_CONSISTENT("librdkafka:consistent"),
  /** librdkafka's {@code consistent_random}: as consistent, null and empty keys random. */
  LIBRDKAFKA_CONSISTENT_RANDOM("librdkafka:consistent_random"),
  LIBRDKAFKA_MURMUR2("librdkafka:murmur2"),
  LIBRDKAFKA_MURMUR2_RANDOM("librdkafka:murmur2_random"),
  LIBRDKAFKA_FNV1A("librdkafka:fnv1a"),
  LIBRDKAFKA_FNV1A_RANDOM("librdkafka:fnv1a_random"),
  /** The Pulsar Java client's default: {@code String.hashCode} of the UTF-8-decoded key. */
  PULSAR_JAVA_STRING_HASH("pulsar:JavaStringHash"),
  /** The Pulsar Java client's {@code Murmur3_32Hash}: murmur3 (seed 0) of the key's bytes. */
  PULSAR_MURMUR3_32_HASH("pulsar:Murmur3_32Hash"),
  /** Iceberg's {@code bucket[n]} transform. */
  ICEBERG_BUCKET("iceberg:bucket"),
  /** Spark's {@code pmod(hash(key), n)}, as {@code bucketBy} buckets rows. */
  SPARK_BUCKET("spark:bucket"),
  /** Sarama's hash partitioner: FNV-1a, Go's signed remainder, negated when negative. */
  SARAMA("sarama"),
  /** kafka-go's {@code Hash} balancer, Sarama's copy. */
  KAFKA_GO("kafka-go");

  /** The partition of a key the system routes to no fixed partition. */
  public static final int NONE = -1;
  /** The seed of Spark's {@code hash()}. */
  private static final int SPARK_SEED = 42;

  private final String scheme;

  Partitioner(String scheme) {
    this.scheme = scheme;
  }

  /** The name, as {@code keyshared.routing.partitioners.Partitioner}'s value. */
  public String scheme() {
    return scheme;
  }

  /** The partitioner of that name; KeysharedException names the known ones. */
  public static Partitioner named(String scheme) {
    for (Partitioner p : values()) {
      if (p.scheme.equals(scheme)) {
        return p;
      }
    }
    throw new KeysharedException(
        "ks_partition: unknown partitioner '" + scheme + "'; partitioners are "
            + Arrays.toString(Arrays.stream(values()).map(Partitioner::scheme).toArray()));
  }

  /** Whether keys of {@code type} have a partition here: string and binary everywhere. */
  public boolean takes(DataType type) {
    if (type == DataTypes.StringType || type == DataTypes.BinaryType) {
      return true;
    }
    // Byte and short columns are ints to both: Spark hashes them as ints, Iceberg stores them so.
    return (this == ICEBERG_BUCKET || this == SPARK_BUCKET)
        && (type == DataTypes.ByteType || type == DataTypes.ShortType
            || type == DataTypes.IntegerType || type == DataTypes.LongType);
  }

  /** The partition of a null key. */
  public int ofNull(int n) {
    switch (this) {
      case SPARK_BUCKET:
        return Math.floorMod(SPARK_SEED, n);
      case LIBRDKAFKA_CONSISTENT:
      case LIBRDKAFKA_MURMUR2:
      case LIBRDKAFKA_FNV1A:
        // librdkafka hands these a null key as no bytes (its sticky partition is for the
        // partitioners that are random for null keys): it lands where an empty key does.
        return ofBytes(new byte[0], n);
      default:
        return NONE;
    }
  }

  /** The partition of a string key: its UTF-8 bytes'. */
  public int ofString(UTF8String key, int n) {
    return this == SPARK_BUCKET
        ? Math.floorMod(sparkHash(key, DataTypes.StringType), n)
        : ofBytes(key.getBytes(), n);
  }

  /** The partition of a binary key. */
  public int ofBytes(byte[] key, int n) {
    switch (this) {
      case KAFKA:
      case LIBRDKAFKA_MURMUR2:
      case LIBRDKAFKA_MURMUR2_RANDOM:
        return (murmur2(key) & 0x7fffffff) % n;
      case LIBRDKAFKA_CONSISTENT_RANDOM:
        if (key.length == 0) {
          return NONE;
        }
        return (int) (crc32(key) % n);
      case LIBRDKAFKA_CONSISTENT:
        return (int) (crc32(key) % n);
      case LIBRDKAFKA_FNV1A:
      case LIBRDKAFKA_FNV1A_RANDOM:
        // rd_fnv1a negates a negative hash (as Sarama does its remainder; Integer.MIN_VALUE
        // stays itself) and takes the result unsigned.
        int h = fnv1a(key);
        return (int) (Integer.toUnsignedLong(h < 0 ? -h : h) % n);
      case PULSAR_JAVA_STRING_HASH:
        return (new String(key, StandardCharsets.UTF_8).hashCode() & 0x7fffffff) % n;
      case PULSAR_MURMUR3_32_HASH:
        // The client hashes its string key: malformed UTF-8 becomes U+FFFD's bytes.
        return (Murmur3.hashBinary(javaUtf8(key)) & 0x7fffffff) % n;
      case ICEBERG_BUCKET:
        return (Murmur3.hashBinary(key) & 0x7fffffff) % n;
      case SPARK_BUCKET:
        return Math.floorMod(sparkHash(key, DataTypes.BinaryType), n);
      case SARAMA:
      case KAFKA_GO:
      default:
        // Go's int32 remainder keeps the dividend's sign; a negative one is negated.
        return Math.abs(fnv1a(key) % n);
    }
  }

  /**
   * The UTF-8 bytes of the Java string {@code new String(key, UTF_8)}: {@code key} itself when
   * it is well-formed UTF-8 (most keys, without a copy), else the JDK's decoding re-encoded.
   */
  static byte[] javaUtf8(byte[] key) {
    return isUtf8(key) ? key : new String(key, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
  }

  /** Whether {@code b} is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF). */
  static boolean isUtf8(byte[] b) {
    int i = 0;
    while (i < b.length) {
      int c = b[i] & 0xff;
      if (c < 0x80) {
        i++;
        continue;
      }
      int need;
      int lo = 0x80;
      int hi = 0xbf;
      if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
      } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
      } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
      } else {
        return false;
      }
      if (i + need >= b.length) {
        return false;
      }
      int second = b[i + 1] & 0xff;
      if (second < lo || second > hi) {
        return false;
      }
      for (int k = 2; k <= need; k++) {
        if ((b[i + k] & 0xc0) != 0x80) {
          return false;
        }
      }
      i += need + 1;
    }
    return true;
  }

  /** The partition of an int key (Iceberg's and Spark's only). */
  public int ofInt(int key, int n) {
    return this == SPARK_BUCKET
        ? Math.floorMod(sparkHash(key, DataTypes.IntegerType), n)
        : ofLong(key, n);
  }

  /** The partition of a bigint key (Iceberg's and Spark's only). */
  public int ofLong(long key, int n) {
    if (this == SPARK_BUCKET) {
      return Math.floorMod(sparkHash(key, DataTypes.LongType), n);
    }
    byte[] bytes = new byte[8];
    for (int i = 0; i < 8; i++) {
      bytes[i] = (byte) (key >>> (8 * i));
    }
    return (Murmur3.hashBinary(bytes) & 0x7fffffff) % n;
  }

  /** Spark's {@code hash()} of one value: its own {@code Murmur3Hash} function. */
  private static int sparkHash(Object value, DataType type) {
    return (int) Murmur3HashFunction$.MODULE$.hash(value, type, SPARK_SEED);
  }

  private static long crc32(byte[] key) {
    CRC32 crc = new CRC32();
    crc.update(key);
    return crc.getValue();
  }

  /** FNV-1a, 32 bits. */
  static int fnv1a(byte[] key) {
    int h = 0x811c9dc5;
    for (byte b : key) {
      h = (h ^ (b & 0xff)) * 0x01000193;
    }
    return h;
  }

  /** Kafka's {@code Utils.murmur2}: MurmurHash2 with seed 0x9747b28c. */
  static int murmur2(byte[] data) {
    final int m = 0x5bd1e995;
    final int length = data.length;
    int h = 0x9747b28c ^ length;
    int blocks = length / 4;
    for (int i = 0; i < blocks; i++) {
      int at = i * 4;
      int k = (data[at] & 0xff) | ((data[at + 1] & 0xff) << 8) | ((data[at + 2] & 0xff) << 16)
          | ((data[at + 3] & 0xff) << 24);
      k *= m;
      k ^= k >>> 24;
      k *= m;
      h *= m;
      h ^= k;
    }
    int tail = blocks * 4;
    switch (length % 4) {
      case 3:
        h ^= (data[tail + 2] & 0xff) << 16;
        // fall through
      case 2:
        h ^= (data[tail + 1] & 0xff) << 8;
        // fall through
      case 1:
        h ^= data[tail] & 0xff;
        h *= m;
        break;
      default:
        break;
    }
    h ^= h >>> 13;
    h *= m;
    h ^= h >>> 15;
    return h;
  }
}

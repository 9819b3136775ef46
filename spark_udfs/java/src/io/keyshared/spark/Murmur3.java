package io.keyshared.spark;

import java.nio.ByteOrder;

import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * MurmurHash3_x86_32 with seed 0 over a key's bytes: keyshared's pinned key hash (SPEC 1),
 * bit for bit the Rust kernel's. Strings hash as their UTF-8 bytes, binary keys as they are.
 *
 * <p>Spark's own {@code Murmur3_x86_32.hashUnsafeBytes} folds the tail bytes differently from
 * the reference algorithm, so it cannot be reused here.
 */
public final class Murmur3 {
  private static final int C1 = 0xcc9e2d51;
  private static final int C2 = 0x1b873593;
  private static final boolean BIG_ENDIAN = ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN;

  private Murmur3() {}

  /** The key hash of a string key's UTF-8 bytes, as the int holding its 32 bits. */
  public static int hashString(UTF8String key) {
    return hash(key.getBaseObject(), key.getBaseOffset(), key.numBytes());
  }

  /** The key hash of a binary key. */
  public static int hashBinary(byte[] key) {
    return hash(key, Platform.BYTE_ARRAY_OFFSET, key.length);
  }

  /** The key hash of {@code length} bytes of {@code key} from {@code from}. */
  public static int hashBinary(byte[] key, int from, int length) {
    return hash(key, Platform.BYTE_ARRAY_OFFSET + (long) from, length);
  }

  @SuppressWarnings("fallthrough")
  static int hash(Object base, long offset, int length) {
    int h = 0;
    int blocks = length & ~3;
    for (int i = 0; i < blocks; i += 4) {
      int k = Platform.getInt(base, offset + i);
      if (BIG_ENDIAN) {
        k = Integer.reverseBytes(k);
      }
      h ^= mixK(k);
      h = Integer.rotateLeft(h, 13) * 5 + 0xe6546b64;
    }
    int k = 0;
    switch (length & 3) {
      case 3:
        k ^= (Platform.getByte(base, offset + blocks + 2) & 0xff) << 16;
        // fall through
      case 2:
        k ^= (Platform.getByte(base, offset + blocks + 1) & 0xff) << 8;
        // fall through
      case 1:
        k ^= Platform.getByte(base, offset + blocks) & 0xff;
        h ^= mixK(k);
        break;
      default:
        break;
    }
    h ^= length;
    h ^= h >>> 16;
    h *= 0x85ebca6b;
    h ^= h >>> 13;
    h *= 0xc2b2ae35;
    h ^= h >>> 16;
    return h;
  }

  private static int mixK(int k) {
    k *= C1;
    k = Integer.rotateLeft(k, 15);
    return k * C2;
  }
}

package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.Charset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.broker.service.ConsistentHashingStickyKeyConsumerSelector;
import org.apache.pulsar.broker.service.StickyKeyConsumerSelector;
import org.apache.pulsar.client.api.Range;
import org.apache.pulsar.common.util.Hash;
import org.apache.pulsar.common.util.Murmur3_32Hash;

/**
 * Pulsar's key hashes: {@code Murmur3_32Hash}, and the sticky key hash a broker computes.
 *
 * <ul>
 *   <li>{@code hash.make_hash {key}} / {@code hash.make_hashes {keys}}:
 *       {@code Murmur3_32Hash.getInstance().makeHash(bytes)}, the hash with its sign bit
 *       cleared (0 to 2^31 - 1).
 *   <li>{@code hash.raw {key}} / {@code hash.raws {keys}}: the full 32-bit murmur3 before
 *       the sign bit is cleared (the private {@code makeHash0}, read by reflection), unsigned.
 *   <li>{@code hash.sticky_key_hash {key, range?}} / {@code hash.sticky_key_hashes {keys,
 *       range?}}: {@code makeStickyKeyHash} over {@code range} ([start, end]) as
 *       {@code StickyKeyConsumerSelectorUtils} computes it, or without {@code range} as the
 *       broker's default selector computes it (a {@code ConsistentHashingStickyKeyConsumerSelector}
 *       built as the Key_Shared dispatcher builds it, over its own key hash range).
 *   <li>{@code hash.default_key_hash_range}: that default selector's key hash range, and
 *       {@code DEFAULT_RANGE_SIZE}.
 *   <li>{@code hash.default_charset}: the JVM's default charset, which Pulsar's selector uses
 *       to turn consumer names into bytes ({@code String.getBytes()} without a charset).
 * </ul>
 *
 * Keys are JSON strings (their UTF-8 bytes) or {@code {"b64": ...}} for any bytes.
 */
final class HashOps {
  private static final Hash MURMUR = Murmur3_32Hash.getInstance();
  /** The broker's default selector: consistent hashing, 100 points, impacted results on. */
  private static final StickyKeyConsumerSelector DEFAULT_SELECTOR =
      new ConsistentHashingStickyKeyConsumerSelector(100, true);

  private HashOps() {}

  static void register(Map<String, Op> ops) {
    ops.put("hash.make_hash", (a, h) -> MURMUR.makeHash(key(a)));
    ops.put("hash.make_hashes", (a, h) -> mapKeys(a, MURMUR::makeHash));
    ops.put("hash.raw", (a, h) -> raw(key(a)));
    ops.put("hash.raws", (a, h) -> mapKeys(a, HashOps::raw));
    ops.put("hash.sticky_key_hash", (a, h) -> sticky(a).apply(key(a)));
    ops.put("hash.sticky_key_hashes", (a, h) -> mapKeys(a, sticky(a)));
    ops.put("hash.default_key_hash_range", (a, h) -> Map.of(
        "key_hash_range", range(DEFAULT_SELECTOR.getKeyHashRange()),
        "default_range_size", StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE,
        "sticky_key_hash_not_set", StickyKeyConsumerSelector.STICKY_KEY_HASH_NOT_SET));
    ops.put("hash.default_charset", (a, h) -> Charset.defaultCharset().name());
  }

  /** A function of a key's bytes that may throw (reflection). */
  @FunctionalInterface
  interface KeyFunction {
    Object apply(byte[] key) throws Exception;
  }

  static byte[] key(JsonNode args) {
    return Args.key(Args.field(args, "key"), "args.key");
  }

  static List<Object> mapKeys(JsonNode args, KeyFunction f) throws Exception {
    JsonNode keys = Args.array(args, "keys");
    List<Object> out = new ArrayList<>(keys.size());
    for (int i = 0; i < keys.size(); i++) {
      out.add(f.apply(Args.key(keys.get(i), "args.keys[" + i + "]")));
    }
    return out;
  }

  static List<Integer> range(Range r) {
    return List.of(r.getStart(), r.getEnd());
  }

  /** A range given as [start, end], both inclusive. */
  static Range rangeArg(JsonNode args, String name) {
    JsonNode value = Args.array(args, name);
    if (value.size() != 2 || !value.get(0).canConvertToInt() || !value.get(1).canConvertToInt()) {
      throw new IllegalArgumentException("args." + name + " must be [start, end], got " + value);
    }
    return Range.of(value.get(0).intValue(), value.get(1).intValue());
  }

  private static Method makeHash0;

  /** The 32-bit murmur3 before {@code makeHash} clears the sign bit, as an unsigned long. */
  static long raw(byte[] key) throws Exception {
    if (makeHash0 == null) {
      Method m;
      try {
        m = Murmur3_32Hash.class.getDeclaredMethod("makeHash0", byte[].class);
      } catch (NoSuchMethodException e) {
        throw new UnsupportedOperationException(
            "Murmur3_32Hash.makeHash0(byte[]) is not in this Pulsar release");
      }
      m.setAccessible(true);
      makeHash0 = m;
    }
    return Integer.toUnsignedLong((Integer) invoke(makeHash0, MURMUR, key));
  }

  private static Method utilsMakeStickyKeyHash;

  /** {@code StickyKeyConsumerSelectorUtils.makeStickyKeyHash(key, range)} (package-private). */
  static int makeStickyKeyHash(byte[] key, Range range) throws Exception {
    if (utilsMakeStickyKeyHash == null) {
      Method m;
      try {
        m = Class.forName("org.apache.pulsar.broker.service.StickyKeyConsumerSelectorUtils")
            .getDeclaredMethod("makeStickyKeyHash", byte[].class, Range.class);
      } catch (ClassNotFoundException | NoSuchMethodException e) {
        throw new UnsupportedOperationException(
            "StickyKeyConsumerSelectorUtils.makeStickyKeyHash(byte[], Range) is not in this "
                + "Pulsar release");
      }
      m.setAccessible(true);
      utilsMakeStickyKeyHash = m;
    }
    return (Integer) invoke(utilsMakeStickyKeyHash, null, key, range);
  }

  /** The sticky key hash over args.range, or the default selector's when none is given. */
  static KeyFunction sticky(JsonNode args) {
    if (args.hasNonNull("range")) {
      Range range = rangeArg(args, "range");
      return k -> makeStickyKeyHash(k, range);
    }
    return DEFAULT_SELECTOR::makeStickyKeyHash;
  }

  static Object invoke(Method m, Object target, Object... args) throws Exception {
    try {
      return m.invoke(target, args);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      if (cause instanceof Exception ex) {
        throw ex;
      }
      throw e;
    }
  }
}

package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.iceberg.transforms.Transforms;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;
import org.apache.pulsar.client.api.HashingScheme;
import org.apache.pulsar.client.api.MessageRouter;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.impl.MessageImpl;
import org.apache.pulsar.client.impl.SinglePartitionMessageRouterImpl;
import org.apache.pulsar.common.api.proto.MessageMetadata;

/**
 * The key partitioners of other systems, from their released jars: Kafka's producer, Pulsar's
 * Java client and Iceberg's bucket transform. Every op is batched: one request carries a whole
 * list of keys, a JSON null standing for a null key, and answers a list of the same length.
 *
 * <ul>
 *   <li>{@code partitioner.kafka {keys, num_partitions}}: the partition Kafka's producer gives a
 *       record of that serialized key ({@code BuiltInPartitioner.partitionForKey}); null for a
 *       null key, which the producer leaves to its sticky partitioner.
 *   <li>{@code partitioner.kafka_murmur2 {keys}}: {@code Utils.murmur2(key)}, signed.
 *   <li>{@code partitioner.pulsar {keys, num_partitions, scheme}}: the partition Pulsar's Java
 *       client routes a message of that key to on a partitioned topic, {@code scheme} being a
 *       {@code HashingScheme} name ({@code JavaStringHash} or {@code Murmur3_32Hash}). The
 *       client's keys are strings: each key's bytes become the string {@code new String(bytes,
 *       UTF_8)}, set as the message's key, and the client's router chooses (keyed messages
 *       route alike under every routing mode). Null for a null key, which routes without a hash.
 *   <li>{@code partitioner.iceberg_bucket {values, num_buckets, type}}: Iceberg's
 *       {@code bucket[num_buckets]} transform bound to {@code type} ({@code string},
 *       {@code binary}, {@code int} or {@code long}) applied to each value: keys (their bytes
 *       decoded as UTF-8 for {@code string}) or JSON integers; null for null.
 * </ul>
 */
final class PartitionerOps {
  private PartitionerOps() {}

  static void register(Map<String, Op> ops) {
    ops.put("partitioner.kafka", (a, h) -> {
      int n = Args.intValue(a, "num_partitions");
      return mapKeys(a, k -> BuiltInPartitioner.partitionForKey(k, n));
    });
    ops.put("partitioner.kafka_murmur2", (a, h) -> mapKeys(a, Utils::murmur2));
    ops.put("partitioner.pulsar", (a, h) -> pulsar(a));
    ops.put("partitioner.iceberg_bucket", (a, h) -> icebergBucket(a));
  }

  /** Each key of args.keys through {@code f}, null keys as null. */
  static List<Object> mapKeys(JsonNode args, Function<byte[], Object> f) {
    JsonNode keys = Args.array(args, "keys");
    List<Object> out = new ArrayList<>(keys.size());
    for (int i = 0; i < keys.size(); i++) {
      JsonNode key = keys.get(i);
      out.add(key.isNull() ? null : f.apply(Args.key(key, "args.keys[" + i + "]")));
    }
    return out;
  }

  static HashingScheme scheme(JsonNode args) {
    String name = Args.text(args, "scheme");
    try {
      return HashingScheme.valueOf(name);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "args.scheme must be JavaStringHash or Murmur3_32Hash, got '" + name + "'");
    }
  }

  private static List<Object> pulsar(JsonNode args) {
    int n = Args.intValue(args, "num_partitions");
    // Partition index -1 for messages without a key: never reached, null keys stay null.
    MessageRouter router = new SinglePartitionMessageRouterImpl(-1, scheme(args));
    return mapKeys(args, k -> router.choosePartition(message(k), () -> n));
  }

  /** A message built as the client builds one with {@code key(new String(bytes, UTF_8))}. */
  private static MessageImpl<byte[]> message(byte[] key) {
    MessageMetadata metadata = new MessageMetadata();
    metadata.setPartitionKey(new String(key, StandardCharsets.UTF_8));
    metadata.setPartitionKeyB64Encoded(false);
    return MessageImpl.create(metadata, ByteBuffer.allocate(0), Schema.BYTES, "partitioned");
  }

  private static List<Object> icebergBucket(JsonNode args) {
    int n = Args.intValue(args, "num_buckets");
    String type = Args.text(args, "type");
    JsonNode values = Args.array(args, "values");
    List<Object> out = new ArrayList<>(values.size());
    Function<Object, Integer> bucket = bucket(n, icebergType(type));
    for (int i = 0; i < values.size(); i++) {
      JsonNode value = values.get(i);
      out.add(value.isNull() ? null : bucket.apply(icebergValue(type, value, "args.values[" + i + "]")));
    }
    return out;
  }

  @SuppressWarnings("unchecked")
  private static Function<Object, Integer> bucket(int n, Type type) {
    return (Function<Object, Integer>) (Function<?, Integer>) Transforms.bucket(n).bind(type);
  }

  private static Type icebergType(String type) {
    switch (type) {
      case "string":
        return Types.StringType.get();
      case "binary":
        return Types.BinaryType.get();
      case "int":
        return Types.IntegerType.get();
      case "long":
        return Types.LongType.get();
      default:
        throw new IllegalArgumentException(
            "args.type must be string, binary, int or long, got '" + type + "'");
    }
  }

  /** A value as Iceberg holds one of {@code type}. */
  private static Object icebergValue(String type, JsonNode value, String where) {
    switch (type) {
      case "string":
        return new String(Args.key(value, where), StandardCharsets.UTF_8);
      case "binary":
        return ByteBuffer.wrap(Args.key(value, where));
      default:
        if (!value.isIntegralNumber() || !value.canConvertToLong()) {
          throw new IllegalArgumentException(where + " must be an integer, got " + value);
        }
        long v = value.longValue();
        if (type.equals("int") && v != (int) v) {
          throw new IllegalArgumentException(where + " = " + v + " is not an int");
        }
        return type.equals("int") ? (Object) (int) v : (Object) v;
    }
  }
}

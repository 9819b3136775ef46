package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.iceberg.transforms.Transforms;
import org.apache.iceberg.types.Types;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.pulsar.broker.service.ConsistentHashingStickyKeyConsumerSelector;
import org.apache.pulsar.broker.service.Consumer;
import org.apache.pulsar.client.impl.Hash;
import org.apache.pulsar.client.impl.JavaStringHash;
import org.apache.pulsar.client.impl.Murmur3Hash32;
import org.apache.pulsar.client.util.MathUtils;

/**
 * The JVM side of the partitioner benchmarks (benches/): each system's partitioner, from its
 * released jar, looped over one key set on one thread and timed by the JVM itself.
 *
 * <ul>
 *   <li>{@code bench.load {path}}: reads a key set and answers its handle. The file holds a
 *       big-endian int32 count, that many int32 lengths, then the keys' bytes one after the
 *       other.
 *   <li>{@code bench.loop {keys, task, num_partitions}} or {@code bench.loop {keys, task:
 *       "selector", consumers, number_of_points}}: a handle on one task's loop over the key set,
 *       its inputs made once here, untimed: {@code kafka} ({@code
 *       BuiltInPartitioner.partitionForKey}, Kafka's producer: {@code toPositive(murmur2(key)) %
 *       n} on the key's bytes); {@code pulsar_murmur3} (the Java client's {@code
 *       Murmur3Hash32.makeHash} of the key's bytes, then {@code MathUtils.signSafeMod} as its
 *       router does: the bytes overload, so that no String is built); {@code
 *       pulsar_java_string} ({@code JavaStringHash.makeHash} of {@code new String(key, UTF_8)},
 *       built in the loop, as a client that receives bytes builds its key, then {@code
 *       signSafeMod}); {@code iceberg_bucket_string} (Iceberg's {@code bucket[n]} transform bound
 *       to string, applied to the keys as Strings made once, as Iceberg holds a string column);
 *       {@code selector} (Pulsar's {@code ConsistentHashingStickyKeyConsumerSelector} of {@code
 *       number_of_points}, consumers {@code 0 .. consumers - 1} named {@code "c" + id}, {@code
 *       select} of each key's {@code makeStickyKeyHash}, the hashes made once).
 *   <li>{@code bench.run {handle, rounds = 1}}: runs the loop {@code rounds} times; answers
 *       {@code {"nanos": [...], "cpu_nanos": [...], "checksum": c}}: the {@code
 *       System.nanoTime} span of each pass (the loop alone: no request parsing, no answer),
 *       the CPU time it took ({@link #cpuNanos}) and {@code sum((i + 1) * result[i])} modulo
 *       2^64 of the last pass, result being the partition or the consumer id.
 *   <li>{@code bench.dump {handle, path}}: one pass, its results written to {@code path} as
 *       little-endian int32; answers their count.
 * </ul>
 *
 * <p>Results go to an array the loop object holds, so that the JIT cannot drop the work; the
 * array is made once, as a caller reusing its buffer would.
 */
final class BenchOps {
  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  private BenchOps() {}

  /** One task's pass over every key into {@link #results}. */
  abstract static class Loop {
    final int[] out;

    Loop(int n) {
      out = new int[n];
    }

    abstract void pass();

    int[] results() {
      return out;
    }
  }

  static void register(Map<String, Op> ops) {
    ops.put("bench.load", (a, h) -> h.add(load(Path.of(Args.text(a, "path")))));
    ops.put("bench.loop",
        (a, h) -> h.add(loop(a, h.get(Args.intValue(a, "keys"), byte[][].class))));
    ops.put("bench.run", (a, h) -> {
      Loop loop = h.get(Args.handle(a), Loop.class);
      int rounds = a.hasNonNull("rounds") ? Args.intValue(a, "rounds") : 1;
      if (rounds < 1) {
        throw new IllegalArgumentException("args.rounds must be at least 1, got " + rounds);
      }
      List<Long> nanos = new ArrayList<>(rounds);
      List<Long> cpuNanos = new ArrayList<>(rounds);
      for (int r = 0; r < rounds; r++) {
        long cpu = cpuNanos();
        long start = System.nanoTime();
        loop.pass();
        nanos.add(System.nanoTime() - start);
        cpuNanos.add(cpuNanos() - cpu);
      }
      return Map.of("nanos", nanos, "cpu_nanos", cpuNanos, "checksum", checksum(loop.results()));
    });
    ops.put("bench.dump", (a, h) -> {
      Loop loop = h.get(Args.handle(a), Loop.class);
      loop.pass();
      int[] results = loop.results();
      ByteBuffer bytes = ByteBuffer.allocate(4 * results.length).order(ByteOrder.LITTLE_ENDIAN);
      bytes.asIntBuffer().put(results);
      try (FileChannel file = FileChannel.open(Path.of(Args.text(a, "path")),
          StandardOpenOption.CREATE, StandardOpenOption.WRITE,
          StandardOpenOption.TRUNCATE_EXISTING)) {
        while (bytes.hasRemaining()) {
          file.write(bytes);
        }
      }
      return results.length;
    });
  }

  /**
   * The CPU time of the loop: this thread's (nanoseconds, {@code ThreadMXBean}), plus the
   * collectors' pause time (milliseconds): the serial collector works on its own thread while
   * the loop waits at a safepoint. The process's own CPU clock would count both, but the JVM
   * reads it in 10 ms steps, as long as a whole pass.
   */
  static long cpuNanos() {
    long gcMillis = 0;
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      gcMillis += Math.max(0, gc.getCollectionTime());
    }
    return THREADS.getCurrentThreadCpuTime() + gcMillis * 1_000_000;
  }

  static byte[][] load(Path path) throws IOException {
    try (DataInputStream in =
        new DataInputStream(new BufferedInputStream(Files.newInputStream(path)))) {
      int count = in.readInt();
      int[] lengths = new int[count];
      for (int i = 0; i < count; i++) {
        lengths[i] = in.readInt();
      }
      byte[][] keys = new byte[count][];
      for (int i = 0; i < count; i++) {
        keys[i] = new byte[lengths[i]];
        in.readFully(keys[i]);
      }
      if (in.read() != -1) {
        throw new IllegalArgumentException("args.path: bytes after the " + count + " keys");
      }
      return keys;
    }
  }

  static long checksum(int[] results) {
    long sum = 0;
    for (int i = 0; i < results.length; i++) {
      sum += (i + 1L) * results[i];
    }
    return sum;
  }

  static Loop loop(JsonNode a, byte[][] keys) throws Exception {
    String task = Args.text(a, "task");
    switch (task) {
      case "kafka":
        return kafka(keys, Args.intValue(a, "num_partitions"));
      case "pulsar_murmur3":
        return pulsarMurmur3(keys, Args.intValue(a, "num_partitions"));
      case "pulsar_java_string":
        return pulsarJavaString(keys, Args.intValue(a, "num_partitions"));
      case "iceberg_bucket_string":
        return icebergBucketString(keys, Args.intValue(a, "num_partitions"));
      case "selector":
        return selector(keys, Args.intValue(a, "consumers"), Args.intValue(a, "number_of_points"));
      default:
        throw new IllegalArgumentException("args.task must be kafka, pulsar_murmur3, "
            + "pulsar_java_string, iceberg_bucket_string or selector, got '" + task + "'");
    }
  }

  static Loop kafka(byte[][] keys, int n) {
    return new Loop(keys.length) {
      @Override
      void pass() {
        for (int i = 0; i < keys.length; i++) {
          out[i] = BuiltInPartitioner.partitionForKey(keys[i], n);
        }
      }
    };
  }

  static Loop pulsarMurmur3(byte[][] keys, int n) {
    Hash hash = Murmur3Hash32.getInstance();
    return new Loop(keys.length) {
      @Override
      void pass() {
        for (int i = 0; i < keys.length; i++) {
          out[i] = MathUtils.signSafeMod(hash.makeHash(keys[i]), n);
        }
      }
    };
  }

  static Loop pulsarJavaString(byte[][] keys, int n) {
    Hash hash = JavaStringHash.getInstance();
    return new Loop(keys.length) {
      @Override
      void pass() {
        for (int i = 0; i < keys.length; i++) {
          String key = new String(keys[i], StandardCharsets.UTF_8);
          out[i] = MathUtils.signSafeMod(hash.makeHash(key), n);
        }
      }
    };
  }

  @SuppressWarnings("unchecked")
  static Loop icebergBucketString(byte[][] keys, int n) {
    Function<CharSequence, Integer> bucket = (Function<CharSequence, Integer>)
        (Function<?, Integer>) Transforms.bucket(n).bind(Types.StringType.get());
    String[] strings = new String[keys.length];
    for (int i = 0; i < keys.length; i++) {
      strings[i] = new String(keys[i], StandardCharsets.UTF_8);
    }
    return new Loop(keys.length) {
      @Override
      void pass() {
        for (int i = 0; i < strings.length; i++) {
          out[i] = bucket.apply(strings[i]);
        }
      }
    };
  }

  static Loop selector(byte[][] keys, int consumers, int points) throws Exception {
    ConsistentHashingStickyKeyConsumerSelector selector =
        new ConsistentHashingStickyKeyConsumerSelector(points);
    SelectorOps.Session session = new SelectorOps.Session(selector);
    for (int id = 0; id < consumers; id++) {
      selector.addConsumer(session.newConsumer(id, "c" + id)).get();
    }
    int[] hashes = new int[keys.length];
    for (int i = 0; i < keys.length; i++) {
      hashes[i] = selector.makeStickyKeyHash(keys[i]);
    }
    Consumer[] picked = new Consumer[keys.length];
    return new Loop(keys.length) {
      @Override
      void pass() {
        for (int i = 0; i < hashes.length; i++) {
          picked[i] = selector.select(hashes[i]);
        }
      }

      @Override
      int[] results() {
        for (int i = 0; i < picked.length; i++) {
          out[i] = session.id(picked[i]);
        }
        return out;
      }
    };
  }
}

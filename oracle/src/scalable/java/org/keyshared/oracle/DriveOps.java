package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.StreamConsumer;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

/**
 * Traffic and consumers on a running 5.0.0-M1 broker, for the end-to-end tests that watch the
 * broker react to them (beside {@link V5Ops}): a V5 producer sending keyed messages to a
 * {@code topic://} name at a steady rate, STREAM consumers that receive, acknowledge and
 * record what they got in the background, and a 4.x producer on a partitioned {@code
 * persistent://} topic (the 4.x client classes are on the broker's classpath too). Every wait
 * has a timeout.
 *
 * <ul>
 *   <li>{@code drive.load} {client (a {@code v5.client} handle), topic, rate, keys}: a handle;
 *       sends {@code rate} msg/s, keyed by {@code keys} in turn, until {@code drive.stop}.
 *   <li>{@code drive.stop} {handle}: stops a load; {@code {sent, failed, causes}}, the
 *       failed sends counted by cause: {@code segment gone} where M1's producer gave up on a
 *       sealed segment (its ten retries, about 4 s, ran out before the new layout reached
 *       it); {@code routed on the old layout} where a send routed to a segment that the new
 *       layout, applied before its producer was made, no longer holds (M1 fails it at once:
 *       {@code ScalableTopicProducer.getOrCreateSegmentProducerAsync} says "Segment N not
 *       found in active segments", which {@code isSegmentGoneError} does not retry);
 *       {@code segment fenced} where the broker refused the segment's producer with {@code
 *       TopicFencedException} ("Topic is temporarily unavailable", a {@code
 *       ServiceNotReadyException} to the client) until the producer's creation deadline, the
 *       client's operation timeout, ran out (not retried by {@code isSegmentGoneError}
 *       either); else the innermost exception's class name and message, without the request
 *       id and addresses the client puts in a broker's error, so that one cause counts once.
 *   <li>{@code drive.consumer} {client (a {@code v5.client} handle), topic, subscription,
 *       name, timeout_ms}: a handle on a STREAM consumer (earliest position) that receives
 *       and acknowledges on its own thread. The broker learns that a consumer left only when
 *       its client's connection closes ({@code v5.close} of the client).
 *   <li>{@code drive.received} {handle}: what the consumer got since the last call, in the
 *       order it got it: {@code [{key, value, topic, seen_ms}]}.
 *   <li>{@code drive.close} {handle}: closes a consumer.
 *   <li>{@code drive.v4_produce} {service_url, topic, messages: [[key, value]], timeout_ms}:
 *       a 4.x producer with its defaults (hashing scheme JavaStringHash), batching off, sends
 *       the messages in order; each one's partition.
 *   <li>{@code drive.v4_consume} {service_url, topic, subscription, count, timeout_ms}: a 4.x
 *       consumer with its defaults (Exclusive, all partitions at once) from the earliest
 *       message receives and acknowledges {@code count} messages, or as many as come within
 *       {@code timeout_ms}: {@code [{key, value, partition}]} in the order it got them.
 * </ul>
 */
final class DriveOps {
  private DriveOps() {}

  static void register(Map<String, Op> ops) {
    ops.put("drive.load", (a, h) -> h.add(Load.start(
        h.get(Args.intValue(a, "client"), PulsarClient.class), Args.text(a, "topic"),
        Args.doubleValue(a, "rate"), texts(Args.array(a, "keys")))));
    ops.put("drive.stop", (a, h) -> {
      Load load = h.get(Args.handle(a), Load.class);
      h.close(Args.handle(a));
      return load.stop();
    });
    ops.put("drive.consumer", (a, h) -> h.add(Receiver.start(
        h.get(Args.intValue(a, "client"), PulsarClient.class), Args.text(a, "topic"),
        Args.text(a, "subscription"), Args.text(a, "name"), Args.intValue(a, "timeout_ms"))));
    ops.put("drive.received", (a, h) -> h.get(Args.handle(a), Receiver.class).drain());
    ops.put("drive.close", (a, h) -> {
      Receiver receiver = h.get(Args.handle(a), Receiver.class);
      h.close(Args.handle(a));
      receiver.close();
      return true;
    });
    ops.put("drive.v4_produce", (a, h) -> v4Produce(Args.text(a, "service_url"),
        Args.text(a, "topic"), Args.array(a, "messages"), Args.intValue(a, "timeout_ms")));
    ops.put("drive.v4_consume", (a, h) -> v4Consume(Args.text(a, "service_url"),
        Args.text(a, "topic"), Args.text(a, "subscription"), Args.intValue(a, "count"),
        Args.intValue(a, "timeout_ms")));
  }

  private static List<String> texts(JsonNode array) {
    List<String> out = new ArrayList<>();
    for (JsonNode item : array) {
      if (!item.isTextual()) {
        throw new IllegalArgumentException("args.keys[] must be strings, got " + item);
      }
      out.add(item.textValue());
    }
    if (out.isEmpty()) {
      throw new IllegalArgumentException("args.keys must not be empty");
    }
    return out;
  }

  private static String[] message(JsonNode item) {
    if (!item.isArray() || item.size() != 2 || !item.get(0).isTextual()
        || !item.get(1).isTextual()) {
      throw new IllegalArgumentException("args.messages[] must be [key, value], got " + item);
    }
    return new String[] {item.get(0).textValue(), item.get(1).textValue()};
  }

  private static List<Integer> v4Produce(String serviceUrl, String topic, JsonNode messages,
      int timeoutMs) throws Exception {
    List<Integer> partitions = new ArrayList<>();
    try (org.apache.pulsar.client.api.PulsarClient client =
            org.apache.pulsar.client.api.PulsarClient.builder().serviceUrl(serviceUrl)
                .operationTimeout(timeoutMs, TimeUnit.MILLISECONDS).build();
        org.apache.pulsar.client.api.Producer<String> producer =
            client.newProducer(org.apache.pulsar.client.api.Schema.STRING).topic(topic)
                .enableBatching(false).create()) {
      // Sent without waiting for each: one producer keeps its messages' order per partition.
      List<CompletableFuture<org.apache.pulsar.client.api.MessageId>> sends = new ArrayList<>();
      for (JsonNode item : messages) {
        String[] m = message(item);
        sends.add(producer.newMessage().key(m[0]).value(m[1]).sendAsync());
      }
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
      for (CompletableFuture<org.apache.pulsar.client.api.MessageId> send : sends) {
        long left = Math.max(0, deadline - System.nanoTime());
        org.apache.pulsar.client.api.MessageId id = send.get(left, TimeUnit.NANOSECONDS);
        partitions.add(((org.apache.pulsar.client.impl.MessageIdImpl) id).getPartitionIndex());
      }
    }
    return partitions;
  }

  private static List<Map<String, Object>> v4Consume(String serviceUrl, String topic,
      String subscription, int count, int timeoutMs) throws Exception {
    List<Map<String, Object>> out = new ArrayList<>();
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    try (org.apache.pulsar.client.api.PulsarClient client =
            org.apache.pulsar.client.api.PulsarClient.builder().serviceUrl(serviceUrl)
                .operationTimeout(timeoutMs, TimeUnit.MILLISECONDS).build();
        org.apache.pulsar.client.api.Consumer<String> consumer =
            client.newConsumer(org.apache.pulsar.client.api.Schema.STRING).topic(topic)
                .subscriptionName(subscription)
                .subscriptionInitialPosition(
                    org.apache.pulsar.client.api.SubscriptionInitialPosition.Earliest)
                .subscribe()) {
      while (out.size() < count) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          break;
        }
        org.apache.pulsar.client.api.Message<String> m =
            consumer.receive((int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)),
                TimeUnit.MILLISECONDS);
        if (m == null) {
          break;
        }
        consumer.acknowledge(m);
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("key", m.getKey());
        row.put("value", m.getValue());
        row.put("partition", org.apache.pulsar.common.naming.TopicName.getPartitionIndex(
            m.getTopicName()));
        out.add(row);
      }
    }
    return out;
  }

  /** A producer sending at a steady rate on its own thread. */
  static final class Load {
    private static final Pattern STALE_ROUTE =
        Pattern.compile("Segment \\d+ not found in active segments");
    /** The client's wrapping of a broker's error: {"errorMsg":"...","reqId":N, ...}. */
    private static final Pattern BROKER_ERROR = Pattern.compile("\\{\"errorMsg\":\"(.*?)\",\"reqId\".*");
    private final Producer<String> producer;
    private final Thread thread;
    private final AtomicLong sent = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final Map<String, AtomicLong> causes = new ConcurrentHashMap<>();
    private volatile boolean running = true;

    private Load(Producer<String> producer, double rate, List<String> keys) {
      this.producer = producer;
      long periodNanos = (long) (1e9 / rate);
      this.thread = new Thread(() -> {
        long next = System.nanoTime();
        for (long i = 0; running; i++) {
          producer.async().newMessage().key(keys.get((int) (i % keys.size())))
              .value(Long.toString(i)).send()
              .whenComplete((id, e) -> {
                if (e == null) {
                  sent.incrementAndGet();
                } else {
                  failed.incrementAndGet();
                  causes.computeIfAbsent(cause(e), c -> new AtomicLong()).incrementAndGet();
                }
              });
          next += periodNanos;
          long wait = next - System.nanoTime();
          if (wait > 0) {
            try {
              TimeUnit.NANOSECONDS.sleep(wait);
            } catch (InterruptedException e) {
              return;
            }
          }
        }
      }, "drive-load");
      thread.setDaemon(true);
    }

    static Load start(PulsarClient client, String topic, double rate, List<String> keys)
        throws Exception {
      if (!(rate > 0)) {
        throw new IllegalArgumentException("args.rate must be > 0, got " + rate);
      }
      Load load = new Load(client.newProducer(Schema.string()).topic(topic).create(), rate, keys);
      load.thread.start();
      return load;
    }

    Map<String, Object> stop() throws Exception {
      running = false;
      thread.join(10_000);
      // A send queued behind a segment's producer that the broker keeps fenced ends only when
      // the client's creation deadline (V5Ops.TIMEOUT_MS) and then its send timeout (30 s)
      // run out: waiting past both, every send is counted, sent or failed with its cause.
      try {
        producer.async().flush().get(V5Ops.TIMEOUT_MS + 35_000, TimeUnit.MILLISECONDS);
      } finally {
        producer.close();
      }
      Map<String, Long> byCause = new TreeMap<>();
      causes.forEach((c, n) -> byCause.put(c, n.get()));
      return Map.of("sent", sent.get(), "failed", failed.get(), "causes", byCause);
    }

    /**
     * {@code segment gone} for a failure M1's {@code ScalableTopicProducer.isSegmentGoneError}
     * retries (the segment sealed, or its producer closed with it), {@code routed on the old
     * layout} for its race between routing and the layout's update, {@code segment fenced}
     * for a segment the broker kept fenced past the producer's creation deadline, else the
     * innermost cause's class name and the broker's message.
     */
    private static String cause(Throwable e) {
      Throwable inner = e;
      for (Throwable c = e; c != null; c = c.getCause()) {
        String message = String.valueOf(c.getMessage());
        if (c instanceof PulsarClientException.TopicTerminatedException
            || c instanceof PulsarClientException.AlreadyClosedException
            || message.contains("TopicTerminated") || message.contains("already terminated")
            || message.contains("AlreadyClosed")) {
          return "segment gone";
        }
        if (STALE_ROUTE.matcher(message).matches()) {
          return "routed on the old layout";
        }
        if (message.contains("TopicFencedException")) {
          return "segment fenced";
        }
        inner = c;
      }
      String message = String.valueOf(inner.getMessage());
      Matcher broker = BROKER_ERROR.matcher(message);
      if (broker.matches()) {
        message = broker.group(1);
      }
      return inner.getClass().getSimpleName() + ": "
          + message.substring(0, Math.min(message.length(), 160));
    }
  }

  /** A STREAM consumer receiving and acknowledging on its own thread. */
  static final class Receiver implements AutoCloseable {
    private final StreamConsumer<String> consumer;
    private final Thread thread;
    private final List<Map<String, Object>> received = new ArrayList<>();
    private volatile boolean running = true;

    private Receiver(StreamConsumer<String> consumer) {
      this.consumer = consumer;
      this.thread = new Thread(this::receive, "drive-consumer-" + consumer.consumerName());
      thread.setDaemon(true);
    }

    static Receiver start(PulsarClient client, String topic, String subscription, String name,
        int timeoutMs) throws Exception {
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
      while (true) {
        CompletableFuture<StreamConsumer<String>> subscribing = client
            .newStreamConsumer(Schema.string()).topic(topic).subscriptionName(subscription)
            .consumerName(name)
            .subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST)
            .subscribeAsync();
        try {
          Receiver receiver = new Receiver(subscribing.get(timeoutMs, TimeUnit.MILLISECONDS));
          receiver.thread.start();
          return receiver;
        } catch (ExecutionException e) {
          // A segment handed over by a rebalance is still held by its previous consumer for
          // a moment: the same registration retries until it is let go.
          if (!busy(e) || System.nanoTime() > deadline) {
            throw e;
          }
          TimeUnit.MILLISECONDS.sleep(200);
        }
      }
    }

    /** Whether a consumer-busy refusal (the 4.x client's, which the V5 one runs on, or
     * its own) caused {@code e}. */
    private static boolean busy(Throwable e) {
      for (Throwable t = e; t != null; t = t.getCause()) {
        if (t.getClass().getSimpleName().equals("ConsumerBusyException")) {
          return true;
        }
      }
      return false;
    }

    private void receive() {
      while (running) {
        Message<String> m;
        try {
          m = consumer.receive(Duration.ofMillis(200));
        } catch (Exception e) {
          if (!running) {
            return;
          }
          continue;
        }
        if (m == null) {
          continue;
        }
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("key", m.key().orElse(null));
        record.put("value", m.value());
        record.put("topic", m.topic());
        record.put("seen_ms", System.currentTimeMillis());
        synchronized (this) {
          received.add(record);
        }
        consumer.acknowledgeCumulative(m.id());
      }
    }

    synchronized List<Map<String, Object>> drain() {
      List<Map<String, Object>> out = new ArrayList<>(received);
      received.clear();
      return out;
    }

    @Override
    public void close() throws Exception {
      running = false;
      thread.join(10_000);
      consumer.close();
    }
  }
}

package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.MessageId;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.StreamConsumer;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;
import org.apache.pulsar.client.impl.v5.V5Access;

/**
 * Pulsar 5.0.0-M1's V5 client (PIP-483): its {@code SegmentRouter} on given segments, and a
 * client of a running broker's scalable topics ({@code topic://tenant/ns/name}). Every wait is
 * bounded: a step that does not finish in {@code timeout_ms} (default {@link #TIMEOUT_MS})
 * fails with a TimeoutException.
 *
 * <ul>
 *   <li>{@code v5.segment_router} {cases: [[key, [[id, start, end, legacy], ...]]]}: the
 *       segment id {@code SegmentRouter.route} gives the key (legacy: null, or the
 *       persistent:// name of a legacy segment), per case (see {@link ScalableJson#attempt}).
 *   <li>{@code v5.client} {service_url}: a {@link PulsarClient}; answers its handle.
 *   <li>{@code v5.produce} {client, topic, keys, values?}: sends one message per key (value:
 *       {@code values[i]}, else the key), in order, through one producer made for the call;
 *       answers the segment id each was stored in.
 *   <li>{@code v5.stream_consumer} {client, topic, subscription, consumer_name}: a stream
 *       consumer from the earliest message; answers its handle.
 *   <li>{@code v5.receive} {handle, quiet_ms, timeout_ms?}: the messages it receives until
 *       none comes for {@code quiet_ms} (or {@code timeout_ms} passes), each acknowledged
 *       (cumulatively, over every segment): [{key, value, topic, segment_id}] with the
 *       segment id read from the message's {@code segment://} topic.
 *   <li>{@code v5.assignment} {handle}: {epoch, segments: [[id, start, end]]}, what the
 *       controller last assigned the stream consumer.
 *   <li>{@code v5.resubscribe} {handle}: subscribes the stream consumer again to the
 *       assigned segments whose subscription failed (M1 leaves them unread); their ids.
 *   <li>{@code v5.segments} {handle}: [[id, state]], the stream consumer's per-segment
 *       subscriptions: {@code pending}, {@code failed: <cause>}, {@code connected} or
 *       {@code disconnected}.
 *   <li>{@code v5.close} {handle}: closes a client, producer or consumer.
 * </ul>
 */
final class V5Ops {
  static final long TIMEOUT_MS = 30_000;

  private V5Ops() {}

  static void register(Map<String, Op> ops) {
    ops.put("v5.segment_router", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        V5Ops::route));
    ops.put("v5.client", (a, h) -> h.add(PulsarClient.builder()
        .serviceUrl(Args.text(a, "service_url"))
        .operationTimeout(Duration.ofMillis(timeout(a)))
        .build()));
    ops.put("v5.produce", V5Ops::produce);
    ops.put("v5.stream_consumer", (a, h) -> h.add(h.get(Args.intValue(a, "client"),
            PulsarClient.class)
        .newStreamConsumer(Schema.string())
        .topic(Args.text(a, "topic"))
        .subscriptionName(Args.text(a, "subscription"))
        .consumerName(Args.text(a, "consumer_name"))
        .subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST)
        .subscribeAsync()
        .get(timeout(a), TimeUnit.MILLISECONDS)));
    ops.put("v5.receive", V5Ops::receive);
    ops.put("v5.assignment", (a, h) -> V5Access.assignment(
        h.get(Args.handle(a), StreamConsumer.class)));
    ops.put("v5.resubscribe", (a, h) -> V5Access.resubscribeFailed(
        h.get(Args.handle(a), StreamConsumer.class)));
    ops.put("v5.segments", (a, h) -> V5Access.segments(
        h.get(Args.handle(a), StreamConsumer.class)));
    ops.put("v5.close", (a, h) -> {
      int handle = Args.handle(a);
      Object object = h.get(handle, Object.class);
      h.close(handle);
      if (object instanceof AutoCloseable closeable) {
        closeable.close();
      }
      return true;
    });
  }

  private static long timeout(JsonNode a) {
    return a.hasNonNull("timeout_ms") ? Args.longValue(a, "timeout_ms") : TIMEOUT_MS;
  }

  private static Object route(JsonNode c) {
    if (!c.isArray() || c.size() != 2 || !c.get(0).isTextual() || !c.get(1).isArray()) {
      throw new IllegalArgumentException("args.cases[] must be [key, segments], got " + c);
    }
    JsonNode segments = c.get(1);
    int n = segments.size();
    long[] ids = new long[n];
    int[] starts = new int[n];
    int[] ends = new int[n];
    String[] legacy = new String[n];
    for (int i = 0; i < n; i++) {
      JsonNode s = segments.get(i);
      if (!s.isArray() || s.size() != 4) {
        throw new IllegalArgumentException(
            "args.cases[][1][" + i + "] must be [id, start, end, legacy], got " + s);
      }
      ids[i] = s.get(0).longValue();
      starts[i] = s.get(1).intValue();
      ends[i] = s.get(2).intValue();
      legacy[i] = s.get(3).isNull() ? null : s.get(3).textValue();
    }
    return V5Access.route(c.get(0).textValue(), ids, starts, ends, legacy);
  }

  private static Object produce(JsonNode a, Handles h) throws Exception {
    PulsarClient client = h.get(Args.intValue(a, "client"), PulsarClient.class);
    JsonNode keys = Args.array(a, "keys");
    JsonNode values = a.hasNonNull("values") ? Args.array(a, "values") : keys;
    if (values.size() != keys.size()) {
      throw new IllegalArgumentException("args.values must be as long as args.keys");
    }
    List<Long> segments = new ArrayList<>();
    try (Producer<String> producer = client.newProducer(Schema.string())
        .topic(Args.text(a, "topic"))
        .sendTimeout(Duration.ofMillis(timeout(a)))
        .createAsync()
        .get(timeout(a), TimeUnit.MILLISECONDS)) {
      for (int i = 0; i < keys.size(); i++) {
        MessageId id = producer.newMessage()
            .key(keys.get(i).asText())
            .value(values.get(i).asText())
            .send();
        segments.add(V5Access.segmentId(id));
      }
    }
    return segments;
  }

  private static Object receive(JsonNode a, Handles h) throws Exception {
    StreamConsumer<?> consumer = h.get(Args.handle(a), StreamConsumer.class);
    Duration quiet = Duration.ofMillis(Args.longValue(a, "quiet_ms"));
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeout(a));
    List<Map<String, Object>> out = new ArrayList<>();
    while (System.nanoTime() < deadline) {
      Message<?> m = consumer.receive(quiet);
      if (m == null) {
        break;
      }
      consumer.acknowledgeCumulative(m.id());
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("key", m.key().orElse(null));
      row.put("value", String.valueOf(m.value()));
      row.put("topic", m.topic());
      row.put("segment_id", segmentOf(m.topic()));
      out.add(row);
    }
    return out;
  }

  /** The id at the end of {@code segment://tenant/ns/name/<start>-<end>-<id>}. */
  private static long segmentOf(String topic) {
    return Long.parseLong(topic.substring(topic.lastIndexOf('-') + 1));
  }
}

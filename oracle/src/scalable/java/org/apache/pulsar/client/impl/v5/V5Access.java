package org.apache.pulsar.client.impl.v5;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.apache.pulsar.client.api.v5.MessageId;
import org.apache.pulsar.client.api.v5.StreamConsumer;
import org.apache.pulsar.common.scalable.HashRange;

/**
 * What the V5 client keeps package-private, for the oracle's ops: its {@link SegmentRouter},
 * the segment a sent message went to, and the segments the controller assigned a stream
 * consumer. Lives in the client's package for that reason only; it changes nothing.
 */
public final class V5Access {
  private V5Access() {}

  /**
   * {@code SegmentRouter.route(key, segments)}: the segment id the V5 producer sends {@code
   * key} to, given the active segments as parallel arrays (a null or empty legacy name: a
   * regular segment).
   */
  public static long route(String key, long[] ids, int[] starts, int[] ends, String[] legacy) {
    List<SegmentRouter.ActiveSegment> segments = new ArrayList<>();
    for (int i = 0; i < ids.length; i++) {
      segments.add(new SegmentRouter.ActiveSegment(
          ids[i], new HashRange(starts[i], ends[i]), "", legacy[i]));
    }
    return new SegmentRouter().route(key, segments);
  }

  /** The segment a V5 producer stored the message of {@code id} in. */
  public static long segmentId(MessageId id) {
    return ((MessageIdV5) id).segmentId();
  }

  /**
   * The assignment the controller last sent a stream consumer: {@code epoch} (the layout
   * epoch it was computed on) and {@code segments} ([id, start, end] each, in its order).
   */
  public static Map<String, Object> assignment(StreamConsumer<?> consumer) throws Exception {
    ScalableConsumerClient session = session(stream(consumer));
    List<List<Long>> segments = new ArrayList<>();
    for (SegmentRouter.ActiveSegment s : session.currentAssignment()) {
      segments.add(List.of(s.segmentId(), (long) s.hashRange().start(),
          (long) s.hashRange().end()));
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("epoch", field(ScalableConsumerClient.class, "currentEpoch").getLong(session));
    out.put("segments", segments);
    return out;
  }

  /**
   * Subscribes a stream consumer again to the assigned segments whose subscription failed,
   * and answers their ids. M1's consumer keeps a failed per-segment subscription (say the
   * segment's previous owner had not yet let go: ConsumerBusy) until the segment leaves its
   * assignment, so it would never read that segment.
   */
  public static List<Long> resubscribeFailed(StreamConsumer<?> consumer) throws Exception {
    ScalableStreamConsumer<?> stream = stream(consumer);
    Map<?, ?> segments = segmentConsumers(stream);
    List<Long> failed = new ArrayList<>();
    for (var entry : segments.entrySet()) {
      if (((CompletableFuture<?>) entry.getValue())
          .isCompletedExceptionally()) {
        failed.add((Long) entry.getKey());
      }
    }
    if (!failed.isEmpty()) {
      failed.forEach(segments::remove);
      List<SegmentRouter.ActiveSegment> assigned = session(stream).currentAssignment();
      stream.onAssignmentChange(assigned, assigned);
    }
    return failed;
  }

  /**
   * What a stream consumer holds per segment, in its map of per-segment subscriptions:
   * {@code [id, state]} each, the state {@code pending} (subscribing), {@code failed: <cause>}
   * (kept, never retried), or the v4 consumer's {@code connected} / {@code disconnected}.
   */
  public static List<List<Object>> segments(StreamConsumer<?> consumer) throws Exception {
    List<List<Object>> out = new ArrayList<>();
    for (var entry : new TreeMap<>(segmentConsumers(stream(consumer))).entrySet()) {
      CompletableFuture<?> future = (CompletableFuture<?>) entry.getValue();
      String state;
      if (!future.isDone()) {
        state = "pending";
      } else if (future.isCompletedExceptionally()) {
        Throwable cause = future.handle((c, ex) -> ex).join();
        while (cause instanceof CompletionException && cause.getCause() != null) {
          cause = cause.getCause();
        }
        state = "failed: " + cause.getClass().getSimpleName();
      } else {
        boolean connected = ((org.apache.pulsar.client.api.Consumer<?>) future.join()).isConnected();
        state = connected ? "connected" : "disconnected";
      }
      out.add(List.of(entry.getKey(), state));
    }
    return out;
  }

  private static ScalableStreamConsumer<?> stream(StreamConsumer<?> consumer) {
    if (!(consumer instanceof ScalableStreamConsumer<?> stream)) {
      throw new IllegalArgumentException(
          "not a scalable stream consumer: " + consumer.getClass().getName());
    }
    return stream;
  }

  private static ScalableConsumerClient session(ScalableStreamConsumer<?> stream)
      throws Exception {
    return (ScalableConsumerClient) field(ScalableStreamConsumer.class, "session").get(stream);
  }

  private static Map<?, ?> segmentConsumers(ScalableStreamConsumer<?> stream) throws Exception {
    return (Map<?, ?>) field(ScalableStreamConsumer.class, "segmentConsumers").get(stream);
  }

  private static Field field(Class<?> type, String name) throws NoSuchFieldException {
    Field f = type.getDeclaredField(name);
    f.setAccessible(true);
    return f;
  }
}

package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import org.apache.pulsar.broker.resources.ScalableTopicResources;
import org.apache.pulsar.broker.service.scalable.ConsumerAssignment;
import org.apache.pulsar.broker.service.scalable.ConsumerSession;
import org.apache.pulsar.broker.service.scalable.ScalableTopicController;
import org.apache.pulsar.broker.service.scalable.SegmentDrainChecker;
import org.apache.pulsar.broker.service.scalable.SegmentLayout;
import org.apache.pulsar.broker.service.scalable.SubscriptionCoordinator;
import org.apache.pulsar.common.naming.TopicName;
import org.apache.pulsar.common.scalable.SegmentInfo;
import org.mockito.Mockito;

/**
 * {@link SegmentLayout}, the controller's initial layouts and the {@link
 * SubscriptionCoordinator}'s assignment, as 5.0.0-M1 has them. Layouts are {@link ScalableJson}'s.
 *
 * <ul>
 *   <li>{@code scalable.initial_layout} {cases: [n]}: {@code
 *       ScalableTopicController.createInitialMetadata(n)} as a layout (its times are the wall
 *       clock's).
 *   <li>{@code scalable.migrated_layout} {cases: [[persistent_base, partitions]]}: {@code
 *       createMigratedMetadata}.
 *   <li>{@code scalable.layout_ops} {cases: [{layout, ops, hashes}]}: applies {@code ops} in
 *       order ({@code ["split", id, now_ms]}, {@code ["merge", id1, id2, now_ms]}, {@code
 *       ["prune", id]}; a refused op leaves the layout as it was), then answers: {@code steps}
 *       (each op's outcome), {@code layout}, {@code active} (active ids, ascending), {@code
 *       find} ({@code findActiveSegment} of each hash), and per segment id {@code
 *       merge_depth}, {@code lineage}, {@code children} and {@code parents} (ids).
 *   <li>{@code scalable.assign} {cases: [{layout, topic, consumers, drain_checker, drained}]}:
 *       the assignment of a coordinator whose sessions are {@code consumers} (restored, as
 *       a new controller leader loads them), with a drain checker installed or not, and
 *       {@code drained} (sealed ids) known drained: {name: {"layout_epoch", "segments":
 *       [[id, [start, end], segment_topic_name]]}}.
 * </ul>
 *
 * <p>The benchmarks' JVM side (benches/test_layout_sizes.py), each timed by the JVM itself
 * ({@link #timed}: {@code calls} calls a round, {@code warmup} untimed rounds, then {@code
 * rounds} rounds, each round's {@code System.nanoTime} span and CPU time, {@link
 * BenchOps#cpuNanos}), its inputs read once before any round:
 *
 * <ul>
 *   <li>{@code scalable.bench_layout} {layout, ops, calls, warmup, rounds}: a call applies
 *       {@code ops} in turn ({@code ["split", id, now_ms]} or {@code ["merge", id1, id2,
 *       now_ms]}), each to the layout the one before it made, starting from {@code layout};
 *       answers the last call's {@code active} ids, ascending.
 *   <li>{@code scalable.bench_assign} {case, calls, warmup, rounds}: {@code case} as {@code
 *       scalable.assign}'s; the coordinator's sessions are restored once, then a call is its
 *       {@code computeAssignment} of the layout and those sessions; answers the last call's
 *       assignment as {@code scalable.assign} does.
 * </ul>
 */
final class LayoutOps {
  private LayoutOps() {}

  static void register(Map<String, Op> ops) {
    ops.put("scalable.initial_layout", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        c -> ScalableJson.layout(SegmentLayout.fromMetadata(
            ScalableTopicController.createInitialMetadata(c.intValue(), Map.of())))));
    ops.put("scalable.migrated_layout", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        c -> ScalableJson.layout(SegmentLayout.fromMetadata(
            ScalableTopicController.createMigratedMetadata(
                TopicName.get(c.get(0).textValue()), c.get(1).intValue())))));
    ops.put("scalable.layout_ops", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        LayoutOps::layoutOps));
    ops.put("scalable.assign", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        LayoutOps::assign));
    ops.put("scalable.bench_layout", (a, h) -> benchLayout(a));
    ops.put("scalable.bench_assign", (a, h) -> benchAssign(a));
  }

  /** One benchmark call's work; its result is kept, so that the JIT cannot drop it. */
  interface Call {
    Object run() throws Exception;
  }

  /** The last result of a timed call: read by nothing, written so the work is not dropped. */
  static volatile Object sink;

  /**
   * {@code warmup} untimed rounds, then {@code rounds} timed ones, each {@code calls} calls;
   * answers {@code {"nanos": [...], "cpu_nanos": [...]}} per round, and the last result.
   */
  static Map<String, Object> timed(JsonNode a, Call call) throws Exception {
    int calls = Args.intValue(a, "calls");
    int warmup = Args.intValue(a, "warmup");
    int rounds = Args.intValue(a, "rounds");
    Object last = null;
    for (int r = 0; r < warmup; r++) {
      for (int i = 0; i < calls; i++) {
        last = call.run();
      }
      sink = last;
    }
    List<Long> nanos = new ArrayList<>(rounds);
    List<Long> cpuNanos = new ArrayList<>(rounds);
    for (int r = 0; r < rounds; r++) {
      long cpu = BenchOps.cpuNanos();
      long start = System.nanoTime();
      for (int i = 0; i < calls; i++) {
        last = call.run();
      }
      nanos.add(System.nanoTime() - start);
      cpuNanos.add(BenchOps.cpuNanos() - cpu);
      sink = last;
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("nanos", nanos);
    out.put("cpu_nanos", cpuNanos);
    out.put("last", last);
    return out;
  }

  private static Object benchLayout(JsonNode a) throws Exception {
    SegmentLayout base = ScalableJson.layout(Args.field(a, "layout"), "args.layout");
    List<long[]> ops = new ArrayList<>();
    for (JsonNode op : Args.array(a, "ops")) {
      String kind = op.path(0).asText("");
      if (kind.equals("split") && op.size() == 3) {
        ops.add(new long[] {op.get(1).longValue(), op.get(2).longValue()});
      } else if (kind.equals("merge") && op.size() == 4) {
        ops.add(new long[] {op.get(1).longValue(), op.get(2).longValue(), op.get(3).longValue()});
      } else {
        throw new IllegalArgumentException("args.ops: " + op + " is not a split or a merge");
      }
    }
    Map<String, Object> out = timed(a, () -> {
      SegmentLayout layout = base;
      for (long[] op : ops) {
        layout = op.length == 2 ? layout.splitSegment(op[0], op[1])
            : layout.mergeSegments(op[0], op[1], op[2]);
      }
      return layout;
    });
    SegmentLayout done = (SegmentLayout) out.remove("last");
    out.put("active", done.getActiveSegments().keySet().stream().sorted().toList());
    return out;
  }

  @SuppressWarnings("unchecked")
  private static Object benchAssign(JsonNode a) throws Exception {
    JsonNode c = Args.field(a, "case");
    SegmentLayout layout = ScalableJson.layout(Args.field(c, "layout"), "args.case.layout");
    SubscriptionCoordinator coordinator = coordinator(c, layout);
    List<String> names = new ArrayList<>();
    for (JsonNode name : Args.array(c, "consumers")) {
      names.add(name.textValue());
    }
    List<ConsumerSession> sessions = new ArrayList<>(coordinator.restoreConsumers(names).keySet());
    Method compute = SubscriptionCoordinator.class.getDeclaredMethod(
        "computeAssignment", SegmentLayout.class, Collection.class);
    compute.setAccessible(true);
    Map<String, Object> out = timed(a, () -> compute.invoke(coordinator, layout, sessions));
    out.put("last", assignments(
        (Map<ConsumerSession, ConsumerAssignment>) out.get("last")));
    return out;
  }

  private static Object layoutOps(JsonNode c) {
    SegmentLayout layout = ScalableJson.layout(Args.field(c, "layout"), "args.cases[].layout");
    List<Object> steps = new ArrayList<>();
    for (JsonNode op : Args.array(c, "ops")) {
      SegmentLayout before = layout;
      Map<String, Object> step = ScalableJson.attempt(() -> apply(before, op));
      if (Boolean.TRUE.equals(step.get("ok"))) {
        layout = (SegmentLayout) step.remove("value");
      }
      steps.add(step);
    }
    SegmentLayout done = layout;
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("steps", steps);
    out.put("layout", ScalableJson.layout(done));
    out.put("active", done.getActiveSegments().keySet().stream().sorted().toList());
    List<Object> found = new ArrayList<>();
    for (JsonNode hash : Args.array(c, "hashes")) {
      found.add(ScalableJson.attempt(() -> done.findActiveSegment(hash.intValue()).segmentId()));
    }
    out.put("find", found);
    Map<String, Object> depth = new LinkedHashMap<>();
    Map<String, Object> lineage = new LinkedHashMap<>();
    Map<String, Object> children = new LinkedHashMap<>();
    Map<String, Object> parents = new LinkedHashMap<>();
    for (long id : done.getAllSegments().keySet()) {
      String key = Long.toString(id);
      depth.put(key, done.mergeDepth(id));
      lineage.put(key, ids(done.getLineage(id)));
      children.put(key, ids(done.getChildren(id)));
      parents.put(key, ids(done.getParents(id)));
    }
    out.put("merge_depth", depth);
    out.put("lineage", lineage);
    out.put("children", children);
    out.put("parents", parents);
    return out;
  }

  private static Object apply(SegmentLayout layout, JsonNode op) {
    String kind = op.path(0).asText("");
    switch (kind) {
      case "split":
        return layout.splitSegment(op.get(1).longValue(), op.get(2).longValue());
      case "merge":
        return layout.mergeSegments(
            op.get(1).longValue(), op.get(2).longValue(), op.get(3).longValue());
      case "prune":
        return layout.pruneSegment(op.get(1).longValue());
      default:
        throw new IllegalArgumentException(
            "args.cases[].ops: unknown op " + op + " (split, merge or prune)");
    }
  }

  private static List<Long> ids(List<SegmentInfo> segments) {
    return segments.stream().map(SegmentInfo::segmentId).toList();
  }

  private static Object assign(JsonNode c) throws Exception {
    SegmentLayout layout = ScalableJson.layout(Args.field(c, "layout"), "args.cases[].layout");
    SubscriptionCoordinator coordinator = coordinator(c, layout);
    List<String> names = new ArrayList<>();
    for (JsonNode name : Args.array(c, "consumers")) {
      names.add(name.textValue());
    }
    return assignments(coordinator.restoreConsumers(names));
  }

  private static SubscriptionCoordinator coordinator(JsonNode c, SegmentLayout layout)
      throws Exception {
    SegmentDrainChecker checker = Args.boolValue(c, "drain_checker")
        ? (segment, sub) -> CompletableFuture.completedFuture(false) : null;
    SubscriptionCoordinator coordinator = new SubscriptionCoordinator("sub",
        TopicName.get(Args.text(c, "topic")), layout,
        Mockito.mock(ScalableTopicResources.class), Mockito.mock(ScheduledExecutorService.class),
        Duration.ofSeconds(60), checker, Duration.ofSeconds(2), Duration.ofMinutes(15));
    // Set directly: markSegmentsDrained would also start the drain poller.
    drained(coordinator).addAll(ScalableJson.ids(Args.array(c, "drained")));
    return coordinator;
  }

  private static Map<String, Object> assignments(
      Map<ConsumerSession, ConsumerAssignment> assigned) {
    Map<String, Object> out = new LinkedHashMap<>();
    for (Map.Entry<ConsumerSession, ConsumerAssignment> e : assigned.entrySet()) {
      Map<String, Object> assignment = new LinkedHashMap<>();
      assignment.put("layout_epoch", e.getValue().layoutEpoch());
      assignment.put("segments", e.getValue().assignedSegments().stream()
          .map(s -> List.of(s.segmentId(), ScalableJson.range(s.hashRange()),
              s.underlyingTopicName()))
          .toList());
      out.put(e.getKey().getConsumerName(), assignment);
    }
    return out;
  }

  @SuppressWarnings("unchecked")
  private static Set<Long> drained(SubscriptionCoordinator coordinator) throws Exception {
    Field field = SubscriptionCoordinator.class.getDeclaredField("drainedSegmentIds");
    field.setAccessible(true);
    return (Set<Long>) field.get(coordinator);
  }
}

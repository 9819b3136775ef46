package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.service.scalable.AutoScaleConfig;
import org.apache.pulsar.broker.service.scalable.AutoScaleDecision;
import org.apache.pulsar.broker.service.scalable.AutoScalePolicyEvaluator;
import org.apache.pulsar.broker.service.scalable.SegmentLayout;
import org.apache.pulsar.broker.service.scalable.SegmentLoadSample;
import org.apache.pulsar.common.policies.data.AutoScalePolicyOverride;

/**
 * PIP-483's {@link AutoScalePolicyEvaluator} and {@link AutoScaleConfig} as 5.0.0-M1 has them
 * (no rebucketing: M1's config has no rebucket or entry-bucket fields).
 *
 * <p>A config is an object of {@code AutoScaleConfig}'s fields in keyshared's names, times in
 * ms: {@code enabled, max_segments, min_segments, max_dag_depth, split_cooldown_ms,
 * merge_cooldown_ms, merge_window_ms, split_msg_rate_in, split_bytes_rate_in,
 * split_msg_rate_out, split_bytes_rate_out, merge_msg_rate_in, merge_bytes_rate_in,
 * merge_msg_rate_out, merge_bytes_rate_out}.
 *
 * <p>{@code scalable.bench_decide} {case, calls, warmup, rounds}: {@code case} as {@code
 * scalable.decide}'s, read once; a call is one {@code decide}, timed as {@link
 * LayoutOps#timed} says; answers the last call's decision as {@code scalable.decide} does.
 */
final class PolicyOps {
  private PolicyOps() {}

  static void register(Map<String, Op> ops) {
    ops.put("scalable.decide", (a, h) -> batch(Args.array(a, "cases"), PolicyOps::decide));
    ops.put("scalable.bench_decide", (a, h) -> benchDecide(a));
    ops.put("scalable.resolve_config",
        (a, h) -> batch(Args.array(a, "cases"), PolicyOps::resolve));
  }

  interface Item {
    Object apply(JsonNode item) throws Exception;
  }

  static List<Object> batch(JsonNode cases, Item item) {
    List<Object> out = new ArrayList<>();
    for (JsonNode c : cases) {
      out.add(ScalableJson.attempt(() -> item.apply(c)));
    }
    return out;
  }

  /**
   * One {@code decide} call. Case: {@code layout}, {@code load} (a list of {@code
   * [segment_id, [4 rates], modified_at_ms]}), {@code consumers} ({subscription: count}),
   * {@code config} (validated first), {@code now_ms}, and {@code last_split_at_ms} /
   * {@code last_merge_at_ms} (null: never, Pulsar's {@code Long.MIN_VALUE}). Value: {@code
   * {"action": "split", "segment_id", "reason"}}, {@code {"action": "merge", "segment_id_1",
   * "segment_id_2", "reason"}} or {@code {"action": "none"}}.
   */
  private static Object decide(JsonNode c) {
    return decision(decideCall(c).call());
  }

  private static Object benchDecide(JsonNode a) throws Exception {
    DecideCall call = decideCall(Args.field(a, "case"));
    Map<String, Object> out = LayoutOps.timed(a, call::call);
    out.put("last", decision((AutoScaleDecision) out.get("last")));
    return out;
  }

  /** A decide case's inputs, read and validated once; the call runs the evaluator. */
  interface DecideCall {
    AutoScaleDecision call();
  }

  private static DecideCall decideCall(JsonNode c) {
    Map<Long, SegmentLoadSample> load = new HashMap<>();
    for (JsonNode row : Args.array(c, "load")) {
      if (!row.isArray() || row.size() != 3) {
        throw new IllegalArgumentException(
            "args.cases[].load rows must be [segment_id, rates, modified_at_ms], got " + row);
      }
      load.put(row.get(0).longValue(), new SegmentLoadSample(
          ScalableJson.stats(row.get(1), "args.cases[].load[].rates"), row.get(2).longValue()));
    }
    Map<String, Integer> consumers = new HashMap<>();
    Iterator<Map.Entry<String, JsonNode>> subs = Args.field(c, "consumers").fields();
    while (subs.hasNext()) {
      Map.Entry<String, JsonNode> sub = subs.next();
      consumers.put(sub.getKey(), sub.getValue().intValue());
    }
    SegmentLayout layout = ScalableJson.layout(Args.field(c, "layout"), "args.cases[].layout");
    AutoScaleConfig config = config(Args.field(c, "config")).validated();
    long now = Args.longValue(c, "now_ms");
    long lastSplit = lastAt(c, "last_split_at_ms");
    long lastMerge = lastAt(c, "last_merge_at_ms");
    return () -> AutoScalePolicyEvaluator.decide(
        layout, load, consumers, config, now, lastSplit, lastMerge);
  }

  private static long lastAt(JsonNode c, String name) {
    return c.hasNonNull(name) ? Args.longValue(c, name) : Long.MIN_VALUE;
  }

  private static Map<String, Object> decision(AutoScaleDecision decision) {
    Map<String, Object> out = new LinkedHashMap<>();
    if (decision instanceof AutoScaleDecision.Split split) {
      out.put("action", "split");
      out.put("segment_id", split.segmentId());
      out.put("reason", split.reason());
    } else if (decision instanceof AutoScaleDecision.Merge merge) {
      out.put("action", "merge");
      out.put("segment_id_1", merge.segmentId1());
      out.put("segment_id_2", merge.segmentId2());
      out.put("reason", merge.reason());
    } else {
      out.put("action", "none");
    }
    return out;
  }

  private static AutoScaleConfig config(JsonNode c) {
    return AutoScaleConfig.builder()
        .enabled(Args.boolValue(c, "enabled"))
        .maxSegments(Args.intValue(c, "max_segments"))
        .minSegments(Args.intValue(c, "min_segments"))
        .maxDagDepth(Args.intValue(c, "max_dag_depth"))
        .splitCooldown(Duration.ofMillis(Args.longValue(c, "split_cooldown_ms")))
        .mergeCooldown(Duration.ofMillis(Args.longValue(c, "merge_cooldown_ms")))
        .mergeWindow(Duration.ofMillis(Args.longValue(c, "merge_window_ms")))
        .splitMsgRateIn(Args.doubleValue(c, "split_msg_rate_in"))
        .splitBytesRateIn(Args.doubleValue(c, "split_bytes_rate_in"))
        .splitMsgRateOut(Args.doubleValue(c, "split_msg_rate_out"))
        .splitBytesRateOut(Args.doubleValue(c, "split_bytes_rate_out"))
        .mergeMsgRateIn(Args.doubleValue(c, "merge_msg_rate_in"))
        .mergeBytesRateIn(Args.doubleValue(c, "merge_bytes_rate_in"))
        .mergeMsgRateOut(Args.doubleValue(c, "merge_msg_rate_out"))
        .mergeBytesRateOut(Args.doubleValue(c, "merge_bytes_rate_out"))
        .build();
  }

  /** A config in the form {@link #config} reads. */
  private static Map<String, Object> config(AutoScaleConfig c) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("enabled", c.enabled());
    out.put("max_segments", c.maxSegments());
    out.put("min_segments", c.minSegments());
    out.put("max_dag_depth", c.maxDagDepth());
    out.put("split_cooldown_ms", c.splitCooldown().toMillis());
    out.put("merge_cooldown_ms", c.mergeCooldown().toMillis());
    out.put("merge_window_ms", c.mergeWindow().toMillis());
    out.put("split_msg_rate_in", c.splitMsgRateIn());
    out.put("split_bytes_rate_in", c.splitBytesRateIn());
    out.put("split_msg_rate_out", c.splitMsgRateOut());
    out.put("split_bytes_rate_out", c.splitBytesRateOut());
    out.put("merge_msg_rate_in", c.mergeMsgRateIn());
    out.put("merge_bytes_rate_in", c.mergeBytesRateIn());
    out.put("merge_msg_rate_out", c.mergeMsgRateOut());
    out.put("merge_bytes_rate_out", c.mergeBytesRateOut());
    return out;
  }

  /**
   * One {@code AutoScaleConfig.resolve}. Case: {@code broker} (ServiceConfiguration
   * properties by their Java names, e.g. {@code scalableTopicMaxSegments}; the rest keep
   * Pulsar's defaults), {@code namespace} and {@code topic} ({@link AutoScalePolicyOverride}
   * JSON by its Java field names, e.g. {@code splitCooldownSeconds}; null: none). Value: the
   * resolved config, or the IllegalArgumentException Pulsar raises for an invalid one.
   */
  private static Object resolve(JsonNode c) throws Exception {
    ServiceConfiguration conf = new ServiceConfiguration();
    JsonNode broker = c.path("broker");
    Iterator<Map.Entry<String, JsonNode>> props = broker.fields();
    while (props.hasNext()) {
      Map.Entry<String, JsonNode> prop = props.next();
      set(conf, prop.getKey(), prop.getValue());
    }
    return config(AutoScaleConfig.resolve(conf, override(c, "namespace"), override(c, "topic")));
  }

  private static AutoScalePolicyOverride override(JsonNode c, String name) throws Exception {
    JsonNode value = c.get(name);
    if (value == null || value.isNull()) {
      return null;
    }
    return Oracle.JSON.treeToValue(value, AutoScalePolicyOverride.class);
  }

  private static void set(ServiceConfiguration conf, String name, JsonNode value)
      throws Exception {
    String setter = "set" + Character.toUpperCase(name.charAt(0)) + name.substring(1);
    for (Method m : ServiceConfiguration.class.getMethods()) {
      if (m.getName().equals(setter) && m.getParameterCount() == 1) {
        Class<?> type = m.getParameterTypes()[0];
        m.invoke(conf, type == int.class ? (Object) value.intValue()
            : type == long.class ? (Object) value.longValue()
            : type == double.class ? (Object) value.doubleValue()
            : type == boolean.class ? (Object) value.booleanValue()
            : Oracle.JSON.treeToValue(value, type));
        return;
      }
    }
    throw new IllegalArgumentException("args.cases[].broker." + name
        + ": ServiceConfiguration has no property of that name");
  }
}

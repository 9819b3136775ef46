package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.broker.resources.ScalableTopicResources;
import org.apache.pulsar.broker.service.scalable.SegmentLoadReporter;
import org.apache.pulsar.common.naming.TopicDomain;
import org.apache.pulsar.common.naming.TopicName;
import org.apache.pulsar.common.scalable.HashRange;
import org.apache.pulsar.common.scalable.SegmentLoadStats;
import org.apache.pulsar.common.scalable.SegmentTopicName;
import org.apache.pulsar.metadata.api.CacheGetResult;
import org.mockito.ArgumentMatchers;
import org.mockito.Mockito;

/**
 * Pulsar 5.0.0-M1's scalable-topic classes (PIP-483): {@link HashRange}, {@link TopicName}
 * and {@link SegmentTopicName}, {@link SegmentLoadReporter}, and (in {@link PolicyOps} and
 * {@link LayoutOps}) the auto-scale evaluator, its config, {@code SegmentLayout} and the
 * subscription coordinator. Built only against 5.0.0-M1; it has no {@code EntryBucketSplits}
 * or entry-bucket selector, so nothing here touches buckets. Every op takes {@code cases} and
 * answers one item per case, {@code {"ok": true, "value": ...}} or {@code {"ok": false,
 * "error": ...}} (see {@link ScalableJson#attempt}).
 *
 * <ul>
 *   <li>{@code scalable.hash_range_new} {cases: [[start, end]]}: the constructor's checks.
 *   <li>{@code scalable.hash_range_parse} {cases: [text]}: {@code fromHexString}.
 *   <li>{@code scalable.hash_ranges} {cases: [[s1, e1, s2, e2, hash]]}: of a = [s1, e1] and
 *       b = [s2, e2]: {@code size, contains (hash), contains_range (b), adjacent, split (a),
 *       merge (a with b), compare (sign of a.compareTo(b)), hex, string}.
 *   <li>{@code scalable.topic_names} {cases: [name]}: {@code TopicName.get}: {@code domain,
 *       tenant, namespace_portion, local_name, segment_range, segment_id, string}, and for a
 *       segment name its {@code SegmentTopicName} parent, range and id.
 *   <li>{@code scalable.segment_topic_names} {cases: [[parent, start, end, id]]}: {@code
 *       fromParent(...).toString()} and {@code formatDescriptor}.
 *   <li>{@code scalable.material_change} {cases: [[last, current, threshold]]} (rates as four
 *       numbers): {@code SegmentLoadReporter.isMaterialChange}.
 *   <li>{@code scalable.reporter} {cases: [{threshold, store, steps}]}: one reporter over a
 *       metadata store kept in memory (every write lands there; {@code store} false: reads
 *       find nothing, as if each record had expired), steps {@code ["report", topic, id,
 *       rates]} (value: whether it wrote) and {@code ["forget", topic, id]} (value: null).
 * </ul>
 */
final class ScalableOps {
  private ScalableOps() {}

  static void register(Map<String, Op> ops) {
    PolicyOps.register(ops);
    LayoutOps.register(ops);
    V5Ops.register(ops);
    MetadataWatchOps.register(ops);
    DriveOps.register(ops);
    ops.put("scalable.hash_range_new", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        c -> ScalableJson.range(ScalableJson.range(c, "args.cases[]"))));
    ops.put("scalable.hash_range_parse", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        c -> ScalableJson.range(HashRange.fromHexString(c.textValue()))));
    ops.put("scalable.hash_ranges", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        ScalableOps::hashRanges));
    ops.put("scalable.topic_names", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        c -> topicName(TopicName.get(c.textValue()))));
    ops.put("scalable.segment_topic_names", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        ScalableOps::segmentTopicName));
    ops.put("scalable.material_change", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        ScalableOps::materialChange));
    ops.put("scalable.reporter", (a, h) -> PolicyOps.batch(Args.array(a, "cases"),
        ScalableOps::reporter));
  }

  private static Object hashRanges(JsonNode c) {
    if (!c.isArray() || c.size() != 5) {
      throw new IllegalArgumentException("args.cases[] must be [s1, e1, s2, e2, hash], got " + c);
    }
    HashRange a = new HashRange(c.get(0).intValue(), c.get(1).intValue());
    HashRange b = new HashRange(c.get(2).intValue(), c.get(3).intValue());
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("size", a.size());
    out.put("contains", a.contains(c.get(4).intValue()));
    out.put("contains_range", a.contains(b));
    out.put("adjacent", a.isAdjacentTo(b));
    out.put("split", ScalableJson.attempt(() -> {
      HashRange[] halves = a.split();
      return List.of(ScalableJson.range(halves[0]), ScalableJson.range(halves[1]));
    }));
    out.put("merge", ScalableJson.attempt(() -> ScalableJson.range(a.merge(b))));
    out.put("compare", Integer.signum(a.compareTo(b)));
    out.put("hex", a.toHexString());
    out.put("string", a.toString());
    return out;
  }

  private static Object topicName(TopicName name) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("domain", name.getDomain().value());
    out.put("tenant", name.getTenant());
    out.put("namespace_portion", name.getNamespacePortion());
    out.put("local_name", name.getLocalName());
    out.put("segment_range", name.getSegmentRange().map(ScalableJson::range).orElse(null));
    out.put("segment_id", name.getSegmentId());
    out.put("string", name.toString());
    if (name.getDomain() == TopicDomain.segment) {
      out.put("parent", SegmentTopicName.getParentTopicName(name).toString());
      out.put("hash_range", ScalableJson.range(SegmentTopicName.getHashRange(name)));
      out.put("parsed_segment_id", SegmentTopicName.getSegmentId(name));
    }
    return out;
  }

  private static Object segmentTopicName(JsonNode c) {
    HashRange range = new HashRange(c.get(1).intValue(), c.get(2).intValue());
    long id = c.get(3).longValue();
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("descriptor", SegmentTopicName.formatDescriptor(range, id));
    out.put("name", ScalableJson.attempt(() ->
        SegmentTopicName.fromParent(TopicName.get(c.get(0).textValue()), range, id).toString()));
    return out;
  }

  private static Object materialChange(JsonNode c) throws Exception {
    Method test = SegmentLoadReporter.class.getDeclaredMethod("isMaterialChange",
        SegmentLoadStats.class, SegmentLoadStats.class, double.class);
    test.setAccessible(true);
    return test.invoke(null, ScalableJson.stats(c.get(0), "args.cases[][0]"),
        ScalableJson.stats(c.get(1), "args.cases[][1]"), c.get(2).doubleValue());
  }

  private static Object reporter(JsonNode c) throws Exception {
    boolean keep = Args.boolValue(c, "store");
    Map<String, SegmentLoadStats> store = new HashMap<>();
    ScalableTopicResources resources = Mockito.mock(ScalableTopicResources.class);
    Mockito.when(resources.segmentLoadPath(ArgumentMatchers.any(), ArgumentMatchers.anyLong()))
        .thenAnswer(i -> i.getArgument(0).toString() + "/" + i.getArgument(1));
    Mockito.when(resources.reportSegmentLoadAsync(
            ArgumentMatchers.any(), ArgumentMatchers.anyLong(), ArgumentMatchers.any()))
        .thenAnswer(i -> {
          store.put(i.getArgument(0).toString() + "/" + i.getArgument(1), i.getArgument(2));
          return CompletableFuture.completedFuture(null);
        });
    Mockito.when(resources.getSegmentLoadAsync(ArgumentMatchers.any(), ArgumentMatchers.anyLong()))
        .thenAnswer(i -> {
          SegmentLoadStats stored = keep
              ? store.get(i.getArgument(0).toString() + "/" + i.getArgument(1)) : null;
          return CompletableFuture.completedFuture(Optional.ofNullable(stored)
              .map(s -> new CacheGetResult<>(s, null)));
        });
    SegmentLoadReporter reporter =
        new SegmentLoadReporter(resources, Args.doubleValue(c, "threshold"));
    List<Object> out = new ArrayList<>();
    for (JsonNode step : Args.array(c, "steps")) {
      TopicName topic = TopicName.get(step.get(1).textValue());
      long id = step.get(2).longValue();
      switch (step.path(0).asText("")) {
        case "report" -> out.add(reporter.reportIfChanged(
            topic, id, ScalableJson.stats(step.get(3), "args.cases[].steps[][3]")).get());
        case "forget" -> {
          reporter.forget(topic, id);
          out.add(null);
        }
        default -> throw new IllegalArgumentException(
            "args.cases[].steps: unknown step " + step + " (report or forget)");
      }
    }
    return out;
  }
}

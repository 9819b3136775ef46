package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.pulsar.broker.service.scalable.SegmentLayout;
import org.apache.pulsar.common.scalable.HashRange;
import org.apache.pulsar.common.scalable.SegmentInfo;
import org.apache.pulsar.common.scalable.SegmentLoadStats;
import org.apache.pulsar.common.scalable.SegmentState;

/**
 * The JSON forms the scalable-topic ops share, in keyshared's spelling so that a layout's
 * {@code to_dict()} goes in as it is.
 *
 * <p>A hash range is {@code [start, end]}; a layout is {@code {"epoch", "next_segment_id",
 * "segments": [...]}} with each segment's {@code segment_id}, {@code hash_range} (hex,
 * {@code "0000-7fff"}, read by Pulsar's own {@code HashRange.fromHexString}), {@code state},
 * {@code parent_ids}, {@code child_ids}, {@code created_at_ms}, {@code sealed_at_ms},
 * {@code created_at_epoch}, {@code sealed_at_epoch} and {@code legacy_topic_name}; other keys
 * (keyshared's {@code bucket_splits}) are ignored, since 5.0.0-M1's {@code SegmentInfo} has no
 * buckets. Load stats are {@code [msg_rate_in, bytes_rate_in, msg_rate_out, bytes_rate_out]}.
 */
final class ScalableJson {
  private ScalableJson() {}

  /** {"ok": true, "value": ...} or {"ok": false, "error": "Type: message"}: one batch item. */
  static Map<String, Object> attempt(Callable<Object> body) {
    Map<String, Object> out = new LinkedHashMap<>();
    try {
      Object value = body.call();
      out.put("ok", true);
      out.put("value", value);
    } catch (Exception e) {
      out.put("ok", false);
      out.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
    }
    return out;
  }

  static List<Integer> range(HashRange range) {
    return List.of(range.start(), range.end());
  }

  static HashRange range(JsonNode value, String where) {
    if (!value.isArray() || value.size() != 2 || !value.get(0).isInt() || !value.get(1).isInt()) {
      throw new IllegalArgumentException(where + " must be [start, end], got " + value);
    }
    return new HashRange(value.get(0).intValue(), value.get(1).intValue());
  }

  static SegmentLoadStats stats(JsonNode value, String where) {
    if (!value.isArray() || value.size() != 4) {
      throw new IllegalArgumentException(where + " must be four rates, got " + value);
    }
    double[] rates = new double[4];
    for (int i = 0; i < 4; i++) {
      if (!value.get(i).isNumber()) {
        throw new IllegalArgumentException(where + "[" + i + "] must be a number, got " + value);
      }
      rates[i] = value.get(i).doubleValue();
    }
    return new SegmentLoadStats(rates[0], rates[1], rates[2], rates[3]);
  }

  static SegmentLayout layout(JsonNode value, String where) {
    if (!value.isObject()) {
      throw new IllegalArgumentException(where + " must be a layout object, got " + value);
    }
    Map<Long, SegmentInfo> segments = new LinkedHashMap<>();
    int i = 0;
    for (JsonNode s : Args.array(value, "segments")) {
      SegmentInfo info = segment(s, where + ".segments[" + i++ + "]");
      segments.put(info.segmentId(), info);
    }
    return new SegmentLayout(
        Args.longValue(value, "epoch"), Args.longValue(value, "next_segment_id"), segments);
  }

  private static SegmentInfo segment(JsonNode s, String where) {
    try {
      String legacy = s.hasNonNull("legacy_topic_name") ? Args.text(s, "legacy_topic_name") : null;
      return new SegmentInfo(Args.longValue(s, "segment_id"),
          HashRange.fromHexString(Args.text(s, "hash_range")),
          SegmentState.valueOf(Args.text(s, "state")),
          ids(Args.array(s, "parent_ids")), ids(Args.array(s, "child_ids")),
          Args.longValue(s, "created_at_epoch"), Args.longValue(s, "sealed_at_epoch"),
          Args.longValue(s, "created_at_ms"), Args.longValue(s, "sealed_at_ms"), legacy);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(where + ": " + e.getMessage(), e);
    }
  }

  static List<Long> ids(JsonNode array) {
    List<Long> out = new ArrayList<>();
    for (JsonNode id : array) {
      out.add(id.longValue());
    }
    return out;
  }

  /** A layout in the input form, segments by id, without buckets. */
  static Map<String, Object> layout(SegmentLayout layout) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("epoch", layout.getEpoch());
    out.put("next_segment_id", layout.getNextSegmentId());
    out.put("segments", layout.getAllSegments().values().stream()
        .sorted(Comparator.comparingLong(SegmentInfo::segmentId))
        .map(ScalableJson::segment).toList());
    return out;
  }

  static Map<String, Object> segment(SegmentInfo s) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("segment_id", s.segmentId());
    out.put("hash_range", s.hashRange().toHexString());
    out.put("state", s.state().name());
    out.put("parent_ids", s.parentIds());
    out.put("child_ids", s.childIds());
    out.put("created_at_ms", s.createdAtMs());
    out.put("sealed_at_ms", s.sealedAtMs());
    out.put("created_at_epoch", s.createdAtEpoch());
    out.put("sealed_at_epoch", s.sealedAtEpoch());
    out.put("legacy_topic_name", s.legacyTopicName());
    return out;
  }
}

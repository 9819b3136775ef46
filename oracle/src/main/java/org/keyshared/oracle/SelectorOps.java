package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.pulsar.broker.service.ConsistentHashingStickyKeyConsumerSelector;
import org.apache.pulsar.broker.service.Consumer;
import org.apache.pulsar.broker.service.ImpactedConsumersResult;
import org.apache.pulsar.client.api.Range;
import org.mockito.Mockito;

/**
 * Pulsar's {@link ConsistentHashingStickyKeyConsumerSelector}, consumers named by integer id.
 *
 * <ul>
 *   <li>{@code selector.new {number_of_points, returns_impacted = true, range_max_value?}}:
 *       a handle. {@code range_max_value} is the three-argument constructor's
 *       {@code rangeMaxValue}, refused where the release lacks that constructor.
 *   <li>{@code selector.add {handle, consumer, name}}: adds the consumer, a Mockito
 *       {@link Consumer} answering {@code consumerName()} and {@code consumerId()}. Adding an
 *       id that is in the selector adds the same object again (as Pulsar would if asked);
 *       adding an id after all its adds were removed makes a new object, as a reconnect does.
 *       Answers the impacted consumers ({@code {"removed": {id: [[start, end], ...]},
 *       "added": {...}}}) or null when the selector does not report them.
 *   <li>{@code selector.remove {handle, consumer}}: the same answer; an id never added is a
 *       fresh consumer the selector does not know.
 *   <li>{@code selector.select {handle, hash}}: the consumer id, or null.
 *   <li>{@code selector.select_many {handle, hashes}}, {@code selector.select_range {handle,
 *       start, end}}: the consumer id (or null) of each hash.
 *   <li>{@code selector.ranges {handle}}: {@code getConsumerKeyHashRanges()} as {id: [[start,
 *       end], ...]}.
 *   <li>{@code selector.key_hash_range {handle}}: {@code getKeyHashRange()} as [start, end].
 *   <li>{@code selector.make_sticky_key_hash {handle, key}} / {@code
 *       selector.make_sticky_key_hashes {handle, keys}}: the selector's {@code
 *       makeStickyKeyHash}.
 * </ul>
 */
final class SelectorOps {
  private SelectorOps() {}

  /** One selector and the consumer objects added to it. */
  static final class Session {
    final ConsistentHashingStickyKeyConsumerSelector selector;
    /** Per id, the consumer object in the selector and how many times it was added. */
    final Map<Integer, Consumer> consumers = new HashMap<>();
    final Map<Integer, Integer> adds = new HashMap<>();
    final Map<Consumer, Integer> ids = new IdentityHashMap<>();

    Session(ConsistentHashingStickyKeyConsumerSelector selector) {
      this.selector = selector;
    }

    Consumer newConsumer(int id, String name) {
      Consumer c = Mockito.mock(Consumer.class, Mockito.withSettings().name("consumer-" + id));
      Mockito.when(c.consumerId()).thenReturn((long) id);
      Mockito.when(c.consumerName()).thenReturn(name);
      ids.put(c, id);
      return c;
    }

    Integer id(Consumer c) {
      Integer id = ids.get(c);
      if (id == null) {
        throw new IllegalStateException("the selector answered a consumer it was not given: " + c);
      }
      return id;
    }
  }

  static void register(Map<String, Op> ops) {
    ops.put("selector.new", (a, h) -> h.add(new Session(newSelector(a))));
    ops.put("selector.add", (a, h) -> {
      Session s = session(a, h);
      int id = Args.intValue(a, "consumer");
      String name = Args.text(a, "name");
      Consumer c = s.consumers.get(id);
      if (c == null) {
        c = s.newConsumer(id, name);
      } else if (!name.equals(c.consumerName())) {
        throw new IllegalArgumentException("args.name: consumer " + id + " is in the selector as '"
            + c.consumerName() + "', not '" + name + "'");
      }
      Optional<ImpactedConsumersResult> impacted = s.selector.addConsumer(c).get();
      s.consumers.put(id, c);
      s.adds.merge(id, 1, Integer::sum);
      return impacted(s, impacted);
    });
    ops.put("selector.remove", (a, h) -> {
      Session s = session(a, h);
      int id = Args.intValue(a, "consumer");
      Consumer c = s.consumers.get(id);
      if (c == null) {
        c = s.newConsumer(id, "never-added-" + id);
      }
      Optional<ImpactedConsumersResult> impacted = s.selector.removeConsumer(c);
      if (s.adds.containsKey(id) && s.adds.merge(id, -1, Integer::sum) == 0) {
        s.adds.remove(id);
        s.consumers.remove(id);
      }
      return impacted(s, impacted);
    });
    ops.put("selector.select", (a, h) -> {
      Session s = session(a, h);
      Consumer c = s.selector.select(Args.intValue(a, "hash"));
      return c == null ? null : s.id(c);
    });
    ops.put("selector.select_many", (a, h) -> {
      Session s = session(a, h);
      JsonNode hashes = Args.array(a, "hashes");
      List<Integer> out = new ArrayList<>(hashes.size());
      for (int i = 0; i < hashes.size(); i++) {
        JsonNode hash = hashes.get(i);
        if (!hash.canConvertToInt()) {
          throw new IllegalArgumentException("args.hashes[" + i + "] must be an int, got " + hash);
        }
        Consumer c = s.selector.select(hash.intValue());
        out.add(c == null ? null : s.id(c));
      }
      return out;
    });
    ops.put("selector.select_range", (a, h) -> {
      Session s = session(a, h);
      int start = Args.intValue(a, "start");
      int end = Args.intValue(a, "end");
      if (end < start || (long) end - start > 1 << 20) {
        throw new IllegalArgumentException("args: [start, end] = [" + start + ", " + end
            + "] must be ascending and at most 2^20 hashes");
      }
      List<Integer> out = new ArrayList<>(end - start + 1);
      for (int hash = start; hash <= end; hash++) {
        Consumer c = s.selector.select(hash);
        out.add(c == null ? null : s.id(c));
      }
      return out;
    });
    ops.put("selector.ranges", (a, h) -> {
      Session s = session(a, h);
      Map<Integer, List<List<Integer>>> out = new TreeMap<>();
      s.selector.getConsumerKeyHashRanges().forEach((c, ranges) -> out.put(s.id(c), ranges(ranges)));
      return out;
    });
    ops.put("selector.key_hash_range",
        (a, h) -> HashOps.range(session(a, h).selector.getKeyHashRange()));
    ops.put("selector.make_sticky_key_hash",
        (a, h) -> session(a, h).selector.makeStickyKeyHash(HashOps.key(a)));
    ops.put("selector.make_sticky_key_hashes", (a, h) -> {
      Session s = session(a, h);
      return HashOps.mapKeys(a, s.selector::makeStickyKeyHash);
    });
  }

  static Session session(JsonNode args, Handles handles) {
    return handles.get(Args.handle(args), Session.class);
  }

  static ConsistentHashingStickyKeyConsumerSelector newSelector(JsonNode a) throws Exception {
    int points = Args.intValue(a, "number_of_points");
    boolean impacted = !a.hasNonNull("returns_impacted") || Args.boolValue(a, "returns_impacted");
    Class<ConsistentHashingStickyKeyConsumerSelector> type =
        ConsistentHashingStickyKeyConsumerSelector.class;
    try {
      if (a.hasNonNull("range_max_value")) {
        Constructor<ConsistentHashingStickyKeyConsumerSelector> three;
        try {
          three = type.getConstructor(int.class, boolean.class, int.class);
        } catch (NoSuchMethodException e) {
          throw new UnsupportedOperationException("ConsistentHashingStickyKeyConsumerSelector(int, "
              + "boolean, int rangeMaxValue) is not in this Pulsar release");
        }
        return three.newInstance(points, impacted, Args.intValue(a, "range_max_value"));
      }
      Constructor<ConsistentHashingStickyKeyConsumerSelector> two;
      try {
        two = type.getConstructor(int.class, boolean.class);
      } catch (NoSuchMethodException e) {
        throw new UnsupportedOperationException("ConsistentHashingStickyKeyConsumerSelector(int, "
            + "boolean addOrRemoveReturnsImpactedConsumersResult) is not in this Pulsar release");
      }
      return two.newInstance(points, impacted);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      throw cause instanceof Exception ex ? ex : e;
    }
  }

  static List<List<Integer>> ranges(List<Range> ranges) {
    List<List<Integer>> out = new ArrayList<>(ranges.size());
    for (Range r : ranges) {
      out.add(HashOps.range(r));
    }
    return out;
  }

  /** The impacted consumers, read through the public processUpdatedHashRanges. */
  static Object impacted(Session s, Optional<ImpactedConsumersResult> result) {
    if (result.isEmpty()) {
      return null;
    }
    Map<Integer, List<List<Integer>>> removed = new TreeMap<>();
    Map<Integer, List<List<Integer>>> added = new TreeMap<>();
    result.get().processUpdatedHashRanges((consumer, updated, type) -> {
      Map<Integer, List<List<Integer>>> into =
          type == ImpactedConsumersResult.OperationType.REMOVE ? removed : added;
      into.put(s.id(consumer), ranges(updated.asRanges()));
    });
    Map<String, Object> out = new HashMap<>();
    out.put("removed", removed);
    out.put("added", added);
    out.put("is_empty", result.get().isEmpty());
    return out;
  }
}

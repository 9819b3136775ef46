package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.pulsar.broker.service.Consumer;
import org.apache.pulsar.broker.service.DrainingHashesTracker;
import org.apache.pulsar.broker.service.PendingAcksMap;
import org.apache.pulsar.common.policies.data.DrainingHash;
import org.apache.pulsar.common.policies.data.stats.ConsumerStatsImpl;
import org.mockito.Mockito;

/**
 * PIP-379's {@link DrainingHashesTracker} and {@link PendingAcksMap}, wired to each other as
 * {@code PersistentStickyKeyDispatcherMultipleConsumers} wires them.
 *
 * <p>{@code draining.new} makes a session: one tracker, whose unblocking handler records the
 * hashes it is told (read and cleared by {@code draining.unblocked}), and per consumer id a
 * Mockito {@link Consumer} and (after {@code pending.new}) a {@link PendingAcksMap}. Every
 * other op names the session by {@code handle} and consumers by integer {@code consumer}.
 * Methods that only some releases have (removeAndGet, forEachAndClear, updateRemainingUnacked,
 * removeAllUpTo's callback) are looked up by reflection and refused with a clear error where
 * missing; the pair type {@code get} returns differs between releases, so it is read
 * reflectively too.
 */
final class DrainingOps {
  private DrainingOps() {}

  /** One dispatcher's tracker, its consumers and their pending acks. */
  static final class Session {
    final List<Integer> unblocked = new ArrayList<>();
    final DrainingHashesTracker tracker;
    final Map<Integer, Consumer> consumers = new HashMap<>();
    final Map<Consumer, Integer> ids = new HashMap<>();
    final Map<Integer, PendingAcksMap> pendingAcks = new HashMap<>();

    Session(String dispatcherName) {
      tracker = new DrainingHashesTracker(dispatcherName, unblocked::add);
    }

    Consumer consumer(int id) {
      return consumers.computeIfAbsent(id, k -> {
        Consumer c = Mockito.mock(Consumer.class, Mockito.withSettings().name("consumer-" + k));
        Mockito.when(c.consumerId()).thenReturn((long) k);
        Mockito.when(c.consumerName()).thenReturn("consumer-" + k);
        ids.put(c, k);
        return c;
      });
    }

    PendingAcksMap pending(int id) {
      PendingAcksMap map = pendingAcks.get(id);
      if (map == null) {
        throw new IllegalArgumentException("args.consumer: no pending acks map for consumer " + id
            + " (make one with pending.new)");
      }
      return map;
    }
  }

  static void register(Map<String, Op> ops) {
    ops.put("draining.new", (a, h) -> h.add(new Session(
        a.hasNonNull("dispatcher_name") ? Args.text(a, "dispatcher_name") : "dispatcher")));
    ops.put("draining.add_entry", (a, h) -> {
      Session s = session(a, h);
      s.tracker.addEntry(s.consumer(Args.intValue(a, "consumer")), Args.intValue(a, "hash"));
      return null;
    });
    ops.put("draining.reduce_ref_count", (a, h) -> {
      Session s = session(a, h);
      s.tracker.reduceRefCount(s.consumer(Args.intValue(a, "consumer")), Args.intValue(a, "hash"),
          a.hasNonNull("closing") && Args.boolValue(a, "closing"));
      return null;
    });
    ops.put("draining.should_block", (a, h) -> {
      Session s = session(a, h);
      return s.tracker.shouldBlockStickyKeyHash(
          s.consumer(Args.intValue(a, "consumer")), Args.intValue(a, "hash"));
    });
    ops.put("draining.get_entry", (a, h) -> {
      Session s = session(a, h);
      return entry(s, Args.intValue(a, "hash"));
    });
    // getEntry of each of args.hashes, in order: the whole table over a pool of hashes.
    ops.put("draining.entries", (a, h) -> {
      Session s = session(a, h);
      List<Object> out = new ArrayList<>();
      for (JsonNode hash : Args.array(a, "hashes")) {
        out.add(entry(s, hash.intValue()));
      }
      return out;
    });
    ops.put("draining.start_batch", (a, h) -> {
      session(a, h).tracker.startBatch();
      return null;
    });
    ops.put("draining.end_batch", (a, h) -> {
      session(a, h).tracker.endBatch();
      return null;
    });
    ops.put("draining.clear", (a, h) -> {
      session(a, h).tracker.clear();
      return null;
    });
    ops.put("draining.consumer_removed", (a, h) -> {
      Session s = session(a, h);
      s.tracker.consumerRemoved(s.consumer(Args.intValue(a, "consumer")));
      return null;
    });
    ops.put("draining.consumer_stats", (a, h) -> {
      Session s = session(a, h);
      return stats(s, s.consumer(Args.intValue(a, "consumer")));
    });
    // The hashes the unblocking handler was told since the last call, in order; then clears them.
    ops.put("draining.unblocked", (a, h) -> {
      Session s = session(a, h);
      List<Integer> told = new ArrayList<>(s.unblocked);
      s.unblocked.clear();
      return told;
    });

    ops.put("pending.new", (a, h) -> {
      Session s = session(a, h);
      int id = Args.intValue(a, "consumer");
      boolean wired = !a.hasNonNull("wired") || Args.boolValue(a, "wired");
      s.pendingAcks.put(id, newPendingAcks(s, s.consumer(id), wired));
      return null;
    });
    ops.put("pending.add", (a, h) -> pending(a, h).addPendingAckIfAllowed(
        Args.longValue(a, "ledger"), Args.longValue(a, "entry"),
        Args.intValue(a, "batch_size"), Args.intValue(a, "hash")));
    ops.put("pending.remove", (a, h) -> {
      PendingAcksMap map = pending(a, h);
      long ledger = Args.longValue(a, "ledger");
      long entry = Args.longValue(a, "entry");
      if (a.hasNonNull("batch_size") || a.hasNonNull("hash")) {
        return map.remove(ledger, entry, Args.intValue(a, "batch_size"), Args.intValue(a, "hash"));
      }
      return map.remove(ledger, entry);
    });
    ops.put("pending.remove_and_get", (a, h) -> pair(invoke(pending(a, h), "removeAndGet",
        new Class<?>[] {long.class, long.class},
        Args.longValue(a, "ledger"), Args.longValue(a, "entry"))));
    ops.put("pending.update_remaining_unacked", (a, h) -> invoke(pending(a, h),
        "updateRemainingUnacked", new Class<?>[] {long.class, long.class, int.class},
        Args.longValue(a, "ledger"), Args.longValue(a, "entry"), Args.intValue(a, "acked_delta")));
    // Returns {"removed": how many went, "callback": the acks the callback saw, or null on a
    // release whose removeAllUpTo takes no callback}.
    ops.put("pending.remove_all_up_to", (a, h) -> {
      PendingAcksMap map = pending(a, h);
      long ledger = Args.longValue(a, "ledger");
      long entry = Args.longValue(a, "entry");
      long before = map.size();
      List<List<Long>> seen = null;
      Method withCallback = method("removeAllUpTo",
          long.class, long.class, PendingAcksMap.PendingAcksConsumer.class);
      if (withCallback != null) {
        List<List<Long>> acks = new ArrayList<>();
        PendingAcksMap.PendingAcksConsumer callback = (l, e, b, k) -> acks.add(ack(l, e, b, k));
        call(withCallback, map, ledger, entry, callback);
        seen = acks;
      } else {
        call(method("removeAllUpTo", long.class, long.class), map, ledger, entry);
      }
      Map<String, Object> out = new LinkedHashMap<>();
      out.put("removed", before - map.size());
      out.put("callback", seen);
      return out;
    });
    ops.put("pending.for_each", (a, h) -> {
      List<List<Long>> acks = new ArrayList<>();
      pending(a, h).forEach((l, e, b, k) -> acks.add(ack(l, e, b, k)));
      return acks;
    });
    ops.put("pending.for_each_and_close", (a, h) -> {
      List<List<Long>> acks = new ArrayList<>();
      pending(a, h).forEachAndClose((l, e, b, k) -> acks.add(ack(l, e, b, k)));
      return acks;
    });
    ops.put("pending.for_each_and_clear", (a, h) -> {
      List<List<Long>> acks = new ArrayList<>();
      PendingAcksMap.PendingAcksConsumer processor = (l, e, b, k) -> acks.add(ack(l, e, b, k));
      invoke(pending(a, h), "forEachAndClear",
          new Class<?>[] {PendingAcksMap.PendingAcksConsumer.class}, processor);
      return acks;
    });
    ops.put("pending.contains", (a, h) -> pending(a, h).contains(
        Args.longValue(a, "ledger"), Args.longValue(a, "entry")));
    ops.put("pending.get", (a, h) -> pair(invoke(pending(a, h), "get",
        new Class<?>[] {long.class, long.class},
        Args.longValue(a, "ledger"), Args.longValue(a, "entry"))));
    ops.put("pending.size", (a, h) -> pending(a, h).size());
  }

  private static Session session(JsonNode args, Handles handles) {
    return handles.get(Args.handle(args), Session.class);
  }

  private static PendingAcksMap pending(JsonNode args, Handles handles) {
    return session(args, handles).pending(Args.intValue(args, "consumer"));
  }

  private static List<Long> ack(long ledgerId, long entryId, int batchSize, int hash) {
    return Arrays.asList(ledgerId, entryId, (long) batchSize, (long) hash);
  }

  /** {consumer, ref_count, blocked_count} of a draining hash, or null. */
  private static Map<String, Object> entry(Session s, int hash) {
    DrainingHashesTracker.DrainingHashEntry entry = s.tracker.getEntry(hash);
    if (entry == null) {
      return null;
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("consumer", s.ids.get(entry.getConsumer()));
    // getRefCount/getBlockedCount are package-private.
    out.put("ref_count", call(entryMethod("getRefCount"), entry));
    out.put("blocked_count", call(entryMethod("getBlockedCount"), entry));
    return out;
  }

  private static Method entryMethod(String name) {
    try {
      Method m = DrainingHashesTracker.DrainingHashEntry.class.getDeclaredMethod(name);
      m.setAccessible(true);
      return m;
    } catch (NoSuchMethodException e) {
      throw new UnsupportedOperationException(
          "DrainingHashEntry." + name + " is missing in this Pulsar release");
    }
  }

  private static Map<String, Object> stats(Session s, Consumer consumer) {
    ConsumerStatsImpl stats = new ConsumerStatsImpl();
    s.tracker.updateConsumerStats(consumer, stats);
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("draining_hashes_count", stats.drainingHashesCount);
    out.put("draining_hashes_cleared_total", stats.drainingHashesClearedTotal);
    out.put("draining_hashes_unacked_messages", stats.drainingHashesUnackedMessages);
    List<List<Integer>> hashes = new ArrayList<>();
    for (DrainingHash hash : stats.drainingHashes) {
      hashes.add(List.of(hash.getHash(), hash.getUnackMsgs(), hash.getBlockedAttempts()));
    }
    out.put("draining_hashes", hashes);
    return out;
  }

  /** A PendingAcksMap whose handlers are the dispatcher's (wired) or absent. */
  private static PendingAcksMap newPendingAcks(Session s, Consumer consumer, boolean wired)
      throws Exception {
    PendingAcksMap.PendingAcksAddHandler add = (c, ledgerId, entryId, hash) -> {
      // PersistentStickyKeyDispatcherMultipleConsumers.handleAddingPendingAck, less the replay.
      if (hash == 0) {
        throw new IllegalArgumentException(
            "Sticky key hash is missing for " + ledgerId + ":" + entryId);
      }
      DrainingHashesTracker.DrainingHashEntry entry = s.tracker.getEntry(hash);
      return entry == null || entry.getConsumer() == c;
    };
    PendingAcksMap.PendingAcksRemoveHandler remove = new PendingAcksMap.PendingAcksRemoveHandler() {
      @Override
      public void handleRemoving(Consumer c, long ledgerId, long entryId, int hash,
          boolean closing) {
        s.tracker.reduceRefCount(c, hash, closing);
      }

      @Override
      public void startBatch() {
        s.tracker.startBatch();
      }

      @Override
      public void endBatch() {
        s.tracker.endBatch();
      }
    };
    Supplier<PendingAcksMap.PendingAcksAddHandler> addSupplier = () -> wired ? add : null;
    Supplier<PendingAcksMap.PendingAcksRemoveHandler> removeSupplier = () -> wired ? remove : null;
    Constructor<PendingAcksMap> ctor = PendingAcksMap.class.getDeclaredConstructor(
        Consumer.class, Supplier.class, Supplier.class);
    ctor.setAccessible(true);
    return ctor.newInstance(consumer, addSupplier, removeSupplier);
  }

  private static Method method(String name, Class<?>... types) {
    try {
      return PendingAcksMap.class.getMethod(name, types);
    } catch (NoSuchMethodException e) {
      return null;
    }
  }

  private static Object invoke(Object target, String name, Class<?>[] types, Object... args) {
    Method m = method(name, types);
    if (m == null) {
      throw new UnsupportedOperationException(
          "PendingAcksMap." + name + " is missing in this Pulsar release");
    }
    return call(m, target, args);
  }

  /** Calls a method, rethrowing what it threw (not the reflective wrapper). */
  private static Object call(Method m, Object target, Object... args) {
    try {
      return m.invoke(target, args);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException r) {
        throw r;
      }
      if (cause instanceof Error err) {
        throw err;
      }
      throw new IllegalStateException(cause);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  /** [leftInt, rightInt] of an IntIntPair (fastutil's or Pulsar's own), or null. */
  private static List<Integer> pair(Object pair) throws Exception {
    if (pair == null) {
      return null;
    }
    Method left = pair.getClass().getMethod("leftInt");
    Method right = pair.getClass().getMethod("rightInt");
    left.setAccessible(true);
    right.setAccessible(true);
    return List.of((Integer) left.invoke(pair), (Integer) right.invoke(pair));
  }
}

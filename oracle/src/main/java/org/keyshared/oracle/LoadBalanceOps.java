package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.apache.commons.lang3.mutable.MutableInt;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.LoadData;
import org.apache.pulsar.broker.loadbalance.LoadSheddingStrategy;
import org.apache.pulsar.broker.loadbalance.impl.AvgShedder;
import org.apache.pulsar.broker.loadbalance.impl.OverloadShedder;
import org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder;
import org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder;
import org.apache.pulsar.policies.data.loadbalancer.BrokerData;
import org.apache.pulsar.policies.data.loadbalancer.BundleData;
import org.apache.pulsar.policies.data.loadbalancer.LocalBrokerData;
import org.apache.pulsar.policies.data.loadbalancer.ResourceUsage;
import org.apache.pulsar.policies.data.loadbalancer.TimeAverageMessageData;

/**
 * The modular load manager's shedding strategies ({@link OverloadShedder}, {@link
 * ThresholdShedder}, {@link UniformLoadShedder}, {@link AvgShedder}), plus the bundle ops of
 * {@link LoadBalanceBundleOps}.
 *
 * <p>{@code lb.shedder.new} {strategy: "overload" | "threshold" | "uniform" | "avg", conf:
 * {property: value}} makes one strategy object and its {@link ServiceConfiguration}, whose
 * properties are set through their setters by name (e.g. {@code
 * loadBalancerBrokerOverloadedThresholdPercentage}); it answers a handle, as the stateful
 * strategies (threshold, avg) keep history between calls. {@code lb.shedder.run} {handle,
 * rounds: [load, ...]} calls {@code findBundlesForUnloading} once per load, in order, and
 * answers per round {unloads: [[broker, bundle], ...] (the multimap's entries), state}, where
 * state is the threshold shedder's {@code brokerAvgResourceUsage}, or the avg shedder's hit
 * counts ({@code high}, {@code low}) and its broker order by score ({@code sorted}, from its
 * private {@code calculateScoresAndSort}), read reflectively.
 *
 * <p>A load is {brokers: {name: {usage: {cpu, memory, direct_memory, bandwidth_in,
 * bandwidth_out: [usage, limit]}, rates: [msgRateIn, msgRateOut, msgThroughputIn,
 * msgThroughputOut], bundles: [...]}}, bundles: {name: [the same four rates, short-term]},
 * recently_unloaded: [bundle, ...]}.
 */
final class LoadBalanceOps {
  private LoadBalanceOps() {}

  private static final Map<String, Supplier<LoadSheddingStrategy>> STRATEGIES = Map.of(
      "overload", OverloadShedder::new,
      "threshold", ThresholdShedder::new,
      "uniform", UniformLoadShedder::new,
      "avg", AvgShedder::new);

  /** One strategy object and the configuration it reads. */
  static final class Shedder {
    final LoadSheddingStrategy strategy;
    final ServiceConfiguration conf;

    Shedder(LoadSheddingStrategy strategy, ServiceConfiguration conf) {
      this.strategy = strategy;
      this.conf = conf;
    }
  }

  static void register(Map<String, Op> ops) {
    LoadBalanceBundleOps.register(ops);
    LoadBalanceTransferOps.register(ops);
    ops.put("lb.shedder.new", (a, h) -> {
      String name = Args.text(a, "strategy");
      Supplier<LoadSheddingStrategy> make = STRATEGIES.get(name);
      if (make == null) {
        throw new IllegalArgumentException(
            "args.strategy: '" + name + "' is none of " + new TreeMap<>(STRATEGIES).keySet());
      }
      return h.add(new Shedder(make.get(), conf(a.path("conf"))));
    });
    ops.put("lb.shedder.run", (a, h) -> {
      Shedder s = h.get(Args.handle(a), Shedder.class);
      List<Object> out = new ArrayList<>();
      for (JsonNode round : Args.array(a, "rounds")) {
        LoadData load = loadData(round);
        List<List<String>> unloads = new ArrayList<>();
        s.strategy.findBundlesForUnloading(load, s.conf).entries()
            .forEach(e -> unloads.add(List.of(e.getKey(), e.getValue())));
        Map<String, Object> answer = new LinkedHashMap<>();
        answer.put("unloads", unloads);
        answer.put("state", state(s, load));
        out.add(answer);
      }
      return out;
    });
  }

  /** A ServiceConfiguration with each args.conf property set through its setter. */
  static ServiceConfiguration conf(JsonNode properties) throws Exception {
    ServiceConfiguration conf = new ServiceConfiguration();
    var fields = properties.fields();
    while (fields.hasNext()) {
      var e = fields.next();
      String setter = "set" + Character.toUpperCase(e.getKey().charAt(0)) + e.getKey().substring(1);
      Method method = null;
      for (Method m : ServiceConfiguration.class.getMethods()) {
        if (m.getName().equals(setter) && m.getParameterCount() == 1) {
          method = m;
        }
      }
      if (method == null) {
        throw new IllegalArgumentException("args.conf." + e.getKey() + ": no such property");
      }
      method.invoke(conf, value(e.getKey(), e.getValue(), method.getParameterTypes()[0]));
    }
    return conf;
  }

  private static Object value(String name, JsonNode v, Class<?> type) {
    boolean ok = type == boolean.class ? v.isBoolean()
        : type == double.class ? v.isNumber() : v.isIntegralNumber();
    if (!ok) {
      throw new IllegalArgumentException("args.conf." + name + " must be a " + type + ", got " + v);
    }
    if (type == boolean.class) {
      return v.booleanValue();
    }
    if (type == double.class) {
      return v.doubleValue();
    }
    if (type == int.class) {
      return v.intValue();
    }
    if (type == long.class) {
      return v.longValue();
    }
    throw new IllegalArgumentException("args.conf." + name + ": a " + type + " can't be set here");
  }

  static LoadData loadData(JsonNode round) {
    LoadData load = new LoadData();
    Args.field(round, "brokers").fields().forEachRemaining(e -> {
      JsonNode b = e.getValue();
      LocalBrokerData local = new LocalBrokerData();
      JsonNode usage = Args.field(b, "usage");
      local.setCpu(usage(usage, "cpu"));
      local.setMemory(usage(usage, "memory"));
      local.setDirectMemory(usage(usage, "direct_memory"));
      local.setBandwidthIn(usage(usage, "bandwidth_in"));
      local.setBandwidthOut(usage(usage, "bandwidth_out"));
      double[] rates = rates(b.path("rates"), "brokers." + e.getKey() + ".rates");
      local.setMsgRateIn(rates[0]);
      local.setMsgRateOut(rates[1]);
      local.setMsgThroughputIn(rates[2]);
      local.setMsgThroughputOut(rates[3]);
      Set<String> bundles = new HashSet<>();
      b.path("bundles").forEach(n -> bundles.add(n.asText()));
      local.setBundles(bundles);
      load.getBrokerData().put(e.getKey(), new BrokerData(local));
    });
    round.path("bundles").fields().forEachRemaining(e -> {
      double[] rates = rates(e.getValue(), "bundles." + e.getKey());
      BundleData data = new BundleData();
      TimeAverageMessageData shortTerm = new TimeAverageMessageData();
      data.setShortTermData(shortTerm);
      shortTerm.setMsgRateIn(rates[0]);
      shortTerm.setMsgRateOut(rates[1]);
      shortTerm.setMsgThroughputIn(rates[2]);
      shortTerm.setMsgThroughputOut(rates[3]);
      load.getBundleData().put(e.getKey(), data);
    });
    round.path("recently_unloaded").forEach(n -> load.getRecentlyUnloadedBundles().put(n.asText(), 0L));
    return load;
  }

  /** A {@code [usage, limit]} pair of a load report, shared with the transfer shedder's ops. */
  static ResourceUsage usage(JsonNode usage, String name) {
    JsonNode pair = usage.path(name);
    if (pair.isMissingNode()) {
      return new ResourceUsage();
    }
    if (!pair.isArray() || pair.size() != 2) {
      throw new IllegalArgumentException("usage." + name + " must be [usage, limit], got " + pair);
    }
    return new ResourceUsage(pair.get(0).doubleValue(), pair.get(1).doubleValue());
  }

  /** {@code [msgRateIn, msgRateOut, msgThroughputIn, msgThroughputOut]}, named by {@code where}. */
  static double[] rates(JsonNode r, String where) {
    if (!r.isArray() || r.size() != 4) {
      throw new IllegalArgumentException(where + " must be [msgRateIn, msgRateOut, "
          + "msgThroughputIn, msgThroughputOut], got " + r);
    }
    return new double[] {r.get(0).doubleValue(), r.get(1).doubleValue(), r.get(2).doubleValue(),
        r.get(3).doubleValue()};
  }

  private static Object state(Shedder s, LoadData load) throws Exception {
    if (s.strategy instanceof ThresholdShedder) {
      return new TreeMap<>((Map<?, ?>) field(s.strategy, "brokerAvgResourceUsage"));
    }
    if (s.strategy instanceof AvgShedder) {
      Map<String, Object> state = new LinkedHashMap<>();
      state.put("high", counts(field(s.strategy, "brokerHitCountForHigh")));
      state.put("low", counts(field(s.strategy, "brokerHitCountForLow")));
      Method sort = AvgShedder.class.getDeclaredMethod(
          "calculateScoresAndSort", LoadData.class, ServiceConfiguration.class);
      sort.setAccessible(true);
      state.put("sorted", invoke(sort, s.strategy, load, s.conf));
      return state;
    }
    return null;
  }

  private static Map<String, Integer> counts(Object map) {
    Map<String, Integer> out = new TreeMap<>();
    ((Map<?, ?>) map).forEach((k, v) -> out.put((String) k, ((MutableInt) v).intValue()));
    return out;
  }

  static Object field(Object owner, String name) throws Exception {
    Field f = owner.getClass().getDeclaredField(name);
    f.setAccessible(true);
    return f.get(owner);
  }

  /** Calls a reflected method, rethrowing what it threw rather than a wrapper. */
  static Object invoke(Method method, Object target, Object... args) throws Exception {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      if (e.getCause() instanceof Exception cause) {
        throw cause;
      }
      throw e;
    }
  }
}

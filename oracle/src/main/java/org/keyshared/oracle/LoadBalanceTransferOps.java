package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.extensions.BrokerRegistry;
import org.apache.pulsar.broker.loadbalance.extensions.LoadManagerContext;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateChannel;
import org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLoadData;
import org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLookupData;
import org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData;
import org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerFilter;
import org.apache.pulsar.broker.loadbalance.extensions.models.UnloadCounter;
import org.apache.pulsar.broker.loadbalance.extensions.models.UnloadDecision;
import org.apache.pulsar.broker.loadbalance.extensions.policies.AntiAffinityGroupPolicyHelper;
import org.apache.pulsar.broker.loadbalance.extensions.policies.IsolationPoliciesHelper;
import org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder;
import org.apache.pulsar.broker.loadbalance.extensions.store.LoadDataStore;
import org.apache.pulsar.common.naming.NamespaceName;
import org.apache.pulsar.common.naming.ServiceUnitId;
import org.apache.pulsar.policies.data.loadbalancer.NamespaceBundleStats;
import org.apache.pulsar.policies.data.loadbalancer.SystemResourceUsage;
import org.mockito.Mockito;

/**
 * The extensible load manager's {@link TransferShedder} (PIP-192), over a mocked {@link
 * LoadManagerContext}.
 *
 * <p>{@code lb.transfer.new} {conf: {property: value}} makes one shedder, its {@link
 * UnloadCounter} and {@link ServiceConfiguration} (set as {@code lb.shedder.new} sets it), and
 * answers a handle: the shedder keeps its unload-condition hit count between calls, and each
 * broker's {@link BrokerLoadData} keeps its moving averages between reports. {@code
 * lb.transfer.run} {handle, rounds: [round, ...]} calls {@code findBundlesForUnloading} once per
 * round, in order.
 *
 * <p>A round is {brokers: {name: {report: {usage: {cpu, memory, direct_memory, bandwidth_in,
 * bandwidth_out: [usage, limit]}, rates: [msgRateIn, msgRateOut, msgThroughputIn,
 * msgThroughputOut]} or null (no new report since the last round), age_ms}}, available: [broker,
 * ...] (the registry; absent: every broker of the round), registry_fails?: true (the registry's
 * future fails), top_bundles: {broker: [[bundle, [the four rates]], ...]} (its
 * TopBundlesLoadData, in order), owners?: {bundle: broker} (the service-unit channel's owners;
 * absent: no channel), recently_unloaded_bundles: [bundle, ...], recently_unloaded_brokers:
 * {broker: age_ms}, isolation_namespaces: [namespace, ...], anti_affinity_bundles: [bundle,
 * ...], allowed: {bundle: [broker, ...]} (what the broker filters leave a bundle; absent: all)}.
 *
 * <p>Times: Pulsar stamps a report's {@code updatedAt} with the clock and compares it with the
 * clock, where keyshared takes {@code now_ms}. Here each time is given as an age before the
 * round: the clock is read once per round, and {@code updatedAt} and the unload times are set
 * to that reading minus their ages, so that a report's age against the TTL is its given age
 * plus the few milliseconds the call takes, and the time between an unload and a report is
 * exact. A broker missing from a round leaves the store; when it comes back its report starts
 * new averages, as a restarted broker's does. The store iterates brokers by name.
 *
 * <p>Answer per round: {unloads: [[source, bundle, destination or null, reason], ...] (the
 * decision set, sorted), counter: {label, reason} or null (the breakdown counter the call
 * incremented), load_avg, load_std (the counter's, or null when the call did not set them),
 * std_after (the shedder's LoadStats.std at the end), hit_count (unloadConditionHitCount)}.
 * Non-finite numbers are answered as the strings "NaN", "Infinity", "-Infinity".
 */
final class LoadBalanceTransferOps {
  private LoadBalanceTransferOps() {}

  /** One shedder, its counter and configuration, and each broker's load data. */
  static final class Session {
    final ServiceConfiguration conf;
    final UnloadCounter counter = new UnloadCounter();
    final TransferShedder shedder = new TransferShedder(counter);
    final Map<String, BrokerLoadData> brokers = new TreeMap<>();

    Session(ServiceConfiguration conf) {
      this.conf = conf;
    }
  }

  static void register(Map<String, Op> ops) {
    ops.put("lb.transfer.new", (a, h) -> h.add(new Session(LoadBalanceOps.conf(a.path("conf")))));
    ops.put("lb.transfer.run", (a, h) -> {
      Session s = h.get(Args.handle(a), Session.class);
      List<Object> out = new ArrayList<>();
      for (JsonNode round : Args.array(a, "rounds")) {
        out.add(run(s, round));
      }
      return out;
    });
  }

  private static Object finite(double value) {
    return Double.isFinite(value) ? (Object) value : Double.toString(value);
  }

  private static Map<String, Object> run(Session s, JsonNode round) throws Exception {
    long now = System.currentTimeMillis();
    JsonNode brokers = Args.field(round, "brokers");
    s.brokers.keySet().removeIf(b -> !brokers.has(b));
    var fields = brokers.fields();
    while (fields.hasNext()) {
      var e = fields.next();
      String broker = e.getKey();
      JsonNode report = e.getValue().path("report");
      BrokerLoadData data = s.brokers.get(broker);
      if (data == null && (report.isMissingNode() || report.isNull())) {
        throw new IllegalArgumentException(
            "args.rounds[].brokers." + broker + ".report is missing for a broker new to the store");
      }
      if (data == null) {
        data = new BrokerLoadData();
        s.brokers.put(broker, data);
      }
      if (report.isObject()) {
        update(data, report, "brokers." + broker, s.conf);
      }
      setLong(data, "updatedAt", now - Args.longValue(e.getValue(), "age_ms"));
    }

    Map<String, BrokerLookupData> available = new HashMap<>();
    if (round.has("available")) {
      Args.array(round, "available").forEach(b -> available.put(b.asText(), null));
    } else {
      s.brokers.keySet().forEach(b -> available.put(b, null));
    }
    BrokerRegistry registry = Mockito.mock(BrokerRegistry.class);
    Mockito.when(registry.getAvailableBrokerLookupDataAsync()).thenReturn(
        round.path("registry_fails").asBoolean(false)
            ? CompletableFuture.failedFuture(new IllegalStateException("registry unavailable"))
            : CompletableFuture.completedFuture(available));

    Map<String, TopBundlesLoadData> tops = new TreeMap<>();
    round.path("top_bundles").fields().forEachRemaining(e -> {
      TopBundlesLoadData top = new TopBundlesLoadData();
      for (JsonNode entry : e.getValue()) {
        double[] r = LoadBalanceOps.rates(entry.path(1), "args.rounds[].top_bundles." + e.getKey());
        NamespaceBundleStats stats = new NamespaceBundleStats();
        stats.msgRateIn = r[0];
        stats.msgRateOut = r[1];
        stats.msgThroughputIn = r[2];
        stats.msgThroughputOut = r[3];
        top.getTopBundlesLoadData().add(
            new TopBundlesLoadData.BundleLoadData(entry.path(0).asText(), stats));
      }
      tops.put(e.getKey(), top);
    });

    LoadManagerContext context = Mockito.mock(LoadManagerContext.class);
    Mockito.when(context.brokerConfiguration()).thenReturn(s.conf);
    Mockito.when(context.brokerRegistry()).thenReturn(registry);
    LoadDataStore<BrokerLoadData> brokerStore = store(new TreeMap<>(s.brokers));
    LoadDataStore<TopBundlesLoadData> topStore = store(tops);
    Mockito.when(context.brokerLoadDataStore()).thenReturn(brokerStore);
    Mockito.when(context.topBundleLoadDataStore()).thenReturn(topStore);

    policies(s, round);

    Map<String, Long> recentBundles = new HashMap<>();
    round.path("recently_unloaded_bundles").forEach(b -> recentBundles.put(b.asText(), now));
    Map<String, Long> recentBrokers = new HashMap<>();
    round.path("recently_unloaded_brokers").fields()
        .forEachRemaining(e -> recentBrokers.put(e.getKey(), now - e.getValue().longValue()));

    Map<String, Long> before = counts(s.counter);
    setDouble(s.counter, "loadAvg", Double.NaN);
    setDouble(s.counter, "loadStd", Double.NaN);
    Set<UnloadDecision> decisions =
        s.shedder.findBundlesForUnloading(context, recentBundles, recentBrokers);

    List<List<Object>> unloads = new ArrayList<>();
    for (UnloadDecision d : decisions) {
      List<Object> u = new ArrayList<>();
      u.add(d.getUnload().sourceBroker());
      u.add(d.getUnload().serviceUnit());
      u.add(d.getUnload().destBroker().orElse(null));
      u.add(d.getReason().toString());
      unloads.add(u);
    }
    unloads.sort((x, y) -> x.toString().compareTo(y.toString()));
    Map<String, Object> answer = new LinkedHashMap<>();
    answer.put("unloads", unloads);
    Map<String, Long> after = counts(s.counter);
    Map<String, String> incremented = null;
    for (var e : after.entrySet()) {
      if (!e.getValue().equals(before.get(e.getKey()))) {
        String[] parts = e.getKey().split("/");
        incremented = Map.of("label", parts[0], "reason", parts[1]);
      }
    }
    answer.put("counter", incremented);
    boolean set = !Double.isNaN(s.counter.getLoadAvg());
    answer.put("load_avg", set ? finite(s.counter.getLoadAvg()) : null);
    answer.put("load_std", set ? finite(s.counter.getLoadStd()) : null);
    Object stats = LoadBalanceOps.field(s.shedder, "stats");
    answer.put("std_after", finite((double) LoadBalanceOps.field(stats, "std")));
    answer.put("hit_count", LoadBalanceOps.field(s.shedder, "unloadConditionHitCount"));
    return answer;
  }

  /** Ownership, policies and broker filters, set on the shedder as its constructor would. */
  private static void policies(Session s, JsonNode round) throws Exception {
    ServiceUnitStateChannel channel = null;
    if (round.hasNonNull("owners")) {
      Map<String, String> owners = new HashMap<>();
      round.path("owners").fields().forEachRemaining(e -> owners.put(e.getKey(), e.getValue().asText()));
      channel = Mockito.mock(ServiceUnitStateChannel.class);
      Mockito.when(channel.isOwner(Mockito.anyString(), Mockito.anyString())).thenAnswer(
          i -> i.getArgument(1).equals(owners.get((String) i.getArgument(0))));
    }
    Set<String> isolated = new HashSet<>();
    round.path("isolation_namespaces").forEach(n -> isolated.add(n.asText()));
    IsolationPoliciesHelper isolation = Mockito.mock(IsolationPoliciesHelper.class);
    Mockito.when(isolation.hasIsolationPolicy(Mockito.any())).thenAnswer(
        i -> isolated.contains(((NamespaceName) i.getArgument(0)).toString()));
    Set<String> antiAffinity = new HashSet<>();
    round.path("anti_affinity_bundles").forEach(n -> antiAffinity.add(n.asText()));
    AntiAffinityGroupPolicyHelper groups = Mockito.mock(AntiAffinityGroupPolicyHelper.class);
    Mockito.when(groups.hasAntiAffinityGroupPolicy(Mockito.anyString())).thenAnswer(
        i -> antiAffinity.contains((String) i.getArgument(0)));
    Map<String, Set<String>> allowed = new HashMap<>();
    round.path("allowed").fields().forEachRemaining(e -> {
      Set<String> brokers = new HashSet<>();
      e.getValue().forEach(b -> brokers.add(b.asText()));
      allowed.put(e.getKey(), brokers);
    });
    BrokerFilter filter = new BrokerFilter() {
      @Override
      public String name() {
        return "keyshared-allowed";
      }

      @Override
      public CompletableFuture<Map<String, BrokerLookupData>> filterAsync(
          Map<String, BrokerLookupData> brokers, ServiceUnitId unit, LoadManagerContext c) {
        Set<String> keep = allowed.get(unit.toString());
        if (keep != null) {
          brokers.keySet().retainAll(keep);
        }
        return CompletableFuture.completedFuture(brokers);
      }
    };
    PulsarService pulsar = Mockito.mock(PulsarService.class, Mockito.RETURNS_DEEP_STUBS);
    var factory = LoadBalanceBundleOps.factory();
    Mockito.when(pulsar.getNamespaceService().getNamespaceBundleFactory()).thenReturn(factory);
    set(s.shedder, "pulsar", pulsar);
    set(s.shedder, "channel", channel);
    set(s.shedder, "isolationPoliciesHelper", isolation);
    set(s.shedder, "antiAffinityGroupPolicyHelper", groups);
    set(s.shedder, "brokerFilterPipeline", List.of(filter));
  }

  @SuppressWarnings("unchecked")
  private static <T> LoadDataStore<T> store(Map<String, T> data) {
    LoadDataStore<T> store = Mockito.mock(LoadDataStore.class);
    Mockito.when(store.get(Mockito.anyString()))
        .thenAnswer(i -> Optional.ofNullable(data.get((String) i.getArgument(0))));
    Mockito.when(store.entrySet()).thenAnswer(i -> data.entrySet());
    Mockito.when(store.size()).thenAnswer(i -> data.size());
    return store;
  }

  private static void update(BrokerLoadData data, JsonNode report, String where,
      ServiceConfiguration conf) {
    JsonNode usage = Args.field(report, "usage");
    SystemResourceUsage system = new SystemResourceUsage();
    system.setCpu(LoadBalanceOps.usage(usage, "cpu"));
    system.setMemory(LoadBalanceOps.usage(usage, "memory"));
    system.setDirectMemory(LoadBalanceOps.usage(usage, "direct_memory"));
    system.setBandwidthIn(LoadBalanceOps.usage(usage, "bandwidth_in"));
    system.setBandwidthOut(LoadBalanceOps.usage(usage, "bandwidth_out"));
    double[] r =
        LoadBalanceOps.rates(report.path("rates"), "args.rounds[]." + where + ".report.rates");
    data.update(system, r[2], r[3], r[0], r[1], 0, 0, conf);
  }

  private static Map<String, Long> counts(UnloadCounter counter) {
    Map<String, Long> out = new TreeMap<>();
    counter.getBreakdownCounters().forEach((label, reasons) -> reasons.forEach(
        (reason, n) -> out.put(label + "/" + reason, ((AtomicLong) n).get())));
    return out;
  }

  private static Field declared(Class<?> type, String name) throws Exception {
    Field f = type.getDeclaredField(name);
    f.setAccessible(true);
    return f;
  }

  private static void set(Object owner, String name, Object value) throws Exception {
    declared(owner.getClass(), name).set(owner, value);
  }

  private static void setLong(Object owner, String name, long value) throws Exception {
    declared(owner.getClass(), name).setLong(owner, value);
  }

  private static void setDouble(Object owner, String name, double value) throws Exception {
    declared(owner.getClass(), name).setDouble(owner, value);
  }
}

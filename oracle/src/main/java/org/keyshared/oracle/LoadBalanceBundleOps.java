package org.keyshared.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.github.benmanes.caffeine.cache.AsyncLoadingCache;
import com.google.common.hash.Hashing;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.broker.PulsarService;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.extensions.models.TopKBundles;
import org.apache.pulsar.broker.namespace.NamespaceService;
import org.apache.pulsar.common.naming.BundleSplitOption;
import org.apache.pulsar.common.naming.FlowOrQpsEquallyDivideBundleSplitAlgorithm;
import org.apache.pulsar.common.naming.FlowOrQpsEquallyDivideBundleSplitOption;
import org.apache.pulsar.common.naming.NamespaceBundle;
import org.apache.pulsar.common.naming.NamespaceBundleFactory;
import org.apache.pulsar.common.naming.NamespaceBundleSplitAlgorithm;
import org.apache.pulsar.common.naming.NamespaceBundles;
import org.apache.pulsar.common.naming.NamespaceName;
import org.apache.pulsar.common.naming.TopicName;
import org.apache.pulsar.common.policies.data.BundlesData;
import org.apache.pulsar.common.policies.data.stats.TopicStatsImpl;
import org.apache.pulsar.policies.data.loadbalancer.NamespaceBundleStats;
import org.mockito.Mockito;

/**
 * A namespace's bundles on the 32-bit ring ({@link NamespaceBundleFactory}, {@link
 * NamespaceBundles}), the bundle split algorithms, and {@link TopKBundles}.
 *
 * <p>One {@link NamespaceBundleFactory} (CRC32, Pulsar's default) serves every request, over a
 * Mockito {@link PulsarService} with a default {@link ServiceConfiguration}; before a split its
 * bundle cache is given the namespace's bundles, as the metadata store would. Each op answers
 * a batch: a list of cases in, a list of answers out, where a case Pulsar refuses answers
 * {@code {"error": "<exception>: <message>"}} instead of failing the whole batch.
 */
final class LoadBalanceBundleOps {
  private static final long TIMEOUT_S = 30;
  private static NamespaceBundleFactory factory;

  private LoadBalanceBundleOps() {}

  static void register(Map<String, Op> ops) {
    ops.put("lb.bundles.find", (a, h) -> batch(a, LoadBalanceBundleOps::find));
    ops.put("lb.bundles.split", (a, h) -> batch(a, LoadBalanceBundleOps::splitBundles));
    ops.put("lb.split_algorithm", (a, h) -> batch(a, LoadBalanceBundleOps::splitBoundary));
    ops.put("lb.top_k", (a, h) -> batch(a, LoadBalanceBundleOps::topK));
  }

  /** One case of a batch. */
  @FunctionalInterface
  interface Case {
    Object apply(JsonNode c) throws Exception;
  }

  private static List<Object> batch(JsonNode args, Case each) throws Exception {
    List<Object> out = new ArrayList<>();
    for (JsonNode c : Args.array(args, "cases")) {
      try {
        out.add(each.apply(c));
      } catch (IllegalArgumentException | IndexOutOfBoundsException | IllegalStateException e) {
        out.add(error(e));
      } catch (ExecutionException e) {
        out.add(error(e.getCause()));
      }
    }
    return out;
  }

  private static Map<String, String> error(Throwable e) {
    return Map.of("error", e.getClass().getSimpleName() + ": " + e.getMessage());
  }

  static synchronized NamespaceBundleFactory factory() {
    if (factory == null) {
      PulsarService pulsar = Mockito.mock(PulsarService.class, Mockito.RETURNS_DEEP_STUBS);
      Mockito.when(pulsar.getConfiguration()).thenReturn(new ServiceConfiguration());
      factory = NamespaceBundleFactory.createFactory(pulsar, Hashing.crc32());
    }
    return factory;
  }

  static NamespaceBundles bundles(JsonNode c) {
    List<String> boundaries = new ArrayList<>();
    for (JsonNode p : Args.array(c, "partitions")) {
      boundaries.add(String.format("0x%08x", p.longValue()));
    }
    NamespaceName ns = NamespaceName.get(Args.text(c, "namespace"));
    return factory().getBundles(ns, BundlesData.builder()
        .boundaries(boundaries).numBundles(boundaries.size() - 1).build());
  }

  private static List<Long> range(NamespaceBundle bundle) {
    return List.of(bundle.getKeyRange().lowerEndpoint(), bundle.getKeyRange().upperEndpoint());
  }

  /**
   * args.cases[i]: {namespace, partitions, topics?, hashes?} -> {topics: [...], hashes: [...]},
   * each the [lower, upper] of the bundle {@code findBundle(TopicName)} or the protected
   * {@code getBundle(long)} gives, or {"error": ...}.
   */
  private static Object find(JsonNode c) throws Exception {
    NamespaceBundles bundles = bundles(c);
    Method getBundle = NamespaceBundles.class.getDeclaredMethod("getBundle", long.class);
    getBundle.setAccessible(true);
    List<Object> topics = new ArrayList<>();
    for (JsonNode t : c.path("topics")) {
      topics.add(guard(() -> range(bundles.findBundle(TopicName.get(t.asText())))));
    }
    List<Object> hashes = new ArrayList<>();
    for (JsonNode hash : c.path("hashes")) {
      hashes.add(guard(() -> range((NamespaceBundle) LoadBalanceOps.invoke(getBundle, bundles,
          hash.longValue()))));
    }
    return Map.of("topics", topics, "hashes", hashes);
  }

  /** A step that may throw. */
  @FunctionalInterface
  interface Body {
    Object get() throws Exception;
  }

  private static Object guard(Body body) {
    try {
      return body.get();
    } catch (Exception e) {
      return error(e);
    }
  }

  /** Seeds the factory's bundle cache with these bundles, as loading them from metadata would. */
  @SuppressWarnings("unchecked")
  private static void seed(NamespaceBundles bundles, NamespaceName ns) throws Exception {
    Field cache = NamespaceBundleFactory.class.getDeclaredField("bundlesCache");
    cache.setAccessible(true);
    ((AsyncLoadingCache<NamespaceName, NamespaceBundles>) cache.get(factory()))
        .put(ns, CompletableFuture.completedFuture(bundles));
  }

  /**
   * args.cases[i]: {namespace, partitions, lower, upper, num_bundles, boundaries?} ->
   * {partitions, children} from {@code NamespaceBundleFactory.splitBundles}, or {"error": ...}.
   */
  private static Object splitBundles(JsonNode c) throws Exception {
    NamespaceBundles bundles = bundles(c);
    NamespaceName ns = NamespaceName.get(Args.text(c, "namespace"));
    seed(bundles, ns);
    NamespaceBundle target = target(ns, c);
    List<Long> boundaries = null;
    if (c.hasNonNull("boundaries")) {
      boundaries = new ArrayList<>();
      for (JsonNode b : Args.array(c, "boundaries")) {
        boundaries.add(b.longValue());
      }
    }
    var result = factory().splitBundles(target, Args.intValue(c, "num_bundles"), boundaries)
        .get(TIMEOUT_S, TimeUnit.SECONDS);
    if (result == null) {
      return Map.of("error", "null: the bundle is not one of the namespace's");
    }
    List<Object> children = new ArrayList<>();
    result.getRight().forEach(b -> children.add(range(b)));
    List<Long> partitions = new ArrayList<>();
    result.getLeft().getBundles().forEach(b -> partitions.add(b.getKeyRange().lowerEndpoint()));
    List<NamespaceBundle> all = result.getLeft().getBundles();
    partitions.add(all.get(all.size() - 1).getKeyRange().upperEndpoint());
    return Map.of("partitions", partitions, "children", children);
  }

  private static NamespaceBundle target(NamespaceName ns, JsonNode c) {
    long lower = Args.longValue(c, "lower");
    long upper = Args.longValue(c, "upper");
    return new NamespaceBundle(ns, NamespaceBundleFactory.getRange(lower, upper), factory());
  }

  /**
   * args.cases[i]: {algorithm, namespace, lower, upper, topics, positions?, topic_stats?,
   * max_msg_rate?, max_bandwidth_mbytes?, difference_threshold_percentage?} -> {boundaries}
   * (null where Pulsar's future completes with null). {@code topics} are the bundle's owned
   * topics, as {@code NamespaceService.getOwnedTopicListForNamespaceBundle} answers them;
   * {@code topic_stats} maps a topic to [msgRateIn, msgRateOut, msgThroughputIn,
   * msgThroughputOut]. The algorithm is Pulsar's {@code NamespaceBundleSplitAlgorithm.of}.
   */
  private static Object splitBoundary(JsonNode c) throws Exception {
    String name = Args.text(c, "algorithm");
    NamespaceBundleSplitAlgorithm algorithm = NamespaceBundleSplitAlgorithm.of(name);
    if (algorithm == null) {
      throw new IllegalArgumentException("args.cases[].algorithm: no algorithm '" + name + "'");
    }
    NamespaceName ns = NamespaceName.get(Args.text(c, "namespace"));
    NamespaceBundle bundle = target(ns, c);
    List<String> topics = new ArrayList<>();
    Args.array(c, "topics").forEach(t -> topics.add(t.asText()));
    NamespaceService service = Mockito.mock(NamespaceService.class);
    Mockito.when(service.getOwnedTopicListForNamespaceBundle(bundle))
        .thenReturn(CompletableFuture.completedFuture(topics));
    List<Long> positions = new ArrayList<>();
    c.path("positions").forEach(p -> positions.add(p.longValue()));
    BundleSplitOption option = algorithm instanceof FlowOrQpsEquallyDivideBundleSplitAlgorithm
        ? new FlowOrQpsEquallyDivideBundleSplitOption(service, bundle, positions, topicStats(c),
            Args.intValue(c, "max_msg_rate"), Args.intValue(c, "max_bandwidth_mbytes"),
            Args.intValue(c, "difference_threshold_percentage"))
        : new BundleSplitOption(service, bundle, c.has("positions") ? positions : null);
    Map<String, Object> out = new HashMap<>();
    out.put("boundaries", algorithm.getSplitBoundary(option).get(TIMEOUT_S, TimeUnit.SECONDS));
    return out;
  }

  private static Map<String, TopicStatsImpl> topicStats(JsonNode c) {
    Map<String, TopicStatsImpl> stats = new HashMap<>();
    Args.field(c, "topic_stats").fields().forEachRemaining(e -> {
      JsonNode r = e.getValue();
      TopicStatsImpl s = new TopicStatsImpl();
      s.msgRateIn = r.get(0).doubleValue();
      s.msgRateOut = r.get(1).doubleValue();
      s.msgThroughputIn = r.get(2).doubleValue();
      s.msgThroughputOut = r.get(3).doubleValue();
      stats.put(e.getKey(), s);
    });
    return stats;
  }

  /**
   * args.cases[i]: {bundle_stats: {bundle: [msgRateIn, msgRateOut, msgThroughputIn,
   * msgThroughputOut]}, topk} -> {bundles: [...]}: {@code TopKBundles.update}'s report, in its
   * order, with shedding bundles with policies enabled (so that no policy store is read).
   */
  private static Object topK(JsonNode c) throws Exception {
    ServiceConfiguration conf = new ServiceConfiguration();
    conf.setLoadBalancerSheddingBundlesWithPoliciesEnabled(true);
    PulsarService pulsar = Mockito.mock(PulsarService.class);
    Mockito.when(pulsar.getConfiguration()).thenReturn(conf);
    TopKBundles topK = new TopKBundles(pulsar);
    Map<String, NamespaceBundleStats> stats = new LinkedHashMap<>();
    Args.field(c, "bundle_stats").fields().forEachRemaining(e -> {
      JsonNode r = e.getValue();
      NamespaceBundleStats s = new NamespaceBundleStats();
      s.msgRateIn = r.get(0).doubleValue();
      s.msgRateOut = r.get(1).doubleValue();
      s.msgThroughputIn = r.get(2).doubleValue();
      s.msgThroughputOut = r.get(3).doubleValue();
      stats.put(e.getKey(), s);
    });
    topK.update(stats, Args.intValue(c, "topk"));
    List<String> names = new ArrayList<>();
    for (var entry : topK.getLoadData().getTopBundlesLoadData()) {
      names.add(entry.bundleName());
    }
    return Map.of("bundles", names);
  }
}

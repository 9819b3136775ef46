package org.keyshared.oracle;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

/**
 * A running broker's metadata store, read from outside while the broker works: a ZooKeeper
 * client on the standalone broker's own ZooKeeper records every change under a path as it
 * happens, each with the store's stat. The end-to-end tests read from it the records the
 * broker acted on: a scalable topic's layout, its segments' load records (whose modification
 * time is what the auto-scale evaluator takes as the sample's age) and its consumer
 * registrations.
 *
 * <ul>
 *   <li>{@code metadata.watch} {connect, path, timeout_ms}: a handle; from now on every node
 *       created, changed or deleted at or under {@code path} is recorded, and the nodes
 *       already there are recorded first.
 *   <li>{@code metadata.events} {handle}: the records since the last call, in the store's
 *       order: {@code {path, kind: "data"|"deleted", version, ctime_ms, mtime_ms, data,
 *       seen_ms}} ({@code data} as UTF-8 text; {@code seen_ms}: this client's clock when the
 *       change reached it; a deleted node has only path, kind and seen_ms).
 *   <li>{@code metadata.unwatch} {handle}: closes the client.
 * </ul>
 */
final class MetadataWatchOps {
  private MetadataWatchOps() {}

  static void register(Map<String, Op> ops) {
    ops.put("metadata.watch", (a, h) -> h.add(Watch.open(
        Args.text(a, "connect"), Args.text(a, "path"), Args.intValue(a, "timeout_ms"))));
    ops.put("metadata.events", (a, h) -> h.get(Args.handle(a), Watch.class).drain());
    ops.put("metadata.unwatch", (a, h) -> {
      Watch watch = h.get(Args.handle(a), Watch.class);
      h.close(Args.handle(a));
      watch.close();
      return true;
    });
  }

  /** One client and the records it has seen. */
  static final class Watch implements Watcher, AutoCloseable {
    private final ZooKeeper zk;
    private final List<Map<String, Object>> records = new ArrayList<>();

    private Watch(ZooKeeper zk) {
      this.zk = zk;
    }

    static Watch open(String connect, String root, int timeoutMs) throws Exception {
      CountDownLatch connected = new CountDownLatch(1);
      ZooKeeper zk = new ZooKeeper(connect, timeoutMs, event -> {
        if (event.getState() == Event.KeeperState.SyncConnected) {
          connected.countDown();
        }
      });
      if (!connected.await(timeoutMs, TimeUnit.MILLISECONDS)) {
        zk.close();
        throw new IllegalStateException(
            "no ZooKeeper answered at " + connect + " within " + timeoutMs + " ms");
      }
      Watch watch = new Watch(zk);
      // Registered before the first read, so that no change falls between the two; a node
      // read twice is recorded twice with the same version.
      zk.addWatch(root, watch, AddWatchMode.PERSISTENT_RECURSIVE);
      watch.readTree(root);
      return watch;
    }

    @Override
    public void process(WatchedEvent event) {
      String path = event.getPath();
      if (path == null) {
        return;
      }
      switch (event.getType()) {
        case NodeCreated, NodeDataChanged -> read(path);
        case NodeDeleted -> deleted(path);
        default -> { }
      }
    }

    private void readTree(String path) throws Exception {
      List<String> children;
      try {
        children = zk.getChildren(path, false);
      } catch (KeeperException.NoNodeException absent) {
        return;
      }
      read(path);
      for (String child : children) {
        readTree(path.equals("/") ? "/" + child : path + "/" + child);
      }
    }

    private void read(String path) {
      Stat stat = new Stat();
      byte[] data;
      try {
        data = zk.getData(path, false, stat);
      } catch (KeeperException.NoNodeException gone) {
        return; // deleted since: its deletion is recorded on its own
      } catch (KeeperException | InterruptedException e) {
        deleted(path); // unreadable: never happens on a healthy store; recorded, not lost
        return;
      }
      Map<String, Object> record = new LinkedHashMap<>();
      record.put("path", path);
      record.put("kind", "data");
      record.put("version", stat.getVersion());
      record.put("ctime_ms", stat.getCtime());
      record.put("mtime_ms", stat.getMtime());
      record.put("data", data == null ? null : new String(data, StandardCharsets.UTF_8));
      record.put("seen_ms", System.currentTimeMillis());
      add(record);
    }

    private void deleted(String path) {
      Map<String, Object> record = new LinkedHashMap<>();
      record.put("path", path);
      record.put("kind", "deleted");
      record.put("seen_ms", System.currentTimeMillis());
      add(record);
    }

    private synchronized void add(Map<String, Object> record) {
      records.add(record);
    }

    synchronized List<Map<String, Object>> drain() {
      List<Map<String, Object>> out = new ArrayList<>(records);
      records.clear();
      return out;
    }

    @Override
    public void close() throws InterruptedException {
      zk.close();
    }
  }
}

package io.keyshared.spark;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The active segments of a topic layout, ready to route key hashes to (segment id, bucket
 * index) exactly as the Rust {@code RoutingTable} does: on Pulsar master, the segment whose
 * range holds {@code key_hash >> 16}, then the number of its bucket splits at or below
 * {@code key_hash & 0xFFFF}; on 5.0.0-M1, the segment whose range holds
 * {@code key_hash & 0xFFFF}, and bucket 0 (M1 has no entry buckets).
 *
 * <p>Built once per query from the layout JSON ({@code TopicLayout.to_json()} or a layout
 * response: an object whose {@code segments} each have {@code segment_id}, {@code hash_range}
 * like {@code "0000-7fff"}, {@code bucket_splits} and optionally {@code state}; sealed segments
 * are skipped; an optional {@code pulsar_version} names the release, else the caller's default
 * applies) and shipped to executors inside the plan, never per row.
 */
public final class Router implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final int RING_SIZE = 1 << 16;
  /** keyshared.MIN_FIRST_SPLIT: the smallest first bucket split. */
  public static final int MIN_FIRST_SPLIT = 2;
  private static final int BLOCK_WIDTH = 256;
  private static final int BLOCKS = RING_SIZE / BLOCK_WIDTH;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, Router> PARSED = new ConcurrentHashMap<>();
  private static final int MAX_PARSED = 64;
  // An UnsafeRow of two fixed-width fields: the null bits word and two 8-byte slots.
  private static final int ROUTE_ROW_BYTES = 8 + 2 * 8;

  public static final String SEGMENT_ID = "segment_id";
  public static final String BUCKET = "bucket";
  public static final StructType ROUTE_TYPE =
      new StructType(
          new StructField[] {
            DataTypes.createStructField(SEGMENT_ID, DataTypes.LongType, false),
            DataTypes.createStructField(BUCKET, DataTypes.IntegerType, false)
          });

  /** Pulsar master, the default release. */
  public static final String MASTER = "master";
  /** Pulsar 5.0.0-M1, whose segments route by the low half of the key hash. */
  public static final String M1 = "5.0.0-M1";
  // keyshared.versions: the releases without scalable topics, refused with the reason.
  private static final List<String> WITHOUT_SCALABLE_TOPICS = List.of("4.2", "4.0");

  /** One segment over the whole ring with 4 equal buckets: ks_route's default layout. */
  public static final Router DEFAULT = defaultFor(MASTER);

  /** ks_route's default layout under {@code pulsarVersion}, checked. */
  public static Router defaultFor(String pulsarVersion) {
    return new Router(
        new long[] {0},
        new int[] {0},
        new int[] {0xFFFF},
        new int[][] {{16384, 32768, 49152}},
        lowHalf(pulsarVersion, "pulsar_version"));
  }

  private final long[] segmentIds;
  private final int[] starts;
  private final int[] ends;
  private final int[][] splits;
  // 5.0.0-M1's rule: the low half picks the segment, and a segment is one bucket.
  private final boolean lowHalf;
  private final char[] slotBySegmentHash;
  // Per segment, the bucket holding the first hashB of each 256-wide block of [0, 0xffff]: a
  // lookup starts there and steps past at most the few splits inside the block, instead of
  // a binary search whose branches the CPU cannot predict.
  private final char[][] firstBucketByBlock;
  // The struct of each (segment, bucket), made on first use and shared like a struct literal's
  // value, so that routing a row allocates nothing.
  private transient volatile InternalRow[][] rows;

  private Router(long[] segmentIds, int[] starts, int[] ends, int[][] splits, boolean lowHalf) {
    this.segmentIds = segmentIds;
    this.starts = starts;
    this.ends = ends;
    this.splits = splits;
    this.lowHalf = lowHalf;
    this.slotBySegmentHash = new char[RING_SIZE];
    for (int slot = 0; slot < starts.length; slot++) {
      // At most 65,536 segments tile the ring, so a slot always fits in a char.
      Arrays.fill(slotBySegmentHash, starts[slot], ends[slot] + 1, (char) slot);
    }
    this.firstBucketByBlock = new char[splits.length][];
    for (int slot = 0; slot < splits.length; slot++) {
      char[] first = new char[BLOCKS];
      for (int block = 0; block < BLOCKS; block++) {
        // A segment has at most 65,536 buckets, so an index always fits in a char.
        first[block] = (char) searchBucket(splits[slot], block * BLOCK_WIDTH, 0, splits[slot].length);
      }
      firstBucketByBlock[slot] = first;
    }
  }

  /**
   * Whether {@code pulsarVersion} routes by the low half (5.0.0-M1) rather than the high half
   * (master); a KeysharedException naming {@code name} for any other release, in the library's
   * words ({@code keyshared.versions}).
   */
  static boolean lowHalf(String pulsarVersion, String name) {
    if (MASTER.equals(pulsarVersion) || M1.equals(pulsarVersion)) {
      return M1.equals(pulsarVersion);
    }
    if (WITHOUT_SCALABLE_TOPICS.contains(pulsarVersion)) {
      throw new KeysharedException(
          name + " '" + pulsarVersion + "': scalable topics need Pulsar 5.0, one of ('master', '5.0.0-M1')");
    }
    throw new KeysharedException(
        name + " must be one of 'master', '5.0.0-M1', got '" + pulsarVersion + "'");
  }

  /**
   * The router of a layout JSON, parsed once per distinct text and default release and then
   * reused: the JSON's {@code pulsar_version}, else {@code defaultVersion}, names the release.
   */
  public static Router parse(String json, String defaultVersion) {
    // A release never holds a newline, so the key is unambiguous.
    String cacheKey = defaultVersion + "\n" + json;
    Router cached = PARSED.get(cacheKey);
    if (cached != null) {
      return cached;
    }
    Router router = fromJson(json, defaultVersion);
    if (PARSED.size() >= MAX_PARSED) {
      PARSED.clear();
    }
    PARSED.put(cacheKey, router);
    return router;
  }

  private static Router fromJson(String json, String defaultVersion) {
    JsonNode root;
    try (JsonParser parser = JSON.createParser(json)) {
      root = JSON.readTree(parser);
      // readTree stops after the first value; the library (Python's json) refuses what follows.
      if (root != null && parser.nextToken() != null) {
        throw new KeysharedException(
            "layout is not JSON: extra data after the layout at char "
                + parser.currentTokenLocation().getCharOffset());
      }
    } catch (JsonProcessingException e) {
      throw new KeysharedException("layout is not JSON: " + e.getOriginalMessage());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (root == null || !root.isObject() || !root.path("segments").isArray()) {
      throw new KeysharedException(
          "layout must be a JSON object with a segments list (TopicLayout.to_json())");
    }
    JsonNode version = root.get("pulsar_version");
    boolean lowHalf;
    if (version == null || version.isNull()) {
      lowHalf = lowHalf(defaultVersion, "pulsar_version");
    } else if (!version.isTextual()) {
      throw new KeysharedException("layout.pulsar_version must be a str, got " + version);
    } else {
      lowHalf = lowHalf(version.asText(), "layout.pulsar_version");
    }
    List<Segment> active = new ArrayList<>();
    int index = 0;
    for (Iterator<JsonNode> it = root.get("segments").elements(); it.hasNext(); index++) {
      Segment segment = Segment.of(it.next(), "layout.segments[" + index + "]");
      if (segment != null) {
        active.add(segment);
      }
    }
    active.sort((a, b) -> Integer.compare(a.start, b.start));
    checkTiling(active);
    int n = active.size();
    long[] ids = new long[n];
    int[] starts = new int[n];
    int[] ends = new int[n];
    int[][] splits = new int[n][];
    for (int i = 0; i < n; i++) {
      Segment s = active.get(i);
      ids[i] = s.id;
      starts[i] = s.start;
      ends[i] = s.end;
      splits[i] = s.splits;
    }
    long[] sorted = ids.clone();
    Arrays.sort(sorted);
    for (int i = 1; i < n; i++) {
      if (sorted[i] == sorted[i - 1]) {
        throw new KeysharedException("layout: segment id " + sorted[i] + " appears more than once");
      }
    }
    return new Router(ids, starts, ends, splits, lowHalf);
  }

  private static void checkTiling(List<Segment> segments) {
    int next = 0;
    for (Segment s : segments) {
      if (s.start != next) {
        String problem = s.start < next ? "overlaps the one before it" : "leaves a gap before it";
        throw new KeysharedException(
            String.format(
                "layout: active segments must tile 0000-ffff: segment %d (%04x-%04x) %s",
                s.id, s.start, s.end, problem));
      }
      next = s.end + 1;
    }
    if (next != RING_SIZE) {
      throw new KeysharedException(
          segments.isEmpty()
              ? "layout has no active segments"
              : String.format("layout: active segments must tile 0000-ffff, but end at %04x", next - 1));
    }
  }

  /** The segment-ring hash of a key hash under the release's rule. */
  private int segmentHash(int hash) {
    return lowHalf ? hash & 0xFFFF : hash >>> 16;
  }

  /** How many buckets the segment in {@code slot} holds under the release's rule. */
  private int bucketCount(int slot) {
    return lowHalf ? 1 : splits[slot].length + 1;
  }

  /** The struct(segment_id, bucket) of a key hash. */
  public InternalRow route(int hash) {
    int slot = slotBySegmentHash[segmentHash(hash)];
    int bucket = bucketIndex(slot, hash);
    InternalRow[][] table = rows;
    if (table == null) {
      table = new InternalRow[segmentIds.length][];
      rows = table;
    }
    InternalRow[] segmentRows = table[slot];
    if (segmentRows == null) {
      segmentRows = new InternalRow[bucketCount(slot)];
      table[slot] = segmentRows;
    }
    InternalRow row = segmentRows[bucket];
    if (row == null) {
      UnsafeRow unsafe = new UnsafeRow(2);
      unsafe.pointTo(new byte[ROUTE_ROW_BYTES], ROUTE_ROW_BYTES);
      unsafe.setLong(0, segmentIds[slot]);
      unsafe.setInt(1, bucket);
      row = unsafe;
      segmentRows[bucket] = row;
    }
    return row;
  }

  /** The segment id of a key hash. */
  public long segmentId(int hash) {
    return segmentIds[slotBySegmentHash[segmentHash(hash)]];
  }

  /** The bucket index of a key hash in its segment. */
  public int bucket(int hash) {
    return bucketIndex(slotBySegmentHash[segmentHash(hash)], hash);
  }

  /** How many of the segment's splits are at or below the key hash's hashB (0 on M1). */
  private int bucketIndex(int slot, int hash) {
    if (lowHalf) {
      return 0;
    }
    int hashB = hash & 0xFFFF;
    char[] first = firstBucketByBlock[slot];
    int block = hashB / BLOCK_WIDTH;
    int[] s = splits[slot];
    // Most blocks hold no split, so the search below usually makes no step.
    return searchBucket(s, hashB, first[block], block + 1 < BLOCKS ? first[block + 1] : s.length);
  }

  /** How many splits are at or below hashB, knowing the answer is in [lo, hi]. */
  private static int searchBucket(int[] splits, int hashB, int lo, int hi) {
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (splits[mid] <= hashB) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  /** Active segments and total buckets, for plans and errors. */
  public String describe() {
    int buckets = 0;
    for (int slot = 0; slot < splits.length; slot++) {
      buckets += bucketCount(slot);
    }
    return "layout(" + segmentIds.length + " segments, " + buckets + " buckets"
        + (lowHalf ? ", " + M1 : "") + ")";
  }

  @Override
  public String toString() {
    return describe();
  }

  @Override
  public boolean equals(Object other) {
    if (!(other instanceof Router)) {
      return false;
    }
    Router o = (Router) other;
    return lowHalf == o.lowHalf
        && Arrays.equals(segmentIds, o.segmentIds)
        && Arrays.equals(starts, o.starts)
        && Arrays.equals(ends, o.ends)
        && Arrays.deepEquals(splits, o.splits);
  }

  @Override
  public int hashCode() {
    return 31 * Arrays.hashCode(segmentIds) + Arrays.deepHashCode(splits) + Arrays.hashCode(starts)
        + (lowHalf ? 1 : 0);
  }

  /** One active segment of the layout JSON, validated with errors naming the field. */
  private static final class Segment {
    final long id;
    final int start;
    final int end;
    final int[] splits;

    private Segment(long id, int start, int end, int[] splits) {
      this.id = id;
      this.start = start;
      this.end = end;
      this.splits = splits;
    }

    /** The segment, or null when it is sealed. */
    static Segment of(JsonNode node, String name) {
      if (!node.isObject()) {
        throw new KeysharedException(name + " must be an object");
      }
      JsonNode state = node.get("state");
      if (state != null) {
        String text = state.asText().toUpperCase(Locale.ROOT);
        if (text.equals("SEALED")) {
          return null;
        }
        if (!text.equals("ACTIVE")) {
          throw new KeysharedException(name + ".state must be ACTIVE or SEALED, got " + state);
        }
      }
      JsonNode id = node.get("segment_id");
      if (id == null || !id.isIntegralNumber() || !id.canConvertToLong() || id.asLong() < 0) {
        throw new KeysharedException(
            name + ".segment_id must be an integer in [0, 2**63), got " + id);
      }
      JsonNode range = node.get("hash_range");
      if (range == null || !range.isTextual() || !range.asText().matches("[0-9a-fA-F]{4}-[0-9a-fA-F]{4}")) {
        throw new KeysharedException(name + ".hash_range must be a str like \"0000-7fff\", got " + range);
      }
      int start = Integer.parseInt(range.asText().substring(0, 4), 16);
      int end = Integer.parseInt(range.asText().substring(5), 16);
      if (start > end) {
        throw new KeysharedException(name + ".hash_range starts after it ends: " + range.asText());
      }
      return new Segment(id.asLong(), start, end, splits(node.get("bucket_splits"), name + ".bucket_splits"));
    }

    private static int[] splits(JsonNode node, String name) {
      if (node == null) {
        return new int[0];
      }
      if (!node.isArray()) {
        throw new KeysharedException(name + " must be a list");
      }
      int[] out = new int[node.size()];
      for (int i = 0; i < out.length; i++) {
        JsonNode s = node.get(i);
        if (!s.isIntegralNumber() || !s.canConvertToInt() || s.asInt() < 1 || s.asInt() > 0xFFFF) {
          throw new KeysharedException(name + "[" + i + "] = " + s + " is outside [1, 0xffff]");
        }
        out[i] = s.asInt();
        if (i == 0 && out[0] < MIN_FIRST_SPLIT) {
          // The library's rule (SPEC 2): bucket 0 spans at least [0, 1], so that no two
          // buckets share a canonical hash.
          throw new KeysharedException(
              name + "[0] = " + out[0] + " leaves bucket 0 narrower than [0, 1]: the first split"
                  + " must be at least " + MIN_FIRST_SPLIT);
        }
        if (i > 0 && out[i] <= out[i - 1]) {
          throw new KeysharedException(
              name + " must be strictly ascending: [" + i + "] = " + out[i] + " follows " + out[i - 1]);
        }
      }
      return out;
    }
  }
}

package io.keyshared.spark;

import java.util.Arrays;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * The keyshared functions of a key: each derives its value from the 32-bit key hash. Spark has
 * no unsigned types, so the key hash widens to bigint and the 16-bit values are ints, as in
 * the Python UDFs.
 */
public enum KeyFunction {
  /** The pinned key hash, a bigint in [0, 2**32). */
  KEY_HASH("ks_key_hash", DataTypes.LongType, "(((long) HASH) & 0xFFFFFFFFL)"),
  /** key_hash >> 16: the key's place on the segment ring. */
  SEGMENT_HASH("ks_segment_hash", DataTypes.IntegerType, "(HASH >>> 16)"),
  /** key_hash &amp; 0xFFFF: PIP-486's hashB. */
  BUCKET_HASH("ks_bucket_hash", DataTypes.IntegerType, "(HASH & 0xFFFF)"),
  /** (key_hash &amp; 0x7FFFFFFF) % 65535 + 1: the classic Key_Shared hash (SPEC 1). */
  STICKY_KEY_HASH("ks_sticky_key_hash", DataTypes.IntegerType, "((HASH & 0x7FFFFFFF) % 65535 + 1)"),
  /** struct(segment_id bigint, bucket int) of the key under a layout. */
  ROUTE("ks_route", Router.ROUTE_TYPE, null);

  private final String sqlName;
  private final DataType dataType;
  private final String javaFormula;

  KeyFunction(String sqlName, DataType dataType, String javaFormula) {
    this.sqlName = sqlName;
    this.dataType = dataType;
    this.javaFormula = javaFormula;
  }

  public String sqlName() {
    return sqlName;
  }

  public DataType dataType() {
    return dataType;
  }

  /** One line on what the function gives, for DESCRIBE FUNCTION. */
  public String usage() {
    return routes()
        ? sqlName + "(key[, layout_json[, null_key]]) - struct(segment_id, bucket) of the key"
        : sqlName + "(key[, null_key]) - the key's " + name().toLowerCase(java.util.Locale.ROOT);
  }

  public boolean routes() {
    return this == ROUTE;
  }

  /** The function of that SQL name; IllegalArgumentException names the known ones. */
  public static KeyFunction named(String name) {
    for (KeyFunction f : values()) {
      if (f.sqlName.equals(name)) {
        return f;
      }
    }
    throw new KeysharedException(
        "no keyshared function " + name + "; there are " + Arrays.toString(sqlNames()));
  }

  static String[] sqlNames() {
    return Arrays.stream(values()).map(KeyFunction::sqlName).toArray(String[]::new);
  }

  /** The value for a key hash; {@code router} is used by ROUTE only. */
  public Object value(int hash, Router router) {
    switch (this) {
      case KEY_HASH:
        return ((long) hash) & 0xFFFFFFFFL;
      case SEGMENT_HASH:
        return hash >>> 16;
      case BUCKET_HASH:
        return hash & 0xFFFF;
      case STICKY_KEY_HASH:
        return (hash & 0x7FFFFFFF) % 65535 + 1;
      default:
        return router.route(hash);
    }
  }

  /** Java source computing the value from the int expression {@code hash}, except ROUTE. */
  String javaFormula(String hash) {
    return javaFormula.replace("HASH", hash);
  }
}

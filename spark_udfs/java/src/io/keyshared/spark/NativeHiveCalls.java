package io.keyshared.spark;

import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.runtime.AbstractPartialFunction;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Replaces every call of a keyshared Hive class ({@code io.keyshared.spark.hive}) with the
 * native function, in sessions that have the extension: Spark hands a Hive UDF its string
 * arguments as Java strings, decoded from their bytes with U+FFFD in place of bytes that are
 * not UTF-8, so the Hive class alone cannot hash such a key's bytes as they are (a
 * {@code CAST(binary AS STRING)}); the native function reads them where Spark holds them.
 *
 * <p>Spark's Hive classes are matched by name, so that the extension needs no Hive on the
 * classpath.
 */
public final class NativeHiveCalls extends Rule<LogicalPlan> {
  private static final String HIVE_GENERIC_UDF = "org.apache.spark.sql.hive.HiveGenericUDF";
  private static final String HIVE_PACKAGE = "io.keyshared.spark.hive.";
  private static final Map<String, KeyFunction> BY_CLASS =
      Map.of(
          "KsKeyHash", KeyFunction.KEY_HASH,
          "KsSegmentHash", KeyFunction.SEGMENT_HASH,
          "KsBucketHash", KeyFunction.BUCKET_HASH,
          "KsStickyKeyHash", KeyFunction.STICKY_KEY_HASH,
          "KsRoute", KeyFunction.ROUTE);
  private static final String PARTITION_CLASS = HIVE_PACKAGE + "KsPartition";
  private static final Functions.Defaults DEFAULTS = new Functions.Defaults(null, null);

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    return (LogicalPlan)
        plan.transformAllExpressions(
            new AbstractPartialFunction<Expression, Expression>() {
              @Override
              public boolean isDefinedAt(Expression e) {
                return function(e) != null || isPartitionCall(e);
              }

              @Override
              public Expression apply(Expression e) {
                if (!e.childrenResolved()) {
                  return e;
                }
                List<Expression> args = CollectionConverters.asJava(e.children());
                KeyFunction function = function(e);
                if (function != null) {
                  return DEFAULTS.build(function, args);
                }
                return isPartitionCall(e) ? PartitionExpression.build(args) : e;
              }
            });
  }

  /** The keyshared function a Hive call runs, or null for any other expression. */
  static KeyFunction function(Expression e) {
    String name = hiveClass(e);
    return name != null && name.startsWith(HIVE_PACKAGE)
        ? BY_CLASS.get(name.substring(HIVE_PACKAGE.length()))
        : null;
  }

  /** Whether {@code e} calls the Hive form of ks_partition. */
  static boolean isPartitionCall(Expression e) {
    return PARTITION_CLASS.equals(hiveClass(e));
  }

  /** The class a Hive call runs, or null for any other expression. */
  private static String hiveClass(Expression e) {
    if (!e.getClass().getName().equals(HIVE_GENERIC_UDF)) {
      return null;
    }
    try {
      Object wrapper = e.getClass().getMethod("funcWrapper").invoke(e);
      return (String) wrapper.getClass().getMethod("functionClassName").invoke(wrapper);
    } catch (ReflectiveOperationException | ClassCastException x) {
      return null;
    }
  }
}

package io.keyshared.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import scala.Function1;
import scala.Tuple3;
import scala.runtime.BoxedUnit;

/**
 * Adds the keyshared functions to every session of an application, for SQL-only use:
 * {@code --jars keyshared-spark.jar --conf spark.sql.extensions=io.keyshared.spark.KeysharedExtensions}.
 * ks_route without a layout argument routes under the conf {@value Functions#LAYOUT_CONF}.
 * Calls of the Hive classes run as the native functions ({@link NativeHiveCalls}).
 */
public final class KeysharedExtensions implements Function1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    Functions.Defaults defaults = new Functions.Defaults(null, null);
    for (KeyFunction function : KeyFunction.values()) {
      extensions.injectFunction(
          new Tuple3<>(
              new FunctionIdentifier(function.sqlName()),
              Functions.info(function),
              defaults.builder(function)));
    }
    extensions.injectFunction(
        new Tuple3<>(
            new FunctionIdentifier(PartitionExpression.NAME),
            Functions.partitionInfo(),
            Functions.PARTITION_BUILDER));
    extensions.injectResolutionRule(session -> new NativeHiveCalls());
    return BoxedUnit.UNIT;
  }
}

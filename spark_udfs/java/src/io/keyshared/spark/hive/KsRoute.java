package io.keyshared.spark.hive;

import io.keyshared.spark.KeyFunction;

/** The Hive form of {@link KeyFunction#ROUTE}. */
public final class KsRoute extends KeyUDF {
  public KsRoute() {
    super(KeyFunction.ROUTE);
  }
}

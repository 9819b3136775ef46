package io.keyshared.spark.hive;

import io.keyshared.spark.KeyFunction;

/** The Hive form of {@link KeyFunction#KEY_HASH}. */
public final class KsKeyHash extends KeyUDF {
  public KsKeyHash() {
    super(KeyFunction.KEY_HASH);
  }
}

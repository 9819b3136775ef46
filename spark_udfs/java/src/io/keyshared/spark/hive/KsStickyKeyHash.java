package io.keyshared.spark.hive;

import io.keyshared.spark.KeyFunction;

/** The Hive form of {@link KeyFunction#STICKY_KEY_HASH}. */
public final class KsStickyKeyHash extends KeyUDF {
  public KsStickyKeyHash() {
    super(KeyFunction.STICKY_KEY_HASH);
  }
}

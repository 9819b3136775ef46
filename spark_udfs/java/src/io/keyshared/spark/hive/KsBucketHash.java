package io.keyshared.spark.hive;

import io.keyshared.spark.KeyFunction;

/** The Hive form of {@link KeyFunction#BUCKET_HASH}. */
public final class KsBucketHash extends KeyUDF {
  public KsBucketHash() {
    super(KeyFunction.BUCKET_HASH);
  }
}

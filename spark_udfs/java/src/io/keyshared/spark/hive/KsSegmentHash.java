package io.keyshared.spark.hive;

import io.keyshared.spark.KeyFunction;

/** The Hive form of {@link KeyFunction#SEGMENT_HASH}. */
public final class KsSegmentHash extends KeyUDF {
  public KsSegmentHash() {
    super(KeyFunction.SEGMENT_HASH);
  }
}

"""keyshared on Apache Spark: native JVM functions (the jar at :func:`jar_path`) and Arrow UDFs
on the Rust kernels, and the bulk-bucketing job (``python -m spark_udfs.job``).

    from spark_udfs import register, with_routing

    register(spark, layout)  # SQL: ks_key_hash, ks_segment_hash, ks_bucket_hash,
                             #      ks_sticky_key_hash, ks_route, ks_partition
    with_routing(df, "key", layout).groupBy("segment_id", "bucket").count()
"""

from spark_udfs.jvm import (
    EXTENSIONS,
    HIVE_CLASSES,
    LAYOUT_CONF,
    Engine,
    choose_engine,
    jar_path,
    jvm_usable,
)
from spark_udfs.layouts import Layout, LayoutLike, routing_table
from spark_udfs.partitioning import PARTITION, partition_udf, with_partition
from spark_udfs.udfs import (
    BUCKET,
    BUCKET_HASH,
    KEY_HASH,
    SEGMENT_HASH,
    SEGMENT_ID,
    bucket_hash_udf,
    key_hash_udf,
    register,
    route_udf,
    segment_hash_udf,
    sticky_key_hash_udf,
    with_routing,
)

__all__ = [
    "BUCKET",
    "BUCKET_HASH",
    "EXTENSIONS",
    "HIVE_CLASSES",
    "KEY_HASH",
    "LAYOUT_CONF",
    "PARTITION",
    "SEGMENT_HASH",
    "SEGMENT_ID",
    "Engine",
    "Layout",
    "LayoutLike",
    "bucket_hash_udf",
    "choose_engine",
    "jar_path",
    "jvm_usable",
    "key_hash_udf",
    "partition_udf",
    "register",
    "route_udf",
    "routing_table",
    "segment_hash_udf",
    "sticky_key_hash_udf",
    "with_partition",
    "with_routing",
]

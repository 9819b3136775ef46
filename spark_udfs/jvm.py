"""keyshared's functions as native JVM functions in Spark: the jar built from ``spark_udfs/java``.

The functions are Catalyst expressions with code generation, so Spark hashes and routes keys
where it holds them, with no Python worker and no copy; the layout travels once per query,
inside the plan. A session gets them three ways:

- ``spark.jars`` (or ``--jars``) with ``spark.sql.extensions`` set to :data:`EXTENSIONS`, at
  session start: SQL-only use, ks_route routing under the conf :data:`LAYOUT_CONF`;
- :func:`register_functions` on a running session whose classpath holds the jar;
- ``CREATE FUNCTION ks_route AS 'io.keyshared.spark.hive.KsRoute' USING JAR '...'`` in a
  Hive-enabled session (the Hive classes are listed in :data:`HIVE_CLASSES`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import IllegalArgumentException
from pyspark.sql import Column, SparkSession

from keyshared import RoutingTable
from keyshared.errors import InvalidArgument

Engine = Literal["jvm", "arrow"]
ENGINES: tuple[Engine, ...] = ("jvm", "arrow")

#: The session extension that adds the functions to every session of an application.
EXTENSIONS = "io.keyshared.spark.KeysharedExtensions"
#: The Spark conf holding the layout JSON ks_route routes under without a layout argument.
LAYOUT_CONF = "spark.keyshared.layout"
#: The Spark conf naming the release ks_route routes as where the layout names none
#: (``"master"`` when unset, or ``"5.0.0-M1"``).
VERSION_CONF = "spark.keyshared.pulsarVersion"
#: The Hive GenericUDF class of each function, for CREATE FUNCTION ... USING JAR.
HIVE_CLASSES = {
    "ks_key_hash": "io.keyshared.spark.hive.KsKeyHash",
    "ks_segment_hash": "io.keyshared.spark.hive.KsSegmentHash",
    "ks_bucket_hash": "io.keyshared.spark.hive.KsBucketHash",
    "ks_sticky_key_hash": "io.keyshared.spark.hive.KsStickyKeyHash",
    "ks_route": "io.keyshared.spark.hive.KsRoute",
    "ks_partition": "io.keyshared.spark.hive.KsPartition",
}
_FUNCTIONS_CLASS = "io.keyshared.spark.Functions"
#: The jar's refusal of an argument (an IllegalArgumentException).
_JAVA_REFUSAL = "io.keyshared.spark.KeysharedException"


def jar_path() -> Path:
    """The jar of the JVM functions: what to pass to ``--jars`` or ``spark.jars``.

    Raises FileNotFoundError when it was not built (``scripts/setup.sh`` builds it; wheels carry
    it).
    """
    path = Path(__file__).resolve().parent / "jars" / "keyshared-spark.jar"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run scripts/setup.sh to build it")
    return path


def layout_json(table: RoutingTable) -> str:
    """The layout JSON the JVM functions read: the active segments of ``table`` and the
    release it routes as."""
    segments = [
        {"segment_id": i, "hash_range": r.to_hex(), "bucket_splits": splits}
        for i, r, splits in table.segments
    ]
    layout = {"pulsar_version": table.pulsar_version, "segments": segments}
    return json.dumps(layout, separators=(",", ":"))


def jvm_usable(spark: SparkSession) -> bool:
    """Whether ``spark``'s driver can load the JVM functions (its classpath holds the jar)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(_FUNCTIONS_CLASS))


def choose_engine(spark: SparkSession, engine: str | None) -> Engine:
    """``engine``, checked; None picks the JVM functions when the session can load them, else
    the Arrow UDFs."""
    if engine is None:
        return "jvm" if jvm_usable(spark) else "arrow"
    if engine not in ENGINES:
        raise InvalidArgument(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "jvm" and not jvm_usable(spark):
        raise InvalidArgument(
            "engine='jvm' needs the keyshared jar on the session's classpath: start the session "
            "with spark.jars (or --jars) set to spark_udfs.jar_path(), as "
            "spark_udfs.session.get_session does"
        )
    return engine


def library_error(e: Exception) -> InvalidArgument | None:
    """The jar's refusal of an argument (a Java KeysharedException, ``e`` itself or one of its
    causes) as the :class:`~keyshared.errors.InvalidArgument` the library raises for it, with
    the Java message; None for any other failure."""
    # PySpark keeps the Java exception of an IllegalArgumentException it converted as _origin;
    # py4j keeps it as java_exception.
    java = getattr(e, "_origin", None) or getattr(e, "java_exception", None)
    while java is not None:
        if str(java.getClass().getName()) == _JAVA_REFUSAL:
            return InvalidArgument(str(java.getMessage()))
        java = java.getCause()
    return None


@contextmanager
def library_errors() -> Iterator[None]:
    """Raises the jar's refusals inside the block as keyshared's own InvalidArgument, so that
    both engines refuse an argument with the same class; other failures pass unchanged."""
    try:
        yield
    except (IllegalArgumentException, Py4JJavaError) as e:
        error = library_error(e)
        if error is None:
            raise
        raise error from None


def _functions(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return getattr(jvm, _FUNCTIONS_CLASS)


def register_functions(
    spark: SparkSession, table: RoutingTable | None, null_key: bytes | None
) -> None:
    """Registers every JVM function in ``spark`` (replacing functions of the same names), with
    ks_route routing under ``table`` (None: the conf's layout, else one segment of 4 buckets)."""
    layout = None if table is None else layout_json(table)
    with library_errors():
        _functions(spark).register(spark._jsparkSession, layout, null_key)


def drop_extension_functions(spark: SparkSession) -> None:
    """Removes the functions :data:`EXTENSIONS` added from ``spark``, so that SQL resolves
    temporary functions of the same names (built-in functions resolve first)."""
    _functions(spark).dropExtensionFunctions(spark._jsparkSession)


def column(
    spark: SparkSession,
    function: str,
    key: Column,
    table: RoutingTable | None,
    null_key: bytes | None,
) -> Column:
    """The column ``function(key)`` as a native expression (``table`` for ks_route only)."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    layout = None if table is None else layout_json(table)
    with library_errors():
        jc = _functions(spark).column(function, key._jc, layout, null_key)
    return ClassicColumn(jc)


def key_type_check(spark: SparkSession, function: str, key: Column) -> Column:
    """The JVM function ``function(key)``, made only for Spark to check the key's type when
    the query is analysed (``spark_udfs.udfs`` folds it away unevaluated): it refuses a key
    neither string nor binary with the JVM functions' message."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    with library_errors():
        jc = _functions(spark).keyTypeCheck(function, key._jc)
    return ClassicColumn(jc)


def check_key_types(spark: SparkSession, function: str) -> None:
    """Makes ``spark``'s function ``function`` (an Arrow-engine SQL function of a key) refuse a
    key neither string nor binary when the query is analysed, with the JVM functions'
    message, before anything else sees it."""
    with library_errors():
        _functions(spark).checkKeyTypes(spark._jsparkSession, function)


def partition_column(
    spark: SparkSession, key: Column, num_partitions: int, partitioner: str
) -> Column:
    """The column ``ks_partition(key, num_partitions, partitioner)`` as a native expression."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    with library_errors():
        jc = _functions(spark).partitionColumn(key._jc, num_partitions, partitioner)
    return ClassicColumn(jc)

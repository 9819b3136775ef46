"""Arrow UDFs on the keyshared kernels: key, segment, bucket and sticky key hashes, and layout
routing; and the choice between them and the JVM functions (``spark_udfs.jvm``) for
:func:`register` and :func:`with_routing`.

Each UDF takes a string or binary column and works batch by batch on the Arrow arrays Spark
hands the Python worker: the kernel reads them without copying and its NumPy result goes back
as an Arrow array, with no pandas and no per-row Python in between. Executors already run one
task per core, so the kernels run single-threaded there.

A null key hashes as ``null_key`` when one is given (checked when a UDF is made, on the
driver). Without one, the UDFs themselves give a null for a null key (from the key column's
null bitmap), and the SQL functions :func:`register` makes and :func:`with_routing` fail on a
null key that reaches them, as the JVM functions do. The UDFs cannot fail instead: Spark
evaluates a Python UDF over whole batches, rows that a ``CASE WHEN k IS NULL ...`` or ``IF``
around it leaves out included, so a null there is no error; the SQL functions raise where the
row is actually evaluated, on the UDF's null result (which only a null key gives).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from keyshared import RoutingTable, TopicLayout, key_hashes, split_hashes
from keyshared.errors import ArgumentTypeError, InvalidArgument, KeysharedError
from keyshared.routing import sticky_key_hashes
from keyshared.versions import SCALABLE_TOPICS
from spark_udfs import jvm, partitioning
from spark_udfs.layouts import Layout, routing_table, routing_table_from_json

if TYPE_CHECKING:
    # Only pyspark's stubs define it.
    from pyspark.sql._typing import UserDefinedFunctionLike

NullKey = str | bytes | None
ArrowIterFunction = Callable[[Iterator[pa.Array]], Iterator[pa.Array]]

SEGMENT_ID = "segment_id"
BUCKET = "bucket"
KEY_HASH = "key_hash"
SEGMENT_HASH = "segment_hash"
BUCKET_HASH = "bucket_hash"

# Spark has no unsigned types: the 32-bit key hash widens to bigint, 16-bit halves to int.
# Types are objects, not DDL strings, so that UDFs can be made before a session exists.
_FIELD_TYPES: dict[str, DataType] = {
    SEGMENT_ID: LongType(),
    BUCKET: IntegerType(),
    KEY_HASH: LongType(),
    SEGMENT_HASH: IntegerType(),
    BUCKET_HASH: IntegerType(),
}
ROUTE_FIELDS = (SEGMENT_ID, BUCKET)
HASH_FIELDS = (KEY_HASH, SEGMENT_HASH, BUCKET_HASH)

# The layout ks_route uses when register() is given none: one segment over the whole ring with
# the default bucket budget of 4.
DEFAULT_LAYOUT = TopicLayout.initial(1)


def _arrow_iter_udf(func: ArrowIterFunction, return_type: DataType) -> UserDefinedFunctionLike:
    """An iterator Arrow UDF, its kind inferred from ``func``'s type hints."""
    # pyspark's stubs only type the functionType= form, which it deprecates for type hints.
    return arrow_udf(func, return_type)  # type: ignore[call-overload, no-any-return]


def key_type_error(function: str, type_name: str) -> str:
    """What ``function`` refuses a key of type ``type_name`` (neither string nor binary) with,
    when the query is built: the JVM functions' words (``KeysharedException.keyType``)."""
    return (
        f"{function} takes a string or binary key, got {type_name}: cast the key to string or "
        "binary first, as a producer sending it as a string or bytes key would"
    )


def _key_type_check(function: str, column: Column) -> Column:
    """A column over ``column`` that Spark type-checks when the query is analysed and the
    optimizer then removes, unevaluated: where the session's driver can load the keyshared jar,
    the JVM function ``function`` itself, which refuses a key neither string nor binary with
    :func:`key_type_error`'s message; else ``crc32``, which refuses it in Spark's words
    (``... requires the "BINARY" type, however "k" has the type "INT"``) and takes a string as
    its UTF-8 bytes, as the UDFs do."""
    from pyspark.sql.classic.column import Column as ClassicColumn

    if isinstance(column, ClassicColumn):
        spark = SparkSession.getActiveSession()
        if spark is not None and jvm.jvm_usable(spark):
            return jvm.key_type_check(spark, function, column)
    return F.crc32(column)


def _key_udf(udf: UserDefinedFunctionLike) -> UserDefinedFunctionLike:
    """``udf`` (an Arrow UDF of one key) whose key Spark checks when the query is analysed:
    a column that is neither string nor binary (an int, a bigint, a date) is refused there,
    on the driver, naming the function and its type (:func:`_key_type_check`), where the UDF
    would fail in an executor. The check's branch folds away once analysis has passed, so it
    costs nothing per row. The result stays a UDF (``spark.udf.register`` takes it)."""

    @functools.wraps(udf)
    def on_key(key: str | Column) -> Column:
        column = F.col(key) if isinstance(key, str) else key
        # `false AND ...` folds to false, and the branch with it, once analysis has passed.
        check = _key_type_check(on_key.__name__, column)
        checked = F.when(F.lit(False) & check.isNull(), F.lit(None))
        value = udf(checked.otherwise(column))
        # The name the UDF would give the column without the check (wraps copied the
        # UDF's name), for a column given by name.
        return value.alias(f"{on_key.__name__}({key})") if isinstance(key, str) else value

    return on_key  # type: ignore[return-value]


def _struct_type(fields: tuple[str, ...]) -> StructType:
    return StructType([StructField(name, _FIELD_TYPES[name]) for name in fields])


def null_key_bytes(null_key: NullKey) -> bytes | None:
    """``null_key`` as the bytes a null key hashes as (str as UTF-8); TypeError or ValueError
    for anything else, so that a bad one fails on the driver, not in an executor."""
    if null_key is None or isinstance(null_key, bytes):
        return null_key
    if not isinstance(null_key, str):
        raise ArgumentTypeError(
            f"null_key must be str, bytes or None, got {type(null_key).__name__}"
        )
    try:
        return null_key.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(
            f"null_key is not valid Unicode text: {e.reason} at {e.start}"
        ) from None


def _nulls(keys: pa.Array, null_key: bytes | None) -> tuple[bytes | None, pa.Array | None]:
    """The null key to hash ``keys`` with, and the rows whose result is null (None: none
    are): without ``null_key``, null keys give nulls (hashed as b"" only to keep the batch
    whole)."""
    if null_key is not None or keys.null_count == 0:
        return null_key, None
    return b"", keys.is_null()


def _column(values: npt.NDArray[Any], nulls: pa.Array | None) -> pa.Array:
    return pa.array(values, mask=None if nulls is None else nulls.to_numpy(zero_copy_only=False))


HashKernel = Callable[[pa.Array, bytes | None], npt.NDArray[Any]]


def _key_hash(keys: pa.Array, null_key: bytes | None) -> npt.NDArray[Any]:
    return key_hashes(keys, null_key=null_key, threads=1).astype(np.int64)


def _segment_hash(keys: pa.Array, null_key: bytes | None) -> npt.NDArray[Any]:
    return split_hashes(keys, null_key=null_key, threads=1)[0].astype(np.int32)


def _bucket_hash(keys: pa.Array, null_key: bytes | None) -> npt.NDArray[Any]:
    return split_hashes(keys, null_key=null_key, threads=1)[1].astype(np.int32)


def _sticky_key_hash(keys: pa.Array, null_key: bytes | None) -> npt.NDArray[Any]:
    return sticky_key_hashes(keys, null_key=null_key, threads=1).astype(np.int32)


def _hash_udf(
    name: str, kernel: HashKernel, return_type: DataType, null_key: NullKey
) -> UserDefinedFunctionLike:
    """The Arrow UDF ``name(key)`` of ``kernel`` (a key's hash, batch by batch), with its key
    type checked at analysis (:func:`_key_udf`) and ``null_key`` checked here."""
    nk_bytes = null_key_bytes(null_key)

    def hash_keys(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        for keys in batches:
            nk, nulls = _nulls(keys, nk_bytes)
            yield _column(kernel(keys, nk), nulls)

    # The UDF's name, in plans, column names and the key check's message.
    hash_keys.__name__ = hash_keys.__qualname__ = name
    return _key_udf(_arrow_iter_udf(hash_keys, return_type))


def key_hash_udf(null_key: NullKey = None) -> UserDefinedFunctionLike:
    """``ks_key_hash(key)``: the pinned 32-bit key hash, as a bigint in ``[0, 2**32)``."""
    return _hash_udf("ks_key_hash", _key_hash, LongType(), null_key)


def segment_hash_udf(null_key: NullKey = None) -> UserDefinedFunctionLike:
    """``ks_segment_hash(key)``: ``key_hash >> 16``, the key's place on the segment ring."""
    return _hash_udf("ks_segment_hash", _segment_hash, IntegerType(), null_key)


def bucket_hash_udf(null_key: NullKey = None) -> UserDefinedFunctionLike:
    """``ks_bucket_hash(key)``: ``key_hash & 0xFFFF``, PIP-486's hashB."""
    return _hash_udf("ks_bucket_hash", _bucket_hash, IntegerType(), null_key)


def sticky_key_hash_udf(null_key: NullKey = None) -> UserDefinedFunctionLike:
    """``ks_sticky_key_hash(key)``: ``(key_hash & 0x7FFFFFFF) % 65535 + 1``, the classic
    Key_Shared hash of Pulsar's default selector, an int in ``[1, 65535]``."""
    return _hash_udf("ks_sticky_key_hash", _sticky_key_hash, IntegerType(), null_key)


def route_udf(
    layout: Layout, null_key: NullKey = None, *, pulsar_version: str | None = None
) -> UserDefinedFunctionLike:
    """``ks_route(key)``: a struct of the key's ``segment_id`` and ``bucket`` under ``layout``,
    routed as ``pulsar_version`` does (``"master"`` or ``"5.0.0-M1"``; None: a
    ``RoutingTable``'s own release, else master).

    ``layout`` is a ``TopicLayout``, a ``RoutingTable`` or ``(segment_id, HashRange, splits)``
    triples; it is validated here, on the driver, as are ``null_key`` and ``pulsar_version``,
    and the key column's type (string or binary) when the query is analysed (as for the hash
    UDFs: :func:`_key_type_check`).
    """
    return _key_udf(_route_udf(routing_table(layout, pulsar_version), null_key_bytes(null_key)))


def _route_udf(
    table: RoutingTable, null_key: bytes | None, follow_conf: bool = False
) -> UserDefinedFunctionLike:
    """ks_route's Arrow UDF under ``table``; with ``follow_conf``, under the layout and
    release the confs hold at each query instead (``table`` while they are as they were)."""

    def ks_route(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        routes = _query_conf_table() if follow_conf else table
        for keys in batches:
            nk, nulls = _nulls(keys, null_key)
            segment_ids, buckets = routes.route_keys(keys, null_key=nk, threads=1)
            yield pa.StructArray.from_arrays(
                [pa.array(segment_ids), pa.array(buckets)], names=list(ROUTE_FIELDS), mask=nulls
            )

    return _arrow_iter_udf(ks_route, _struct_type(ROUTE_FIELDS))


#: The routing tables of the conf texts a worker has seen: parsed once per text.
_CONF_TABLES: dict[tuple[str | None, str | None], RoutingTable] = {}


def _query_conf_table() -> RoutingTable:
    """In a Python worker, the routing table of the confs of the query it runs: Spark hands
    each task the session's confs as local properties. Malformed confs are an error naming
    the conf, as on the driver."""
    from pyspark import TaskContext

    context = TaskContext.get()
    texts = (
        (None, None)
        if context is None
        else (context.getLocalProperty(jvm.LAYOUT_CONF), context.getLocalProperty(jvm.VERSION_CONF))
    )
    if texts not in _CONF_TABLES:
        layout, version = (t if t is not None and t.strip() else None for t in texts)
        release = SCALABLE_TOPICS.default if version is None else version
        release = SCALABLE_TOPICS.check(release, jvm.VERSION_CONF)
        if layout is None:
            _CONF_TABLES[texts] = routing_table(DEFAULT_LAYOUT, release)
        else:
            try:
                _CONF_TABLES[texts] = routing_table_from_json(layout, release)
            except KeysharedError as e:
                raise type(e)(
                    f"{jvm.LAYOUT_CONF}: {e}", kind=e.kind, argument=jvm.LAYOUT_CONF
                ) from None
    return _CONF_TABLES[texts]


def _route_and_hash_udf(table: RoutingTable, null_key: bytes | None) -> UserDefinedFunctionLike:
    """Routing plus all three hashes, from one pass of the kernels."""

    def ks_route_and_hash(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        for keys in batches:
            nk, nulls = _nulls(keys, null_key)
            # One hashing pass gives the route, the hash and its halves.
            segment_ids, buckets, hashes, segment_hashes, bucket_hashes = table.route_keys(
                keys, null_key=nk, threads=1, with_hashes=True
            )
            columns = [
                segment_ids,
                buckets,
                hashes.astype(np.int64),
                segment_hashes.astype(np.int32),
                bucket_hashes.astype(np.int32),
            ]
            yield pa.StructArray.from_arrays(
                [pa.array(c) for c in columns], names=[*ROUTE_FIELDS, *HASH_FIELDS], mask=nulls
            )

    return _arrow_iter_udf(ks_route_and_hash, _struct_type((*ROUTE_FIELDS, *HASH_FIELDS)))


def null_key_error(function: str) -> str:
    """What a null key that reaches ``function`` fails with (the JVM functions' words)."""
    return (
        f"{function}: a key is null; pass null_key= to hash it as those bytes, or filter null "
        "keys out first"
    )


def refuse_null_keys(function: str, value: Column, null_key: bytes | None) -> Column:
    """``value`` (an Arrow UDF of a key), failing a row whose key is null when no
    ``null_key`` is set. Spark evaluates the UDF over the whole batch whatever the query
    around it leaves out, so the UDF gives a null there and this check, evaluated where Spark
    evaluates the row, raises. It reads the UDF's result, null only for a null key, rather
    than the key: a key read twice, here and by the UDF, is computed twice, and a SQL
    function's argument read twice (its cast to binary) stays in a projection of its own
    before the UDF, one more copy of every key."""
    if null_key is not None:
        return value
    return F.coalesce(value, F.raise_error(F.lit(null_key_error(function))))


def _key_column(df: DataFrame, key: str | Column) -> Column:
    """``key`` as a column of ``df``; TypeError unless it holds strings or binary."""
    column = F.col(key) if isinstance(key, str) else key
    kind = df.select(column).schema.fields[0].dataType
    if not isinstance(kind, StringType | BinaryType):
        name = key if isinstance(key, str) else str(column)
        raise ArgumentTypeError(
            key_type_error("with_routing", f"{kind.simpleString()} (the key column {name!r})")
        )
    return column


def with_routing(
    df: DataFrame,
    key: str | Column,
    layout: Layout,
    *,
    null_key: NullKey = None,
    hashes: bool = False,
    engine: str | None = None,
    pulsar_version: str | None = None,
) -> DataFrame:
    """``df`` with ``segment_id`` and ``bucket`` columns routing ``key`` under ``layout``, and
    with ``hashes``, also ``key_hash``, ``segment_hash`` and ``bucket_hash`` (the two halves
    of the key hash, high and low, whatever the release).

    ``pulsar_version`` is the release to route as, as for :func:`route_udf`.

    ``engine`` is ``"jvm"`` (native Spark expressions; the default when the session can load
    the keyshared jar) or ``"arrow"`` (an Arrow UDF: the keys pass through Python once, however
    many columns are added). Columns of the same names are replaced. The layout, ``null_key``
    and the key column's type (string or binary) are checked here, on the driver.
    """
    table = routing_table(layout, pulsar_version)
    nk = null_key_bytes(null_key)
    column = _key_column(df, key)
    if jvm.choose_engine(df.sparkSession, engine) == "jvm":
        with jvm.library_errors():
            return df.withColumns(_jvm_columns(df.sparkSession, column, table, nk, hashes))
    fields: tuple[str, ...]
    if hashes:
        udf, fields = _route_and_hash_udf(table, nk), (*ROUTE_FIELDS, *HASH_FIELDS)
    else:
        udf, fields = _route_udf(table, nk), ROUTE_FIELDS
    packed = "__ks_routing"
    routed = df.withColumn(packed, refuse_null_keys("with_routing", udf(column), nk))
    return routed.withColumns({name: F.col(packed)[name] for name in fields}).drop(packed)


def _jvm_columns(
    spark: SparkSession,
    key: Column,
    table: RoutingTable,
    null_key: bytes | None,
    hashes: bool,
) -> dict[str, Column]:
    # Spark computes the route once per row for both fields (common subexpressions).
    route = jvm.column(spark, "ks_route", key, table, null_key)
    columns = {name: route[name] for name in ROUTE_FIELDS}
    if hashes:
        for name in HASH_FIELDS:
            columns[name] = jvm.column(spark, f"ks_{name}", key, None, null_key)
    return columns


def _first(*tables: RoutingTable | None) -> RoutingTable:
    return next(t for t in tables if t is not None)


def conf_version(spark: SparkSession) -> str:
    """The release of ``spark``'s :data:`~spark_udfs.jvm.VERSION_CONF`, checked (ValueError
    naming the conf), or ``"master"`` when it is not set."""
    text = spark.conf.get(jvm.VERSION_CONF, None)
    if text is None or not text.strip():
        return SCALABLE_TOPICS.default
    return SCALABLE_TOPICS.check(text, jvm.VERSION_CONF)


def conf_layout(spark: SparkSession, pulsar_version: str | None = None) -> RoutingTable | None:
    """The routing table of ``spark``'s :data:`~spark_udfs.jvm.LAYOUT_CONF`, checked by the
    library (ValueError or TypeError naming the conf), or None when it is not set. It routes
    as the layout's ``pulsar_version``, else ``pulsar_version``, else the conf
    :data:`~spark_udfs.jvm.VERSION_CONF`."""
    version = conf_version(spark) if pulsar_version is None else pulsar_version
    text = spark.conf.get(jvm.LAYOUT_CONF, None)
    if text is None or not text.strip():
        return None
    try:
        return routing_table_from_json(text, version)
    except KeysharedError as e:
        raise type(e)(f"{jvm.LAYOUT_CONF}: {e}", kind=e.kind, argument=jvm.LAYOUT_CONF) from None
    except (TypeError, ValueError) as e:
        wrapper = ArgumentTypeError if isinstance(e, TypeError) else InvalidArgument
        raise wrapper(f"{jvm.LAYOUT_CONF}: {e}", argument=jvm.LAYOUT_CONF) from None


def register(
    spark: SparkSession,
    layout: Layout | None = None,
    *,
    null_key: NullKey = None,
    engine: str | None = None,
    pulsar_version: str | None = None,
) -> jvm.Engine:
    """Registers ``ks_key_hash``, ``ks_segment_hash``, ``ks_bucket_hash``,
    ``ks_sticky_key_hash``, ``ks_route`` and ``ks_partition`` (``spark_udfs.partitioning``)
    for SQL in ``spark``; returns the engine used.

    ``ks_route`` routes under ``layout``; without one, under the layout JSON the conf
    :data:`~spark_udfs.jvm.LAYOUT_CONF` holds, else one segment over the whole ring with 4
    buckets. It routes as ``pulsar_version`` (``"master"`` or ``"5.0.0-M1"``); without one, as
    the layout JSON's own ``pulsar_version``, else the conf :data:`~spark_udfs.jvm.VERSION_CONF`,
    else master. Given neither ``layout`` nor ``pulsar_version``, both engines follow the
    confs at each query (a ``SET spark.keyshared.layout=...`` after ``register`` moves them
    both, and a malformed one fails the query naming the conf); given either, ``register``
    fixes the layout and the release here, whatever the confs say later. The confs are
    checked here too, so that a malformed one fails now rather than at the first query.
    ``engine`` is ``"jvm"`` (native functions; the default when the session can load the
    keyshared jar; ks_route then also takes a layout JSON as a second argument) or
    ``"arrow"`` (Arrow UDFs).
    The layout, the release, the confs and ``null_key`` are checked here, by the library.
    """
    table = None if layout is None else routing_table(layout, pulsar_version)
    nk = null_key_bytes(null_key)
    chosen = jvm.choose_engine(spark, engine)
    conf = None if table is not None else conf_layout(spark, pulsar_version)
    default = routing_table(DEFAULT_LAYOUT, pulsar_version or conf_version(spark))
    routes = _first(table, conf, default)
    # Told nothing, the functions follow the confs of each query: the JVM's read them when
    # the query is built, the Arrow UDF from the task's properties (Spark hands each task
    # the session's confs), so the two route alike whatever is SET after register.
    follow = layout is None and pulsar_version is None
    if chosen == "jvm":
        jvm.register_functions(spark, None if follow else routes, nk)
        return chosen
    has_jar = jvm.jvm_usable(spark)
    if has_jar:
        jvm.drop_extension_functions(spark)
    functions = {
        "ks_key_hash": key_hash_udf(nk),
        "ks_segment_hash": segment_hash_udf(nk),
        "ks_bucket_hash": bucket_hash_udf(nk),
        "ks_sticky_key_hash": sticky_key_hash_udf(nk),
        "ks_route": _route_udf(routes, nk, follow_conf=follow),
    }
    for name, udf in functions.items():
        # The Arrow UDF itself takes any type and would fail in the worker on a key that is
        # not string or binary; the SQL function over it refuses one at analysis, as the JVM
        # functions do. A string key casts to its UTF-8 bytes, which is what it hashes as;
        # Spark also hands the worker a binary column faster than a string one, so a STRING
        # parameter, with no cast, would be the slower of the two.
        inner = f"{name}_arrow"
        spark.udf.register(inner, udf)
        # A SQL function cannot replace another kind of function of the same name.
        spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {name}")
        returns = udf.returnType.simpleString()
        body = f"{inner}(key)"
        if nk is None:
            # As refuse_null_keys: the check is evaluated row by row, the UDF batch by batch,
            # and it reads the UDF's null, not the key, so that the cast of a string key is
            # done as the UDF's input is gathered and not in a projection of its own.
            body = f"coalesce({body}, raise_error('{null_key_error(name)}'))"
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY FUNCTION {name}(key BINARY) RETURNS {returns} "
            f"RETURN {body}"
        )
        if has_jar:
            # The cast to the BINARY parameter would refuse another key in Spark's words
            # (cannot cast "INT" to "BINARY"), or without ANSI mode hash an integer's bytes:
            # where the driver has the keyshared jar, the key's type is checked first, with
            # the JVM function's message (key_type_error). Without it, that cast is the check.
            jvm.check_key_types(spark, name)
    partitioning.register_arrow(spark)
    return chosen

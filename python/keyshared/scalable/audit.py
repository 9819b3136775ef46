"""The migration audit: where the keys and the traffic of a partitioned topic go when it
moves, and which keys may lose their per-key order on the way.

The source is a topic of ``num_partitions`` partitions whose producers place keys with a
:class:`~keyshared.routing.partitioners.Partitioner` (Kafka's default, a librdkafka partitioner, a
Pulsar client's hashing scheme, ...). The target is either

* ``m`` partitions under the same partitioner (a partition-count change), or
* a keyshared :class:`~keyshared.scalable.layout.TopicLayout`, keys going to its active segments by
  the pinned key hash, as a scalable topic's producers route them.

The audit counts keys and traffic (``weights``: messages or bytes per key) per (source
partition, target column), each source row also as shares of the row. A key the source
partitioner gives no fixed partition (a null key; librdkafka's ``*_random`` partitioners'
empty or null key) has no per-key order to keep: it is counted apart, as *unkeyed*.

A key's order is *at risk* when, during the cut-over, its newer messages can be read before
its older ones. Precisely, for a keyed key:

* ``m`` partitions: its partition changes (``partition(key, m) != partition(key, n)``).
  Kafka consumers, and Pulsar's on a partitioned topic, read the new partition without
  waiting for the old one to drain, so the key's older messages race its newer ones.
* a layout holding the source's partitions as sealed legacy segments (Pulsar's migration,
  :func:`keyshared.scalable.migration.create_migrated_metadata`): a consumer gets a new segment only
  once every legacy parent has drained, so a key is safe wherever it lands, provided each
  of its messages went to one legacy partition. That fails while old and new producers
  share the not-yet-migrated topic: new producers place a key by the legacy segments'
  recorded hashing scheme (Pulsar's ``Murmur3_32Hash`` when none is recorded, as Pulsar's
  segment router does), the old ones by ``source``. At risk: the keys those two place in
  different partitions. None are when the recorded scheme is the source's.
* any other layout: nothing makes its segments wait for the source partitions, so every
  keyed key is at risk unless the consumers finish the source before reading the target.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Sized
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_int, check_integer, check_weights
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.routing.partitioners import Partitioner, partitions
from keyshared.routing.router import _legacy_scheme
from keyshared.scalable.layout import TopicLayout

#: How many at-risk keys an audit names by default (the heaviest).
DEFAULT_SAMPLE_SIZE = 20
#: The most partitions a source or target has: the partitioners' bound (a Java int).
MAX_PARTITIONS = 2**31 - 1
#: The most (source partition, target column) cells an audit holds. Its two matrices take 16
#: bytes a cell (keys as int64, traffic as float64), 256 MiB at this bound; beyond it an audit
#: is refused up front rather than asking NumPy for the memory (100,000 partitions to 100,000
#: would be 149 GiB).
MAX_CELLS = 2**24


#: The partitioners that hash an int key as an int (others take str/bytes keys only).
INT_PARTITIONERS = frozenset({Partitioner.ICEBERG_BUCKET, Partitioner.SPARK_BUCKET})


class Risk(enum.Enum):
    """Which rule decides the keys at risk (see the module's text)."""

    PARTITION_CHANGES = "partition changes"
    LEGACY_SCHEME_DIFFERS = "legacy routing scheme differs from the source's"
    NO_DRAIN = "no drain before the target"

    @property
    def description(self) -> str:
        return _RISK_TEXT[self]


_RISK_TEXT = {
    Risk.PARTITION_CHANGES: "keys whose partition changes: consumers read the new partition "
    "without waiting for the old one to drain",
    Risk.LEGACY_SCHEME_DIFFERS: "keys that new producers, routing by the legacy segments' "
    "scheme, place in another partition than the source's producers while both write: the "
    "target's segments wait for every legacy partition to drain, which keeps every other "
    "key's order",
    Risk.NO_DRAIN: "every keyed key: the target's segments do not wait for the source's "
    "partitions to drain (its layout holds no legacy segments)",
}


def check_partitioner(name: str, value: object) -> Partitioner:
    """``value`` as a :class:`Partitioner` (given as one, or by its value such as
    ``"kafka"``); a ValueError naming ``name`` and the choices otherwise."""
    if isinstance(value, Partitioner):
        return value
    if isinstance(value, str):
        try:
            return Partitioner(value)
        except ValueError:
            choices = ", ".join(p.value for p in Partitioner)
            raise InvalidArgument(
                f"{name} must be one of {choices}; got {value!r}", argument=name
            ) from None
    raise ArgumentTypeError(
        f"{name} must be a Partitioner or str, got {type(value).__name__}", argument=name
    )


@dataclass(frozen=True)
class MigrationPlan:
    """A checked (source, target) pair: what :func:`audit_migration` computes with, and what
    a distributed job ships to its workers to :meth:`place` keys batch by batch."""

    source: Partitioner
    num_partitions: int
    target: TopicLayout | int
    #: The partitioner new producers place keys by while old ones still write (migrated
    #: layouts only).
    legacy: Partitioner | None
    risk: Risk

    @classmethod
    def of(
        cls, source: Partitioner | str, num_partitions: int, target: TopicLayout | int
    ) -> MigrationPlan:
        """Checks every argument; ValueError or TypeError naming the first bad one."""
        partitioner = check_partitioner("source", source)
        n = check_integer("num_partitions", num_partitions, minimum=1, maximum=MAX_PARTITIONS)
        if isinstance(target, TopicLayout):
            legacy = _legacy_partitioner(target, n)
            risk = Risk.NO_DRAIN if legacy is None else Risk.LEGACY_SCHEME_DIFFERS
            plan = cls(partitioner, n, target, legacy, risk)
        elif isinstance(target, bool) or not hasattr(type(target), "__index__"):
            kind = type(target).__name__
            raise ArgumentTypeError(
                f"target must be a TopicLayout or an int, got {kind}", argument="target"
            )
        else:
            m = check_integer("target", target, minimum=1, maximum=MAX_PARTITIONS)
            plan = cls(partitioner, n, m, None, Risk.PARTITION_CHANGES)
        plan._check_size()
        return plan

    def _check_size(self) -> None:
        """ValueError when the audit's matrices would exceed :data:`MAX_CELLS`."""
        columns = self.target if isinstance(self.target, int) else len(self.target_ids)
        cells = self.num_partitions * columns
        if cells > MAX_CELLS:
            raise InvalidArgument(
                f"num_partitions x target columns = {self.num_partitions:,} x {columns:,} = "
                f"{cells:,} cells, beyond the audit's limit of {MAX_CELLS:,} (its matrices take "
                f"16 bytes a cell: {MAX_CELLS * 16 // 2**20} MiB at the limit)",
                argument="num_partitions",
            )

    @property
    def target_ids(self) -> tuple[int, ...]:
        """The target's columns: partitions ``0..m-1``, or active segment ids in range
        order."""
        if isinstance(self.target, TopicLayout):
            return tuple(s.segment_id for s in self.target.active_segments())
        return tuple(range(self.target))

    @property
    def target_labels(self) -> tuple[str, ...]:
        """Column names: partition numbers, or segment descriptors (``"0000-7fff-2"``)."""
        if isinstance(self.target, TopicLayout):
            return tuple(s.descriptor for s in self.target.active_segments())
        return tuple(str(p) for p in range(self.target))

    def place(
        self, keys: Any, *, threads: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Per key: its source partition and target column (both -1 for an unkeyed key) and
        whether its order is at risk. ``keys`` as :func:`keyshared.routing.partitioners.partitions`
        takes them (a list of str/bytes/None, of ints for Iceberg and Spark, or an Arrow
        array); a layout routes int keys as their decimal text. Vectorized. ``threads`` as
        :meth:`TopicLayout.route_keys` takes it."""
        source = partitions(keys, self.num_partitions, self.source)
        keyed = source >= 0
        if isinstance(self.target, TopicLayout):
            text = _as_text(keys)
            # Unkeyed keys are hashed as b"" only to keep the batch whole; the mask drops them.
            segment_ids, _ = self.target.route_keys(text, null_key=b"", threads=threads)
            column = _columns(np.asarray(self.target_ids, dtype=np.int64), segment_ids)
        else:
            column = partitions(keys, self.target, self.source)
        column = np.where(keyed, column, -1)
        if self.risk is Risk.PARTITION_CHANGES:
            at_risk = keyed & (column != source)
        elif self.legacy is not None:  # Risk.LEGACY_SCHEME_DIFFERS
            legacy = partitions(text, self.num_partitions, self.legacy)
            at_risk = keyed & (legacy != source)
        else:
            at_risk = keyed
        return source, column, at_risk


def _as_text(keys: Any) -> Any:
    """``keys`` with int keys as their decimal text: a layout routes a key by its bytes, and a
    producer moving int keys (an Iceberg or Spark source) to a topic sends them as string
    keys, as the Spark job routes them."""
    if isinstance(keys, np.ndarray):
        return [str(k) for k in keys.tolist()] if keys.dtype.kind in "iu" else keys
    if isinstance(keys, list | tuple):
        if any(_is_int(k) for k in keys):
            return [str(int(k)) if _is_int(k) else k for k in keys]
        return keys
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pragma: no cover - an Arrow batch means pyarrow, as a rule
        return keys
    if isinstance(keys, pa.Array | pa.ChunkedArray) and pa.types.is_integer(keys.type):
        return pc.cast(keys, pa.string())
    return keys


def _is_int(key: object) -> bool:
    return isinstance(key, int | np.integer) and not isinstance(key, bool)


def _legacy_partitioner(layout: TopicLayout, num_partitions: int) -> Partitioner | None:
    """The partitioner new producers use on the legacy segments of a migrated ``layout``
    (None: it has none). ValueError when the legacy segments do not fit the source."""
    if any(s.is_legacy for s in layout.active_segments()):
        raise InvalidArgument(
            "target: a layout with active legacy segments is a topic not yet migrated, not a "
            "migration target",
            argument="target",
        )
    legacy = [s for s in layout.segments.values() if s.is_legacy]
    if not legacy:
        return None
    if len(legacy) != num_partitions:
        raise InvalidArgument(
            f"target wraps {len(legacy)} legacy partition(s), but num_partitions is "
            f"{num_partitions}",
            argument="target",
        )
    return Partitioner(f"pulsar:{_legacy_scheme(legacy, 'target').value}")


def _columns(
    target_ids: npt.NDArray[np.int64], segment_ids: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Each segment id's column among ``target_ids`` (every id is one of them)."""
    order = np.argsort(target_ids)
    return order[np.searchsorted(target_ids[order], segment_ids)].astype(np.int64)


@dataclass(frozen=True)
class MigrationAudit:
    """Keys and traffic per (source partition, target column) and the keys at risk.

    ``keys`` and ``traffic`` are ``num_partitions x len(target_ids)`` matrices (row: source
    partition, column: target partition or segment, as ``target_ids`` and ``target_labels``
    order them); traffic is in the unit of the weights (messages or bytes; 1 per key without
    weights). Unkeyed keys are in neither matrix. ``at_risk_*`` follow ``risk``;
    ``at_risk_sample`` names the heaviest at-risk keys (heaviest first; binary keys that are
    not UTF-8 as ``0x`` hex)."""

    source: str
    num_partitions: int
    target_kind: str
    target_ids: tuple[int, ...]
    target_labels: tuple[str, ...]
    legacy_partitioner: str | None
    risk: str
    risk_description: str
    keys: npt.NDArray[np.int64]
    traffic: npt.NDArray[np.float64]
    unkeyed_keys: int
    unkeyed_traffic: float
    at_risk_keys: int
    at_risk_traffic: float
    at_risk_keys_by_partition: npt.NDArray[np.int64]
    at_risk_traffic_by_partition: npt.NDArray[np.float64]
    at_risk_sample: tuple[str, ...]

    @classmethod
    def from_cells(
        cls,
        plan: MigrationPlan,
        source: npt.ArrayLike,
        column: npt.ArrayLike,
        keys: npt.ArrayLike,
        traffic: npt.ArrayLike,
        risk_keys: npt.ArrayLike,
        risk_traffic: npt.ArrayLike,
        sample: tuple[str, ...] = (),
    ) -> MigrationAudit:
        """The audit of aggregated rows: per row a source partition and target column (-1:
        unkeyed), its keys and traffic and the at-risk part of both. Rows may repeat a cell;
        one row per key is the per-key case."""
        src = np.asarray(source, dtype=np.int64)
        col = np.asarray(column, dtype=np.int64)
        n, t = plan.num_partitions, len(plan.target_ids)
        keyed = src >= 0
        cell = src[keyed] * t + col[keyed]

        def total(values: npt.ArrayLike, rows: npt.NDArray[Any], size: int) -> Any:
            w = np.asarray(values, dtype=np.float64)[keyed]
            return np.bincount(rows, weights=w, minlength=size)

        key_counts = np.asarray(keys, dtype=np.float64)
        weights = np.asarray(traffic, dtype=np.float64)
        return cls(
            source=plan.source.value,
            num_partitions=n,
            target_kind="layout" if isinstance(plan.target, TopicLayout) else "partitions",
            target_ids=plan.target_ids,
            target_labels=plan.target_labels,
            legacy_partitioner=None if plan.legacy is None else plan.legacy.value,
            risk=plan.risk.value,
            risk_description=plan.risk.description,
            keys=total(key_counts, cell, n * t).reshape(n, t).astype(np.int64),
            traffic=total(weights, cell, n * t).reshape(n, t),
            unkeyed_keys=int(key_counts[~keyed].sum()),
            unkeyed_traffic=float(weights[~keyed].sum()),
            at_risk_keys=int(np.asarray(risk_keys, dtype=np.float64).sum()),
            at_risk_traffic=float(np.asarray(risk_traffic, dtype=np.float64).sum()),
            at_risk_keys_by_partition=total(risk_keys, src[keyed], n).astype(np.int64),
            at_risk_traffic_by_partition=total(risk_traffic, src[keyed], n),
            at_risk_sample=tuple(sample),
        )

    @property
    def key_shares(self) -> npt.NDArray[np.float64]:
        """Each source partition's keys as shares of its row (a row without keys: zeros)."""
        return _row_shares(self.keys)

    @property
    def traffic_shares(self) -> npt.NDArray[np.float64]:
        """Each source partition's traffic as shares of its row (a row without any: zeros)."""
        return _row_shares(self.traffic)

    @property
    def total_keys(self) -> int:
        """Every key audited, unkeyed ones included."""
        return int(self.keys.sum()) + self.unkeyed_keys

    @property
    def total_traffic(self) -> float:
        return float(self.traffic.sum()) + self.unkeyed_traffic

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the matrices as lists of rows, the shares with them. ``risk``
        is the rule's name where some key's order is at risk, else None (``risk_rule`` is the
        rule that decided it either way)."""
        return {
            "source": self.source,
            "num_partitions": self.num_partitions,
            "target_kind": self.target_kind,
            "target_ids": list(self.target_ids),
            "target_labels": list(self.target_labels),
            "legacy_partitioner": self.legacy_partitioner,
            # A risk named beside zero keys at risk reads as one: say none.
            "risk": self.risk if self.at_risk_keys else None,
            "risk_rule": self.risk,
            "risk_description": self.risk_description,
            "total_keys": self.total_keys,
            "total_traffic": self.total_traffic,
            "keys": self.keys.tolist(),
            "traffic": self.traffic.tolist(),
            "key_shares": self.key_shares.tolist(),
            "traffic_shares": self.traffic_shares.tolist(),
            "unkeyed_keys": self.unkeyed_keys,
            "unkeyed_traffic": self.unkeyed_traffic,
            "at_risk_keys": self.at_risk_keys,
            "at_risk_traffic": self.at_risk_traffic,
            "at_risk_keys_by_partition": self.at_risk_keys_by_partition.tolist(),
            "at_risk_traffic_by_partition": self.at_risk_traffic_by_partition.tolist(),
            "at_risk_sample": list(self.at_risk_sample),
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


def _row_shares(matrix: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    totals = matrix.sum(axis=1, keepdims=True).astype(np.float64)
    shares: npt.NDArray[np.float64] = np.divide(
        matrix, totals, out=np.zeros(matrix.shape), where=totals > 0
    )
    return shares


def display_key(key: str | bytes | int | None) -> str:
    """A key as text: binary keys that are valid UTF-8 as that text, others as ``0x`` hex;
    an int key (Iceberg, Spark) in decimal; the null key as ``"(null)"``."""
    if key is None:
        return "(null)"
    if isinstance(key, str):
        return key
    if isinstance(key, int | np.integer):
        # Before bytes(): bytes(5) would be five NULs.
        return str(int(key))
    try:
        return bytes(key).decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + bytes(key).hex()


def audit_migration(
    keys: Any,
    source: Partitioner | str,
    num_partitions: int,
    target: TopicLayout | int,
    *,
    weights: npt.ArrayLike | None = None,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
) -> MigrationAudit:
    """The audit of moving ``keys`` from ``num_partitions`` partitions placed by ``source``
    to ``target`` (a layout, or a partition count under the same partitioner). Partition
    counts are any integers but bool (NumPy ones too), as :func:`partitions` takes them.

    ``keys``: a sequence or iterable of str/bytes/None (or, for Iceberg and Spark, of ints and
    None: Python or NumPy integers), a NumPy integer array or an Arrow array; each entry
    counts as one key, so pass distinct keys with their ``weights`` (messages or bytes per
    key, finite and non-negative numbers; default 1 each). ``sample_size`` at-risk keys are
    named, the heaviest first (ties: in input order). Vectorized: the partitioners, the key
    hash and the segment lookup each take the whole batch in one native call. Every argument
    is checked first."""
    plan = MigrationPlan.of(source, num_partitions, target)
    check_int("sample_size", sample_size, minimum=0)
    keys = _batch(keys)
    count = len(keys)
    w = np.ones(count) if weights is None else check_weights("weights", weights)
    if len(w) != count:
        raise InvalidArgument(
            f"weights must hold one weight per key ({count}), got {len(w)}", argument="weights"
        )
    src, col, at_risk = plan.place(keys)
    risky = np.flatnonzero(at_risk)
    heaviest = risky[np.argsort(-w[risky], kind="stable")[:sample_size]]
    return MigrationAudit.from_cells(
        plan,
        src,
        col,
        np.ones(count),
        w,
        at_risk,
        np.where(at_risk, w, 0.0),
        tuple(display_key(_key_at(keys, int(i))) for i in heaviest),
    )


def _batch(keys: Any) -> Any:
    """``keys`` as a batch the partitioners read and the sample indexes: an iterable without
    a length (a generator) as a list; a NumPy array that is strided or misaligned (a slice
    ``a[::2]``, a field of a packed record) as a contiguous copy."""
    if isinstance(keys, str | bytes | bytearray):
        raise ArgumentTypeError(
            f"keys must be a batch of keys, not a single {type(keys).__name__}; "
            "wrap one key in a list",
            argument="keys",
        )
    if isinstance(keys, np.ndarray):
        if keys.ndim != 1:
            raise ArgumentTypeError(
                f"keys must be a one-dimensional array, got {keys.ndim} dimensions", argument="keys"
            )
        return np.require(keys, requirements=("C", "A"))
    if isinstance(keys, Sized):
        return keys
    if isinstance(keys, Iterable):
        return list(keys)
    raise ArgumentTypeError(
        "keys must be a sequence or iterable of keys, a NumPy array or an Arrow array, "
        f"got {type(keys).__name__}",
        argument="keys",
    )


def _key_at(keys: Any, index: int) -> str | bytes | int | None:
    key = keys[index]
    # An Arrow array's item is a scalar; a list's is the key itself.
    return key.as_py() if hasattr(key, "as_py") else key  # type: ignore[no-any-return]


__all__ = [
    "DEFAULT_SAMPLE_SIZE",
    "INT_PARTITIONERS",
    "MAX_CELLS",
    "MAX_PARTITIONS",
    "MigrationAudit",
    "MigrationPlan",
    "Risk",
    "audit_migration",
    "check_partitioner",
    "display_key",
]

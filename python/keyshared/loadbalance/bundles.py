"""Pulsar's namespace bundles on the 32-bit hash ring, and the four bundle split algorithms.

A namespace's topics are spread over bundles by the unsigned CRC32 of the topic's full
name (``persistent://tenant/ns/topic``). A bundle is the half-open hash range
``[lower, upper)``, except that the last bundle of the ring also holds ``0xFFFFFFFF``.

Each split algorithm returns the ascending split boundaries, every one strictly inside
the bundle, or ``None`` when the bundle should not split. Pulsar's ``splitBundles``
refuses a boundary on or outside the bundle's edges, so where an algorithm's formula
lands there, the answer here is ``None`` as well.
"""

from __future__ import annotations

import unicodedata
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from types import MappingProxyType

from keyshared._checks import check_int, check_name
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.loadbalance.model import (
    DEFAULT_PULSAR_VERSION,
    MB,
    MessageRates,
    check_pulsar_version,
)

#: First hash of the bundle ring.
FULL_LOWER_BOUND = 0x00000000
#: Last hash of the bundle ring; the bundle ending here includes it.
FULL_UPPER_BOUND = 0xFFFFFFFF

#: A topic-name hash function, as Pulsar's ``NamespaceBundleFactory`` is configured with.
HashFunction = Callable[[str], int]


def topic_hash(name: str) -> int:
    """The bundle-ring hash of a topic: unsigned CRC32 of its UTF-8 name (Pulsar's default)."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"name must be a str, got {type(name).__name__}", argument="name")
    return zlib.crc32(name.encode("utf-8"))


_DOMAINS = ("persistent", "non-persistent")
#: What Java's ``Character.isWhitespace`` counts, by which Pulsar finds a local name blank:
#: space separators but the no-break ones, and the ASCII and information-separator controls.
_NO_BREAK_SPACES = frozenset("\u00a0\u2007\u202f")
_JAVA_CONTROL_SPACES = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")


def _java_blank(text: str) -> bool:
    return all(
        c in _JAVA_CONTROL_SPACES
        or (unicodedata.category(c) in ("Zs", "Zl", "Zp") and c not in _NO_BREAK_SPACES)
        for c in text
    )


def topic_namespace(
    topic_name: str, *, pulsar_version: str = DEFAULT_PULSAR_VERSION
) -> tuple[str, str]:
    """The full topic name and its namespace, as Pulsar's ``TopicName`` reads them.

    ``"my-topic"`` is ``persistent://public/default/my-topic``; ``"tenant/ns/topic"`` gets
    the ``persistent://`` domain. After the domain come ``tenant/ns/local-name``. As in
    Pulsar 4.2 and master (PIP-457), the default, a v1 name
    ``domain://tenant/cluster/ns/topic`` is refused, and with it any local name holding
    ``/``. A blank local name (only whitespace, as Java counts it) is refused, as in Pulsar.

    ``pulsar_version="4.0"`` reads names as Pulsar 4.0 LTS does: a name of four parts after
    the domain is a v1 name, whose namespace is ``tenant/cluster/ns`` and whose local name
    is all after it (``/`` included); a short name counts its non-empty ``/``-parts, so that
    ``"x/"`` is ``persistent://public/default/x`` and ``"t/c/ns/x"`` is refused.
    """
    check_name("topic_name", topic_name)
    lts = check_pulsar_version(pulsar_version) == "4.0"
    if "://" not in topic_name:
        topic_name = _with_domain(topic_name, lts)
    domain, _, rest = topic_name.partition("://")
    if domain not in _DOMAINS:
        raise InvalidArgument(
            f"topic_name {topic_name!r}: domain must be one of {_DOMAINS}", argument="topic_name"
        )
    parts = rest.split("/", 3)
    if len(parts) == 4 and not lts:
        raise InvalidArgument(
            f"topic_name {topic_name!r}: v1 topic names (with a cluster) are no longer "
            f"supported, nor is '/' in a local name: use domain://tenant/namespace/topic "
            f"(pulsar_version='4.0' reads them as Pulsar 4.0 did)",
            argument="topic_name",
        )
    if len(parts) < 3 or not all(parts):
        raise InvalidArgument(
            f"topic_name {topic_name!r} must be domain://tenant/namespace/topic",
            argument="topic_name",
        )
    if _java_blank(parts[-1]):
        raise InvalidArgument(
            f"topic_name {topic_name!r}: the local name must not be blank", argument="topic_name"
        )
    return topic_name, "/".join(parts[:-1])


def _with_domain(short_name: str, lts: bool) -> str:
    """A short topic name (no ``://``) with its domain, and its namespace if it has none.

    ``"topic"`` or ``"tenant/ns/topic"``; 4.2 keeps every ``/``-part, 4.0 (``lts``) counts
    only non-empty ones (Commons Lang's ``StringUtils.split``), and refuses other counts.
    """
    if not lts:
        namespace = "" if "/" in short_name else "public/default/"
        return f"persistent://{namespace}{short_name}"
    parts = [part for part in short_name.split("/") if part]
    if len(parts) == 1:
        return f"persistent://public/default/{parts[0]}"
    if len(parts) != 3:
        raise InvalidArgument(
            f"topic_name {short_name!r} must be tenant/namespace/topic or topic (Pulsar 4.0)",
            argument="topic_name",
        )
    return f"persistent://{short_name}"


@dataclass(frozen=True, order=True)
class NamespaceBundle:
    """A bundle's hash range: ``[lower_endpoint, upper_endpoint)``, upper included at the end.

    Invariant: ``0 <= lower_endpoint < upper_endpoint <= 0xFFFFFFFF``, except for the
    one-point bundle ``[0xFFFFFFFF, 0xFFFFFFFF]``, which Pulsar's closed last range allows.
    ``namespace`` (``tenant/ns``) names whose bundle it is; ``""`` is a bare hash range,
    which holds a topic of any namespace.
    """

    lower_endpoint: int
    upper_endpoint: int
    namespace: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.namespace, str):
            raise ArgumentTypeError(
                f"namespace must be a str, got {type(self.namespace).__name__}",
                argument="namespace",
            )
        check_int("lower_endpoint", self.lower_endpoint, minimum=FULL_LOWER_BOUND)
        check_int("upper_endpoint", self.upper_endpoint, maximum=FULL_UPPER_BOUND)
        if self.lower_endpoint == self.upper_endpoint == FULL_UPPER_BOUND:
            return
        if self.lower_endpoint >= self.upper_endpoint:
            raise InvalidArgument(
                f"lower_endpoint must be < upper_endpoint, got "
                f"0x{self.lower_endpoint:08x} >= 0x{self.upper_endpoint:08x}",
                argument="lower_endpoint",
            )

    @classmethod
    def full(cls, namespace: str = "") -> NamespaceBundle:
        """The whole ring, ``[0x00000000, 0xFFFFFFFF]``."""
        return cls(FULL_LOWER_BOUND, FULL_UPPER_BOUND, namespace)

    def __str__(self) -> str:
        """Pulsar's key: ``namespace/0xlower_0xupper`` (the range alone without namespace)."""
        return f"{self.namespace}/{self.bundle_range}" if self.namespace else self.bundle_range

    @classmethod
    def from_bundle_range(cls, bundle_range: str, namespace: str = "") -> NamespaceBundle:
        """Parse Pulsar's ``"0x00000000_0x40000000"`` form, of ``namespace`` if given."""
        check_name("bundle_range", bundle_range)
        lower, sep, upper = bundle_range.partition("_")
        if not sep:
            raise InvalidArgument(
                f"bundle_range must be 'lower_upper', got {bundle_range!r}", argument="bundle_range"
            )
        try:
            return cls(int(lower, 0), int(upper, 0), namespace)
        except ValueError as error:
            raise InvalidArgument(
                f"bundle_range {bundle_range!r}: {error}", argument="bundle_range"
            ) from None

    @property
    def bundle_range(self) -> str:
        """Pulsar's name for the range, ``"0x%08x_0x%08x"``."""
        return f"0x{self.lower_endpoint:08x}_0x{self.upper_endpoint:08x}"

    def includes_hash(self, hash_value: int) -> bool:
        """Whether a ring hash falls in this bundle."""
        check_int("hash_value", hash_value, minimum=FULL_LOWER_BOUND, maximum=FULL_UPPER_BOUND)
        if self.upper_endpoint == FULL_UPPER_BOUND:
            return self.lower_endpoint <= hash_value
        return self.lower_endpoint <= hash_value < self.upper_endpoint

    def includes(self, topic_name: str, hash_function: HashFunction = topic_hash) -> bool:
        """Whether a topic falls in this bundle.

        With a namespace set, the topic must be of it, and its full name
        (``persistent://tenant/ns/topic``, see :func:`topic_namespace`) is hashed; without,
        ``topic_name`` is hashed as given.
        """
        if self.namespace:
            full_name, namespace = topic_namespace(topic_name)
            return namespace == self.namespace and self.includes_hash(hash_function(full_name))
        return self.includes_hash(hash_function(topic_name))

    def overlaps(self, other: NamespaceBundle) -> bool:
        """Whether the two bundles, of one namespace, share a hash."""
        _check_bundle("other", other)
        return (
            self.namespace == other.namespace
            and self.lower_endpoint <= other._last_hash
            and other.lower_endpoint <= self._last_hash
        )

    def compare_to(self, other: NamespaceBundle) -> int:
        """Pulsar's ``compareTo``: -1, 0 or 1 by namespace, then by lower endpoint.

        Equal bundles give 0; two different overlapping ranges of one namespace have no
        order and raise ``ValueError``.
        """
        if self == _check_bundle("other", other):
            return 0
        if self.namespace != other.namespace:
            return -1 if self.namespace < other.namespace else 1
        if self.overlaps(other):
            raise InvalidArgument(
                f"can't compare overlapping bundles {self.bundle_range} and {other.bundle_range}",
                argument="other",
            )
        return -1 if self.lower_endpoint < other.lower_endpoint else 1

    @property
    def _last_hash(self) -> int:
        closed = self.upper_endpoint == FULL_UPPER_BOUND
        return self.upper_endpoint if closed else self.upper_endpoint - 1


def _check_bundle(name: str, value: object) -> NamespaceBundle:
    if not isinstance(value, NamespaceBundle):
        raise ArgumentTypeError(
            f"{name} must be a NamespaceBundle, got {type(value).__name__}", argument=name
        )
    return value


def can_split_bundle(bundle: NamespaceBundle) -> bool:
    """Pulsar's ``canSplitBundle``: the range must span more than one hash step."""
    return bundle.upper_endpoint - bundle.lower_endpoint > 1


#: The most parts :func:`split_bundles` makes of one bundle (Pulsar has no such limit and
#: fails on its heap instead).
MAX_SPLIT_BUNDLES = 1 << 20


def split_bundles(
    target_bundle: NamespaceBundle,
    num_bundles: int = 2,
    split_boundaries: Iterable[int] | None = None,
) -> tuple[NamespaceBundle, ...]:
    """Split a bundle, as Pulsar's ``NamespaceBundleFactory.splitBundles`` does.

    With ``split_boundaries`` (any order), the bundle splits at each of them and
    ``num_bundles`` is ignored; every boundary must lie strictly inside the bundle. Without
    them, it splits into ``num_bundles`` parts of ``(upper - lower) // num_bundles`` hashes,
    the last part taking the remainder. Raises ``ValueError`` when no such split exists, and
    for more than :data:`MAX_SPLIT_BUNDLES` parts: Pulsar sets no limit but runs out of
    heap (OutOfMemoryError from 2**24 parts on a 2 GB heap, NegativeArraySizeException at
    2**31 - 1), where this would run out of memory.
    """
    if not can_split_bundle(_check_bundle("target_bundle", target_bundle)):
        raise InvalidArgument(
            f"bundle {target_bundle.bundle_range} can't be split further", argument="target_bundle"
        )
    lower, upper = target_bundle.lower_endpoint, target_bundle.upper_endpoint
    if split_boundaries is None:
        check_int("num_bundles", num_bundles, minimum=2)
        if num_bundles > MAX_SPLIT_BUNDLES:
            raise InvalidArgument(
                f"num_bundles must be at most {MAX_SPLIT_BUNDLES} (MAX_SPLIT_BUNDLES), "
                f"got {num_bundles}",
                argument="num_bundles",
            )
        check_int("num_bundles", num_bundles, minimum=2, maximum=upper - lower)
        seg_size = (upper - lower) // num_bundles
        points = [lower + seg_size * i for i in range(num_bundles)] + [upper]
    else:
        inner = sorted(
            check_int(f"split_boundaries[{i}]", b) for i, b in enumerate(split_boundaries)
        )
        if not inner:
            raise InvalidArgument("split_boundaries must not be empty", argument="split_boundaries")
        if inner[0] <= lower or inner[-1] >= upper:
            raise InvalidArgument(
                f"split_boundaries must lie strictly inside bundle {target_bundle.bundle_range}",
                argument="split_boundaries",
            )
        if len(set(inner)) != len(inner):
            raise InvalidArgument(
                "split_boundaries must not repeat a boundary", argument="split_boundaries"
            )
        points = [lower, *inner, upper]
    namespace = target_bundle.namespace
    return tuple(NamespaceBundle(a, b, namespace) for a, b in pairwise(points))


def range_equally_divide(bundle: NamespaceBundle) -> tuple[int, ...] | None:
    """Split into two halves of the hash range: ``lower + (upper - lower) // 2``.

    ``None`` for a bundle that cannot split (a range of one hash step).
    """
    _check_bundle("bundle", bundle)
    middle = bundle.lower_endpoint + (bundle.upper_endpoint - bundle.lower_endpoint) // 2
    return _inside_or_none(bundle, [middle])


def topic_count_equally_divide(
    bundle: NamespaceBundle,
    topics: Iterable[str],
    hash_function: HashFunction = topic_hash,
) -> tuple[int, ...] | None:
    """Split so that each side holds half of the topics.

    With the topic hashes sorted, the boundary is the midpoint of ``h[n // 2 - 1]`` and
    ``h[n // 2]`` (``a + (b - a) // 2``); for an odd count the middle topic goes right.
    ``None`` for fewer than two topics. Every topic must fall in the bundle.
    """
    _check_bundle("bundle", bundle)
    hashes = sorted(_topic_hashes(bundle, topics, hash_function).values())
    if len(hashes) <= 1:
        return None
    split_start = hashes[max(len(hashes) // 2 - 1, 0)]
    split_end = hashes[len(hashes) // 2]
    return _inside_or_none(bundle, [split_start + (split_end - split_start) // 2])


def specified_positions_divide(
    bundle: NamespaceBundle,
    topics: Iterable[str],
    positions: Iterable[int],
    hash_function: HashFunction = topic_hash,
) -> tuple[int, ...] | None:
    """Split at the given hash positions that lie strictly inside the bundle.

    As in Pulsar, a bundle with fewer than two topics does not split, and positions on or
    outside its edges, even off the ring (negative, or past ``0xFFFFFFFF``), are dropped
    (``None`` if none is left). A position given twice counts once. ``positions`` must not
    be empty.
    """
    _check_bundle("bundle", bundle)
    if isinstance(positions, str | bytes) or not isinstance(positions, Iterable):
        raise ArgumentTypeError(
            f"positions must be a collection of int, got {type(positions).__name__}",
            argument="positions",
        )
    wanted = sorted({check_int(f"positions[{i}]", p) for i, p in enumerate(positions)})
    if not wanted:
        raise InvalidArgument("positions must not be empty", argument="positions")
    if len(_topic_hashes(bundle, topics, hash_function)) <= 1:
        return None
    inside = [p for p in wanted if bundle.lower_endpoint < p < bundle.upper_endpoint]
    return tuple(inside) or None


def flow_or_qps_equally_divide(
    bundle: NamespaceBundle,
    topic_stats: Mapping[str, MessageRates],
    *,
    load_balancer_namespace_bundle_max_msg_rate: int = 30000,
    load_balancer_namespace_bundle_max_bandwidth_mbytes: int = 100,
    flow_or_qps_difference_threshold_percentage: int = 10,
    hash_function: HashFunction = topic_hash,
) -> tuple[int, ...] | None:
    """Split so that no part passes the message-rate (msg/s) or bandwidth (MB/s) limit.

    A topic's rate and throughput are its in plus out; topics with neither are left out. The
    bundle does not split with fewer than two loaded topics, or when its total rate and
    total throughput are both below their limit times ``1 + threshold / 100``. Otherwise
    the topics are walked in hash order, and where adding the next one would pass either
    limit (strictly above it) a boundary goes between the two:
    ``h[i-1] + (h[i] - h[i-1]) // 2 + 1``; the new part starts with that topic's load.

    Pulsar keys topic loads by hash, so when two names collide one of them is counted twice
    on the walk; here they are walked as one topic carrying both loads.
    """
    _check_bundle("bundle", bundle)
    max_msg_rate = check_int(
        "load_balancer_namespace_bundle_max_msg_rate",
        load_balancer_namespace_bundle_max_msg_rate,
        minimum=0,
    )
    max_bandwidth = MB * check_int(
        "load_balancer_namespace_bundle_max_bandwidth_mbytes",
        load_balancer_namespace_bundle_max_bandwidth_mbytes,
        minimum=0,
    )
    diff_threshold = (
        check_int(
            "flow_or_qps_difference_threshold_percentage",
            flow_or_qps_difference_threshold_percentage,
            minimum=0,
        )
        / 100.0
    )
    loads = _loads_by_hash(bundle, topic_stats, hash_function)
    total_rate = sum(rate for rate, _ in loads.values())
    total_throughput = sum(throughput for _, throughput in loads.values())
    if len(loads) < 2 or (
        total_rate < max_msg_rate * (1 + diff_threshold)
        and total_throughput < max_bandwidth * (1 + diff_threshold)
    ):
        return None
    hashes = sorted(loads)
    boundaries = []
    part_rate, part_throughput = loads[hashes[0]]
    for previous, current in pairwise(hashes):
        rate, throughput = loads[current]
        if part_rate + rate > max_msg_rate or part_throughput + throughput > max_bandwidth:
            boundaries.append(previous + (current - previous) // 2 + 1)
            part_rate, part_throughput = rate, throughput
        else:
            part_rate += rate
            part_throughput += throughput
    return _inside_or_none(bundle, boundaries)


#: Pulsar's ``NamespaceBundleSplitAlgorithm`` names, each with its algorithm.
SPLIT_ALGORITHMS: Mapping[str, Callable[..., tuple[int, ...] | None]] = MappingProxyType(
    {
        "range_equally_divide": range_equally_divide,
        "topic_count_equally_divide": topic_count_equally_divide,
        "specified_positions_divide": specified_positions_divide,
        "flow_or_qps_equally_divide": flow_or_qps_equally_divide,
    }
)


def split_algorithm_of(name: str | None) -> Callable[..., tuple[int, ...] | None] | None:
    """Pulsar's ``NamespaceBundleSplitAlgorithm.of``: the algorithm named, or ``None``.

    ``None`` and unknown names give ``None``, as in Pulsar (the broker then refuses the
    split request); a name that is not a string raises ``TypeError``.
    """
    if name is None:
        return None
    if not isinstance(name, str):
        raise ArgumentTypeError(
            f"name must be a str or None, got {type(name).__name__}", argument="name"
        )
    return SPLIT_ALGORITHMS.get(name)


def _topic_hashes(
    bundle: NamespaceBundle, topics: Iterable[str], hash_function: HashFunction
) -> dict[str, int]:
    if isinstance(topics, str | bytes):
        raise ArgumentTypeError(
            "topics must be a collection of topic names, not a single str", argument="topics"
        )
    hashes: dict[str, int] = {}
    for i, topic in enumerate(topics):
        check_name(f"topics[{i}]", topic)
        if topic in hashes:
            raise InvalidArgument(f"topics: {topic!r} is listed twice", argument="topics")
        hashes[topic] = _hash_in_bundle(bundle, topic, hash_function, "topics")
    return hashes


def _hash_in_bundle(
    bundle: NamespaceBundle, topic: str, hash_function: HashFunction, what: str
) -> int:
    """``topic``'s hash, which must fall in ``bundle``; ``what`` names the argument that
    listed the topic, for the error."""
    hash_value = check_int(
        f"hash of topic {topic!r}",
        hash_function(topic),
        minimum=FULL_LOWER_BOUND,
        maximum=FULL_UPPER_BOUND,
    )
    if not bundle.includes_hash(hash_value):
        raise InvalidArgument(
            f"topic {topic!r} (hash 0x{hash_value:08x}) is outside bundle {bundle.bundle_range}",
            argument=what,
        )
    return hash_value


def _loads_by_hash(
    bundle: NamespaceBundle, topic_stats: Mapping[str, MessageRates], hash_function: HashFunction
) -> dict[int, tuple[float, float]]:
    if not isinstance(topic_stats, Mapping):
        raise ArgumentTypeError(
            f"topic_stats must be a mapping, got {type(topic_stats).__name__}",
            argument="topic_stats",
        )
    loads: dict[int, tuple[float, float]] = {}
    for topic, stats in topic_stats.items():
        check_name("topic_stats key", topic)
        if not isinstance(stats, MessageRates):
            raise ArgumentTypeError(
                f"topic_stats[{topic!r}] must be a MessageRates", argument="topic_stats"
            )
        hash_value = _hash_in_bundle(bundle, topic, hash_function, "topic_stats")
        # An idle topic carries nothing to balance, so it neither counts nor moves a boundary.
        if stats.msg_rate <= 0 and stats.msg_throughput <= 0:
            continue
        rate, throughput = loads.get(hash_value, (0.0, 0.0))
        loads[hash_value] = (rate + stats.msg_rate, throughput + stats.msg_throughput)
    return loads


def _inside_or_none(bundle: NamespaceBundle, boundaries: list[int]) -> tuple[int, ...] | None:
    inside = all(bundle.lower_endpoint < b < bundle.upper_endpoint for b in boundaries)
    return tuple(boundaries) if boundaries and inside else None


__all__ = [
    "FULL_LOWER_BOUND",
    "FULL_UPPER_BOUND",
    "MAX_SPLIT_BUNDLES",
    "SPLIT_ALGORITHMS",
    "HashFunction",
    "NamespaceBundle",
    "can_split_bundle",
    "flow_or_qps_equally_divide",
    "range_equally_divide",
    "specified_positions_divide",
    "split_algorithm_of",
    "split_bundles",
    "topic_count_equally_divide",
    "topic_hash",
    "topic_namespace",
]

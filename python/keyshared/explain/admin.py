"""The broker's admin REST endpoint: a topic's stats, its partitions and its unacked limit.

Each request goes through :class:`keyshared.connection.ClusterConnection` (its TLS and
authentication settings; a bare URL is a connection without them), bounded as a whole by a
timeout (:func:`http_get`); an answer that is an HTTP error carries the reason Pulsar gives
(:class:`HttpStatusError`). A 404 on a partitioned topic's base name names its partitions,
since its stats cannot be explained as one topic's.
"""

from __future__ import annotations

from typing import Any

from keyshared._checks import check_int, check_mapping
from keyshared.connection import (
    DEFAULT_TIMEOUT_S,
    AnswerError,
    ClusterConnection,
    HttpStatusError,
    check_timeout,
)
from keyshared.errors import InvalidArgument
from keyshared.scalable.topic_name import TopicDomain, TopicName


def _topic_path(name: TopicName, tail: str) -> str:
    return f"/admin/v2/{name.domain.value}/{name.namespace}/{name.local_name}{tail}"


def _persistent(topic: str) -> TopicName:
    name = TopicName.get(topic)
    if name.domain not in (TopicDomain.persistent, TopicDomain.non_persistent):
        raise InvalidArgument(
            f"--topic {topic!r} is not a persistent or non-persistent topic", argument="--topic"
        )
    return name


def stats_url(url: str, topic: str) -> str:
    """The admin REST address of a topic's stats on the broker at ``url``
    (``http://host:8080``); ``topic`` as Pulsar reads it (a bare name is in public/default)."""
    return f"{url.rstrip('/')}{_topic_path(_persistent(topic), '/stats')}"


def http_get(address: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bytes:
    """The body of a GET of ``address``, the whole request (connecting, the headers and
    every read of the body) within ``timeout_s``: a server that answers a byte at a time
    cannot stretch it. An OSError naming the address otherwise: :class:`HttpStatusError`
    for an HTTP error, :class:`AnswerError` for a body cut short,
    :class:`~keyshared.errors.ClusterAccessError` for no answer in time or an address that
    cannot be reached."""
    return ClusterConnection.of(address, timeout_s).admin("GET", address)


def fetch_stats(
    url: str | ClusterConnection, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Any:
    """The topic stats from the admin REST endpoint of the broker at ``url`` (an admin URL,
    or a :class:`ClusterConnection` with its TLS and authentication settings); an OSError
    naming the address when the broker does not answer within ``timeout_s`` or refuses.
    A 404 for a partitioned topic's base name says so and names its partitions."""
    path = _topic_path(_persistent(topic), "/stats")
    cluster = ClusterConnection.of(url, timeout_s)
    try:
        return cluster.admin_json("GET", path)
    except HttpStatusError as e:
        count = _partitions_or_none(cluster, topic) if e.code == 404 else 0
        if count:
            name = _persistent(topic)
            raise OSError(
                f"{e}: {name} is a partitioned topic of {count} partition(s),"
                f" {name}-partition-0 to {name}-partition-{count - 1}; explain one"
                f" (--topic {name}-partition-0) or each (--all-partitions)"
            ) from None
        raise


def _partitions_or_none(cluster: ClusterConnection, topic: str) -> int:
    # Only to explain a 404: when this lookup fails too, the 404 is the answer.
    try:
        return partition_count(cluster, topic)
    except (OSError, ValueError, TypeError):
        return 0


def partition_count(
    url: str | ClusterConnection, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> int:
    """How many partitions the topic has (0: not partitioned), from its partitioned-topic
    metadata (``GET .../partitions``)."""
    path = _topic_path(_persistent(topic), "/partitions")
    cluster = ClusterConnection.of(url, timeout_s)
    address = cluster.admin_address(path)
    data = cluster.admin_json("GET", path)
    return check_int(
        f"{address}: partitions", check_mapping(address, data).get("partitions", 0), minimum=0
    )


def partition_names(
    url: str | ClusterConnection, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[str]:
    """The topic's partitions by name, or the topic alone when it is not partitioned."""
    count = partition_count(url, topic, timeout_s)
    name = str(_persistent(topic))
    return [f"{name}-partition-{i}" for i in range(count)] if count else [name]


def fetch_max_unacked(
    url: str | ClusterConnection, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> int | None:
    """The topic's applied ``maxUnackedMessagesOnConsumer`` (topic, namespace or broker
    level), or None when the broker does not say (topic policies disabled, no answer):
    the limit is context for "at its unacked limit", never a reason to fail."""
    path = _topic_path(_persistent(topic), "/maxUnackedMessagesOnConsumer?applied=true")
    try:
        value = ClusterConnection.of(url, timeout_s).admin_json("GET", path)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AnswerError",
    "HttpStatusError",
    "check_timeout",
    "fetch_max_unacked",
    "fetch_stats",
    "http_get",
    "partition_count",
    "partition_names",
    "stats_url",
]

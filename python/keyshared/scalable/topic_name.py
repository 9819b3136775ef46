"""Topic names of scalable topics (Pulsar's ``TopicName`` and ``SegmentTopicName``).

A scalable topic is named ``topic://tenant/namespace/local-name``; each of its segments is a
topic of its own, ``segment://tenant/namespace/local-name/{start:04x}-{end:04x}-{id}``
(the segment descriptor, :func:`keyshared.format_descriptor`). Regular topics keep the
``persistent://`` (or ``non-persistent://``) domain; partition ``k`` of a partitioned one is
``...local-name-partition-k``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from keyshared._checks import check_int
from keyshared._core import HashRange
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.scalable.layout import format_descriptor, parse_descriptor

#: Pulsar's defaults for a name given without tenant and namespace.
DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"
PARTITIONED_TOPIC_SUFFIX = "-partition-"


class TopicDomain(StrEnum):
    """Pulsar's ``TopicDomain``: the scheme of a topic name."""

    persistent = "persistent"
    non_persistent = "non-persistent"
    topic = "topic"
    segment = "segment"


@dataclass(frozen=True)
class TopicName:
    """A parsed topic name (Pulsar's ``TopicName``), immutable.

    ``segment_range`` and ``segment_id`` are set exactly for the ``segment`` domain, whose
    ``local_name`` is the parent scalable topic's local name."""

    domain: TopicDomain
    tenant: str
    namespace_portion: str
    local_name: str
    segment_range: HashRange | None = None
    segment_id: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "domain", TopicDomain(self.domain))
        for name in ("tenant", "namespace_portion", "local_name"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ArgumentTypeError(
                    f"{name} must be a str, got {type(value).__name__}", argument=name
                )
            if not value or "/" in value:
                raise InvalidArgument(
                    f"{name} must be non-empty and without '/', got {value!r}", argument=name
                )
        is_segment = self.domain is TopicDomain.segment
        if is_segment != (self.segment_range is not None) or is_segment != (
            self.segment_id is not None
        ):
            raise InvalidArgument(
                "segment_range and segment_id are set exactly for the segment domain",
                argument="segment_range",
            )
        if self.segment_id is not None:
            check_int("segment_id", self.segment_id, minimum=0)

    @classmethod
    def get(cls, name: str) -> TopicName:
        """Parses ``domain://tenant/namespace/local-name`` (``segment://`` names carry the
        descriptor as a fourth part). A name without a domain is ``persistent``; a bare
        local name is in ``public/default``, as in Pulsar."""
        if not isinstance(name, str):
            raise ArgumentTypeError(
                f"topic name must be a str, got {type(name).__name__}", argument="name"
            )
        scheme, sep, rest = name.partition("://")
        if not sep:
            scheme, rest = TopicDomain.persistent.value, name
            if "/" not in name:
                rest = f"{DEFAULT_TENANT}/{DEFAULT_NAMESPACE}/{name}"
        try:
            domain = TopicDomain(scheme)
        except ValueError:
            raise InvalidArgument(
                f"topic name {name!r} has an unknown domain {scheme!r}", argument="name"
            ) from None
        parts = rest.split("/")
        if domain is TopicDomain.segment:
            if len(parts) != 4:
                raise InvalidArgument(
                    f"segment topic name {name!r} is not like"
                    ' "segment://tenant/ns/topic/0000-7fff-1"',
                    argument="name",
                )
            hash_range, segment_id = parse_descriptor(parts[3])
            return cls(domain, parts[0], parts[1], parts[2], hash_range, segment_id)
        if len(parts) != 3:
            raise InvalidArgument(
                f'topic name {name!r} is not like "{scheme}://tenant/ns/topic"', argument="name"
            )
        return cls(domain, parts[0], parts[1], parts[2])

    @property
    def is_segment(self) -> bool:
        return self.domain is TopicDomain.segment

    @property
    def namespace(self) -> str:
        """``tenant/namespace``."""
        return f"{self.tenant}/{self.namespace_portion}"

    def get_partition(self, index: int) -> TopicName:
        """Partition ``index`` of this (partitioned) topic: ``...-partition-{index}``."""
        check_int("index", index, minimum=0)
        if self.is_segment:
            raise InvalidArgument(f"a segment topic has no partitions: {self}", argument=None)
        return TopicName(
            self.domain,
            self.tenant,
            self.namespace_portion,
            f"{self.local_name}{PARTITIONED_TOPIC_SUFFIX}{index}",
        )

    def __str__(self) -> str:
        base = f"{self.domain.value}://{self.tenant}/{self.namespace_portion}/{self.local_name}"
        if self.segment_range is None or self.segment_id is None:
            return base
        return f"{base}/{format_descriptor(self.segment_range, self.segment_id)}"


def _segment_topic(topic: TopicName, what: str) -> TopicName:
    if not isinstance(topic, TopicName):
        raise ArgumentTypeError(
            f"{what} must be a TopicName, got {type(topic).__name__}", argument=what
        )
    if not topic.is_segment:
        raise InvalidArgument(
            f"expected the segment domain, got {topic.domain.value!r}: {topic}", argument=what
        )
    return topic


class SegmentTopicName:
    """Pulsar's ``SegmentTopicName``: building and reading ``segment://`` names."""

    @staticmethod
    def from_parent(parent_topic: TopicName, hash_range: HashRange, segment_id: int) -> TopicName:
        """The name of segment ``segment_id`` (with ``hash_range``) of the scalable topic
        ``parent_topic``, whose domain must be ``topic``."""
        if not isinstance(parent_topic, TopicName):
            raise ArgumentTypeError(
                f"parent_topic must be a TopicName, got {type(parent_topic).__name__}",
                argument="parent_topic",
            )
        if parent_topic.domain is not TopicDomain.topic:
            raise InvalidArgument(
                f"parent_topic must have the domain 'topic', got {parent_topic.domain.value!r}",
                argument="parent_topic",
            )
        if not isinstance(hash_range, HashRange):
            raise ArgumentTypeError(
                f"hash_range must be a HashRange, got {type(hash_range).__name__}",
                argument="hash_range",
            )
        check_int("segment_id", segment_id, minimum=0)
        return TopicName(
            TopicDomain.segment,
            parent_topic.tenant,
            parent_topic.namespace_portion,
            parent_topic.local_name,
            hash_range,
            segment_id,
        )

    @staticmethod
    def get_parent_topic_name(segment_topic: TopicName) -> TopicName:
        """The scalable topic (domain ``topic``) a segment topic belongs to."""
        seg = _segment_topic(segment_topic, "segment_topic")
        return TopicName(TopicDomain.topic, seg.tenant, seg.namespace_portion, seg.local_name)

    @staticmethod
    def get_hash_range(segment_topic: TopicName) -> HashRange:
        hash_range = _segment_topic(segment_topic, "segment_topic").segment_range
        assert hash_range is not None  # set for every segment-domain name
        return hash_range

    @staticmethod
    def get_segment_id(segment_topic: TopicName) -> int:
        segment_id = _segment_topic(segment_topic, "segment_topic").segment_id
        assert segment_id is not None  # set for every segment-domain name
        return segment_id

    format_descriptor = staticmethod(format_descriptor)


__all__ = ["SegmentTopicName", "TopicDomain", "TopicName"]

"""Segment assignment for the stream consumers of one subscription (Pulsar's
``SubscriptionCoordinator``), as immutable values.

:func:`compute_assignment` is the rule: the assignable segments in (hash range, id) order are
dealt round-robin to the consumers in name order, each segment whole to one consumer. When
there are more consumers than assignable segments, the surplus shares bucketed segments
(PIP-486): every consumer first takes one segment, then the rest are dealt round-robin to the
segments that still have fewer sharers than buckets; a consumer beyond every segment's
bucket count stays idle. A shared segment's sharers all carry its bucket ranges (which
buckets each one owns is the segment dispatcher's choice); a segment owned whole carries none.

Parent-drain ordering applies once a drain checker is installed (STREAM subscriptions): a
segment is assignable only once every parent still in the layout has drained for the
subscription, and a drained sealed segment retires from the assignment. Without a checker
(CHECKPOINT, or a coordinator restored before the type is known) every segment is assignable.

``pulsar_version="5.0.0-M1"`` assigns as that release's broker does: every sealed segment,
drained or not and whatever its parents (a drained one ends at once on the consumer), every
active one whose parents still in the layout all drained, dealt round-robin; a consumer past
the last segment stays idle (M1 has no entry buckets to share). Master's rule (the default)
retires drained sealed segments, and a sealed segment waits for its parents as an active one
does, so that a key is never read from a child while older messages wait in its parent.

:class:`SubscriptionCoordinator` keeps the sessions, the drained segments and the layout;
each event returns a new coordinator (and the assignment, where Pulsar returns one). Times
are epoch ms; a disconnected session is evicted by :meth:`SubscriptionCoordinator.evict_expired`
once ``grace_period_ms`` has passed. The controller around it (which creates, drops and
restores coordinators) and the events it reacts to are
:class:`~keyshared.scalable.CoordinatorStateMachine`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from operator import attrgetter
from types import MappingProxyType

from keyshared._checks import check_bool, check_instance, check_int, check_mapping
from keyshared._core import HashRange
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.scalable.layout import _SEALED, Segment, TopicLayout
from keyshared.scalable.topic_name import TopicDomain, TopicName
from keyshared.versions import M1, SCALABLE_TOPICS

#: Pulsar's default grace period for a disconnected consumer session.
DEFAULT_GRACE_PERIOD_MS = 60_000


@dataclass(frozen=True)
class AssignedSegment:
    """One segment handed to a consumer (Pulsar's ``ConsumerAssignment.AssignedSegment``).
    ``bucket_ranges`` is empty when the consumer owns the segment whole (Exclusive), else
    the segment's full bucket-range list (Key_Shared over entry buckets)."""

    segment_id: int
    hash_range: HashRange
    segment_topic_name: str
    bucket_ranges: tuple[HashRange, ...] = ()


@dataclass(frozen=True)
class ConsumerAssignment:
    """What one consumer reads, under the layout of epoch ``layout_epoch``."""

    layout_epoch: int
    assigned_segments: tuple[AssignedSegment, ...] = ()

    @property
    def segment_ids(self) -> tuple[int, ...]:
        return tuple(s.segment_id for s in self.assigned_segments)


def is_assignable(
    segment: Segment,
    layout: TopicLayout,
    drained_segment_ids: Collection[int] | None,
    *,
    pulsar_version: str = SCALABLE_TOPICS.default,
) -> bool:
    """Whether ``segment`` may be handed out. ``drained_segment_ids`` None: no drain
    checker, everything is.

    Pulsar hands out every sealed segment that has not drained, even one whose own parent
    has not drained yet (a child split again before its parent emptied); reading both at
    once can reorder a key, so here a sealed segment waits for its parents as an active one
    does. Pulsar's tests do not tell the two apart. On 5.0.0-M1 every sealed segment is
    assignable, drained or not, as that release's broker has it."""
    m1 = SCALABLE_TOPICS.check(pulsar_version) == M1
    if drained_segment_ids is None or (m1 and segment.is_sealed):
        return True
    if segment.is_sealed and segment.segment_id in drained_segment_ids:
        return False
    # A parent no longer in the layout was pruned: nothing is left to wait for.
    return all(p not in layout.segments or p in drained_segment_ids for p in segment.parent_ids)


def compute_assignment(
    layout: TopicLayout,
    topic: TopicName,
    consumer_names: Iterable[str],
    drained_segment_ids: Collection[int] | None = None,
    *,
    pulsar_version: str = SCALABLE_TOPICS.default,
) -> dict[str, ConsumerAssignment]:
    """Every consumer's assignment (in name order; an idle one has no segments), by the
    rule in this module's description, of ``pulsar_version`` (``"master"``, the default,
    or ``"5.0.0-M1"``). ``topic`` is the scalable topic (domain ``topic``), for the segment
    topic names. Deterministic: a new controller leader computes the same.

    It is the broker's assignment when given the coordinator's own state, which is not
    what a caller sees; :class:`~keyshared.scalable.CoordinatorStateMachine` keeps that
    state from the broker's events. Given the layout, the live consumers and the drains
    the broker ever reported, it differs from the coordinator (on M1 as on master):

    - after a restart, or once the last consumer left (not when it was evicted), the
      coordinator knows no drain until its poller reports one again, and withholds the
      children of a parent drained before;
    - a consumer whose connection dropped keeps its segments, read by nobody, until its
      grace period ends;
    - a segment whose backlog reached 0 stays undrained for the coordinator until its
      poller asks (2 s after a split, a merge or a join, then at doubling intervals that an
      eviction does not reset);
    - the controller's GC prunes a drained sealed segment past retention (at once by
      default, at its 60 s tick): the prune is a new layout, and a layout mirrored from the
      admin's splits and merges still deals the pruned parent (M1), with every segment
      after it shifted to the next consumer.
    """
    m1 = SCALABLE_TOPICS.check(pulsar_version) == M1
    if not isinstance(layout, TopicLayout):
        raise ArgumentTypeError(
            f"layout must be a TopicLayout, got {type(layout).__name__}", argument="layout"
        )
    _check_topic(topic)
    names = sorted(_check_names("consumer_names", consumer_names))
    if not names:
        return {}
    drained = None if drained_segment_ids is None else frozenset(drained_segment_ids)
    segments = _assignable(layout, drained, m1)
    # SegmentTopicName.from_parent(topic, range, id)'s string, made without a TopicName per
    # segment (the topic was checked above).
    prefix = f"{TopicDomain.segment.value}://{topic.tenant}/{topic.namespace_portion}/"
    prefix += f"{topic.local_name}/"
    k = len(names)
    got: list[list[AssignedSegment]]
    if k <= len(segments) or m1:
        # Each segment whole to one consumer, round-robin (M1 has no entry buckets to share):
        # consumer j's are every k-th record from the j-th.
        by_id = _records(layout, prefix)
        records = [
            r if (r := by_id.get(seg.segment_id)) is not None else _whole(seg, prefix, by_id)
            for seg in segments
        ]
        got = [records[j::k] for j in range(k)]
    else:
        lists: list[list[AssignedSegment]] = [[] for _ in names]
        for seg, owners in zip(segments, _deal(segments, k), strict=True):
            shared = tuple(seg.bucket_ranges()) if len(owners) > 1 else ()
            name = prefix + seg._descriptor
            assigned = AssignedSegment(seg.segment_id, seg.hash_range, name, shared)
            for owner in owners:
                lists[owner].append(assigned)
        got = lists
    epoch = layout.epoch
    return {
        name: ConsumerAssignment(epoch, tuple(mine)) for name, mine in zip(names, got, strict=True)
    }


def _records(layout: TopicLayout, prefix: str) -> dict[int, AssignedSegment]:
    """The records of ``layout``'s whole segments made so far under the topic whose segment
    names start with ``prefix``, by segment id: a layout's assignments are computed again
    at every consumer change and drain, and one lookup here finds what ``_whole`` made."""
    records: dict[int, AssignedSegment] | None = layout._memo.get(prefix)
    if records is None:
        records = layout._memo[prefix] = {}
    return records


def _whole(segment: Segment, prefix: str, records: dict[int, AssignedSegment]) -> AssignedSegment:
    """The record of a whole segment under the topic whose segment names start with
    ``prefix``, kept in the layout's ``records``: it depends on the two alone and is
    immutable, so it is made once per segment (a new layout shares all but the segments its
    operation made or sealed), then only dealt."""
    assigned = segment._memo.get(prefix)
    if assigned is None:
        name = prefix + segment._descriptor
        assigned = segment._memo[prefix] = AssignedSegment(
            segment.segment_id, segment.hash_range, name
        )
    records[segment.segment_id] = assigned
    return assigned


def _assignable(layout: TopicLayout, drained: frozenset[int] | None, m1: bool) -> list[Segment]:
    """The segments :func:`is_assignable` admits, in (hash range, id) order, in one pass:
    over the layout's segments in that order (sorted once per layout) where sealed ones
    count, else over the active ones (in range order as the layout keeps them) with the
    few sealed ones that have not drained sorted in."""
    present = layout.segments
    if drained is None:
        return list(layout._in_range_order)
    sealed, ready = _SEALED, _ready
    if m1:
        # Every sealed segment, and the active ones whose parents drained.
        return [
            s for s in layout._in_range_order if s.state is sealed or ready(s, present, drained)
        ]
    active = [s for s in layout.active_segments() if ready(s, present, drained)]
    waiting = [
        s
        for s in present.values()
        if s.state is sealed and s.segment_id not in drained and ready(s, present, drained)
    ]
    if not waiting:
        return active
    both = [*active, *waiting]
    both.sort(key=_RANGE_ORDER)
    return both


def _ready(segment: Segment, present: Mapping[int, Segment], drained: frozenset[int]) -> bool:
    """Every parent drained; a parent no longer in the layout was pruned: nothing is left to
    wait for."""
    # A loop, not all(...): no generator made per segment.
    for p in segment.parent_ids:  # noqa: SIM110
        if p not in drained and p in present:
            return False
    return True


#: (hash range, id): the order segments are dealt in.
_RANGE_ORDER = attrgetter("hash_range", "segment_id")


def _deal(segments: list[Segment], consumers: int, share: bool = True) -> list[list[int]]:
    """The consumer indices of each segment; without ``share``, a consumer past the last
    segment stays idle."""
    owners: list[list[int]] = [[] for _ in segments]
    if not segments:
        return owners
    if consumers <= len(segments) or not share:
        for i in range(len(segments)):
            owners[i].append(i % consumers)
        return owners
    for i in range(len(segments)):
        owners[i].append(i)
    spare = [i for i, s in enumerate(segments) if s.bucket_count > 1]
    consumer, turn = len(segments), 0
    while consumer < consumers and spare:
        i = spare[turn % len(spare)]
        owners[i].append(consumer)
        consumer += 1
        if len(owners[i]) == segments[i].bucket_count:
            spare.remove(i)
        else:
            turn += 1
    return owners


def _check_topic(topic: object) -> None:
    """A scalable topic's name: its segments' topic names are made from it, and a wrong
    domain would only fail there, at the first assignment with consumers."""
    if not isinstance(topic, TopicName):
        raise ArgumentTypeError(
            f"topic must be a TopicName, got {type(topic).__name__}", argument="topic"
        )
    if topic.domain is not TopicDomain.topic:
        raise InvalidArgument(
            f"topic must be a scalable topic (domain 'topic'), got {topic.domain.value!r}: {topic}",
            argument="topic",
        )


def _check_segment_ids(arg: str, segment_ids: object) -> frozenset[int]:
    """A collection of segment ids (ints >= 0); a lone int, str or bytes is refused."""
    if isinstance(segment_ids, str | bytes) or not isinstance(segment_ids, Iterable):
        raise ArgumentTypeError(
            f"{arg} must be a collection of segment ids (int), got {type(segment_ids).__name__}",
            argument=arg,
        )
    return frozenset(check_int(f"{arg}[{i}]", sid, minimum=0) for i, sid in enumerate(segment_ids))


def _check_names(arg: str, consumer_names: Iterable[str]) -> list[str]:
    # A lone str is iterable too: taken as names, it would be one consumer per letter.
    if isinstance(consumer_names, str | bytes):
        raise ArgumentTypeError(
            f"{arg} must be an iterable of str, got a lone {type(consumer_names).__name__}",
            argument=arg,
        )
    names = list(consumer_names)
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise ArgumentTypeError(
                f"{arg}[{i}] must be a str, got {type(name).__name__}", argument=arg
            )
    if len(set(names)) != len(names):
        raise InvalidArgument(f"{arg} repeats a name: {names}", argument=arg)
    return names


@dataclass(frozen=True)
class ConsumerSession:
    """A consumer's durable session (Pulsar's ``ConsumerSession``): it outlives its
    connection. ``consumer_id`` is that of the current (or last) connection, None for a
    session restored from the store; ``disconnected_at_ms`` is set while disconnected."""

    consumer_name: str
    consumer_id: int | None = None
    disconnected_at_ms: int | None = None

    @property
    def is_connected(self) -> bool:
        return self.disconnected_at_ms is None


@dataclass(frozen=True)
class SubscriptionCoordinator:
    """The segment-assignment state of one subscription; every event returns a new one.
    ``drain_checker``: parent-drain ordering is on (STREAM). ``pulsar_version``: whose
    assignment rule (:func:`compute_assignment`)."""

    subscription_name: str
    topic: TopicName
    layout: TopicLayout
    drain_checker: bool = False
    grace_period_ms: int = DEFAULT_GRACE_PERIOD_MS
    sessions: Mapping[str, ConsumerSession] = field(default_factory=lambda: MappingProxyType({}))
    drained_segment_ids: frozenset[int] = frozenset()
    pulsar_version: str = SCALABLE_TOPICS.default

    def __post_init__(self) -> None:
        SCALABLE_TOPICS.check(self.pulsar_version)
        if not isinstance(self.subscription_name, str):
            raise ArgumentTypeError("subscription_name must be a str", argument="subscription_name")
        _check_topic(self.topic)
        if not isinstance(self.layout, TopicLayout):
            raise ArgumentTypeError(
                f"layout must be a TopicLayout, got {type(self.layout).__name__}", argument="layout"
            )
        check_bool("drain_checker", self.drain_checker)
        check_int("grace_period_ms", self.grace_period_ms, minimum=0)
        check_mapping("sessions", self.sessions)
        for name, session in self.sessions.items():
            if not isinstance(session, ConsumerSession) or session.consumer_name != name:
                raise InvalidArgument(
                    f"sessions[{name!r}] must be that consumer's ConsumerSession",
                    argument="sessions",
                )
        drained = _check_segment_ids("drained_segment_ids", self.drained_segment_ids)
        object.__setattr__(self, "sessions", MappingProxyType(dict(self.sessions)))
        object.__setattr__(self, "drained_segment_ids", drained)

    # --- reading ----------------------------------------------------------------------

    @property
    def consumers(self) -> tuple[ConsumerSession, ...]:
        """Every session, connected or within its grace period, in name order."""
        return tuple(self.sessions[n] for n in sorted(self.sessions))

    def current_assignment(self) -> dict[str, ConsumerAssignment]:
        """The assignment of every session under the current layout."""
        drained = self.drained_segment_ids if self.drain_checker else None
        return compute_assignment(
            self.layout, self.topic, self.sessions, drained, pulsar_version=self.pulsar_version
        )

    def segments_to_check(self) -> tuple[int, ...]:
        """The sealed segments whose drain status is still unknown (what the drain poller
        asks about), ascending; none without a drain checker or without consumers."""
        if not self.drain_checker or not self.sessions:
            return ()
        return tuple(
            s.segment_id
            for s in self.layout.segments.values()
            if s.is_sealed and s.segment_id not in self.drained_segment_ids
        )

    # --- events -----------------------------------------------------------------------

    def register_consumer(
        self, consumer_name: str, consumer_id: int
    ) -> tuple[SubscriptionCoordinator, dict[str, ConsumerAssignment]]:
        """A fresh registration, or a reconnect of an existing session (which keeps its
        assignment: nobody else moves)."""
        name = check_instance("consumer_name", consumer_name, str)
        check_int("consumer_id", consumer_id, minimum=0)
        session = ConsumerSession(name, consumer_id)
        after = replace(self, sessions={**self.sessions, name: session})
        return after, after.current_assignment()

    def unregister_consumer(
        self, consumer_name: str, consumer_id: int
    ) -> tuple[SubscriptionCoordinator, dict[str, ConsumerAssignment]]:
        """An explicit leave. A leave carrying another id than the session's current one
        (the departed connection of a consumer that already rejoined) changes nothing."""
        name = check_instance("consumer_name", consumer_name, str)
        check_int("consumer_id", consumer_id, minimum=0)
        session = self.sessions.get(name)
        if session is None or session.consumer_id != consumer_id:
            return self, self.current_assignment()
        after = self._without(name)
        return after, after.current_assignment()

    def on_consumer_disconnect(self, consumer_name: str, now_ms: int) -> SubscriptionCoordinator:
        """The connection dropped: the session stays (and keeps its segments) for the grace
        period."""
        check_int("now_ms", now_ms, minimum=0)
        session = self.sessions.get(check_instance("consumer_name", consumer_name, str))
        if session is None or not session.is_connected:
            return self
        gone = replace(session, disconnected_at_ms=now_ms)
        return replace(self, sessions={**self.sessions, consumer_name: gone})

    def evict_expired(self, now_ms: int) -> SubscriptionCoordinator:
        """Drops the sessions disconnected for at least the grace period."""
        check_int("now_ms", now_ms, minimum=0)
        kept = {
            n: s
            for n, s in self.sessions.items()
            if s.disconnected_at_ms is None or now_ms - s.disconnected_at_ms < self.grace_period_ms
        }
        return self if len(kept) == len(self.sessions) else replace(self, sessions=kept)

    def restore_consumers(
        self, persisted_consumer_names: Iterable[str], now_ms: int
    ) -> tuple[SubscriptionCoordinator, dict[str, ConsumerAssignment]]:
        """A new controller leader loads the persisted sessions: each starts disconnected at
        ``now_ms``, with a full grace period to reconnect."""
        check_int("now_ms", now_ms, minimum=0)
        sessions = dict(self.sessions)
        for name in _check_names("persisted_consumer_names", persisted_consumer_names):
            sessions.setdefault(name, ConsumerSession(name, None, now_ms))
        after = replace(self, sessions=sessions)
        return after, after.current_assignment()

    def on_layout_change(
        self, layout: TopicLayout
    ) -> tuple[SubscriptionCoordinator, dict[str, ConsumerAssignment]]:
        after = replace(self, layout=layout)
        return after, after.current_assignment()

    def install_drain_checker(self) -> SubscriptionCoordinator:
        """Turns parent-drain ordering on (the first STREAM register after a restore)."""
        return replace(self, drain_checker=True)

    def mark_segments_drained(self, segment_ids: Iterable[int]) -> SubscriptionCoordinator:
        """Records sealed segments found drained for this subscription."""
        ids = _check_segment_ids("segment_ids", segment_ids)
        for sid in ids:
            if sid not in self.layout.segments or self.layout.segments[sid].is_active:
                raise InvalidArgument(
                    f"segment {sid} is not a sealed segment of the layout", argument="segment_ids"
                )
        return replace(self, drained_segment_ids=self.drained_segment_ids | ids)

    def _without(self, name: str) -> SubscriptionCoordinator:
        return replace(self, sessions={n: s for n, s in self.sessions.items() if n != name})


__all__ = [
    "DEFAULT_GRACE_PERIOD_MS",
    "AssignedSegment",
    "ConsumerAssignment",
    "ConsumerSession",
    "SubscriptionCoordinator",
    "compute_assignment",
    "is_assignable",
]

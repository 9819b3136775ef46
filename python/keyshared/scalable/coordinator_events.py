"""The subscription coordinator as the state machine it is: Pulsar's ``SubscriptionCoordinator``
and the controller around it, moved by the events that change an assignment, one at a time,
in the order the broker saw them.

:func:`~keyshared.scalable.compute_assignment` is the rule; :class:`CoordinatorStateMachine`
keeps the state the rule is applied to as the broker keeps it (the layout the coordinator
was last given, its sessions, the sealed segments it found drained since it was created,
whether it orders children after their parents) and moves it by events
(:data:`CoordinatorEvent`). ``apply(event)`` answers the assignment of every session after
the event: the one each connected consumer then holds. Replayed from a broker's log and
metadata history, event by event, it gives the broker's assignment after every event,
whichever path it took.

What Pulsar 5.0.0-M1's broker does, per event (its ``ScalableTopicController``,
``SubscriptionCoordinator`` and ``ConsumerSession``, and the V5 client's
``ScalableConsumerClient``). To *rebalance* is to compute the assignment of every session
over the coordinator's state and send each connected session its own; a disconnected
session is sent nothing (it is sent its assignment when it reconnects). The drain poller
asks the owner of every sealed segment not yet known drained for the subscription's backlog
on it and reports those at 0 (:class:`SegmentsDrained`); its first round comes 2 s after an
event that *arms* it, each round without news waits twice as long (up to 15 min), and it
skips its rounds while the coordinator holds no session.

- :class:`ConsumerRegistered` (``CommandScalableTopicSubscribe``). Reads the controller's
  coordinators and layout, the sessions. The subscription's coordinator is created if it has
  none, over the controller's layout and with no drain known: with parent-drain ordering
  for a STREAM consumer, without for a CHECKPOINT one; a STREAM consumer turns ordering on in
  a coordinator created without it (after a restart), which rebalances and arms the poller.
  A name it does not hold: the registration is persisted, the session added, rebalance, arm.
  A name it holds (a reconnect, a restored session's too): the session takes the new
  connection and is sent its assignment; nobody else moves.
- :class:`ConsumerDisconnected` (the connection dropped; M1's V5 consumer sends nothing when
  it closes, so a close is one too). Marks the session disconnected and starts its grace
  period (``scalableTopicConsumerSessionGracePeriodSeconds``). Nothing moves: the session
  keeps its segments, which nobody reads meanwhile.
- :class:`ConsumerEvicted` (the grace period ran out: "Consumer evicted after grace
  period"). A session still disconnected is removed and its registration deleted, then
  rebalance (once the store answered). The coordinator stays, with the drains it found,
  even with no session left; the poller is not armed again, so a parent that drains once
  a survivor reads it is found at the poller's next round, however long its wait has grown.
- :class:`ConsumerUnregistered` (an explicit leave, which M1's V5 client never sends: only
  the subscription's deletion leaves for its consumers). Removes the session of that name
  (master: only while the id is its current connection's), rebalance; when none is left the
  controller drops the coordinator, and the drains it found go with it.
- :class:`LayoutChanged` (the controller leader's own split, merge or GC prune, once written
  to the store; it is the layout's only writer and watches nothing). Replaces the
  coordinator's layout, rebalance, arm. The GC runs every 60 s from the controller's start:
  it prunes every sealed segment whose retention (the topic's policy, else the namespace's,
  else the broker's ``defaultRetentionTimeInMinutes``, 0 by default: at once) has passed
  since it was sealed and whose backlog is 0 for every subscription. The pruned layout has
  the segment gone, its children's parent lists without it, and the epoch one higher.
- :class:`SegmentsDrained` (the poller's "Sealed segments drained, rebalancing"). Adds the
  segments to the drained set (for good, while the coordinator lives), rebalance (if it holds
  a session), arm.
- :class:`BrokerRestarted` (a new controller leader: the broker restarted, or leadership
  moved). The coordinators, their drained sets and sessions were in memory and are gone.
  The layout is read from the store, and each subscription's persisted registrations
  become sessions disconnected at the restart, each with a full grace period; the restored
  coordinator orders nothing until a STREAM consumer registers, and sends nothing: each
  consumer is sent its assignment when it reconnects (its V5 client does so by itself).

The M1 profile (``pulsar_version="5.0.0-M1"``) applies M1's rule and leaves; the master
profile (the default) master's rule (:func:`~keyshared.scalable.compute_assignment`) and its
leave, which ignores the departed connection of a consumer that already rejoined. The
events are otherwise handled alike: master keeps M1's coordinator and controller there.

Where :func:`~keyshared.scalable.compute_assignment` over what a caller can see gives
another answer than the coordinator (each asserted in tests/unit/test_coordinator_events.py):
drains forgotten by a restart or by the last consumer's leave; a disconnected session that
keeps its segments through its grace period; a segment whose backlog reached 0 but that the
poller has not asked about yet; and a sealed segment the GC pruned, which a layout mirrored
from the admin's splits and merges still has.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from keyshared._checks import check_bool, check_instance, check_int, check_name, check_names
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.scalable.coordinator import (
    DEFAULT_GRACE_PERIOD_MS,
    ConsumerAssignment,
    SubscriptionCoordinator,
    _check_segment_ids,
    _check_topic,
)
from keyshared.scalable.layout import TopicLayout
from keyshared.scalable.topic_name import TopicName
from keyshared.versions import M1, SCALABLE_TOPICS


@dataclass(frozen=True)
class ConsumerRegistered:
    """A consumer subscribed (``consumer_id``: its connection's id), afresh or again under
    a name the coordinator holds. ``stream``: a STREAM consumer, else a CHECKPOINT one."""

    consumer_name: str
    consumer_id: int
    stream: bool = True

    def __post_init__(self) -> None:
        check_name("consumer_name", self.consumer_name)
        check_int("consumer_id", self.consumer_id, minimum=0)
        check_bool("stream", self.stream)


@dataclass(frozen=True)
class ConsumerDisconnected:
    """The consumer's connection dropped at ``at_ms`` (epoch ms)."""

    consumer_name: str
    at_ms: int

    def __post_init__(self) -> None:
        check_name("consumer_name", self.consumer_name)
        check_int("at_ms", self.at_ms, minimum=0)


@dataclass(frozen=True)
class ConsumerEvicted:
    """The grace period of a disconnected consumer's session ran out."""

    consumer_name: str

    def __post_init__(self) -> None:
        check_name("consumer_name", self.consumer_name)


@dataclass(frozen=True)
class ConsumerUnregistered:
    """The consumer's connection ``consumer_id`` left the subscription explicitly."""

    consumer_name: str
    consumer_id: int

    def __post_init__(self) -> None:
        check_name("consumer_name", self.consumer_name)
        check_int("consumer_id", self.consumer_id, minimum=0)


@dataclass(frozen=True)
class LayoutChanged:
    """The controller leader wrote a new layout: a split, a merge or a GC prune."""

    layout: TopicLayout

    def __post_init__(self) -> None:
        check_instance("layout", self.layout, TopicLayout)


@dataclass(frozen=True)
class SegmentsDrained:
    """The drain poller found these sealed segments drained for the subscription."""

    segment_ids: frozenset[int]

    def __post_init__(self) -> None:
        ids = _check_segment_ids("segment_ids", self.segment_ids)
        if not ids:
            raise InvalidArgument("segment_ids must name a segment", argument="segment_ids")
        object.__setattr__(self, "segment_ids", ids)


@dataclass(frozen=True)
class BrokerRestarted:
    """A new controller leader took the topic at ``at_ms``: ``layout`` as the store has it,
    ``consumer_names`` the subscription's persisted registrations."""

    layout: TopicLayout
    consumer_names: frozenset[str]
    at_ms: int

    def __post_init__(self) -> None:
        check_instance("layout", self.layout, TopicLayout)
        object.__setattr__(
            self, "consumer_names", check_names("consumer_names", self.consumer_names)
        )
        check_int("at_ms", self.at_ms, minimum=0)


#: Every event that can change a subscription's assignment.
CoordinatorEvent = (
    ConsumerRegistered
    | ConsumerDisconnected
    | ConsumerEvicted
    | ConsumerUnregistered
    | LayoutChanged
    | SegmentsDrained
    | BrokerRestarted
)
_EVENT_TYPES = (
    ConsumerRegistered,
    ConsumerDisconnected,
    ConsumerEvicted,
    ConsumerUnregistered,
    LayoutChanged,
    SegmentsDrained,
    BrokerRestarted,
)


@dataclass(frozen=True)
class _State:
    """The controller's layout and the subscription's coordinator (None while the
    controller has none for it)."""

    layout: TopicLayout
    coordinator: SubscriptionCoordinator | None = None


@dataclass
class CoordinatorStateMachine:
    """One subscription of a scalable topic as its controller leader keeps it, moved by
    :meth:`apply`. Starts as the controller does before any consumer came: ``layout``, no
    coordinator. ``pulsar_version`` picks the rule (``"master"``, the default, or
    ``"5.0.0-M1"``); ``grace_period_ms`` is the broker's session grace period.

    Invariants: :attr:`coordinator`, when there is one, has the controller's
    :attr:`layout`; :meth:`assignment` is ``compute_assignment`` over the coordinator's
    layout, sessions and drained set (drains only while it orders children after their
    parents), under ``pulsar_version``. An event that cannot apply raises before anything
    changes; :attr:`events` holds those applied, in order."""

    subscription_name: str
    topic: TopicName
    layout: TopicLayout
    grace_period_ms: int = DEFAULT_GRACE_PERIOD_MS
    pulsar_version: str = SCALABLE_TOPICS.default
    coordinator: SubscriptionCoordinator | None = field(default=None, init=False)
    events: tuple[CoordinatorEvent, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        check_name("subscription_name", self.subscription_name)
        _check_topic(self.topic)
        check_instance("layout", self.layout, TopicLayout)
        check_int("grace_period_ms", self.grace_period_ms, minimum=0)
        SCALABLE_TOPICS.check(self.pulsar_version)

    def assignment(self) -> dict[str, ConsumerAssignment]:
        """Every session's assignment (in name order, a disconnected one's too); empty
        without a coordinator."""
        return {} if self.coordinator is None else self.coordinator.current_assignment()

    def connected_assignment(self) -> dict[str, ConsumerAssignment]:
        """The assignment each connected consumer holds: what the broker last sent it."""
        if self.coordinator is None:
            return {}
        sessions = self.coordinator.sessions
        return {n: a for n, a in self.assignment().items() if sessions[n].is_connected}

    def apply(self, event: CoordinatorEvent) -> dict[str, ConsumerAssignment]:
        """Moves the state by ``event``; every session's assignment after it."""
        if not isinstance(event, _EVENT_TYPES):
            raise ArgumentTypeError(
                f"event must be a coordinator event, got {type(event).__name__}", argument="event"
            )
        after = self._next(_State(self.layout, self.coordinator), event)
        self.layout, self.coordinator = after.layout, after.coordinator
        self.events = (*self.events, event)
        return self.assignment()

    def replay(self, events: Iterable[CoordinatorEvent]) -> list[dict[str, ConsumerAssignment]]:
        """:meth:`apply` of each event in order; the assignment after each. Events before
        one that cannot apply stay applied."""
        return [self.apply(event) for event in events]

    def _next(self, state: _State, event: CoordinatorEvent) -> _State:
        c = state.coordinator
        if isinstance(event, ConsumerRegistered):
            if c is None:
                c = self._new(state.layout, drain_checker=event.stream)
            elif event.stream and not c.drain_checker:
                c = c.install_drain_checker()
            c, _ = c.register_consumer(event.consumer_name, event.consumer_id)
            return replace(state, coordinator=c)
        if isinstance(event, ConsumerDisconnected):
            if c is None:
                return state
            return replace(
                state, coordinator=c.on_consumer_disconnect(event.consumer_name, event.at_ms)
            )
        if isinstance(event, ConsumerEvicted):
            session = None if c is None else c.sessions.get(event.consumer_name)
            # A session that reconnected before its timer fired is kept: M1 aborts the
            # eviction that raced with the reconnect.
            if c is None or session is None or session.is_connected:
                return state
            kept = {n: s for n, s in c.sessions.items() if n != event.consumer_name}
            return replace(state, coordinator=replace(c, sessions=kept))
        if isinstance(event, ConsumerUnregistered):
            return replace(state, coordinator=self._unregister(c, event))
        if isinstance(event, LayoutChanged):
            if c is not None:
                c, _ = c.on_layout_change(event.layout)
            return _State(event.layout, c)
        if isinstance(event, SegmentsDrained):
            return replace(state, coordinator=self._drained(state, event))
        restored, _ = self._new(event.layout, drain_checker=False).restore_consumers(
            sorted(event.consumer_names), event.at_ms
        )
        return _State(event.layout, restored)

    def _new(self, layout: TopicLayout, *, drain_checker: bool) -> SubscriptionCoordinator:
        return SubscriptionCoordinator(
            self.subscription_name,
            self.topic,
            layout,
            drain_checker=drain_checker,
            grace_period_ms=self.grace_period_ms,
            pulsar_version=self.pulsar_version,
        )

    def _unregister(
        self, c: SubscriptionCoordinator | None, event: ConsumerUnregistered
    ) -> SubscriptionCoordinator | None:
        if c is None:
            return None
        # M1 removes the session of that name whatever connection left; master keeps a
        # session whose consumer already rejoined on another connection.
        if self.pulsar_version != M1:
            after, _ = c.unregister_consumer(event.consumer_name, event.consumer_id)
        elif event.consumer_name in c.sessions:
            after = replace(
                c, sessions={n: s for n, s in c.sessions.items() if n != event.consumer_name}
            )
        else:
            after = c
        # After any leave the controller drops a coordinator left without sessions (one
        # emptied by evictions too), and with it what it knew of drains.
        return after if after.sessions else None

    def _drained(self, state: _State, event: SegmentsDrained) -> SubscriptionCoordinator:
        c = state.coordinator
        if c is None:
            raise InvalidArgument(
                "event: no coordinator polls for drains before a consumer registered",
                argument="event",
            )
        segments = state.layout.segments
        active = sorted(i for i in event.segment_ids if i in segments and segments[i].is_active)
        if active:
            raise InvalidArgument(
                f"event: segments {active} are active, only a sealed segment drains",
                argument="event",
            )
        # The poller asks about the layout it read when its round began; a GC prune may
        # have removed a segment since, and its drain then changes nothing.
        return c.mark_segments_drained(i for i in event.segment_ids if i in segments)


__all__ = [
    "BrokerRestarted",
    "ConsumerDisconnected",
    "ConsumerEvicted",
    "ConsumerRegistered",
    "ConsumerUnregistered",
    "CoordinatorEvent",
    "CoordinatorStateMachine",
    "LayoutChanged",
    "SegmentsDrained",
]

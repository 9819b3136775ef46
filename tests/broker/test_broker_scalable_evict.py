"""The 5.0.0-M1 coordinator as the state machine it is (issue 48), on a running M1 broker:
stream consumers killed near a split or a merge, evicted before or after the sealed parent
drained, and keyshared's ``CoordinatorStateMachine`` fed the events the broker reacted to.

Every live consumer runs in a JVM of its own (:class:`V5Client`), so that the JVM's log
holds every assignment that consumer applied, in order (M1's ``ScalableStreamConsumer``
logs the segment ids of each), except where two survivors share one client as in the
issue's report: their JVM's log then interleaves their assignments. The events are read
back from the broker itself (``coordinator_events`` of tests/support/broker_history.py):
each consumer registration
and each layout version (the admin's splits and merges, and the GC's prunes) from its
ZooKeeper, each disconnect, eviction and drain from its log. Each test checks that:

- after every event the model's assignment is the broker's: the assignments each consumer
  applied are, in order, those the model gives it after each event while it is connected
  (repeats aside), and at the end each consumer's assignment (``v5.assignment``: epoch,
  segments in order) is the model's, whose layout is the broker's;
- the events came in the order the test forces (drain then eviction, or eviction then
  drain), and the assignments after them are the ones written out in the test;
- nothing is lost and no key's message from a child comes before one from its parent; the
  counts (sent, delivered, lost, duplicates) and the event log go to the "under faults"
  summary.

What M1 does here, as these tests found it:

- its controller prunes a sealed segment from the layout once it drained: a GC every 60 s
  from the controller's start (M1's ``DEFAULT_GC_INTERVAL``, not configurable) prunes
  every sealed segment past its retention whose backlog is 0 for every subscription, and
  the broker's default retention (``defaultRetentionTimeInMinutes=0``) has passed at once.
  The prune is a layout change like a split: the pruned parent is handed to nobody and the
  deal shifts. That is issue 48's {a0: [0, 3, 4], a1: [1, 5]} (drain, prune, eviction),
  which keyshared's model gives when fed the prune; the issue's prediction {a0: [0, 4, 5],
  a1: [1, 2, 3]} is the unpruned layout's (test_evicted_after_the_drain);
- FINDING (:data:`HANDOVER_FINDING`): a segment handed from one live consumer to another
  while the old one has not let go yet (it is paused, or slow to take the update) is never
  read by the new one: its subscription fails (ConsumerBusy) and M1's consumer keeps the
  failure in its map and never retries; the segment's messages stay undelivered, though it
  is assigned to a live consumer that reads its other segments, until a later rebalance
  takes the segment away from it. keyshared's model (and the broker) assign it to the new
  owner all along. The other tests re-subscribe such a segment (``V5Client.resubscribe``)
  as the project's harness does; test_a_handover_to_a_paused_owner_leaves_the_segment_unread
  reproduces it every time;
- issue 48's undelivered messages of child 4 (:data:`DEAD_READER_FINDING`) are those the
  killed consumer read and acknowledged after the drain dealt it the child and before it
  died: the survivor that takes the child reads on from the dead consumer's
  acknowledgements, so the messages were delivered, to the consumer whose record of them
  died with it. test_evicted_after_the_drain_with_the_survivors_on_one_client[reading its
  children] reproduces it every time.

The topics live in public/manual, where the broker never splits or merges by itself. Every
wait has a timeout.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from support.broker_history import (
    MetadataHistory,
    applied_assignments,
    coordinator_events,
    layout_of,
    log_line_ms,
)
from support.faults import record_fault
from support.pulsar_broker import ScalableBroker, V5Client, scalable_path
from support.pulsar_oracle import MILESTONE, record
from test_broker_scalable_faults import (
    KEYS,
    QUIET_MS,
    SUB,
    Delivery,
    Outcome,
    Repeat,
    Stream,
    key_of,
)

import keyshared as ks
from keyshared.scalable import (
    ConsumerDisconnected,
    ConsumerEvicted,
    ConsumerRegistered,
    CoordinatorEvent,
    CoordinatorStateMachine,
    LayoutChanged,
    SegmentsDrained,
)

AREA = f"{MILESTONE} broker"
GRACE_S = 10
BROKER_SETTINGS = {"scalableTopicConsumerSessionGracePeriodSeconds": str(GRACE_S)}
# M1's ScalableTopicController.DEFAULT_GC_INTERVAL: the GC's first tick comes this long
# after the controller took the topic, then again every as long.
GC_INTERVAL_S = 60.0
# The sender's pace: a chunk of values every so often, while the consumers read.
CHUNK = 12
CHUNK_PAUSE_S = 0.5
# How long the handover test reads with the handed-over segment unread.
UNREAD_S = 8.0
HANDOVER_FINDING = (
    "a segment handed from one live consumer to another while the old one has not let go "
    "(paused, or slow to take the update) is never read by the new one: its subscription "
    "fails (ConsumerBusy, 'Exclusive consumer is already connected') and M1's "
    "ScalableStreamConsumer keeps the failed subscription and never retries it, so the "
    "segment's messages stay undelivered although it is assigned to a live consumer, until "
    "a later rebalance moves it"
)
DEAD_READER_FINDING = (
    "a consumer killed after the drain dealt it a child segment has read and acknowledged the "
    "child's first messages: the broker counts them consumed and the survivor that takes the "
    "child after the eviction reads on from there, so a record of what the dead consumer read "
    "that died with it shows them delivered to no one (issue 48's undelivered messages of "
    "child 4); M1 loses nothing"
)
LEADER_LOG = re.compile(
    r"ScalableTopicController - Leader election for scalable topic "
    r"\{(?=.*\bstate=Leading\b)(?=.*\btopic=(?P<topic>[^,}]*))"
)

Ids = dict[str, list[int]]


@pytest.fixture(scope="module")
def broker() -> Iterator[ScalableBroker]:
    """A broker of this module's own, for its grace period."""
    with ScalableBroker(settings=BROKER_SETTINGS) as running:
        yield running


@pytest.fixture(scope="module")
def producer(broker: ScalableBroker) -> Iterator[V5Client]:
    """The JVM that sends, and watches the broker's ZooKeeper."""
    with V5Client(broker, timeout_ms=60_000) as running:
        yield running


@pytest.fixture(scope="module")
def jvms(broker: ScalableBroker) -> Iterator[list[V5Client]]:
    """Two JVMs for the consumers no test kills, one consumer of each topic in each."""
    with V5Client(broker) as first, V5Client(broker) as second:
        yield [first, second]


class Run:
    """A :class:`Stream` whose broker records (its ZooKeeper under the topic) are watched
    from its creation, and what the test needs to replay them: the consumers' JVMs by
    name."""

    def __init__(self, broker: ScalableBroker, producer: V5Client, prefix: str, segments: int):
        self.broker, self.producer = broker, producer
        self.stream = Stream(broker, producer, prefix, segments)
        self.topic = self.stream.topic
        self.root = f"/topics/{scalable_path(self.topic)}"
        self.watch: int = producer.oracle.call(
            "metadata.watch", connect=broker.metadata_connect, path=self.root, timeout_ms=20_000
        )
        self.records: list[dict[str, Any]] = []
        self.jvms: dict[str, V5Client] = {}
        self.began_ms = int(time.time() * 1000)
        self.sender: Repeat | None = None

    def join(self, name: str, v5: V5Client, own_client: bool = False) -> None:
        self.jvms[name] = v5
        self.stream.join(name, v5, own_client)

    def begin(self, consumers: dict[str, V5Client], own_client: Sequence[str] = ()) -> None:
        """Joins the consumers (in order; those named in ``own_client`` each on a client of
        its own), has them read a first round of every key, and starts the sender."""
        for name, v5 in consumers.items():
            self.join(name, v5, name in own_client)
        self.stream.send(4 * KEYS)
        self.stream.drain()
        self.start_sending()

    def start_sending(self) -> None:
        def chunk() -> None:
            self.stream.send(CHUNK)
            time.sleep(CHUNK_PAUSE_S)

        self.sender = Repeat(chunk)

    def stop_sending(self) -> None:
        if self.sender is not None:
            self.sender.stop()
            self.sender = None

    def read_for(self, seconds: float, names: Sequence[str] | None = None) -> None:
        """Reads the consumers (``names``, else all) round after round for ``seconds``."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.stream.receive(names, budget_ms=1_000)

    def read_as_m1_leaves_it(self, seconds: float) -> None:
        """Reads every consumer round after round for ``seconds`` without subscribing
        again the segments M1's consumer failed to subscribe (:meth:`Stream.receive` does)."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for name, (v5, handle) in sorted(self.stream.consumers.items()):
                got = v5.oracle.call(
                    "v5.receive", handle=handle, quiet_ms=QUIET_MS, timeout_ms=1_000
                )
                self.stream.deliveries += [
                    Delivery(name, m["key"], int(m["value"]), m["segment_id"]) for m in got
                ]

    def read_until(
        self,
        done: Callable[[], bool],
        what: str,
        timeout_s: float = 40.0,
        names: Sequence[str] | None = None,
    ) -> None:
        """Reads the consumers (``names``, else all) until ``done()``."""
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"not {what} within {timeout_s} s"
            self.stream.receive(names, budget_ms=1_000)

    def gc_tick(self) -> float:
        """The monotonic time of the GC's first tick on the topic: :data:`GC_INTERVAL_S`
        after its controller's election, as the broker logged it."""
        for line in self.broker.log_lines():
            m = LEADER_LOG.search(line)
            if m and m["topic"] == self.topic:
                at_ms = log_line_ms(line, self.began_ms)
                return time.monotonic() + (at_ms - time.time() * 1000) / 1000 + GC_INTERVAL_S
        raise AssertionError(f"no controller took {self.topic}")

    def steps(self) -> list[tuple[int, list[CoordinatorEvent]]]:
        """The events the coordinator reacted to, in order (``coordinator_events``)."""
        self.records += self.producer.oracle.call("metadata.events", handle=self.watch)
        history = MetadataHistory(self.root, self.records)
        lines = self.broker.log_lines()
        return coordinator_events(lines, history, self.topic, SUB, self.began_ms)

    def close(self) -> None:
        self.stop_sending()
        self.producer.oracle.call("metadata.unwatch", handle=self.watch)
        self.stream.close()


def ids(assignment: dict[str, ks.scalable.ConsumerAssignment]) -> Ids:
    return {n: list(a.segment_ids) for n, a in assignment.items()}


def describe(before: ks.TopicLayout, events: Sequence[CoordinatorEvent]) -> str:
    """One step of the event log, in words: ``register a0``, ``split 2``, ``merge 1+2``,
    ``prune 2``, ``disconnect a2``, ``evict a2``, ``drained [2]`` (several in name order)."""
    words = []
    for event in events:
        if isinstance(event, ConsumerRegistered):
            words.append(f"register {event.consumer_name}")
        elif isinstance(event, ConsumerDisconnected):
            words.append(f"disconnect {event.consumer_name}")
        elif isinstance(event, ConsumerEvicted):
            words.append(f"evict {event.consumer_name}")
        elif isinstance(event, SegmentsDrained):
            words.append(f"drained {sorted(event.segment_ids)}")
        elif isinstance(event, LayoutChanged):
            words.append(_layout_change(before, event.layout))
        else:
            raise AssertionError(f"an event these tests do not make: {event}")
    # The events of one step came at once: their order within it is the log's, by chance.
    return ", ".join(sorted(words))


def _layout_change(before: ks.TopicLayout, after: ks.TopicLayout) -> str:
    gone = sorted(set(before.segments) - set(after.segments))
    if gone:
        return "prune " + "+".join(map(str, gone))
    sealed = sorted(
        i for i, s in after.segments.items() if s.is_sealed and before.segments[i].is_active
    )
    return ("split " if len(sealed) == 1 else "merge ") + "+".join(map(str, sealed))


class Replay:
    """keyshared's M1 coordinator fed a run's events, step by step: the assignment after
    each step, and each consumer's connected assignments in order."""

    def __init__(self, run: Run) -> None:
        self.steps = run.steps()
        first = MetadataHistory(run.root, run.records).versions()[0][1]
        self.machine = CoordinatorStateMachine(
            SUB,
            ks.TopicName.get(run.topic),
            layout_of(first),
            grace_period_ms=GRACE_S * 1000,
            pulsar_version=MILESTONE,
        )
        self.words: list[str] = []
        self.after: list[Ids] = []
        #: Each consumer's assignments while connected, repeats aside, each marked
        #: optional where it held only inside a step of several events (the broker may
        #: rebalance once for all of them).
        self.held: dict[str, list[tuple[frozenset[int], bool]]] = {}
        for _, events in self.steps:
            self.words.append(describe(self.machine.layout, events))
            for i, event in enumerate(events):
                self.machine.apply(event)
                for name, a in self.machine.connected_assignment().items():
                    held = self.held.setdefault(name, [])
                    segments = frozenset(a.segment_ids)
                    if not held or held[-1][0] != segments:
                        held.append((segments, i < len(events) - 1))
            self.after.append(ids(self.machine.assignment()))

    @property
    def log(self) -> str:
        return "; ".join(self.words)

    def path(self, since: int = 0) -> list[str]:
        """The steps from the ``since``-th on, in words."""
        return self.words[since:]

    def assignment_after(self, words: str) -> Ids:
        """The assignment after the step described as ``words`` (the first such)."""
        return self.after[self.words.index(words)]


def _append_new(seq: list[frozenset[int]], item: frozenset[int]) -> None:
    if not seq or seq[-1] != item:
        seq.append(item)


def matches(applied: list[frozenset[int]], held: list[tuple[frozenset[int], bool]]) -> bool:
    """Whether a consumer's applied assignments are the model's, in order, the optional
    ones applied or not."""
    i = 0
    for segments, optional in held:
        if i < len(applied) and applied[i] == segments:
            i += 1
        elif not optional:
            return False
    return i == len(applied)


def matches_merged(
    applied: list[frozenset[int]], held: dict[str, list[tuple[frozenset[int], bool]]]
) -> bool:
    """Whether the assignments applied in one JVM by several consumers (their log lines
    interleave and say not whose) are an interleaving of each consumer's model assignments
    in order, each applied any number of times (every rebalance sends every consumer its
    assignment), the optional ones applied or not."""
    names = sorted(held)

    def rest_optional(name: str, at: int) -> bool:
        return all(optional for _, optional in held[name][at + 1 :])

    @functools.cache
    def fits(i: int, at: tuple[int, ...]) -> bool:
        if i == len(applied):
            return all(rest_optional(n, a) for n, a in zip(names, at, strict=True))
        for k, name in enumerate(names):
            seq, a = held[name], at[k]
            if a >= 0 and seq[a][0] == applied[i] and fits(i + 1, at):
                return True
            for q in range(a + 1, len(seq)):
                if seq[q][0] == applied[i] and fits(i + 1, (*at[:k], q, *at[k + 1 :])):
                    return True
                if not seq[q][1]:
                    break
        return False

    return fits(0, (-1,) * len(names))


def check_replay(run: Run, replay: Replay, names: Sequence[str]) -> int:
    """Each consumer of ``names`` (each alone in its JVM) applied exactly the model's
    assignments after each step (repeats aside), and the live ones hold the model's
    assignment now (epoch and order too), on the broker's layout. How many assignments
    were compared."""
    compared = 0
    for name in names:
        applied: list[frozenset[int]] = []
        for a in applied_assignments(run.jvms[name].log_lines(), run.topic, SUB):
            _append_new(applied, a)
        held = replay.held[name]
        assert matches(applied, held), f"{name}: {applied} != {held}; events {replay.log}"
        compared += len(applied)
    assert replay.machine.layout == layout_of(run.broker.layout(run.topic))
    modelled = replay.machine.connected_assignment()
    for name, (v5, handle) in run.stream.consumers.items():
        epoch, segments = v5.assignment(handle)
        model = modelled[name]
        assert (epoch, [s for s, _, _ in segments]) == (model.layout_epoch, list(model.segment_ids))
        compared += 1
    return compared


def scenario(path: list[str], steps: list[str]) -> bool:
    """Whether ``path`` is ``steps``, then at most GC prunes (the GC's tick may come
    before a test ends)."""
    return path[: len(steps)] == steps and all(w.startswith("prune ") for w in path[len(steps) :])


def finish(
    run: Run,
    replay: Replay,
    kind: str,
    outcome: Outcome,
    order: list[str],
    compared: int,
    findings: Sequence[str] = (),
) -> None:
    """The test's line in the summaries: its counts, its event log, its findings."""
    record(f"{AREA} coordinator events", compared)
    record_fault(
        f"{MILESTONE} {kind}",
        faults=1,
        messages=len(run.stream.sent),
        delivered=len(outcome.copies),
        lost=len(outcome.lost),
        duplicates=outcome.duplicates,
        order_violations=len(order),
        findings=findings,
        events=replay.log,
    )


def segments_of(assignment: Ids) -> list[int]:
    return sorted(s for segments in assignment.values() for s in segments)


def whole_and_in_order(run: Run, *sealed: tuple[int, tuple[int, ...]]) -> tuple[Outcome, list[str]]:
    """The run's outcome and its order violations, each sealed parent's (``(parent,
    children)``) included; asserts that nothing was lost and that no key's message from a
    child came before one from its parent."""
    outcome = run.stream.outcome()
    order = outcome.violations
    for parent, children in sealed:
        order += run.stream.parent_before_children(parent, children)
    assert not outcome.lost
    assert order == []
    return outcome, order


# --- the scenario, in both orders ---------------------------------------------------


def test_evicted_after_the_drain(
    broker: ScalableBroker, producer: V5Client, jvms: list[V5Client]
) -> None:
    """Issue 48 as the operator ran it: three consumers on four segments (a2 in a JVM of its
    own), keys repeating, a producer sending; segment 2, a2's, is split, a2 reads it to its
    end and is killed. The parent drains within the grace period, the GC prunes it, then a2
    is evicted: drain, prune, eviction, each a rebalance, and after each the broker's
    assignment is the model's. The drain deals the children with a2's session still
    holding its share ({a0: [0, 2], a1: [1, 5], a2: [4, 3]}: 4 and 3 unread until the
    eviction); the prune hands the pruned parent to nobody; the eviction ends on issue 48's
    {a0: [0, 4, 3], a1: [1, 5]}, where the unpruned layout gives {a0: [0, 4, 5], a1: [1, 2,
    3]}. Nothing is lost; a key's messages from the parent come before its children's."""
    run = Run(broker, producer, "drain-first", 4)
    try:
        with V5Client(broker) as victim:
            run.begin({"a0": jvms[0], "a1": jvms[1], "a2": victim})
            tick = run.gc_tick()
            # The split comes so that the drain is reported (2 s after it) and the GC ticks
            # while a2's session is in its grace period.
            run.read_for(tick - GRACE_S - 2 - time.monotonic())
            run.stream.mirror.split(2)
            run.read_until(lambda: run.stream.backlog(2) == 0, "segment 2 read to its end")
            run.read_for(tick - GRACE_S + 3 - time.monotonic())
            run.stream.kill("a2")
            run.read_until(lambda: "evict a2" in Replay(run).words, "a2 evicted", 40)
            run.read_for(2)
            run.stop_sending()
            run.stream.drain()
            replay = Replay(run)
            compared = check_replay(run, replay, ["a0", "a1", "a2"])
        split_at = replay.words.index("split 2")
        path = [w for w in replay.path(split_at) if w != "disconnect a2"]
        assert path == ["split 2", "drained [2]", "prune 2", "evict a2"], replay.log
        assert replay.assignment_after("drained [2]") == {"a0": [0, 2], "a1": [1, 5], "a2": [4, 3]}
        assert replay.assignment_after("prune 2") == {"a0": [0, 5], "a1": [1, 3], "a2": [4]}
        assert replay.assignment_after("evict a2") == {"a0": [0, 4, 3], "a1": [1, 5]}
        unpruned = ks.compute_assignment(
            run.stream.mirror.layout,
            ks.TopicName.get(run.topic),
            ["a0", "a1"],
            {2},
            pulsar_version=MILESTONE,
        )
        assert ids(unpruned) == {"a0": [0, 4, 5], "a1": [1, 2, 3]}
        outcome, order = whole_and_in_order(run, (2, (4, 5)))
    finally:
        run.close()
    finish(run, replay, "stream consumer evicted after the drain", outcome, order, compared)


@pytest.mark.parametrize(
    "killed", ["before its children", "subscribing its children", "reading its children"]
)
def test_evicted_after_the_drain_with_the_survivors_on_one_client(
    broker: ScalableBroker, producer: V5Client, jvms: list[V5Client], killed: str
) -> None:
    """Issue 48's run as the report gives it: the survivors a0 and a1 on one client in one
    JVM, a2 in another, a producer sending; segment 2, a2's, is split, a2 reads it to its
    end and is killed: at once, before the drain deals it the children (the report's
    timing); while it subscribes its children after the drain dealt them (its subscription
    of 4 in flight); or once it has read and acknowledged the first messages of child 4.
    Then drain, the GC's prune and the eviction, as in the report: the JVM's applied
    assignments are those the model gives a0 and a1 after each event, interleaved; the
    survivors end on the report's {a0: [0, 4, 3], a1: [1, 5]}, read as M1 leaves it (no
    segment subscribed again); every segment's subscription stands and nothing is lost.

    The last case reproduces the report's undelivered messages of child 4 (see
    :data:`DEAD_READER_FINDING`): the survivors never get the messages of 4 that a2
    acknowledged before it died, a prefix of the segment, so a record of a2's reads that
    died with its JVM leaves them delivered to no one."""
    run = Run(broker, producer, f"one-client-{killed.split()[0]}", 4)
    findings: list[str] = []
    try:
        with V5Client(broker) as victim:
            run.begin({"a0": jvms[0], "a1": jvms[0], "a2": victim})
            tick = run.gc_tick()
            # The drain comes 2 s after the split and the GC's tick within a2's grace period.
            run.read_for(tick - GRACE_S + 1 - time.monotonic())
            run.stream.mirror.split(2)
            run.read_until(lambda: run.stream.backlog(2) == 0, "segment 2 read", names=["a2"])
            if killed != "before its children":
                wait_for_log(
                    victim,
                    lambda line: "Subscribing" in line and "a2-seg-4" in line,
                    "a2 subscribing 4",
                )
            if killed == "reading its children":
                run.read_until(lambda: bool(read_by(run, "a2", 4)), "4 read by a2", names=["a2"])
                # Its acknowledgements reach the broker (the client groups them for 100 ms).
                run.read_for(1, ["a2"])
            run.stream.kill("a2")
            run.read_until(lambda: "evict a2" in Replay(run).words, "a2 evicted", 40)
            run.read_as_m1_leaves_it(2)
            run.stop_sending()
            run.read_as_m1_leaves_it(3)
            replay = Replay(run)
            applied = applied_assignments(jvms[0].log_lines(), run.topic, SUB)
            held = {n: replay.held[n] for n in ("a0", "a1")}
            assert matches_merged(applied, held), f"{applied} != {held}; events {replay.log}"
            compared = len(applied)
            subscriptions = {n: v5.segments(h) for n, (v5, h) in run.stream.consumers.items()}
        split_at = replay.words.index("split 2")
        drain_then_kill = ["split 2", "drained [2]", "disconnect a2", "prune 2", "evict a2"]
        kill_then_drain = ["split 2", "disconnect a2", "drained [2]", "prune 2", "evict a2"]
        path = replay.path(split_at)
        if killed == "before its children":
            assert path == kill_then_drain, replay.log
        elif killed == "reading its children":
            assert path == drain_then_kill, replay.log
        else:
            assert path in (drain_then_kill, kill_then_drain), replay.log
        assert replay.assignment_after("drained [2]") == {"a0": [0, 2], "a1": [1, 5], "a2": [4, 3]}
        assert replay.assignment_after("evict a2") == {"a0": [0, 4, 3], "a1": [1, 5]}
        for name, model in replay.machine.connected_assignment().items():
            v5, handle = run.stream.consumers[name]
            epoch, segments = v5.assignment(handle)
            assert (epoch, [i for i, _, _ in segments]) == (
                model.layout_epoch,
                list(model.segment_ids),
            )
            assert sorted(subscriptions[name]) == sorted(model.segment_ids), subscriptions
            assert set(subscriptions[name].values()) == {"connected"}, subscriptions
            compared += 1
        in_4 = [v for v, segment in run.stream.sent.items() if segment == 4]
        assert in_4, "nothing was sent to child 4"
        outcome, order = whole_and_in_order(run, (2, (4, 5)))
        survivors_read = read_by(run, "a0", 4) | read_by(run, "a1", 4)
        unread = [v for v in in_4 if v not in survivors_read]
        if killed == "reading its children":
            # The survivors read 4 from where a2's acknowledgements left it.
            assert unread and unread == in_4[: len(unread)], unread
            assert set(unread) <= read_by(run, "a2", 4), unread
            keys = ", ".join(sorted({key_of(v) for v in unread}))
            findings.append(
                f"{DEAD_READER_FINDING}: {len(unread)} messages of child 4 (keys {keys}) "
                "acknowledged by a2 before its kill, never delivered to the survivors"
            )
        else:
            assert unread == [], unread
    finally:
        run.close()
    finish(
        run,
        replay,
        f"stream consumer killed {killed}, survivors on one client",
        outcome,
        order,
        compared,
        findings,
    )


def read_by(run: Run, name: str, segment: int) -> set[int]:
    """The values ``name`` got from ``segment``."""
    return {
        d.value for d in run.stream.deliveries if d.consumer == name and d.segment_id == segment
    }


def test_evicted_before_the_drain(
    broker: ScalableBroker, producer: V5Client, jvms: list[V5Client]
) -> None:
    """The same three consumers, but a2 has stopped reading when its segment 2 is split and
    it is killed: the parent keeps a2's backlog, so the eviction comes first and hands the
    sealed parent to a0 with the children withheld ({a0: [0, 2], a1: [1, 3]}); a0 reads
    it, the drain deals the children ({a0: [0, 4, 5], a1: [1, 2, 3]}). After each event
    the broker's assignment is the model's; nothing is lost, and a key's messages from the
    parent come before its children's."""
    run = Run(broker, producer, "evict-first", 4)
    try:
        with V5Client(broker) as victim:
            run.begin({"a0": jvms[0], "a1": jvms[1], "a2": victim})
            run.read_for(2, ["a0", "a1"])
            assert run.stream.backlog(2) > 0
            run.stream.mirror.split(2)
            run.stream.kill("a2")
            run.read_until(lambda: "drained [2]" in Replay(run).words, "segment 2 drained", 60)
            run.read_for(2)
            run.stop_sending()
            run.stream.drain()
            replay = Replay(run)
            compared = check_replay(run, replay, ["a0", "a1", "a2"])
        split_at = replay.words.index("split 2")
        assert scenario(
            replay.path(split_at), ["split 2", "disconnect a2", "evict a2", "drained [2]"]
        ), replay.log
        assert replay.assignment_after("split 2") == {"a0": [0, 3], "a1": [1], "a2": [2]}
        assert replay.assignment_after("evict a2") == {"a0": [0, 2], "a1": [1, 3]}
        assert replay.assignment_after("drained [2]") == {"a0": [0, 4, 5], "a1": [1, 2, 3]}
        outcome, order = whole_and_in_order(run, (2, (4, 5)))
    finally:
        run.close()
    finish(run, replay, "stream consumer evicted before the drain", outcome, order, compared)


def test_evicted_during_a_merge(
    broker: ScalableBroker, producer: V5Client, jvms: list[V5Client]
) -> None:
    """Three consumers on four segments; b2 has stopped reading its segment 2 when 1 and 2
    are merged into 4, and is killed. 1 (b1's, read all along) drains first, which moves
    nobody: 4 waits for 2 as well. The eviction hands the sealed 2 to b0 ({b0: [0, 2], b1:
    [1, 3]}); once b0 read it, the drain deals 4 ({b0: [0, 4, 3], b1: [1, 2]}: M1 keeps
    dealing the drained parents). After each event the broker's assignment is the model's;
    nothing is lost, and a key's messages from either parent come before the merged
    segment's."""
    run = Run(broker, producer, "merge", 4)
    try:
        with V5Client(broker) as victim:
            run.begin({"b0": jvms[0], "b1": jvms[1], "b2": victim})
            run.read_for(2, ["b0", "b1"])
            assert run.stream.backlog(2) > 0
            run.stream.mirror.merge(1, 2)
            run.read_until(
                lambda: run.stream.backlog(1) == 0, "segment 1 read to its end", names=["b0", "b1"]
            )
            run.stream.kill("b2")
            run.read_until(lambda: "drained [2]" in Replay(run).words, "segment 2 drained", 60)
            run.read_for(2)
            run.stop_sending()
            run.stream.drain()
            replay = Replay(run)
            compared = check_replay(run, replay, ["b0", "b1", "b2"])
        merge_at = replay.words.index("merge 1+2")
        assert scenario(
            replay.path(merge_at),
            ["merge 1+2", "disconnect b2", "drained [1]", "evict b2", "drained [2]"],
        ), replay.log
        held = {"b0": [0, 3], "b1": [1], "b2": [2]}
        assert replay.assignment_after("merge 1+2") == held
        assert replay.assignment_after("drained [1]") == held
        assert replay.assignment_after("evict b2") == {"b0": [0, 2], "b1": [1, 3]}
        assert replay.assignment_after("drained [2]") == {"b0": [0, 4, 3], "b1": [1, 2]}
        outcome, order = whole_and_in_order(run, (1, (4,)), (2, (4,)))
    finally:
        run.close()
    finish(run, replay, "stream consumer evicted during a merge", outcome, order, compared)


def test_two_consumers_evicted_at_once(
    broker: ScalableBroker, producer: V5Client, jvms: list[V5Client]
) -> None:
    """Four consumers on four segments, c2 and c3 in one JVM; c3 has stopped reading its
    segment 3 when it is split, and the JVM is killed. Both sessions drop together and are
    evicted together: one step, after which c0 and c1 hold the four segments ({c0: [0, 2],
    c1: [1, 3]}: the children wait for 3); once c1 read 3 the drain deals them ({c0: [0, 2,
    3], c1: [1, 4, 5]}). After each step the broker's assignment is the model's; nothing is
    lost, and a key's messages from the parent come before its children's."""
    run = Run(broker, producer, "two", 4)
    try:
        with V5Client(broker) as victims:
            run.begin({"c0": jvms[0], "c1": jvms[1], "c2": victims, "c3": victims}, ["c3"])
            run.read_for(2, ["c0", "c1", "c2"])
            assert run.stream.backlog(3) > 0
            run.stream.mirror.split(3)
            run.stream.kill("c2")
            del run.stream.consumers["c3"]
            run.read_until(lambda: "drained [3]" in Replay(run).words, "segment 3 drained", 60)
            run.read_for(2)
            run.stop_sending()
            run.stream.drain()
            replay = Replay(run)
            compared = check_replay(run, replay, ["c0", "c1"])
        split_at = replay.words.index("split 3")
        assert scenario(
            replay.path(split_at),
            ["split 3", "disconnect c2, disconnect c3", "evict c2, evict c3", "drained [3]"],
        ), replay.log
        assert replay.assignment_after("evict c2, evict c3") == {"c0": [0, 2], "c1": [1, 3]}
        assert replay.assignment_after("drained [3]") == {"c0": [0, 2, 3], "c1": [1, 4, 5]}
        outcome, order = whole_and_in_order(run, (3, (4, 5)))
    finally:
        run.close()
    finish(run, replay, "two stream consumers evicted at once", outcome, order, compared)


# --- the finding ---------------------------------------------------------------------------


def test_a_handover_to_a_paused_owner_leaves_the_segment_unread(
    broker: ScalableBroker, producer: V5Client, jvms: list[V5Client]
) -> None:
    """Issue 48's undelivered child messages, every time. Segment 2 is split and drains at
    once, which deals its child 5 to a1; a2 is killed, and a1's JVM is paused (SIGSTOP, as
    in a long garbage collection) from shortly before a2's eviction to shortly after. The
    eviction hands 5 from a1 to a0 ({a0: [0, 4, 5], a1: [1, 2, 3]}, the model's and the
    broker's alike); a0 subscribes 5 while the paused a1 still holds it, the broker answers
    ConsumerBusy once a1 answers its liveness check, and M1's consumer keeps that failure:
    while a0 goes on reading 0 and 4, every message sent to 5 after a1 let go stays
    undelivered (the finding, asserted exactly). Subscribing 5 again, as the project's
    harness does, delivers them: nothing is lost in the end."""
    run = Run(broker, producer, "handover", 4)
    findings = []
    try:
        with V5Client(broker) as victim:
            run.begin({"a0": jvms[0], "a1": jvms[1], "a2": victim})
            run.stream.mirror.split(2)
            run.read_until(lambda: "drained [2]" in Replay(run).words, "segment 2 drained")
            run.read_for(1)
            run.stream.kill("a2")
            run.read_until(lambda: "disconnect a2" in Replay(run).words, "a2 disconnected")
            dropped_at = next(at for at, e in run.steps() if isinstance(e[0], ConsumerDisconnected))
            evicted_at = dropped_at / 1000 + GRACE_S
            # Nothing read near the eviction: a read holds the JVM up to a second, and the
            # pause must start before the eviction and end within the broker's liveness
            # check (5 s), or the broker drops a1's connection instead of refusing a0.
            run.read_for(evicted_at - 4 - time.time())
            time.sleep(max(0.0, evicted_at - 1.5 - time.time()))
            jvms[1].pause()
            try:
                time.sleep(max(0.0, evicted_at + 1.5 - time.time()))
            finally:
                jvms[1].resume()
            local = scalable_path(run.topic)
            segment_5 = f"consumerName=a0-seg-5, subscription={SUB}, topic=segment://{local}/"
            wait_for_log(
                jvms[0],
                lambda line: "Failed to subscribe to topic" in line and segment_5 in line,
                "a0's subscription of 5 refused",
            )
            assert any(
                "ConsumerBusyException" in line and f"topic={run.topic}" in line
                for line in jvms[0].log_lines()
            )
            # a1 sent its close of 5 before it answered the liveness check: every message
            # whose send began after the in-flight one ended reached 5 with a1 gone.
            run.read_as_m1_leaves_it(2 * CHUNK_PAUSE_S + 1)
            let_go = max(run.stream.sent) + 1
            # Read as M1 leaves it until shortly before the GC's tick, whose prune of 2
            # would move 5 back to a1 (the later rebalance that ends the finding).
            window = min(UNREAD_S, run.gc_tick() - 2 - time.monotonic())
            assert window > 2 * CHUNK_PAUSE_S + 4, f"{window:.1f} s left before the GC's tick"
            run.read_as_m1_leaves_it(window - 3)
            run.stop_sending()
            run.read_as_m1_leaves_it(3)
            stuck = {v for v, s in run.stream.sent.items() if s == 5 and v >= let_go}
            delivered = {d.value for d in run.stream.deliveries}
            later = {v for v in run.stream.sent if v >= let_go}
            replay = Replay(run)
            compared = check_replay(run, replay, ["a0", "a1", "a2"])
            assert replay.assignment_after("evict a2") == {"a0": [0, 4, 5], "a1": [1, 2, 3]}
            assert stuck, "nothing was sent to 5 after the handover"
            assert stuck.isdisjoint(delivered), [
                d for d in run.stream.deliveries if d.value in stuck
            ]
            assert (later - stuck) - delivered == set()
            a0_read = {
                d.segment_id
                for d in run.stream.deliveries
                if d.consumer == "a0" and d.value >= let_go
            }
            assert a0_read == {0, 4}
            v5, handle = run.stream.consumers["a0"]
            assert v5.resubscribe(handle) == [5]
            findings.append(
                f"{HANDOVER_FINDING}: {len(stuck)} messages of child segment 5 undelivered for "
                f"{window:.0f} s while a0 read 0 and 4, delivered once 5 was subscribed again "
                "(reproducer: test_a_handover_to_a_paused_owner_leaves_the_segment_unread)"
            )
            run.stream.drain()
        outcome, order = whole_and_in_order(run, (2, (4, 5)))
    finally:
        run.close()
    finish(
        run,
        replay,
        "stream segment handed over to a paused owner",
        outcome,
        order,
        compared,
        findings,
    )


def wait_for_log(
    v5: V5Client, found: Callable[[str], bool], what: str, timeout_s: float = 20.0
) -> None:
    """Waits until a line of ``v5``'s JVM log is ``found``."""
    deadline = time.monotonic() + timeout_s
    while not any(found(line) for line in v5.log_lines()):
        assert time.monotonic() < deadline, f"not {what} within {timeout_s} s"
        time.sleep(0.1)

"""A verify run on a cluster: its topic, its producer, its consumer processes and the event
log the checker reads (:mod:`keyshared.verify.record`).

:class:`Run` owns everything the run makes and removes it at the end (the topic, unless the
user keeps it; on a topic the user named, only the run's own subscriptions). Each scenario
(:mod:`keyshared.verify.scenarios`) drives the run through its methods, and every wait is
bounded by the scenario's deadline (``--duration``): past it, :class:`OutOfTime` ends the
scenario, and what it had not seen acknowledged counts as lost.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from keyshared.connection import ClusterConnection
from keyshared.errors import InvalidArgument
from keyshared.scalable.topic_name import TopicDomain, TopicName
from keyshared.verify.consumer import ConsumerSettings, now_ms, quiet_logger
from keyshared.verify.processes import ConsumerFailed, ConsumerProcess
from keyshared.verify.record import (
    NOT_PARTITIONED,
    Event,
    Kind,
    Leave,
    Message,
    RunRecord,
    ScenarioRecord,
    Stats,
)

#: How long every consumer must stay silent for "nothing more is coming" to hold, in s.
QUIET_S = 1.5
POLL_S = 0.05
#: How many messages one publish event holds at most (the model reads each as one read).
PUBLISH_CHUNK = 1000


class OutOfTime(Exception):
    """A scenario's wait ran past its deadline (``--duration``)."""


class RunFailed(RuntimeError):
    """The run cannot go on: the cluster refused something it needs, or a consumer process
    failed. The message says what, never a secret."""


@dataclass(frozen=True)
class Workload:
    """The seeded keyed workload of each scenario: ``messages`` per scenario over ``keys``
    keys, sent at ``rate`` messages a second (0: as fast as the broker takes them), to
    ``consumers`` consumers; ``seed`` makes the keys and their order reproducible."""

    messages: int = 600
    keys: int = 60
    consumers: int = 3
    rate: float = 0.0
    seed: int = 1


@dataclass
class Run:
    """One verify run on ``connection``: the ``record`` it fills and the settings every
    scenario shares. Use :meth:`open` and :meth:`close` (or ``with``)."""

    connection: ClusterConnection
    record: RunRecord
    workload: Workload
    duration_s: float
    keep_alive_s: float
    keep: bool = False
    existing_topic: bool = False
    progress: Callable[[str], None] = lambda _: None
    #: What the reader should know: a scenario that ran out of time.
    notes: list[str] = field(default_factory=list)
    _consumers: list[ConsumerProcess] = field(default_factory=list)
    _producer: Any = None
    _client: Any = None
    _created: bool = False
    _scenario: ScenarioRecord | None = None
    _events: list[Event] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _deadline: float = 0.0
    _labels: dict[str, int] = field(default_factory=dict)

    # --- the topic --------------------------------------------------------------------------

    @property
    def topic(self) -> TopicName:
        return TopicName.get(self.record.topic)

    def _topic_path(self, suffix: str = "", partition: int = NOT_PARTITIONED) -> str:
        name = self.topic
        local = name.local_name if partition < 0 else f"{name.local_name}-partition-{partition}"
        return f"persistent/{name.namespace}/{local}{suffix}"

    def open(self) -> None:
        """Makes the topic (or checks the user's may be used) and the producer's client."""
        name = self.topic
        exists = self._exists()
        if exists and not self.existing_topic:
            raise RunFailed(
                f"{name} already exists: verify makes its own topic; pass --existing-topic to"
                " run on this one (verify then adds subscriptions of its own and removes only"
                " those)"
            )
        if not exists:
            if self.record.partitions:
                self._admin("PUT", self._topic_path("/partitions"), self.record.partitions)
            else:
                self._admin("PUT", self._topic_path())
            self._created = True
        else:
            self.record.partitions = self._partition_count()
        try:
            self._client = self.connection.pulsar_client(logger=quiet_logger())
            self._producer = self._client.create_producer(
                str(name),
                batching_enabled=False,
                block_if_queue_full=True,
                max_pending_messages=1000,
            )
        except BaseException:
            # The broker's binary port refused what its admin port took: the topic goes.
            self.close()
            raise

    def _exists(self) -> bool:
        try:
            return self._partition_count() > 0 or bool(
                self._admin("GET", self._topic_path("/stats"))
            )
        except OSError as e:
            if getattr(e, "code", None) == 404:
                return False
            raise

    def _partition_count(self) -> int:
        data = json.loads(self._admin("GET", self._topic_path("/partitions")))
        return int(data.get("partitions", 0))

    def _admin(self, method: str, path: str, body: Any = None) -> bytes:
        return self.connection.admin(method, f"/admin/v2/{path}", body)

    def close(self) -> None:
        """Ends every consumer process, closes the client and removes what the run made."""
        for consumer in self._consumers:
            consumer.discard()
        self._consumers.clear()
        with contextlib.suppress(Exception):
            if self._client is not None:
                self._client.close()
        self._client = self._producer = None
        if self.keep:
            return
        with contextlib.suppress(OSError):
            if self._created:
                suffix = "/partitions" if self.record.partitions else ""
                self._admin("DELETE", self._topic_path(f"{suffix}?force=true"))
            else:
                for s in self.record.scenarios:
                    path = f"/subscription/{s.subscription}?force=true"
                    self._admin("DELETE", self._topic_path(path))

    def __enter__(self) -> Run:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- scenarios ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def scenario(self, name: str) -> Iterator[ScenarioRecord]:
        """Runs one scenario on a subscription of its own; its record, whose events are
        the log sorted by moment once the scenario ends (every consumer closed)."""
        subscription = f"keyshared-verify-{name}-{uuid.uuid4().hex[:6]}"
        self._scenario = ScenarioRecord(name, subscription)
        self.record.scenarios.append(self._scenario)
        self._events = [(Kind.SCENARIO.value, now_ms(), name)]
        self._labels = {}
        self._rng = random.Random(f"{self.workload.seed}:{name}")
        self._deadline = time.monotonic() + self.duration_s
        self.progress(f"{name}: starting")
        try:
            yield self._scenario
        except OutOfTime as e:
            self.notes.append(
                f"{name} ran out of time after {self.duration_s:g} s waiting for {e}: what it"
                " had not seen acknowledged counts as lost (raise --duration on a slow cluster)"
            )
        except BaseException:
            # Ctrl-C, or the cluster failing the run: no graceful close to wait for.
            for consumer in self._consumers:
                consumer.discard()
            self._consumers.clear()
            raise
        finally:
            for consumer in list(self._consumers):
                # A consumer that cannot close cleanly is ended; the scenario's verdict
                # still stands on what was recorded.
                try:
                    self.leave(consumer, Leave.CLOSE)
                except (ConsumerFailed, OSError):
                    consumer.discard()
            with self._lock:
                self._scenario.events = sorted(self._events, key=lambda e: e[1])
            self.progress(f"{name}: {self._summary()}")

    def _summary(self) -> str:
        assert self._scenario is not None
        acked = sum(1 for e in self._events if e[0] == Kind.ACK.value)
        return f"{len(self._scenario.messages)} sent, {acked} acknowledged"

    def _add(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def left_s(self) -> float:
        """Seconds left before the scenario's deadline."""
        return self._deadline - time.monotonic()

    # --- consumers ----------------------------------------------------------------------------

    def join(self, name: str, mode: str = "ack") -> ConsumerProcess:
        """A consumer process subscribes; its join is at the moment its subscribe returned
        (the broker adds a consumer before it answers), once the broker lists it."""
        assert self._scenario is not None
        self._labels[name] = self._labels.get(name, 0) + 1
        label = name if self._labels[name] == 1 else f"{name}#{self._labels[name]}"
        settings = ConsumerSettings(
            topic=str(self.topic),
            subscription=self._scenario.subscription,
            name=name,
            mode=mode,
            allow_out_of_order=self.record.allow_out_of_order,
        )
        consumer = ConsumerProcess(label, settings, self.connection, self._add)
        self._consumers.append(consumer)
        self._add((Kind.JOIN.value, consumer.ready_ms, label, name))
        self.await_listed(
            lambda names: names.count(name) >= self._live_named(name), f"{name} listed"
        )
        return consumer

    def _live_named(self, name: str) -> int:
        return sum(1 for c in self._consumers if c.name == name)

    def leave(self, consumer: ConsumerProcess, how: Leave, at_ms: float | None = None) -> None:
        """The consumer leaves ``how``: closed or killed here (a stalled one was dropped by
        the broker already), and its leave recorded once the broker no longer lists it."""
        if how is Leave.CLOSE:
            at_ms = consumer.close()
        elif how is Leave.CRASH:
            at_ms = consumer.kill()
        assert at_ms is not None
        self._consumers.remove(consumer)
        self._add((Kind.LEAVE.value, at_ms, consumer.label, how.value))
        with contextlib.suppress(OutOfTime):
            self.await_listed(
                lambda names: names.count(consumer.name) <= self._live_named(consumer.name),
                f"{consumer.label} gone",
            )
        if how is Leave.TIMEOUT:
            consumer.discard()

    def stall(self, consumer: ConsumerProcess) -> None:
        """Stops the consumer's process until the broker drops it for not answering its
        keep-alive pings, then ends the process. The leave's moment is when the broker
        dropped it: no later than the first redelivery elsewhere of what it held."""
        stopped = consumer.stop()
        self._add((Kind.STALL.value, stopped, consumer.label))
        name = consumer.name
        others = self._live_named(name) - 1
        self.await_listed(
            lambda names: names.count(name) <= others,
            f"{consumer.label} dropped after the broker's keep-alive ({self.keep_alive_s:g} s)",
        )
        observed = now_ms()
        held = set(consumer.received)
        with self._lock:
            redelivered = [
                e[1]
                for e in self._events
                if e[0] == Kind.DELIVER.value
                and e[1] > stopped
                and e[2] != consumer.label
                and e[3] in held
            ]
        # Strictly before the first redelivery: the log is sorted by moment, and a tie
        # would leave the redelivery before the leave that caused it.
        self.leave(consumer, Leave.TIMEOUT, min([observed, *(r - 0.001 for r in redelivered)]))

    def pause(self, consumer: ConsumerProcess, seconds: float) -> None:
        """Stops the consumer's process for ``seconds`` (within the keep-alive: the broker
        keeps it) and continues it."""
        self._add((Kind.STALL.value, consumer.stop(), consumer.label))
        time.sleep(seconds)
        self._add((Kind.RESUME.value, consumer.resume(), consumer.label))

    def hold(self, consumer: ConsumerProcess) -> None:
        """The consumer stops acknowledging: it holds what it receives."""
        consumer.set_mode("hold")
        self._add((Kind.STALL.value, now_ms(), consumer.label))

    def release(self, consumers: Iterable[ConsumerProcess], mode: str = "ack") -> None:
        """Each consumer acknowledges what it holds and goes on in ``mode``."""
        for consumer in consumers:
            consumer.set_mode(mode)
            consumer.ack_held()
            self._add((Kind.RESUME.value, now_ms(), consumer.label))

    @property
    def consumers(self) -> list[ConsumerProcess]:
        return list(self._consumers)

    # --- messages ------------------------------------------------------------------------------

    def publish(self, count: int) -> range:
        """Sends ``count`` keyed messages (keys drawn from the seeded workload), each
        acknowledged by the broker before the next publish event; their indexes."""
        assert self._scenario is not None
        messages = self._scenario.messages
        first = len(messages)
        keys = [f"key-{self._rng.randrange(self.workload.keys)}" for _ in range(count)]
        for start in range(0, count, PUBLISH_CHUNK):
            self._publish_chunk(first + start, keys[start : start + PUBLISH_CHUNK])
        return range(first, first + count)

    def _publish_chunk(self, first: int, keys: Sequence[str]) -> None:
        assert self._scenario is not None
        import pulsar

        began = now_ms()
        sent: dict[int, tuple[Any, float]] = {}
        failed: list[str] = []

        def done(index: int) -> Callable[[Any, Any], None]:
            def callback(result: Any, message_id: Any) -> None:
                if result == pulsar.Result.Ok:
                    sent[index] = (message_id, now_ms())
                else:
                    failed.append(f"message {index}: {result}")

            return callback

        for i, key in enumerate(keys):
            self._pace(first + i)
            self._producer.send_async(str(first + i).encode(), done(first + i), partition_key=key)
        self._producer.flush()
        if failed:
            raise RunFailed(f"the broker refused {len(failed)} sends, first {failed[0]}")
        for i, key in enumerate(keys):
            mid, at = sent[first + i]
            self._scenario.messages.append(
                Message(
                    first + i,
                    key,
                    _partition(mid, self.record.partitions),
                    mid.ledger_id(),
                    mid.entry_id(),
                    at,
                )
            )
        self._add((Kind.PUBLISH.value, began, first, len(keys)))
        self.progress(f"{self._scenario.name}: {first + len(keys)} sent")

    def _pace(self, index: int) -> None:
        if self.workload.rate > 0 and index % 10 == 0:
            assert self._scenario is not None
            behind = index / self.workload.rate - (time.monotonic() - self._rate_start)
            if behind > 0:
                time.sleep(behind)

    @property
    def _rate_start(self) -> float:
        return self._deadline - self.duration_s

    # --- waiting ---------------------------------------------------------------------------------

    def wait_delivered(self, indexes: Iterable[int]) -> None:
        """Until every message of ``indexes`` reached some consumer, then a quiet spell."""
        wanted = set(indexes)
        self._until(lambda: wanted <= self._seen(Kind.DELIVER), f"{len(wanted)} messages delivered")
        self.quiet()

    def wait_acked(self, indexes: Iterable[int]) -> None:
        """Until every message of ``indexes`` was acknowledged, then a quiet spell."""
        wanted = set(indexes)
        self._until(lambda: wanted <= self._seen(Kind.ACK), f"{len(wanted)} messages acknowledged")
        self.quiet()

    def _seen(self, kind: Kind) -> set[int]:
        with self._lock:
            return {e[3] for e in self._events if e[0] == kind.value}

    def quiet(self) -> None:
        """Until no consumer reported anything for QUIET_S."""
        last, since = -1, time.monotonic()
        while time.monotonic() - since < QUIET_S:
            with self._lock:
                count = len(self._events)
            if count != last:
                last, since = count, time.monotonic()
            self._check_deadline("the consumers to fall quiet")
            time.sleep(POLL_S)

    def _until(self, done: Callable[[], bool], what: str) -> None:
        while not done():
            self._check_deadline(what)
            time.sleep(POLL_S)

    def _check_deadline(self, what: str) -> None:
        if time.monotonic() > self._deadline:
            raise OutOfTime(what)

    # --- the broker's stats --------------------------------------------------------------------

    def subscription_stats(self) -> list[dict[str, Any]]:
        """The subscription's stats on each partition (one for a topic without)."""
        assert self._scenario is not None
        parts = range(self.record.partitions) if self.record.partitions else [NOT_PARTITIONED]
        out = []
        for p in parts:
            stats = json.loads(self._admin("GET", self._topic_path("/stats", p)))
            out.append(
                stats.get("subscriptions", {}).get(self._scenario.subscription, {"consumers": []})
            )
        return out

    def await_listed(self, done: Callable[[list[str]], bool], what: str) -> None:
        """Polls the stats until ``done(the consumer names listed)`` holds on every
        partition (a name once per consumer of that name)."""
        while not all(
            done([c.get("consumerName", "") for c in s["consumers"]])
            for s in self.subscription_stats()
        ):
            self._check_deadline(what)
            time.sleep(0.1)

    def stats(self) -> None:
        """Records the broker's ranges and draining hashes of every consumer, once quiet."""
        self.quiet()
        at = now_ms()
        by_name: Stats = {}
        parts = range(self.record.partitions) if self.record.partitions else [NOT_PARTITIONED]
        for p, sub in zip(parts, self.subscription_stats(), strict=True):
            for c in sub["consumers"]:
                by_name.setdefault(c["consumerName"], {})[p] = {
                    "ranges": [list(r) for r in c.get("keyHashRangeArrays") or []],
                    "draining": [
                        [d["hash"], d["unackMsgs"]] for d in c.get("drainingHashes") or []
                    ],
                }
        self._add((Kind.STATS.value, at, by_name))


def _partition(message_id: Any, partitions: int) -> int:
    return int(message_id.partition()) if partitions else NOT_PARTITIONED


@dataclass(frozen=True)
class VerifyOptions:
    """What a verify run does: the ``scenarios`` in order (names of
    :data:`keyshared.verify.scenarios.SCENARIOS`), on ``topic`` (None: a new
    ``persistent://NAMESPACE/keyshared-verify-<random>``, with ``partitions`` partitions
    when above 0), which must not exist unless ``existing_topic``, removed at the end unless
    ``keep``; the ``workload``; ``duration_s``, the bound on each scenario in s; the broker's
    ``keep_alive_s`` (its keepAliveIntervalSeconds, which the stall scenario waits out);
    the release to check against (``pulsar_version``; None: the broker's own, or the nearest
    release keyshared has a profile for); whether the consumers subscribe with
    ``allowOutOfOrderDelivery`` (``allow_out_of_order``, which gives up Key_Shared's order:
    for seeing a violation caught); and Pulsar's consistent-hashing replica ``points``."""

    scenarios: tuple[str, ...] = ("steady",)
    namespace: str = "public/default"
    topic: str | None = None
    partitions: int = 0
    existing_topic: bool = False
    keep: bool = False
    workload: Workload = field(default_factory=Workload)
    duration_s: float = 120.0
    keep_alive_s: float = 30.0
    pulsar_version: str | None = None
    allow_out_of_order: bool = False
    points: int = 100

    def topic_name(self) -> str:
        """The topic the run uses; InvalidArgument for one that is not persistent."""
        if self.topic is not None:
            name = TopicName.get(self.topic)
            if name.domain is not TopicDomain.persistent:
                raise InvalidArgument(
                    f"--topic {name} is not a persistent:// topic: verify covers persistent"
                    " topics (scalable topic:// ones need Pulsar 5's Java client)",
                    argument="--topic",
                )
            return str(name)
        return f"persistent://{self.namespace}/keyshared-verify-{uuid.uuid4().hex[:10]}"

    def total_messages(self) -> int:
        return self.workload.messages * len(self.scenarios)


__all__ = [
    "POLL_S",
    "PUBLISH_CHUNK",
    "QUIET_S",
    "OutOfTime",
    "Run",
    "RunFailed",
    "VerifyOptions",
    "Workload",
]

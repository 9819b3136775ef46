"""The simulated clients: producers that write keyed messages through the bucketed batcher,
and consumers that process what they are sent, one entry at a time, at a given rate.

Both draw from seeded NumPy generators, so that a scenario and a seed give one run.
Virtual time is in integer microseconds (``*_us``); the kernels are given milliseconds.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from keyshared.scalable.batching import BucketedBatcher, EntryBatch
from keyshared.scalable.layout import TopicLayout
from keyshared.simulate.model import Delivery
from keyshared.simulate.scenario import BatchingSpec, ConsumerSpec, ProducerSpec

_I64 = npt.NDArray[np.int64]
Schedule = Callable[[int, Callable[..., None], tuple[Any, ...]], None]

#: Below this many messages a tick, adding them one by one beats ``add_many``'s fixed cost.
_SMALL_BATCH = 24


class KeySpace:
    """The keys of one topic: each prefix used by its producers with as many keys as the
    largest count asked for it. Key ids number them densely, prefix by prefix."""

    def __init__(self, producers: Sequence[ProducerSpec]) -> None:
        counts: dict[str, int] = {}
        for producer in producers:
            prefix = producer.keys.prefix
            counts[prefix] = max(counts.get(prefix, 0), producer.keys.count)
        self.base: dict[str, int] = {}
        names: list[npt.NDArray[np.bytes_]] = []
        size = 0
        for prefix, count in counts.items():
            self.base[prefix] = size
            digits = np.arange(count).astype(np.bytes_)
            names.append(np.char.add(prefix.encode("utf-8"), digits))
            size += count
        #: Every key as UTF-8 bytes, by key id (the batcher hashes these).
        self.names: npt.NDArray[np.bytes_] = (
            np.concatenate(names) if names else np.empty(0, dtype=np.bytes_)
        )

    @property
    def size(self) -> int:
        return len(self.names)


class ProducerSim:
    """One producer: Poisson arrivals at its rate while active, keys drawn from its
    distribution, payload sizes uniform in its range, batched per (segment, bucket)."""

    def __init__(
        self,
        spec: ProducerSpec,
        keys: KeySpace,
        batching: BatchingSpec,
        layout: TopicLayout,
        rng: np.random.Generator,
        duration_ms: int,
    ) -> None:
        self.spec = spec
        self._keys = keys
        self._base = keys.base[spec.keys.prefix]
        self._rng = rng
        self._stop_ms = min(spec.stop_ms if spec.stop_ms is not None else duration_ms, duration_ms)
        self._batcher = BucketedBatcher(
            layout, max_messages=batching.max_messages, max_bytes=batching.max_bytes
        )
        self._cdf: npt.NDArray[np.float64] | None = None
        if spec.keys.distribution == "zipf":
            ranks = np.arange(1, spec.keys.count + 1, dtype=np.float64)
            weights = ranks ** -float(spec.keys.zipf_exponent)
            self._cdf = np.cumsum(weights) / weights.sum()

    @property
    def stop_ms(self) -> int:
        return self._stop_ms

    def produce(self, start_ms: int, tick_ms: int) -> list[tuple[EntryBatch, _I64]]:
        """The batches of the messages sent during ``[start_ms, start_ms + tick_ms)``, each
        with the key ids of its messages. Batches close at the end of the tick."""
        span = min(start_ms + tick_ms, self._stop_ms) - max(start_ms, self.spec.start_ms)
        if span <= 0:
            return []
        n = int(self._rng.poisson(self.spec.rate_msg_s * span / 1000))
        if n == 0:
            return []
        key_ids = self._base + self._draw_keys(n)
        payload = self.spec.payload
        sizes = self._rng.integers(payload.min_bytes, payload.max_bytes + 1, n, dtype=np.int64)
        first = self._batcher.next_sequence_id
        names = self._keys.names[key_ids]
        if n < _SMALL_BATCH:
            # Equivalent to add_many (the batcher guarantees it), and cheaper for a few.
            batches = []
            for key, size in zip(names.tolist(), sizes.tolist(), strict=True):
                batches += self._batcher.add(key, size, start_ms)
        else:
            batches = self._batcher.add_many(names, sizes, start_ms)
        batches += self._batcher.flush()
        return [(b, key_ids[b.sequence_ids - first]) for b in batches]

    def _draw_keys(self, n: int) -> _I64:
        count = self.spec.keys.count
        if self._cdf is None:
            return self._rng.integers(0, count, n, dtype=np.int64)
        drawn = np.searchsorted(self._cdf, self._rng.random(n), side="right")
        return np.minimum(drawn, count - 1).astype(np.int64)

    def update_layout(self, layout: TopicLayout) -> None:
        """Redirects the producer after a split, merge or rollover (its batches are all
        closed between ticks, so nothing is flushed)."""
        self._batcher.update_layout(layout)


class ConsumerSim:
    """One consumer: it processes its deliveries in arrival order, one at a time, each in
    ``count / rate`` seconds, then acks it (or nacks it, with the spec's probability). A
    stall stops the clock of the entry in progress until it resumes; leaving abandons what
    it holds. Utilization is busy time over connected time."""

    def __init__(
        self,
        consumer_id: int,
        name: str,
        spec: ConsumerSpec,
        rng: np.random.Generator,
        schedule: Schedule,
    ) -> None:
        self.consumer_id = consumer_id
        self.name = name
        self.rate = spec.rate_msg_s
        self._nack_probability = spec.nack_probability
        self._rng = rng
        self._schedule = schedule
        self.connected = False
        self.stalled = False
        self.queue: deque[Delivery] = deque()
        self.current: Delivery | None = None
        self._left_us = 0
        self._started_us = 0
        self._token = 0
        self.joined_us: int | None = None
        self.left_us: int | None = None
        self.busy_us = 0
        self.processed_messages = 0
        self.nacks = 0

    @property
    def busy(self) -> bool:
        return self.current is not None and not self.stalled

    def connect(self, now_us: int) -> None:
        self.connected = True
        self.joined_us = now_us

    def receive(self, now_us: int, delivery: Delivery) -> None:
        self.queue.append(delivery)
        self._start_next(now_us)

    def _start_next(self, now_us: int) -> None:
        if self.stalled or self.current is not None or not self.queue:
            return
        delivery = self.current = self.queue.popleft()
        self._left_us = math.ceil(delivery.entry.count * 1_000_000 / self.rate)
        self._run(now_us)

    def _run(self, now_us: int) -> None:
        assert self.current is not None
        self._token += 1
        self._started_us = now_us
        self.current.dispatcher.processing_started(self.consumer_id)
        self._schedule(now_us + self._left_us, self._finish, (self._token,))

    def _pause(self, now_us: int) -> None:
        """Stops the clock of the entry in progress (its completion event goes stale)."""
        assert self.current is not None
        self._token += 1
        self.busy_us += now_us - self._started_us
        self._left_us -= now_us - self._started_us
        self.current.dispatcher.processing_stopped(self.consumer_id)

    def _finish(self, now_us: int, token: int) -> None:
        if token != self._token:
            return
        delivery = self.current
        assert delivery is not None
        self._pause(now_us)
        self.current = None
        if self._nack_probability and self._rng.random() < self._nack_probability:
            self.nacks += 1
            delivery.dispatcher.nack(now_us, delivery)
        else:
            self.processed_messages += delivery.entry.count
            delivery.dispatcher.ack(now_us, delivery)
        self._start_next(now_us)

    def set_rate(self, rate_msg_s: float) -> None:
        """Slows down or speeds up; the entry in progress keeps its pace."""
        self.rate = rate_msg_s

    def stall(self, now_us: int) -> None:
        if self.stalled:
            return
        if self.busy:
            self._pause(now_us)
        self.stalled = True

    def resume(self, now_us: int) -> None:
        if not self.stalled:
            return
        self.stalled = False
        if self.current is not None:
            self._run(now_us)
        else:
            self._start_next(now_us)

    def disconnect(self, now_us: int) -> list[Delivery]:
        """Leaves; returns the deliveries it held, unacked (the entry in progress first)."""
        if self.busy:
            self._pause(now_us)
        held = ([self.current] if self.current is not None else []) + list(self.queue)
        self.current = None
        self.queue.clear()
        self.connected = False
        self.left_us = now_us
        return held

    def busy_total_us(self, now_us: int) -> int:
        """Time spent processing, up to ``now_us``."""
        running = now_us - self._started_us if self.busy else 0
        return self.busy_us + running

    def connected_us(self, now_us: int) -> int:
        """How long it has been connected, up to ``now_us``."""
        if self.joined_us is None:
            return 0
        return (self.left_us if self.left_us is not None else now_us) - self.joined_us


__all__ = ["ConsumerSim", "Delivery", "KeySpace", "ProducerSim"]

"""Entry-bucketed batching (producer) and entry routing (broker)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import keyshared as ks
from keyshared import BucketedBatcher, TopicLayout
from keyshared.scalable import EntryBatch

LAYOUT = TopicLayout.initial(2, bucket_budget=8).split_segment(0, 0)


class ModelBatcher:
    """The plainest batcher that could work: one list per (segment, bucket), checked message
    by message, expiry by scanning every open batch. On 5.0.0-M1 a key's segment holds the
    low half of its hash, and a segment is one bucket."""

    def __init__(
        self,
        layout: TopicLayout,
        max_messages: int,
        max_bytes: int,
        max_delay_ms: int,
        pulsar_version: str = "master",
    ):
        self.layout, self.limits = layout, (max_messages, max_bytes, max_delay_ms)
        self.m1 = pulsar_version == "5.0.0-M1"
        self.open: dict[tuple[int, int], list] = {}
        self.seq = 0

    def _close(self, group: tuple[int, int]) -> tuple:
        ids, sizes, hashes, opened = self.open.pop(group)
        return (*group, min(hashes), max(hashes), ids, sum(sizes), opened)

    def poll(self, now: int) -> list[tuple]:
        expired = [g for g, b in self.open.items() if b[3] + self.limits[2] <= now]
        return [self._close(g) for g in expired]

    def add(self, key: str, size: int, now: int) -> list[tuple]:
        out = self.poll(now)
        h = ks.key_hash(key)
        if self.m1:
            group = (self.layout.find_active_segment(h & 0xFFFF).segment_id, 0)
        else:
            seg = self.layout.find_active_segment(h >> 16)
            group = (seg.segment_id, ks.bucket_index(h & 0xFFFF, seg.bucket_splits))
        batch = self.open.get(group)
        if batch is not None and sum(batch[1]) + size > self.limits[1]:
            out.append(self._close(group))
        batch = self.open.setdefault(group, [[], [], [], now])
        batch[0].append(self.seq)
        batch[1].append(size)
        batch[2].append(h & 0xFFFF)
        self.seq += 1
        if len(batch[0]) >= self.limits[0] or sum(batch[1]) >= self.limits[1]:
            out.append(self._close(group))
        return out

    def flush(self) -> list[tuple]:
        return [self._close(g) for g in list(self.open)]


def as_tuples(batches: list[EntryBatch]) -> list[tuple]:
    return [
        (
            b.segment_id,
            b.bucket,
            b.entry_hash_min,
            b.entry_hash_max,
            b.sequence_ids.tolist(),
            b.size_bytes,
            b.opened_at_ms,
        )
        for b in batches
    ]


def check_batches(layout: TopicLayout, batches: list[EntryBatch], keys: list[str]) -> None:
    """No batch mixes segments or buckets, and each carries its true hashB min and max."""
    for batch in batches:
        ids, buckets = layout.route_keys([keys[i] for i in batch.sequence_ids.tolist()])
        assert set(ids.tolist()) == {batch.segment_id}
        assert set(buckets.tolist()) == {batch.bucket}
        hash_b = [ks.routing.bucket_hash(keys[i]) for i in batch.sequence_ids.tolist()]
        assert (batch.entry_hash_min, batch.entry_hash_max) == (min(hash_b), max(hash_b))
        seg = layout.segments[batch.segment_id]
        assert (
            ks.routing.entry_bucket(batch.entry_hash_min, batch.entry_hash_max, seg.bucket_splits)
            == batch.bucket
        )


# --- single messages -----------------------------------------------------------------------


def test_count_limit_flushes_a_full_batch_at_once() -> None:
    layout = TopicLayout.initial(1, bucket_budget=1)
    batcher = BucketedBatcher(layout, max_messages=3, max_bytes=1000, max_delay_ms=10)
    assert batcher.add("a", 1, 0) == [] and batcher.add("b", 1, 0) == []
    (batch,) = batcher.add("c", 1, 0)
    assert batch.sequence_ids.tolist() == [0, 1, 2] and batch.num_messages == 3
    assert (batch.segment_id, batch.bucket, batch.size_bytes, batch.opened_at_ms) == (0, 0, 3, 0)
    hb = [ks.routing.bucket_hash(k) for k in "abc"]
    assert (batch.entry_hash_min, batch.entry_hash_max) == (min(hb), max(hb))
    assert batcher.open_batches == 0 and batcher.next_sequence_id == 3


def test_byte_limit_flushes_before_an_overflowing_message_and_at_the_limit() -> None:
    layout = TopicLayout.initial(1, bucket_budget=1)
    batcher = BucketedBatcher(layout, max_messages=100, max_bytes=10, max_delay_ms=10)
    assert batcher.add("a", 6, 0) == []
    (first,) = batcher.add("b", 5, 0)  # 6 + 5 > 10: "a" leaves alone, "b" opens a batch
    assert first.sequence_ids.tolist() == [0]
    (second,) = batcher.add("c", 5, 0)  # 5 + 5 == 10: full
    assert second.sequence_ids.tolist() == [1, 2] and second.size_bytes == 10
    (alone,) = batcher.add("d", 50, 0)  # larger than a batch: travels alone
    assert alone.sequence_ids.tolist() == [3] and alone.size_bytes == 50


def test_delay_flushes_at_exactly_max_delay() -> None:
    layout = TopicLayout.initial(1, bucket_budget=1)
    batcher = BucketedBatcher(layout, max_messages=100, max_bytes=10_000, max_delay_ms=5)
    batcher.add("a", 1, 100)
    batcher.add("b", 1, 102)
    assert batcher.poll(104) == []
    (batch,) = batcher.poll(105)
    assert batch.sequence_ids.tolist() == [0, 1] and batch.opened_at_ms == 100
    assert batcher.open_batches == 0


def test_expired_batches_flush_oldest_first_on_any_call() -> None:
    layout = TopicLayout.initial(4, bucket_budget=4)
    batcher = BucketedBatcher(layout, max_messages=100, max_bytes=10_000, max_delay_ms=3)
    out = []
    for t in range(60):
        for batch in batcher.add(f"k{t}", 1, t):
            assert batch.opened_at_ms + 3 <= t
            out.append(batch)
    out += batcher.flush()
    assert len(out) > 4
    assert [b.opened_at_ms for b in out] == sorted(b.opened_at_ms for b in out)


def test_time_must_not_go_backwards() -> None:
    batcher = BucketedBatcher(LAYOUT)
    batcher.add("a", 1, 10)
    with pytest.raises(ValueError, match="now_ms"):
        batcher.add("b", 1, 9)
    with pytest.raises(ValueError, match="now_ms"):
        batcher.poll(3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_messages": 0}, "max_messages"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"max_delay_ms": 0}, "max_delay_ms"),
    ],
)
def test_limits_are_validated(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BucketedBatcher(LAYOUT, **kwargs)
    with pytest.raises(TypeError, match="layout"):
        BucketedBatcher("layout")  # type: ignore[arg-type]


def test_bad_messages_are_refused_naming_the_argument() -> None:
    batcher = BucketedBatcher(LAYOUT)
    with pytest.raises(ValueError, match="payload_size"):
        batcher.add("a", -1, 0)
    with pytest.raises(ValueError, match="payload_sizes must hold one size per key"):
        batcher.add_many(["a", "b"], [1], 0)
    with pytest.raises(ValueError, match=r"payload_sizes must not be negative \(index 1\)"):
        batcher.add_many(["a", "b"], [1, -1], 0)
    with pytest.raises(TypeError, match="payload_sizes must be integers"):
        batcher.add_many(["a"], [1.5], 0)
    with pytest.raises(ValueError, match="1"):
        batcher.add_many(["a", None], [1, 1], 0)
    assert batcher.next_sequence_id == 0


def test_a_refused_message_loses_no_expired_batch() -> None:
    batcher = BucketedBatcher(LAYOUT, max_delay_ms=2)
    batcher.add("a", 1, 0)
    with pytest.raises(TypeError):
        batcher.add(None, 1, 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        batcher.add_many(["b", None], [1, 1], 5)
    with pytest.raises(ValueError, match="now_ms"):
        batcher.add("b", 1, -1)
    (batch,) = batcher.poll(5)
    assert batch.sequence_ids.tolist() == [0]


def test_update_layout_flushes_the_old_segments_batches() -> None:
    batcher = BucketedBatcher(LAYOUT, max_delay_ms=1000)
    batcher.add_many([f"k{i}" for i in range(20)], [1] * 20, 0)
    new_layout = LAYOUT.split_segment(1, 5)
    flushed = batcher.update_layout(new_layout)
    assert sum(b.num_messages for b in flushed) == 20 and batcher.open_batches == 0
    assert batcher.layout is new_layout
    batcher.add("k0", 1, 5)
    assert batcher.flush()[0].segment_id in {s.segment_id for s in new_layout.active_segments()}


# --- many messages at once -------------------------------------------------------------------


def test_add_many_routes_and_stamps_like_add() -> None:
    keys = [f"order-{i}" for i in range(5000)]
    sizes = [(i * 37) % 300 for i in range(5000)]
    one = BucketedBatcher(LAYOUT, max_messages=50, max_bytes=4000, max_delay_ms=3)
    many = BucketedBatcher(LAYOUT, max_messages=50, max_bytes=4000, max_delay_ms=3)
    singles = [b for k, s in zip(keys, sizes, strict=True) for b in one.add(k, s, 7)]
    batched = many.add_many(keys, sizes, 7)
    assert as_tuples(batched) == as_tuples(singles)
    assert as_tuples(many.flush()) == as_tuples(one.flush())
    check_batches(LAYOUT, singles + batched, keys)


def test_add_many_takes_arrow_and_numpy_inputs() -> None:
    keys = [f"user-{i}" for i in range(300)]
    sizes = np.arange(300, dtype=np.int32)
    a = BucketedBatcher(LAYOUT, max_messages=7)
    b = BucketedBatcher(LAYOUT, max_messages=7)
    out_a = a.add_many(pa.array(keys, pa.large_string()), sizes, 0) + a.flush()
    out_b = b.add_many(np.array(keys, dtype=object), sizes.tolist(), 0) + b.flush()
    assert as_tuples(out_a) == as_tuples(out_b)
    assert sorted(i for x in out_a for i in x.sequence_ids.tolist()) == list(range(300))


def test_add_many_with_nothing_only_polls() -> None:
    batcher = BucketedBatcher(LAYOUT, max_delay_ms=2)
    batcher.add("a", 1, 0)
    assert batcher.add_many([], [], 1) == []
    assert len(batcher.add_many([], np.array([], dtype=np.int64), 2)) == 1


def test_batches_hold_read_only_sequence_ids() -> None:
    batcher = BucketedBatcher(LAYOUT, max_messages=2)
    out = (
        batcher.add_many(["a", "b", "c", "d"], [1] * 4, 0)
        + batcher.add("e", 1, 0)
        + batcher.flush()
    )
    for batch in out:
        with pytest.raises(ValueError):
            batch.sequence_ids[0] = 99


messages = st.lists(
    st.tuples(st.integers(0, 40).map(lambda i: f"k{i}"), st.sampled_from([0, 1, 3, 9, 25, 60])),
    max_size=40,
)


@settings(max_examples=150)
@given(
    calls=st.lists(st.tuples(st.integers(0, 3), messages), max_size=6),
    max_messages=st.integers(1, 6),
    max_bytes=st.integers(1, 50),
    max_delay_ms=st.integers(1, 4),
)
def test_add_many_is_exactly_many_adds(
    calls: list, max_messages: int, max_bytes: int, max_delay_ms: int
) -> None:
    limits = {"max_messages": max_messages, "max_bytes": max_bytes, "max_delay_ms": max_delay_ms}
    one, many = BucketedBatcher(LAYOUT, **limits), BucketedBatcher(LAYOUT, **limits)
    now = 0
    for step, batch in calls:
        now += step
        keys, sizes = [k for k, _ in batch], [s for _, s in batch]
        singles = one.poll(now)
        for key, size in batch:
            singles += one.add(key, size, now)
        assert as_tuples(many.add_many(keys, sizes, now)) == as_tuples(singles)
    assert as_tuples(many.flush()) == as_tuples(one.flush())


@settings(max_examples=100)
@given(
    calls=st.lists(st.tuples(st.integers(0, 3), messages), max_size=6),
    max_messages=st.integers(1, 6),
    max_bytes=st.integers(1, 50),
)
def test_m1_batches_per_segment_by_the_low_half(
    calls: list, max_messages: int, max_bytes: int
) -> None:
    limits = {"max_messages": max_messages, "max_bytes": max_bytes, "max_delay_ms": 2}
    one = BucketedBatcher(LAYOUT, **limits, pulsar_version="5.0.0-M1")
    many = BucketedBatcher(LAYOUT, **limits, pulsar_version="5.0.0-M1")
    model = ModelBatcher(LAYOUT, max_messages, max_bytes, 2, "5.0.0-M1")
    now, out = 0, []
    for step, batch in calls:
        now += step
        singles, expected = one.poll(now), model.poll(now)
        for key, size in batch:
            singles += one.add(key, size, now)
            expected += model.add(key, size, now)
        assert as_tuples(singles) == expected
        assert as_tuples(many.add_many([k for k, _ in batch], [s for _, s in batch], now)) == (
            expected
        )
        out += singles
    final = one.flush()
    assert as_tuples(final) == model.flush()
    assert as_tuples(many.flush()) == as_tuples(final)
    assert {b.bucket for b in out + final} <= {0}


def test_a_batcher_names_an_unknown_release() -> None:
    with pytest.raises(ValueError, match=r"pulsar_version must be one of 'master', '5\.0\.0-M1'"):
        BucketedBatcher(LAYOUT, pulsar_version="5.0")
    with pytest.raises(ValueError, match=r"pulsar_version '4\.0': scalable topics need"):
        BucketedBatcher(LAYOUT, pulsar_version="4.0")
    assert BucketedBatcher(LAYOUT).pulsar_version == "master"


class BatcherMachine(RuleBasedStateMachine):
    """The batcher against :class:`ModelBatcher`: the same batches, in the same order, and no
    message lost or duplicated."""

    def __init__(self) -> None:
        super().__init__()
        limits = (4, 40, 3)
        self.real = BucketedBatcher(LAYOUT, max_messages=4, max_bytes=40, max_delay_ms=3)
        self.model = ModelBatcher(LAYOUT, *limits)
        self.now = 0
        self.keys: list[str] = []
        self.out: list[EntryBatch] = []

    def _compare(self, real: list[EntryBatch], model: list[tuple]) -> None:
        assert as_tuples(real) == model
        self.out.extend(real)

    @rule(key=st.integers(0, 30), size=st.sampled_from([0, 2, 10, 39, 41]), wait=st.integers(0, 2))
    def add(self, key: int, size: int, wait: int) -> None:
        self.now += wait
        self.keys.append(f"key-{key}")
        self._compare(
            self.real.add(self.keys[-1], size, self.now),
            self.model.add(self.keys[-1], size, self.now),
        )

    @rule(batch=messages, wait=st.integers(0, 2))
    def add_many(self, batch: list, wait: int) -> None:
        self.now += wait
        model = self.model.poll(self.now)
        for key, size in batch:
            self.keys.append(key)
            model += self.model.add(key, size, self.now)
        self._compare(
            self.real.add_many([k for k, _ in batch], [s for _, s in batch], self.now), model
        )

    @rule(wait=st.integers(0, 4))
    def poll(self, wait: int) -> None:
        self.now += wait
        self._compare(self.real.poll(self.now), self.model.poll(self.now))

    @rule()
    def flush(self) -> None:
        self._compare(self.real.flush(), self.model.flush())

    @invariant()
    def nothing_is_lost_mixed_or_over_the_limits(self) -> None:
        seen = [i for b in self.out for i in b.sequence_ids.tolist()]
        pending = sum(len(b[0]) for b in self.model.open.values())
        assert len(seen) == len(set(seen)) and len(seen) + pending == len(self.keys)
        assert self.real.next_sequence_id == len(self.keys)
        for batch in self.out[-5:]:
            assert batch.num_messages <= 4
            assert batch.size_bytes <= 40 or batch.num_messages == 1
        check_batches(LAYOUT, self.out[-5:], self.keys)


BatcherMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30)
TestBatcherMachine = BatcherMachine.TestCase


# --- broker-side entry routing ---------------------------------------------------------------


def test_route_entry_goes_range_to_bucket_to_owner() -> None:
    seg = TopicLayout.initial(1, bucket_budget=4).segments[0]
    owners = ks.scalable.contiguous_assignment([10, 20], 4)
    assert ks.scalable.route_entry(seg, 0x0005, 0x3FFF, owners) == (0, 10)
    assert ks.scalable.route_entry(seg, 0xC000, 0xC000, owners) == (3, 20)
    with pytest.raises(ValueError):
        ks.scalable.route_entry(seg, 0x3FFF, 0x4000, owners)
    nobody = ks.scalable.contiguous_assignment([], 4)
    assert ks.scalable.route_entry(seg, 0x9000, 0x9001, nobody) == (2, None)
    with pytest.raises(ValueError, match="assignment has 2 buckets but segment 0 has 4"):
        ks.scalable.route_entry(seg, 1, 1, ks.scalable.contiguous_assignment([1], 2))


def test_route_entries_marks_straddling_entries() -> None:
    seg = TopicLayout.initial(1, bucket_budget=4).segments[0]
    owners = ks.scalable.contiguous_assignment([10, 20, 30], 4)
    lo = np.array([0, 0x3FFF, 0x8000, 0xFFFF], dtype=np.uint16)
    hi = np.array([5, 0x4000, 0xBFFF, 0xFFFF], dtype=np.uint16)
    buckets, who = ks.scalable.route_entries(seg, lo, hi, owners)
    assert buckets.tolist() == [0, -1, 2, 3] and who.tolist() == [10, -1, 30, 30]
    with pytest.raises(ValueError, match="above entry_hash_max at index 0"):
        ks.scalable.route_entries(seg, np.array([9]), np.array([8]), owners)
    with pytest.raises(ValueError, match="shapes"):
        ks.scalable.route_entries(seg, np.array([1, 2]), np.array([3]), owners)


def test_batcher_output_routes_whole_to_one_consumer() -> None:
    batcher = BucketedBatcher(LAYOUT, max_messages=16)
    keys = [f"device-{i}" for i in range(2000)]
    batches = batcher.add_many(keys, [10] * len(keys), 0) + batcher.flush()
    for seg in LAYOUT.active_segments():
        mine = [b for b in batches if b.segment_id == seg.segment_id]
        owners = ks.scalable.contiguous_assignment([1, 2, 3], seg.bucket_count)
        lo = np.array([b.entry_hash_min for b in mine])
        hi = np.array([b.entry_hash_max for b in mine])
        buckets, _ = ks.scalable.route_entries(seg, lo, hi, owners)
        assert buckets.tolist() == [b.bucket for b in mine]

"""The policy layer: one auto-scale decision, and bucketed batching against plain Python.

The batcher groups measure messages per second end to end (hash, route, group, cut into
batches, stamp min/max). Both batchers get the same key list; sizes come as the NumPy array
a bulk caller holds for keyshared and as a list for the Python loop, its natural input.
"""

import bisect
from collections.abc import Callable
from typing import Any

import mmh3
import numpy as np
import pytest

import keyshared as ks
from keyshared import AutoScalePolicy, BucketedBatcher, TopicLayout
from keyshared.scalable import SegmentLoadSample, SegmentLoadStats

NOW = 10_000_000


def churned_layout() -> TopicLayout:
    """64 active segments with a history: splits, merges and rollovers under them."""
    layout = TopicLayout.initial(16, bucket_budget=64)
    for seg in layout.active_segments():
        layout = layout.split_segment(seg.segment_id, 1_000)
    active = layout.active_segments()
    for a, b in zip(active[0:16:2], active[1:16:2], strict=True):
        layout = layout.merge_segments(a.segment_id, b.segment_id, 2_000)
    while len(layout.active_segments()) < 64:
        widest = max(layout.active_segments(), key=lambda s: s.hash_range.size)
        layout = layout.split_segment(widest.segment_id, 3_000)
    for seg in layout.active_segments()[::8]:
        layout = layout.rebucket_segment(seg.segment_id, 4, 4_000)
    return layout


@pytest.mark.benchmark(group="policy-decide")
@pytest.mark.parametrize("lib", ["keyshared"])
def test_decide_64_segments_32_subscriptions(benchmark: Any, lib: str) -> None:
    layout = churned_layout()
    active = layout.active_segments()
    assert len(active) == 64
    rng = np.random.default_rng(5)
    # Every segment in the dead band but a few cold ones: every rule runs to the end.
    load = {
        seg.segment_id: SegmentLoadSample(
            SegmentLoadStats(*(rng.uniform(0.2, 0.9, 4) * (10_000, 5e7, 50_000, 2.5e8))),
            NOW - 400_000,
        )
        for seg in active
    }
    for seg in active[::9]:
        load[seg.segment_id] = SegmentLoadSample(SegmentLoadStats(10, 1e3, 10, 1e3), NOW - 400_000)
    consumers = {f"sub-{i}": int(rng.integers(1, 60)) for i in range(32)}
    policy = AutoScalePolicy()
    decision = benchmark(ks.decide, layout, load, consumers, policy, NOW, NOW - 30_000)
    assert decision.reason


def python_batcher(
    layout: TopicLayout, keys: list[str], sizes: list[int], now_ms: int
) -> list[tuple[tuple[int, int], list[int], int, int, int, int]]:
    """A straightforward bucketed batcher: hash, bisect to segment and bucket, append to the
    group's open batch, flush on the count and byte limits (Pulsar's defaults)."""
    max_messages, max_bytes = ks.scalable.DEFAULT_MAX_MESSAGES, ks.scalable.DEFAULT_MAX_BYTES
    active = layout.active_segments()
    starts = [s.hash_range.start for s in active]
    ids = [s.segment_id for s in active]
    splits = [list(s.bucket_splits) for s in active]
    open_batches: dict[tuple[int, int], list[Any]] = {}
    out = []
    for seq, (key, size) in enumerate(zip(keys, sizes, strict=True)):
        h = mmh3.hash(key, signed=False)
        slot = bisect.bisect_right(starts, h >> 16) - 1
        hash_b = h & 0xFFFF
        group = (ids[slot], bisect.bisect_right(splits[slot], hash_b))
        batch = open_batches.get(group)
        if batch is not None and batch[1] + size > max_bytes:
            out.append((group, *open_batches.pop(group)))
            batch = None
        if batch is None:
            batch = open_batches[group] = [[], 0, hash_b, hash_b, now_ms]
        batch[0].append(seq)
        batch[1] += size
        batch[2] = min(batch[2], hash_b)
        batch[3] = max(batch[3], hash_b)
        if len(batch[0]) >= max_messages or batch[1] >= max_bytes:
            out.append((group, *open_batches.pop(group)))
    out.extend((group, *batch) for group, batch in open_batches.items())
    return out


def keyshared_batcher(layout: TopicLayout, keys: list[str], sizes: np.ndarray, now_ms: int) -> list:
    batcher = BucketedBatcher(layout)
    return batcher.add_many(keys, sizes, now_ms) + batcher.flush()


@pytest.mark.benchmark(group="bucketed-batcher")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_bucketed_batcher(benchmark: Any, lib: str, key_list: list[str]) -> None:
    layout = TopicLayout.initial(16, bucket_budget=64)
    sizes = np.random.default_rng(9).integers(50, 500, len(key_list))
    size_list = sizes.tolist()
    run: Callable[[], list] = {
        "keyshared": lambda: keyshared_batcher(layout, key_list, sizes, 0),
        "python": lambda: python_batcher(layout, key_list, size_list, 0),
    }[lib]
    # Both cut the same batches (compared as sets: flush order is tested in tests/).
    expected = sorted(
        (
            (b.segment_id, b.bucket),
            b.sequence_ids.tolist(),
            b.size_bytes,
            b.entry_hash_min,
            b.entry_hash_max,
        )
        for b in keyshared_batcher(layout, key_list, sizes, 0)
    )
    assert sorted(b[:5] for b in python_batcher(layout, key_list, size_list, 0)) == expected
    benchmark.extra_info["messages"] = len(key_list)
    batches = benchmark(run)
    counted = (
        sum(b.num_messages for b in batches)
        if lib == "keyshared"
        else sum(len(b[1]) for b in batches)
    )
    assert counted == len(key_list)

"""Small calls, as brokers, clients and producers make them: a batch call per call size
against mmh3's loop over the same keys (the C extension a user calls per key), and single
calls of the selector and the sticky-key dispatcher against one ``key_hash`` call, the
binding's floor (one argument in, one small result out).

Every round makes CALLS calls, so that the timer's own overhead is spread thin; each peer
is checked to give keyshared's answer first. Call sizes 1 and 8 are where the library is
used as a library; 64 is the short path's last size (rust/bindings/src/keys.rs ``SHORT``),
512 and 4096 take the batch path."""

import statistics
from collections.abc import Callable
from typing import Any

import mmh3
import numpy as np
import pairing
import pytest
from ratios import PAIRED

import keyshared as ks

CALLS = 1_000
SIZES = [1, 8, 64, 512, 4096]
KEYS = [f"order-{i:08d}-{i * 7919 % 100_003:06d}" for i in range(max(SIZES))]
CONSUMERS = 10


def mmh3_loop(keys: list[str]) -> list[int]:
    hash32 = mmh3.hash
    return [hash32(k, 0, False) for k in keys]


def loop(call: Callable[[], object], calls: int = CALLS) -> Callable[[], None]:
    """A round: `calls` calls of `call`."""

    def run() -> None:
        for _ in range(calls):
            call()

    return run


def per_call(benchmark: Any, call: Callable[[], object], calls: int = CALLS) -> None:
    """Times `calls` calls of `call` a round; records the time of one."""
    benchmark(loop(call, calls))
    benchmark.extra_info["calls_per_round"] = calls
    benchmark.extra_info["ns_per_call"] = round(benchmark.stats.stats.median / calls * 1e9, 1)


def paired(
    benchmark: Any,
    ours: Callable[[], None],
    peer: Callable[[], None],
    peer_name: str,
    setup: Callable[[], None] = lambda: None,
) -> None:
    """Times rounds of `ours` (CALLS calls each), each just after an untimed `setup` and a
    round of `peer` timed here; records the median over those pairs of the peer's time over
    ours, which the floor reads (a busy machine slows the two rounds of a pair alike, where
    two tests' medians are taken minutes apart), and each one's time per call."""
    ratio, theirs = pairing.paired(
        benchmark, ours, peer, rounds=1000, warmup_rounds=20, setup=setup
    )
    benchmark.extra_info[PAIRED + peer_name] = round(ratio, 3)
    benchmark.extra_info["calls_per_round"] = CALLS
    benchmark.extra_info["ns_per_call"] = round(benchmark.stats.stats.median / CALLS * 1e9, 1)
    benchmark.extra_info[f"{peer_name} ns_per_call"] = round(statistics.median(theirs) / CALLS, 1)


@pytest.mark.parametrize("lib", ["keyshared", "mmh3"])
@pytest.mark.parametrize("kind", ["str", "bytes"])
def test_key_hash_one_key(benchmark: Any, lib: str, kind: str) -> None:
    """One key_hash call against one mmh3.hash call on the same key (unsigned, as keyshared's):
    the work of both is taking one argument, reading its UTF-8 (or bytes), hashing 21 bytes
    and making the int. keyshared's rounds each run just after a round of mmh3's, and the
    floor is the median over those pairs (a busy machine moves both alike)."""
    key: str | bytes = KEYS[0] if kind == "str" else KEYS[0].encode()
    benchmark.group = f"key-hash-1-{kind}"
    hash32, key_hash = mmh3.hash, ks.key_hash
    assert key_hash(key) == hash32(key, 0, False)
    loop = range(CALLS)

    def ours() -> None:
        for _ in loop:
            key_hash(key)

    def theirs() -> None:
        for _ in loop:
            hash32(key, 0, False)

    if lib == "mmh3":
        per_call(benchmark, lambda: hash32(key, 0, False))
    else:
        paired(benchmark, ours, theirs, "mmh3")


@pytest.mark.parametrize(
    ("lib", "size"),
    # One key_hash call is the floor of the one-key group; the same one-element array made
    # with NumPy from that call is what a user would write instead.
    [(lib, size) for size in SIZES for lib in ("keyshared", "mmh3-loop")]
    + [("key_hash", 1), ("key_hash-array", 1)],
)
def test_key_hashes_by_call_size(benchmark: Any, lib: str, size: int) -> None:
    benchmark.group = f"key-hashes-{size}"
    keys = KEYS[:size]
    key = keys[0]
    call: Callable[[], object] = {
        "keyshared": lambda: ks.key_hashes(keys),
        "mmh3-loop": lambda: mmh3_loop(keys),
        "key_hash": lambda: ks.key_hash(key),
        "key_hash-array": lambda: np.array([ks.key_hash(key)], dtype=np.uint32),
    }[lib]
    want = ks.key_hashes(keys)
    got = call()
    assert np.array_equal(np.atleast_1d(np.asarray(got, dtype=np.uint32)), want)
    if (lib, size) == ("keyshared", 1):
        paired(benchmark, loop(call), loop(lambda: ks.key_hash(key)), "key_hash")
    else:
        per_call(benchmark, call, max(10, CALLS // size))


def with_consumers(
    target: ks.ConsistentHashingStickyKeyConsumerSelector | ks.StickyKeyDispatcher,
) -> Any:
    """`target` with CONSUMERS consumers added."""
    for c in range(CONSUMERS):
        target.add_consumer(c, f"consumer-{c}")
    return target


@pytest.mark.benchmark(group="select-1")
@pytest.mark.parametrize("lib", ["keyshared", "key_hash"])
def test_select_one_hash(benchmark: Any, lib: str) -> None:
    selector = with_consumers(ks.ConsistentHashingStickyKeyConsumerSelector())
    h = ks.sticky_key_hash(KEYS[0])
    call: Callable[[], object] = {
        "keyshared": lambda: selector.select(h),
        "key_hash": lambda: ks.key_hash(KEYS[0]),
    }[lib]
    assert selector.select(h) == selector.select_many(np.array([h], np.uint16))[0]
    if lib == "keyshared":
        paired(benchmark, loop(call), loop(lambda: ks.key_hash(KEYS[0])), "key_hash")
    else:
        per_call(benchmark, call)


@pytest.mark.benchmark(group="dispatch-ack-1")
@pytest.mark.parametrize("lib", ["keyshared", "key_hash"])
def test_dispatch_and_ack_one_entry(benchmark: Any, lib: str) -> None:
    """One entry dispatched and acked, the steady state of a consumer that keeps up: the
    dispatcher's pending acks stay as they were."""
    d = with_consumers(ks.StickyKeyDispatcher())
    hashes = [ks.sticky_key_hash(k) for k in KEYS[:CALLS]]
    entry = iter(range(1 << 62))

    def dispatch_and_ack() -> None:
        e = next(entry)
        sent = d.dispatch(1, e, hashes[e % CALLS])
        d.ack(sent.consumer_id, 1, e)

    def two_key_hashes() -> None:
        ks.key_hash(KEYS[0])
        ks.key_hash(KEYS[1])

    first = d.dispatch(0, 0, hashes[0])
    assert first.delivered and first.consumer_id == d.select(hashes[0])
    assert d.ack(first.consumer_id, 0, 0)
    if lib == "keyshared":
        paired(benchmark, loop(dispatch_and_ack), loop(two_key_hashes), "key_hash")
    else:
        per_call(benchmark, two_key_hashes)
    assert all(d.pending_acks(c).size() == 0 for c in range(CONSUMERS))


def per_call_with_setup(
    benchmark: Any,
    call: Callable[[int, int], object],
    setup: Callable[[int], None],
    key_hash: Callable[[int, int], object] | None = None,
) -> None:
    """Times CALLS calls `call(i, entry)` a round, entries numbered on from round to round,
    after an untimed `setup(first_entry)` that readies the round; records the time of one.
    With `key_hash`, each round is paired with a round of it (`paired`)."""
    first = iter(range(0, 1 << 62, CALLS))
    base = 0

    def prepare() -> None:
        nonlocal base
        base = next(first)
        setup(base)

    def rounds(of: Callable[[int, int], object]) -> Callable[[], None]:
        def run() -> None:
            for i in range(CALLS):
                of(i, base + i)

        return run

    if key_hash is not None:
        paired(benchmark, rounds(call), rounds(key_hash), "key_hash", setup=prepare)
        return
    benchmark.pedantic(rounds(call), setup=prepare, rounds=300, warmup_rounds=10, iterations=1)
    benchmark.extra_info["calls_per_round"] = CALLS
    benchmark.extra_info["ns_per_call"] = round(benchmark.stats.stats.median / CALLS * 1e9, 1)


@pytest.mark.benchmark(group="dispatch-1")
@pytest.mark.parametrize("lib", ["keyshared", "key_hash"])
def test_dispatch_one_entry(benchmark: Any, lib: str) -> None:
    """One entry dispatched per call; between rounds, untimed, the round's entries are acked,
    so that every round starts with no pending acks."""
    d = with_consumers(ks.StickyKeyDispatcher())
    hashes = [ks.sticky_key_hash(k) for k in KEYS[:CALLS]]
    sent: list[Any] = [None] * CALLS
    hashed = [0] * CALLS

    def dispatch(i: int, entry: int) -> None:
        sent[i] = d.dispatch(1, entry, hashes[i])

    def key_hash(i: int, entry: int) -> None:
        hashed[i] = ks.key_hash(KEYS[i])

    def ack_sent(_: int = 0) -> None:
        for i, result in enumerate(sent):
            if result is not None:
                assert result.delivered and result.consumer_id == d.select(hashes[i])
                assert d.ack(result.consumer_id, result.ledger_id, result.entry_id)

    if lib == "keyshared":
        per_call_with_setup(benchmark, dispatch, ack_sent, key_hash)
        ack_sent()
        assert all(d.pending_acks(c).size() == 0 for c in range(CONSUMERS))
    else:
        per_call_with_setup(benchmark, key_hash, lambda _: None)


@pytest.mark.benchmark(group="ack-1")
@pytest.mark.parametrize("lib", ["keyshared", "key_hash"])
def test_ack_one_entry(benchmark: Any, lib: str) -> None:
    """One pending entry acked per call; before each round, untimed, the round's entries are
    dispatched."""
    d = with_consumers(ks.StickyKeyDispatcher())
    hashes = [ks.sticky_key_hash(k) for k in KEYS[:CALLS]]
    consumers = [d.select(h) for h in hashes]
    acked = [False] * CALLS
    hashed = [False] * CALLS

    def dispatch_round(base: int) -> None:
        for i in range(CALLS):
            assert d.dispatch(1, base + i, hashes[i]).consumer_id == consumers[i]

    def ack(i: int, entry: int) -> None:
        acked[i] = d.ack(consumers[i], 1, entry)

    def key_hash(i: int, entry: int) -> None:
        hashed[i] = ks.key_hash(KEYS[i]) >= 0

    if lib == "keyshared":
        per_call_with_setup(benchmark, ack, dispatch_round, key_hash)
        assert all(acked)
    else:
        per_call_with_setup(benchmark, key_hash, lambda _: None)
        assert all(hashed)

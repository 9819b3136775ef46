"""Every pair of native calls that take more than one lock, each pair raced on two threads
over shared objects. Run as a script by tests/unit/test_lock_order.py, which kills it after a
timeout: a deadlock holds the GIL in native code, so nothing inside this process could
report it. Before each pair it prints the pair's names, so the last line names a pair that
hung. `python tests/support/lock_order_stress.py SECONDS [PAIR_FILTER]`."""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

import keyshared as ks

Op = Callable[[int], object]


def inverted(maps: list[ks.PendingAcksMap]) -> bool:
    """Whether some map with a lower consumer id lies at a higher address."""
    return any(
        a.consumer_id < b.consumer_id and id(a) > id(b) for a, b in itertools.permutations(maps, 2)
    )


class Fixture:
    """Two dispatchers, each with consumers whose maps lie in memory in another order than
    their ids (the order that once deadlocked), a standalone wired map, a redelivery queue
    and two in-flight windows sharing one consumer state."""

    def __init__(self) -> None:
        self.sticky = ks.StickyKeyDispatcher(unblocking_handler=lambda _h: None)
        self.bucket = ks.EntryBucketDispatcher(
            list(range(4096, 65536, 4096)), unblocking_handler=lambda _h: None
        )
        self.ids = list(range(32, 0, -1))
        for c in self.ids:
            self.sticky.add_consumer(c, f"c{c}")
            self.bucket.add_consumer(c, f"c{c}")
        assert inverted(self.sticky_maps()) and inverted(self.bucket_maps())
        ring = ks.ConsistentHashingStickyKeyConsumerSelector(100, True)
        before = ring.get_consumer_key_hash_ranges()
        for c in self.ids:
            ring.add_consumer(c, f"c{c}")
        after = ring.get_consumer_key_hash_ranges()
        self.lost = ks.scalable.impacted_consumers(after, before)
        self.gained = ks.scalable.impacted_consumers(before, after)
        self.state = ks.dispatch.KeySharedConsumerState()
        for c in self.ids:
            self.state.add_consumer(c, [])
        self.windows = [ks.InFlightWindow(max_per_consumer=10**6) for _ in range(2)]

    def sticky_maps(self) -> list[ks.PendingAcksMap]:
        return [self.sticky.pending_acks(c) for c in self.ids]

    def bucket_maps(self) -> list[ks.PendingAcksMap]:
        return [self.bucket.pending_acks(c) for c in self.ids]


def ops(f: Fixture) -> dict[str, Op]:
    """Each multi-lock call, as one step `i` of a loop (each thread numbers its own)."""
    sticky, bucket = f.sticky, f.bucket
    hashes = np.arange(1, 65536, 997, dtype=np.int64)

    def sticky_read(i: int) -> object:
        read = [(1, i * 8 + j, int(hashes[(i + j) % len(hashes)]), 1) for j in range(8)]
        results = sticky.dispatch_read(read)
        for r in results:
            if r.delivered and r.consumer_id is not None:
                sticky.ack(r.consumer_id, r.ledger_id, r.entry_id)
        return results

    def sticky_churn(i: int) -> object:
        sticky.remove_consumer(f.ids[i % len(f.ids)])
        return sticky.add_consumer(f.ids[i % len(f.ids)], f"c{f.ids[i % len(f.ids)]}")

    def bucket_churn(i: int) -> object:
        bucket.remove_consumer(f.ids[i % len(f.ids)])
        return bucket.add_consumer(f.ids[i % len(f.ids)], f"c{f.ids[i % len(f.ids)]}")

    def bucket_many(i: int) -> object:
        n = len(hashes)
        return bucket.dispatch_many(np.full(n, 2), np.arange(n) + i * n, hashes)

    def bucket_ack(i: int) -> object:
        consumer = bucket.dispatch(6, i, entry_hash_min=int(hashes[i % len(hashes)]))
        return consumer is not None and bucket.ack(consumer, 6, i)

    def handoff(maps: Callable[[], list[ks.PendingAcksMap]]) -> Op:
        def run(i: int) -> object:
            return ks.scalable.register_draining_hashes(f.lost if i % 2 else f.gained, maps())

        return run

    def wired(i: int) -> object:
        m = sticky.pending_acks(f.ids[i % len(f.ids)])
        m.add_pending_ack_if_allowed(3, i, 1, int(hashes[i % len(hashes)]))
        m.add_pending_acks_if_allowed([3], [i + 1], [1], [int(hashes[(i + 1) % len(hashes)])])
        m.register_draining_hashes([ks.HashRange(0, 65535)])
        m.remove(3, i)
        m.remove_many([3], [i + 1])
        return m.remove_all_up_to(3, i)

    def redelivery(i: int) -> object:
        q = sticky.redelivery
        ids = [5, 4, 3, 2, 1, None, 1, 2]
        q.filter_read([4] * 8, list(range(i * 8, i * 8 + 8)), [7] * 8, ids, {c: 3 for c in f.ids},
                      replay=bool(i % 2), tracker=sticky.tracker)  # fmt: skip
        q.replay_positions(4, {7: 1}, {1: 2}, tracker=sticky.tracker)
        return q.remove_all_up_to(4, i * 8 + 8)

    def window(w: ks.InFlightWindow) -> Op:
        def run(i: int) -> object:
            w.dispatch_polled(i, f"k{i % 7}", f.state, i)
            w.on_ack(i)
            return w.handle_heartbeat(i, f.state)

        return run

    return {
        "sticky.dispatch_read": sticky_read,
        "sticky.add/remove_consumer": sticky_churn,
        "sticky.get_messages_to_replay_now": lambda _i: sticky.get_messages_to_replay_now(),
        "sticky.get_available_permits": lambda i: sticky.get_available_permits(
            f.ids[i % len(f.ids)]
        ),
        "sticky.is_normal_read_allowed": lambda _i: sticky.is_normal_read_allowed(),
        "bucket.dispatch": lambda i: bucket.dispatch(5, i, entry_hash_min=int(hashes[i % 66])),
        "bucket.dispatch_many": bucket_many,
        "bucket.add/remove_consumer": bucket_churn,
        "bucket.withheld_buckets": lambda _i: bucket.withheld_buckets(),
        "bucket.dispatch/ack": bucket_ack,
        "register_draining_hashes(sticky maps)": handoff(f.sticky_maps),
        "register_draining_hashes(bucket maps)": handoff(f.bucket_maps),
        "wired PendingAcksMap calls": wired,
        "redelivery filter_read/replay_positions": redelivery,
        "window[0] dispatch_polled/heartbeat": window(f.windows[0]),
        "window[1] dispatch_polled/heartbeat": window(f.windows[1]),
    }


def race(a: Op, b: Op, seconds: float) -> None:
    """Runs `a` and `b` in loops on two threads for `seconds`; bad-input errors from a
    consumer the other thread just removed are expected and ignored."""
    stop = time.monotonic() + seconds

    def loop(op: Op) -> None:
        for i in itertools.count():
            if time.monotonic() > stop:
                return
            with contextlib.suppress(KeyError, ValueError):
                op(i)

    threads = [threading.Thread(target=loop, args=(op,)) for op in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    seconds = float(sys.argv[1])
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    f = Fixture()
    calls = ops(f)
    pairs = [
        (x, y)
        for x, y in itertools.combinations_with_replacement(calls, 2)
        if only in x or only in y
    ]
    failed: list[threading.ExceptHookArgs] = []
    threading.excepthook = failed.append
    for x, y in pairs:
        print(f"pair: {x} | {y}", flush=True)
        race(calls[x], calls[y], seconds)
        if failed:
            raise SystemExit(f"{x} | {y} raised {failed[0].exc_value!r}")
    print(f"done: {len(pairs)} pairs", flush=True)


if __name__ == "__main__":
    main()

"""One check of each part a user reaches first: hashes, layouts, a dispatcher, the command line
and the compiled core's build."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

import keyshared as ks
from keyshared.dispatch import StickyKeyDispatcher
from keyshared.routing import bucket_hash, segment_hash

# Pinned values of tests/unit/test_hashing.py: Pulsar's own answers.
HELLO = 0x248BFA47
FOX = 0x2E4FF723


def test_the_core_is_the_wheels_release_build() -> None:
    from keyshared import _core

    assert _core.__build_profile__ == "release"
    assert Path(_core.__file__).parent == Path(ks.__file__).parent


def test_key_hashes_match_pulsars() -> None:
    assert ks.key_hash("") == 0
    assert ks.key_hash("hello") == ks.key_hash(b"hello") == HELLO
    assert ks.key_hash("The quick brown fox jumps over the lazy dog") == FOX
    assert ks.sticky_key_hash("hello") == 7892
    assert (segment_hash("hello"), bucket_hash("hello")) == (0x248B, 0xFA47)


def test_every_batch_form_hashes_alike() -> None:
    keys = ["hello", "The quick brown fox jumps over the lazy dog", "é"]
    want = [HELLO, FOX, ks.key_hash("é".encode())]
    forms = [
        keys,
        tuple(k.encode() for k in keys),
        np.array(keys, dtype=object),
        pa.array(keys),
        pa.chunked_array([keys[:1], keys[1:]], pa.large_string()),
    ]
    for form in forms:
        assert ks.key_hashes(form).tolist() == want, type(form)
    # Past the short path: a batch packed and hashed in pieces, on several threads.
    many = [f"order-{i}" for i in range(100_000)]
    assert ks.key_hashes(many, threads=2).tolist() == ks.key_hashes(pa.array(many)).tolist()
    assert ks.key_hashes(["a", None], null_key="").tolist() == [ks.key_hash("a"), 0]


def test_a_layout_routes_keys() -> None:
    layout = ks.TopicLayout.initial(4, bucket_budget=16)
    assert layout.route("order-1") == (3, 1)
    ids, buckets = layout.route_keys(["order-1", "order-2"])
    assert (ids.tolist(), buckets.tolist()) == ([3, 1], [1, 0])
    split = layout.split_segment(3, now_ms=1_000)
    assert ks.TopicLayout.from_json(split.to_json()).route("order-1")[0] in {4, 5}


def test_a_dispatcher_keeps_each_key_on_one_consumer() -> None:
    d = StickyKeyDispatcher()
    d.add_consumer(1, "c1")
    d.add_consumer(2, "c2")
    hashes = [ks.sticky_key_hash(k) for k in ["order-1", "order-2", "order-3", "order-1"]]
    sent = d.dispatch_read([(1, e, h, 1) for e, h in enumerate(hashes)])
    assert all(r.delivered for r in sent)
    assert sent[0].consumer_id == sent[3].consumer_id
    pending = d.pending_acks(1).to_list() + d.pending_acks(2).to_list()
    assert sorted(p[1] for p in pending) == [0, 1, 2, 3]


def keyshared_cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "keyshared", *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_command_line_routes_keys() -> None:
    assert "route" in keyshared_cli("--help")
    rows = [json.loads(line) for line in keyshared_cli("route", "hello", "--json").splitlines()]
    assert [(r["key"], r["key_hash"]) for r in rows] == [("hello", HELLO)]
    said = keyshared_cli("--version").splitlines()
    assert said[0] == f"keyshared {ks.__version__}"
    assert said[1].startswith(f"key hash: HASH_VERSION {ks.HASH_VERSION}")

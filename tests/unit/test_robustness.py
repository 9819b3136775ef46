"""Bad input, byte orders, leaks and papercuts found by using the library as a new user
would: each test fails without the fix it names."""

from __future__ import annotations

import gc
import io
import json
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keyshared as ks
from keyshared import cli
from keyshared.simulate import Scenario, builtin_scenario, simulate
from keyshared.simulate.dispatch import SegmentDispatcher

# --- NumPy unicode arrays in either byte order ----------------------------------------------

text_keys = st.lists(st.text(st.characters(exclude_categories=["Cs"]), max_size=6), max_size=20)


@given(text_keys)
def test_big_endian_unicode_arrays_hash_as_their_text(keys: list[str]) -> None:
    # NumPy pads with NUL, so keys that end in one are not stored as given.
    keys = [k.rstrip("\0") for k in keys]
    expected = ks.key_hashes(keys)
    for dtype in (">U", "<U", "=U"):
        array = np.array(keys, dtype=dtype + str(max(1, *map(len, keys), 1)))
        assert ks.key_hashes(array).tolist() == expected.tolist()


def test_big_endian_keys_flow_into_every_batch_call() -> None:
    keys = ["Ā", "ab", "order-1", "€uro"]
    big = np.array(keys, dtype=">U8")
    assert ks.key_hashes(np.array(["Ā"], dtype=">U1"))[0] == ks.key_hash("Ā") == 3615457711
    seg, bucket = ks.split_hashes(big)
    assert seg.tolist() == [ks.routing.segment_hash(k) for k in keys]
    assert bucket.tolist() == [ks.routing.bucket_hash(k) for k in keys]
    layout = ks.TopicLayout.initial(4, bucket_budget=16)
    ids, buckets = layout.routing_table.route_keys(big)
    assert list(zip(ids.tolist(), buckets.tolist(), strict=True)) == [layout.route(k) for k in keys]
    one, many = ks.BucketedBatcher(layout), ks.BucketedBatcher(layout)
    expected = [b for k in keys for b in one.add(k, 10, 0)] + one.flush()
    got = many.add_many(big, [10] * len(keys), 0) + many.flush()
    assert [(b.segment_id, b.bucket, b.entry_hash_min) for b in got] == [
        (b.segment_id, b.bucket, b.entry_hash_min) for b in expected
    ]


def test_an_invalid_code_point_is_named_with_its_index() -> None:
    bad = np.array([b"a\0\0\0", b"\0\xd8\0\0"]).view("<U1")
    with pytest.raises(ValueError, match=r"keys\[1\] holds 0xd800"):
        ks.key_hashes(bad)


def test_strided_unicode_arrays_follow_their_stride() -> None:
    keys = np.array(["a", "bb", "ccc", "dddd"], dtype=">U4")[::-2]
    assert ks.key_hashes(keys).tolist() == [ks.key_hash(k) for k in ["dddd", "bb"]]


# --- leaks: native objects holding Python callbacks take part in garbage collection ---------


class _Owner:
    def __init__(self) -> None:
        self.tracker = ks.DrainingHashesTracker(self.unblocked)
        self.acks = ks.PendingAcksMap(1, self.tracker)

    def unblocked(self, sticky_key_hash: int) -> None:
        pass


def _collected(make: Any) -> bool:
    ref = weakref.ref(make())
    gc.collect()
    return ref() is None


def test_a_tracker_whose_handler_holds_it_is_collected() -> None:
    assert _collected(_Owner)


def test_a_bucket_handoff_with_a_handler_is_collected() -> None:
    segment = ks.TopicLayout.initial(1, bucket_budget=4).segment(0)
    owners = ks.scalable.contiguous_assignment([1, 2], 4)
    assert _collected(lambda: ks.scalable.BucketHandoff(segment, owners, unblocking_handler=print))


def test_a_tracker_handler_keeps_working_until_collected() -> None:
    heard: list[int] = []
    tracker = ks.DrainingHashesTracker(heard.append)
    tracker.add_entry(1, 7)
    gc.collect()
    tracker.should_block_sticky_key_hash(2, 7)
    tracker.reduce_ref_count(1, 7)
    assert heard == [7]
    assert tracker.unblocking_handler is not None


def test_bucket_handoffs_in_a_loop_do_not_pile_up() -> None:
    segment = ks.TopicLayout.initial(1, bucket_budget=4).segment(0)
    owners = ks.scalable.contiguous_assignment([1, 2], 4)
    gc.collect()
    before = sum(isinstance(o, ks.scalable.BucketHandoff) for o in gc.get_objects())
    for _ in range(2_000):
        ks.scalable.BucketHandoff(segment, owners, unblocking_handler=print)
    gc.collect()
    assert sum(isinstance(o, ks.scalable.BucketHandoff) for o in gc.get_objects()) == before


def test_a_simulation_run_leaves_nothing_behind() -> None:
    gc.collect()
    result = simulate(builtin_scenario("drain-backlog", scale=0.005), seed=1)
    del result
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, SegmentDispatcher)]


# --- batching sizes near 2**64 --------------------------------------------------------------


def test_add_many_refuses_sizes_whose_sum_would_wrap() -> None:
    layout = ks.TopicLayout.initial(1, bucket_budget=1)
    batcher = ks.BucketedBatcher(layout, max_bytes=8)
    sizes = np.array([2**64 - 2, 6], dtype=np.uint64)
    with pytest.raises(ValueError, match="add up to"):
        batcher.add_many(["a", "a"], sizes, now_ms=0)
    assert batcher.next_sequence_id == 0
    # Large but summable sizes behave as add does: each goes alone.
    one = ks.BucketedBatcher(layout, max_bytes=8)
    expected = one.add("a", 2**61, 0) + one.add("a", 4, 0) + one.flush()
    got = batcher.add_many(["a", "a"], [2**61, 4], now_ms=0) + batcher.flush()
    assert [b.size_bytes for b in got] == [b.size_bytes for b in expected] == [2**61, 4]


# --- errors that say what is wrong ----------------------------------------------------------


def test_threads_beyond_range_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="threads"):
        ks.key_hashes(["a"], threads=2**63)
    with pytest.raises(TypeError, match="threads must be an int, got bool"):
        ks.key_hashes(["a"], threads=True)


def test_an_int_list_names_the_value_numpy_cannot_hold() -> None:
    with pytest.raises(ValueError, match=r"offsets\[1\] = 9223372036854775808"):
        ks.SafeCursor(first_offset=0).ack_many([1, 2**63])
    with pytest.raises(TypeError, match=r"offsets\[1\] must be an int, got float"):
        ks.SafeCursor(first_offset=0).ack_many([1, 2.5])
    tracker = ks.DrainingHashesTracker()
    with pytest.raises(TypeError, match=r"sticky_key_hashes\[0\] must be an int, got bool"):
        tracker.should_block_sticky_key_hashes(1, [True, False])


def test_lone_surrogates_are_named() -> None:
    state = ks.dispatch.KeySharedConsumerState()
    state.add_consumer(1)
    with pytest.raises(ValueError, match=r"keys\[1\] is not valid text"):
        state.select_consumers(["a", "\ud800"])
    window = ks.InFlightWindow(max_window_size=4, max_per_consumer=4)
    with pytest.raises(ValueError, match="reason is not valid text"):
        window.on_nack(0, 0, None, "\ud800")
    with pytest.raises(TypeError, match="reason must be a str"):
        window.on_nack(0, 0, None, 5)  # type: ignore[arg-type]


def test_none_where_an_object_is_wanted_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="hash_range must be a HashRange, got NoneType"):
        ks.scalable.format_descriptor(None, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="last must be a SegmentLoadStats"):
        ks.scalable.is_material_change(None, ks.scalable.SegmentLoadStats())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="layout must be a TopicLayout"):
        ks.scalable.last_operation_times(None)  # type: ignore[arg-type]


def test_an_empty_routing_table_says_so() -> None:
    with pytest.raises(ValueError, match="active segments must tile 0000-ffff, got none"):
        ks.RoutingTable([])


def test_a_layout_refuses_segment_ids_it_cannot_route() -> None:
    with pytest.raises(ValueError, match="segment_id must be <= 9223372036854775807"):
        ks.Segment(2**63, ks.HashRange(0, 0xFFFF))
    data = ks.TopicLayout.initial(1, bucket_budget=1).to_dict()
    data["segments"][0]["segment_id"] = 2**63
    data["next_segment_id"] = 2**63 + 1
    with pytest.raises(ValueError, match="segment_id"):
        ks.TopicLayout.from_dict(data)


def test_error_paths_are_not_repeated() -> None:
    data = ks.TopicLayout.initial(2, bucket_budget=2).to_dict()
    data["segments"][1]["bucket_splits"] = "x"
    with pytest.raises(TypeError) as err:
        ks.TopicLayout.from_dict(data)
    assert str(err.value).startswith("layout.segments[1].bucket_splits must be a list")
    assert str(err.value).count("segments[1]") == 1


def test_deeply_nested_json_is_bad_input(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert cli.main(["decide", str(path)], out=io.StringIO()) == cli.EXIT_BAD_INPUT
    assert "nested too deeply" in capsys.readouterr().err
    scenario = tmp_path / "deep-scenario.json"
    scenario.write_text("[" * 100_000 + "]" * 100_000)
    status = cli.main(["simulate", str(scenario), "--no-plots", "--no-progress"], io.StringIO())
    assert status == cli.EXIT_BAD_INPUT
    assert "nested too deeply" in capsys.readouterr().err


# --- papercuts ------------------------------------------------------------------------------


def test_bool_is_not_an_int() -> None:
    layout = ks.TopicLayout.initial(2, bucket_budget=4)
    with pytest.raises(TypeError, match="bool"):
        layout.segment(True)
    with pytest.raises(TypeError, match="bool"):
        ks.bucket_index(True, [])
    with pytest.raises(TypeError, match="bool"):
        ks.DrainingHashesTracker().add_entry(True, 5)
    with pytest.raises(TypeError, match="bool"):
        ks.SafeCursor(first_offset=False)


def test_bytes_are_not_an_iterable_of_consumers() -> None:
    with pytest.raises(TypeError, match="consumers must be an iterable of consumers, got bytes"):
        ks.scalable.contiguous_assignment(b"1", 4)  # type: ignore[arg-type]


def test_masked_arrays_honour_their_mask() -> None:
    for dtype in ("U3", "S3", object):
        keys = np.ma.array(np.array(["a", "b", "c"], dtype=dtype), mask=[False, True, False])
        with pytest.raises(ValueError, match=r"keys\[1\] is (masked|None)"):
            ks.key_hashes(keys)
        got = ks.key_hashes(keys, null_key="zz").tolist()
        assert got == [ks.key_hash("a"), ks.key_hash("zz"), ks.key_hash("c")]


def test_an_all_null_arrow_array_takes_null_key() -> None:
    nulls = pa.array([None, None])
    assert nulls.type == pa.null()
    assert ks.key_hashes(nulls, null_key="x").tolist() == [ks.key_hash("x")] * 2
    with pytest.raises(ValueError, match=r"keys\[0\] is null"):
        ks.key_hashes(nulls)


def test_select_consumers_takes_arrow_arrays() -> None:
    state = ks.dispatch.KeySharedConsumerState()
    state.add_consumer(1, key_filters=["pay*"])
    state.add_consumer(2, key_filters=["ord*"])
    keys = ["payment", "order", "other"]
    expected = [state.select_consumer(k) for k in keys]
    batches = (pa.array(keys), pa.chunked_array([keys[:1], keys[1:]]), np.array(keys), iter(keys))
    for batch in batches:
        ids, selected = state.select_consumers(batch)
        assert [
            i if s else None for i, s in zip(ids.tolist(), selected.tolist(), strict=True)
        ] == expected


def test_version(capsys: Any) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    first, *rest = capsys.readouterr().out.splitlines()
    assert first == f"keyshared {ks.__version__}"
    assert any("HASH_VERSION" in line for line in rest)


def test_route_into_a_closed_pipe_exits_quietly() -> None:
    keys = "".join(f"key-{i}\n" for i in range(200_000))
    code = "import sys; from keyshared.cli import main; sys.exit(main())"
    pipeline = f"{sys.executable} -c '{code}' route --stdin | head -1"
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline], input=keys, capture_output=True, text=True
    )
    assert proc.stderr == ""
    assert proc.returncode == 0
    assert proc.stdout.startswith("key")


def test_stdin_cannot_hold_both_keys_and_layout(capsys: Any) -> None:
    args = ["route", "--stdin", "--layout", "-"]
    assert cli.main(args, out=io.StringIO()) == cli.EXIT_BAD_INPUT
    assert "cannot both read standard input" in capsys.readouterr().err


def test_a_scenario_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    text = 'name = "bom"\nduration_ms = 1000\n[[topics]]\nname = "t"\n'
    text += '[[topics.producers]]\nname = "p"\nrate_msg_s = 10\n'
    text += '[[topics.consumers]]\nname = "c"\nrate_msg_s = 10\n'
    for suffix, body in ((".toml", text), (".json", None)):
        path = tmp_path / f"s{suffix}"
        if body is None:
            import tomllib

            body = json.dumps(tomllib.loads(text))
        path.write_bytes(b"\xef\xbb\xbf" + body.encode())
        assert Scenario.from_file(path).name == "bom"


def test_bytes_splits_are_named_as_bytes() -> None:
    with pytest.raises(TypeError, match="got bytes"):
        ks.routing.bucket_ranges(b"ab")  # type: ignore[arg-type]


def test_membership_of_a_wrong_key_is_false() -> None:
    checkpoints = ks.dispatch.BucketCheckpoints()
    assert (0, "x") not in checkpoints
    assert (True, 0) not in checkpoints
    assert "x" not in checkpoints


def test_a_cooldown_is_never_longer_than_the_cooldown() -> None:
    layout = ks.TopicLayout.initial(1, bucket_budget=4)
    stats = ks.scalable.SegmentLoadStats(msg_rate_in=1e9)
    policy = ks.AutoScalePolicy()
    decision = ks.decide(
        layout,
        {0: ks.scalable.SegmentLoadSample(stats, 0)},
        {},
        policy,
        now_ms=1_000_000,
        last_split_at_ms=5_000_000,
    )
    assert f"({policy.split_cooldown_ms} ms left)" in decision.reason


def test_splits_type_errors_stay_type_errors() -> None:
    layout = ks.TopicLayout.initial(1, bucket_budget=4)
    with pytest.raises(TypeError, match=r"bucket_splits\[0\]"):
        layout.rebucket_segment(0, 2, now_ms=1, bucket_splits=["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        ks.RoutingTable([(0, ks.HashRange(0, 0xFFFF), ["x"])])


def test_skew_refuses_what_is_not_a_load_list() -> None:
    with pytest.raises(ValueError, match="one-dimensional"):
        ks.scalable.skew(np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"loads\[0\] = -1.0"):
        ks.scalable.skew([-1, 2])
    assert ks.scalable.skew([1, 3]) == 1.5


def test_register_draining_hashes_takes_any_iterable() -> None:
    tracker = ks.DrainingHashesTracker()
    acks = ks.PendingAcksMap(consumer_id=1, tracker=tracker)
    acks.add_pending_ack_if_allowed(ledger_id=1, entry_id=0, batch_size=1, sticky_key_hash=9)
    ranges = (r for r in [ks.HashRange(0, 10)])
    assert acks.register_draining_hashes(ranges) == 1
    with pytest.raises(TypeError, match=r"ranges\[0\] must be a HashRange"):
        acks.register_draining_hashes([(0, 10)])  # type: ignore[list-item]

"""keyshared.errors: every mistake a caller can make, in the native kernels or the Python
layers, raises one of the library's classes, which an ``except`` clause written for the
built-in exception still catches."""

from __future__ import annotations

import ast
import inspect
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import keyshared as ks
from keyshared import _core
from keyshared.errors import (
    ArgumentTypeError,
    InvalidArgument,
    KeysharedError,
    NotFound,
    OutOfRange,
    RefusedChange,
    ScenarioError,
    UnknownConsumer,
)
from keyshared.explain import read_subscription
from keyshared.scalable import AutoScalePolicyOverride, TopicLayout, TopicName, compute_assignment
from keyshared.simulate import Scenario

# --- the classes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (InvalidArgument, ValueError),
        (RefusedChange, ValueError),
        (ScenarioError, ValueError),
        (OutOfRange, ValueError),
        (OutOfRange, IndexError),
        (ArgumentTypeError, TypeError),
        (NotFound, KeyError),
        (UnknownConsumer, KeyError),
    ],
)
def test_every_class_is_a_keyshared_error_and_its_builtin(
    cls: type[Exception], builtin: type[Exception]
) -> None:
    assert issubclass(cls, KeysharedError)
    assert issubclass(cls, builtin)
    with pytest.raises(builtin):
        raise cls("x")


def test_refinements_are_their_parents() -> None:
    assert issubclass(RefusedChange, InvalidArgument)
    assert issubclass(ScenarioError, InvalidArgument)
    assert issubclass(OutOfRange, InvalidArgument)
    assert issubclass(UnknownConsumer, NotFound)


def test_key_errors_read_as_sentences() -> None:
    # KeyError shows repr(arg); the library's messages are sentences, shown as written.
    assert str(UnknownConsumer("consumer 7 is not connected")) == "consumer 7 is not connected"
    assert str(NotFound("bucket 0 of segment 1 is not open")) == "bucket 0 of segment 1 is not open"


def test_the_module_exports_exactly_its_classes_and_kinds() -> None:
    assert sorted(set(ks.errors.__all__) - {"KINDS"}) == sorted(
        name
        for name, value in vars(ks.errors).items()
        if isinstance(value, type) and issubclass(value, KeysharedError)
    )


# --- native calls ------------------------------------------------------------------------


def raises(cls: type[Exception], builtin: type[Exception], call: Callable[[], object]) -> str:
    """The message of ``call``'s exception, after checking it is ``cls`` and ``builtin``."""
    with pytest.raises(builtin) as info:
        call()
    assert type(info.value) is cls, f"{type(info.value).__module__}.{type(info.value).__name__}"
    return str(info.value)


def test_key_hashes_refuses_a_non_key() -> None:
    message = raises(ArgumentTypeError, TypeError, lambda: ks.key_hashes(["a", 5]))
    assert "keys[1]" in message


def test_routing_table_refuses_a_layout_that_does_not_tile() -> None:
    bad = [(0, ks.HashRange(0, 0x7FFF), [])]
    message = raises(InvalidArgument, ValueError, lambda: ks.RoutingTable(bad))
    assert "must tile 0000-ffff" in message


def test_routing_table_refuses_a_non_sequence() -> None:
    raises(ArgumentTypeError, TypeError, lambda: ks.RoutingTable(5))  # type: ignore[arg-type]


def test_hash_range_refuses_a_reversed_range_and_an_unsplittable_one() -> None:
    raises(InvalidArgument, ValueError, lambda: ks.HashRange(5, 4))
    raises(InvalidArgument, ValueError, lambda: ks.HashRange(3, 3).split())
    raises(ArgumentTypeError, TypeError, lambda: ks.HashRange("0", 4))  # type: ignore[arg-type]


def test_a_tracker_refuses_hash_zero_and_keeps_its_state() -> None:
    tracker = ks.DrainingHashesTracker()
    tracker.add_entry(1, 7)
    message = raises(InvalidArgument, ValueError, lambda: tracker.add_entry(1, 0))
    assert "must not be 0" in message
    raises(InvalidArgument, ValueError, lambda: tracker.add_entry(2, 7))
    raises(ArgumentTypeError, TypeError, lambda: tracker.add_entry("1", 7))  # type: ignore[arg-type]
    entry = tracker.get_entry(7)
    assert entry is not None
    assert (entry.consumer_id, entry.ref_count) == (1, 1)


def test_a_selector_refuses_a_consumer_twice_and_bad_points() -> None:
    selector = ks.dispatch.ConsistentHashingStickyKeyConsumerSelector(10)
    selector.add_consumer(1, "c1")
    raises(InvalidArgument, ValueError, lambda: selector.add_consumer(1, "c1"))
    raises(
        InvalidArgument,
        ValueError,
        lambda: ks.dispatch.ConsistentHashingStickyKeyConsumerSelector(0),
    )
    raises(
        InvalidArgument,
        ValueError,
        lambda: ks.scalable.EntryBucketConsumerSelector().select_many([1]),
    )
    assert selector.consumer_ids == [1]


def test_a_dispatcher_refuses_an_unknown_consumer() -> None:
    dispatcher = ks.StickyKeyDispatcher()
    message = raises(UnknownConsumer, KeyError, lambda: dispatcher.remove_consumer(9))
    assert "9" in message


def test_a_consumer_state_refuses_an_unknown_consumer() -> None:
    state = ks.dispatch.KeySharedConsumerState()
    message = raises(UnknownConsumer, KeyError, lambda: state.key_filters(3))
    assert message == "consumer 3 is not in the state"


def test_checkpoints_refuse_a_bucket_that_is_not_open() -> None:
    checkpoints = ks.dispatch.BucketCheckpoints()
    message = raises(NotFound, KeyError, lambda: checkpoints.ack(1, 0, 5))
    assert message == "bucket 0 of segment 1 is not open"


def test_a_window_refuses_a_message_of_a_held_key() -> None:
    window = ks.dispatch.InFlightWindow()
    window.mark_dispatched(0, "k", 1)
    message = raises(InvalidArgument, ValueError, lambda: window.mark_dispatched(1, "k", 2))
    assert "push_blocked" in message
    assert window.in_flight_count == 1


def test_partitions_refuse_an_unknown_partitioner() -> None:
    raises(InvalidArgument, ValueError, lambda: ks.partitions(["a"], 4, "no:such"))
    raises(InvalidArgument, ValueError, lambda: ks.partitions(["a"], 0, "kafka:murmur2"))


def test_the_thread_count_refuses_a_negative_and_a_non_int() -> None:
    before = _core.get_num_threads()
    raises(InvalidArgument, ValueError, lambda: _core.set_num_threads(-1))
    raises(ArgumentTypeError, TypeError, lambda: _core.set_num_threads("2"))  # type: ignore[arg-type]
    assert _core.get_num_threads() == before


# --- Python layers -----------------------------------------------------------------------


def test_a_layout_refuses_a_change_its_state_does_not_allow() -> None:
    layout = TopicLayout.initial(2, bucket_budget=4)
    split = layout.split_segment(0, now_ms=0)
    raises(RefusedChange, ValueError, lambda: split.split_segment(0, now_ms=1))
    raises(RefusedChange, ValueError, lambda: layout.merge_segments(0, 0, now_ms=0))
    raises(RefusedChange, ValueError, lambda: layout.prune_segment(1))
    assert layout.segment(0).is_active
    raises(InvalidArgument, ValueError, lambda: layout.segment(99))
    raises(ArgumentTypeError, TypeError, lambda: layout.segment(True))


def test_a_policy_names_its_bad_field() -> None:
    message = raises(
        InvalidArgument,
        ValueError,
        lambda: AutoScalePolicyOverride.from_dict({"no_such_field": 1}),
    )
    assert "no_such_field" in message


def test_the_coordinator_refuses_what_is_not_a_layout() -> None:
    topic = TopicName.get("topic://public/default/t")
    raises(ArgumentTypeError, TypeError, lambda: compute_assignment("x", topic, ["a"]))  # type: ignore[arg-type]


def test_a_scenario_that_cannot_run_is_a_scenario_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[1]")
    message = raises(ScenarioError, ValueError, lambda: Scenario.from_file(path))
    assert "object at the top" in message


def test_the_explain_reader_names_the_missing_field() -> None:
    message = raises(InvalidArgument, ValueError, lambda: read_subscription({}, "sub"))
    assert "subscriptions" in message


def test_a_bad_json_file_is_invalid_argument(tmp_path: Path) -> None:
    path = tmp_path / "layout.json"
    path.write_text(json.dumps({"segments": 5}))
    with pytest.raises(KeysharedError):
        TopicLayout.from_json(path.read_text())


# --- every native entry point ------------------------------------------------------------

#: Arguments of the wrong type or value: every native call must refuse these with the
#: library's classes (or take them), never with a bare built-in exception.
BAD = [
    None,
    True,
    -1,
    0,
    2**70,
    -(2**70),
    1.5,
    "x",
    "\ud800",
    b"",
    b"\xff",
    [None],
    [-1],
    [2**70],
    ["a", 1],
    {"a": 1},
    {1: [None]},
    (1, 2, 3),
    object(),
]

#: A valid object of each native class, for calling its methods.
INSTANCES: dict[str, Callable[[], object]] = {
    "HashRange": lambda: ks.HashRange(0, 0xFFFF),
    "RoutingTable": lambda: TopicLayout.initial(2, bucket_budget=4).routing_table,
    "DrainingHashesTracker": lambda: ks.DrainingHashesTracker(),
    "PendingAcksMap": lambda: ks.PendingAcksMap(1, ks.DrainingHashesTracker()),
    "MessageRedeliveryController": lambda: _core.MessageRedeliveryController(),
    "ImpactedConsumersResult": lambda: _core.ImpactedConsumersResult(),
    "ConsumerHashAssignmentsSnapshot": lambda: _core.ConsumerHashAssignmentsSnapshot.empty(),
    "ConsistentHashingStickyKeyConsumerSelector": lambda: (
        _core.ConsistentHashingStickyKeyConsumerSelector(10)
    ),
    "EntryBucketConsumerSelector": lambda: _core.EntryBucketConsumerSelector(),
    "EntryBucketDispatcher": lambda: _core.EntryBucketDispatcher(),
    "StickyKeyDispatcher": lambda: _core.StickyKeyDispatcher(10),
    "KeySharedConsumerState": lambda: _core.KeySharedConsumerState(),
    "SafeCursor": lambda: _core.SafeCursor(0),
    "BucketCheckpoints": lambda: _core.BucketCheckpoints(),
    "SubscriptionFailurePolicy": lambda: _core.SubscriptionFailurePolicy(),
    "InFlightWindow": lambda: _core.InFlightWindow(),
}


def _required_positional(call: Callable[..., object]) -> int:
    try:
        parameters = inspect.signature(call).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(
        p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        and p.name not in ("self", "cls")
        for p in parameters
    )


def _entry_points() -> list[tuple[str, Callable[[], object] | None, str]]:
    """(owner, factory, name) of every native function, constructor and method."""
    out: list[tuple[str, Callable[[], object] | None, str]] = []
    for name, value in sorted(vars(_core).items()):
        if name.startswith("_") or name == "set_num_threads":
            # set_num_threads changes the process; its refusals are tested on their own.
            continue
        if isinstance(value, type):
            if issubclass(value, BaseException) or name not in INSTANCES:
                continue
            out.append(("", None, name))
            out.extend(
                (name, INSTANCES[name], method)
                for method, member in sorted(vars(value).items())
                if not method.startswith("_")
                and callable(member)
                and not isinstance(member, (staticmethod, classmethod))
            )
        elif callable(value):
            out.append(("", None, name))
    return out


ENTRY_POINTS = _entry_points()


def test_the_sweep_covers_every_native_class() -> None:
    classes = {
        name
        for name, value in vars(_core).items()
        if isinstance(value, type)
        and not name.startswith("_")
        and not issubclass(value, BaseException)
        and _required_positional(value) + len(vars(value)) > 0
        and any(not m.startswith("_") and callable(v) for m, v in vars(value).items())
    }
    # Result classes are built by the kernels, not by callers, and have no methods that
    # take arguments; the rest must each have an instance to call.
    missing = (
        classes
        - set(INSTANCES)
        - {
            "ConsumerDrainingHashesStats",
            "DispatchResult",
            "DrainingHash",
            "DrainingHashEntry",
            "HoldReason",
            "InFlightEntry",
            "WindowAction",
        }
    )
    assert not missing
    print(f"{len(ENTRY_POINTS)} native entry points swept")


def _call(owner: str, factory: Callable[[], object] | None, name: str, args: list[Any]) -> None:
    target: Any = getattr(factory(), name) if factory is not None else getattr(_core, name)
    n = _required_positional(target)
    # Exactly the required arguments: a wrong count is Python's own TypeError, not a refusal.
    target(*(args[i % len(args)] for i in range(n)))


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(ENTRY_POINTS),
    st.lists(st.sampled_from(range(len(BAD))), min_size=1, max_size=4),
)
def test_no_native_entry_point_raises_a_bare_builtin(
    entry: tuple[str, Callable[[], object] | None, str], picks: list[int]
) -> None:
    owner, factory, name = entry
    try:
        _call(owner, factory, name, [BAD[i] for i in picks])
    except (ValueError, TypeError, KeyError, OverflowError, IndexError) as e:
        assert isinstance(e, KeysharedError), (
            f"{owner}.{name}: {type(e).__name__}: {e}"
            if owner
            else f"{name}: {type(e).__name__}: {e}"
        )


# --- what a program reads: kind, argument, index -----------------------------------------


def caught(call: Callable[[], object]) -> KeysharedError:
    """``call``'s error, checked to come back whole from a pickle."""
    with pytest.raises(KeysharedError) as info:
        call()
    error = info.value
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert (str(back), back.kind, back.argument, back.index) == (
        str(error),
        error.kind,
        error.argument,
        error.index,
    )
    return error


def parts(error: KeysharedError) -> tuple[type[KeysharedError], str, str | None, int | None]:
    return type(error), error.kind, error.argument, error.index


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # A bad hash range.
        (lambda: ks.HashRange(0, 0x10000), (InvalidArgument, "not_ring_hash", "end", None)),
        (lambda: ks.HashRange(5, 4), (InvalidArgument, "reversed_range", "start", None)),
        # A wrong type in a batch, at index 3.
        (
            lambda: ks.partitions([1, 2, 3, "x"], 8, "spark:bucket"),
            (ArgumentTypeError, "wrong_type", "keys", 3),
        ),
        # A null key in a batch.
        (lambda: ks.key_hashes(["a", "b", None]), (InvalidArgument, "null_key", "keys", 2)),
        # A bad partition count.
        (
            lambda: ks.partitions(["a"], 0, "kafka"),
            (InvalidArgument, "out_of_range", "num_partitions", None),
        ),
        # Split points, named by the caller.
        (
            lambda: _core.bucket_ranges([0x8000, 0x10]),
            (InvalidArgument, "splits_not_ascending", "splits", 1),
        ),
        (
            lambda: _core._checked_splits([0x8000, 0x10], "bucket_splits"),
            (InvalidArgument, "splits_not_ascending", "bucket_splits", 1),
        ),
        # A kernel error that is a TypeError, chosen by its category.
        (
            lambda: _core.partition_key(5, 8, "kafka"),
            (ArgumentTypeError, "int_keys_unsupported", None, None),
        ),
        (
            lambda: ks.StickyKeyDispatcher().remove_consumer(9),
            (UnknownConsumer, "unknown_consumer", None, None),
        ),
        (
            lambda: ks.dispatch.BucketCheckpoints().ack(1, 0, 5),
            (NotFound, "unknown_bucket", None, None),
        ),
    ],
)
def test_a_kernel_error_says_its_kind_argument_and_index(
    call: Callable[[], object], expected: tuple[type[KeysharedError], str, str | None, int | None]
) -> None:
    assert parts(caught(call)) == expected


def test_a_kernel_message_names_the_argument_as_the_caller_does() -> None:
    error = caught(lambda: _core._checked_splits([0x8000, 0x10], "bucket_splits"))
    assert str(error) == (
        "bucket_splits must be strictly ascending: bucket_splits[1] = 16 follows 32768"
    )
    error = caught(lambda: ks.key_hashes(["a", "b", None]))
    assert str(error) == "keys[2] is None; pass null_key= to hash nulls as given bytes"


def test_a_layout_error_names_its_argument() -> None:
    layout = TopicLayout.initial(1, bucket_budget=4)
    error = caught(lambda: layout.rebucket_segment(0, 3, now_ms=0, bucket_splits=[0x8000, 0x10]))
    assert parts(error) == (InvalidArgument, "splits_not_ascending", "bucket_splits", 1)
    assert str(error).startswith("bucket_splits must be strictly ascending: bucket_splits[1]")
    error = caught(lambda: layout.segment(7))
    assert parts(error) == (InvalidArgument, "invalid_argument", "segment_id", None)
    split = layout.split_segment(0, now_ms=0)
    error = caught(lambda: split.split_segment(0, now_ms=1))
    assert parts(error) == (RefusedChange, "refused_change", "segment_id", None)


def test_a_reader_error_names_the_field_by_its_path() -> None:
    error = caught(lambda: AutoScalePolicyOverride.from_dict({"no_such_field": 1}))
    assert parts(error) == (InvalidArgument, "unknown_field", "override", None)
    error = caught(lambda: read_subscription({}, "sub"))
    assert error.kind == "missing_field"
    layout = json.loads(TopicLayout.initial(1, bucket_budget=4).to_json())
    layout["segments"][0]["bucket_splits"] = [0x8000, 0x10]
    error = caught(lambda: TopicLayout.from_json(json.dumps(layout)))
    assert error.kind == "splits_not_ascending"
    assert error.index == 1
    assert error.argument is not None and error.argument.endswith(".bucket_splits")
    assert str(error).startswith(f"{error.argument} must be strictly ascending")


def test_an_error_raised_without_parts_has_its_class_kind() -> None:
    for cls, kind in [
        (InvalidArgument, "invalid_argument"),
        (RefusedChange, "refused_change"),
        (ScenarioError, "scenario_error"),
        (ArgumentTypeError, "wrong_type"),
        (NotFound, "not_found"),
        (UnknownConsumer, "unknown_consumer"),
    ]:
        error = cls("x")
        assert (error.kind, error.argument, error.index) == (kind, None, None)
        assert parts(pickle.loads(pickle.dumps(error))) == (cls, kind, None, None)


# --- the list of kinds -------------------------------------------------------------------

PACKAGE = Path(ks.__file__).parent


def _python_kinds() -> set[str]:
    """The kinds the Python layers raise: each class's own, and every ``kind=`` given as a
    literal (the others pass on an error's own)."""
    classes = {
        name: cls
        for name, cls in vars(ks.errors).items()
        if isinstance(cls, type) and issubclass(cls, KeysharedError) and cls is not KeysharedError
    }
    kinds = {cls.default_kind for cls in classes.values()}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in classes:
                kinds.update(
                    k.value.value
                    for k in node.keywords
                    if k.arg == "kind" and isinstance(k.value, ast.Constant)
                )
    return kinds


def test_every_kind_raised_is_listed_and_every_listed_kind_is_raised() -> None:
    raised = set(_core._error_kinds()) | _python_kinds()
    assert sorted(raised - set(ks.errors.KINDS)) == [], "raised but not listed"
    assert sorted(set(ks.errors.KINDS) - raised) == [], "listed but never raised"


def test_the_kinds_are_snake_case_and_in_the_module_docs() -> None:
    for kind in ks.errors.KINDS:
        assert kind.isidentifier() and kind == kind.lower()
        assert f"``{kind}``" in (ks.errors.__doc__ or "")

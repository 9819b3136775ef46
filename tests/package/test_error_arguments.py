"""Every error the Python layers raise says which argument was wrong (``argument``), or says
on purpose that no single one was (``argument=None``): each raise site passes it explicitly,
and the errors a user meets through the API and the command line name the argument as the
user wrote it."""

from __future__ import annotations

import ast
import io
import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

import keyshared
from keyshared import AutoScalePolicy, SegmentRouter, TopicLayout, TopicName, cli, errors
from keyshared.errors import ArgumentTypeError, InvalidArgument, KeysharedError, RefusedChange
from keyshared.explain import load_stats, read_subscription, what_if
from keyshared.loadbalance import NamespaceBundle, NamespaceBundles, topic_hash
from keyshared.scalable import AutoScalePolicyOverride, Rebucket, apply_decision
from keyshared.simulate import Scenario, ScenarioError, builtin_scenario

PACKAGE = Path(keyshared.__file__).parent
STATS = Path(__file__).parents[1] / "fixtures" / "stats" / "held.json"

#: Every exception class of :mod:`keyshared.errors`, by name.
ERROR_CLASSES = frozenset(
    name
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, KeysharedError)
)


def error_calls(path: Path) -> list[ast.Call]:
    """The calls in ``path`` of an exception class of :mod:`keyshared.errors`, by its name
    (``InvalidArgument(...)``) or as an attribute (``errors.InvalidArgument(...)``)."""
    calls = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in ERROR_CLASSES:
            calls.append(node)
    return calls


# --- every raise site says it --------------------------------------------------------------


def test_every_error_raised_in_python_passes_its_argument_explicitly() -> None:
    """``argument=`` (None allowed, where no single argument is at fault) at every call of
    an error class, so that a new raise site cannot forget to say which argument was wrong."""
    paths = sorted(PACKAGE.rglob("*.py"))
    calls = {path: error_calls(path) for path in paths}
    assert sum(map(len, calls.values())) > 100, "the scan finds the raise sites"
    missing = [
        f"{path.relative_to(PACKAGE.parent)}:{call.lineno}"
        for path, found in calls.items()
        for call in found
        if "argument" not in {k.arg for k in call.keywords}
    ]
    header = "errors raised without argument= (None where no single argument is at fault):"
    assert not missing, "\n".join([header, *missing])


# --- what a user meets ---------------------------------------------------------------------


def raised(call: Callable[[], object]) -> KeysharedError:
    with pytest.raises(KeysharedError) as info:
        call()
    return info.value


def test_a_refused_layout_change_names_the_segment_argument() -> None:
    layout = TopicLayout.initial(4, bucket_budget=8)
    split = layout.split_segment(0, now_ms=0)
    error = raised(lambda: split.split_segment(0, now_ms=1))
    assert (type(error), error.argument) == (RefusedChange, "segment_id")
    assert raised(lambda: split.merge_segments(1, 0, now_ms=1)).argument == "segment_id_2"
    assert raised(lambda: split.prune_segment(1)).argument == "segment_id"
    count = layout.segment(1).bucket_count
    assert raised(lambda: layout.rebucket_segment(1, count, now_ms=0)).argument == "bucket_count"
    # Two segments that do not touch: neither one alone is at fault.
    error = raised(lambda: layout.merge_segments(0, 2, now_ms=0))
    assert (error.kind, error.argument) == ("not_adjacent", None)


def test_a_decision_and_a_policy_name_their_field() -> None:
    layout = TopicLayout.initial(2)
    error = raised(lambda: apply_decision(layout, Rebucket((), 2, "x"), AutoScalePolicy(), 0))
    assert error.argument == "decision.segment_ids"
    error = raised(lambda: AutoScalePolicy(split_msg_rate_in=1.0, merge_msg_rate_in=5.0))
    assert error.argument == "split_msg_rate_in"
    # Read from JSON, the field goes by its path, and the message starts with it.
    data = {"split_msg_rate_in": 1.0, "merge_msg_rate_in": 5.0}
    error = raised(lambda: AutoScalePolicy.from_dict(data))
    assert error.argument == "policy.split_msg_rate_in"
    assert str(error).startswith("policy.split_msg_rate_in (1) must be above merge_msg_rate_in")
    error = raised(lambda: AutoScalePolicyOverride(no_such_field=1))
    assert (type(error), error.argument) == (ArgumentTypeError, "no_such_field")


def test_routing_and_topic_names_name_their_argument() -> None:
    assert raised(lambda: SegmentRouter().route("k", [])).argument == "active_segments"
    assert raised(lambda: TopicName.get(5)).argument == "name"  # type: ignore[arg-type]
    assert raised(lambda: TopicName.get("nowhere://t/ns/x")).argument == "name"


def test_bundles_name_the_argument_the_caller_passed() -> None:
    assert raised(lambda: topic_hash(5)).argument == "name"  # type: ignore[arg-type]
    bundles = NamespaceBundles("pulsar/ns", (0, 0x8000_0000, 0xFFFF_FFFF))
    foreign = NamespaceBundle(0, 0x8000_0000, "pulsar/other")
    assert raised(lambda: bundles.validate_bundle(foreign)).argument == "bundle"
    assert raised(lambda: bundles.split_bundle(foreign)).argument == "target_bundle"


def test_explain_names_the_argument_of_the_call() -> None:
    stats = load_stats(STATS)
    sub = read_subscription(stats, "sub")
    assert raised(lambda: what_if(sub, leave="nobody")).argument == "leave"
    assert raised(lambda: sub.consumer("nobody")).argument == "label"
    assert raised(lambda: what_if(sub)).argument is None  # join or leave: either one
    assert raised(lambda: read_subscription(stats, "other")).argument == "subscriptions"


SCENARIO = """
name = "s"
duration_ms = 3000

[[topics]]
name = "orders"
layout = { segments = 2, bucket_budget = 4 }

[[topics.producers]]
name = "p"
rate_msg_s = 300

[[topics.consumers]]
name = "c"
rate_msg_s = 400
"""


def test_a_scenario_error_keeps_the_field_and_index_at_fault(tmp_path: Path) -> None:
    assert raised(lambda: builtin_scenario("nope")).argument == "name"
    data = tomllib.loads(SCENARIO)
    Scenario.from_dict(data)  # as it is, it reads
    dag = TopicLayout.initial(1, bucket_budget=4).to_dict()
    dag["segments"][0]["bucket_splits"] = [0x8000, 0x10]
    data["topics"][0]["layout"] = {"dag": dag}
    error = raised(lambda: Scenario.from_dict(data))
    assert isinstance(error, ScenarioError)
    assert error.argument == "scenario.topics[0].layout.dag.segments[0].bucket_splits"
    assert error.index == 1
    assert str(error).startswith(f"{error.argument} must be strictly ascending")
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert raised(lambda: Scenario.from_file(path)).argument == "path"


def command_error(argv: list[str]) -> KeysharedError:
    """The error the command ``argv`` raises, which :func:`keyshared.cli.main` prints
    (exiting 2)."""
    args = cli.build_parser().parse_args(argv)
    command = next(c for c in cli.COMMANDS if c.name == args.command)
    return raised(lambda: command.run(args, io.StringIO()))


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["route"], "KEY"),
        (["demo", "--keys", "0"], "--keys"),
        (["audit", "--from", "kafka", "--partitions", "4", "--to-partitions", "8"], "KEY"),
        (["simulate", "--scenario", "low-throughput", "--seed", "-1"], "--seed"),
        (["simulate", "scenario.toml", "--scale", "2"], "--scale"),
        (["simulate"], None),  # a file or --scenario: either one
        (["explain", "--url", "http://localhost:8080", "--subscription", "sub"], "--url"),
        (["explain", "stats.json", "--subscription", "sub", "--ring"], "--ring"),
        (["explain", "stats.json", "--subscription", "sub", "--count", "2"], "--count"),
    ],
)
def test_a_command_names_the_flag_as_typed(argv: list[str], argument: str | None) -> None:
    error = command_error(argv)
    assert isinstance(error, InvalidArgument)
    assert error.argument == argument
    if argument is not None:
        assert argument in str(error)

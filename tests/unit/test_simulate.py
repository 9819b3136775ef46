"""The scenario simulator: the built-in scenarios hold every invariant, a broken hand-off is
caught, the PIP-486 claims hold, runs are deterministic, and bad scenarios say what is
wrong with them."""

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from keyshared import AutoScalePolicy, TopicLayout
from keyshared.cli import main
from keyshared.dispatch import PendingAcksMap
from keyshared.scalable import ImpactedConsumersResult
from keyshared.simulate import (
    ConsumerSpec,
    HandOff,
    InvariantViolation,
    KeySpec,
    PayloadSpec,
    ProducerSpec,
    RateChange,
    Scenario,
    ScenarioError,
    Stall,
    TopicSpec,
    WindowSpec,
    builtin_scenario,
    simulate,
    summarize,
    to_json,
)
from keyshared.simulate.builtin import drain_backlog

SMALL = {"drain-backlog": 0.05, "low-throughput": 0.1, "beyond-max-segments": 0.1}


def run(scenario: Scenario, **kwargs: Any) -> dict[str, Any]:
    return summarize(simulate(scenario, **kwargs))


def assert_clean(summary: dict[str, Any]) -> None:
    """Drained, nothing lost, nothing processed twice without a redelivery."""
    m = summary["messages"]
    assert summary["outcome"]["ended"] == "drained"
    assert m["backlog_at_end"] == 0
    assert m["processed"] + m["given_up_unprocessed"] == m["produced"] > 0
    assert summary["invariants"]["violations"] == 0


def topic(
    *,
    layout: TopicLayout | None = None,
    policy: AutoScalePolicy | None = None,
    producers: tuple[ProducerSpec, ...] | None = None,
    consumers: tuple[ConsumerSpec, ...],
    window: WindowSpec | None = None,
) -> TopicSpec:
    return TopicSpec(
        name="t",
        layout=layout or TopicLayout.initial(1, 4),
        policy=policy or AutoScalePolicy(enabled=False),
        producers=producers or (ProducerSpec("p", 200.0, keys=KeySpec(count=500)),),
        consumers=consumers,
        window=window or WindowSpec(),
    )


def scenario(*topics: TopicSpec, duration_ms: int = 20_000, **kwargs: Any) -> Scenario:
    return Scenario(name="test", topics=topics, duration_ms=duration_ms, **kwargs)


# --- built-in scenarios ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def builtin_runs() -> dict[str, dict[str, Any]]:
    return {name: run(builtin_scenario(name, scale)) for name, scale in SMALL.items()}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_builtin_scenarios_hold_every_invariant(
    builtin_runs: dict[str, dict[str, Any]], name: str
) -> None:
    summary = builtin_runs[name]
    assert_clean(summary)
    checks = summary["invariants"]["checks"]
    assert checks["deliveries"] == checks["processings"] > 0
    assert checks["cursor_moves"] > 0 and checks["checkpoint_moves"] > 0


def test_drain_backlog_fans_the_sealed_segment_over_its_buckets(
    builtin_runs: dict[str, dict[str, Any]],
) -> None:
    summary = builtin_runs["drain-backlog"]
    first = next(d for d in summary["drains"] if d["segment_id"] == 0)
    assert first["bucket_count"] == 4
    assert first["max_parallel_consumers"] == 4
    # Four consumers of 50 msg/s (at this scale) drain it about four times faster than one.
    single_consumer_ms = first["backlog_at_seal"] / 50 * 1000
    assert first["drain_ms"] < single_consumer_ms / 3
    split = summary["decisions"][1]
    assert (split["action"], split["reason"], split["trigger"]) == (
        "split",
        "consumer-count",
        "consumers-joined",
    )
    assert summary["topics"][0]["final_layout"]["active_segments"] == 10


def test_low_throughput_topics_rebucket_instead_of_splitting(
    builtin_runs: dict[str, dict[str, Any]],
) -> None:
    summary = builtin_runs["low-throughput"]
    acted = [d for d in summary["decisions"] if d["action"] != "none"]
    assert len(acted) == summary["scenario"]["topics"] == 2
    for d in acted:
        assert (d["action"], d["reason"], d["bucket_count"]) == (
            "rebucket",
            "below-split-rate-floor",
            8,
        )
    for t in summary["topics"]:
        assert t["final_layout"]["active_segments"] == 1
        assert t["final_layout"]["buckets"] == 8
    assert summary["consumers"]["peak_busy"] == 16


def test_beyond_max_segments_activates_every_consumer(
    builtin_runs: dict[str, dict[str, Any]],
) -> None:
    summary = builtin_runs["beyond-max-segments"]
    acted = [d for d in summary["decisions"] if d["action"] != "none"]
    assert [(d["action"], d["reason"], d["bucket_count"]) for d in acted] == [
        ("rebucket", "at-max-segments", 4)
    ]
    assert acted[0]["segment_ids"] == list(range(6))
    assert summary["topics"][0]["final_layout"] == {
        "epoch": 6,
        "active_segments": 6,
        "buckets": 24,
        "segments_created": 12,
    }
    # Six consumers worked before the rollover, all twenty after it.
    busy = summary["series"]["busy_consumers"]
    assert max(busy[:25]) == 6
    assert summary["consumers"]["peak_busy"] == summary["consumers"]["count"] == 20


# --- the PIP's claims ---------------------------------------------------------------------------


@pytest.mark.parametrize("buckets", [2, 4, 8])
def test_drain_parallelism_is_bounded_by_the_sealed_segments_bucket_count(buckets: int) -> None:
    base = drain_backlog(0.05)
    spec = replace(base.topics[0], layout=TopicLayout.initial(1, buckets))
    summary = run(replace(base, topics=(spec,), duration_ms=120_000))
    assert_clean(summary)
    first = next(d for d in summary["drains"] if d["segment_id"] == 0)
    assert first["bucket_count"] == buckets
    assert first["max_parallel_consumers"] == buckets  # 10 consumers, at most one per bucket


@pytest.mark.parametrize(("segments", "parallelism"), [(1, 4), (2, 4), (4, 4), (8, 8)])
def test_total_parallelism_is_the_bucket_budget_until_segments_outnumber_it(
    segments: int, parallelism: int
) -> None:
    # Twelve slow consumers under a steady overload: every readable bucket stays busy.
    spec = topic(
        layout=TopicLayout.initial(segments, 4),
        producers=(ProducerSpec("p", 2_000.0, keys=KeySpec(count=5_000)),),
        consumers=(ConsumerSpec("c", 100.0, count=12),),
    )
    summary = run(scenario(spec, duration_ms=5_000, max_time_ms=5_000))
    assert summary["consumers"]["peak_busy"] == parallelism
    assert summary["consumers"]["peak_owning"] == parallelism


# --- hand-offs, retries and failures ------------------------------------------------------------


class EarlyRelease(HandOff):
    """A broken hand-off: the previous owner's pending acks are not drained, so the bucket
    goes to its new owner at once."""

    def hand_off(
        self, impacted: ImpactedConsumersResult, pending_acks: Sequence[PendingAcksMap]
    ) -> None:
        return None


def slow_handoff_scenario() -> Scenario:
    """Consumer ``a`` owns both buckets and takes a second or two per entry until 2 s, past
    the ack timeout; ``b`` joins at 0.5 s and takes one bucket while ``a`` still holds an
    entry of it, which times out and is due for redelivery before ``a`` gets to it."""
    spec = topic(
        layout=TopicLayout.initial(1, 2),
        producers=(ProducerSpec("p", 20.0, stop_ms=1_000, keys=KeySpec(count=50)),),
        consumers=(
            ConsumerSpec("a", 1.0, rate_changes=(RateChange(2_000, 1_000.0),)),
            ConsumerSpec("b", 1_000.0, join_ms=500),
        ),
        window=WindowSpec(ack_timeout_ms=1_000, base_redelivery_delay_ms=100),
    )
    return scenario(spec, duration_ms=2_000, max_time_ms=120_000)


def test_a_correct_handoff_withholds_the_bucket_and_only_duplicates() -> None:
    summary = run(slow_handoff_scenario())
    assert_clean(summary)
    assert summary["handoffs"]["withheld"] >= 1
    assert summary["invariants"]["checks"]["redeliveries"] > 0
    assert summary["messages"]["processed_twice_or_more"] > 0  # at-least-once, after retries


def test_a_handoff_that_releases_a_bucket_early_is_caught() -> None:
    with pytest.raises(InvariantViolation) as caught:
        simulate(slow_handoff_scenario(), handoff=EarlyRelease())
    violation = caught.value
    assert violation.invariant == "exclusive-keys"
    assert "holds unacked messages" in violation.message
    assert any("move" in line for line in violation.trail)
    assert any("deliver" in line for line in violation.trail)
    assert "last" in violation.report()


def test_nacks_retry_in_order() -> None:
    spec = topic(
        consumers=(ConsumerSpec("c", 400.0, count=3, nack_probability=0.3),),
        window=WindowSpec(base_redelivery_delay_ms=50, max_redelivery_count=50),
    )
    summary = run(scenario(spec, duration_ms=10_000))
    assert_clean(summary)
    assert summary["invariants"]["checks"]["redeliveries"] > 0
    assert sum(c["nacks"] for c in summary["consumers"]["per_consumer"]) > 0


@pytest.mark.parametrize("policy", ["drop", "dead_letter"])
def test_a_stalled_consumer_times_out_into_the_poison_policy(policy: str) -> None:
    spec = topic(
        layout=TopicLayout.initial(1, 1),
        consumers=(ConsumerSpec("c", 500.0, stalls=(Stall(2_000, 6_000),)),),
        window=WindowSpec(
            ack_timeout_ms=500,
            base_redelivery_delay_ms=100,
            max_redelivery_count=1,
            poison_policy=policy,  # type: ignore[arg-type]
        ),
    )
    summary = run(scenario(spec, duration_ms=10_000, max_time_ms=60_000))
    assert_clean(summary)
    given_up = summary["messages"]["dropped" if policy == "drop" else "dead_lettered"]
    assert given_up > 0


def test_consumers_leaving_and_slowing_lose_nothing() -> None:
    spec = topic(
        layout=TopicLayout.initial(2, 8),
        consumers=(
            ConsumerSpec("stays", 150.0, rate_changes=(RateChange(4_000, 50.0),)),
            ConsumerSpec("leaves", 150.0, count=3, leave_ms=6_000),
            ConsumerSpec("late", 150.0, count=2, join_ms=3_000),
        ),
    )
    summary = run(scenario(spec, duration_ms=12_000, max_time_ms=120_000))
    assert_clean(summary)
    assert summary["handoffs"]["bucket_moves"] > 0


# --- determinism --------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_summary() -> None:
    # Random arrivals, keys, sizes and nacks, a consumer leaving, and the policy acting.
    spec = topic(
        policy=AutoScalePolicy(split_cooldown_ms=2_000, split_vs_rebucket_min_msg_rate_in=50.0),
        producers=(
            ProducerSpec(
                "p",
                600.0,
                keys=KeySpec(count=2_000, distribution="zipf"),
                payload=PayloadSpec(10, 900),
            ),
        ),
        consumers=(
            ConsumerSpec("c", 300.0, count=3, nack_probability=0.05),
            ConsumerSpec("d", 300.0, count=2, join_ms=2_000, leave_ms=7_000),
        ),
        window=WindowSpec(base_redelivery_delay_ms=50),
    )
    small = scenario(
        spec,
        duration_ms=10_000,
        max_time_ms=60_000,
        policy_interval_ms=1_000,
        load_report_interval_ms=1_000,
    )
    first, second = run(small, seed=7), run(small, seed=7)
    assert first["invariants"]["checks"]["redeliveries"] > 0
    assert len([d for d in first["decisions"] if d["action"] != "none"]) > 1
    assert to_json(first) == to_json(second)
    assert to_json(run(small, seed=8)) != to_json(first)


# --- scenario files -----------------------------------------------------------------------------

TOML = """
name = "file"
duration_ms = 3000
seed = 3

[[topics]]
name = "orders"
layout = { segments = 2, bucket_budget = 4 }
policy = { enabled = false }

[[topics.producers]]
name = "p"
rate_msg_s = 300
keys = { count = 1000, distribution = "zipf", zipf_exponent = 1.1 }
payload = { bytes = 512 }

[[topics.consumers]]
name = "c"
count = 2
rate_msg_s = 400
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_toml_scenario_runs_from_the_command_line(tmp_path: Path, capsys: Any) -> None:
    path = write(tmp_path, TOML)
    out = tmp_path / "out"
    assert main(["simulate", str(path), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "scenario file (seed 3, 1 topic(s)): drained" in text
    assert "simulated messages per second" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"]["name"] == "file"
    assert_clean(summary)
    for png in ("backlog.png", "parallelism.png", "utilization.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_json_and_toml_forms_agree(tmp_path: Path) -> None:
    import tomllib

    from_toml = Scenario.from_file(write(tmp_path, TOML))
    from_json = Scenario.from_file(write(tmp_path, json.dumps(tomllib.loads(TOML)), "s.json"))
    assert from_toml == from_json
    assert from_toml.topics[0].producers[0].payload == PayloadSpec(512, 512)


def test_a_builtin_scenario_runs_from_the_command_line(tmp_path: Path, capsys: Any) -> None:
    args = ["simulate", "--scenario", "low-throughput", "--scale", "0.05", "--seed", "2"]
    assert main([*args, "--out", str(tmp_path), "--no-plots", "--no-progress"]) == 0
    assert (
        "rebucket segment_ids=[0] bucket_count=8 (below-split-rate-floor" in capsys.readouterr().out
    )
    assert json.loads((tmp_path / "summary.json").read_text())["scenario"]["seed"] == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TOML.replace("duration_ms = 3000\n", ""), r"scenario\.duration_ms is missing"),
        (
            TOML.replace("rate_msg_s = 300", "rate_msg_s = -1"),
            r"topics\[0\]\.producers\[0\]\.rate_msg_s must not be negative",
        ),
        (
            TOML.replace("count = 2\n", "count = 0\n"),
            r"topics\[0\]\.consumers\[0\]\.count must be >= 1",
        ),
        (
            TOML.replace('distribution = "zipf"', 'distribution = "pareto"'),
            r"topics\[0\]\.producers\[0\]\.keys\.distribution",
        ),
        (TOML.replace("seed = 3", "seed = 3\nspeed = 1"), r"scenario has unknown field\(s\) speed"),
        (
            TOML.replace("policy = { enabled = false }", "policy = { max_segments = 0 }"),
            r"topics\[0\]\.policy.*max_segments",
        ),
        (TOML.replace("segments = 2", "segments = 0"), r"topics\[0\]\.layout\.segments"),
        (
            TOML + "rate_changes = [{ at_ms = 5 }]\n",
            r"topics\[0\]\.consumers\[0\]\.rate_changes\[0\]\.rate_msg_s",
        ),
        (
            TOML.replace('name = "c"', 'name = "p"\nnack_probability = 1.5'),
            r"nack_probability must be in \[0, 1\)",
        ),
        ("name = 'x'\n[[topics\n", r"not valid TOML"),
    ],
)
def test_bad_scenarios_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        Scenario.from_file(write(tmp_path, text))


def test_bad_paths_and_arguments_exit_2(tmp_path: Path, capsys: Any) -> None:
    assert main(["simulate", str(tmp_path / "missing.toml"), "--no-progress"]) == 2
    assert "cannot read scenario" in capsys.readouterr().err
    assert main(["simulate", str(write(tmp_path, "{}", "s.yaml")), "--no-progress"]) == 2
    assert "must end in .toml or .json" in capsys.readouterr().err
    assert main(["simulate", "--no-progress"]) == 2
    assert "give a SCENARIO file or --scenario NAME" in capsys.readouterr().err
    path = str(write(tmp_path, TOML))
    assert main(["simulate", path, "--scale", "2", "--no-progress"]) == 2
    assert "--scale applies to built-in scenarios only" in capsys.readouterr().err


def test_order_holds_across_load_splits_and_merges() -> None:
    policy = AutoScalePolicy(
        split_msg_rate_in=1_000.0,
        merge_msg_rate_in=100.0,
        split_cooldown_ms=2_000,
        merge_cooldown_ms=2_000,
        merge_window_ms=2_000,
    )
    spec = topic(
        layout=TopicLayout.initial(1, 4),
        policy=policy,
        producers=(
            ProducerSpec("burst", 2_500.0, stop_ms=8_000, keys=KeySpec(count=300)),
            ProducerSpec("trickle", 20.0, start_ms=8_000, keys=KeySpec(count=300)),
        ),
        consumers=(ConsumerSpec("c", 1_500.0, count=3),),
    )
    summary = run(
        scenario(
            spec,
            duration_ms=40_000,
            max_time_ms=120_000,
            tick_ms=100,
            policy_interval_ms=1_000,
            load_report_interval_ms=1_000,
            load_rate_window_ms=2_000,
        )
    )
    assert_clean(summary)
    actions = {(d["action"], d["reason"]) for d in summary["decisions"]}
    assert ("split", "msgRateIn") in actions
    assert ("merge", "cold") in actions


def test_a_violation_exits_1_with_its_event_trail(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise InvariantViolation("key-order", "t: out of order", 1.5, ["first event", "last"])

    monkeypatch.setattr("keyshared.simulate.command.simulate", broken)
    args = ["simulate", "--scenario", "drain-backlog", "--no-plots", "--no-progress"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "[key-order] at 1.500 ms: t: out of order" in err
    assert "last 2 events:\n  first event\n  last" in err


def test_latency_and_utilization_are_reported(builtin_runs: dict[str, dict[str, Any]]) -> None:
    summary = builtin_runs["drain-backlog"]
    latency = summary["latency_ms"]
    assert 0 <= latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]
    # The first consumer works alone behind a growing backlog for 50 s: the busiest.
    rows = summary["consumers"]["per_consumer"]
    assert rows[0]["name"] == "first"
    assert rows[0]["utilization"] == max(r["utilization"] for r in rows) > 0.8
    assert len(summary["series"]["t_ms"]) == len(summary["series"]["backlog"]) > 200


def test_a_blocked_poison_entry_waits_for_its_consumer_to_leave() -> None:
    spec = topic(
        layout=TopicLayout.initial(1, 1),
        consumers=(
            ConsumerSpec("a", 500.0, leave_ms=5_000, stalls=(Stall(1_000),)),
            ConsumerSpec("b", 500.0, join_ms=100),
        ),
        window=WindowSpec(ack_timeout_ms=500, base_redelivery_delay_ms=100, max_redelivery_count=1),
    )
    summary = run(scenario(spec, duration_ms=8_000, max_time_ms=60_000))
    assert_clean(summary)
    assert summary["messages"]["dropped"] == summary["messages"]["dead_lettered"] == 0
    # Nothing moved while the poison entry blocked the bucket (about 4 s).
    assert summary["latency_ms"]["max"] > 3_500

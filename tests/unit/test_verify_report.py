"""keyshared.verify.report: the verdict's text (PASS, or FAIL with the first violation and
the likely cause), its JSON, the run's folder (record, verdict, report, timeline, and the
failed scenario as a file ``keyshared simulate`` runs), and records read back."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from support.verify_runs import Log, drop_ack, out_of_order_join

from keyshared import cli
from keyshared.errors import InvalidArgument
from keyshared.simulate import Scenario
from keyshared.verify.checker import OUT_OF_ORDER_CAUSE, RULES, check
from keyshared.verify.record import RunRecord
from keyshared.verify.report import (
    format_verdict,
    iso_moment,
    load_record,
    run_start_ms,
    simulate_scenario,
    write_report,
)
from keyshared.verify.synthetic import START_MS, SyntheticWorkload, synthetic_run

#: A run of every membership change: joins, a close, a crash and a timeout, stalls, nacks.
BUSY = SyntheticWorkload(
    messages=1500, keys=30, consumers=2, joins=3, leaves=3, stalls=2, nack_probability=0.05
)


def failed_busy_run() -> RunRecord:
    record = synthetic_run(BUSY)
    assert drop_ack(record.scenarios[0], random.Random(3))
    return record


# --- the text ------------------------------------------------------------------------------


def test_a_passing_run_reads_pass_then_its_table() -> None:
    record = synthetic_run(SyntheticWorkload(messages=50, keys=5))
    text = format_verdict(record, check(record))
    first, *rest = text.splitlines()
    assert first.startswith("PASS: 1 scenario(s), 50 messages on persistent://")
    assert "every rule held (lost, order, exclusive, model, duplicate, stats)" in first
    assert rest[1] == "scenario synthetic: PASS"
    assert rest[2].split() == [
        "sent",
        "delivered",
        "acked",
        "lost",
        "redelivered",
        "dups",
        "allowed",
        "dups",
        "unexpected",
        "matched/predicted",
        "held",
    ]
    assert rest[3].split()[:4] == ["50", "50", "50", "0"]


def test_a_failing_run_reads_fail_and_its_first_violation_first() -> None:
    record = out_of_order_join()
    verdict = check(record)
    text = format_verdict(record, verdict)
    lines = text.splitlines()
    assert lines[0].startswith("FAIL: 1 scenario(s), 2 messages") and "violation(s)" in lines[0]
    first = verdict.first
    # The model's miss and the key shared happen at the one delivery; the model's is first.
    assert first is not None and first.rule == "model"
    assert lines[1] == "  first      model in scenario join"
    assert lines[2] == f"  key        {first.key}"
    assert lines[3] == "  messages   100:1:-1 (send index #1)"
    assert lines[4] == "  consumers  c2, c1"
    since = first.moment_ms - START_MS - 1
    assert (
        lines[5]
        == f"  moment     {iso_moment(first.moment_ms)} ({since:,.0f} ms since the run's start)"
    )
    assert lines[6] == f"  rule       model: {RULES['model']}"
    assert lines[7] == f"  what       {first.detail}"
    assert lines[8] == f"  likely cause: {OUT_OF_ORDER_CAUSE}"
    assert "allowOutOfOrderDelivery=true" in lines[8]
    assert "drains on c1 until c1 acks it" in lines[7]
    assert "scenario join: FAIL" in text and "violations: exclusive 1, model 1" in text


def test_moments_read_as_iso_times_and_from_the_runs_start() -> None:
    assert iso_moment(START_MS) == "2023-11-14T22:13:20.000Z"
    assert iso_moment(START_MS + 1234.5) == "2023-11-14T22:13:21.234Z"
    record = synthetic_run(SyntheticWorkload(messages=5))
    assert run_start_ms(record) == START_MS + 1


def test_a_long_list_of_violations_is_cut_and_counted() -> None:
    log = Log()
    log.join("c1")
    log.publish(*(f"k{n}" for n in range(30)))
    record = log.record()
    text = format_verdict(record, check(record))
    assert "violations: lost 30, model 30" in text
    assert text.rstrip().endswith("... and 40 more")


# --- the files -----------------------------------------------------------------------------


def test_the_folder_holds_record_verdict_report_timeline_and_the_failed_scenario(
    tmp_path: Path,
) -> None:
    record = failed_busy_run()
    verdict = check(record)
    paths = write_report(tmp_path / "run", record, verdict)
    names = [p.name for p in paths]
    assert names == [
        "record.json",
        "verdict.json",
        "timeline.png",
        "simulate-synthetic.json",
        "report.md",
    ]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == sorted(names)
    assert load_record(paths[0]) == record
    assert json.loads(paths[1].read_text()) == json.loads(json.dumps(verdict.to_json()))
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = paths[4].read_text()
    assert report.startswith("# keyshared verify: FAIL\n")
    assert format_verdict(record, verdict).splitlines()[1] in report
    assert "- [simulate-synthetic.json](simulate-synthetic.json)" in report


def test_a_passing_run_writes_no_scenario_to_simulate(tmp_path: Path) -> None:
    record = synthetic_run(SyntheticWorkload(messages=40, keys=4))
    paths = write_report(tmp_path, record, check(record))
    assert [p.name for p in paths] == ["record.json", "verdict.json", "timeline.png", "report.md"]


def test_a_failed_write_leaves_the_file_before_it(tmp_path: Path, monkeypatch: Any) -> None:
    record = synthetic_run(SyntheticWorkload(messages=40, keys=4))
    verdict = check(record)
    write_report(tmp_path, record, verdict)
    before = (tmp_path / "timeline.png").read_bytes()

    def broken(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("keyshared.verify.report.plot_timeline", broken)
    with pytest.raises(OSError, match="disk full"):
        write_report(tmp_path, record, verdict)
    assert (tmp_path / "timeline.png").read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_record_that_is_not_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text('{"format": 1, "topic"', encoding="utf-8")
    with pytest.raises(InvalidArgument, match=r"record\.json: the JSON ends early"):
        load_record(path)
    path.write_text('{"format": 2}', encoding="utf-8")
    with pytest.raises(InvalidArgument, match=r"record\.format must be 1") as info:
        load_record(path)
    assert info.value.argument == "record.format"


# --- the scenario the simulator replays ----------------------------------------------------


def test_the_failed_scenario_maps_to_the_simulators_form() -> None:
    record = failed_busy_run()
    scenario = record.scenarios[0]
    data = simulate_scenario(record, scenario)
    parsed = Scenario.from_dict(data)
    [topic] = parsed.topics
    assert parsed.seed == record.seed and not topic.policy.enabled
    assert topic.producers[0].keys.count == 30 and topic.producers[0].keys.prefix == "key-"
    joined = [e for e in scenario.events if e[0] == "join"]
    assert [c.name for c in topic.consumers] == [e[2] for e in joined]
    start = scenario.events[0][1]
    assert [c.join_ms for c in topic.consumers] == [int(e[1] - start) for e in joined]
    left = {e[2]: e[1] - start for e in scenario.events if e[0] == "leave"}
    assert len(left) == 3
    for c in topic.consumers:
        assert (c.leave_ms is None) == (c.name not in left)
    assert any(c.stalls for c in topic.consumers)
    assert any(c.nack_probability > 0 for c in topic.consumers)
    live = [0]
    for e in scenario.events:
        live.append(live[-1] + {"join": 1, "leave": -1}.get(e[0], 0))
    assert topic.layout.active_segments()[0].bucket_count == max(live)


def test_keyshared_simulate_runs_the_failed_scenario(tmp_path: Path, capsys: Any) -> None:
    record = failed_busy_run()
    paths = write_report(tmp_path / "run", record, check(record))
    [scenario] = [p for p in paths if p.name.startswith("simulate-")]
    out = tmp_path / "sim"
    status = cli.main(["simulate", str(scenario), "--out", str(out), "--no-plots", "--no-progress"])
    assert status == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"]["name"] == "verify-synthetic"
    assert summary["messages"]["produced"] > 0

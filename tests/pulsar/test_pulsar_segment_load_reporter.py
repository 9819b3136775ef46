"""Pulsar's SegmentLoadReporterTest, ported: the pure materiality test, and the writer's
decisions against a dict standing in for the metadata store. A stateful test checks the
immutable reporter against a small model of Pulsar's last-written cache."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from keyshared.scalable import SegmentLoadReporter, SegmentLoadStats

THRESHOLD = 0.25
TOPIC = "topic://tenant/ns/my-topic"


def stats(msg_in: float) -> SegmentLoadStats:
    return SegmentLoadStats(msg_in, 0, 0, 0)


class Store:
    """The metadata store's load records: value and modification time per segment."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, int], tuple[SegmentLoadStats, int]] = {}
        self.clock = 0

    def report(
        self, reporter: SegmentLoadReporter, segment_id: int, current: SegmentLoadStats
    ) -> tuple[bool, SegmentLoadReporter]:
        write, after = reporter.report_if_changed(TOPIC, segment_id, current)
        if write:
            self.clock += 1
            self.records[(TOPIC, segment_id)] = (current, self.clock)
        return write, after

    def delete(self, segment_id: int) -> None:
        self.records.pop((TOPIC, segment_id), None)


# --- isMaterialChange (pure) --------------------------------------------------------------------


def test_material_change_relative_threshold() -> None:
    check = SegmentLoadReporter.is_material_change
    assert check(stats(1000), stats(1300), THRESHOLD)
    assert not check(stats(1000), stats(1100), THRESHOLD)
    assert check(stats(1000), stats(700), THRESHOLD)


def test_material_change_crossing_zero() -> None:
    check = SegmentLoadReporter.is_material_change
    assert check(stats(0), stats(1), THRESHOLD)
    assert check(stats(1), stats(0), THRESHOLD)
    assert not check(stats(0), stats(0), THRESHOLD)


def test_material_change_any_metric() -> None:
    last = SegmentLoadStats(1000, 1000, 1000, 1000)
    current = SegmentLoadStats(1000, 1000, 1000, 2000)
    assert SegmentLoadReporter.is_material_change(last, current, THRESHOLD)


# --- reportIfChanged --------------------------------------------------------------------------


def test_first_report_always_writes() -> None:
    store = Store()
    write, _ = store.report(SegmentLoadReporter(THRESHOLD), 0, stats(500))
    assert write
    assert store.records[(TOPIC, 0)][0].msg_rate_in == 500.0


def test_immaterial_second_report_skipped() -> None:
    store = Store()
    write, reporter = store.report(SegmentLoadReporter(THRESHOLD), 0, stats(1000))
    assert write
    first_modified = store.records[(TOPIC, 0)][1]
    write, reporter = store.report(reporter, 0, stats(1100))
    assert not write
    value, modified = store.records[(TOPIC, 0)]
    assert value.msg_rate_in == 1000.0 and modified == first_modified


def test_material_second_report_writes() -> None:
    store = Store()
    _, reporter = store.report(SegmentLoadReporter(THRESHOLD), 0, stats(1000))
    write, _ = store.report(reporter, 0, stats(1500))
    assert write
    assert store.records[(TOPIC, 0)][0].msg_rate_in == 1500.0


def test_forget_forces_re_report() -> None:
    store = Store()
    write, reporter = store.report(SegmentLoadReporter(THRESHOLD), 0, stats(1000))
    assert write
    write, reporter = store.report(reporter, 0, stats(1050))
    assert not write
    reporter = reporter.forget(TOPIC, 0)
    write, _ = store.report(reporter, 0, stats(1050))
    assert write


def test_delete_segment_load_tolerates_missing() -> None:
    store = Store()
    reporter = SegmentLoadReporter(THRESHOLD)
    store.delete(7)
    assert reporter.forget(TOPIC, 7) is reporter  # nothing to forget is no error either
    _, reporter = store.report(reporter, 7, stats(100))
    store.delete(7)
    assert (TOPIC, 7) not in store.records


# --- beyond Pulsar's tests --------------------------------------------------------------------


def test_the_reporter_is_an_immutable_value() -> None:
    reporter = SegmentLoadReporter()
    assert reporter.rate_change_threshold == THRESHOLD
    _, after = reporter.report_if_changed(TOPIC, 0, stats(10))
    assert not reporter.last_written and after.last_written == {(TOPIC, 0): stats(10)}
    with pytest.raises(TypeError):
        after.last_written[(TOPIC, 1)] = stats(1)  # type: ignore[index]


def test_a_failed_write_keeps_the_old_reporter_so_the_next_report_retries() -> None:
    reporter = SegmentLoadReporter()
    write, _not_kept = reporter.report_if_changed(TOPIC, 0, stats(10))
    assert write
    write, _ = reporter.report_if_changed(TOPIC, 0, stats(10))
    assert write


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda r: r.report_if_changed(TOPIC, -1, stats(1)), ValueError, "segment_id"),
        (lambda r: r.report_if_changed(5, 0, stats(1)), TypeError, "topic"),
        (lambda r: r.report_if_changed(TOPIC, 0, 1.0), TypeError, "current"),
        (lambda r: r.forget(TOPIC, "0"), TypeError, "segment_id"),
        (lambda r: SegmentLoadReporter(-0.5), ValueError, "rate_change_threshold"),
        (
            lambda r: SegmentLoadReporter(last_written={TOPIC: stats(1)}),
            TypeError,
            rf"last_written key '{TOPIC}' must be a \(topic, segment_id\) tuple",
        ),
        (
            lambda r: SegmentLoadReporter(last_written={(TOPIC, 0, 1): stats(1)}),
            TypeError,
            r"last_written key .* must be a \(topic, segment_id\) tuple",
        ),
        (
            lambda r: SegmentLoadReporter(last_written={(TOPIC, -1): stats(1)}),
            ValueError,
            rf"last_written key \('{TOPIC}', -1\): segment_id must be >= 0, got -1",
        ),
        (
            lambda r: SegmentLoadReporter(last_written={(7, 0): stats(1)}),
            TypeError,
            r"last_written key \(7, 0\): topic must be a str, got int",
        ),
    ],
)
def test_bad_arguments_name_themselves(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(SegmentLoadReporter())  # type: ignore[operator]


class ReporterModel(RuleBasedStateMachine):
    """The immutable reporter against Pulsar's mutable last-written cache."""

    def __init__(self) -> None:
        super().__init__()
        self.reporter = SegmentLoadReporter(THRESHOLD)
        self.cache: dict[int, SegmentLoadStats] = {}

    @rule(
        segment_id=st.integers(0, 3),
        rates=st.tuples(*[st.sampled_from([0.0, 1.0, 100.0, 120.0, 130.0, 1e6])] * 4),
        written=st.booleans(),
    )
    def report(self, segment_id: int, rates: tuple[float, ...], written: bool) -> None:
        current = SegmentLoadStats(*rates)
        last = self.cache.get(segment_id)
        expected = last is None or any(
            (new != 0.0) if old == 0.0 else abs(new - old) / old > THRESHOLD
            for old, new in zip(last.rates(), current.rates(), strict=True)
        )
        write, after = self.reporter.report_if_changed(TOPIC, segment_id, current)
        assert write == expected
        if write and written:  # the store accepted the write
            self.reporter = after
            self.cache[segment_id] = current

    @rule(segment_id=st.integers(0, 3))
    def forget(self, segment_id: int) -> None:
        self.reporter = self.reporter.forget(TOPIC, segment_id)
        self.cache.pop(segment_id, None)

    @invariant()
    def same_cache(self) -> None:
        assert dict(self.reporter.last_written) == {(TOPIC, k): v for k, v in self.cache.items()}


TestReporterModel = ReporterModel.TestCase
TestReporterModel.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)

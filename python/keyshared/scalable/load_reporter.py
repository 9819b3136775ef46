"""The owning broker's per-segment load writer (Pulsar's ``SegmentLoadReporter``, PIP-483).

A sample is written to the metadata store only when it differs materially from the last one
this broker wrote for the segment (:func:`keyshared.is_material_change`), or when none was
written yet. A steady segment writes once and then stays quiet, so the stored record's
modification time says how long its load has held (what the merge window reads).

The reporter is an immutable value: :meth:`SegmentLoadReporter.report_if_changed` says
whether to write and returns the reporter to keep *once the write succeeded* (a failed write
keeps the old one, so the next sample is tried again), and :meth:`SegmentLoadReporter.forget`
drops a segment the broker no longer owns, so that a later owner's first report writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from keyshared._checks import check_int, check_rate
from keyshared.errors import ArgumentTypeError
from keyshared.scalable.policy import SegmentLoadStats, is_material_change

#: Pulsar's default relative threshold: a rate must move by more than 25%.
DEFAULT_RATE_CHANGE_THRESHOLD = 0.25

_Key = tuple[str, int]


def _key(topic: str, segment_id: int, where: str = "") -> _Key:
    """``(topic, segment_id)`` checked; ``where`` prefixes the names in errors (a key of
    ``last_written``)."""
    if not isinstance(topic, str):
        raise ArgumentTypeError(
            f"{where}topic must be a str, got {type(topic).__name__}",
            argument="last_written" if where else "topic",
        )
    return topic, check_int(f"{where}segment_id", segment_id, minimum=0)


def _written_key(key: object) -> _Key:
    """A key of ``last_written``: a ``(topic, segment_id)`` pair."""
    if not isinstance(key, tuple) or len(key) != 2:
        raise ArgumentTypeError(
            f"last_written key {key!r} must be a (topic, segment_id) tuple", argument="last_written"
        )
    return _key(key[0], key[1], f"last_written key {key!r}: ")


@dataclass(frozen=True)
class SegmentLoadReporter:
    """The last value written per ``(topic, segment_id)`` and the write threshold (a
    fraction: 0.25 is 25%)."""

    rate_change_threshold: float = DEFAULT_RATE_CHANGE_THRESHOLD
    last_written: Mapping[_Key, SegmentLoadStats] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def __post_init__(self) -> None:
        threshold = check_rate("rate_change_threshold", self.rate_change_threshold)
        object.__setattr__(self, "rate_change_threshold", threshold)
        if not isinstance(self.last_written, Mapping):
            raise ArgumentTypeError(
                f"last_written must be a mapping, got {type(self.last_written).__name__}",
                argument="last_written",
            )
        for key, stats in self.last_written.items():
            topic, segment_id = _written_key(key)
            if not isinstance(stats, SegmentLoadStats):
                raise ArgumentTypeError(
                    f"last_written[{topic!r}, {segment_id}] must be SegmentLoadStats,"
                    f" got {type(stats).__name__}",
                    argument="last_written",
                )
        object.__setattr__(self, "last_written", MappingProxyType(dict(self.last_written)))

    def report_if_changed(
        self, topic: str, segment_id: int, current: SegmentLoadStats
    ) -> tuple[bool, SegmentLoadReporter]:
        """``(write, reporter)``: whether ``current`` must be written (the first report of a
        segment always is), and the reporter that remembers it as written."""
        key = _key(topic, segment_id)
        if not isinstance(current, SegmentLoadStats):
            raise ArgumentTypeError(
                f"current must be SegmentLoadStats, got {type(current).__name__}",
                argument="current",
            )
        last = self.last_written.get(key)
        if last is not None and not is_material_change(last, current, self.rate_change_threshold):
            return False, self
        return True, SegmentLoadReporter(
            self.rate_change_threshold, {**self.last_written, key: current}
        )

    def forget(self, topic: str, segment_id: int) -> SegmentLoadReporter:
        """Drops the segment (its topic was unloaded, sealed or deleted here); a segment
        never reported is no error."""
        key = _key(topic, segment_id)
        if key not in self.last_written:
            return self
        kept = {k: v for k, v in self.last_written.items() if k != key}
        return SegmentLoadReporter(self.rate_change_threshold, kept)

    is_material_change = staticmethod(is_material_change)


__all__ = ["DEFAULT_RATE_CHANGE_THRESHOLD", "SegmentLoadReporter"]

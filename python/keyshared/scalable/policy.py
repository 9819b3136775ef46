"""PIP-483 auto split / merge and PIP-486 rebucketing: a pure decision over a snapshot.

:func:`decide` takes the layout, each segment's last load sample, the STREAM/CHECKPOINT
consumer count of each subscription, the resolved :class:`AutoScalePolicy` and the time, and
returns exactly one of :class:`Split`, :class:`Merge`, :class:`Rebucket` or
:class:`NoAction`. It holds no state: the caller passes the times of the last split, merge
and rebucket (or recovers them from the layout with :func:`last_operation_times`).

A resolved policy that breaks an invariant (:func:`resolve_auto_scale_config`) is an
:class:`InvalidPolicy`: auto-scaling is off for that topic until it is fixed, as in Pulsar.

Units: rates in msg/s and B/s, times and durations in ms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import FrozenInstanceError, asdict, dataclass, field, fields, replace
from itertools import pairwise
from types import MappingProxyType
from typing import Any, TypedDict

from keyshared._checks import (
    check_bool,
    check_instance,
    check_int,
    check_keys,
    check_mapping,
    check_optional_int,
    check_rate,
    parse_id,
)
from keyshared._core import RING_SIZE, equal_width_splits
from keyshared._reader import MissingValue, build, field_path, json_form, read
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.scalable.layout import Segment, TopicLayout
from keyshared.versions import M1, SCALABLE_TOPICS

_RATES = ("msg_rate_in", "bytes_rate_in", "msg_rate_out", "bytes_rate_out")
#: The smallest allowed value of each integer policy field (times in ms, never negative).
_POLICY_MINIMUMS = {
    "max_segments": 1,
    "min_segments": 1,
    "max_dag_depth": 0,
    "split_cooldown_ms": 0,
    "merge_cooldown_ms": 0,
    "merge_window_ms": 0,
    "rebucket_cooldown_ms": 0,
    "max_entry_buckets_per_segment": 1,
    "entry_bucket_budget": 1,
}
#: The metric names reasons use, as Pulsar's evaluator spells them.
_METRICS = ("msgRateIn", "bytesRateIn", "msgRateOut", "bytesRateOut")


@dataclass(frozen=True)
class SegmentLoadStats:
    """A segment's rolling rates as its owning broker reports them (Pulsar's
    ``SegmentLoadStats``): messages in and out in msg/s, bytes in and out in B/s; each
    finite and >= 0."""

    msg_rate_in: float = 0.0
    bytes_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    bytes_rate_out: float = 0.0

    def __post_init__(self) -> None:
        for name in _RATES:
            object.__setattr__(self, name, check_rate(name, getattr(self, name)))

    def rates(self) -> tuple[float, float, float, float]:
        """``(msg_rate_in, bytes_rate_in, msg_rate_out, bytes_rate_out)``."""
        return (self.msg_rate_in, self.bytes_rate_in, self.msg_rate_out, self.bytes_rate_out)

    @property
    def combined_rate(self) -> float:
        """The four rates summed: how merge candidates are ranked (coldest first)."""
        return sum(self.rates())


@dataclass(frozen=True)
class SegmentLoadSample:
    """The last load record written for a segment and when it was written (the metadata
    store's modification time, epoch ms). A record that still reads cold with an old
    ``modified_at_ms`` proves the segment has been cold since then."""

    stats: SegmentLoadStats
    modified_at_ms: int

    def __post_init__(self) -> None:
        if not isinstance(self.stats, SegmentLoadStats):
            raise ArgumentTypeError(
                f"stats must be SegmentLoadStats, got {type(self.stats).__name__}", argument="stats"
            )
        check_int("modified_at_ms", self.modified_at_ms, minimum=0)

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON form: the four rates and ``modified_at_ms``."""
        return {**asdict(self.stats), "modified_at_ms": self.modified_at_ms}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str = "sample") -> SegmentLoadSample:
        """A sample from its flat JSON form (a missing rate is 0); errors name the field."""
        flat = dict(check_mapping(name, data))
        if "modified_at_ms" not in flat:
            raise InvalidArgument(f"{name}.modified_at_ms is missing", argument=name)
        modified_at_ms = flat.pop("modified_at_ms")
        stats = read(SegmentLoadStats, flat, name)
        return build(cls, name, stats=stats, modified_at_ms=modified_at_ms)


def is_material_change(
    last: SegmentLoadStats, current: SegmentLoadStats, threshold: float = 0.25
) -> bool:
    """The load reporter's write test (Pulsar's ``SegmentLoadReporter.isMaterialChange``): a
    rate moved by more than ``threshold`` (a fraction: 0.25 is 25%) of its last written
    value, or moved off zero. Staying at zero is no change."""
    limit = check_rate("threshold", threshold)
    last = check_instance("last", last, SegmentLoadStats)
    current = check_instance("current", current, SegmentLoadStats)
    for old, new in zip(last.rates(), current.rates(), strict=True):
        if old == 0.0:
            if new != 0.0:
                return True
        elif abs(new - old) / old > limit:
            return True
    return False


@dataclass(frozen=True)
class AutoScalePolicy:
    """The resolved auto split / merge / rebucket policy of one topic (Pulsar's
    ``AutoScaleConfig``), with the broker defaults.

    Split thresholds are strictly above their merge thresholds: the dead band between them
    keeps a just-merged segment from splitting again. A merge threshold of 0 means never
    merge on that metric (no rate is below 0). Times are ms, rates msg/s or B/s.
    """

    enabled: bool = True
    max_segments: int = 64
    min_segments: int = 1
    max_dag_depth: int = 10
    split_cooldown_ms: int = 60_000
    merge_cooldown_ms: int = 300_000
    merge_window_ms: int = 300_000
    split_msg_rate_in: float = 10_000.0
    split_bytes_rate_in: float = 50_000_000.0
    split_msg_rate_out: float = 50_000.0
    split_bytes_rate_out: float = 250_000_000.0
    merge_msg_rate_in: float = 1_000.0
    merge_bytes_rate_in: float = 5_000_000.0
    merge_msg_rate_out: float = 5_000.0
    merge_bytes_rate_out: float = 25_000_000.0
    rebucket_cooldown_ms: int = 60_000
    split_vs_rebucket_min_msg_rate_in: float = 1_000.0
    max_entry_buckets_per_segment: int = 1024
    entry_bucket_budget: int = 4

    def __post_init__(self) -> None:
        for name in _POLICY_FIELDS:
            value = _check_field(name, getattr(self, name), _POLICY_MINIMUMS.get(name, 0))
            object.__setattr__(self, name, value)
        check_int(
            "max_entry_buckets_per_segment", self.max_entry_buckets_per_segment, maximum=RING_SIZE
        )
        if self.max_segments < self.min_segments:
            raise InvalidArgument(
                f"max_segments ({self.max_segments}) must be >= min_segments ({self.min_segments})",
                argument="max_segments",
            )
        for rate in _RATES:
            split, merge = getattr(self, f"split_{rate}"), getattr(self, f"merge_{rate}")
            if split <= merge:
                raise InvalidArgument(
                    f"split_{rate} ({split:g}) must be above merge_{rate} ({merge:g}): "
                    "the dead band between them prevents split/merge flapping",
                    argument=f"split_{rate}",
                )

    def split_thresholds(self) -> tuple[float, float, float, float]:
        return (
            self.split_msg_rate_in,
            self.split_bytes_rate_in,
            self.split_msg_rate_out,
            self.split_bytes_rate_out,
        )

    def merge_thresholds(self) -> tuple[float, float, float, float]:
        return (
            self.merge_msg_rate_in,
            self.merge_bytes_rate_in,
            self.merge_msg_rate_out,
            self.merge_bytes_rate_out,
        )

    def resolve(
        self,
        namespace_override: AutoScalePolicyOverride | None = None,
        topic_override: AutoScalePolicyOverride | None = None,
    ) -> AutoScalePolicy:
        """The effective policy of a topic, taking ``self`` as the broker defaults: each
        field from the topic override if set there, else the namespace override, else
        ``self``. Validated once, on the result, so overrides may move thresholds together;
        ValueError when the result is invalid (:func:`resolve_auto_scale_config` returns an
        :class:`InvalidPolicy` instead)."""
        resolved = resolve_auto_scale_config(self, namespace_override, topic_override)
        if isinstance(resolved, InvalidPolicy):
            raise InvalidArgument(resolved.reason, argument=None)
        return resolved

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str = "policy") -> AutoScalePolicy:
        """A policy from a JSON object; fields it leaves out keep their defaults. Errors name
        the field as ``name.field``."""
        return read(cls, data, name)


#: Each policy field's type, by name: what the override takes and checks.
_POLICY_FIELDS = {f.name: str(f.type) for f in fields(AutoScalePolicy)}
_FIELD_CHECKS: dict[str, Callable[[str, Any, int], Any]] = {
    "bool": lambda name, value, _: check_bool(name, value),
    "int": lambda name, value, minimum: check_int(name, value, minimum=minimum),
    "float": lambda name, value, _: check_rate(name, value),
}


def _check_field(name: str, value: object, minimum: int = 0) -> Any:
    """A policy field's value checked by the field's type: a bool, an int of at least
    ``minimum``, or a rate (finite, non-negative, as a float)."""
    return _FIELD_CHECKS[_POLICY_FIELDS[name]](name, value, minimum)


class AutoScalePolicyOverride:
    """A namespace- or topic-level override (Pulsar's ``AutoScalePolicyOverride``): any of
    :class:`AutoScalePolicy`'s fields, by keyword, each optional. An unset field (or one set
    to ``None``) reads ``None`` and falls through to the next level; see
    :meth:`AutoScalePolicy.resolve`. The fields are the policy's own, so the two cannot
    drift apart; each value is checked by its type as the policy's is (integers only for
    being non-negative: the resolved policy checks the rest). Immutable and hashable."""

    __slots__ = ("_fields",)
    _fields: Mapping[str, Any]

    def __init__(self, **fields: Any) -> None:
        unknown = sorted(set(fields) - _POLICY_FIELDS.keys())
        if unknown:
            raise ArgumentTypeError(
                f"AutoScalePolicyOverride got unknown field(s) {', '.join(unknown)}:"
                " it takes AutoScalePolicy's fields",
                argument=unknown[0],
            )
        checked = {
            name: _check_field(name, fields[name])
            for name in _POLICY_FIELDS
            if fields.get(name) is not None
        }
        object.__setattr__(self, "_fields", MappingProxyType(checked))

    def __getattr__(self, name: str) -> Any:
        if name in _POLICY_FIELDS:
            return self._fields.get(name)
        raise AttributeError(f"AutoScalePolicyOverride has no attribute {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AutoScalePolicyOverride):
            return NotImplemented
        return self._fields == other._fields

    def __hash__(self) -> int:
        return hash(frozenset(self._fields.items()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self._fields.items())
        return f"AutoScalePolicyOverride({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (AutoScalePolicyOverride.from_dict, (self.set_fields(),))

    def set_fields(self) -> dict[str, Any]:
        """The fields this override sets, in the policy's field order."""
        return dict(self._fields)

    def to_dict(self) -> dict[str, Any]:
        return self.set_fields()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str = "override") -> AutoScalePolicyOverride:
        """An override from a JSON object of policy fields (``null``: unset); errors name the
        field as ``name.field``."""
        check_keys(name, check_mapping(name, data), _POLICY_FIELDS.keys())
        return build(cls, name, **data)


@dataclass(frozen=True)
class InvalidPolicy:
    """A resolved policy that breaks an invariant (a bad override combination, or a broker
    default such as 0 buckets per segment). Pulsar's controller then treats auto
    split/merge as disabled for the topic until an operator fixes it, rather than failing
    every evaluation: :func:`decide` answers NoAction saying so. ``reason`` is the
    validation error."""

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str):
            raise ArgumentTypeError(
                f"reason must be a str, got {type(self.reason).__name__}", argument="reason"
            )

    @property
    def enabled(self) -> bool:
        return False


def resolve_auto_scale_config(
    broker: AutoScalePolicy | AutoScalePolicyOverride | None = None,
    namespace_override: AutoScalePolicyOverride | None = None,
    topic_override: AutoScalePolicyOverride | None = None,
) -> AutoScalePolicy | InvalidPolicy:
    """The effective policy of a topic (Pulsar's ``resolveAutoScaleConfig``): the broker
    defaults (an :class:`AutoScalePolicy`, or the fields an :class:`AutoScalePolicyOverride`
    sets over the built-in defaults, which may themselves be invalid), then the namespace
    override, then the topic override, each set field winning. The result is validated
    once; an invalid one is an :class:`InvalidPolicy`, never an exception."""
    if broker is None or isinstance(broker, AutoScalePolicyOverride):
        chosen = asdict(AutoScalePolicy())
        if broker is not None:
            chosen.update(broker.set_fields())
    elif isinstance(broker, AutoScalePolicy):
        chosen = asdict(broker)
    else:
        raise ArgumentTypeError(
            "broker must be an AutoScalePolicy or AutoScalePolicyOverride,"
            f" got {type(broker).__name__}",
            argument="broker",
        )
    overrides = (("namespace_override", namespace_override), ("topic_override", topic_override))
    for name, override in overrides:
        if override is None:
            continue
        if not isinstance(override, AutoScalePolicyOverride):
            raise ArgumentTypeError(
                f"{name} must be an AutoScalePolicyOverride, got {type(override).__name__}",
                argument=name,
            )
        chosen.update(override.set_fields())
    try:
        return AutoScalePolicy(**chosen)
    except ValueError as e:
        return InvalidPolicy(str(e))


# --- decisions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """Split ``segment_id`` at its midpoint. ``reason``: ``"consumer-count"`` or the metric
    that crossed its threshold (``"msgRateIn"``, ``"bytesRateIn"``, ``"msgRateOut"``,
    ``"bytesRateOut"``)."""

    segment_id: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"action": "split", "segment_id": self.segment_id, "reason": self.reason}


@dataclass(frozen=True)
class Merge:
    """Merge two hash-adjacent active segments (``segment_id_1`` has the lower range).
    ``reason`` is ``"cold"``."""

    segment_id_1: int
    segment_id_2: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": "merge",
            "segment_id_1": self.segment_id_1,
            "segment_id_2": self.segment_id_2,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Rebucket:
    """Roll each of ``segment_ids`` (ascending) over to ``bucket_count`` buckets. ``reason``:
    ``"at-max-segments"`` or ``"below-split-rate-floor"``."""

    segment_ids: tuple[int, ...]
    bucket_count: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": "rebucket",
            "segment_ids": list(self.segment_ids),
            "bucket_count": self.bucket_count,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class NoAction:
    """Nothing to do; ``reason`` says why, stage by stage (consumers, split, merge)."""

    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"action": "none", "reason": self.reason}


Decision = Split | Merge | Rebucket | NoAction


def decide(
    layout: TopicLayout,
    load_by_segment: Mapping[int, SegmentLoadSample],
    stream_consumer_count_by_sub: Mapping[str, int],
    policy: AutoScalePolicy | InvalidPolicy,
    now_ms: int,
    last_split_at_ms: int | None = None,
    last_merge_at_ms: int | None = None,
    last_rebucket_at_ms: int | None = None,
    *,
    pulsar_version: str = SCALABLE_TOPICS.default,
) -> Decision:
    """The one action the controller should take now (Pulsar's
    ``AutoScalePolicyEvaluator.decide``) under ``pulsar_version``'s rules (``"master"``, the
    default, or ``"5.0.0-M1"``). The rules, in order; a stage that does not act passes to
    the next one, and NoAction reports what held each stage back:

    1. disabled, or an :class:`InvalidPolicy`: NoAction;
    2. consumer demand (the largest STREAM/CHECKPOINT consumer count of one subscription)
       above the active segment count: split the busiest segment by msgRateIn (ties to the
       lowest id) while under max segments and at or above the split-vs-rebucket floor;
       else rebucket every segment below ``min(next_power_of_two(ceil(demand / segments)),
       max_entry_buckets_per_segment)`` buckets, unless the buckets already cover demand;
    3. load: split the segment whose largest rate / split-threshold ratio is highest and
       above 1.0 (ties to the lowest id);
    4. merge the hash-adjacent pair with the smallest combined rate among pairs whose both
       segments have a sample at least ``merge_window_ms`` old with every rate strictly
       below its merge threshold, merge depth below ``max_dag_depth``, and whose merge keeps
       at least ``min(demand, total buckets)`` buckets.

    A cooldown is in effect while ``now_ms - last < cooldown`` (``None``: never happened).
    A segment without a sample counts as zero load and never merges.

    5.0.0-M1 predates PIP-486: it splits the busiest segment for surplus consumers whatever
    its traffic (no split-vs-rebucket floor), never rebuckets (at max segments it does
    nothing for them), and merges without the capacity guard of rule 4, so that a merge may
    leave a consumer idle. ValueError for another ``pulsar_version``.
    """
    m1 = SCALABLE_TOPICS.check(pulsar_version) == M1
    ctx = _Context.build(
        layout,
        load_by_segment,
        stream_consumer_count_by_sub,
        policy,
        now_ms,
        (last_split_at_ms, last_merge_at_ms, last_rebucket_at_ms),
        m1,
    )
    if isinstance(policy, InvalidPolicy):
        return NoAction(f"disabled: invalid policy: {policy.reason}")
    if not policy.enabled:
        return NoAction("disabled: auto split/merge is turned off for this topic")
    notes = []
    for stage in (_consumer_scale, _load_split, _merge):
        outcome = stage(ctx)
        if not isinstance(outcome, str):
            return outcome
        notes.append(outcome)
    return NoAction("; ".join(notes))


class AutoScalePolicyEvaluator:
    """Pulsar's entry point for the decision; :func:`decide` under its Java name."""

    decide = staticmethod(decide)


@dataclass(frozen=True)
class _Context:
    layout: TopicLayout
    active: tuple[Segment, ...]
    samples: Mapping[int, SegmentLoadSample]
    demand: int
    policy: AutoScalePolicy
    now_ms: int
    last_split_at_ms: int | None
    last_merge_at_ms: int | None
    last_rebucket_at_ms: int | None
    #: 5.0.0-M1's rules (no rebucket lane, no split floor, no merge capacity guard).
    m1: bool = False

    @classmethod
    def build(
        cls,
        layout: TopicLayout,
        load_by_segment: Mapping[int, SegmentLoadSample],
        consumers: Mapping[str, int],
        policy: AutoScalePolicy | InvalidPolicy,
        now_ms: int,
        last: tuple[int | None, int | None, int | None],
        m1: bool = False,
    ) -> _Context:
        """:func:`decide`'s arguments, checked. The others are checked even when the policy
        is invalid; a disabled policy stands in for it then."""
        if not isinstance(policy, AutoScalePolicy | InvalidPolicy):
            raise ArgumentTypeError(
                f"policy must be an AutoScalePolicy or InvalidPolicy, got {type(policy).__name__}",
                argument="policy",
            )
        if not isinstance(layout, TopicLayout):
            raise ArgumentTypeError(
                f"layout must be a TopicLayout, got {type(layout).__name__}", argument="layout"
            )
        check_mapping("load_by_segment", load_by_segment)
        for sid, sample in load_by_segment.items():
            if sid not in layout.segments:
                raise InvalidArgument(
                    f"load_by_segment names segment {sid!r}, which is not in the layout",
                    argument="load_by_segment",
                )
            if not isinstance(sample, SegmentLoadSample):
                raise ArgumentTypeError(
                    f"load_by_segment[{sid}] must be a SegmentLoadSample,"
                    f" got {type(sample).__name__}",
                    argument="load_by_segment",
                )
        check_mapping("stream_consumer_count_by_sub", consumers)
        for sub, count in consumers.items():
            check_int(f"stream_consumer_count_by_sub[{sub!r}]", count, minimum=0)
        check_int("now_ms", now_ms, minimum=0)
        names = ("last_split_at_ms", "last_merge_at_ms", "last_rebucket_at_ms")
        split, merge, rebucket = (
            check_optional_int(n, v, minimum=0) for n, v in zip(names, last, strict=True)
        )
        return cls(
            layout,
            layout.active_segments(),
            load_by_segment,
            max(consumers.values(), default=0),
            policy if isinstance(policy, AutoScalePolicy) else _DISABLED,
            now_ms,
            split,
            merge,
            rebucket,
            m1,
        )

    def stats(self, segment_id: int) -> SegmentLoadStats:
        sample = self.samples.get(segment_id)
        return sample.stats if sample is not None else _ZERO

    def cooldown_left(self, last_ms: int | None, cooldown_ms: int) -> int:
        """How many ms of the cooldown remain (0: not in effect). An operation stamped
        after ``now_ms`` (clock skew between brokers) counts as happening now, so the wait
        is never longer than the cooldown itself."""
        if last_ms is None:
            return 0
        return max(0, cooldown_ms - max(0, self.now_ms - last_ms))


_ZERO = SegmentLoadStats()
_DISABLED = AutoScalePolicy(enabled=False)


def _consumer_scale(ctx: _Context) -> Decision | str:
    segments, policy = len(ctx.active), ctx.policy
    if ctx.demand <= segments:
        return f"consumers: demand {ctx.demand} does not exceed {segments} active segment(s)"
    busiest = min(ctx.active, key=lambda s: (-ctx.stats(s.segment_id).msg_rate_in, s.segment_id))
    rate = ctx.stats(busiest.segment_id).msg_rate_in
    at_cap = segments >= policy.max_segments
    if ctx.m1 and at_cap:
        return (
            f"consumers: demand {ctx.demand} > {segments} segment(s), at max segments"
            f" ({policy.max_segments}); 5.0.0-M1 has no rebucket lane"
        )
    if not at_cap and (ctx.m1 or rate >= policy.split_vs_rebucket_min_msg_rate_in):
        left = ctx.cooldown_left(ctx.last_split_at_ms, policy.split_cooldown_ms)
        if left:
            return (
                f"consumers: demand {ctx.demand} > {segments} segment(s), but the split of"
                f" segment {busiest.segment_id} waits for the split cooldown ({left} ms left)"
            )
        return Split(busiest.segment_id, "consumer-count")
    lane = "at-max-segments" if at_cap else "below-split-rate-floor"
    why = (
        f"at max segments ({policy.max_segments})"
        if at_cap
        else f"busiest msgRateIn {rate:g} below the split-vs-rebucket floor"
        f" {policy.split_vs_rebucket_min_msg_rate_in:g}"
    )
    capacity = sum(s.bucket_count for s in ctx.active)
    if ctx.demand <= capacity:
        return f"consumers: demand {ctx.demand} is covered by {capacity} bucket(s) ({why})"
    left = ctx.cooldown_left(ctx.last_rebucket_at_ms, policy.rebucket_cooldown_ms)
    if left:
        return (
            f"consumers: demand {ctx.demand} > {capacity} bucket(s) ({why}), but rebucketing"
            f" waits for the rebucket cooldown ({left} ms left)"
        )
    per_segment = -(-ctx.demand // segments)
    target = min(1 << (per_segment - 1).bit_length(), policy.max_entry_buckets_per_segment)
    # Above 32,768, equal widths give one bucket fewer than asked (bucket 0 keeps [0, 1]):
    # compare with what rebucketing to target reaches, or it would be asked for forever.
    reached = len(equal_width_splits(target)) + 1
    below = tuple(sorted(s.segment_id for s in ctx.active if s.bucket_count < reached))
    if not below:
        return (
            f"consumers: demand {ctx.demand} > {capacity} bucket(s) ({why}), but every segment"
            f" already has {reached} bucket(s), the most allowed"
        )
    return Rebucket(below, target, lane)


def _load_split(ctx: _Context) -> Decision | str:
    policy = ctx.policy
    if len(ctx.active) >= policy.max_segments:
        return f"split: at max segments ({policy.max_segments})"
    left = ctx.cooldown_left(ctx.last_split_at_ms, policy.split_cooldown_ms)
    if left:
        return f"split: within the split cooldown ({left} ms left)"
    thresholds = policy.split_thresholds()
    # One pass in range order; the lowest id wins a tie, as a pass in id order would give.
    best_score, best_metric, best_id = -1.0, _METRICS[0], -1
    for seg in ctx.active:
        sid = seg.segment_id
        score, metric = _scored(ctx.stats(sid), thresholds)
        if score > best_score or (score == best_score and sid < best_id):
            best_score, best_metric, best_id = score, metric, sid
    score, metric, segment_id = best_score, best_metric, best_id
    if score > 1.0:
        return Split(segment_id, metric)
    if score == 0.0:
        return "split: no load on any segment"
    return (
        f"split: no segment above a split threshold (highest: segment {segment_id} at"
        f" {score:.0%} of its {metric} threshold)"
    )


def _overload(stats: SegmentLoadStats, policy: AutoScalePolicy) -> tuple[float, str]:
    """The largest rate / split-threshold ratio and its metric (first metric wins a tie)."""
    return _scored(stats, policy.split_thresholds())


def _scored(
    stats: SegmentLoadStats, thresholds: tuple[float, float, float, float]
) -> tuple[float, str]:
    """The largest rate / split-threshold ratio and its metric (first metric wins a tie)."""
    score, metric = 0.0, _METRICS[0]
    ratio = stats.msg_rate_in / thresholds[0]
    if ratio > score:
        score, metric = ratio, _METRICS[0]
    ratio = stats.bytes_rate_in / thresholds[1]
    if ratio > score:
        score, metric = ratio, _METRICS[1]
    ratio = stats.msg_rate_out / thresholds[2]
    if ratio > score:
        score, metric = ratio, _METRICS[2]
    ratio = stats.bytes_rate_out / thresholds[3]
    if ratio > score:
        score, metric = ratio, _METRICS[3]
    return score, metric


def _merge(ctx: _Context) -> Decision | str:
    policy = ctx.policy
    if len(ctx.active) <= policy.min_segments:
        return f"merge: at min segments ({policy.min_segments})"
    left = ctx.cooldown_left(ctx.last_merge_at_ms, policy.merge_cooldown_ms)
    if left:
        return f"merge: within the merge cooldown ({left} ms left)"
    counts = [len(s.bucket_splits) + 1 for s in ctx.active]
    capacity = sum(counts)
    in_use = min(ctx.demand, capacity)
    held: dict[str, list[str]] = {}
    best: tuple[float, int, int] | None = None
    # Each segment's own blocker once, not once per pair it is in.
    blockers = _merge_blockers(ctx)
    ceiling = policy.max_entry_buckets_per_segment
    for i, (a, b) in enumerate(pairwise(ctx.active)):
        both = counts[i] + counts[i + 1]
        if not ctx.m1 and capacity - both + min(both, ceiling) < in_use:
            blocker: str | None = f"would leave fewer than the {in_use} bucket(s) consumers use"
        else:
            blocker = blockers[i] or blockers[i + 1]
        if blocker is not None:
            held.setdefault(blocker, []).append(f"{a.segment_id}+{b.segment_id}")
            continue
        combined = ctx.stats(a.segment_id).combined_rate + ctx.stats(b.segment_id).combined_rate
        if best is None or combined < best[0]:
            best = (combined, a.segment_id, b.segment_id)
    if best is not None:
        return Merge(best[1], best[2], "cold")
    return (
        "merge: no adjacent pair can merge ("
        + "; ".join(f"{why}: {_first(pairs)}" for why, pairs in held.items())
        + ")"
    )


def _merge_blockers(ctx: _Context) -> list[str | None]:
    """Per active segment (in range order), why it cannot take part in a merge, or None.
    The reason names a class of problem (so that pairs held back for the same reason are
    listed together)."""
    policy = ctx.policy
    depths = ctx.layout._merges  # per segment, the merges among it and its ancestors
    max_depth, window = policy.max_dag_depth, policy.merge_window_ms
    t_msg_in, t_bytes_in, t_msg_out, t_bytes_out = policy.merge_thresholds()
    samples, now = ctx.samples, ctx.now_ms
    out: list[str | None] = []
    for seg in ctx.active:
        if len(depths[seg.segment_id]) >= max_depth:
            out.append(f"merge depth at max_dag_depth ({max_depth})")
            continue
        sample = samples.get(seg.segment_id)
        if sample is None:
            out.append("a segment has no load sample")
        elif now - sample.modified_at_ms < window:
            out.append(f"a sample is younger than the merge window ({window} ms)")
        else:
            st = sample.stats
            cold = (
                st.msg_rate_in < t_msg_in
                and st.bytes_rate_in < t_bytes_in
                and st.msg_rate_out < t_msg_out
                and st.bytes_rate_out < t_bytes_out
            )
            out.append(
                None if cold else "a segment is not below every merge threshold (dead band or hot)"
            )
    return out


def _first(items: list[str], shown: int = 6) -> str:
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


# --- recovery and snapshots --------------------------------------------------------------


class _Clocks(TypedDict):
    """:class:`LastOperationTimes` as :func:`decide`'s keyword arguments."""

    last_split_at_ms: int | None
    last_merge_at_ms: int | None
    last_rebucket_at_ms: int | None


@dataclass(frozen=True)
class LastOperationTimes:
    """The cooldown clocks: when the topic last split, merged and rebucketed (epoch ms;
    None: never, or the evidence was pruned). The fields are :func:`decide`'s arguments of
    the same names: ``decide(..., **times.to_dict())``."""

    last_split_at_ms: int | None = None
    last_merge_at_ms: int | None = None
    last_rebucket_at_ms: int | None = None

    def __post_init__(self) -> None:
        for name, value in self.to_dict().items():
            check_optional_int(name, value, minimum=0)

    def to_dict(self) -> _Clocks:
        return _Clocks(
            last_split_at_ms=self.last_split_at_ms,
            last_merge_at_ms=self.last_merge_at_ms,
            last_rebucket_at_ms=self.last_rebucket_at_ms,
        )

    def after(self, decision: Decision, now_ms: int) -> LastOperationTimes:
        """The clocks once ``decision`` was applied at ``now_ms``: its operation's clock
        restarts (a NoAction changes nothing). Advance them only after the layout change
        succeeded, so that a failed operation does not start a cooldown, as in Pulsar."""
        check_int("now_ms", now_ms, minimum=0)
        if isinstance(decision, Split):
            return replace(self, last_split_at_ms=now_ms)
        if isinstance(decision, Merge):
            return replace(self, last_merge_at_ms=now_ms)
        if isinstance(decision, Rebucket):
            return replace(self, last_rebucket_at_ms=now_ms)
        if isinstance(decision, NoAction):
            return self
        raise ArgumentTypeError(
            f"decision must be a Decision, got {type(decision).__name__}", argument="decision"
        )


def last_operation_times(layout: TopicLayout) -> LastOperationTimes:
    """Recovers the cooldown clocks from the DAG, as a new controller leader does: a merge
    creates a segment with two parents, a split a child with one parent and half its range,
    a rebucket rollover a child with one parent and the same range. Each time is the latest
    such ``created_at_ms``."""
    layout = check_instance("layout", layout, TopicLayout)
    latest: dict[str, int | None] = {"split": None, "merge": None, "rebucket": None}
    for seg in layout.segments.values():
        if len(seg.parent_ids) >= 2:
            kind = "merge"
        elif len(seg.parent_ids) == 1:
            parent = layout.segments[seg.parent_ids[0]]
            kind = "rebucket" if parent.hash_range == seg.hash_range else "split"
        else:
            continue
        seen = latest[kind]
        latest[kind] = seg.created_at_ms if seen is None else max(seen, seg.created_at_ms)
    return LastOperationTimes(
        last_split_at_ms=latest["split"],
        last_merge_at_ms=latest["merge"],
        last_rebucket_at_ms=latest["rebucket"],
    )


def _recovered(name: str) -> MissingValue:
    """A ``last_*_at_ms`` left out of a snapshot: recovered from its layout."""
    return lambda read: getattr(last_operation_times(read["layout"]), name)


@dataclass(frozen=True)
class DecisionSnapshot:
    """Everything :func:`decide` reads, as an operator would save it to ask "what would the
    controller do, and why". JSON form (see :meth:`from_dict`)::

        {"layout": {...TopicLayout.to_dict()...},
         "load_by_segment": {"3": {"msg_rate_in": 120.0, ..., "modified_at_ms": 1700000000000}},
         "stream_consumer_count_by_sub": {"orders": 4},
         "policy": {"max_segments": 16},            # broker defaults; optional, partial
         "namespace_policy": {...}, "topic_policy": {...},   # optional overrides
         "now_ms": 1700000300000,
         "last_split_at_ms": null,                   # optional
         "pulsar_version": "5.0.0-M1"}               # optional: decide's rules (master)

    ``policy`` is the resolved policy (:func:`resolve_auto_scale_config`), an
    :class:`InvalidPolicy` when the broker defaults and overrides combine into an invalid
    one. The fields are checked as :func:`decide` checks its arguments.
    """

    layout: TopicLayout
    load_by_segment: Mapping[int, SegmentLoadSample] = field(
        metadata=json_form(read=lambda p, v: _samples(p, v), missing=lambda _: {})
    )
    stream_consumer_count_by_sub: Mapping[str, int] = field(
        metadata=json_form(missing=lambda _: {})
    )
    policy: AutoScalePolicy | InvalidPolicy = field(
        metadata=json_form(
            read=lambda p, v: _resolved_policy(p, v),
            keys=("policy", "namespace_policy", "topic_policy"),
        )
    )
    now_ms: int
    last_split_at_ms: int | None = field(
        default=None, metadata=json_form(missing=_recovered("last_split_at_ms"))
    )
    last_merge_at_ms: int | None = field(
        default=None, metadata=json_form(missing=_recovered("last_merge_at_ms"))
    )
    last_rebucket_at_ms: int | None = field(
        default=None, metadata=json_form(missing=_recovered("last_rebucket_at_ms"))
    )
    pulsar_version: str = SCALABLE_TOPICS.default

    def __post_init__(self) -> None:
        SCALABLE_TOPICS.check(self.pulsar_version)
        _Context.build(
            self.layout,
            self.load_by_segment,
            self.stream_consumer_count_by_sub,
            self.policy,
            self.now_ms,
            (self.last_split_at_ms, self.last_merge_at_ms, self.last_rebucket_at_ms),
        )

    def decide(self) -> Decision:
        return decide(
            self.layout,
            self.load_by_segment,
            self.stream_consumer_count_by_sub,
            self.policy,
            self.now_ms,
            self.last_split_at_ms,
            self.last_merge_at_ms,
            self.last_rebucket_at_ms,
            pulsar_version=self.pulsar_version,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecisionSnapshot:
        """Reads and validates a snapshot; errors name the field. A ``last_*_at_ms`` left out
        is recovered from the layout (:func:`last_operation_times`); ``null`` means never."""
        return read(cls, data, "snapshot")


def _samples(path: str, data: object) -> dict[int, SegmentLoadSample]:
    out = {}
    for key, value in check_mapping(path, data).items():
        sid = parse_id(path, key)
        if sid in out:
            raise InvalidArgument(f"{path} names segment {sid} twice", argument=path)
        out[sid] = SegmentLoadSample.from_dict(value, f"{path}[{sid}]")
    return out


def _resolved_policy(path: str, data: Mapping[str, Any]) -> AutoScalePolicy | InvalidPolicy:
    """The broker defaults ``policy``, then ``namespace_policy`` and ``topic_policy``."""
    broker, namespace, topic = (
        None
        if data.get(k) is None
        else AutoScalePolicyOverride.from_dict(data[k], field_path(path, k))
        for k in ("policy", "namespace_policy", "topic_policy")
    )
    return resolve_auto_scale_config(broker, namespace, topic)


__all__ = [
    "AutoScalePolicy",
    "AutoScalePolicyEvaluator",
    "AutoScalePolicyOverride",
    "Decision",
    "DecisionSnapshot",
    "InvalidPolicy",
    "LastOperationTimes",
    "Merge",
    "NoAction",
    "Rebucket",
    "SegmentLoadSample",
    "SegmentLoadStats",
    "Split",
    "decide",
    "is_material_change",
    "last_operation_times",
    "resolve_auto_scale_config",
]

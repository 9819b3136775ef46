"""Applying an auto-scale decision to a layout, as Pulsar's ``ScalableTopicController`` does.

:func:`keyshared.decide` says what to do; :func:`apply_decision` does it, with the controller's
rules a bare layout operation does not know: a merge is clamped to the policy's
``max_entry_buckets_per_segment`` (which :func:`~keyshared.decide` assumes of every segment),
and a rebucket rolls each listed segment over to the target's equal-width splits, one layout
operation (one epoch) per segment as the controller's per-segment ``rebucketSegment`` calls.
After a successful apply, advance the cooldown clocks with
:meth:`keyshared.LastOperationTimes.after`.
"""

from __future__ import annotations

from keyshared._checks import check_int
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.scalable.layout import TopicLayout
from keyshared.scalable.policy import (
    AutoScalePolicy,
    Decision,
    InvalidPolicy,
    Merge,
    NoAction,
    Rebucket,
    Split,
)


def apply_decision(
    layout: TopicLayout,
    decision: Decision,
    policy: AutoScalePolicy | InvalidPolicy,
    now_ms: int,
) -> TopicLayout:
    """The layout after ``decision`` at ``now_ms`` (epoch ms): a split or merge is one more
    epoch, a rebucket of ``k`` segments ``k`` more; a NoAction returns ``layout`` itself.

    Everything is checked before anything changes: ValueError when the decision does not
    fit the layout (a sealed or unknown segment, a merge of non-adjacent segments, a
    rebucket to the bucket count a segment already has or above the policy's maximum), or
    when the policy is an :class:`~keyshared.InvalidPolicy` (which only ever decides
    NoAction)."""
    if not isinstance(layout, TopicLayout):
        raise ArgumentTypeError(
            f"layout must be a TopicLayout, got {type(layout).__name__}", argument="layout"
        )
    if not isinstance(policy, AutoScalePolicy | InvalidPolicy):
        raise ArgumentTypeError(
            f"policy must be an AutoScalePolicy or InvalidPolicy, got {type(policy).__name__}",
            argument="policy",
        )
    check_int("now_ms", now_ms, minimum=0)
    if isinstance(decision, NoAction):
        return layout
    if not isinstance(decision, Split | Merge | Rebucket):
        raise ArgumentTypeError(
            f"decision must be a Decision, got {type(decision).__name__}", argument="decision"
        )
    if isinstance(policy, InvalidPolicy):
        raise InvalidArgument(
            f"cannot apply {type(decision).__name__}: the policy is invalid ({policy.reason})",
            argument="policy",
        )
    if isinstance(decision, Split):
        return layout.split_segment(decision.segment_id, now_ms)
    if isinstance(decision, Merge):
        return layout.merge_segments(
            decision.segment_id_1,
            decision.segment_id_2,
            now_ms,
            max_buckets=policy.max_entry_buckets_per_segment,
        )
    return _rebucket(layout, decision, policy, now_ms)


def _rebucket(
    layout: TopicLayout, decision: Rebucket, policy: AutoScalePolicy, now_ms: int
) -> TopicLayout:
    count = check_int(
        "decision.bucket_count",
        decision.bucket_count,
        minimum=1,
        maximum=policy.max_entry_buckets_per_segment,
    )
    if not decision.segment_ids:
        raise InvalidArgument(
            "a Rebucket decision must name at least one segment", argument="decision.segment_ids"
        )
    if len(set(decision.segment_ids)) != len(decision.segment_ids):
        raise InvalidArgument(
            f"Rebucket names a segment twice: {list(decision.segment_ids)}",
            argument="decision.segment_ids",
        )
    for segment_id in decision.segment_ids:
        layout = layout.rebucket_segment(segment_id, count, now_ms)
    return layout


__all__ = ["apply_decision"]

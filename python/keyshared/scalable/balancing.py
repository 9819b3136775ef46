"""Traffic-balanced bucket boundaries: PIP-486's stated extension, where the controller places
a segment's bucket splits by traffic instead of by hash width, so that skewed keys still
spread evenly over the buckets (and so over the consumers owning them).

The input is a histogram of hashB weights (messages, or bytes, per hashB value or per
equal-width bin of hashB values); the output is N-1 split points on bin edges that minimise
the heaviest bucket's load, with the skew (heaviest / mean bucket load) before and after.
Apply them with ``TopicLayout.rebucket_segment(..., bucket_splits=...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_int, check_weights
from keyshared._core import MIN_FIRST_SPLIT, RING_SIZE, bucket_indices, equal_width_splits
from keyshared.errors import ArgumentTypeError, InvalidArgument

_ITERATIONS = 64


def hash_b_histogram(
    hash_b: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
    bins: int = RING_SIZE,
) -> npt.NDArray[np.float64]:
    """The summed ``weights`` (default 1 per message) of each of ``bins`` equal-width bins
    of the hashB ring; ``bins`` is a power of two up to 65,536 (one bin per hashB value)."""
    width = _bin_width(bins)
    values = np.asarray(hash_b)
    if values.ndim != 1 or (len(values) and not np.issubdtype(values.dtype, np.integer)):
        raise ArgumentTypeError(
            f"hash_b must be a one-dimensional integer array, got {values.dtype}", argument="hash_b"
        )
    if len(values) and (values.min() < 0 or values.max() > 0xFFFF):
        raise InvalidArgument("hash_b values must lie in [0, 0xffff]", argument="hash_b")
    w = None if weights is None else check_weights("weights", weights)
    if w is not None and w.shape != values.shape:
        raise InvalidArgument(
            f"weights must hold one weight per hashB ({len(values)}), got {w.shape}",
            argument="weights",
        )
    return np.bincount(values.astype(np.int64) // width, weights=w, minlength=bins).astype(
        np.float64
    )


def bucket_loads(weights: npt.ArrayLike, splits: Sequence[int]) -> npt.NDArray[np.float64]:
    """Each bucket's load under ``splits``: a bin counts toward the bucket holding its first
    hash (exact when the splits fall on bin edges, as they always do with 65,536 bins)."""
    w = check_weights("weights", weights)
    starts = np.arange(len(w), dtype=np.int64) * _bin_width(len(w))
    owner = bucket_indices(starts, list(splits))
    return np.bincount(owner, weights=w, minlength=len(splits) + 1).astype(np.float64)


def skew(loads: npt.ArrayLike) -> float:
    """Heaviest load over mean load: 1.0 is perfectly even (also for no load at all).
    ``loads`` is one-dimensional, finite and non-negative."""
    arr = np.asarray(loads, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidArgument(
            f"loads must be one-dimensional, got {arr.ndim} dimensions", argument="loads"
        )
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
    if len(bad):
        raise InvalidArgument(
            f"loads[{bad[0]}] = {arr[bad[0]]} is not a finite load >= 0", argument="loads"
        )
    total = float(arr.sum())
    return 1.0 if total == 0.0 else float(arr.max()) * len(arr) / total


@dataclass(frozen=True)
class BalancedSplits:
    """Chosen ``bucket_splits`` and the per-bucket loads and skews before (under the current
    splits) and after (under the chosen ones)."""

    bucket_splits: tuple[int, ...]
    loads_before: tuple[float, ...]
    loads_after: tuple[float, ...]
    skew_before: float
    skew_after: float


def balanced_splits(
    weights: npt.ArrayLike,
    bucket_count: int,
    current_splits: Sequence[int] | None = None,
) -> BalancedSplits:
    """N-1 split points on the histogram's bin edges that minimise the heaviest bucket's
    load (an optimal linear partition), compared with ``current_splits`` (default:
    equal-width). Every bucket keeps at least one bin, and bucket 0 at least hashes 0 and 1
    (with 65,536 bins, bins 0 and 1 count as one), so ``bucket_count`` may not exceed the
    number of such units. With no load at all the splits are (nearly) equal-width."""
    w = check_weights("weights", weights)
    width = _bin_width(len(w))
    # Bucket 0 spans at least [0, 1]: with one bin per hash, bins 0 and 1 go together.
    head = max(1, MIN_FIRST_SPLIT // width)
    units = np.concatenate((w[:head].sum(keepdims=True), w[head:]))
    n = check_int("bucket_count", bucket_count, minimum=1, maximum=len(units))
    before = list(equal_width_splits(n) if current_splits is None else current_splits)
    prefix = np.concatenate(([0.0], np.cumsum(units)))
    if prefix[-1] == 0.0:
        cuts = [i * len(units) // n for i in range(1, n)]
    else:
        cuts = _refine(prefix, _greedy(prefix, _min_max_load(prefix, units, n)), n)
    splits = tuple((c + head - 1) * width for c in cuts)
    loads_before, loads_after = bucket_loads(w, before), bucket_loads(w, splits)
    return BalancedSplits(
        bucket_splits=splits,
        loads_before=tuple(loads_before.tolist()),
        loads_after=tuple(loads_after.tolist()),
        skew_before=skew(loads_before),
        skew_after=skew(loads_after),
    )


def _min_max_load(prefix: npt.NDArray[np.float64], w: npt.NDArray[np.float64], n: int) -> float:
    """The smallest cap for which contiguous runs of bins, each at most the cap, number at
    most ``n``: a bisection between the heaviest bin and the total."""
    lo, hi = float(w.max()), float(prefix[-1])
    if len(_greedy(prefix, lo)) < n:
        return lo
    for _ in range(_ITERATIONS):
        mid = (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        if len(_greedy(prefix, mid)) < n:
            hi = mid
        else:
            lo = mid
    return hi


def _greedy(prefix: npt.NDArray[np.float64], cap: float) -> list[int]:
    """Interior cut positions (bin indices) of the greedy packing of bins into runs of load at
    most ``cap`` (cap is at least the heaviest bin, so every run holds a bin)."""
    cuts: list[int] = []
    i, bins = 0, len(prefix) - 1
    while True:
        j = int(np.searchsorted(prefix, prefix[i] + cap, side="right")) - 1
        j = max(j, i + 1)
        if j >= bins:
            return cuts
        cuts.append(j)
        i = j


def _refine(prefix: npt.NDArray[np.float64], cuts: list[int], n: int) -> list[int]:
    """Adds cuts until there are ``n`` buckets, each time halving (by load) the heaviest
    bucket that spans two or more bins; extra cuts never raise the heaviest load."""
    cuts = list(cuts)
    while len(cuts) < n - 1:
        edges = [0, *cuts, len(prefix) - 1]
        spans = [(a, b) for a, b in pairwise(edges) if b - a >= 2]
        a, b = max(spans, key=lambda s: (prefix[s[1]] - prefix[s[0]], s[1] - s[0]))
        half = (prefix[a] + prefix[b]) / 2
        j = int(np.searchsorted(prefix[a + 1 : b], half)) + a + 1
        best = min(
            (c for c in (j - 1, j) if a < c < b),
            key=lambda c: max(prefix[c] - prefix[a], prefix[b] - prefix[c]),
        )
        cuts = sorted([*cuts, best])
    return cuts


def _bin_width(bins: int) -> int:
    n = check_int("bins", bins, minimum=1, maximum=RING_SIZE)
    if RING_SIZE % n:
        raise InvalidArgument(
            f"bins must be a power of two dividing 65536, got {n}", argument="bins"
        )
    return RING_SIZE // n


__all__ = [
    "BalancedSplits",
    "balanced_splits",
    "bucket_loads",
    "hash_b_histogram",
    "skew",
]

"""Log-spaced histogram keys for retry latencies and backoffs in the rollups: bounded relative error.

Why: an exact histogram keeps one entry per distinct millisecond value, so a day of retries
with latencies spread over seconds holds thousands of entries and merging them dominated the
rollup queries. The rollups therefore store a value's *key* instead (DDSketch's mapping):

- a value ``v <= EXACT_UP_TO`` is its own key (small values stay exact);
- a larger ``v`` falls in bucket ``i = ceil(log_γ v)``, i.e. ``(γ^(i-1), γ^i]`` with
  ``γ = (1 + α) / (1 − α)``, and reads back as ``2γ^i / (γ + 1)``, which is within ``α``
  of every value of that bucket.

With ``α = RELATIVE_ERROR = 1 %`` the keys of 100 ms–1 h fit in ~525 entries, whatever the
event count. A p95 from the rollups interpolates between two order statistics exactly like
``quantileExactInclusive``; each is within ``α`` of the true one and the interpolation is a
convex combination, so the p95 is within ``α`` (relative) of the exact p95 too — up to
floating-point rounding at bucket edges. Means stay exact: the rollups keep the sum of the
values next to the histogram. Raw (drill-down) queries never use these keys.

The mapping defines stored data, so it lives with the live schema (:mod:`retrylens.store.schema`;
first created by migration 0008): :func:`key_sql` is what the sealer and the open set's view
compute; this module adds its inverse and the quantile.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from itertools import accumulate, chain

import numpy as np

from retrylens.store.schema import (
    EXACT_UP_TO,
    GAMMA,
    KEY_OFFSET,
    LN_GAMMA,
    RELATIVE_ERROR,
)
from retrylens.store.schema import histogram_key_sql as key_sql

__all__ = [
    "EXACT_UP_TO",
    "RELATIVE_ERROR",
    "key_of",
    "key_sql",
    "quantile",
    "quantiles",
    "value_of",
]


def key_of(value: int) -> int:
    """The histogram key of a non-negative integer ``value`` (what :func:`key_sql` computes)."""
    if value <= EXACT_UP_TO:
        return int(value)
    return math.ceil(math.log(value) / LN_GAMMA) - KEY_OFFSET


def value_of(key: int) -> float:
    """The value a key reads back as: itself up to ``EXACT_UP_TO``, else its bucket's ``2γ^i / (γ + 1)``."""
    if key <= EXACT_UP_TO:
        return float(key)
    return 2 * math.exp((key + KEY_OFFSET) * LN_GAMMA) / (GAMMA + 1)


def quantile(keys: Sequence[int], counts: Sequence[int], level: float) -> float | None:
    """``quantileExactInclusive(level)`` (numpy's linear interpolation) of the multiset in which
    each of the ascending ``keys`` occurs ``counts`` times, read back as values; ``None`` if empty."""
    cumulative = list(accumulate(counts))
    if not cumulative or not cumulative[-1]:
        return None
    position = (cumulative[-1] - 1) * level
    low = math.floor(position)

    def at(index: int) -> float:  # the value of order statistic ``index`` (0-based)
        return value_of(keys[bisect.bisect_right(cumulative, index)])

    below = at(low)
    return below + (position - low) * (at(min(low + 1, cumulative[-1] - 1)) - below)


def quantiles(
    histograms: Sequence[tuple[Sequence[int], Sequence[int]]], level: float
) -> list[float | None]:
    """:func:`quantile` of many histograms at once (vectorised: a trend has one per time bucket).

    Each histogram is ``(keys, counts)`` with keys in any order and possibly repeated (parts of
    one group are concatenated, not merged); ``None`` for an empty one.
    """
    sizes = np.fromiter(
        (len(keys) for keys, _ in histograms), dtype=np.int64, count=len(histograms)
    )
    total = int(sizes.sum())
    if not total:
        return [None] * len(histograms)
    keys = np.fromiter(chain.from_iterable(k for k, _ in histograms), dtype=np.int64, count=total)
    counts = np.fromiter(chain.from_iterable(c for _, c in histograms), dtype=np.int64, count=total)
    groups = np.repeat(np.arange(len(histograms)), sizes)
    order = np.lexsort((keys, groups))
    keys, counts = keys[order], counts[order]
    cumulative = np.cumsum(counts)
    n = np.bincount(groups, weights=counts, minlength=len(histograms)).astype(np.int64)
    before = np.cumsum(n) - n  # cumulative count before each group's first entry
    position = (n - 1) * level
    low = np.floor(position)
    high = np.minimum(low + 1, n - 1)
    last = len(keys) - 1
    at_low = np.minimum(np.searchsorted(cumulative, before + low, side="right"), last)
    at_high = np.minimum(np.searchsorted(cumulative, before + high, side="right"), last)
    values = np.where(
        keys <= EXACT_UP_TO, keys, 2 * np.exp((keys + KEY_OFFSET) * LN_GAMMA) / (GAMMA + 1)
    )
    result = values[at_low] + (position - low) * (values[at_high] - values[at_low])
    return [float(r) if size else None for r, size in zip(result, n, strict=True)]

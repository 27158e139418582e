"""Pareto fronts (minimise every objective). Pure and vectorised.

A point is dominated when another is no worse in every objective and strictly better in one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def pareto_front_2d(x: npt.ArrayLike, y: npt.ArrayLike) -> IntArray:
    """Indices of the non-dominated points of (x, y), sorted by x. O(n log n).

    Sort by x then y; a point is on the front when its y is below every y before it. Exact
    duplicates keep their first index only (one representative per point).
    """
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    if xa.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((ya, xa))
    ys = ya[order]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(ys)[:-1]])
    keep = ys < best_before
    return np.asarray(order[keep], dtype=np.int64)


def first_least(*keys: npt.ArrayLike) -> int:
    """``np.lexsort(keys[::-1])[0]`` without the sort: the first index with the least first
    key, ties broken by the next keys (nan counts as the largest, as numpy sorts it). O(n)."""
    cand = np.arange(np.asarray(keys[0]).size, dtype=np.int64)
    for key in keys:
        values = np.asarray(key, dtype=np.float64)[cand]
        known = ~np.isnan(values)
        if known.any():
            cand = cand[values == np.min(values[known])]
        if cand.size == 1:
            break
    return int(cand[0])


def nondominated(points: npt.ArrayLike) -> IntArray:
    """Indices of the non-dominated rows of an (n, k) array, in input order. O(n^2 k) in
    numpy blocks: meant for the few hundred points that survive a 2-D front."""
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError("points must be a 2-D array")
    n = p.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    dominated = np.zeros(n, dtype=bool)
    block = max(1, 2_000_000 // max(n * p.shape[1], 1))
    for start in range(0, n, block):
        q = p[start : start + block]  # candidates that might dominate
        le = np.all(q[:, None, :] <= p[None, :, :], axis=2)
        lt = np.any(q[:, None, :] < p[None, :, :], axis=2)
        dominated |= np.any(le & lt, axis=0)
    # exact duplicates: keep the first of each
    _, first = np.unique(p, axis=0, return_index=True)
    unique_mask = np.zeros(n, dtype=bool)
    unique_mask[first] = True
    return np.asarray(np.flatnonzero(~dominated & unique_mask), dtype=np.int64)


def spread(order: npt.ArrayLike, cap: int) -> npt.NDArray[np.int64]:
    """At most ``cap`` entries of ``order`` (e.g. a front sorted by time) spread evenly, both
    ends kept."""
    arr = np.asarray(order, dtype=np.int64)
    if arr.size <= cap:
        return arr
    pick = np.unique(np.round(np.linspace(0, arr.size - 1, cap)).astype(np.int64))
    return np.asarray(arr[pick], dtype=np.int64)


def tie_note(costs_usd_per_hour: Sequence[float], pick: int, rule: str) -> str | None:
    """Where other rows that qualify cost what the pick costs (equal prices, ``--price``),
    which rule picked it: ``"3 deployments tie at US$ 0.000/h; ties go to lower TTFT, ..."``;
    ``None`` when its cost alone picked it. ``costs_usd_per_hour``: the qualifying
    rows' costs, ``pick`` one of them."""
    cost = costs_usd_per_hour[pick]
    tied = sum(math.isclose(c, cost, rel_tol=1e-9, abs_tol=1e-12) for c in costs_usd_per_hour)
    if tied < 2:
        return None
    return f"{tied} deployments tie at US$ {cost:,.3f}/h; ties go to {rule}"


def limited_rows(order: Sequence[int], must: Iterable[int], limit: int | None) -> list[int]:
    """The rows of ``order`` a table of at most ``limit`` rows shows (``--limit`` of ``plan
    train`` and ``plan llm-train``): every row of ``must`` (the Pareto front and the pick,
    beyond ``limit`` where they need more), then the first other rows of ``order`` up to
    ``limit``; in ``order``'s order. ``None``: every row."""
    check_row_limit(limit)
    if limit is None or len(order) <= limit:
        return list(order)
    keep = set(must)
    keep.update([k for k in order if k not in keep][: max(0, limit - len(keep))])
    return [k for k in order if k in keep]


def check_row_limit(limit: int | None) -> None:
    """``--limit``: ``None`` or an integer >= 1."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidSpecError("limit", "must be >= 1", got=limit, fix="e.g. --limit 20")

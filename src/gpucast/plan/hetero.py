"""Heterogeneous (mixed GPU type) clusters: proportional batches and mixed-worker throughput.

A mixed candidate has two parts, ``n_A`` GPUs of one type and ``n_B`` of another, on
instances of one provider and region (as the transient-training work mixed K80, P100 and
V100 workers). Three ways to train on it are planned:

* **synchronous, proportional batches** (DDP all-reduce, and ``ps-sync``): every step waits
  for the slowest worker, so the global batch ``G`` is split in proportion to each worker's
  speed. With one worker's step compute ``a_g + c_g b`` (the roofline is linear in the
  batch), equal compute time ``T`` for every worker gives ``b_g = (T - a_g) / c_g`` and::

      T = (G + sum_g n_g a_g / c_g) / (sum_g n_g / c_g)

  Batches are whole samples: each part gets ``floor(b_g)`` per worker (at least one) and the
  remaining samples go one per worker to the part whose step grows least from one more sample
  (:func:`proportional_batches`). The total is exactly ``G``; a worker idles at most the
  time of the one sample rounding gave the slowest worker (plus whatever a part that needs a
  whole sample at ``b = 1`` forces). ``ps-sync`` then waits for the busiest PS shard to serve
  all ``n`` updates (:func:`gpucast.predict.comm.sync_ps_step_time_s`).
* **asynchronous parameter server** (``ps``): every worker keeps the same per-worker batch
  and pushes at its own pace; on an idle PS the rates add up, at saturation the busiest shard
  bounds them. Solved exactly by MVA with one *equivalent think time* standing for all the
  workers (:func:`equivalent_think_time_s`, the vectorised form of
  :func:`gpucast.predict.comm.equivalent_think_time_s`).

Pure: numbers in, numbers out; every function is vectorised over rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
AnyArray = npt.NDArray[Any]


# numpy's reductions along a short last axis (2 parts, 3 terms) cost far more per row than
# a few element-wise operations over its columns: these are the hot path's reductions
def col_sum(x: npt.ArrayLike) -> AnyArray:
    """Sum over the last axis, column by column."""
    a = np.asarray(x)
    out = a[..., 0].copy()
    for k in range(1, a.shape[-1]):
        out = out + a[..., k]
    return out


def col_max(x: npt.ArrayLike) -> AnyArray:
    a = np.asarray(x)
    out = a[..., 0].copy()
    for k in range(1, a.shape[-1]):
        out = np.maximum(out, a[..., k])
    return out


def col_min(x: npt.ArrayLike) -> AnyArray:
    a = np.asarray(x)
    out = a[..., 0].copy()
    for k in range(1, a.shape[-1]):
        out = np.minimum(out, a[..., k])
    return out


def col_argmax(x: npt.ArrayLike) -> IntArray:
    """Index of the first largest entry of the last axis."""
    a = np.asarray(x)
    best = a[..., 0].copy()
    idx = np.zeros(best.shape, dtype=np.int64)
    for k in range(1, a.shape[-1]):
        better = a[..., k] > best
        best = np.where(better, a[..., k], best)
        idx = np.where(better, k, idx)
    return idx


def balanced_step_s(
    fixed_s: FloatArray, per_sample_s: FloatArray, counts: IntArray, global_batch: npt.ArrayLike
) -> FloatArray:
    """Continuous equal-compute step time ``T`` for (rows, parts) coefficients (see module)."""
    c = np.maximum(per_sample_s, 1e-300)
    w = counts / c
    return np.asarray((global_batch + col_sum(w * fixed_s)) / col_sum(w), dtype=np.float64)


def proportional_batches(
    fixed_s: FloatArray,
    per_sample_s: FloatArray,
    counts: IntArray,
    global_batch: IntArray,
) -> tuple[IntArray, IntArray]:
    """Per-worker batches in proportion to speed, summing exactly to ``global_batch``.

    ``fixed_s`` / ``per_sample_s`` are (rows, parts) step-compute coefficients of one worker
    of each part, ``counts`` (rows, parts) its workers (0 for an absent part). Returns
    ``(base, extra)``, both (rows, parts): each worker of part ``g`` trains on ``base[g]``
    samples, and ``extra[g]`` of them (``<= counts[g]``) on one more, so that
    ``sum(counts * base + extra) == global_batch``. Rows with ``global_batch < sum(counts)``
    cannot give every worker a sample: they get ``base = 1`` (and are to be dropped).
    """
    a = np.asarray(fixed_s, dtype=np.float64)
    c = np.maximum(np.asarray(per_sample_s, dtype=np.float64), 1e-300)
    n = np.asarray(counts, dtype=np.int64)
    g_batch = np.asarray(global_batch, dtype=np.int64)
    present = n > 0
    # equal compute time; a part that would get < 1 sample gets exactly 1 and leaves the rest
    fixed_one = np.zeros_like(present)
    ideal = np.ones(a.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(a.shape[1]):
            free = present & ~fixed_one
            left = g_batch - col_sum(np.where(fixed_one, n, 0))
            t = balanced_step_s(
                np.where(free, a, 0.0), np.where(free, c, 1.0), np.where(free, n, 0), left
            )
            ideal = np.where(free, (t[:, None] - a) / c, 1.0)
            newly = free & (ideal < 1.0)
            if not newly.any():
                break
            fixed_one |= newly
    # floor a hair below the ideal so float error never hands out more than G samples
    base = np.where(present, np.maximum(np.floor(ideal - 1e-9), 1.0), 0.0).astype(np.int64)
    remainder = g_batch - col_sum(n * base)
    # remainder > 0: hand the samples out, one per worker, cheapest step growth first
    extra = np.zeros_like(base)
    cost_of_one = np.where(present, a + c * (base + 1), np.inf)
    if base.shape[1] == 2:
        second = (cost_of_one[:, 1] < cost_of_one[:, 0]).astype(np.int64)
        order = np.stack([second, 1 - second], axis=1)
    else:
        order = np.argsort(cost_of_one, axis=1, kind="stable")
    left = np.maximum(remainder, 0)
    rows = np.arange(base.shape[0])
    for k in range(base.shape[1]):
        part = order[:, k]
        room = np.where(present[rows, part], n[rows, part], 0)
        give = np.minimum(left, room)
        extra[rows, part] = give
        left = left - give
    # floor() leaves at most one sample per worker, so nothing is left over here
    assert not (left > 0).any(), "proportional_batches: remainder above one per worker"
    whole = present & (extra == n)  # every worker of the part got one more: a larger base
    return base + whole, np.where(whole, 0, extra)


def equivalent_think_time_s(
    think_s: FloatArray, counts: IntArray, demand_s: FloatArray
) -> FloatArray:
    """One think time per row standing for ``counts`` workers of each part (rows, parts).

    ``n / (Z_eq + D) = sum_g n_g / (Z_g + D)``: identical workers reaching the same summed
    rate on an idle PS. Exact for identical workers, at light load and at saturation.
    """
    n = np.asarray(counts, dtype=np.float64)
    d = np.asarray(demand_s, dtype=np.float64)
    rate = col_sum(n / (np.asarray(think_s) + d[:, None]))
    return np.asarray(np.maximum(col_sum(n) / rate - d, 0.0), dtype=np.float64)


def update_shares(think_s: FloatArray, counts: IntArray, demand_s: FloatArray) -> FloatArray:
    """(rows, parts) share of the PS updates each part sends (rates in proportion to
    ``1 / (Z_g + D)`` per worker)."""
    per = np.asarray(counts, dtype=np.float64) / (
        np.asarray(think_s) + np.asarray(demand_s)[:, None]
    )
    return np.asarray(per / col_sum(per)[:, None], dtype=np.float64)


def mva_at(
    think_s: FloatArray,
    busiest_s: FloatArray,
    other_s: FloatArray,
    shards: FloatArray,
    workers: IntArray,
) -> FloatArray:
    """Exact MVA throughput (updates/s) of each row at its own worker count (one pass up to
    ``max(workers)``, vectorised over rows)."""
    rows = think_s.shape[0]
    out = np.zeros(rows)
    if rows == 0:
        return out
    q_busy = np.zeros(rows)
    q_other = np.zeros(rows)
    m_other = shards - 1.0
    for n in range(1, int(workers.max()) + 1):
        r_busy = busiest_s * (1.0 + q_busy)
        r_other = other_s * (1.0 + q_other)
        x = n / (think_s + r_busy + m_other * r_other)
        q_busy = x * r_busy
        q_other = x * r_other
        hit = workers == n
        out[hit] = x[hit]
    return out


#: How a synchronous mixed row splits its global batch (``Evaluation.batch_split``).
SPLIT_PROPORTIONAL, SPLIT_CAPPED, SPLIT_EQUAL = 0, 1, 2
SPLIT_LABELS = ("proportional to speed", "proportional to speed, capped by memory", "equal")


def equal_batches(
    per_sample_s: FloatArray, counts: IntArray, global_batch: IntArray
) -> tuple[IntArray, IntArray]:
    """The same batch on every worker (``global_batch // n``); the remainder's one-more
    samples go to the part with the cheaper sample first. Same ``(base, extra)`` form as
    :func:`proportional_batches` (two parts)."""
    n = np.asarray(counts, dtype=np.int64)
    g_batch = np.asarray(global_batch, dtype=np.int64)
    total = np.maximum(col_sum(n), 1)
    each = g_batch // total
    rem = g_batch - each * total
    present = n > 0
    base = np.where(present, each[:, None], 0)
    fast = (np.asarray(per_sample_s)[:, 1] < np.asarray(per_sample_s)[:, 0]).astype(np.int64)
    rows = np.arange(n.shape[0])
    extra = np.zeros_like(n)
    first = np.minimum(rem, n[rows, fast])
    extra[rows, fast] = first
    extra[rows, 1 - fast] = rem - first
    return base, extra


def capped_batches(
    base: IntArray, extra: IntArray, counts: IntArray, global_batch: IntArray, cap: IntArray
) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]]:
    """A two-part split with a part over its memory ``cap`` (largest per-worker batch that
    fits) held at the cap and the rest of the global batch spread over the other part.
    Returns ``(base, extra, changed)``; ``changed`` is False where no part was over its cap,
    or where both were (nothing to move)."""
    n = np.asarray(counts, dtype=np.int64)
    g_batch = np.asarray(global_batch, dtype=np.int64)
    top = base + (extra > 0)
    over = (top > cap) & (n > 0)
    changed: npt.NDArray[np.bool_] = np.asarray(over.any(axis=1) & ~over.all(axis=1))
    out_base, out_extra = base.copy(), extra.copy()
    for k in (0, 1):
        o = 1 - k
        rows = np.flatnonzero(changed & over[:, k])
        if not rows.size:
            continue
        held = np.maximum(cap[rows, k], 1)
        left = g_batch[rows] - n[rows, k] * held
        other = np.maximum(n[rows, o], 1)
        ok = left >= n[rows, o]  # every worker of the other part keeps a sample
        out_base[rows, k] = held
        out_extra[rows, k] = 0
        out_base[rows, o] = np.where(ok, left // other, out_base[rows, o])
        out_extra[rows, o] = np.where(ok, left - (left // other) * other, out_extra[rows, o])
        out_base[rows[~ok], k] = base[rows[~ok], k]
        out_extra[rows[~ok], k] = extra[rows[~ok], k]
        changed[rows[~ok]] = False
    return out_base, out_extra, changed

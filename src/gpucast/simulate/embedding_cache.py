"""Exact replays of an embedding-row lookup stream through LRU and LFU caches.

The reference the hit-rate model of :mod:`gpucast.predict.embedding_cache` is checked against.
Both caches are fully associative and hold ``capacity`` rows; they start empty.

* :func:`replay_lru` -- least recently used. One pass computes every lookup's stack distance
  (distinct rows since the row's previous lookup, Mattson et al. 1970) with a Fenwick tree over
  the positions of last lookups; a lookup hits a cache of ``C`` rows iff its distance is
  ``< C``, so every capacity comes from the same pass.
* :func:`replay_lfu` -- least frequently used with a frequency counter per row kept over the
  whole stream (FBGEMM's ``CacheAlgorithm.LFU``: one counter per table row): a missed row is
  admitted when its count (this lookup included) exceeds the smallest count in the cache,
  evicting that row (the least recently used among equals); otherwise it bypasses the
  cache. Frequency buckets make each lookup O(1) amortised.

Pure: a stream in, hit counts out; the stream generator lives with the model
(:meth:`~gpucast.predict.embedding_cache.EmbeddingLocalityModel.sample_row_counts`) and the
benchmark draws the order with a seeded ``numpy.random.Generator``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpucast.domain.embeddings import check_cache_policy
from gpucast.domain.errors import InvalidSpecError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _check(stream: npt.ArrayLike, capacities: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    s = np.asarray(stream)
    if s.ndim != 1 or (s.size and (not np.issubdtype(s.dtype, np.integer) or s.min() < 0)):
        raise InvalidSpecError("stream", "must be a 1-D array of row ids >= 0")
    c = np.asarray(capacities)
    if c.ndim != 1 or (c.size and (not np.issubdtype(c.dtype, np.integer) or c.min() < 0)):
        raise InvalidSpecError("capacities", "must be a 1-D array of row counts >= 0")
    return s.astype(np.int64), c.astype(np.int64)


def stack_distances(stream: npt.ArrayLike) -> IntArray:
    """Per lookup: distinct other rows looked up since this row's previous lookup (-1 for a
    first lookup). An LRU cache of ``C`` rows hits exactly the lookups with ``0 <= d < C``."""
    s, _ = _check(stream, np.zeros(0, dtype=np.int64))
    n = len(s)
    # previous lookup of the same row (-1 for none), vectorised
    order = np.argsort(s, kind="stable")
    same = np.concatenate([[False], s[order][1:] == s[order][:-1]])
    prev = np.full(n, -1, dtype=np.int64)
    prev[order[same]] = order[np.flatnonzero(same) - 1]
    tree = [0] * (n + 1)  # Fenwick tree: 1 at the position of each row's latest lookup
    dist = np.full(n, -1, dtype=np.int64)
    live = 0
    prev_list = prev.tolist()
    out = [-1] * n
    for t in range(n):
        p = prev_list[t]
        if p >= 0:
            # live markers after p = live - markers in [0, p]
            i, below = p + 1, 0
            while i > 0:
                below += tree[i]
                i -= i & -i
            out[t] = live - below
            i = p + 1
            while i <= n:
                tree[i] -= 1
                i += i & -i
            live -= 1
        i = t + 1
        while i <= n:
            tree[i] += 1
            i += i & -i
        live += 1
    dist[:] = out
    return dist


def replay_lru(stream: npt.ArrayLike, capacities: npt.ArrayLike) -> IntArray:
    """Hits of an LRU cache of each capacity (rows) over the stream."""
    _, c = _check(stream, capacities)
    d = stack_distances(stream)
    d = np.sort(d[d >= 0])
    return np.searchsorted(d, c, side="left").astype(np.int64)


def replay_lfu(stream: npt.ArrayLike, capacities: npt.ArrayLike) -> IntArray:
    """Hits of a global-frequency LFU cache of each capacity (rows) over the stream."""
    s, c = _check(stream, capacities)
    rows = s.tolist()
    n_rows = int(s.max()) + 1 if s.size else 0
    hits = np.zeros(len(c), dtype=np.int64)
    for j, capacity in enumerate(c.tolist()):
        hits[j] = _lfu_hits(rows, n_rows, capacity)
    return hits


def _lfu_hits(rows: list[int], n_rows: int, capacity: int) -> int:
    if capacity <= 0:
        return 0
    count = [0] * n_rows
    cached = bytearray(n_rows)
    buckets: dict[int, dict[int, None]] = {}  # count -> cached rows, least recently used first
    size, min_count, hits = 0, 0, 0
    for r in rows:
        k = count[r]
        count[r] = k + 1
        if cached[r]:
            hits += 1
            bucket = buckets[k]
            del bucket[r]
            if not bucket:
                del buckets[k]
                if min_count == k:
                    min_count = k + 1
            buckets.setdefault(k + 1, {})[r] = None
            continue
        if size < capacity:
            size += 1
        elif k + 1 > min_count:
            bucket = buckets[min_count]
            victim = next(iter(bucket))
            del bucket[victim]
            cached[victim] = 0
            if not bucket:
                del buckets[min_count]
                # the next smallest count is at most the new row's
                m = min_count + 1
                while m < k + 1 and m not in buckets:
                    m += 1
                min_count = m
        else:
            continue
        cached[r] = 1
        buckets.setdefault(k + 1, {})[r] = None
        if size == 1 or k + 1 < min_count:
            min_count = k + 1
    return hits


def hit_rates(hits: IntArray, stream_length: int) -> FloatArray:
    """Hits as a share of the lookups."""
    return hits.astype(np.float64) / max(stream_length, 1)


def replay_tiered_lru(
    stream: npt.ArrayLike, hbm_capacity: int, dram_capacity: int
) -> tuple[int, int]:
    """Hits of HBM and of host DRAM in a two-level LRU hierarchy as HugeCTR's hierarchical
    parameter server runs it: an LRU GPU cache of ``hbm_capacity`` rows; its misses go to an
    LRU CPU cache of ``dram_capacity`` rows (which sees only those misses: an HBM hit does not
    refresh it); a row missing from both is read from SSD and inserted into both. Returns
    ``(HBM hits, DRAM hits)``; the rest of the lookups went to SSD."""
    from collections import OrderedDict

    s, _ = _check(stream, np.array([hbm_capacity, dram_capacity], dtype=np.int64))
    hbm: OrderedDict[int, None] = OrderedDict()
    dram: OrderedDict[int, None] = OrderedDict()
    hbm_hits = dram_hits = 0
    for r in s.tolist():
        if r in hbm:
            hbm_hits += 1
            hbm.move_to_end(r)
            continue
        if r in dram:
            dram_hits += 1
            dram.move_to_end(r)
        elif dram_capacity > 0:
            dram[r] = None
            if len(dram) > dram_capacity:
                dram.popitem(last=False)
        if hbm_capacity > 0:
            hbm[r] = None
            if len(hbm) > hbm_capacity:
                hbm.popitem(last=False)
    return hbm_hits, dram_hits


def replay_row_counts(
    counts: npt.ArrayLike, capacities: npt.ArrayLike, policy: str, rng: np.random.Generator
) -> tuple[FloatArray, int]:
    """Hit rates of an exact ``policy`` (``lru`` or ``lfu``) cache of each capacity over a
    stream in which row ``i`` is looked up ``counts[i]`` times, in an order drawn from ``rng``
    (independent references); and the stream's length."""
    check_cache_policy(policy, "policy")
    c = np.asarray(counts)
    if c.ndim != 1 or (c.size and (not np.issubdtype(c.dtype, np.integer) or c.min() < 0)):
        raise InvalidSpecError("counts", "must be a 1-D array of lookup counts >= 0")
    stream = rng.permutation(np.repeat(np.arange(len(c), dtype=np.int64), c.astype(np.int64)))
    replay = replay_lru if policy == "lru" else replay_lfu
    return hit_rates(replay(stream, capacities), len(stream)), len(stream)

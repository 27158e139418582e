"""Exact LRU / LFU replays of lookup streams, against brute-force caches."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.simulate.embedding_cache import (
    hit_rates,
    replay_lfu,
    replay_lru,
    replay_row_counts,
    replay_tiered_lru,
    stack_distances,
)


def _lru(stream: list[int], capacity: int) -> int:
    cache: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for r in stream:
        if r in cache:
            hits += 1
            cache.move_to_end(r)
            continue
        cache[r] = None
        if len(cache) > capacity:
            cache.popitem(last=False)
    return hits


def _lfu(stream: list[int], capacity: int) -> int:
    count: dict[int, int] = {}
    last_use: dict[int, int] = {}  # cached rows -> time of last lookup
    hits = 0
    for t, r in enumerate(stream):
        count[r] = count.get(r, 0) + 1
        if r in last_use:
            hits += 1
            last_use[r] = t
        elif len(last_use) < capacity:
            last_use[r] = t
        else:
            low = min(count[x] for x in last_use)
            if count[r] > low:
                victim = min((x for x in last_use if count[x] == low), key=last_use.__getitem__)
                del last_use[victim]
                last_use[r] = t
    return hits


def test_stack_distances_by_hand() -> None:
    # a b c a b b d a
    assert stack_distances([0, 1, 2, 0, 1, 1, 3, 0]).tolist() == [-1, -1, -1, 2, 2, 0, -1, 2]


@pytest.mark.parametrize("seed", range(8))
def test_replays_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    stream = rng.zipf(1.3, size=500) % 60
    capacities = np.array([0, 1, 3, 8, 25, 60])
    rows = stream.tolist()
    assert replay_lru(stream, capacities).tolist() == [_lru(rows, c) for c in capacities]
    assert replay_lfu(stream, capacities).tolist() == [
        _lfu(rows, c) if c else 0 for c in capacities
    ]


def test_lfu_keeps_the_frequent_row_that_lru_loses() -> None:
    stream = [0, 0, 0, 1, 2, 0, 3, 4, 0]
    assert replay_lru(stream, np.array([2])).tolist() == [2]
    assert replay_lfu(stream, np.array([2])).tolist() == [4]
    assert hit_rates(np.array([4]), len(stream)).tolist() == pytest.approx([4 / 9])


def test_bad_streams() -> None:
    with pytest.raises(InvalidSpecError, match="stream"):
        replay_lru(np.array([0.5, 1.0]), np.array([1]))
    with pytest.raises(InvalidSpecError, match="stream"):
        replay_lfu(np.array([-1, 2]), np.array([1]))
    with pytest.raises(InvalidSpecError, match="capacities"):
        replay_lru(np.array([1, 2]), np.array([-1]))


def test_tiered_lru_by_hand() -> None:
    # HBM 1 row, DRAM 2 rows. 0: SSD; 1: SSD (HBM 1, DRAM 0 1); 0: DRAM hit (DRAM 1 0);
    # 0: HBM hit; 2: SSD (DRAM 0 2, 1 evicted); 0: DRAM hit; 1: SSD
    stream = np.array([0, 1, 0, 0, 2, 0, 1])
    assert replay_tiered_lru(stream, 1, 2) == (1, 2)
    # no DRAM tier: the HBM hits are a plain LRU's
    rng = np.random.default_rng(0)
    s = rng.integers(0, 50, 2000)
    assert replay_tiered_lru(s, 10, 0)[0] == int(replay_lru(s, np.array([10]))[0])
    hbm, dram = replay_tiered_lru(s, 10, 30)
    # a DRAM tier of 30 rows over an HBM cache of 10 serves about what an LRU of 30 adds
    lru30 = int(replay_lru(s, np.array([30]))[0])
    assert abs((hbm + dram) - lru30) < 0.05 * len(s)


def test_replay_row_counts_draws_the_order_from_the_generator() -> None:
    """Row i looked up counts[i] times: the stream has sum(counts) lookups; one row looked up
    every time always hits after its first lookup; the same seed gives the same hits."""
    counts = np.array([5, 1, 1, 3])
    caps = np.array([0, 1, 4])
    rates, n = replay_row_counts(counts, caps, "lru", np.random.default_rng(0))
    assert n == 10 and rates[0] == 0.0 and rates[2] == pytest.approx(6 / 10)  # 4 first misses
    again, _ = replay_row_counts(counts, caps, "lru", np.random.default_rng(0))
    assert np.array_equal(rates, again)
    lfu, _ = replay_row_counts(counts, caps, "lfu", np.random.default_rng(0))
    assert lfu[2] == pytest.approx(6 / 10)
    (one,), m = replay_row_counts(np.array([7]), np.array([1]), "lfu", np.random.default_rng(1))
    assert m == 7 and one == pytest.approx(6 / 7)
    with pytest.raises(InvalidSpecError, match="policy"):
        replay_row_counts(counts, caps, "fifo", np.random.default_rng(0))
    with pytest.raises(InvalidSpecError, match="counts"):
        replay_row_counts(np.array([1.5]), caps, "lru", np.random.default_rng(0))

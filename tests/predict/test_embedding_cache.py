"""Embedding-cache locality model: fit to reuse buckets, LRU/LFU hit rate vs cache size."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.predict.embedding_cache import EmbeddingLocalityModel, ZipfLocality
from gpucast.simulate.embedding_cache import hit_rates, replay_lfu, replay_lru
from gpucast.store.datasets.dlrm_locality import read_dlrm_locality

FRACTIONS = np.array([0.01, 0.05, 0.1, 0.2, 0.5])


def _histogram() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "reuse_min": [0, 1, 2, 4, 8, 16, 64],
            "reuse_max": [1.0, 2.0, 4.0, 8.0, 16.0, 64.0, math.inf],
            "rows_share": [0.38, 0.20, 0.15, 0.12, 0.08, 0.045, 0.025],
            "lookups_share": [0.0475, 0.05, 0.07, 0.10, 0.13, 0.2025, 0.40],
        }
    )


def _model() -> EmbeddingLocalityModel:
    # consistent shares: each bucket's lookups / rows x 8 is a mean inside the bucket
    return EmbeddingLocalityModel().fit(_histogram(), lookups=8_000_000, unique_rows=1_000_000)


def _bucket_shares(counts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    edges = np.array([0, 1, 2, 4, 8, 16, 64, np.inf])
    b = np.searchsorted(edges, counts, side="left") - 1
    rows = np.bincount(b, weights=weights, minlength=7)
    looks = np.bincount(b, weights=weights * counts, minlength=7)
    return rows / rows.sum(), looks / looks.sum()


def test_fit_reproduces_the_row_and_lookup_shares() -> None:
    model = _model()
    k, w = model.count_distribution()
    rows, looks = _bucket_shares(k, w)
    hist = _histogram()
    assert rows == pytest.approx(hist.rows_share, abs=0.002)
    assert looks == pytest.approx(hist.lookups_share, abs=0.002)
    assert model.mean_reuse() == pytest.approx(8.0, rel=0.02)
    assert model.compulsory_miss_rate() == pytest.approx(1 / model.mean_reuse())


def test_hit_rate_shape() -> None:
    model = _model()
    for policy in ("lru", "lfu"):
        h = model.hit_rate(FRACTIONS, policy=policy)
        assert np.all(np.diff(h) > 0)
        assert model.hit_rate([0.0], policy=policy)[0] == 0.0
        # every row cached: only first lookups miss
        full = model.hit_rate([1.0, 3.0], policy=policy)
        assert full == pytest.approx([1 - 1 / model.mean_reuse()] * 2, abs=1e-3)
    lru, lfu = model.hit_rate(FRACTIONS), model.hit_rate(FRACTIONS, policy="lfu")
    assert np.all(lfu >= lru - 1e-9)  # frequency beats recency on independent references
    assert model.hit_rate(np.array([[0.1, 0.2]])).shape == (1, 2)


def test_no_cache_beats_the_first_lookups_misses() -> None:
    """A row's first lookup misses in any cache: the LFU curve reached 0.8756 at 99-100% of
    the rows against a ceiling of 0.875 (a midpoint average over time missed the hot rows'
    first lookups, all in the window's first instants); now it rises to the ceiling."""
    model = _model()
    ceiling = 1 - model.compulsory_miss_rate()
    for policy in ("lru", "lfu"):
        h = model.hit_rate([0.5, 0.9, 0.99, 0.999, 1.0], policy=policy)  # type: ignore[arg-type]
        assert np.all(h <= ceiling) and np.all(np.diff(h) >= 0)
        assert h[-1] == pytest.approx(ceiling, abs=1e-12)


@pytest.mark.parametrize(("theta", "n"), [(1.0, 0.0), (1.0, 1.0), (1.0, 40.0), (3.0, 7.0),
                                          (5.0, 4.0), (30.0, 252.0)])  # fmt: skip
def test_the_binomial_integrals_are_exact(theta: float, n: float) -> None:
    from scipy.integrate import quad
    from scipy.stats import binom

    from gpucast.predict.embedding_cache import _binomial_pmf_integral, _binomial_sf_integral

    for lo, hi in ((0.0, 1 / 64), (0.25, 0.5), (0.0, 1.0)):
        args = (np.array(theta), np.array(n), np.array(lo), np.array(hi))
        sf = quad(lambda t: binom.sf(theta, n, t), lo, hi, epsabs=1e-13)[0]
        pmf = quad(lambda t: binom.pmf(theta, n, t), lo, hi, epsabs=1e-13)[0]
        assert float(_binomial_sf_integral(*args)) == pytest.approx(sf, abs=1e-11)
        assert float(_binomial_pmf_integral(*args)) == pytest.approx(pmf, abs=1e-11)


@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_prediction_matches_an_exact_replay(policy: str) -> None:
    model = _model()
    counts = model.sample_row_counts(20_000)
    _, looks = _bucket_shares(counts.astype(float), np.ones(len(counts)))
    assert looks == pytest.approx(_histogram().lookups_share, abs=0.01)
    rng = np.random.default_rng(3)
    stream = rng.permutation(np.repeat(np.arange(len(counts)), counts))
    fractions = np.array([0.05, 0.1, 0.2, 0.5])
    capacities = np.round(fractions * len(counts)).astype(np.int64)
    replay = replay_lru if policy == "lru" else replay_lfu
    replayed = hit_rates(replay(stream, capacities), len(stream))
    predicted = model.hit_rate(fractions, policy=policy)  # type: ignore[arg-type]
    assert predicted == pytest.approx(replayed, abs=0.03)


def test_bad_input_is_one_clear_error() -> None:
    hist = _histogram()
    with pytest.raises(InvalidInputError, match="lacks column"):
        EmbeddingLocalityModel().fit(hist.drop(columns="rows_share"), lookups=10, unique_rows=5)
    with pytest.raises(InvalidSpecError, match="unique_rows"):
        EmbeddingLocalityModel().fit(hist, lookups=10, unique_rows=50)
    bad = hist.assign(lookups_share=[np.nan, *hist.lookups_share[1:]])
    with pytest.raises(InvalidInputError, match="finite"):
        EmbeddingLocalityModel().fit(bad, lookups=10, unique_rows=5)
    model = _model()
    with pytest.raises(InvalidSpecError, match="cache_fraction"):
        model.hit_rate([-0.1])
    with pytest.raises(InvalidSpecError, match="cache_fraction"):
        model.hit_rate([np.nan])
    with pytest.raises(InvalidSpecError, match="policy"):
        model.hit_rate([0.1], policy="fifo")  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="n_rows"):
        model.sample_row_counts(0)


def test_published_windows(shared_data: Path) -> None:
    """Every published window fits; the 2022 windows reuse rows more than the 2021 ones."""
    at_10 = {}
    for year in ("2021", "2022"):
        data = read_dlrm_locality(
            shared_data / "dlrm_datasets" / f"embedding_bag_{year}_locality_stats.txt"
        )
        total = data.totals.iloc[0]
        model = EmbeddingLocalityModel().fit(
            data.histogram[data.histogram.trace == total.trace],
            lookups=int(total.lookups),
            unique_rows=int(total.unique_rows),
        )
        assert model.mean_reuse() == pytest.approx(total.mean_reuse, abs=0.1)
        at_10[year] = float(model.hit_rate([0.1])[0])
        assert 0.3 < at_10[year] < 1 - 1 / total.mean_reuse
        near_all = model.hit_rate([0.99, 1.0], policy="lfu")  # was 92.197% vs 92.150% (2022)
        assert np.all(near_all <= 1 - model.compulsory_miss_rate())
    assert at_10["2022"] > at_10["2021"]


# ------------------------------------------------------------------------------ Zipf law
def _zipf_exact(rows: int, s: float) -> np.ndarray:
    p = np.arange(1, rows + 1, dtype=np.float64) ** -s
    return p / p.sum()


def _che_exact(p: np.ndarray, cache: float) -> float:
    lo, hi = -80.0, 80.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if -np.expm1(-math.exp(mid) * p).sum() < cache:
            lo = mid
        else:
            hi = mid
    return float(p @ -np.expm1(-p * math.exp(0.5 * (lo + hi))))


@pytest.mark.parametrize("s", [0.6, 1.0, 1.3])
def test_zipf_bins_match_the_per_row_sums(s: float) -> None:
    """300,000 rows summed in log bins above 4096 ranks: within 1e-4 of the sums over every
    row (LFU: the top rows' mass; LRU: Che's fixed point)."""
    rows = 300_000
    p = _zipf_exact(rows, s)
    model = ZipfLocality(rows=rows, exponent=s)
    fractions = np.array([0.001, 0.01, 0.1, 0.5])
    lfu = [p[: round(f * rows)].sum() for f in fractions]
    lru = [_che_exact(p, f * rows) for f in fractions]
    assert model.hit_rate(fractions, policy="lfu") == pytest.approx(lfu, abs=1e-4)
    assert model.hit_rate(fractions) == pytest.approx(lru, abs=1e-4)


def test_zipf_shape() -> None:
    uniform = ZipfLocality(rows=10_000, exponent=0.0)
    assert uniform.hit_rate(FRACTIONS) == pytest.approx(FRACTIONS)
    assert uniform.hit_rate(FRACTIONS, policy="lfu") == pytest.approx(FRACTIONS)
    flat, steep = ZipfLocality(rows=10**7, exponent=0.8), ZipfLocality(rows=10**7, exponent=1.2)
    for policy in ("lru", "lfu"):
        a, b = flat.hit_rate(FRACTIONS, policy=policy), steep.hit_rate(FRACTIONS, policy=policy)
        assert np.all(np.diff(a) > 0) and np.all(b > a)
    assert np.all(steep.hit_rate(FRACTIONS, policy="lfu") > steep.hit_rate(FRACTIONS))
    assert steep.hit_rate([0.0, 1.0, 2.0]).tolist() == [0.0, 1.0, 1.0]
    with pytest.raises(InvalidSpecError, match="rows"):
        ZipfLocality(rows=0, exponent=1.0)
    with pytest.raises(InvalidSpecError, match="zipf exponent"):
        ZipfLocality(rows=10, exponent=-1.0)


@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_zipf_matches_an_exact_replay(policy: str) -> None:
    """400,000 lookups drawn from Zipf 1.0 over 5,000 rows through the exact caches: within
    2 pp of the steady-state prediction (the stream's first lookups are 1.25% of it)."""
    rows, s = 5_000, 1.0
    stream = np.random.default_rng(0).choice(rows, size=400_000, p=_zipf_exact(rows, s))
    caps = np.round(FRACTIONS * rows).astype(np.int64)
    replay = replay_lru if policy == "lru" else replay_lfu
    replayed = hit_rates(replay(stream, caps), len(stream))
    predicted = ZipfLocality(rows=rows, exponent=s).hit_rate(FRACTIONS, policy=policy)  # type: ignore[arg-type]
    assert np.abs(predicted - replayed).max() < 0.02

"""Bursty spot markets (gpucast.predict.bursty): the calm/storm Markov-modulated hazard, its
fit on node-count traces, capacity gaps, piecewise hazards."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.linalg import expm

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.preemption import HazardSpec, InstanceLifetime, node_count_trace
from gpucast.predict._bursty_scans import _prefix, _suffix  # private; tested for their edges
from gpucast.predict.bursty import (
    CapacityGaps,
    MarkovModulatedLifetime,
    MMPPModel,
    MMPPPath,
    PiecewiseHazardLifetime,
    PiecewiseHazardModel,
    fit_lifetimes,
    fit_mmpp,
    fit_mmpp_events,
    storm_probability,
)
from gpucast.predict.revocation import CorrelatedLifetime, LifetimeDistribution, RevocationModel

H = 3600.0
BURSTY = MarkovModulatedLifetime(
    hazard_calm_per_hour=0.01, hazard_storm_per_hour=0.5, calm_mean_h=24.0, storm_mean_h=3.0
)


def mmpp(
    hc: float, hs: float, calm_h: float, storm_h: float, **kw: object
) -> MarkovModulatedLifetime:
    return MarkovModulatedLifetime(
        hazard_calm_per_hour=hc,
        hazard_storm_per_hour=hs,
        calm_mean_h=calm_h,
        storm_mean_h=storm_h,
        **kw,  # type: ignore[arg-type]
    )


hazards = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)
sojourns = st.floats(min_value=0.05, max_value=100.0, allow_nan=False)
params = st.tuples(hazards, hazards, sojourns, sojourns)


def _generator(life: MarkovModulatedLifetime) -> np.ndarray:
    a, b = 1 / life.calm_mean_h, 1 / life.storm_mean_h
    hc, hs = life.hazard_calm_per_hour, life.hazard_storm_per_hour
    return np.array([[-a - hc, a], [b, -b - hs]])  # per hour


# ------------------------------------------------------------------- the distribution
def test_it_is_a_correlated_lifetime() -> None:
    assert isinstance(BURSTY, CorrelatedLifetime)
    as_lifetime: LifetimeDistribution = BURSTY  # a static check (not runtime_checkable)
    assert as_lifetime.source
    assert BURSTY.storm_fraction == pytest.approx(3 / 27)
    assert BURSTY.mean_hazard_per_hour == pytest.approx(24 / 27 * 0.01 + 3 / 27 * 0.5)


@settings(max_examples=60, deadline=None)
@given(params, st.floats(0.0, 500.0), st.floats(0.0, 1.0))
def test_survival_is_the_exact_matrix_exponential(
    p: tuple[float, float, float, float], t_h: float, q: float
) -> None:
    life = mmpp(*p)
    e = expm(_generator(life) * t_h)
    pi = np.array([1 - life.storm_fraction, life.storm_fraction])
    assert float(life.survival(t_h * H)) == pytest.approx(pi @ e @ np.ones(2), abs=1e-9)
    given_q = float(life.survival_given(t_h * H, q))
    assert given_q == pytest.approx(np.array([1 - q, q]) @ e @ np.ones(2), abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(params, st.lists(st.floats(0.0, 1e6), min_size=2, max_size=20))
def test_stationary_survival_is_a_decreasing_probability(
    p: tuple[float, float, float, float], times: list[float]
) -> None:
    life = mmpp(*p)
    t = np.sort(np.asarray(times))
    s = life.survival(t)
    assert float(life.survival(0.0)) == pytest.approx(1.0)
    assert np.all((s >= 0) & (s <= 1))
    assert np.all(np.diff(s) <= 1e-12)


@settings(max_examples=40, deadline=None)
@given(params, st.integers(0, 2**32 - 1), st.floats(0.0, 200.0))
def test_lifetimes_are_non_negative(
    p: tuple[float, float, float, float], seed: int, horizon_h: float
) -> None:
    life = mmpp(*p, cap_s=30 * H)
    rng = np.random.default_rng(seed)
    assert np.all(life.sample(rng, 200) >= 0)
    env = life.environment(rng, 20, horizon_h * H)
    assert np.all(env.edges_s[:, -1] > horizon_h * H)
    start = rng.uniform(0, 2 * horizon_h * H + 1, 200)  # some beyond the drawn path
    out = life.sample_at(rng, start, rng.integers(0, 20, 200), env)
    assert out.shape == (200,) and np.all(out >= 0) and np.all(out <= 30 * H)


@settings(max_examples=40, deadline=None)
@given(
    st.floats(0.001, 5.0),
    sojourns,
    sojourns,
    st.integers(0, 2**32 - 1),
    st.floats(0.0, 100.0),
)
def test_constant_hazard_mmpp_is_exactly_exponential(
    h: float, calm_h: float, storm_h: float, seed: int, horizon_h: float
) -> None:
    """calm == storm: each node's lifetime is its own Exp(1) draw over the hazard, whatever
    the path, the start, or whether it outlives the drawn path."""
    life = mmpp(h, h, calm_h, storm_h)
    env = life.environment(np.random.default_rng(seed), 30, horizon_h * H)
    starts = np.random.default_rng(seed + 1).uniform(0, 2 * horizon_h * H + 1, 300)
    runs = np.arange(300) % 30
    out = life.sample_at(np.random.default_rng(7), starts, runs, env)
    expected = np.random.default_rng(7).standard_exponential(300) / (h / H)
    np.testing.assert_allclose(out, expected, rtol=1e-9)


def test_constant_hazard_mmpp_matches_an_exponential_in_distribution() -> None:
    life = mmpp(0.2, 0.2, 2.0, 1.0)
    rng = np.random.default_rng(0)
    env = life.environment(rng, 5000, 48 * H)
    out = life.sample_at(
        rng, np.repeat([0.0, 10 * H, 47 * H, 60 * H], 5000), np.tile(np.arange(5000), 4), env
    )
    assert stats.kstest(out, stats.expon(scale=H / 0.2).cdf).pvalue > 1e-3
    assert stats.kstest(life.sample(rng, 20000), stats.expon(scale=H / 0.2).cdf).pvalue > 1e-3


@pytest.mark.parametrize("start_h", [0.0, 30.0, 99.0])
def test_sample_at_has_the_stationary_marginal(start_h: float) -> None:
    rng = np.random.default_rng(int(start_h))
    env = BURSTY.environment(rng, 20000, 100 * H)
    out = BURSTY.sample_at(rng, np.full(20000, start_h * H), np.arange(20000), env)
    cdf = lambda t: 1 - BURSTY.survival(t)  # noqa: E731
    assert stats.kstest(out, cdf).pvalue > 1e-3
    assert stats.kstest(BURSTY.sample(rng, 20000), cdf).pvalue > 1e-3


def test_environment_is_stationary_and_covers_the_horizon() -> None:
    env = BURSTY.environment(np.random.default_rng(1), 4000, 72 * H)
    assert isinstance(env, MMPPPath) and env.runs == 4000
    assert np.all(env.edges_s[:, 0] == 0) and np.all(env.edges_s[:, -1] > 72 * H)
    assert np.all(np.diff(env.edges_s, axis=1) > 0)
    assert np.all(env.storm[:, 1:] != env.storm[:, :-1])  # calm and storm alternate
    assert env.storm[:, 0].mean() == pytest.approx(BURSTY.storm_fraction, abs=0.02)
    assert env.storm_fraction().mean() == pytest.approx(BURSTY.storm_fraction, abs=0.01)
    np.testing.assert_allclose(
        env.cum_hazard[:, 1:], np.cumsum(env.hazard_per_s * np.diff(env.edges_s, axis=1), 1)
    )


def test_same_seed_same_draws() -> None:
    def draw(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        env = BURSTY.environment(rng, 50, 48 * H)
        starts = np.linspace(0, 60 * H, 100)
        return (
            env.edges_s,
            BURSTY.sample_at(rng, starts, np.arange(100) % 50, env),
            BURSTY.sample(rng, 10),
        )

    for x, y in zip(draw(3), draw(3), strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(draw(3)[1], draw(4)[1])


def test_sample_at_inverts_a_given_path_exactly() -> None:
    # one run: calm [0, 10 h) at 0.1/h, storm [10 h, 12 h) at 2/h, calm [12 h, 100 h)
    edges = np.array([[0.0, 10 * H, 12 * H, 100 * H]])
    hazard = np.array([[0.1, 2.0, 0.1]]) / H
    cum = np.concatenate([[[0.0]], np.cumsum(hazard * np.diff(edges), axis=1)], axis=1)
    env = MMPPPath(
        edges_s=edges,
        storm=np.array([[False, True, False]]),
        hazard_per_s=hazard,
        cum_hazard=cum,
        next_storm=np.array([True]),
        horizon_s=50 * H,
    )
    life = mmpp(0.1, 2.0, 20.0, 2.0)
    starts = np.array([0.0, 5 * H, 9 * H, 11 * H, 30 * H])
    out = life.sample_at(np.random.default_rng(0), starts, np.zeros(5, dtype=np.int64), env)
    e = np.random.default_rng(0).standard_exponential(5)

    def cum_at(t: float) -> float:
        return float(np.interp(t, edges[0], cum[0]))

    for s, life_s, draw in zip(starts, out, e, strict=True):
        if s + life_s < 100 * H:
            assert cum_at(s + life_s) - cum_at(s) == pytest.approx(draw, rel=1e-9)


def test_cap_ends_every_lifetime() -> None:
    life = mmpp(0.0, 0.0, 5.0, 1.0, cap_s=24 * H)
    rng = np.random.default_rng(0)
    assert np.all(life.sample(rng, 10) == 24 * H)
    env = life.environment(rng, 3, 10 * H)
    assert np.all(life.sample_at(rng, np.zeros(3), np.arange(3), env) == 24 * H)
    assert float(life.survival(24 * H)) == 0.0
    assert float(life.survival(23 * H)) == pytest.approx(1.0)
    assert np.all(np.isinf(mmpp(0.0, 0.0, 5.0, 1.0).sample(rng, 5)))


def test_median_and_quantiles() -> None:
    m = BURSTY.median_s()
    assert float(BURSTY.survival(m)) == pytest.approx(0.5, abs=1e-6)
    q = BURSTY.quantile_s(0.9, storm_probability=1.0)
    assert float(BURSTY.survival_given(q, 1.0)) == pytest.approx(0.1, abs=1e-6)
    assert mmpp(0.0, 0.0, 1.0, 1.0).median_s() == math.inf
    assert mmpp(0.01, 0.01, 1.0, 1.0, cap_s=3600.0).median_s() == 3600.0


# ------------------------------------------------------------------------- correlation
def _revoked_per_run(life: MarkovModulatedLifetime, nodes: int, runs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    env = life.environment(rng, runs, 24 * H)
    out = life.sample_at(rng, np.zeros(runs * nodes), np.repeat(np.arange(runs), nodes), env)
    return np.asarray((out < 24 * H).reshape(runs, nodes).sum(axis=1))


def _dispersion(life: MarkovModulatedLifetime, nodes: int) -> tuple[float, float]:
    """(p, theoretical variance ratio to a binomial) of nodes revoked within 24 h."""
    s1 = float(life.survival(24 * H))
    both = mmpp(
        2 * life.hazard_calm_per_hour,
        2 * life.hazard_storm_per_hour,
        life.calm_mean_h,
        life.storm_mean_h,
    )
    cov = float(both.survival(24 * H)) - s1**2  # P(two nodes both survive) - S^2
    p = 1 - s1
    return p, 1 + (nodes - 1) * cov / (p * (1 - p))


@settings(max_examples=20, deadline=None)
@given(
    st.floats(0.001, 0.05),
    st.floats(20.0, 200.0),
    st.floats(6.0, 72.0),
    st.floats(0.5, 6.0),
    st.integers(0, 2**32 - 1),
)
def test_nodes_sharing_a_path_are_revoked_together(
    calm: float, ratio: float, calm_h: float, storm_h: float, seed: int
) -> None:
    life = mmpp(calm, calm * ratio, calm_h, storm_h)
    nodes = 8
    p, theory = _dispersion(life, nodes)
    assume(0.02 < p < 0.98 and theory > 1.5)
    k = _revoked_per_run(life, nodes, 20000, seed)
    ratio_seen = k.var() / (nodes * p * (1 - p))
    assert ratio_seen > 1.0 + 0.5 * (theory - 1.0)  # over-dispersed: more than binomial
    assert ratio_seen == pytest.approx(theory, rel=0.2)  # and by the exact amount


def test_constant_hazard_nodes_are_independent() -> None:
    life = mmpp(0.05, 0.05, 10.0, 2.0)
    p, theory = _dispersion(life, 8)
    assert theory == pytest.approx(1.0)
    k = _revoked_per_run(life, 8, 20000, 0)
    assert k.var() / (8 * p * (1 - p)) == pytest.approx(1.0, abs=0.06)


# ------------------------------------------------------------------------------- fitting
def _hmm_events(
    life: MarkovModulatedLifetime, nodes: int, days: float, gap_s: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Revocations and node-hours per tick from the per-tick chain (exactly the fitted model)."""
    rng = np.random.default_rng(seed)
    ticks = int(days * 86400 / gap_s)
    a, b = 1 / life.calm_mean_h, 1 / life.storm_mean_h
    trans = expm(np.array([[-a, a], [b, -b]]) * gap_s / H)
    state = np.empty(ticks, dtype=np.int64)
    state[0] = rng.random() < life.storm_fraction
    u = rng.random(ticks)
    for t in range(1, ticks):
        state[t] = u[t] < trans[state[t - 1], 1]
    x = np.full(ticks, nodes * gap_s / H)
    x[0] = 0.0
    lam = np.array([life.hazard_calm_per_hour, life.hazard_storm_per_hour])
    return rng.poisson(lam[state] * x), x, state


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_recovers_a_known_mmpp(seed: int) -> None:
    """60 days of 5-minute ticks, 50 nodes: hazards within 15%, mean spells within 30%."""
    y, x, _ = _hmm_events(BURSTY, 50, 60, 300.0, seed)
    fit = fit_mmpp_events(y, x, 300.0)
    got = fit.lifetime
    assert not fit.constant and fit.converged
    assert got.hazard_calm_per_hour == pytest.approx(0.01, rel=0.15)
    assert got.hazard_storm_per_hour == pytest.approx(0.5, rel=0.15)
    assert got.calm_mean_h == pytest.approx(24.0, rel=0.3)
    assert got.storm_mean_h == pytest.approx(3.0, rel=0.3)
    assert fit.log_likelihood > fit.constant_log_likelihood + 100
    assert got.source.startswith("MMPP fitted on 17280 ticks of 300 s")


def test_fit_on_a_node_count_trace_from_the_continuous_model() -> None:
    """A 1-node availability trace (replacement one tick after a drop), 90 days: the fitted
    long-run hazard within 20% of the truth, and storms found."""
    life = mmpp(0.02, 1.0, 12.0, 2.0)
    gap, days = 300.0, 90
    rng = np.random.default_rng(5)
    env = life.environment(rng, 1, days * 86400.0)
    ticks = int(days * 86400 / gap)
    counts = np.zeros(ticks + 1, dtype=np.int64)
    t = 0.0
    while t < ticks * gap:
        death = t + float(life.sample_at(rng, np.array([t]), np.array([0]), env)[0])
        first, last = math.ceil(t / gap), min(math.floor(death / gap), ticks)
        counts[first : last + 1] = 1
        t = (math.floor(death / gap) + 2) * gap  # seen gone at the next tick, back one later
    fit = fit_mmpp(counts, gap)
    assert not fit.constant
    assert fit.lifetime.mean_hazard_per_hour == pytest.approx(life.mean_hazard_per_hour, rel=0.2)
    assert fit.lifetime.hazard_storm_per_hour > 10 * fit.lifetime.hazard_calm_per_hour


def test_degenerate_traces_fall_back_to_a_constant_hazard() -> None:
    quiet = fit_mmpp([4] * 1000, 300.0)
    assert quiet.constant and quiet.lifetime.is_constant
    exposure_h = 999 * 4 * 300 / H
    assert quiet.lifetime.hazard_calm_per_hour == pytest.approx(0.5 / exposure_h)
    assert "no revocations" in quiet.lifetime.source and "Jeffreys" in quiet.lifetime.source

    rng = np.random.default_rng(0)
    x = np.full(5000, 20 * 300 / H)
    y = rng.poisson(0.05 * x)
    steady = fit_mmpp_events(y, x, 300.0)
    assert steady.constant
    assert "one state explains the trace" in steady.lifetime.source
    assert steady.lifetime.hazard_calm_per_hour == pytest.approx(y.sum() / x.sum())

    with pytest.raises(InvalidSpecError, match="no node was running"):
        fit_mmpp([0, 0, 0], 300.0)
    with pytest.raises(InvalidSpecError, match=r"revocations\[1\]"):
        fit_mmpp_events([0, 1], [1.0, 0.0], 300.0)
    with pytest.raises(InvalidSpecError, match="gap_s"):
        fit_mmpp([1, 0], -1.0)


def _naive_filter(life: MarkovModulatedLifetime, counts: np.ndarray, gap_s: float) -> np.ndarray:
    """Rabiner's scaled forward recursion, one tick at a time."""
    trace = node_count_trace(counts, gap_s)
    p_cs, p_sc = gap_s / (life.calm_mean_h * H), gap_s / (life.storm_mean_h * H)
    trans = np.array([[1 - p_cs, p_cs], [p_sc, 1 - p_sc]])
    lam = np.array([life.hazard_calm_per_hour, life.hazard_storm_per_hour])
    alpha = np.array([1 - life.storm_fraction, life.storm_fraction])
    out = []
    for t, (y, x) in enumerate(zip(trace.revocations, trace.exposure_node_s / H, strict=True)):
        if t:
            alpha = alpha @ trans
        alpha = alpha * stats.poisson.pmf(y, lam * x)
        alpha /= alpha.sum()
        out.append(alpha[1])
    return np.asarray(out)


@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 100, 512, 513, 1000])
def test_blocked_scans_give_the_matrix_products(n: int) -> None:
    rng = np.random.default_rng(n)
    m = rng.uniform(0.01, 3.0, (2, 2, n, 3))  # 3 parameter sets side by side
    pre, pre_logs = _prefix(m)
    suf, suf_logs = _suffix(m)
    for r in range(3):  # the textbook loop, rescaled as it goes (1000 products overflow)
        acc, log_acc = np.eye(2), 0.0
        for t in range(n):
            acc = acc @ m[:, :, t, r]
            log_acc += math.log(acc.max())
            acc /= acc.max()
            np.testing.assert_allclose(pre[:, :, t, r], acc, rtol=1e-9)
            assert pre_logs[t, r] == pytest.approx(log_acc, rel=1e-9)
        acc, log_acc = np.eye(2), 0.0
        for t in reversed(range(n)):
            acc = m[:, :, t, r] @ acc
            log_acc += math.log(acc.max())
            acc /= acc.max()
            np.testing.assert_allclose(suf[:, :, t, r], acc, rtol=1e-9)
            assert suf_logs[t, r] == pytest.approx(log_acc, rel=1e-9)
    assert np.all(pre.max(axis=(0, 1)) == pytest.approx(1.0))


def test_storm_filter_matches_the_textbook_recursion_and_finds_storms() -> None:
    y, x, state = _hmm_events(BURSTY, 16, 10, 300.0, 4)
    # a count trace with those drops: 16 nodes, the revoked replaced at the next tick
    counts = 16 - np.minimum(y, 16)
    fast = storm_probability(BURSTY, counts, 300.0)
    np.testing.assert_allclose(fast, _naive_filter(BURSTY, counts, 300.0), atol=1e-9)
    model = MMPPModel().fit_events(y, x, 300.0)
    np.testing.assert_allclose(model.storm_probability(counts, 300.0)[:5], fast[:5], atol=0.3)
    assert fast[state == 1].mean() > 0.5 > fast[state == 0].mean()


def test_mmpp_model_wraps_the_fit() -> None:
    y, x, _ = _hmm_events(BURSTY, 20, 20, 300.0, 0)
    model = MMPPModel(restarts=3, seed=1, cap_s=86400.0)
    assert model.fit_events(y, x, 300.0) is model
    assert model.distribution().cap_s == 86400.0
    assert model.source == model.result.lifetime.source
    assert model.log_likelihood == model.result.log_likelihood
    with pytest.raises(InvalidSpecError):
        MMPPModel(restarts=0)


# ------------------------------------------------------------------------ capacity gaps
def test_capacity_gaps_kaplan_meier_with_censoring() -> None:
    gaps = CapacityGaps().fit([60.0, 120.0, 120.0, 300.0, 600.0], [True, True, False, True, False])
    # at risk 5 at 60 (1 dies) -> 4/5; at 120: 4 at risk, 1 dies -> 3/5; at 300: 2 at risk -> 3/10
    assert float(gaps.survival(59.0)) == 1.0
    assert float(gaps.survival(60.0)) == pytest.approx(0.8)
    assert float(gaps.survival(200.0)) == pytest.approx(0.6)
    assert float(gaps.survival(300.0)) == pytest.approx(0.3)
    # beyond the last recovery: exponential, mean = 2 x (600 - 300) s (Jeffreys)
    assert float(gaps.survival(900.0)) == pytest.approx(0.3 * math.exp(-600 / 600))
    assert gaps.median_s() == 300.0
    draws = gaps.sample(np.random.default_rng(0), 20000)
    assert set(np.unique(draws[draws <= 300])) <= {60.0, 120.0, 300.0}
    assert np.mean(draws > 300) == pytest.approx(0.3, abs=0.015)
    assert np.mean(draws[draws > 300]) == pytest.approx(300 + 600, rel=0.05)
    assert "5 gaps (3 recovered, 2 still open" in gaps.source
    np.testing.assert_array_equal(
        gaps.sample(np.random.default_rng(1), 50), gaps.sample(np.random.default_rng(1), 50)
    )


def test_capacity_gaps_from_a_trace_and_edge_cases() -> None:
    trace = node_count_trace([2, 1, 1, 2, 0, 2, 2, 1], 300.0)
    gaps = CapacityGaps().fit(trace.capacity_gaps_s, trace.capacity_gap_observed)
    assert "3 gaps (2 recovered, 1 still open" in gaps.source
    assert np.all(gaps.sample(np.random.default_rng(0), 100) >= 0)
    all_seen = CapacityGaps().fit([10.0, 20.0])
    assert float(all_seen.survival(20.0)) == 0.0 and "all recovered" in all_seen.source
    assert set(all_seen.sample(np.random.default_rng(0), 100)) <= {10.0, 20.0}
    none_seen = CapacityGaps().fit([100.0], [False])
    assert none_seen.median_s() == pytest.approx(200 * math.log(2))
    with pytest.raises(InvalidSpecError, match="no drop"):
        CapacityGaps().fit([])
    with pytest.raises(InvalidSpecError, match="gaps_s"):
        CapacityGaps().fit([-1.0])
    with pytest.raises(InvalidSpecError, match="one flag per gap"):
        CapacityGaps().fit([1.0, 2.0], [True])


# ---------------------------------------------------------------------- piecewise hazards
def test_piecewise_constant_spec_is_an_exponential() -> None:
    life = PiecewiseHazardLifetime.from_spec(HazardSpec.constant(0.1))
    draws = life.sample(np.random.default_rng(0), 20000)
    assert stats.kstest(draws, stats.expon(scale=10 * H).cdf).pvalue > 1e-3
    assert float(life.survival(10 * H)) == pytest.approx(math.exp(-1))
    assert isinstance(life, CorrelatedLifetime)


def test_piecewise_table_sampling_inverts_the_cumulative_hazard() -> None:
    spec = HazardSpec.table([0, 1, 5, 24], [0.5, 0.0, 0.1, 0.02])
    life = PiecewiseHazardLifetime.from_spec(spec, cap_s=48 * H)
    assert float(life.cumulative_hazard(3 * H)) == pytest.approx(0.5)
    assert float(life.cumulative_hazard(10 * H)) == pytest.approx(0.5 + 0.5)
    assert float(life.survival(48 * H)) == 0.0
    draws = life.sample(np.random.default_rng(0), 40000)
    assert not np.any((draws > H) & (draws < 5 * H))  # no revocation where the hazard is 0
    uncapped = PiecewiseHazardLifetime.from_spec(spec)
    cdf = lambda t: 1 - uncapped.survival(t)  # noqa: E731
    assert stats.kstest(uncapped.sample(np.random.default_rng(1), 40000), cdf).pvalue > 1e-3
    tail_free = PiecewiseHazardLifetime.from_spec(HazardSpec.table([0, 2], [0.1, 0.0]))
    assert np.isinf(tail_free.sample(np.random.default_rng(0), 1000)).mean() == pytest.approx(
        math.exp(-0.2), abs=0.04
    )


def test_piecewise_clocks() -> None:
    spec = HazardSpec.table([0, 10], [0.0, 1.0])
    starts = np.array([0.0, 5 * H, 12 * H])
    runs = np.zeros(3, dtype=np.int64)
    by_age = PiecewiseHazardLifetime.from_spec(spec, clock="age")
    by_run = PiecewiseHazardLifetime.from_spec(spec, clock="run")
    assert by_run.environment(np.random.default_rng(0), 3, 10.0) is None
    e = np.random.default_rng(0).standard_exponential(3) * H
    age = by_age.sample_at(np.random.default_rng(0), starts, runs, None)
    np.testing.assert_allclose(age, 10 * H + e)  # every node waits 10 h from its own start
    run = by_run.sample_at(np.random.default_rng(0), starts, runs, None)
    np.testing.assert_allclose(run, np.maximum(10 * H - starts, 0) + e)  # the run's 10 h
    assert "run's clock" in by_run.source
    with pytest.raises(InvalidSpecError, match="clock"):
        PiecewiseHazardLifetime(start_h=(0.0,), hazard_per_hour=(1.0,), clock="wall")


def test_piecewise_hazard_model_recovers_the_bins() -> None:
    truth = PiecewiseHazardLifetime.from_spec(HazardSpec.table([0, 1, 4], [0.6, 0.1, 0.03]))
    d = truth.sample(np.random.default_rng(2), 20000)
    observed = d < 24 * H
    d = np.minimum(d, 24 * H)
    model = PiecewiseHazardModel(breaks_h=(0.0, 1.0, 4.0, 30.0)).fit(d, observed)
    got = model.spec().hazard_per_hour
    assert got[:3] == pytest.approx((0.6, 0.1, 0.03), rel=0.1)
    assert got[3] == got[2]  # no node reached 30 h: keeps the bin before
    assert "20000 lifetimes" in model.distribution().source
    quiet = PiecewiseHazardModel(breaks_h=(0.0,)).fit([H, 2 * H], [False, False])
    assert quiet.spec().hazard_per_hour == (pytest.approx(0.5 / 3),)
    with pytest.raises(InvalidSpecError):
        PiecewiseHazardModel(breaks_h=(1.0, 2.0))
    with pytest.raises(InvalidSpecError, match="duration_s"):
        PiecewiseHazardModel().fit([-1.0])


# ---------------------------------------------------------------------- lifetime records
def test_fit_lifetimes_uses_the_revocation_model() -> None:
    rng = np.random.default_rng(0)
    records = [
        InstanceLifetime(
            line=i + 2,
            start_s=0.0,
            end_s=float(d),
            observed=bool(i % 4),
            gpu="A100",
            zone="us-east-1a",
        )
        for i, d in enumerate(rng.exponential(5 * H, 30))
    ]
    model = fit_lifetimes(records, method="km")
    assert isinstance(model, RevocationModel)
    assert model.regions("A100") == ("us-east-1",)
    assert model.distribution("A100", "us-east-1").source.startswith("fitted: A100 us-east-1")
    with pytest.raises(InvalidSpecError, match="at least one record"):
        fit_lifetimes([])


# -------------------------------------------------------------------------------- errors
def test_invalid_parameters() -> None:
    with pytest.raises(InvalidSpecError, match="hazard_storm_per_hour"):
        mmpp(0.1, -1.0, 1.0, 1.0)
    with pytest.raises(InvalidSpecError, match="calm_mean_h"):
        mmpp(0.1, 1.0, 0.0, 1.0)
    with pytest.raises(InvalidSpecError, match="cap_s"):
        mmpp(0.1, 1.0, 1.0, 1.0, cap_s=0.0)
    rng = np.random.default_rng(0)
    env = BURSTY.environment(rng, 2, H)
    with pytest.raises(InvalidSpecError, match="env"):
        BURSTY.sample_at(rng, np.zeros(1), np.zeros(1, dtype=np.int64), None)
    with pytest.raises(InvalidSpecError, match="run"):
        BURSTY.sample_at(rng, np.zeros(1), np.array([2]), env)
    with pytest.raises(InvalidSpecError, match="start_s"):
        BURSTY.sample_at(rng, np.array([-1.0]), np.array([0]), env)
    with pytest.raises(InvalidSpecError, match="horizon_s"):
        BURSTY.environment(rng, 2, math.inf)
    assert BURSTY.sample_at(rng, np.zeros(0), np.zeros(0, dtype=np.int64), env).shape == (0,)


def test_a_trace_under_one_node_hour_states_its_exposure() -> None:
    """QA 37 T #12: 3 revocations in half a node-hour read "3 revocations in 0 node-h"."""
    fit = fit_mmpp([1, 0, 1, 0, 1, 0, 0, 0, 0, 0], 600.0)
    assert "(3 revocations in 0.500 node-h)" in fit.lifetime.source, fit.lifetime.source

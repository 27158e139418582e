"""GPU-to-GPU speed variability: the distribution, order statistics, the fit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.variability import SpeedVariability, rented_nodes, run_slowdowns

TYPICAL = SpeedVariability(sigma_log=0.0148, outlier_share=0.01, outlier_max_factor=1.5)


def test_no_spread_no_slowdown() -> None:
    flat = SpeedVariability(sigma_log=0.0)
    assert flat.expected_max([1, 8, 1024]).tolist() == [1.0, 1.0, 1.0]
    assert flat.slowdown([64], sync=[False]).tolist() == [pytest.approx(1.0)]


def test_cdf_is_a_distribution_and_sampling_agrees_with_it() -> None:
    x = np.linspace(0.9, 1.6, 200)
    f = TYPICAL.cdf(x)
    assert np.all(np.diff(f) >= -1e-12) and f[0] < 1e-6 and f[-1] == pytest.approx(1.0)
    draws = TYPICAL.sample(np.random.default_rng(0), 200_000)
    for q in (0.95, 1.0, 1.02, 1.1):
        assert np.mean(draws <= q) == pytest.approx(float(TYPICAL.cdf([q])[0]), abs=0.005)
    assert draws.max() <= 1.5 + 1e-12


def test_uniform_tail_is_the_gpd_with_shape_minus_one() -> None:
    v = SpeedVariability(sigma_log=0.01, outlier_share=0.2, outlier_max_factor=1.4)
    x = np.array([v.edge + 0.1, v.edge + 0.2])
    tail = (v.cdf(x) - 0.8) / 0.2  # the core's CDF is 1 there (15 sigma above its median)
    expected = (x - v.edge) / (1.4 - v.edge)
    np.testing.assert_allclose(tail, expected, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 300), sigma=st.floats(0.005, 0.08), share=st.floats(0.0, 0.05))
def test_expected_max_matches_monte_carlo(n: int, sigma: float, share: float) -> None:
    v = SpeedVariability(sigma_log=sigma, outlier_share=share, outlier_max_factor=1.5)
    mc = run_slowdowns(v, np.random.default_rng(1), 3000, n, sync=True).mean()
    assert float(v.expected_max([n])[0]) == pytest.approx(mc, rel=0.01)


def test_slowdown_grows_with_n_and_dropping_stragglers_helps() -> None:
    s = TYPICAL.expected_max([1, 8, 64, 512, 1024])
    assert np.all(np.diff(s) > 0)
    dropped = TYPICAL.slowdown([64, 512], sync=[True, True], exclude=0.1)
    assert np.all(dropped < TYPICAL.expected_max([64, 512]))
    # the n-th of m is the maximum when m == n
    assert TYPICAL.expected_order_stat([16], [16])[0] == pytest.approx(
        TYPICAL.expected_max([16])[0]
    )
    mc = run_slowdowns(TYPICAL, np.random.default_rng(2), 4000, 64, sync=True, exclude=0.1)
    assert float(dropped[0]) == pytest.approx(mc.mean(), rel=0.005)
    # asynchronous workers: the mean speed, barely slower than one median GPU
    assert TYPICAL.slowdown([64], sync=[False])[0] == pytest.approx(1.0, abs=0.01)


def test_stragglers_are_dropped_by_whole_nodes() -> None:
    # 4 nodes of 8 GPUs, the slowest 20%: 5 nodes probed, the fastest 4 (a node is as fast
    # as its slowest GPU) kept -- less than the GPU-wise drop, more than nothing dropped
    by_node = TYPICAL.slowdown([32], sync=[True], exclude=0.2, gpus_per_node=8)[0]
    by_gpu = TYPICAL.slowdown([32], sync=[True], exclude=0.2)[0]
    assert by_gpu < by_node < TYPICAL.expected_max([32])[0]
    mc = run_slowdowns(
        TYPICAL, np.random.default_rng(4), 4000, 32, sync=True, exclude=0.2, gpus_per_node=8
    )
    assert by_node == pytest.approx(mc.mean(), rel=0.005)
    # nothing dropped: nodes change nothing; one node kept of two probed: the faster node
    assert TYPICAL.slowdown([32], sync=[True], gpus_per_node=8)[0] == pytest.approx(
        TYPICAL.expected_max([32])[0]
    )
    assert rented_nodes([1, 4, 10], 0.1).tolist() == [2.0, 5.0, 12.0]
    assert rented_nodes([3], 0.0).tolist() == [3.0]


def test_fit_recovers_a_known_spread() -> None:
    rng = np.random.default_rng(5)
    truth = SpeedVariability(sigma_log=0.03, outlier_share=0.02, outlier_max_factor=1.5)
    fitted = SpeedVariability.fit(truth.sample(rng, 20_000))
    assert fitted.sigma_log == pytest.approx(0.03, rel=0.05)
    assert fitted.outlier_share == pytest.approx(0.02 + 0.007, abs=0.006)  # + the core's tail
    assert fitted.outlier_max_factor == pytest.approx(1.5, abs=0.01)
    for n in (8, 128):
        assert float(fitted.expected_max([n])[0]) == pytest.approx(
            float(truth.expected_max([n])[0]), rel=0.03
        )
    few = SpeedVariability.fit([1.0, 1.01, 0.99, 1.3])  # too few outliers for a tail fit
    assert few.outlier_shape == -1.0 and few.outlier_max_factor == pytest.approx(1.3, rel=0.02)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sigma_log": -0.1}, "sigma_log"),
        ({"sigma_log": 0.01, "outlier_share": 0.6}, "outlier_share"),
        ({"sigma_log": 0.01, "outlier_max_factor": 0.5}, "outlier_max_factor"),
        ({"sigma_log": 0.01, "outlier_shape": 3.0}, "outlier_shape"),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InvalidSpecError, match=field):
        SpeedVariability(**kwargs)  # type: ignore[arg-type]


def test_bad_inputs_and_round_trip() -> None:
    with pytest.raises(InvalidSpecError, match="at least 3"):
        SpeedVariability.fit([1.0, 2.0])
    with pytest.raises(InvalidSpecError, match="1 <= n <= m"):
        TYPICAL.expected_order_stat([8], [4])
    with pytest.raises(InvalidSpecError, match="exclude-slowest"):
        TYPICAL.slowdown([8], sync=[True], exclude=1.5)
    fitted = SpeedVariability.fit(TYPICAL.sample(np.random.default_rng(3), 5000), source="s")
    assert SpeedVariability.from_dict(fitted.to_dict()) == fitted
    with pytest.raises(InvalidSpecError, match="malformed"):
        SpeedVariability.from_dict({"outlier_share": 0.1})


def test_many_outliers_keep_their_own_quantiles_as_the_tail() -> None:
    # a core with a heavy tail of its own plus truncated Pareto outliers: no one Pareto shape
    # fits the excesses, the empirical tail does (E[max of 1,024] of the fleet itself)
    rng = np.random.default_rng(11)
    n = 40_000
    core = np.exp(0.02 * rng.standard_t(4, n))
    tail = np.minimum(1.05 * (1.0 + rng.pareto(3.0, n)), 1.6)
    fleet = np.where(rng.random(n) < 0.005, tail, core)
    fitted = SpeedVariability.fit(fleet)
    assert len(fitted.outlier_quantiles) == 201
    jobs = np.array([rng.choice(fleet, 1024, replace=False).max() for _ in range(400)])
    direct = jobs.mean() / np.median(fleet)
    assert float(fitted.expected_max([1024])[0]) == pytest.approx(direct, rel=0.02)
    drawn = fitted.sample(rng, (400, 1024)).max(axis=1).mean()
    assert drawn == pytest.approx(direct, rel=0.02)
    assert SpeedVariability.from_dict(fitted.to_dict()) == fitted
    few = SpeedVariability.fit(fleet[:2_000])  # ~50 outliers: the Pareto fit as before
    assert few.outlier_quantiles == ()


@pytest.mark.parametrize("quantiles", [(0.1,), (0.2, 0.1), (-0.1, 0.3), (0.0, float("nan"))])
def test_bad_empirical_tails_are_refused(quantiles: tuple[float, ...]) -> None:
    with pytest.raises(InvalidSpecError, match="outlier_quantiles"):
        SpeedVariability(
            sigma_log=0.02, outlier_share=0.01, outlier_max_factor=1.5, outlier_quantiles=quantiles
        )


def test_busy_share_is_the_mean_gpus_share_of_the_slowests_step() -> None:
    """QA 40 E #1/#14: the energy of a job paced by its slowest GPU counts the others' wait
    at their idle draw: the mean GPU computes ``E[f] / E[max]`` of the paced step."""
    v = SpeedVariability(sigma_log=0.0408, outlier_share=0.01, outlier_max_factor=1.5)
    pace = v.expected_max([8, 64, 1024])
    share = v.busy_share(pace)
    mean = float(v.expected_order_stat(1, 1)[0])
    assert mean == pytest.approx(1.0, abs=0.01)
    assert share == pytest.approx(mean / pace, rel=1e-12)
    assert 0.6 < share[2] < share[1] < share[0] < 1.0
    assert float(v.busy_share(1.0)) == 1.0  # never more than the whole step

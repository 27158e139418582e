"""The power model: physics of a power cap, the fit, intervals and Zeus's trade-off."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from power_factories import BOARDS, TRUE, WORKLOADS, sweep_rows, true_model

from gpucast.domain.errors import InvalidSpecError, NotFittedError
from gpucast.predict.intervals import calibrated_level
from gpucast.predict.power import (
    BoardPower,
    PowerModel,
    PowerTerms,
    cross_validated,
    energy_optimal,
    interval_table,
    kernel_share,
    measurement_noise,
    optimal_limits,
    power_interval,
    power_limit_grid,
    tied_optimal_limits,
    uncapped_sweeps,
    zeus_cost,
)

BOARD = BoardPower(name="G1", max_power_limit_w=250.0, min_power_limit_w=100.0)


def _sweep(terms: PowerTerms, limits: list[float], **kw: float) -> pd.DataFrame:
    return true_model().sweep(terms, BOARD, limits, step_time_s=terms.total_s, **kw)


def test_terms_need_some_time_and_finite_values() -> None:
    with pytest.raises(InvalidSpecError, match="terms"):
        PowerTerms(compute_s=0, memory_s=0, kernel_s=0, host_s=0)
    with pytest.raises(InvalidSpecError, match="compute_s"):
        PowerTerms(compute_s=math.nan, memory_s=1, kernel_s=0, host_s=0)
    t = PowerTerms.from_breakdown(
        {"compute": 0.5, "memory_bandwidth": 0.3, "overhead": 0.2}, kernel_share=0.25
    )
    assert (t.kernel_s, t.host_s) == pytest.approx((0.05, 0.15))
    assert sum(t.shares()) == pytest.approx(1.0)
    assert kernel_share(100, 1e-5, 1e-3) == pytest.approx(0.5)
    assert kernel_share(0, 0, 0) == 0.0


def test_above_its_draw_a_step_runs_at_full_clock() -> None:
    terms = PowerTerms(compute_s=0.01, memory_s=0.02, kernel_s=0.01, host_s=0.2)  # host-bound
    out = _sweep(terms, [150.0, 200.0, 250.0])
    assert (out["clock_fraction"] == 1.0).all()
    assert out["step_time_s"].to_numpy() == pytest.approx(terms.total_s)
    assert out["avg_power_w"].nunique() == 1


def test_compute_bound_steps_slow_more_than_memory_bound_ones() -> None:
    compute = PowerTerms(compute_s=0.9, memory_s=0.05, kernel_s=0.0, host_s=0.05)
    memory = PowerTerms(compute_s=0.05, memory_s=0.9, kernel_s=0.0, host_s=0.05)
    slow_c = _sweep(compute, [100.0, 250.0])["step_time_s"].to_numpy()
    slow_m = _sweep(memory, [100.0, 250.0])["step_time_s"].to_numpy()
    assert slow_c[0] / slow_c[1] > slow_m[0] / slow_m[1] > 1.0


@settings(max_examples=40, deadline=None)
@given(
    shares=st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4).filter(lambda s: sum(s) > 0.05),
    limits=st.lists(st.floats(60.0, 250.0), min_size=2, max_size=6, unique=True),
)
def test_a_lower_cap_never_speeds_up_nor_draws_more(
    shares: list[float], limits: list[float]
) -> None:
    terms = PowerTerms(
        compute_s=shares[0], memory_s=shares[1], kernel_s=shares[2], host_s=shares[3]
    )
    out = _sweep(terms, sorted(limits))
    step, power = out["step_time_s"].to_numpy(), out["avg_power_w"].to_numpy()
    assert np.all(np.diff(step) <= 1e-9 * step[:-1])  # limits ascending: time falls or holds
    assert np.all(np.diff(power) >= -1e-9 * power[:-1])
    assert np.all(power <= out["power_limit_w"].to_numpy() + 1e-6)  # never above the cap
    assert np.all((out["clock_fraction"] > 0) & (out["clock_fraction"] <= 1))


def test_a_measured_power_calibrates_the_reference_reading() -> None:
    terms = PowerTerms(compute_s=0.4, memory_s=0.3, kernel_s=0.05, host_s=0.05)
    out = _sweep(terms, [150.0, 250.0], measured_power_w=170.0)
    assert out["avg_power_w"].iloc[-1] == pytest.approx(170.0, rel=1e-6)
    blind = _sweep(terms, [150.0, 250.0])
    assert blind["avg_power_w"].iloc[-1] != pytest.approx(170.0, rel=1e-3)


def test_a_reading_above_the_fitted_budget_is_reproduced_not_throttled() -> None:
    """TRUE's controller holds a 250 W board at 236 W; a board read at 245 W there keeps a
    smaller margin: the model reproduces the reading at full clock (it used to throttle the
    reading to 236 W and call the default limit's step throttled), and the lower limits
    budget more than the fitted margin gives a board without a reading."""
    terms = PowerTerms(compute_s=0.4, memory_s=0.3, kernel_s=0.05, host_s=0.05)
    out = _sweep(terms, [150.0, 200.0, 250.0], measured_power_w=245.0)
    top = out.iloc[-1]
    assert top["avg_power_w"] == pytest.approx(245.0, rel=1e-9)
    assert top["clock_fraction"] == 1.0 and not top["throttled"]
    assert top["step_time_s"] == pytest.approx(terms.total_s)
    assert np.all(out["avg_power_w"].to_numpy() <= out["power_limit_w"].to_numpy())
    within = _sweep(terms, [150.0, 200.0, 250.0], measured_power_w=230.0)  # under the budget
    assert within["avg_power_w"].iloc[-1] == pytest.approx(230.0, rel=1e-9)
    assert np.all(out["avg_power_w"].to_numpy()[:-1] > within["avg_power_w"].to_numpy()[:-1])
    # a reading a sensor's error above the limit is the board at its limit, unthrottled
    over = _sweep(terms, [250.0], measured_power_w=252.0)
    assert over["avg_power_w"].iloc[0] == pytest.approx(250.0) and not over["throttled"].iloc[0]


def test_the_fit_learns_one_margin_that_readings_do_not_lower() -> None:
    """The fit's objective keeps the global margin on every row (a reading lowers a row's
    margin only in prediction): a refit on the model's own draws is unchanged by it."""
    data = sweep_rows()
    model = PowerModel().fit(data)
    assert model.constants.cap_margin == pytest.approx(TRUE.cap_margin, abs=0.02)


def test_fit_recovers_the_constants_that_drew_the_data() -> None:
    data = sweep_rows()
    model = PowerModel().fit(data)
    assert model.train_mape_pct_["step_time_calibrated"] < 1.0
    assert model.train_mape_pct_["avg_power"] < 2.0
    assert set(model.gpu_factors_) == set(BOARDS)
    assert model.constants.voltage_floor == pytest.approx(TRUE.voltage_floor, abs=0.1)


def test_fit_does_not_mutate_and_predict_before_fit_raises() -> None:
    data = sweep_rows()
    before = data.copy()
    PowerModel().fit(data)
    pd.testing.assert_frame_equal(data, before)
    with pytest.raises(NotFittedError):
        PowerModel().predict(data)
    with pytest.raises(InvalidSpecError, match="lacks column"):
        PowerModel().fit(data.drop(columns=["avg_power_w"]))
    with pytest.raises(InvalidSpecError, match="must be > 0"):
        PowerModel().fit(data.assign(avg_power_w=-1.0))


def test_cross_validation_and_intervals_contain_one() -> None:
    data = sweep_rows(noise=0.03, seed=1)
    cv = cross_validated(data, "workload")
    assert sorted(cv["fold"].unique()) == sorted(WORKLOADS)
    assert len(cv) == len(data)
    table = interval_table(cv)
    for regime in ("measured_power", "predicted_power"):
        for quantity in ("step_time", "avg_power"):
            low, high = table[regime][quantity]
            assert 0 < low <= 1.0 <= high
    # each band is at the level whose band of the other folds covers 80% of each fold: at
    # least as wide as the nominal 10th/90th percentiles
    ref = (cv["power_limit_w"] == cv["reference_power_limit_w"]).to_numpy()
    ratio = (cv["avg_power_w"] / cv["pred_avg_power_w"]).to_numpy()
    level = calibrated_level(np.log(ratio), cv["fold"].astype(str).to_numpy())
    low, high = np.quantile(ratio, [1.0 - level, level])
    assert table["predicted_power"]["avg_power"] == (min(low, 1.0), max(high, 1.0))
    nominal = np.quantile(ratio, [0.1, 0.9])
    assert min(low, 1.0) <= min(nominal[0], 1.0) and max(high, 1.0) >= max(nominal[1], 1.0)
    assert ref.any()
    model = PowerModel().fit(data).with_intervals(table)
    assert model.interval("measured_power", "avg_power") == table["measured_power"]["avg_power"]
    assert model.interval("nope", "avg_power") is None
    with pytest.raises(InvalidSpecError, match="low <= 1 <= high"):
        model.with_intervals({"measured_power": {"avg_power": (1.2, 1.5)}})
    with pytest.raises(InvalidSpecError, match="unknown regime"):
        model.with_intervals({"bogus": {}})


def test_zeus_cost_and_the_optimal_limit() -> None:
    assert zeus_cost([2.0], [100.0], eta=1.0, max_power_w=250.0)[0] == pytest.approx(200.0)
    assert zeus_cost([2.0], [100.0], eta=0.0, max_power_w=250.0)[0] == pytest.approx(500.0)
    limits = [100.0, 150.0, 200.0, 250.0]
    # energy 110, 90, 90, 90: a tie above the draw goes to the lowest tied limit
    i = energy_optimal(limits, [1.1, 0.9, 0.9, 0.9], [100.0] * 4, eta=1.0, max_power_w=250.0)
    assert limits[i] == 150.0
    with pytest.raises(InvalidSpecError, match="eta"):
        zeus_cost([1.0], [1.0], eta=1.5, max_power_w=1.0)
    frame = pd.DataFrame(
        {
            "group": ["a"] * 4,
            "power_limit_w": limits,
            "max_power_limit_w": 250.0,
            "t": [2.0, 1.2, 1.0, 1.0],
            "p": [90.0, 140.0, 190.0, 230.0],
        }
    )
    assert optimal_limits(frame, "t", "p", eta=1.0)["a"] == 150.0  # 168 J (100 W: 180 J)
    assert optimal_limits(frame, "t", "p", eta=0.0)["a"] == 200.0  # fastest, lowest tie


def test_measurement_noise_pools_only_the_sweeps_the_cap_never_binds() -> None:
    limits = [100.0, 150.0, 200.0]
    # two uncapped sweeps (40 W at limits from 100 W) with log-energy deviations +-d and
    # (+d, 0, -d); a capped one (its draw follows the limit) whose spread must not count
    d = 0.05
    frame = pd.DataFrame(
        {
            "group": ["a"] * 3 + ["b"] * 3 + ["c"] * 3,
            "power_limit_w": limits * 3,
            "t": [*np.exp([d, -d, 0.0]), *np.exp([d, 0.0, -d]), 3.0, 2.0, 1.0],
            "p": [40.0] * 6 + [95.0, 140.0, 150.0],
        }
    )
    assert uncapped_sweeps(frame, "p").to_dict() == {"a": True, "b": True, "c": False}
    sigma, sweeps = measurement_noise(frame, "t", "p")
    assert sweeps == 2
    assert sigma == pytest.approx(math.sqrt(4 * d**2 / (6 - 2)))
    capped = frame[frame["group"] == "c"]
    assert math.isnan(measurement_noise(capped, "t", "p")[0])
    with pytest.raises(InvalidSpecError, match="sweeps"):
        measurement_noise(frame.drop(columns=["p"]), "t", "p")


def test_tied_optimal_limits_are_those_within_the_tolerance() -> None:
    frame = pd.DataFrame(
        {
            "group": ["a"] * 4,
            "power_limit_w": [100.0, 150.0, 200.0, 250.0],
            "max_power_limit_w": 250.0,
            "t": [1.0, 1.0, 1.0, 1.0],
            "p": [101.0, 100.0, 110.0, 103.0],
        }
    )
    tied = tied_optimal_limits(frame, "t", "p", eta=1.0, log_tolerance=math.log(1.02))
    np.testing.assert_array_equal(tied["a"], [100.0, 150.0])
    exact = tied_optimal_limits(frame, "t", "p", eta=1.0, log_tolerance=0.0)
    np.testing.assert_array_equal(exact["a"], [150.0])
    with pytest.raises(InvalidSpecError, match="log_tolerance"):
        tied_optimal_limits(frame, "t", "p", eta=1.0, log_tolerance=-1.0)


def test_power_limit_grid_and_board_facts() -> None:
    assert power_limit_grid(BOARD) == [100.0, 125.0, 150.0, 175.0, 200.0, 225.0, 250.0]
    no_min = BoardPower(name="X", max_power_limit_w=300.0)
    assert power_limit_grid(no_min, 50.0) == [150.0, 200.0, 250.0, 300.0]
    with pytest.raises(InvalidSpecError, match="min_power_limit_w"):
        BoardPower(name="X", max_power_limit_w=100.0, min_power_limit_w=150.0)


def test_a_power_interval_stays_between_the_idle_draw_and_the_limit() -> None:
    # 225 W x [0.55, 1.96] would reach 441 W under a 250 W limit
    low, high = power_interval(225.0, (0.55, 1.96), idle_w=35.0, limit_w=250.0)
    assert low == pytest.approx(123.75) and high == 250.0
    assert power_interval(60.0, (0.5, 1.5), idle_w=55.0, limit_w=400.0) == (55.0, 90.0)
    # the point itself always lies in it, even where the board facts disagree with it
    assert power_interval(30.0, (0.9, 1.1), idle_w=40.0, limit_w=25.0) == (30.0, 30.0)
    model = true_model()
    assert model.idle_power_w(BOARD) == pytest.approx(model.constants.static_fraction * 250.0)
    idle = BoardPower(name="G1", max_power_limit_w=250.0, idle_power_w=30.0)
    assert model.idle_power_w(idle) == 30.0


def test_json_round_trip_keeps_intervals_and_predictions() -> None:
    data = sweep_rows(noise=0.02)
    model = PowerModel().fit(data).with_intervals(interval_table(cross_validated(data, "gpu")))
    back = PowerModel.from_dict(model.to_dict())
    frame = data.assign(reference_step_time_s=0.5)
    for key in ("step_time_s", "avg_power_w"):
        np.testing.assert_allclose(back.predict(frame)[key], model.predict(frame)[key])
    assert back.intervals_ == model.intervals_

"""The statistical-efficiency model: the gradient-noise-scale law through seeds' runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.plan.efficiency import epochs_needed
from gpucast.predict.convergence import (
    ConvergenceCurve,
    ConvergenceModel,
    noise_scale_efficiency,
    samples_from_progress,
)


def _runs(bn: float = 500.0, seeds: int = 5, noise: float = 0.03, seed: int = 1):
    rng = np.random.default_rng(seed)
    batch = np.repeat([32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0], seeds)
    value = 10.0 * (1.0 + batch / bn) * np.exp(rng.normal(0.0, noise, batch.size))
    return batch, value


def test_fit_recovers_the_noise_scale_of_the_law() -> None:
    batch, value = _runs(bn=500.0)
    model = ConvergenceModel().fit(batch, value)
    assert model.noise_batch == pytest.approx(500.0, rel=0.15)
    assert model.curve.min_samples == pytest.approx(10.0, rel=0.05)


def test_prediction_at_a_measured_batch_is_the_seeds_mean() -> None:
    batch, value = _runs()
    model = ConvergenceModel().fit(batch, value)
    for b in (32.0, 256.0, 2048.0):
        assert model.predict([b])[0] == pytest.approx(value[batch == b].mean(), rel=1e-9)


def test_interval_is_the_seed_spread_at_a_knot_and_wider_away_from_it() -> None:
    batch, value = _runs(noise=0.05)
    model = ConvergenceModel(confidence=0.8).fit(batch, value)
    curve = model.curve
    at_knot = float(curve.sigma_log([256.0])[0])
    between = float(curve.sigma_log([362.0])[0])
    beyond = float(curve.sigma_log([8192.0])[0])
    seeds = np.log(value[batch == 256.0])
    assert at_knot == pytest.approx(max(np.std(seeds, ddof=1), 0.02), rel=1e-9)
    assert between >= at_knot * 0.5
    assert beyond > float(curve.sigma_log([2048.0])[0])
    lo, hi = model.predict_interval([362.0, 8192.0])
    mid = model.predict([362.0, 8192.0])
    assert np.all(lo < mid) and np.all(mid < hi)


def test_unreached_runs_are_dropped_and_batches_without_any_reported() -> None:
    batch, value = _runs()
    value[batch == 2048.0] = np.nan
    value[0] = np.nan
    model = ConvergenceModel().fit(batch, value)
    assert model.curve.unreached_batch == (2048.0,)
    assert model.curve.knot_batch[-1] == 1024.0
    with pytest.raises(InvalidSpecError, match="no run reached"):
        ConvergenceModel().fit(batch, np.full(batch.size, np.nan))


def test_flat_data_gives_a_huge_noise_batch_and_no_penalty() -> None:
    batch = np.repeat([8.0, 16.0, 32.0, 64.0], 4)
    model = ConvergenceModel().fit(batch, np.full(batch.size, 3.0))
    assert model.noise_batch > 64.0 * 100
    assert model.predict([128.0])[0] == pytest.approx(3.0, rel=0.02)


def test_from_reference_is_the_planners_old_rule() -> None:
    curve = ConvergenceCurve.from_reference(
        samples_at_reference=90.0, reference_batch=256.0, noise_batch=32768.0
    )
    b = np.array([64.0, 256.0, 3200.0, 65536.0])
    old = epochs_needed(b, epochs_at_reference=90.0, reference_batch=256.0, critical_batch=32768.0)
    np.testing.assert_allclose(curve.samples(b), old, rtol=1e-12)
    assert curve.samples([3200.0])[0] / 90.0 == pytest.approx(1.089, abs=1e-3)  # the +9%
    np.testing.assert_allclose(curve.efficiency(b), 90.0 / old, rtol=1e-12)


def test_noise_scale_efficiency_is_pollux_formula() -> None:
    eff = noise_scale_efficiency(1000.0, [128.0, 1128.0, 1e9], 128.0)
    np.testing.assert_allclose(eff[:2], [1.0, 1128.0 / 2128.0])
    assert eff[2] < 1e-5
    # integrated over progress: constant noise scale = the closed form
    got = samples_from_progress([100.0, 100.0], [1000.0, 1000.0], 1128.0, 128.0)
    assert got == pytest.approx(200.0 * 2128.0 / 1128.0)


def test_bad_inputs_raise_one_clear_error() -> None:
    with pytest.raises(InvalidSpecError, match="batch"):
        ConvergenceModel().fit([0.0, 64.0], [1.0, 2.0])
    with pytest.raises(InvalidSpecError, match="same"):
        ConvergenceModel().fit([32.0, 64.0], [1.0])
    with pytest.raises(InvalidSpecError, match="> 0"):
        ConvergenceModel().fit([32.0, 64.0], [-1.0, 2.0])
    with pytest.raises(InvalidSpecError, match="confidence"):
        ConvergenceModel(confidence=1.5).fit([32.0, 64.0], [1.0, 2.0])
    with pytest.raises(InvalidSpecError):
        ConvergenceCurve.from_reference(
            samples_at_reference=math.nan, reference_batch=256.0, noise_batch=1.0
        )
    with pytest.raises(InvalidInputError):
        ConvergenceCurve.from_dict({"min_samples": 1.0})


def test_curve_round_trips_and_scales() -> None:
    model = ConvergenceModel().fit(*_runs())
    curve = model.curve
    again = ConvergenceCurve.from_dict(curve.to_dict())
    assert again == curve
    scaled = curve.scaled(50_000.0, "samples")
    np.testing.assert_allclose(scaled.samples([100.0]), curve.samples([100.0]) * 50_000.0)
    assert scaled.unit == "samples"


def test_the_batch_note_never_prints_minus_zero() -> None:
    from gpucast.plan.efficiency import at_batch_note
    from gpucast.predict.convergence import ConvergenceCurve

    # QA 39 Y #10: "35.0 epochs, -0.0% over 35.0 at 1,632" for a change of -0.001%
    curve = ConvergenceCurve.from_reference(
        samples_at_reference=35.0 * 1000, reference_batch=1632.0, noise_batch=1e9
    )
    note = at_batch_note(curve, 1536.0, 1000.0)
    assert "+0.0% over 35.0 at 1,632" in note and "-0.0%" not in note
    larger = at_batch_note(curve, 1e7, 1000.0)  # a real change keeps its sign
    assert "+1.0% over" in larger

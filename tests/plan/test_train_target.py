"""The planner's amount of work as a convergence curve: samples to target at every global batch."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from plan_factories import context, request

from gpucast.plan.train import plan_training
from gpucast.predict.convergence import ConvergenceModel


def _fitted_curve(spread: float):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    batch = np.repeat([64.0, 256.0, 1024.0, 4096.0], 6)
    value = 2.0 * 200_000 * (1 + batch / 2000.0) * np.exp(rng.normal(0, spread, batch.size))
    return ConvergenceModel().fit(batch, value).curve


def test_candidates_need_the_samples_the_curve_gives() -> None:
    curve = _fitted_curve(0.05)
    plan = plan_training(request(allow_spot=False), replace(context(), work_curve=curve))
    assert plan.critical_batch == pytest.approx(curve.noise_batch)
    for c in plan.candidates:
        expected = float(curve.samples([c.global_batch])[0]) / 200_000
        assert c.epochs == pytest.approx(expected, rel=1e-9)
    note = plan.assumption("statistical efficiency")
    assert note is not None
    best = plan.best
    assert best is not None
    assert f"at the recommended global batch {best.global_batch:,}" in note.value
    assert "for one run, 80%" in note.value


def test_a_spread_in_samples_to_target_widens_the_time_interval() -> None:
    req = request(allow_spot=False, global_batch=1024)
    tight = plan_training(req, replace(context(), work_curve=_fitted_curve(0.001)))
    wide = plan_training(req, replace(context(), work_curve=_fitted_curve(0.2)))
    a, b = tight.candidates[0], wide.candidates[0]
    assert (a.gpus, a.instance_type) == (b.gpus, b.instance_type)
    assert b.time_upper_s / b.time_s > a.time_upper_s / a.time_s
    assert b.time_lower_s / b.time_s < a.time_lower_s / a.time_s


def test_default_work_says_what_the_rescaling_costs_at_the_chosen_batch() -> None:
    plan = plan_training(request(allow_spot=False), context())
    note = plan.assumption("statistical efficiency")
    assert note is not None and plan.best is not None
    gb = plan.best.global_batch
    crit, ref = plan.critical_batch, plan.reference_batch
    change = (1 + gb / crit) / (1 + ref / crit) - 1
    assert f"at the recommended global batch {gb:,}" in note.value
    assert f"{change:+.1%} over 2.0 at {ref:,}" in note.value


def test_steps_are_said_as_steps_at_the_chosen_batch() -> None:
    """--steps count steps of the reference batch: a plan at another global batch runs
    another number of steps, and says so in steps, not only in samples (QA 41 QT, issue #22)."""
    req = request(allow_spot=False, epochs=None, dataset_size=None, steps=1000, global_batch=128)
    plan = plan_training(req, context())
    best = plan.best
    assert best is not None and best.global_batch == 128
    assert plan.reference_batch == 256
    note = plan.assumption("statistical efficiency")
    assert note is not None
    assert f": {best.steps:,} steps of 128 samples, for --steps 1,000 of 256" in note.value
    assert best.steps > 1000  # 1,000 steps of 256 are more than 1,000 of 128

"""Crossbow in plans: learners per GPU priced on the recommended plan's hardware."""

from __future__ import annotations

from dataclasses import replace

import pytest
from plan_factories import context, request

from gpucast.domain.plan import LearnerOption, TrainPlan
from gpucast.plan.learners import CONSIDER_FROM, learners_why
from gpucast.plan.train import plan_training
from gpucast.predict.convergence import ConvergenceCurve


def _plan(noise_batch: float, **changes: object) -> TrainPlan:
    curve = ConvergenceCurve.from_reference(
        samples_at_reference=400_000.0, reference_batch=256.0, noise_batch=noise_batch
    )
    changes = {"batch_sizes": (256,), **changes}
    req = request(allow_spot=False, strategies=("ddp",), **changes)
    return plan_training(req, replace(context(), work_curve=curve))


def test_a_large_critical_batch_is_not_considered() -> None:
    plan = _plan(1e7)
    assert plan.learner_choice == ()
    assert plan.learners_why.startswith("Crossbow not considered: global batch")
    assert f"{CONSIDER_FROM:.0%} of the critical batch 10,000,000" in plan.learners_why


def test_a_small_critical_batch_prices_each_learner_count() -> None:
    plan = _plan(16.0, batch_sizes=(64,))
    best = plan.best
    assert best is not None
    options = plan.learner_choice
    assert [o.learners for o in options] == [2, 4, 8]
    for o in options:
        assert o.batch_per_learner * o.learners == 64
        # the low end (small-batch efficiency) can only be faster than the high end
        assert o.time_s_low < o.time_s_high
        assert o.samples_per_s > 0 and o.memory_bytes > 0
    # more replicas, more memory
    assert options[0].memory_bytes < options[1].memory_bytes < options[2].memory_bytes
    assert plan.learners_why.startswith("Crossbow ")
    assert "time to target x" in plan.learners_why and "critical batch 16" in plan.learners_why
    # round trip through the saved plan
    again = TrainPlan.from_dict(plan.to_dict())
    assert again.learner_choice == options and again.learners_why == plan.learners_why


def test_the_verdict_follows_the_range() -> None:
    def opt(low: float, high: float, reason: str = "") -> LearnerOption:
        return LearnerOption(
            learners=4, batch_per_learner=8, samples_per_s=100.0, time_s_low=low,
            time_s_high=high, memory_bytes=1e9, reason=reason,
        )  # fmt: skip

    assert "worth trying" in learners_why((opt(80.0, 90.0),), 100.0, 64.0)
    assert "only if SMA keeps" in learners_why((opt(80.0, 120.0),), 100.0, 64.0)
    assert "slower either way" in learners_why((opt(110.0, 120.0),), 100.0, 64.0)
    text = learners_why((opt(80.0, 90.0, "4 model replicas need 9.0 GiB"),), 100.0, 64.0)
    assert text == "Crossbow does not fit: 4 model replicas need 9.0 GiB"
    assert "x0.80..x0.90" in learners_why((opt(80.0, 90.0),), 100.0, 64.0)
    # as the printed ratios read (QA 41 QT: x0.95..x1.00, 1e-7 under the plan, "worth trying")
    text = learners_why((opt(95.0, 100.0 - 1e-5),), 100.0, 64.0)
    assert "x0.95..x1.00" in text and "faster only if SMA keeps" in text
    assert "no faster either way" in learners_why((opt(100.0 - 1e-5, 100.0),), 100.0, 64.0)


def test_ps_plans_are_not_priced() -> None:
    curve = ConvergenceCurve.from_reference(
        samples_at_reference=400_000.0, reference_batch=256.0, noise_batch=64.0
    )
    req = request(allow_spot=False, batch_sizes=(256,), strategies=("ps",))
    plan = plan_training(req, replace(context(), work_curve=curve))
    if plan.best is None:
        pytest.skip("no PS plan in the test catalog")
    assert plan.learner_choice == ()
    assert "data-parallel plans of one GPU type" in plan.learners_why


def test_the_critical_batch_below_one_sample_is_printed_not_rounded_to_zero() -> None:
    # QA 39 Y #12: "at critical batch 0" for a B_noise of 0.001
    from gpucast.domain.convergence import noise_batch_text

    assert [noise_batch_text(v) for v in (0.001, 0.5, 1.0, 32768.0)] == [
        "0.00100", "0.500", "1", "32,768"
    ]  # fmt: skip

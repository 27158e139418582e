"""Goodput (throughput x statistical efficiency) and the planned global batch."""

from __future__ import annotations

from dataclasses import replace

import pytest
from plan_factories import context, request

from gpucast.domain.plan import GOODPUT_BATCHES, TrainPlan
from gpucast.plan.train import plan_training
from gpucast.predict.convergence import ConvergenceCurve


def _ctx(noise_batch: float):  # type: ignore[no-untyped-def]
    curve = ConvergenceCurve.from_reference(
        samples_at_reference=400_000.0, reference_batch=256.0, noise_batch=noise_batch
    )
    return replace(context(), work_curve=curve)


def test_goodput_objective_picks_the_most_goodput_and_explains_the_batch() -> None:
    plan = plan_training(request(objective="goodput", allow_spot=False), _ctx(2000.0))
    best = plan.best
    assert best is not None and best.goodput_samples_per_s is not None
    assert all(
        (c.goodput_samples_per_s or 0.0) <= best.goodput_samples_per_s + 1e-9
        for c in plan.candidates
    )
    for c in plan.candidates:
        assert c.statistical_efficiency is not None and c.goodput_samples_per_s is not None
        assert (
            c.goodput_samples_per_s
            == pytest.approx(c.global_batch / c.step_time_s * c.statistical_efficiency, rel=1e-9)
            or c.strategy == "ps"
        )
    batches = [o.global_batch for o in plan.batch_choice]
    assert batches == sorted(batches) and len(batches) > 3
    (chosen,) = [o for o in plan.batch_choice if o.chosen]
    assert chosen.global_batch == best.global_batch
    feasible = [o for o in plan.batch_choice if not o.reason]
    assert chosen.goodput_samples_per_s == max(o.goodput_samples_per_s for o in feasible)
    assert f"global batch {best.global_batch:,}" in plan.batch_why
    assert "goodput" in plan.batch_why
    per_worker = {o.per_worker_batch for o in plan.batch_choice}
    assert per_worker <= set(GOODPUT_BATCHES) and min(per_worker) < 32  # widened search


def test_a_small_critical_batch_pulls_the_planned_batch_down() -> None:
    req = request(objective="goodput", allow_spot=False, gpus=("FAST",), max_gpus=8)
    loose = plan_training(req, _ctx(1e9))
    tight = plan_training(req, _ctx(64.0))
    assert loose.best is not None and tight.best is not None
    assert (loose.best.gpus, loose.best.instance_type) == (
        tight.best.gpus,
        tight.best.instance_type,
    )

    def on_8(plan: TrainPlan) -> int:
        # the goodput-optimal batch on the same hardware: 8 GPUs, DDP
        options = [o for o in plan.batch_choice if not o.reason]
        return max(options, key=lambda o: o.goodput_samples_per_s).global_batch

    assert on_8(tight) < on_8(loose)
    assert tight.best.statistical_efficiency is not None
    assert loose.best.statistical_efficiency == pytest.approx(1.0, abs=1e-3)


def test_batch_choice_round_trips_and_other_objectives_keep_their_batches() -> None:
    plan = plan_training(request(allow_spot=False), _ctx(2000.0))
    assert plan.batch_choice and plan.batch_why
    assert {o.per_worker_batch for o in plan.batch_choice} <= {32, 64, 128, 256}
    again = TrainPlan.from_dict(plan.to_dict())
    assert again.batch_choice == plan.batch_choice and again.batch_why == plan.batch_why
    assert plan.picks["goodput"] is not None


def test_fastest_searches_the_wide_batch_grid_and_cheapest_says_what_it_searched() -> None:
    """QA 34 #2: fastest on 32-256 missed faster plans at 512+ per GPU (goodput found them):
    it now searches the goodput grid; cheapest keeps 32-256 and names it in batch_why."""
    fastest = plan_training(request(objective="fastest", allow_spot=False), _ctx(2000.0))
    narrow = plan_training(
        request(objective="fastest", allow_spot=False, batch_sizes=(32, 64, 128, 256)),
        _ctx(2000.0),
    )
    assert fastest.best is not None and narrow.best is not None
    per_worker = {o.per_worker_batch for o in fastest.batch_choice}
    assert per_worker <= set(GOODPUT_BATCHES) and max(per_worker) > 256
    assert fastest.best.time_s <= narrow.best.time_s
    assert "per-worker batches 8-1,024 searched" in fastest.batch_why
    cheapest = plan_training(request(objective="cheapest", allow_spot=False), _ctx(2000.0))
    assert {o.per_worker_batch for o in cheapest.batch_choice} <= {32, 64, 128, 256}
    assert "per-worker batches 32-256 searched" in cheapest.batch_why
    # QA 41 QT: the default grid given explicitly was widened (compared by value) to 8-1,024
    assert {o.per_worker_batch for o in narrow.batch_choice} <= {32, 64, 128, 256}
    assert "per-worker batches 32-256 searched" in narrow.batch_why


def test_an_efficiency_above_one_says_what_it_is_relative_to() -> None:
    """QA 35 E #26: "statistical efficiency 1.52" read as Pollux's (<= 1, against the smallest
    batch); it is relative to the reference batch, and above 1 needs fewer samples than it."""
    from gpucast.domain.plan import BatchOption
    from gpucast.plan.goodput import batch_why

    def why(eff: float) -> str:
        one = BatchOption(
            global_batch=256, per_worker_batch=256, samples_per_s=3223.0,
            statistical_efficiency=eff, goodput_samples_per_s=3223.0 * eff, time_s=1.0,
            cost_usd=1.0, chosen=True,
        )  # fmt: skip
        return batch_why((one,), "cost")

    assert "statistical efficiency 1.52 (vs the reference batch; above 1: fewer samples to " in (
        why(1.52)
    )
    assert "statistical efficiency 0.88 (vs the reference batch) = goodput" in why(0.88)
    assert "statistical efficiency 1.00 (vs the reference batch) = goodput" in why(1.001)

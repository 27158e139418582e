"""Evaluations inside the timed run (an MLPerf target): priced per row, in the training time."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from plan_factories import context, request

from gpucast.domain.evaluation import EvaluationCost, EvaluationSchedule
from gpucast.plan.space import PS
from gpucast.plan.train import plan_training, search
from gpucast.predict.convergence import ConvergenceCurve

RULE = EvaluationSchedule(benchmark="test", every_samples=50_000, eval_samples=5_000)


def _ctx(evaluation: EvaluationCost | None):  # type: ignore[no-untyped-def]
    curve = ConvergenceCurve.from_reference(
        samples_at_reference=400_000.0, reference_batch=256.0, noise_batch=4096.0
    )
    return replace(context(), work_curve=curve, evaluation=evaluation)


@pytest.mark.parametrize("mixed", [False, True])
def test_each_row_adds_its_evaluations_to_the_training_time(mixed: bool) -> None:
    cost = EvaluationCost(schedule=RULE, latency_s=2.0)
    req = request(allow_spot=False, allow_mixed=mixed)
    plain = search(req, _ctx(None)).evaluation
    res = search(req, _ctx(cost))
    ev = res.evaluation
    assert np.array_equal(ev.samples_needed, plain.samples_needed)
    assert np.all(plain.eval_s == 0.0)
    ok = np.isfinite(ev.train_s) & (ev.samples_per_s > 0)
    assert ok.sum() > 10
    # the run holds samples / 50,000 evaluations (at least one), each 2 s plus a forward
    # pass over 5,000 samples spread over the data-parallel GPUs at a third of a step's work
    # (an asynchronous PS job evaluates on all its workers, each at its own batch)
    batch = np.where(res.space.strategy != PS, ev.global_batch, ev.workers * ev.global_batch)
    runs = np.maximum(1.0, ev.samples_needed / 50_000)
    expect = runs * (2.0 + 5_000 / batch / 3 * ev.compute_s)
    assert ev.eval_s[ok] == pytest.approx(expect[ok], rel=1e-9)
    assert ev.train_s[ok] == pytest.approx(plain.train_s[ok] + ev.eval_s[ok], rel=1e-9)
    assert ev.time_s[ok] - ev.train_s[ok] == pytest.approx(plain.time_s[ok] - plain.train_s[ok])
    if mixed:
        assert res.space.mixed.any()


def test_costly_evaluations_move_the_plan_and_show_in_its_breakdown() -> None:
    req = request(allow_spot=False)
    cheap = plan_training(req, _ctx(None))
    costly = plan_training(req, _ctx(EvaluationCost(schedule=RULE, latency_s=60.0)))
    assert cheap.best is not None and costly.best is not None
    assert cheap.best.breakdown_s["evaluation_s"] == 0.0
    b = costly.best.breakdown_s
    assert b["evaluation_s"] >= 8 * 60.0  # >= 400,000 / 50,000 evaluations of 60 s
    assert costly.best.time_s > cheap.best.time_s
    assert costly.best.time_s == pytest.approx(b["startup_s"] + b["train_s"])


def test_an_evaluation_cost_rejects_a_negative_latency() -> None:
    from gpucast.domain.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError, match="eval_latency_s"):
        EvaluationCost(schedule=RULE, latency_s=-1.0)


def test_a_benchmark_scored_outside_the_timed_run_adds_no_time_and_says_so() -> None:
    from gpucast.domain.convergence import parse_target
    from gpucast.inputs.convergence import target_evaluations

    cost, note = target_evaluations(parse_target("mlperf:stable_diffusion"))
    assert cost is None and note is not None
    assert "outside the timed run" in note.value and "mlperf_eval.csv" in note.source
    timed, timed_note = target_evaluations(parse_target("mlperf:bert"))
    assert timed is not None and timed_note is not None and timed.schedule.timed

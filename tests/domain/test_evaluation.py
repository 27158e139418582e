"""Evaluations inside a timed run: how many a run holds by its benchmark's rule."""

from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.evaluation import (
    EVAL_FORWARD_SHARE,
    LORA_FORWARD_SHARE,
    EvaluationCost,
    EvaluationSchedule,
)

BERT = EvaluationSchedule(
    benchmark="bert",
    every_samples=150_000,
    every_samples_per_batch=11.5115,
    every_round=25_000,
    eval_samples=10_000,
)


def test_bert_interval_follows_the_rule_and_nvidias_config() -> None:
    # FLOOR(0.05 x (230.23 x 4,608 + 3,000,000), 25,000) = 200,000 (NVIDIA's EVAL_ITER_SAMPLES)
    assert BERT.interval_samples(4608) == 200_000
    assert BERT.interval_samples(13_888) == 300_000
    assert BERT.evaluations(4_850_000, 13_888) == pytest.approx(4_850_000 / 300_000)


def test_evaluations_start_late_and_a_run_holds_at_least_one() -> None:
    unet = EvaluationSchedule(
        benchmark="unet3d", every_samples=3360, start_samples=168_000, eval_samples=42
    )
    assert unet.evaluations(420_000, 84) == pytest.approx((420_000 - 168_000) / 3360)
    assert unet.evaluations(100_000, 84) == 1.0  # the target found before the first interval
    resnet = EvaluationSchedule(benchmark="resnet", every_samples=5_124_668, eval_samples=50_000)
    assert resnet.evaluations(37 * 1_281_167, 3200) == pytest.approx(9.25)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("every_samples", 0.0),
        ("eval_samples", float("nan")),
        ("start_samples", -1.0),
        ("skip_evaluations_per_batch", -0.1),
    ],
)
def test_bad_schedules_name_the_field(field: str, value: float) -> None:
    fields = {"benchmark": "x", "every_samples": 1.0, "eval_samples": 1.0, field: value}
    with pytest.raises(InvalidSpecError, match=field):
        EvaluationSchedule(**fields)  # type: ignore[arg-type]


def test_bad_run_sizes_are_refused() -> None:
    with pytest.raises(InvalidSpecError, match="samples"):
        BERT.evaluations(0.0, 256)
    with pytest.raises(InvalidSpecError, match="global_batch"):
        BERT.interval_samples(-1.0)


def test_skipped_evaluations_grow_with_the_batch_and_lora_evaluates_at_half_a_step() -> None:
    # Llama-2-70B LoRA: every 384 sequences on 173, the first FLOOR(0.125 x batch + 2) skipped
    lora = EvaluationSchedule(
        benchmark="llama2_70b_lora",
        every_samples=384,
        eval_samples=173,
        skip_evaluations=2,
        skip_evaluations_per_batch=0.125,
    )
    runs = lora.evaluations([3187.2, 11289.6], [8, 128])
    assert runs == pytest.approx([3187.2 / 384 - 3, 11289.6 / 384 - 18])
    assert "FLOOR(2 + 0.125 x batch) skipped" in EvaluationCost(schedule=lora, latency_s=0).text()
    cost = EvaluationCost(schedule=lora, latency_s=0.5)
    full = cost.seconds(3187.2, 8, 4.0)
    half = cost.seconds(3187.2, 8, 4.0, forward_share=LORA_FORWARD_SHARE)
    forward = 173 / 8 * 4.0  # the validation set's share of a step's work
    assert full == pytest.approx(runs[0] * (0.5 + forward * EVAL_FORWARD_SHARE))
    assert half == pytest.approx(runs[0] * (0.5 + forward / 2))
    with pytest.raises(InvalidSpecError, match="forward_share"):
        cost.seconds(3187.2, 8, 4.0, forward_share=0.0)


def test_an_evaluation_split_over_replicas_costs_whole_rounds() -> None:
    # 173 sequences over 128 data-parallel replicas of one sequence each: two rounds of
    # forwards (the last one partly idle), not 1.35; spread evenly without the split
    lora = EvaluationSchedule(benchmark="llama2_70b_lora", every_samples=384, eval_samples=173)
    cost = EvaluationCost(schedule=lora, latency_s=0.0)
    even = cost.seconds(11289.6, 128, 0.6, forward_share=LORA_FORWARD_SHARE)
    split = cost.seconds(11289.6, 128, 0.6, forward_share=LORA_FORWARD_SHARE, round_samples=128)
    assert split / even == pytest.approx(256 / 173)
    # a set that fills its rounds exactly costs the same either way
    assert cost.seconds(11289.6, 8, 0.6, round_samples=173) == pytest.approx(
        cost.seconds(11289.6, 8, 0.6)
    )
    with pytest.raises(InvalidSpecError, match="round_samples"):
        cost.seconds(11289.6, 128, 0.6, round_samples=0)

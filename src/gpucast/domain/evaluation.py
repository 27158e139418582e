"""Evaluations inside a timed training run (MLPerf's time to train includes them).

MLPerf Training times a run from ``run_start`` to ``run_stop``; the quality evaluations the
rules require sit inside that window. Their forward passes are a small share of the work,
but each also costs a fixed latency (gathering the metric from every GPU, the host-side
scoring, the barrier), which does not shrink with the GPU count: on thousands of GPUs a run
of seconds holds tens of evaluations. :class:`EvaluationSchedule` holds one benchmark's rule
(how often, on how many samples); :meth:`EvaluationSchedule.evaluations` counts a run's.
:class:`EvaluationCost` prices them: a fixed latency each plus their forward passes (the
same two terms the step-time model fits on MLPerf's rows), so a plan to an MLPerf target
times the run as MLPerf does.

Pure: numbers (or arrays of them) in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError

FloatArray = npt.NDArray[np.float64]

#: An evaluated sample's compute and memory time relative to a trained one's: the forward
#: pass alone (about 1/3 of forward + backward, whose backward does twice the forward's FLOPs)
EVAL_FORWARD_SHARE = 1.0 / 3.0
#: the same for LoRA fine-tuning: the backward computes the activations' gradients only (the
#: frozen weights get none), as many FLOPs as the forward, so the forward is half the work
LORA_FORWARD_SHARE = 1.0 / 2.0


def _positive(name: str, value: npt.ArrayLike) -> FloatArray:
    v = np.asarray(value, dtype=np.float64)
    if not (np.isfinite(v).all() and (v > 0).all()):
        raise InvalidSpecError(name, "must be > 0", got=value)
    return v


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationSchedule:
    """How often a benchmark evaluates and on how many samples.

    The interval in training samples is ``every_samples + every_samples_per_batch x global
    batch``, rounded down to a multiple of ``every_round`` where that is > 0 (BERT's rule);
    evaluations start after ``start_samples``, and the first ``FLOOR(skip_evaluations +
    skip_evaluations_per_batch x global batch)`` due are skipped (Llama-2-70B LoRA's rule:
    FLOOR(0.125 x batch + 2)). ``timed`` False: the rules have checkpoints scored offline,
    outside the timed run (Stable Diffusion), so they add no time."""

    benchmark: str
    every_samples: float
    eval_samples: float
    every_samples_per_batch: float = 0.0
    every_round: float = 0.0
    start_samples: float = 0.0
    skip_evaluations: float = 0.0
    skip_evaluations_per_batch: float = 0.0
    timed: bool = True
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("every_samples", "eval_samples"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise InvalidSpecError(name, "must be > 0", got=v)
        for name in (
            "every_samples_per_batch",
            "every_round",
            "start_samples",
            "skip_evaluations",
            "skip_evaluations_per_batch",
        ):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InvalidSpecError(name, "must be >= 0", got=v)

    def interval_samples(self, global_batch: npt.ArrayLike) -> FloatArray:
        """Training samples between two evaluations at ``global_batch`` (element-wise)."""
        every = self.every_samples + self.every_samples_per_batch * _positive(
            "global_batch", global_batch
        )
        if self.every_round > 0:
            every = np.maximum(
                self.every_round, np.floor(every / self.every_round) * self.every_round
            )
        return np.asarray(every, dtype=np.float64)

    def evaluations(self, samples: npt.ArrayLike, global_batch: npt.ArrayLike) -> FloatArray:
        """Evaluations in a run that trains ``samples`` at ``global_batch`` (at least one: the
        one that finds the target; fractional, as ``samples`` is a mean; element-wise)."""
        after = np.maximum(_positive("samples", samples) - self.start_samples, 0.0)
        skipped = np.floor(
            self.skip_evaluations
            + self.skip_evaluations_per_batch * np.asarray(global_batch, dtype=np.float64)
        )
        return np.asarray(
            np.maximum(1.0, after / self.interval_samples(global_batch) - skipped),
            dtype=np.float64,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationCost:
    """What a run's evaluations add to its time: ``latency_s`` each (the metric gathered from
    every GPU, scoring, barriers) plus their forward passes over ``eval_samples``, spread over
    the data-parallel GPUs like a training batch (each sample :data:`EVAL_FORWARD_SHARE` of a
    trained one's work)."""

    schedule: EvaluationSchedule
    latency_s: float
    #: where the latency comes from (the fitted step-time model)
    source: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0):
            raise InvalidSpecError("eval_latency_s", "must be >= 0", got=self.latency_s)

    def seconds(
        self,
        samples: npt.ArrayLike,
        global_batch: npt.ArrayLike,
        step_work_s: npt.ArrayLike,
        *,
        forward_share: float = EVAL_FORWARD_SHARE,
        round_samples: npt.ArrayLike | None = None,
    ) -> FloatArray:
        """Seconds of evaluation in a run of ``samples`` at ``global_batch`` whose training
        step computes for ``step_work_s`` (element-wise). ``forward_share``: an evaluated
        sample's work relative to a trained one's (1/2 for LoRA, whose backward skips the
        frozen weights' gradients: :data:`LORA_FORWARD_SHARE`). ``round_samples``: the
        samples one round of forwards covers (data-parallel replicas x micro-batch) where the
        evaluation set is split that way: whole samples per replica, so the last round costs a
        full one (173 sequences over 128 replicas are two rounds, not 1.35); None: spread
        evenly, as a CNN's small per-GPU remainder is."""
        if not (math.isfinite(forward_share) and 0 < forward_share <= 1):
            raise InvalidSpecError("forward_share", "must be in (0, 1]", got=forward_share)
        runs = self.schedule.evaluations(samples, global_batch)
        batch = np.asarray(global_batch, dtype=np.float64)
        evaluated = np.asarray(self.schedule.eval_samples, dtype=np.float64)
        if round_samples is not None:
            unit = _positive("round_samples", round_samples)
            evaluated = np.ceil(evaluated / unit - 1e-9) * unit
        forward = evaluated / batch * forward_share
        return np.asarray(
            runs * (self.latency_s + forward * np.asarray(step_work_s, dtype=np.float64)),
            dtype=np.float64,
        )

    def text(self) -> str:
        """The rule and its price, for the plan's assumptions."""
        s = self.schedule
        every = (
            f"every {s.every_samples:,.0f} samples"
            if s.every_samples_per_batch == 0
            else f"every FLOOR({s.every_samples:,.0f} + {s.every_samples_per_batch:g} x batch, "
            f"{s.every_round:,.0f}) samples"
        )
        start = f" from sample {s.start_samples:,.0f}" if s.start_samples > 0 else ""
        if s.skip_evaluations or s.skip_evaluations_per_batch:
            start += (
                f", the first FLOOR({s.skip_evaluations:g} + {s.skip_evaluations_per_batch:g}"
                " x batch) skipped"
            )
        return (
            f"{s.benchmark}: {every}{start} on {s.eval_samples:,.0f} samples, "
            f"{self.latency_s:.3g} s each plus the forward passes"
        )

"""Evaluations inside a timed training run (MLPerf's time to train includes them).

MLPerf Training times a run from ``run_start`` to ``run_stop``; the quality evaluations the
rules require sit inside that window. Their forward passes are a small share of the work,
but each also costs a fixed latency (gathering the metric from every GPU, the host-side
scoring, the barrier), which does not shrink with the GPU count: on thousands of GPUs a run
of seconds holds tens of evaluations. :class:`EvaluationSchedule` holds one benchmark's rule
(how often, on how many samples); :meth:`EvaluationSchedule.evaluations` counts a run's.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucast.domain.errors import InvalidSpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationSchedule:
    """How often a benchmark evaluates and on how many samples.

    The interval in training samples is ``every_samples + every_samples_per_batch x global
    batch``, rounded down to a multiple of ``every_round`` where that is > 0 (BERT's rule);
    evaluations start after ``start_samples``."""

    benchmark: str
    every_samples: float
    eval_samples: float
    every_samples_per_batch: float = 0.0
    every_round: float = 0.0
    start_samples: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("every_samples", "eval_samples"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise InvalidSpecError(name, "must be > 0", got=v)
        for name in ("every_samples_per_batch", "every_round", "start_samples"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InvalidSpecError(name, "must be >= 0", got=v)

    def interval_samples(self, global_batch: float) -> float:
        """Training samples between two evaluations at ``global_batch``."""
        if not (math.isfinite(global_batch) and global_batch > 0):
            raise InvalidSpecError("global_batch", "must be > 0", got=global_batch)
        every = self.every_samples + self.every_samples_per_batch * global_batch
        if self.every_round > 0:
            every = max(self.every_round, math.floor(every / self.every_round) * self.every_round)
        return every

    def evaluations(self, samples: float, global_batch: float) -> float:
        """Evaluations in a run that trains ``samples`` at ``global_batch`` (at least one: the
        one that finds the target; fractional, as ``samples`` is a mean)."""
        if not (math.isfinite(samples) and samples > 0):
            raise InvalidSpecError("samples", "must be > 0", got=samples)
        after = max(samples - self.start_samples, 0.0)
        return max(1.0, after / self.interval_samples(global_batch))

"""The adaptive timing loop: warm up until step times settle, then time until the CI is tight.

Warm-up rule
    Steps run in windows of ``warmup_window`` (3) steps. Warm-up ends at the first window whose
    median step time is within ``warmup_tolerance`` (5%) of the previous window's median — so
    at least two windows run. It is cut short after ``max_warmup_steps`` (50) steps or once
    ``max_warmup_fraction`` (25%) of ``max_time_s`` is spent, with a warning; at least one
    warm-up step always runs (it pays for lazy initialisation, allocator growth, autotuning).

Stopping rule
    Every measured step is kept. After each one, once ``min_samples`` are in, the run stops
    when the half-width of the two-sided ``confidence`` (95%) Student-t interval of the mean
    step time is within ``target_ci`` of the mean (``ci_reached``); else when the wall-clock
    budget ``max_time_s`` (warm-up included) is spent (``time_budget``); else at
    ``max_samples`` (``sample_cap``). ``min_samples`` wins over the budget: a step slower than
    the budget still gets ``min_samples`` samples.

The loop's own cost per step is one timer call, a list append and an O(1) running-variance
update (Welford); t critical values come from a table computed once, vectorised, and grown by
doubling. Progress is reported at most every ``progress_interval_s``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import MAX_SAMPLES
from gpucast.domain.measurement import StopReason
from gpucast.domain.units import format_duration
from gpucast.measure.timing import Clock, Step, StepTimer, WallClockTimer


def _check_number(field: str, value: float, *, low: float, high: float = math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidSpecError(field, "must be a finite number", got=value)
    if not low < value <= high:
        bound = f"> {low:g}" if high == math.inf else f"in ({low:g}, {high:g}]"
        raise InvalidSpecError(field, f"must be {bound}", got=value)


def _check_int(field: str, value: int, *, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpecError(field, "must be an integer", got=value)
    if value < low:
        raise InvalidSpecError(field, f"must be >= {low}", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoppingRule:
    """When warm-up ends and when measuring stops (see the module docstring)."""

    target_ci: float = 0.02
    confidence: float = 0.95
    max_time_s: float = 60.0
    min_samples: int = 10
    max_samples: int = MAX_SAMPLES
    warmup_window: int = 3
    warmup_tolerance: float = 0.05
    max_warmup_steps: int = 50
    max_warmup_fraction: float = 0.25
    #: how a user cuts the minimum when its steps outrun the budget (``{n}``: the samples that
    #: fit it), said in the warning after the first timed step
    cut_text: str = "--min-samples {n}, or a smaller batch"

    def __post_init__(self) -> None:
        _check_number("target_ci", self.target_ci, low=0.0, high=1.0)
        _check_number("confidence", self.confidence, low=0.0, high=0.999999)
        _check_number("max_time_s", self.max_time_s, low=0.0)
        _check_int("min_samples", self.min_samples, low=2)
        _check_int("max_samples", self.max_samples, low=self.min_samples)
        _check_int("warmup_window", self.warmup_window, low=1)
        _check_number("warmup_tolerance", self.warmup_tolerance, low=0.0)
        _check_int("max_warmup_steps", self.max_warmup_steps, low=1)
        _check_number("max_warmup_fraction", self.max_warmup_fraction, low=0.0, high=1.0)


#: ``saving``: measured, the result being written to the store (a caller's phase, not the
#: harness's: it may wait on a store another process holds, up to ``store_wait_s``)
Phase = Literal["warmup", "measure", "done", "saving"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """A snapshot for progress displays."""

    phase: Phase
    n_warmup: int
    n_samples: int
    elapsed_s: float
    mean_s: float | None  # None until a step is measured
    ci_halfwidth_rel: float | None  # None until min_samples are in
    target_ci: float
    #: a warning to show now, while the run goes on (it is in the run's warnings too)
    note: str | None = None
    #: phase ``saving``: the longest the save waits on a store locked by another process
    store_wait_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RawRun:
    """What the loop collected, before statistics."""

    warmup_step_times_s: tuple[float, ...]
    step_times_s: tuple[float, ...]
    stop_reason: StopReason
    warmup_settled: bool
    elapsed_s: float
    warnings: tuple[str, ...]


class _TTable:
    """Two-sided Student-t critical values by sample count, computed in vectorised blocks."""

    __slots__ = ("_q", "_values")

    def __init__(self, confidence: float, size: int = 256) -> None:
        self._q = 0.5 + confidence / 2.0
        self._values = np.empty(0)
        self._grow(size)

    def _grow(self, size: int) -> None:
        from scipy import stats

        dof = np.arange(1, size + 1, dtype=np.float64)
        self._values = np.asarray(stats.t.ppf(self._q, dof), dtype=np.float64)

    def __call__(self, n_samples: int) -> float:
        dof = n_samples - 1
        if dof > self._values.size:
            self._grow(max(2 * self._values.size, dof))
        return float(self._values[dof - 1])


def _slow_minimum_note(rule: StoppingRule, step_s: float, elapsed_s: float) -> str | None:
    """After the first timed step: a warning when ``min_samples`` steps of ``step_s`` exceed
    the time budget by more than 2x (the minimum outranks the budget), else None."""
    if rule.min_samples * step_s <= 2.0 * rule.max_time_s:
        return None
    total_s = elapsed_s + (rule.min_samples - 1) * step_s
    fits = max(2, int(rule.max_time_s // step_s))
    return (
        f"a step takes {step_s:.3g} s, so the {rule.min_samples} minimum samples take about "
        f"{format_duration(total_s)} in all, past --max-time-s {rule.max_time_s:g} s (the "
        f"minimum outranks it); to cut it: {rule.cut_text.format(n=fits)}"
    )


def run_adaptive(
    step: Step,
    rule: StoppingRule,
    *,
    timer: StepTimer | None = None,
    clock: Clock | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    progress_interval_s: float = 0.2,
) -> RawRun:
    """Warm ``step`` up, then time it until ``rule`` says stop. See the module docstring.

    ``clock`` (monotonic seconds) drives the budget and progress; ``timer`` times one step
    (default: the same clock). Inject both to run the loop deterministically in tests.
    """
    clock = clock or time.perf_counter
    timer = timer or WallClockTimer(clock)
    started = clock()
    deadline = started + rule.max_time_s
    notes: list[str] = []

    def report(
        phase: Phase,
        n_warm: int,
        n: int,
        mean: float | None,
        rel: float | None,
        note: str | None = None,
    ) -> None:
        if on_progress is not None:
            on_progress(
                Progress(
                    phase=phase,
                    n_warmup=n_warm,
                    n_samples=n,
                    elapsed_s=clock() - started,
                    mean_s=mean,
                    ci_halfwidth_rel=rel,
                    target_ci=rule.target_ci,
                    note=note,
                )
            )

    # -- warm-up ---------------------------------------------------------------------------
    warmup: list[float] = []
    warmup_deadline = started + rule.max_warmup_fraction * rule.max_time_s
    window = rule.warmup_window
    previous_median: float | None = None
    settled = False
    cut_by = ""
    report("warmup", 0, 0, None, None)
    while True:
        warmup.append(timer(step))
        if len(warmup) % window == 0:
            median = statistics.median(warmup[-window:])
            if (
                previous_median is not None
                and abs(median - previous_median) <= rule.warmup_tolerance * previous_median
            ):
                settled = True
                break
            previous_median = median
        if len(warmup) >= rule.max_warmup_steps:
            cut_by = "steps"
            break
        if clock() >= warmup_deadline:
            cut_by = "time"
            break
    if not settled and cut_by == "steps":
        notes.append(
            f"warm-up did not settle within {len(warmup)} steps "
            f"(window medians kept moving by more than {rule.warmup_tolerance:.0%}); "
            "early samples may still include warm-up effects"
        )
    elif not settled:
        notes.append(
            f"warm-up cut short after {len(warmup)} steps by its time cap "
            f"({rule.max_warmup_fraction:.0%} of the time budget) before step times settled; "
            "early samples may still include warm-up effects"
        )

    # -- measurement -----------------------------------------------------------------------
    t_crit = _TTable(rule.confidence)
    times: list[float] = []
    append = times.append
    n = 0
    mean = 0.0
    m2 = 0.0
    rel = math.inf
    min_samples, max_samples, target = rule.min_samples, rule.max_samples, rule.target_ci
    next_report = clock() + progress_interval_s
    report("measure", len(warmup), 0, None, None)
    stop_reason: StopReason
    while True:
        duration = timer(step)
        append(duration)
        n += 1
        delta = duration - mean
        mean += delta / n
        m2 += delta * (duration - mean)
        if n == 1 and (slow := _slow_minimum_note(rule, duration, clock() - started)):
            notes.append(slow)
            report("measure", len(warmup), n, mean, None, note=slow)
        if n >= min_samples:
            std = math.sqrt(m2 / (n - 1)) if m2 > 0 else 0.0
            rel = t_crit(n) * std / math.sqrt(n) / mean if mean > 0 else math.inf
            if rel <= target:
                stop_reason = "ci_reached"
                break
            now = clock()
            if now >= deadline:
                stop_reason = "time_budget"
                break
            if n >= max_samples:
                stop_reason = "sample_cap"
                break
            if now >= next_report:
                report("measure", len(warmup), n, mean, rel)
                next_report = now + progress_interval_s
        elif on_progress is not None and clock() >= next_report:
            report("measure", len(warmup), n, mean, None)
            next_report = clock() + progress_interval_s

    elapsed = clock() - started
    report("done", len(warmup), n, mean, rel)
    return RawRun(
        warmup_step_times_s=tuple(warmup),
        step_times_s=tuple(times),
        stop_reason=stop_reason,
        warmup_settled=settled,
        elapsed_s=elapsed,
        warnings=tuple(notes),
    )

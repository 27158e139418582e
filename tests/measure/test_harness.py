"""The adaptive loop driven by a fake clock and scripted step times: fully deterministic."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pytest
from scipy import stats

from gpucast.domain.errors import InvalidSpecError
from gpucast.measure.harness import Progress, StoppingRule, _TTable, run_adaptive
from gpucast.measure.timing import WallClockTimer


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ScriptedStep:
    """Each call advances the fake clock by the next scripted duration."""

    def __init__(self, clock: FakeClock, durations: Iterable[float]) -> None:
        self.clock = clock
        self.durations: Iterator[float] = iter(durations)
        self.calls = 0

    def __call__(self) -> None:
        self.clock.now += next(self.durations)
        self.calls += 1


def run(durations: Iterable[float], **rule: Any) -> tuple[Any, ScriptedStep, FakeClock]:
    clock = FakeClock()
    step = ScriptedStep(clock, durations)
    raw = run_adaptive(step, StoppingRule(**rule), clock=clock, timer=WallClockTimer(clock))
    return raw, step, clock


def first_n_meeting_target(samples: np.ndarray, target: float, min_samples: int) -> int:
    """Reference: the smallest n >= min_samples whose t-interval is within target."""
    for n in range(min_samples, samples.size + 1):
        x = samples[:n]
        half = stats.t.ppf(0.975, n - 1) * x.std(ddof=1) / math.sqrt(n)
        if half / x.mean() <= target:
            return n
    raise AssertionError("target never met")


def test_stops_exactly_when_the_ci_target_is_met() -> None:
    rng = np.random.default_rng(7)
    # windows of 3 steps: medians 0.3, 0.1 (moved), 0.1 (within 5%) -> settles after 9 steps
    warm = [0.5, 0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    measured = 0.1 + rng.normal(0.0, 0.01, 5000)
    raw, _, _ = run([*warm, *measured], target_ci=0.01, max_time_s=1e9, min_samples=10)
    expected = first_n_meeting_target(measured, 0.01, 10)
    assert raw.stop_reason == "ci_reached"
    assert len(raw.step_times_s) == expected
    np.testing.assert_allclose(raw.step_times_s, measured[:expected], rtol=1e-9)
    assert raw.warmup_step_times_s == pytest.approx(tuple(warm))
    assert raw.warmup_settled and raw.warnings == ()


def test_constant_steps_stop_at_min_samples() -> None:
    raw, _, _ = run(itertools.repeat(0.25), min_samples=12, max_time_s=1e6)
    assert raw.stop_reason == "ci_reached"
    assert len(raw.step_times_s) == 12
    # the first two warm-up windows agree, so warm-up is the minimum two windows
    assert len(raw.warmup_step_times_s) == 6


def test_time_budget_stops_noisy_runs() -> None:
    # alternating 1 s / 3 s steps never get within 0.1% in a 60 s budget
    raw, _, clock = run(itertools.cycle([1.0, 3.0]), target_ci=0.001, max_time_s=60.0)
    assert raw.stop_reason == "time_budget"
    total = sum(raw.warmup_step_times_s) + sum(raw.step_times_s)
    assert 60.0 <= total < 60.0 + 3.0  # stops at the first step that ends past the budget
    assert raw.elapsed_s == pytest.approx(clock.now - 100.0)


def test_min_samples_win_over_the_budget() -> None:
    raw, _, _ = run(itertools.repeat(10.0), max_time_s=1.0, min_samples=4)
    assert len(raw.step_times_s) == 4
    assert len(raw.warmup_step_times_s) == 1  # warm-up cut at its time cap after one step
    assert raw.stop_reason == "ci_reached"  # constant steps: zero-width interval


def test_sample_cap() -> None:
    raw, _, _ = run(
        itertools.cycle([1.0, 3.0]), target_ci=1e-6, max_time_s=1e12, min_samples=2, max_samples=50
    )
    assert raw.stop_reason == "sample_cap"
    assert len(raw.step_times_s) == 50


def test_warmup_that_never_settles_is_capped_and_flagged() -> None:
    drifting = (1.0 * 0.8**i for i in itertools.count())  # each window 50% faster than the last
    raw, _, _ = run(
        itertools.chain(itertools.islice(drifting, 30), itertools.repeat(0.01)),
        max_warmup_steps=30,
        max_time_s=1e9,
    )
    assert len(raw.warmup_step_times_s) == 30
    assert not raw.warmup_settled
    assert any("warm-up did not settle within 30 steps" in w for w in raw.warnings)


def test_warmup_time_cap_is_a_fraction_of_the_budget() -> None:
    # 20 s budget -> warm-up may use 25% = 5 s; steps of 1, 1.5, 2, 2.5... s never settle
    drifting = (1.0 + 0.5 * i for i in itertools.count())
    raw, _, _ = run(drifting, max_time_s=20.0, target_ci=1e-9, min_samples=2)
    # 1 + 1.5 + 2 = 4.5 < 5; + 2.5 = 7 >= 5 -> 4 warm-up steps
    assert len(raw.warmup_step_times_s) == 4
    assert not raw.warmup_settled
    assert any("warm-up cut short after 4 steps by its time cap" in w for w in raw.warnings)


def test_progress_reports_every_phase() -> None:
    clock = FakeClock()
    step = ScriptedStep(clock, itertools.cycle([0.1, 0.12]))
    seen: list[Progress] = []
    raw = run_adaptive(
        step,
        StoppingRule(target_ci=0.05, max_time_s=100.0),
        clock=clock,
        timer=WallClockTimer(clock),
        on_progress=seen.append,
        progress_interval_s=0.5,
    )
    phases = [p.phase for p in seen]
    assert phases[0] == "warmup" and phases[-1] == "done"
    assert "measure" in phases
    assert seen[-1].n_samples == len(raw.step_times_s)
    assert seen[-1].ci_halfwidth_rel is not None and seen[-1].ci_halfwidth_rel <= 0.05
    elapsed = [p.elapsed_s for p in seen]
    assert elapsed == sorted(elapsed)


def test_t_table_matches_scipy_and_grows() -> None:
    table = _TTable(0.95, size=8)
    for n in (2, 3, 9, 10, 100, 1000, 5000):
        assert table(n) == pytest.approx(stats.t.ppf(0.975, n - 1), rel=1e-12)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("target_ci", -1.0),
        ("target_ci", 0.0),
        ("target_ci", float("nan")),
        ("max_time_s", 0.0),
        ("max_time_s", -5.0),
        ("min_samples", 1),
        ("min_samples", 2.5),
        ("max_samples", 5),  # below min_samples (10)
        ("confidence", 1.0),
        ("warmup_window", 0),
        ("max_warmup_steps", 0),
        ("max_warmup_fraction", 1.5),
    ],
)
def test_invalid_rules_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(InvalidSpecError) as info:
        StoppingRule(**{field: value})
    assert info.value.field == field


def _slow_run(step_s: float) -> tuple[Any, list[Progress]]:
    """Steps of ``step_s`` (fake clock), 10 minimum samples, a 60 s budget, every progress."""
    clock = FakeClock()
    seen: list[Progress] = []
    raw = run_adaptive(
        ScriptedStep(clock, itertools.repeat(step_s)),
        StoppingRule(max_time_s=60.0, min_samples=10, target_ci=1e-9, max_warmup_steps=1),
        clock=clock,
        timer=WallClockTimer(clock),
        on_progress=seen.append,
    )
    return raw, seen


def test_a_step_too_slow_for_the_minimum_samples_warns_after_the_first_timed_step() -> None:
    raw, seen = _slow_run(30.0)  # 10 x 30 s = 300 s > 2 x 60 s: told at once
    notes = [(p.n_samples, p.note) for p in seen if p.note is not None]
    assert len(notes) == 1 and notes[0][0] == 1  # once, right after the first timed step
    note = notes[0][1]
    assert note is not None and "\n" not in note
    # 30 s of warm-up + 30 s timed + 9 more x 30 s = 330 s; 60 s fits 2 steps
    assert "about 5.5 min" in note and "--min-samples 2" in note and "smaller batch" in note
    assert note in raw.warnings and len(raw.step_times_s) == 10  # a warning, not a refusal


def test_no_slow_minimum_warning_within_twice_the_budget() -> None:
    raw, seen = _slow_run(12.0)  # 10 x 12 s = 120 s = 2 x 60 s
    assert all(p.note is None for p in seen)
    assert not any("minimum samples" in w for w in raw.warnings)


def test_the_slow_minimum_warning_names_the_verb_s_own_way_to_cut_it() -> None:
    """`measure program` takes --repeats, not --min-samples: its rule says so."""
    clock = FakeClock()
    raw = run_adaptive(
        ScriptedStep(clock, itertools.repeat(30.0)),
        StoppingRule(max_time_s=60.0, min_samples=10, max_warmup_steps=1, cut_text="--repeats {n}"),
        clock=clock,
        timer=WallClockTimer(clock),
    )
    assert any(w.endswith("to cut it: --repeats 2") for w in raw.warnings), raw.warnings

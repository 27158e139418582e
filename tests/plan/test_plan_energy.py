"""The planner's power setting: limits, slowdowns and board power per (GPU, batch)."""

from __future__ import annotations

import numpy as np
import pytest
from plan_factories import power_model as _model

from gpucast.domain.errors import InvalidSpecError
from gpucast.plan.energy import PowerSetting, clamped_limits
from gpucast.predict.power import BoardPower

BOARD = BoardPower(name="G", max_power_limit_w=300.0, min_power_limit_w=100.0)
NAMES = ("G", "NOFACTS")


TERMS = np.array([[0.8, 0.1, 0.1], [0.8, 0.1, 0.1], [0.05, 0.05, 0.9], [0.8, 0.1, 0.1]])
G = np.array([0, 0, 0, 1])
BATCH = np.array([32, 32, 8, 32])  # rows 0 and 1: the same GPU and batch


def _at(**kw: object) -> tuple[np.ndarray, ...]:
    return PowerSetting(model=_model(), boards={"G": BOARD}, **kw).at(TERMS, G, NAMES, BATCH)  # type: ignore[arg-type]


def test_default_limit_no_slowdown_and_no_power_without_facts() -> None:
    slow, watts, limit, idle = _at()
    assert slow.tolist() == [1.0, 1.0, 1.0, 1.0]
    assert np.all(watts[:3] <= 300.0) and np.isnan(watts[3]) and np.isnan(limit[3])
    assert limit[:3].tolist() == [300.0, 300.0, 300.0]
    assert watts[2] < watts[0]  # a host-bound step draws less than a compute-bound one
    assert np.all(idle[:3] < watts[:3])


def test_a_fixed_limit_is_clamped_and_slows_compute_bound_steps_most() -> None:
    slow, watts, limit, _ = _at(mode="fixed", limit_w=50.0)
    assert limit[0] == 100.0  # the board's minimum
    assert slow[0] > slow[2] >= 1.0
    assert watts[0] <= 100.0 + 1e-9


def test_auto_picks_the_cheapest_limit_and_never_draws_more() -> None:
    _, default_w, _, _ = _at()
    slow, watts, limit, _ = _at(mode="auto", eta=1.0)
    assert np.all(limit[:3] <= 300.0) and np.all(watts[:3] <= default_w[:3] + 1e-9)
    assert np.all(slow[:3] >= 1.0)
    # identical rows share one evaluation and one answer
    assert slow[0] == slow[1] and watts[0] == watts[1]


def test_bad_settings() -> None:
    with pytest.raises(InvalidSpecError, match="fixed limit"):
        PowerSetting(model=_model(), boards={}, mode="fixed")
    with pytest.raises(InvalidSpecError, match="eta"):
        PowerSetting(model=_model(), boards={}, eta=3.0)


def test_a_fixed_limit_no_candidate_takes_is_refused_and_the_clamped_ones_named() -> None:
    small = BoardPower(name="S", max_power_limit_w=70.0)  # no minimum: 35 W assumed
    assert small.lowest_power_limit_w == 35.0
    assert clamped_limits(200.0, [BOARD, small]) == {"S": 70.0}
    assert clamped_limits(50.0, [BOARD, small]) == {"G": 100.0}
    assert clamped_limits(1e4, []) == {}  # no GPU with power facts: nothing to clamp
    for watts, nearest in ((5000.0, 300), (10.0, 35)):
        with pytest.raises(InvalidSpecError) as info:
            clamped_limits(watts, [BOARD, small])
        message = str(info.value)
        assert message.startswith(f"power-limit: {watts:g} W is outside the power-limit range")
        assert "(35-300 W across 2 GPU types)" in message
        assert f"e.g. --power-limit {nearest} " in message

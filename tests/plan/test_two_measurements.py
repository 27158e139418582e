"""Two measurements of a workload on a GPU, at a smaller and a larger batch, price the batches
between them with the step's fixed and per-sample parts each scaled to both (issue #22)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from plan_factories import catalog, facts

from gpucast.plan.inputs import build_gpu_table
from gpucast.predict.intervals import BRACKETED, IntervalTable, distance_regimes
from gpucast.predict.roofline import (
    RooflineEfficiency,
    calibrate,
    predict_step_time,
    two_part_scale,
)

#: the bracketed band narrower than the nearest-batch ones, so which one applies shows
WIDTH = {BRACKETED: 0.05, "same_gpu/calibrated": 0.5}
WIDTH.update({n: 0.1 * (i + 1) for i, n in enumerate(distance_regimes("same_gpu/calibrated"))})
EFF = replace(
    RooflineEfficiency(),
    intervals=IntervalTable(
        q_low={k: -w for k, w in WIDTH.items()},
        q_high=dict(WIDTH),
        n=dict.fromkeys(WIDTH, 40),
        mape_pct=dict.fromkeys(WIDTH, 5.0),
    ),
)
#: the truth: the per-sample part 1.2x the roofline's, the fixed part 4x (a slow host)
WORK, FIXED = 1.2, 4.0


def measured(batch: int) -> float:
    """What a GPU whose parts are WORK and FIXED times the roofline's measures."""
    cal = calibrate(facts().roofline_workload(batch), 1.0, catalog().gpu("FAST"), "fp32",
                    efficiency=EFF)  # fmt: skip
    assert cal.work_s is not None and cal.fixed_s is not None
    return WORK * cal.work_s + FIXED * cal.fixed_s


def two_point(low: int = 8, high: int = 512, *, gpu: str = "FAST") -> object:
    f, device = facts(), catalog().gpu(gpu)
    at = {b: calibrate(f.roofline_workload(b), measured(b), device, "fp32", efficiency=EFF)
          for b in (low, high)}  # fmt: skip
    return replace(at[high], others=(at[low],))


def test_between_two_measurements_both_parts_are_recovered() -> None:
    f, fast = facts(), catalog().gpu("FAST")
    cal = two_point()
    est = predict_step_time(f.roofline_workload(64), fast, "fp32", calibration=cal,
                            efficiency=EFF)  # fmt: skip
    assert est.value == pytest.approx(measured(64), rel=1e-9)
    assert any("two measurements on FAST, at batches 8 and 512" in n for n in est.notes)
    assert est.upper / est.value == pytest.approx(math.exp(0.05))  # the bracketed band
    # one measurement (the nearest, 8x away) scales both parts alike and misses
    one = predict_step_time(f.roofline_workload(64), fast, "fp32",
                            calibration=replace(cal, others=()), efficiency=EFF)  # fmt: skip
    assert abs(one.value / measured(64) - 1) > 0.05
    split = cal.split_at(64)
    assert split is not None
    assert (split.work, split.fixed) == pytest.approx((WORK, FIXED))


def test_outside_or_at_the_measurements_the_nearest_one_prices() -> None:
    f, fast = facts(), catalog().gpu("FAST")
    cal = two_point()
    assert cal.split_at(8) is None and cal.split_at(512) is None and cal.split_at(4096) is None
    at_high = predict_step_time(f.roofline_workload(512), fast, "fp32", calibration=cal,
                                efficiency=EFF)  # fmt: skip
    assert at_high.value == pytest.approx(measured(512))
    beyond = predict_step_time(f.roofline_workload(2048), fast, "fp32", calibration=cal,
                               efficiency=EFF)  # fmt: skip
    assert any("a measurement on FAST at batch 512" in n for n in beyond.notes)


def test_a_pair_without_positive_parts_falls_back_to_the_nearest() -> None:
    f, fast = facts(), catalog().gpu("FAST")
    low = calibrate(f.roofline_workload(8), measured(8), fast, "fp32", efficiency=EFF)
    # noise: the larger batch measured faster per step than the smaller one
    high = calibrate(f.roofline_workload(16), 0.5 * measured(8), fast, "fp32", efficiency=EFF)
    assert two_part_scale(low, high) is None
    est = predict_step_time(f.roofline_workload(12), fast, "fp32",
                            calibration=replace(high, others=(low,)), efficiency=EFF)  # fmt: skip
    assert not any("two measurements" in n for n in est.notes)


def test_measurements_on_another_gpu_type_scale_alike() -> None:
    f, slow = facts(), catalog().gpu("SLOW")
    est = predict_step_time(f.roofline_workload(64), slow, "fp32", calibration=two_point(),
                            efficiency=EFF)  # fmt: skip
    assert not any("two measurements" in n for n in est.notes)


def test_the_planner_prices_the_batches_between_as_predict_does() -> None:
    f, cat = facts(), catalog()
    fast, slow = cat.gpu("FAST"), cat.gpu("SLOW")
    cal = two_point()
    table = build_gpu_table(f, [slow, fast], calibration=cal, efficiency=EFF)
    batches = np.array([8.0, 64.0, 300.0, 512.0, 2048.0])
    for gpu in (slow, fast):
        g = np.full(len(batches), table.index(gpu.name), dtype=np.int64)
        steps = table.step_terms(g, batches)
        _, hi = table.interval_ratios(g, batches)
        for b, step, upper in zip(batches, steps, hi, strict=True):
            est = predict_step_time(f.roofline_workload(int(b)), gpu, "fp32", calibration=cal,
                                    efficiency=EFF)  # fmt: skip
            assert step.sum() == pytest.approx(est.value)
            assert step == pytest.approx([est.breakdown[t] for t in
                                          ("compute", "memory_bandwidth", "overhead")])  # fmt: skip
            assert upper == pytest.approx(est.upper / est.value)
    g = np.full(2, table.index("FAST"), dtype=np.int64)
    assert table.step_terms(g, np.array([64.0, 300.0])).sum(axis=1) == pytest.approx(
        [measured(64), measured(300)]
    )

"""A measurement on a GPU narrows its interval most near the measured batch (issue #22)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from plan_factories import catalog, context, facts, request

from gpucast.plan.inputs import build_gpu_table
from gpucast.plan.train import plan_training
from gpucast.predict.intervals import IntervalTable, distance_regimes
from gpucast.predict.roofline import (
    Calibration,
    RooflineEfficiency,
    calibrate,
    predict_step_time,
)

#: bands that widen with the distance from the measured batch, as the published data's do
WIDTH = {"same_gpu/calibrated": 0.5, "gpu_unseen/calibrated": 0.9}
for _base, _step in (("same_gpu/calibrated", 0.1), ("gpu_unseen/calibrated", 0.2)):
    WIDTH.update({n: _step * (i + 1) for i, n in enumerate(distance_regimes(_base))})
TABLE = IntervalTable(
    q_low={k: -w for k, w in WIDTH.items()},
    q_high=dict(WIDTH),
    n=dict.fromkeys(WIDTH, 50),
    mape_pct=dict.fromkeys(WIDTH, 10.0),
)
EFF = replace(RooflineEfficiency(), intervals=TABLE)


def test_gpu_table_bands_by_distance_from_the_measured_batch() -> None:
    cat, f = catalog(), facts()
    fast, slow = cat.gpu("FAST"), cat.gpu("SLOW")
    cal = calibrate(f.roofline_workload(64), 0.2, fast, f.precision, efficiency=EFF)
    table = build_gpu_table(f, [slow, fast], calibration=cal, efficiency=EFF)
    assert list(table.anchor_batch[:, 0]) == [64, 64]  # FAST measured, SLOW calibrated from it
    g = np.array([1, 1, 1, 0])
    lo, hi = table.interval_ratios(g, np.array([64.0, 200.0, 4096.0, 64.0]))
    assert hi[:3] == pytest.approx([math.exp(0.1), math.exp(0.2), math.exp(0.4)])
    assert lo[:3] == pytest.approx([math.exp(-0.1), math.exp(-0.2), math.exp(-0.4)])
    # the other GPU, calibrated from FAST: the band of a GPU type the fit lacks at that distance
    assert hi[3] == pytest.approx(math.exp(0.2))
    lo, hi = table.interval_ratios(np.array([0]), np.array([4096.0]))
    assert hi[0] == pytest.approx(math.exp(0.8))


def _upper_widths(calibration: Calibration) -> dict[tuple[int, int, str, str], float]:
    ctx = replace(context(), calibration=calibration, efficiency=EFF)
    plan = plan_training(request(gpus=("FAST",), batch_sizes=(32, 256)), ctx)
    return {
        (c.per_worker_batch, c.gpus, c.strategy, c.market): math.log(c.time_upper_s / c.time_s)
        for c in plan.candidates
    }


def test_plans_near_the_measured_batch_carry_the_narrower_band() -> None:
    ctx = context()
    cal = calibrate(
        ctx.facts.roofline_workload(32), 0.05, ctx.catalog.gpu("FAST"), "fp32", efficiency=EFF
    )
    near_far = _upper_widths(cal)
    pooled = _upper_widths(replace(cal, batch_size=None))  # every distance: the widest band
    shrink: dict[int, list[float]] = {}
    for key, width in near_far.items():
        if key in pooled:
            shrink.setdefault(key[0], []).append(width / pooled[key])
    assert set(shrink) == {32, 256}
    assert max(shrink[32]) < min(shrink[256]) < 1.0  # x2 band at 32, x8 band at 256


def test_several_measurements_each_price_the_batches_nearest_them() -> None:
    cat, f = catalog(), facts()
    fast = cat.gpu("FAST")
    roof = {b: calibrate(f.roofline_workload(b), 1.0, fast, f.precision).scale for b in (16, 256)}
    # measured: 1.3x the roofline at batch 16, 0.8x at 256 (a slope the fit missed)
    measured = {16: 1.3 / roof[16], 256: 0.8 / roof[256]}
    primary = calibrate(f.roofline_workload(256), measured[256], fast, f.precision, efficiency=EFF)
    small = calibrate(f.roofline_workload(16), measured[16], fast, f.precision, efficiency=EFF)
    cal = replace(primary, others=(small,))
    table = build_gpu_table(f, [fast], calibration=cal, efficiency=EFF)
    g = np.zeros(4, dtype=np.int64)
    batches = np.array([16.0, 256.0, 24.0, 200.0])
    steps = table.step_terms(g, batches).sum(axis=1)
    assert steps[:2] == pytest.approx([measured[16], measured[256]])  # each measurement exact
    nearest, _ = table.anchor_at(g, batches)
    assert list(nearest) == [16, 256, 16, 256]
    _, hi = table.interval_ratios(g, batches)
    assert hi == pytest.approx([math.exp(0.1)] * 4)  # every batch within 2x of a measurement
    # the roofline with the same calibration agrees at every batch
    for b, step in zip(batches, steps, strict=True):
        est = predict_step_time(f.roofline_workload(int(b)), fast, f.precision,
                                calibration=cal, efficiency=EFF)  # fmt: skip
        assert est.value == pytest.approx(step)


def test_percentile_words_read_as_english_ordinals() -> None:
    from gpucast.predict.intervals import percentile_words

    assert percentile_words(0.9) == "10th-90th percentiles"
    said = percentile_words(0.93)
    assert said.startswith("7th-93rd percentiles") and "93th" not in said
    assert percentile_words(0.99).startswith("1st-99th")
    assert percentile_words(0.925).startswith("7.5th-92.5th")
    assert percentile_words(0.78).startswith("22nd-78th")

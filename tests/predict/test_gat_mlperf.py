"""The MLPerf R-GAT benchmark's core (benchmarks/gnn_mlperf.py) on the published results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest


@pytest.mark.shared_data
def test_leave_one_system_out_on_mlperf_v4(
    shared_data: Path, load_benchmark: Callable[[str], ModuleType]
) -> None:
    bench = load_benchmark("gnn_mlperf")
    table = bench.predict_systems(shared_data / "mlperf_training_v4.0" / "training_v4.0.csv")
    assert len(table) == 11 and set(table.n_gpus) == {4, 8, 64, 512}
    # each system is calibrated without itself: refit on the others and predict it
    from gpucast.predict.validation import scale_and_per_step

    for i in (0, 3):  # an 8-GPU and the 512-GPU system
        rest = table.drop(index=table.index[i])
        scale, per_step_s = scale_and_per_step(
            rest.raw_min * 60, rest.steps, rest.measured_min * 60
        )
        row = table.iloc[i]
        expected = (scale * row.raw_min * 60 + per_step_s * row.steps) / 60
        assert np.isclose(row.predicted_min, expected)
    # the shipped calibration (predict gnn --software tuned) is this fit on all systems
    from gpucast.catalog.gnn_graphs import load_gnn_calibrations

    shipped = load_gnn_calibrations()["tuned"]
    scale, per_step_s = scale_and_per_step(table.raw_min * 60, table.steps, table.measured_min * 60)
    assert round(scale, 3) == pytest.approx(shipped.scale)
    assert round(per_step_s * 1e3, 1) == pytest.approx(shipped.per_step_s * 1e3)
    err = table.error.abs()
    assert err.median() <= 0.20  # the target, met at the median
    # the time per step that does not scale with the GPU is what carries 8 to 512 GPUs
    big = table[table.n_gpus == 512].iloc[0]
    assert abs(big.error) < abs(big.factor_error)
    h200 = table[table.gpus.str.contains("H200")].iloc[0]
    h100 = table[table.system == "NVIDIA/eos_ngc24.04_dgl"].iloc[0]
    assert h200.raw_min < h100.raw_min  # features in HBM vs host memory: H200 is faster

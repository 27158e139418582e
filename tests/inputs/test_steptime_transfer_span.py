"""The span over which a cross-GPU calibration carries its fixed part at the datasheet ratio
(:data:`gpucast.predict.roofline.CARRIED_RATIO_SPAN`) is the widest datasheet gap between two
GPUs of one source in the step-time data -- the pairs the leave-one-GPU-out validation saw."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from gpucast.catalog import load_catalog
from gpucast.inputs.steptime import step_time_observations
from gpucast.predict.roofline import CARRIED_RATIO_SPAN


def test_the_carried_span_is_the_widest_gap_the_data_validates(shared_data: Path) -> None:
    catalog = load_catalog()
    obs = step_time_observations(shared_data, catalog, features=False)
    widest = 1.0
    for (_, precision), rows in obs.groupby(["source", "precision"]):
        specs = [catalog.gpu(str(g)) for g in sorted(set(rows["gpu"]))]
        for a, b in itertools.combinations(specs, 2):
            peak = a.matrix_tflops(str(precision)) / b.matrix_tflops(str(precision))
            ratio = math.sqrt(peak * a.memory_bandwidth_gbps / b.memory_bandwidth_gbps)
            widest = max(widest, ratio, 1.0 / ratio)
    assert widest == pytest.approx(CARRIED_RATIO_SPAN, abs=0.05)

"""validation.csv's figures agree with their benchmarks rerun today, so a refit that moves a
held-out check cannot leave a stale figure in front of users (issue #13's audit)."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType

import pytest

from gpucast.catalog.validation import validation_for


def _percent(text: str, pattern: str) -> float:
    found = re.search(pattern, text)
    assert found is not None, f"no figure matching {pattern!r} in {text!r}"
    return float(found.group(1))


def test_tensorrt_resnet50_rows_match_serving_engines_benchmark(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    bench = load_benchmark("serving_engines")
    for pub in bench.PUBLISHED:
        rate, _batch = bench.offline_throughput(pub.gpu, "tensorrt", "int8")
        measured_pct = (rate / pub.samples_per_s - 1) * 100
        v = validation_for("serving-engine:tensorrt", [pub.gpu], "int8", 1)
        assert v.validated and v.error is not None
        stated_pct = _percent(v.error, r"throughput ([+-]\d+(?:\.\d+)?)%")
        assert stated_pct == pytest.approx(measured_pct, abs=1.0), (
            f"{pub.gpu}: validation.csv says {stated_pct:+.0f}%, "
            f"benchmarks/serving_engines.py gives {measured_pct:+.1f}%"
        )

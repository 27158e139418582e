"""Measurements for store tests, built without running anything."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
from gpucast.domain.workload import WorkloadSpec

ENV = EnvironmentFingerprint(
    host="test-host",
    os="Linux",
    python_version="3.11",
    cpu_model="Test CPU",
    cpu_cores=4,
    torch_threads=2,
    torch_version="2.13.0",
)


def make_measurement(i: int = 0, **overrides: Any) -> Measurement:
    """A distinct, valid measurement per ``i``."""
    base = 0.01 * (1 + i % 7)
    fields: dict[str, Any] = {
        "spec": WorkloadSpec(name="mlp" if i % 2 == 0 else "resnet50", batch_size=8 + i),
        "mode": "train",
        "device": "cpu",
        "step_times_s": tuple(base * (1 + 0.01 * k) for k in range(12)),
        "warmup_step_times_s": (base * 3,),
        "samples_per_step": 8 + i,
        "stop_reason": "ci_reached",
        "target_ci": 0.02,
        "environment": ENV,
        "created_at": datetime(2025, 6, 1, tzinfo=UTC) + timedelta(seconds=i),
    }
    fields.update(overrides)
    return Measurement(**fields)

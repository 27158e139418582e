from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.measurement import (
    EnvironmentFingerprint,
    Measurement,
    TelemetrySummary,
    ci_relative_halfwidth,
)
from gpucast.domain.prediction import Estimate
from gpucast.domain.workload import WorkloadSpec

ENV = EnvironmentFingerprint(
    host="h",
    os="Linux 6",
    python_version="3.11.9",
    cpu_model="Test CPU",
    cpu_cores=8,
    torch_threads=4,
    torch_version="2.13.0",
)
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def make(times: list[float] | tuple[float, ...], **overrides: Any) -> Measurement:
    fields: dict[str, Any] = {
        "spec": WorkloadSpec(name="mlp", batch_size=32),
        "mode": "train",
        "device": "cpu",
        "step_times_s": tuple(times),
        "samples_per_step": 32,
        "stop_reason": "ci_reached",
        "target_ci": 0.02,
        "environment": ENV,
        "created_at": WHEN,
    }
    fields.update(overrides)
    return Measurement(**fields)


def test_statistics_come_from_the_samples() -> None:
    times = [0.010, 0.011, 0.012, 0.013, 0.014, 0.015, 0.016, 0.017, 0.018, 0.019, 0.020]
    m = make(times)
    arr = np.array(times)
    assert m.n_samples == 11
    assert m.median_s == pytest.approx(0.015)
    assert m.mean_s == pytest.approx(arr.mean())
    assert m.p5_s == pytest.approx(np.percentile(arr, 5))
    assert m.p95_s == pytest.approx(np.percentile(arr, 95))
    assert m.iqr_s == pytest.approx(np.percentile(arr, 75) - np.percentile(arr, 25))
    half = stats.t.ppf(0.975, 10) * arr.std(ddof=1) / math.sqrt(11)
    assert m.ci_low_s == pytest.approx(arr.mean() - half)
    assert m.ci_high_s == pytest.approx(arr.mean() + half)
    assert m.ci_halfwidth_rel == pytest.approx(half / arr.mean())
    assert m.samples_per_s == pytest.approx(32 / arr.mean())


def test_quiet_samples_have_no_warnings_and_noisy_ones_are_flagged() -> None:
    rng = np.random.default_rng(1)
    quiet = make(list(0.1 + rng.normal(0, 0.0005, 200)))
    assert quiet.warnings == ()
    noisy = make(list(rng.uniform(0.05, 0.15, 200)))
    assert any("IQR is" in w and "of the median" in w for w in noisy.warnings)


def test_budget_and_few_samples_are_flagged_and_harness_notes_kept_first() -> None:
    m = make(
        [0.1, 0.2, 0.15],
        stop_reason="time_budget",
        warnings=("warm-up did not settle",),
    )
    assert m.warnings[0] == "warm-up did not settle"
    assert any("time budget ran out before the CI target" in w for w in m.warnings)
    assert any("only 3 samples" in w for w in m.warnings)


def test_as_estimate_shares_the_prediction_interface() -> None:
    m = make([0.1, 0.11, 0.09, 0.1, 0.105])
    est = m.as_estimate()
    assert isinstance(est, Estimate)
    assert est.value == m.mean_s
    assert (est.lower, est.upper) == (m.ci_low_s, m.ci_high_s)
    assert est.source == "measured" and est.bottleneck == "measured" and est.unit == "s"
    assert est.relative_halfwidth == pytest.approx(m.ci_halfwidth_rel)


def test_wide_interval_lower_bound_is_clamped_at_zero() -> None:
    m = make([1e-3, 1.0])
    assert m.ci_low_s == 0.0
    assert m.as_estimate().lower == 0.0


def test_round_trip_through_json_is_exact() -> None:
    telemetry = TelemetrySummary(
        n_samples=5, interval_s=0.1, gpu_util_mean_pct=93.5, gpu_util_max_pct=99.0,
        power_mean_w=250.0, power_max_w=301.5,
    )  # fmt: skip
    env = replace(ENV, gpu_name="NVIDIA H100", cuda_version="12.4", driver_version="550.1")
    m = make(
        [0.01, 0.012, 0.011, 0.0105],
        warmup_step_times_s=(0.5, 0.02),
        telemetry=telemetry,
        environment=env,
        mode="infer",
        device="cuda:0",
        spec=WorkloadSpec(name="resnet50", batch_size=64, precision="bf16"),
    )
    back = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back == m
    assert back.telemetry == telemetry
    assert back.n_warmup == 2


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"step_times_s": (0.1,)}, "step_times_s"),
        ({"step_times_s": (0.1, -0.2)}, "step_times_s"),
        ({"step_times_s": (0.1, float("nan"))}, "step_times_s"),
        ({"mode": "serve"}, "mode"),
        ({"stop_reason": "bored"}, "stop_reason"),
        ({"target_ci": 0.0}, "target_ci"),
        ({"samples_per_step": 0}, "samples_per_step"),
        ({"created_at": datetime(2025, 1, 1)}, "created_at"),  # naive on purpose
        ({"device": ""}, "device"),
    ],
)
def test_invalid_fields_name_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        make([0.1, 0.2, 0.3], **overrides)
    assert info.value.field == field


def test_from_dict_rejects_missing_keys_and_other_versions() -> None:
    data = make([0.1, 0.2]).to_dict()
    del data["step_times_s"]
    with pytest.raises(InvalidSpecError, match="step_times_s"):
        Measurement.from_dict(data)
    data = make([0.1, 0.2]).to_dict()
    data["schema_version"] = 99
    with pytest.raises(InvalidSpecError, match="schema_version"):
        Measurement.from_dict(data)


def test_ci_relative_halfwidth_is_infinite_below_two_samples() -> None:
    assert ci_relative_halfwidth(1.0, 0.1, 1, 0.95) == math.inf


positive_times = st.lists(
    st.floats(min_value=1e-6, max_value=10.0, allow_nan=False, allow_infinity=False),
    min_size=2,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(times=positive_times, batch=st.integers(min_value=1, max_value=4096))
def test_statistics_invariants(times: list[float], batch: int) -> None:
    m = make(times, samples_per_step=batch, spec=WorkloadSpec(name="w", batch_size=batch))
    tol = 1e-12 * max(times)
    assert m.min_s - tol <= m.p5_s <= m.p25_s <= m.median_s <= m.p75_s <= m.p95_s <= m.max_s + tol
    assert m.ci_low_s <= m.mean_s <= m.ci_high_s
    assert m.iqr_s >= 0
    assert m.samples_per_s * m.mean_s == pytest.approx(batch)
    assert Measurement.from_dict(json.loads(json.dumps(m.to_dict()))) == m

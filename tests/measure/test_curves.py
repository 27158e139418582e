"""Measured inference latency curves and co-location slowdown (real PyTorch on the CPU)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
from gpucast.domain.workload import WorkloadSpec
from gpucast.measure.curves import (
    COLOCATED_MARK,
    ColocationResult,
    curve_from_store,
    measure_colocated,
    measure_curve,
)
from gpucast.store.db import Store

ENV = EnvironmentFingerprint(
    host="h",
    os="linux",
    python_version="3.11",
    cpu_model="cpu",
    cpu_cores=2,
    torch_threads=1,
    torch_version="2",
)


def fake_measurement(
    spec: WorkloadSpec, *, step_s: float, warnings: tuple[str, ...] = ()
) -> Measurement:
    return Measurement(
        spec=spec,
        mode="infer",
        device="cpu",
        step_times_s=tuple(step_s * (1 + 0.001 * k) for k in range(12)),
        samples_per_step=spec.batch_size,
        stop_reason="ci_reached",
        target_ci=0.02,
        environment=ENV,
        created_at=datetime.now(UTC),
        warnings=warnings,
    )


def affine_measure(spec: WorkloadSpec, **kw: Any) -> Measurement:
    assert kw["mode"] == "infer"
    return fake_measurement(spec, step_s=0.002 + 0.0005 * spec.batch_size)


def test_curve_fits_affine_and_saves_every_point(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db").open() as store:
        curve = measure_curve("mlp", [8, 1, 2, 4], store=store, measure_fn=affine_measure)
        assert curve.batch_sizes == (1, 2, 4, 8)
        assert len(curve.run_ids) == 4
        fixed, per = curve.fit().coefficients
        assert fixed == pytest.approx(0.002, rel=0.02)
        assert per == pytest.approx(0.0005, rel=0.02)
        lc = curve.latency_curve()
        assert lc.latency(4) == pytest.approx(curve.points[2].median_s)
        again = curve_from_store(store, "mlp")
        assert again.batch_sizes == curve.batch_sizes
        assert [m.median_s for m in again.points] == [m.median_s for m in curve.points]


def test_colocated_runs_never_enter_a_solo_curve(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db").open() as store:
        measure_curve("mlp", [1, 2], store=store, measure_fn=affine_measure)
        spec = WorkloadSpec(name="mlp", batch_size=2)
        store.save_measurement(
            fake_measurement(spec, step_s=1.0, warnings=(f"{COLOCATED_MARK} with mlp b2",))
        )
        curve = curve_from_store(store, "mlp")
        assert curve.points[1].median_s < 0.01
        with pytest.raises(InvalidSpecError, match="infer-curve"):
            curve_from_store(store, "resnet50")


def test_bad_batch_sizes() -> None:
    with pytest.raises(InvalidSpecError, match="batch-sizes"):
        measure_curve("mlp", [0, 2], measure_fn=affine_measure)
    with pytest.raises(InvalidSpecError, match="precision"):
        measure_curve("mlp", [1], precision="int8", measure_fn=affine_measure)
    with pytest.raises(InvalidSpecError, match="two or more"):
        measure_colocated(["mlp"], 4)


def test_slowdown_table_from_measurements() -> None:
    spec = WorkloadSpec(name="mlp", batch_size=4)
    res = ColocationResult(
        device="cpu",
        workloads=("mlp", "mlp", "mlp"),
        batch_sizes=(4, 4, 4),
        alone=tuple(fake_measurement(spec, step_s=0.01) for _ in range(3)),
        together=tuple(fake_measurement(spec, step_s=s) for s in (0.02, 0.03, 0.025)),
    )
    assert res.slowdown() == pytest.approx((2.0, 3.0, 2.5), rel=1e-3)
    table = res.slowdown_table()
    assert table[0] == 1.0 and len(table) == 3
    assert table[1] == pytest.approx((2.0 * 3.0 * 2.5) ** (1 / 3), rel=1e-3)


def test_real_curve_on_cpu() -> None:
    curve = measure_curve(
        "mlp", [1, 8], max_time_s=0.4, min_samples=5, telemetry=False, target_ci=0.2
    )
    assert all(m.mode == "infer" and m.n_samples >= 5 for m in curve.points)
    assert curve.points[1].spec.batch_size == 8


def test_real_colocation_in_two_processes(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db").open() as store:
        res = measure_colocated(["mlp", "mlp"], 8, max_time_s=0.4, store=store)
        assert len(res.together) == 2 and len(res.run_ids) == 4
        assert all(any(w.startswith(COLOCATED_MARK) for w in m.warnings) for m in res.together)
        assert all(s > 0 for s in res.slowdown())
        assert store.count_runs(kind="measurement", workload="mlp") == 4


def test_a_batch_whose_inputs_exceed_the_device_is_refused_before_any_timing() -> None:
    """QA 38 I #21: `measure infer-curve mlp --batch-sizes 100000000` allocated 313 GB, ran out
    of memory and exited 1; the refusal names --batch-sizes and comes before the first point."""
    timed: list[int] = []

    def record(spec: WorkloadSpec, **kw: Any) -> Measurement:
        timed.append(spec.batch_size)
        return affine_measure(spec, **kw)

    with pytest.raises(InvalidSpecError, match=r"^batch-sizes: batch size 1,000,000,000 of mlp"):
        measure_curve("mlp", [1, 10**9], measure_fn=record)
    assert timed == []


def test_a_user_model_too_big_for_the_host_is_refused_before_its_factory_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """QA 41: the curve's pre-check built the user's model for real (a 128 GiB MLP: the OS
    kills it) to check it against the host's memory; now it is sized as built on meta."""
    from gpucast.measure import devices

    factory = Path(__file__).resolve().parents[1] / "profile" / "user_models.py"
    built_on = tmp_path / "built_on"
    monkeypatch.setenv("BUILT_ON", str(built_on))
    monkeypatch.setattr(devices, "device_memory_bytes", lambda device: 64.0)  # bytes
    with pytest.raises(InvalidSpecError, match=r"^batch-sizes: .*needs about"):
        measure_curve(f"{factory}:records_device", [1, 2], telemetry=False)
    assert built_on.read_text().split() == ["meta"]

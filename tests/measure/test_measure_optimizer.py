"""CPU AdamW step timing (the offload model's input): a real step, a memory guard, stored runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.offload import OptimizerStepMeasurement
from gpucast.domain.units import GIB
from gpucast.measure.optimizer import check_fits, measure_optimizer_step
from gpucast.store import Store
from gpucast.store.optimizer import load_optimizer_steps, save_optimizer_step


def test_measures_real_adamw_steps_and_restores_threads() -> None:
    threads = torch.get_num_threads()
    m = measure_optimizer_step(10_001, 4, implementation="foreach", max_time_s=0.5, threads=1)
    assert torch.get_num_threads() == threads
    assert (m.n_params, m.n_tensors, m.threads, m.optimizer) == (10_001, 4, 1, "adamw")
    assert len(m.step_times_s) >= 5
    assert m.fastest_s <= m.median_s
    assert m.bandwidth_gbps == pytest.approx(28 * 10_001 / m.fastest_s / 1e9)


def test_memory_guard_refuses_before_allocating() -> None:
    with pytest.raises(InvalidSpecError, match="leaving less than 6 GiB"):
        check_fits(500_000_000, reserve_gib=6.0, available_bytes=12 * GIB)
    check_fits(250_000_000, reserve_gib=6.0, available_bytes=12 * GIB)  # 4.7 GiB + 6 fits
    with pytest.raises(InvalidSpecError, match="sizes"):
        measure_optimizer_step(10**9, 10, available_bytes=4 * GIB)


def test_bad_arguments() -> None:
    with pytest.raises(InvalidSpecError, match="tensors"):
        measure_optimizer_step(10, 11)
    with pytest.raises(InvalidSpecError, match="implementation"):
        measure_optimizer_step(10, 1, implementation="sgd")  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="threads"):
        measure_optimizer_step(10, 1, threads=0)


def test_stored_and_loaded_unchanged(tmp_path: Path) -> None:
    m = OptimizerStepMeasurement(
        optimizer="adamw",
        implementation="fused",
        n_params=1000,
        n_tensors=2,
        threads=1,
        step_times_s=(0.002, 0.001, 0.003),
        host="h",
        created_at="2026-12-03T00:00:00+00:00",
    )
    with Store(tmp_path / "s.db").open() as store:
        run_id = save_optimizer_step(store, m)
        assert store.get_run(run_id).summary.median_s == pytest.approx(0.002)
        assert load_optimizer_steps(store) == [m]

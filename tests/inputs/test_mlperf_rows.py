"""MLPerf v4.0 systems as step-time rows: the fitted benchmarks, and those kept out of the fit."""

from __future__ import annotations

from pathlib import Path

from gpucast.catalog import load_catalog
from gpucast.catalog.convergence import mlperf_samples_to_target
from gpucast.domain.published import MLPERF_HELD_OUT, MLPERF_WORKLOADS
from gpucast.inputs.steptime import mlperf_system_rows


def _s2t(benchmark: str, batch: float) -> float:
    return float(mlperf_samples_to_target(benchmark, round(batch)).samples_mean)


def test_held_out_benchmarks_are_read_apart_from_the_fitted_ones(shared_data: Path) -> None:
    catalog = load_catalog()
    fitted = mlperf_system_rows(shared_data, _s2t, catalog=catalog)
    held = mlperf_system_rows(shared_data, _s2t, catalog=catalog, workloads=MLPERF_HELD_OUT)
    bench = {str(g).rsplit("/", 1)[-1] for g in fitted.group}
    assert bench == set(MLPERF_WORKLOADS) and not bench & set(MLPERF_HELD_OUT)
    assert {str(g).rsplit("/", 1)[-1] for g in held.group} == {"ssd"}
    assert len(held) == 25 and set(held.workload) == {"retinanet"}
    # 8 x H100 at 256 images: 4 epochs of 1,170,301 images in ~36 min -> ~0.12 s per step
    eos = held[held.group.str.startswith("NVIDIA/eos_ngc24.04_pytorch/")]
    assert 0.10 < float(eos.step_time_s.iloc[0]) < 0.13

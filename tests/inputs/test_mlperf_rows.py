"""MLPerf v4.0 systems as step-time rows: the fitted benchmarks, and those kept out of the fit."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    held_bench = held.group.str.rsplit("/", n=1).str[-1]
    assert set(held_bench) == {"ssd", "stable_diffusion"}
    assert set(held.workload) == {"retinanet", "stable-diffusion"}
    assert (held_bench == "ssd").sum() == 25 and (held_bench == "stable_diffusion").sum() == 11
    # 8 x H100 at 256 images: 4 epochs of 1,170,301 images in ~36 min -> ~0.12 s per step
    eos = held[held.group.str.startswith("NVIDIA/eos_ngc24.04_pytorch/")]
    assert 0.10 < float(eos.step_time_s.iloc[0]) < 0.13


def test_systems_of_a_stack_no_fit_describes_are_read_apart(shared_data: Path) -> None:
    # tinycorp's tinyboxes (tinygrad on 6 consumer cards) are kept out of the fitted rows and
    # read on request, priced with the stack that stands in for theirs
    catalog = load_catalog()
    fitted = mlperf_system_rows(shared_data, _s2t, catalog=catalog)
    other = mlperf_system_rows(shared_data, _s2t, catalog=catalog, other_stacks=True)
    assert not fitted.group.str.startswith("tinycorp/").any()
    assert (fitted["stack"] == "tuned").all()
    assert sorted(other.gpu) == ["RTX4090", "RX7900XTX"]
    assert (other["stack"] == "pytorch").all() and (other.gpus == 6).all()
    # 6 x RTX 4090 at 1,536 images: ~122 min for ~44.8 M samples -> ~0.25 s per step
    green = other[other.gpu == "RTX4090"]
    assert 0.22 < float(green.step_time_s.iloc[0]) < 0.28


def test_sample_share_splits_a_sample_inside_a_node_only_below_one_per_gpu() -> None:
    from gpucast.inputs.steptime import sample_share

    assert sample_share(56, 8, 8) == 1.0  # 7 per GPU
    assert sample_share(56, 72, 8) == 1.0  # 56 GPUs train one sample each, 16 evaluate
    assert sample_share(84, 768, 8) == pytest.approx(1 / 8)  # NVIDIA: 84 groups of 8 GPUs
    assert sample_share(1, 16, 4) == pytest.approx(1 / 4)  # never across nodes


def test_rows_carry_their_runs_evaluations(shared_data: Path) -> None:
    rows = mlperf_system_rows(shared_data, _s2t, catalog=load_catalog())
    big = rows[rows.group.str.startswith("NVIDIA/eos_n434_ngc23.09_pytorch/bert")].iloc[0]
    # 13,888 sequences a step, an evaluation every 300,000 samples on 10,000 of them
    samples = _s2t("bert", 13_888)
    assert big.eval_runs == pytest.approx(samples / 300_000 * 13_888 / samples)
    assert big.eval_work == pytest.approx(10_000 / 300_000)
    unet = rows[rows.group.str.startswith("NVIDIA/eos_n96_ngc23.09_mxnet/unet3d")].iloc[0]
    assert unet.sample_share == pytest.approx(1 / 8)
    # its 96 GPUs without a sample evaluate beside the 672 training ones: nothing on the step
    assert unet.eval_runs == unet.eval_work == 0.0
    whole = rows.batch >= 1
    assert (rows.eval_runs[whole] > 0).all() and (rows.sample_share[whole] == 1.0).all()

"""Measuring a cold start on this machine (real torch runs of a tiny model)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
import torch

from gpucast.domain.serverless import ColdStartMeasurement
from gpucast.measure.coldstart import (
    _layer_chain_flops,
    drop_from_page_cache,
    measure_cold_start,
    measure_read_gbs,
)
from gpucast.workloads import get_workload


def test_cold_start_phases_of_a_small_mlp(tmp_path: Path) -> None:
    workload = get_workload("mlp", in_features=64, hidden=(128,))
    m = measure_cold_start(workload, device="cpu", steady_runs=2, scratch_dir=tmp_path)
    expected = sum(p.numel() * 4 for p in workload.build_model(torch.device("cpu")).parameters())
    assert m.weight_bytes == expected
    assert m.parameter_tensors == 4
    assert m.to_device_s == 0.0 and m.cuda_context_s is None
    assert m.weight_read_s > 0 and m.first_inference_s > 0 and m.steady_inference_s > 0
    assert m.total_s == pytest.approx(m.weight_read_s + m.first_inference_s)
    assert list(tmp_path.iterdir()) == []  # the temporary weights file is gone
    assert ColdStartMeasurement.from_dict(m.to_dict()) == m


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="posix_fadvise is Linux's")
def test_dropping_a_file_from_the_page_cache(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"x" * 4096)
    assert drop_from_page_cache(path) is True
    assert path.read_bytes() == b"x" * 4096


def test_read_bandwidth_uses_the_injected_clock(tmp_path: Path) -> None:
    ticks = itertools.count(0.0, 0.5)  # every clock call advances 0.5 s: each read takes 0.5 s
    gbs, _ = measure_read_gbs(tmp_path, size_bytes=4 * 2**20, runs=3, clock=lambda: next(ticks))
    assert gbs == pytest.approx(4 * 2**20 / 0.5 / 1e9)


def test_flop_rate_counts_every_layer_of_the_chain() -> None:
    # 16 distinct 1024x4096 layers, 64 rows each: a pass of 1 s is 2*64*1024*4096*16 FLOP/s
    ticks = itertools.count(0.0, 0.5)  # start and stop of each timed pass: 0.5 s apart
    flops = _layer_chain_flops(lambda: next(ticks))
    assert flops == pytest.approx(2 * 64 * 1024 * 4096 * 16 / 0.5)


@pytest.mark.gpu
def test_cold_start_on_a_gpu(tmp_path: Path) -> None:
    m = measure_cold_start(get_workload("mlp"), device="cuda", scratch_dir=tmp_path)
    assert m.to_device_s > 0 and m.gpu_name

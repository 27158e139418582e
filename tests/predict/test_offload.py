"""Offload: the CPU Adam model, the max-plus step time and the per-layer memory plan."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import GIB
from gpucast.predict.offload import CpuAdamModel, OffloadInputs, plan_at, plan_offload

BW = 15e9  # bytes/s


def adam(fixed_s: float = 1e-3, per_tensor_s: float = 5e-6) -> CpuAdamModel:
    params = np.array([5e6, 1e7, 2e7, 2e7, 5e7])
    tensors = np.array([3.0, 50.0, 10.0, 200.0, 25.0])
    step = fixed_s + per_tensor_s * tensors + 28 * params / BW
    return CpuAdamModel().fit(params, tensors, step)


def inputs(**kw: object) -> OffloadInputs:
    base: dict[str, object] = {
        "n_params": 1.5e9,
        "n_tensors": 300,
        "n_layers": 48,
        "activations_bytes": 20 * GIB,
        "forward_s": 0.3,
        "backward_s": 0.6,
        "gpu_bytes": 70 * GIB,
        "host_bytes": 200 * GIB,
        "pcie_gbps": 25.0,
        "nvme_gbps": 7.0,
    }
    base.update(kw)
    return OffloadInputs(**base)  # type: ignore[arg-type]


def test_cpu_adam_recovers_bandwidth_and_per_tensor_cost() -> None:
    m = adam()
    assert m.bandwidth_gbps == pytest.approx(15.0, rel=1e-6)
    c = m.to_dict()["state"]["coef"]
    assert c["per_tensor_s"] == pytest.approx(5e-6, rel=1e-6)
    assert c["fixed_s"] == pytest.approx(1e-3, rel=1e-6)
    # extrapolation is linear in bytes: 500M params at 15 GB/s = 0.933 s + 250 tensors
    assert m.predict_s(5e8, 250)[()] == pytest.approx(1e-3 + 250 * 5e-6 + 28 * 5e8 / BW)


def test_cpu_adam_refuses_bad_rows() -> None:
    with pytest.raises(InvalidSpecError, match="at least 3"):
        CpuAdamModel().fit([1e6, 2e6], [1, 1], [0.1, 0.2])
    with pytest.raises(InvalidSpecError, match="step_s"):
        CpuAdamModel().fit([1e6, 2e6, 3e6], [1, 1, 1], [0.1, -0.2, 0.3])


def test_small_model_stays_on_the_gpu_without_recompute() -> None:
    choice = plan_offload(inputs(n_params=1e8, activations_bytes=GIB), adam())
    assert choice.best is not None
    assert (choice.best.optimizer_on, choice.best.params_on) == ("gpu", "gpu")
    assert choice.best.recompute_layers == 0
    assert choice.best.step_s == pytest.approx(0.9)


def test_large_model_offloads_the_optimizer_and_prices_it() -> None:
    # 6B params: 16 B/param = 96 GB > 70 GiB; bf16 weights + grads 24 GB fit
    x = inputs(n_params=6e9, activations_bytes=10 * GIB)
    choice = plan_offload(x, adam())
    best = choice.best
    assert best is not None and best.optimizer_on == "cpu" and best.params_on == "gpu"
    grads = 2 * 6e9 / 25e9
    cpu = float(adam().predict_s(6e9, 300)[()])
    assert best.cpu_step_s == pytest.approx(cpu)
    # no delayed update: forward + max(backward, gradients down) + max(CPU step, params up)
    assert best.step_s == pytest.approx(0.3 + max(0.6, grads) + max(cpu, grads))
    assert best.bottleneck == "cpu"
    assert best.host_bytes == pytest.approx(16 * 6e9)
    dpu = plan_offload(dataclasses.replace(x, delayed_update=True), adam()).best
    assert dpu is not None
    assert dpu.step_s == pytest.approx(max(0.9, max(0.0, grads - 0.6) + max(cpu, grads)))
    assert dpu.step_s < best.step_s


def test_recomputes_the_fewest_layers_that_fit() -> None:
    # 2B params on the GPU: 32 GB of states; activations 60 GiB over 48 layers
    x = inputs(n_params=2e9, activations_bytes=60 * GIB)
    plan = plan_at(x, adam(), optimizer_on="gpu", params_on="gpu", recompute_layers=0)
    assert not plan.fits
    best = plan_offload(x, adam()).best
    assert best is not None and best.optimizer_on == "gpu"
    r = best.recompute_layers
    assert 0 < r < 48
    fewer = plan_at(x, adam(), optimizer_on="gpu", params_on="gpu", recompute_layers=r - 1)
    assert not fewer.fits and best.fits
    assert best.step_s == pytest.approx(0.3 * (1 + r / 48) + 0.6)


def test_small_host_pushes_the_optimizer_to_nvme() -> None:
    x = inputs(n_params=6e9, activations_bytes=10 * GIB, host_bytes=40 * GIB)
    best = plan_offload(x, adam()).best
    assert best is not None and best.optimizer_on == "nvme"
    assert best.host_bytes == pytest.approx(4 * 6e9)
    assert best.nvme_s == pytest.approx(24 * 6e9 / 7e9)
    no_nvme = plan_offload(dataclasses.replace(x, nvme_gbps=None), adam())
    assert no_nvme.best is None
    assert "no memory plan fits" in no_nvme.reason


def test_sharding_divides_host_state_and_cpu_work() -> None:
    x = inputs(n_params=6e9, activations_bytes=10 * GIB)
    one = plan_at(x, adam(), optimizer_on="cpu", params_on="gpu", recompute_layers=0)
    eight = plan_at(
        dataclasses.replace(x, shards=8),
        adam(),
        optimizer_on="cpu",
        params_on="gpu",
        recompute_layers=0,
    )
    assert eight.host_bytes == pytest.approx(one.host_bytes / 8)
    assert eight.cpu_step_s < one.cpu_step_s / 7


def test_bad_inputs() -> None:
    with pytest.raises(InvalidSpecError, match="pcie_gbps"):
        inputs(pcie_gbps=0.0)
    with pytest.raises(InvalidSpecError, match="n_layers"):
        inputs(n_layers=0)
    with pytest.raises(InvalidSpecError, match="placement"):
        plan_at(inputs(), adam(), optimizer_on="gpu", params_on="cpu", recompute_layers=0)
    with pytest.raises(InvalidSpecError, match="recompute_layers"):
        plan_at(inputs(), adam(), optimizer_on="gpu", params_on="gpu", recompute_layers=99)

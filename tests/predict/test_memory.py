"""Memory fit: strategies, their bytes, and a clear "no"."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import GIB
from gpucast.predict.memory import (
    DATA_PARALLEL_PLANS,
    FSDP_PLANS,
    MemoryNeeds,
    fit_memory,
    usable_bytes,
)


def gpu(name: str, memory_gib: float) -> GpuSpec:
    return GpuSpec(
        name=name,
        vendor="nvidia",
        architecture="test",
        fp32_tflops=60.0,
        tf32_tflops=None,
        fp16_tflops=900.0,
        bf16_tflops=900.0,
        fp8_tflops=None,
        memory_gib=memory_gib,
        memory_bandwidth_gbps=3000,
        interconnect_gbps=900,
        pcie_generation=5,
        tdp_w=700,
        sm_count=132,
        source_url="https://example.org",
        as_of=date(2024, 1, 1),
    )


H100 = gpu("H100-80GB", 80)
T4 = gpu("T4", 16)


def llama70b() -> MemoryNeeds:
    # 70B parameters, mixed precision + Adam (16 B/param); activations of one 4096-token
    # sequence, ~34 * s * h bytes per layer (Korthikanti et al. 2022) over 80 layers.
    acts = 34 * 4096 * 8192 * 80
    return MemoryNeeds.from_parameters(
        n_params=70e9,
        activations_bytes=acts,
        n_layers=80,
        setup="mixed-adam",
        largest_layer_params=70e9 / 80,
    )


def test_small_model_fits_plain_data_parallel() -> None:
    needs = MemoryNeeds.from_parameters(n_params=25e6, activations_bytes=5 * GIB, n_layers=50)
    fit = fit_memory(needs, T4, 1)
    assert fit.best is not None and fit.best.strategy == "data-parallel"
    assert fit.best.bytes_needed == pytest.approx(25e6 * 16 + 5 * GIB)


def test_70b_fits_no_single_gpu() -> None:
    fit = fit_memory(llama70b(), H100, 1)
    assert not fit.fits
    assert "no strategy fits" in fit.reason and "FSDP needs 2 or more GPUs" in fit.reason
    # the pure model names no verb's flags: each verb says which of its own options fix it
    assert "--" not in fit.reason and "workers" not in fit.reason


def test_plans_restrict_the_strategies_a_job_runs() -> None:
    needs = llama70b()
    ddp = fit_memory(needs, H100, 8, plans=DATA_PARALLEL_PLANS)
    assert {o.strategy for o in ddp.options} == set(DATA_PARALLEL_PLANS) and not ddp.fits
    sharded = fit_memory(needs, H100, 8, plans=FSDP_PLANS)
    assert {o.strategy for o in sharded.options} == set(FSDP_PLANS)
    with pytest.raises(InvalidSpecError, match="plans"):
        fit_memory(needs, H100, 1, plans=FSDP_PLANS)  # one GPU runs no FSDP


def test_the_largest_batch_that_fits_grows_the_activations_only() -> None:
    per_sample = 0.5 * GIB
    needs = MemoryNeeds.from_parameters(
        n_params=25e6, activations_bytes=1000 * per_sample, n_layers=1
    )
    fit = fit_memory(needs, T4, 1, plans=("data-parallel",))
    assert not fit.fits
    most, how = fit.largest_batch(1000)
    state = 25e6 * 16
    assert how == "data-parallel" and most == int((usable_bytes(T4) - state) // per_sample)
    at_most = MemoryNeeds.from_parameters(
        n_params=25e6, activations_bytes=most * per_sample, n_layers=1
    )
    over = MemoryNeeds.from_parameters(
        n_params=25e6, activations_bytes=(most + 1) * per_sample, n_layers=1
    )
    assert fit_memory(at_most, T4, 1, plans=("data-parallel",)).fits
    assert not fit_memory(over, T4, 1, plans=("data-parallel",)).fits
    # model state alone over the GPU's memory: no batch fits
    assert fit_memory(llama70b(), T4, 1, plans=("data-parallel",)).largest_batch(1) == (0, None)


def test_70b_on_8_h100_needs_fsdp_checkpointing_and_offload() -> None:
    fit = fit_memory(llama70b(), H100, 8)
    by_name = {o.strategy: o for o in fit.options}
    # 16 B/param * 70e9 / 8 = 140 GB of sharded state alone: FSDP without offload cannot fit.
    assert not by_name["fsdp"].fits and not by_name["fsdp+checkpointing"].fits
    best = fit.best
    assert best is not None and best.strategy == "fsdp+checkpointing+cpu-offload"
    # (2 + 2) B/param sharded over 8 = 35 GB, plus a 2-layer gather buffer and checkpointed
    # activations (2 / sqrt(80) of the full 91 GB).
    expected = 4 * 70e9 / 8 + 2 * (70e9 / 80) * 2 + 34 * 4096 * 8192 * 80 * 2 / 80**0.5
    assert best.bytes_needed == pytest.approx(expected)
    # host: fp32 master weights, moments and gradients of this rank's partition, 16 B/param
    assert best.host_bytes == pytest.approx(16 * 70e9 / 8)
    assert best.bytes_needed <= usable_bytes(H100)


def test_checkpoint_fraction() -> None:
    assert (
        MemoryNeeds.from_parameters(n_params=1, activations_bytes=1, n_layers=1).checkpoint_fraction
        == 1.0
    )
    assert MemoryNeeds.from_parameters(
        n_params=1, activations_bytes=1, n_layers=100
    ).checkpoint_fraction == pytest.approx(0.2)


def test_bad_inputs() -> None:
    with pytest.raises(InvalidSpecError, match="workers"):
        fit_memory(llama70b(), H100, 0)
    with pytest.raises(InvalidSpecError, match="setup"):
        MemoryNeeds.from_parameters(n_params=1, activations_bytes=1, n_layers=1, setup="x")
    with pytest.raises(InvalidSpecError, match="activations_bytes"):
        MemoryNeeds(
            weights_bytes=1, gradients_bytes=1, optimizer_bytes=1, activations_bytes=-1, n_layers=1
        )


@settings(max_examples=50, deadline=None)
@given(
    params=st.floats(1e6, 2e11),
    acts=st.floats(1e6, 1e12),
    layers=st.integers(1, 200),
    workers=st.integers(1, 64),
)
def test_more_workers_never_hurt_and_best_is_fastest_feasible(
    params: float, acts: float, layers: int, workers: int
) -> None:
    needs = MemoryNeeds.from_parameters(n_params=params, activations_bytes=acts, n_layers=layers)
    fit = fit_memory(needs, H100, workers)
    more = fit_memory(needs, H100, workers * 2)
    if fit.fits:
        assert more.fits
    feasible = [o for o in fit.options if o.fits]
    if fit.best is not None:
        assert fit.best.slowdown == min(o.slowdown for o in feasible)
        assert fit.best.bytes_needed <= fit.bytes_available
    for option in fit.options:
        assert option.bytes_needed == pytest.approx(sum(option.components.values()))


def test_offload_strategies_are_priced_by_the_offload_model() -> None:
    import numpy as np

    from gpucast.predict.memory import OffloadCosts
    from gpucast.predict.offload import CpuAdamModel

    params = np.array([5e6, 1e7, 2e7, 5e7])
    tensors = np.array([3.0, 50.0, 10.0, 25.0])
    cpu_adam = CpuAdamModel().fit(params, tensors, 1e-3 + 28 * params / 15e9 + 0 * tensors)
    costs = OffloadCosts(
        forward_s=1.0, backward_s=2.0, n_params=70e9, n_tensors=800, pcie_gbps=50.0,
        cpu_adam=cpu_adam,
    )  # fmt: skip
    unpriced = fit_memory(llama70b(), H100, 8)
    priced = fit_memory(llama70b(), H100, 8, offload=costs)
    by_name = {o.strategy: o for o in priced.options}
    assert {o.strategy: o.slowdown for o in unpriced.options}["cpu-offload"] == float("inf")
    # ZeRO-Offload over 8 ranks: each rank's CPU steps 70e9 / 8 params
    cpu = float(cpu_adam.predict_s(70e9 / 8, 100)[()])
    grads = 2 * 70e9 / 50e9
    one = 1.0 + max(2.0, grads) + max(cpu, grads)
    assert by_name["cpu-offload"].slowdown == pytest.approx(one / 3.0)
    ckpt = 2.0 + max(2.0, grads) + max(cpu, grads)  # one extra forward: every layer recomputed
    assert by_name["fsdp+checkpointing+cpu-offload"].slowdown == pytest.approx(ckpt / 3.0)
    assert priced.best is not None and priced.best.strategy == "fsdp+checkpointing+cpu-offload"
    assert "slow-down x" in priced.reason


def test_a_small_model_says_its_memory_in_mib_not_zero_gib() -> None:
    """QA session 38: a 374k-parameter user model "needs 0.0 GiB of 37.0 GiB"."""
    small = MemoryNeeds(
        weights_bytes=1.5e6, gradients_bytes=1.5e6, optimizer_bytes=1.5e6,
        activations_bytes=55e6, n_layers=4,
    )  # fmt: skip
    reason = fit_memory(small, H100, plans=DATA_PARALLEL_PLANS).reason
    assert "needs 56.7 MiB of " in reason and "0.0 GiB" not in reason
    half = 0.5 * GIB
    two_gib = MemoryNeeds(
        weights_bytes=half,
        gradients_bytes=half,
        optimizer_bytes=half,
        activations_bytes=half,
        n_layers=4,
    )
    assert "needs 2.0 GiB of" in fit_memory(two_gib, H100, plans=DATA_PARALLEL_PLANS).reason

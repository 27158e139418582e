"""ZeRO-Offload / ZeRO-Infinity rows: which rows fit only with the optimizer state (and
the parameters) on the host or NVMe, the host memory they need, and their step
(:func:`gpucast.predict.offload.zero_offload_step_s`). Split from
:mod:`gpucast.plan.evaluate`.
"""

from __future__ import annotations

import numpy as np

from gpucast.domain.offload import streamed_bytes_per_param
from gpucast.plan._evaluate_types import BoolArray, FloatArray, IntArray
from gpucast.plan.inputs import GpuTable, OffloadSetting, PerfParams, WorkloadFacts
from gpucast.plan.space import DDP, FSDP, Space
from gpucast.predict.offload import zero_offload_step_s

#: Tensors of the parameters' buffer on the GPU when they live on the host (the layer in use
#: and the next one, prefetched): ZeRO-3 offload's working set.
_PARAM_BUFFER_TENSORS = 2.0


def _offload_gpu_state(space: Space, facts: WorkloadFacts, nf: FloatArray) -> FloatArray:
    """GPU bytes of a ZeRO-Offload row before activations: the weights and gradients
    (DDP), or their shards plus the gather buffer (FSDP); the optimizer state is on the host."""
    wg = facts.weights_bytes + facts.gradient_bytes
    return np.asarray(
        np.where(space.strategy == FSDP, wg / nf + 2.0 * facts.max_tensor_bytes, wg),
        dtype=np.float64,
    )


def _offload_memory(
    space: Space,
    facts: WorkloadFacts,
    gpus: GpuTable,
    g: IntArray,
    acts: FloatArray,
    nf: FloatArray,
    fits: BoolArray,
    setting: OffloadSetting | None,
) -> tuple[BoolArray, BoolArray, BoolArray, FloatArray, BoolArray]:
    """(rows that fit only with the optimizer off the GPU and whose instance has the host
    memory, rows of those that also need the parameters on the host, rows of those whose
    optimizer state is on NVMe, host bytes per GPU those rows need, rows whose host memory
    is short). ZeRO-Offload partitions the host state over the data-parallel ranks: fp32
    master weights, gradients and optimizer state, ``(w + g + o) / n`` per GPU, against the
    instance's memory per GPU. Where even the weights and gradients do not fit (ZeRO-3 /
    ZeRO-Infinity offload of the parameters: FSDP rows, or one GPU), the GPU keeps a
    two-layer buffer (``2 x`` the largest tensor) and the activations, and the host also the
    rank's parameters, ``w / n``. Without ``setting`` nothing is offloaded. Where that host
    state does not fit and the setting gives the node's NVMe, the master weights and
    optimizer state go there (ZeRO-Infinity) and the host keeps the rank's gradients, ``g /
    n`` (and ``w / n`` with the parameters)."""
    rows = len(space)
    none = np.zeros(rows, dtype=bool)
    off = space.offers
    if setting is None or gpus.pcie_gbytes_per_s is None:
        return none, none, none, np.zeros(rows), none
    candidate = ~fits & ((space.strategy == DDP) | (space.strategy == FSDP))
    if not candidate.any():
        return none, none, none, np.zeros(rows), none
    usable = gpus.usable_bytes[g]
    ckpt_acts = acts * facts.checkpoint_fraction
    gpu_state = _offload_gpu_state(space, facts, nf)
    on_gpu = candidate & (gpu_state + ckpt_acts <= usable)
    params = (
        candidate
        & ~on_gpu
        & ((space.strategy == FSDP) | (nf == 1))
        & (_PARAM_BUFFER_TENSORS * facts.max_tensor_bytes + ckpt_acts <= usable)
    )
    host_state = (facts.weights_bytes + facts.gradient_bytes + facts.optimizer_bytes) / nf
    need = np.where(on_gpu, host_state, np.where(params, host_state + facts.weights_bytes / nf, 0))
    host = (
        np.full(rows, np.inf)
        if off.host_bytes_per_gpu is None
        else np.asarray(off.host_bytes_per_gpu[space.offer], dtype=np.float64)
    )
    ok = need <= host
    either = on_gpu | params
    nvme_need = (facts.gradient_bytes + np.where(params, facts.weights_bytes, 0.0)) / nf
    short = either & ~ok & (setting.nvme_gbps is not None)  # the host keeps only g (+ w)
    need = np.where(short, nvme_need, need)
    on_nvme = short & (nvme_need <= host)
    placed = either & (ok | on_nvme)
    return placed, params & placed, on_nvme, need, either & ~placed


def _offload_step(
    compute: FloatArray,
    offload: BoolArray,
    params_off: BoolArray,
    nvme_off: BoolArray,
    space: Space,
    facts: WorkloadFacts,
    gpus: GpuTable,
    g: IntArray,
    nf: FloatArray,
    params: PerfParams,
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """(the step of offload rows by :func:`gpucast.predict.offload.zero_offload_step_s`,
    other rows unchanged; the seconds the host side adds; the rows whose host-side step is
    the NVMe traffic rather than the CPU's Adam step). Each rank sends its gradient
    partition down and gets its weight partition back over PCIe; the host's Adam step over
    ``params / n`` parameters in ``tensors / n`` tensors is the CPU Adam model's. Rows with
    the parameters on the host (``params_off``) also upload the rank's weights before the
    forward and again before the backward, overlapped with them: ``F' = max(F, w / n /
    pcie)``, likewise ``B'``. Rows with the optimizer state on NVMe read and write the rank's
    master weights and state each step, chunked under the CPU's work: ``C' = max(C, 2 (w + o)
    / n / nvme)``, the node's NVMe bandwidth shared by its GPUs."""
    setting = params.offload
    assert setting is not None and gpus.pcie_gbytes_per_s is not None
    pcie = gpus.pcie_gbytes_per_s[g] * 1e9
    backward = compute * params.backward_fraction
    forward = compute - backward
    upload = np.where(params_off, facts.weights_bytes / nf / pcie, 0.0)
    n_params = facts.weights_bytes / 4.0  # fp32 weights under autocast (GpuTable)
    cpu = setting.cpu_adam.predict_s(
        n_params / nf,
        np.maximum(1.0, facts.n_tensors / nf),
        streamed_bytes_per_param(facts.optimizer_bytes / n_params, 4.0),
    )
    nvme_bound = np.zeros(len(compute), dtype=bool)
    if setting.nvme_gbps is not None and nvme_off.any():
        per_gpu = setting.nvme_gbps * 1e9 / space.offers.gpus_per_node[space.offer]
        state_io = 2.0 * (facts.weights_bytes + facts.optimizer_bytes) / nf / per_gpu
        nvme_bound = nvme_off & (state_io > cpu)
        cpu = np.where(nvme_off, np.maximum(cpu, state_io), cpu)
    step = zero_offload_step_s(
        np.maximum(forward, upload),
        np.maximum(backward, upload),
        facts.gradient_bytes / nf / pcie,
        facts.weights_bytes / nf / pcie,
        cpu,
        delayed_update=setting.delayed_update,
    )
    out = np.where(offload, step, compute)
    return np.asarray(out, dtype=np.float64), np.where(offload, out - compute, 0.0), nvme_bound

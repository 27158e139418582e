"""Inputs of the serverless simulator (issue #19): invocation traces and the GPU functions.

- :func:`trace_from_dir`: a folder of the Azure Functions 2019 trace (``invocations_per_
  function_md.anon.dNN.csv`` and ``function_durations_percentiles.anon.dNN.csv`` of one day,
  as ``../shared/data/azure_functions_2019`` documents); a missing file is one error naming it.
- :func:`synthetic_trace`: N functions with the published characteristics
  (:mod:`gpucast.simulate.faas_workload`).
- :func:`gpu_function`: what a function serving a workload costs on a GPU: its memory held
  warm (the profile's inference peak: weights, inputs, the largest operator), its forward time
  (roofline on the GPU) and its cold start (:func:`gpu_cold_start`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.profile import WorkloadProfile
    from gpucast.domain.serverless import ColdStartPrediction


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerlessTrace:
    """Per-minute invocation counts of functions and their execution times (NaN: unknown)."""

    counts: npt.NDArray[np.int64]
    names: tuple[str, ...]
    duration_s: npt.NDArray[np.float64]
    source: str
    warnings: tuple[str, ...] = field(default=())


def trace_from_dir(folder: Path, day: int = 1) -> ServerlessTrace:
    """One day of the Azure Functions 2019 trace from ``folder`` (module docstring)."""
    from gpucast.inputs.serving import skipped_rows_warning
    from gpucast.store.datasets.azure_functions import (
        DURATIONS_FILE,
        INVOCATIONS_FILE,
        read_function_durations,
        read_invocation_counts,
    )

    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidInputError(
            f"--trace {folder}: not a folder",
            fix="give the folder holding the Azure Functions 2019 trace files",
        )
    paths = {
        "invocations": folder / INVOCATIONS_FILE.format(day=day),
        "durations": folder / DURATIONS_FILE.format(day=day),
    }
    for path in paths.values():
        if not path.is_file():
            raise InvalidInputError(
                f"--trace {folder}: missing {path.name}",
                fix="the folder needs the invocation counts and the duration percentiles of "
                f"day {day} (see ../shared/data/azure_functions_2019), or use --synthetic N",
            )
    counts = read_invocation_counts(paths["invocations"])
    durations, skipped = read_function_durations(paths["durations"])
    keys = counts.functions["owner"] + "/" + counts.functions["app"] + "/"
    keys = keys + counts.functions["function"]
    dkeys = durations["owner"] + "/" + durations["app"] + "/" + durations["function"]
    average = dict(zip(dkeys, durations["average_ms"], strict=True))
    duration_s = np.array([average.get(k, np.nan) for k in keys], dtype=np.float64) / 1e3
    warnings = []
    if counts.skipped:
        warnings.append(skipped_rows_warning(paths["invocations"], counts.skipped))
    if skipped:
        warnings.append(skipped_rows_warning(paths["durations"], skipped))
    missing = int(np.isnan(duration_s).sum())
    if missing:
        warnings.append(
            f"{missing} of {duration_s.size} functions have no duration row: they run one "
            "forward pass of their model"
        )
    return ServerlessTrace(
        counts=counts.counts,
        names=tuple(keys),
        duration_s=duration_s,
        source=f"Azure Functions 2019 trace day {day} in {folder} ({len(keys)} functions, "
        f"{counts.minutes} minutes)",
        warnings=tuple(warnings),
    )


def synthetic_trace(n_functions: int, *, minutes: int, seed: int) -> ServerlessTrace:
    """``n_functions`` generated functions (Shahrad et al. ATC'20 characteristics)."""
    from gpucast.catalog.faas import load_faas_mix
    from gpucast.simulate.faas_workload import generate_faas_workload

    work = generate_faas_workload(
        n_functions, np.random.default_rng(seed), mix=load_faas_mix(), minutes=minutes
    )
    return ServerlessTrace(
        counts=work.counts,
        names=tuple(f"f{i}" for i in range(n_functions)),
        duration_s=work.duration_s,
        source=f"synthetic: {n_functions} functions over {minutes} minutes, seed {seed} "
        "(invocation-frequency mix, triggers, inter-arrival patterns and durations of Shahrad "
        "et al. ATC'20: catalog/data/faas_workload.csv)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuFunction:
    """A workload served as a function on a GPU."""

    model: str
    memory_gib: float
    weight_bytes: int
    forward_s: float
    cold_start_s: float
    source: str


def gpu_cold_start(
    profile: WorkloadProfile,
    gpu: GpuSpec,
    *,
    links: dict[str, float | None],
    sources: dict[str, str],
    container_s: float | None = None,
    cuda_context_s: float | None = None,
) -> tuple[ColdStartPrediction, dict[str, str]]:
    """The cold start of ``profile``'s model on ``gpu`` (weights through ``links`` and the
    GPU's PCIe link; container, CUDA context and first call from ``coldstart.csv`` unless
    given) and the assumptions it rests on."""
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.predict.coldstart import predict_cold_start

    facts = load_coldstart_facts()
    links = dict(links)
    sources = dict(sources)
    assumptions: dict[str, str] = {}
    pcie = facts.get("link", f"pcie{gpu.pcie_generation}")
    links[f"pcie{gpu.pcie_generation}"] = pcie.value
    sources["pcie"] = pcie.source()

    def phase(name: str, given: float | None, flag: str) -> float:
        if given is not None:
            sources[name] = f"--{flag} {given:g}"
            return given
        fact = facts.get("phase", name)
        assumptions[name] = f"{fact.value:g} s ({fact.note}); set --{flag}"
        sources[name] = fact.source()
        return fact.value

    container = phase("container-start", container_s, "container-s")
    context = phase("cuda-context", cuda_context_s, "cuda-context-s")
    first_call = facts.get("phase", "first-call")
    assumptions["first-call"] = f"{first_call.value:g} s ({first_call.note})"
    prediction = predict_cold_start(
        weight_bytes=profile.memory.weights_bytes,
        parameter_tensors=0,
        inference_flops=profile.inference_flops,
        links_gbs=links,
        flops=gpu.fp32_tflops * 1e12,
        memory_gbs=gpu.memory_bandwidth_gbps,
        container_s=container,
        cuda_context_s=context,
        first_call_s=first_call.value,
        sources={**sources, "forward": f"roofline on {gpu.name} (fp32 peak, memory bandwidth)"},
    )
    return prediction, assumptions


def gpu_function(
    model: str, gpu: GpuSpec, *, storage: str, network_gbps: float | None
) -> GpuFunction:
    """The memory, forward time and cold start of ``model`` on ``gpu`` (module docstring)."""
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.domain.units import GIB
    from gpucast.inputs.workload import check_workload_name, workload_profile
    from gpucast.predict.coldstart import forward_s

    check_workload_name(model)
    fact = load_coldstart_facts().get("storage", storage)
    links: dict[str, float | None] = {storage: fact.value}
    if network_gbps is not None:
        links["network"] = network_gbps / 8.0
    profile = workload_profile(model, "fp32", batch_size=1)
    memory_gib = profile.memory.inference_peak_bytes / GIB
    if memory_gib > gpu.memory_gib:
        raise InvalidSpecError(
            "models",
            f"{model} needs {memory_gib:.1f} GiB at batch 1, more than the {gpu.memory_gib:g} "
            f"GiB of a {gpu.name}",
            fix="pick a GPU with more memory (--gpu) or a smaller model",
        )
    cold, _ = gpu_cold_start(profile, gpu, links=links, sources={"storage": fact.source()})
    return GpuFunction(
        model=model,
        memory_gib=memory_gib,
        weight_bytes=cold.weight_bytes,
        forward_s=forward_s(
            profile.inference_flops,
            cold.weight_bytes,
            flops=gpu.fp32_tflops * 1e12,
            memory_gbs=gpu.memory_bandwidth_gbps,
        ),
        cold_start_s=cold.total_s,
        source=f"{model}: {memory_gib:.2f} GiB held warm, cold start {cold.total_s:.2f} s "
        f"(weights {cold.weight_load_s:.2f} s bound by {cold.bound_by})",
    )


def kernel_sequence(model: str, gpu: GpuSpec) -> tuple[npt.NDArray[np.float64], str]:
    """The kernels of one batch-1 forward pass of ``model`` on ``gpu`` (seconds each) and
    where they come from: the profile's inference operators by class (count, FLOPs, bytes
    moved), each class's kernels equal, each class's time its roofline (compute- or
    memory-bound, :func:`gpucast.predict.coldstart.forward_s`); classes in profile order."""
    from gpucast.inputs.workload import check_workload_name, workload_profile
    from gpucast.predict.coldstart import forward_s

    check_workload_name(model)
    profile = workload_profile(model, "fp32", batch_size=1)
    phase = next(p for p in profile.phases if p.phase == "inference")
    parts = []
    for c in phase.by_class:
        if c.calls <= 0:
            continue
        total = forward_s(
            c.flops + c.approx_uncounted_flops,
            c.bytes_moved,
            flops=gpu.fp32_tflops * 1e12,
            memory_gbs=gpu.memory_bandwidth_gbps,
        )
        parts.append(np.full(c.calls, total / c.calls))
    seq = np.concatenate(parts) if parts else np.zeros(1)
    return seq, (
        f"{model}: {seq.size} kernels, {seq.sum() * 1e3:.2f} ms on {gpu.name} (profiled "
        "inference operators by class, roofline per class)"
    )

"""The kernel model's inputs: stored ``--kernels`` runs and the devices they ran on.

A device's specs for :class:`gpucast.predict.kernels.KernelDevice`:

* this machine's CPU: :func:`gpucast.inputs.calibration.host_cpu_roofline` (32 FLOP per cycle
  at 2.5 GHz per core, 10 GB/s per core) at the run's torch threads -- rough datasheet-style
  figures, the same the roofline calibration uses;
* a catalog CPU instance (``catalog/data/cpu_instances.csv``): its physical cores (capped at
  the run's threads) x clock x 32 FLOP per cycle, its memory bandwidth up to 10 GB/s per core
  (what those cores draw, as for this machine's CPU and in ``predict cmd``);
* a catalog GPU: its peak at the run's precision, its memory bandwidth, its SMs as cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpucast.domain.errors import InvalidInputError
from gpucast.domain.kernels import KernelTrace
from gpucast.domain.provenance import Sourced
from gpucast.inputs.calibration import CPU_FLOP_PER_CYCLE, CPU_GBPS_PER_CORE, host_cpu_roofline
from gpucast.predict.kernels import KernelDevice, KernelObservation
from gpucast.store.records import StoredRun

KERNELS_FIX = "measure it with --kernels (gpucast measure train WORKLOAD --kernels)"


def host_device(threads: int) -> KernelDevice:
    """This machine's CPU at ``threads`` cores (module docstring)."""
    roof = host_cpu_roofline(max(1, threads))
    return KernelDevice(
        name=f"cpu x{max(1, threads)}",
        kind="cpu",
        peak_flops_per_s=roof.peak_tflops * 1e12,
        memory_bandwidth_bytes_per_s=roof.memory_bandwidth_gbps * 1e9,
        cores=max(1, threads),
    )


def cpu_instance_device(name: str, threads: int) -> KernelDevice:
    """Catalog CPU instance ``name`` at the run's ``threads`` (module docstring)."""
    from gpucast.catalog.cpu_instances import cpu_instances

    instance = cpu_instances((name,), field="cpu-instance")[0]
    cores = max(1, min(threads, instance.vcpus // max(1, instance.threads_per_core)))
    return KernelDevice(
        name=f"{instance.instance_type} x{cores}",
        kind="cpu",
        peak_flops_per_s=cores * CPU_FLOP_PER_CYCLE * instance.clock_ghz * 1e9,
        # what ``cores`` cores draw (QA 41: one thread was given the whole socket's 307 GB/s,
        # 30x the training machine's per-core figure; predict cmd caps it the same way)
        memory_bandwidth_bytes_per_s=min(instance.memory_bandwidth_gbs, CPU_GBPS_PER_CORE * cores)
        * 1e9,
        cores=cores,
    )


def gpu_device(catalog: Any, name: str, precision: str) -> KernelDevice:
    """Catalog GPU ``name`` at ``precision`` (module docstring)."""
    gpu = catalog.gpu(name)
    return KernelDevice(
        name=gpu.name,
        kind="gpu",
        peak_flops_per_s=gpu.matrix_tflops(precision) * 1e12,
        memory_bandwidth_bytes_per_s=gpu.memory_bandwidth_gbps * 1e9,
        cores=gpu.sm_count,
    )


def run_device(run: StoredRun, catalog: Any) -> Sourced[KernelDevice]:
    """The device a stored run was measured on, with where its specs come from."""
    from gpucast.domain.errors import UnknownGpuError

    summary = run.summary
    if summary.device and summary.device.startswith("cuda") and summary.gpu_name:
        try:
            return Sourced(
                gpu_device(catalog, summary.gpu_name, summary.precision),
                f"catalog specs of {summary.gpu_name}",
            )
        except UnknownGpuError:
            pass
    threads = int(run.result.get("environment", {}).get("torch_threads", 0) or 1)
    return Sourced(
        host_device(threads),
        f"this machine's CPU at {threads} torch thread(s), rough specs "
        "(gpucast.inputs.calibration.host_cpu_roofline)",
    )


def trace_of(store: Any, run_id: int) -> tuple[StoredRun, KernelTrace]:
    """A stored run and its kernel trace; a run without one fails in one line."""
    run = store.get_run(run_id)
    if run.kind != "measurement":
        raise InvalidInputError(
            f"run {run_id} is a {run.kind}, not a measurement with kernel data", fix=KERNELS_FIX
        )
    trace = store.kernel_trace(run_id)
    if trace is None:
        raise InvalidInputError(
            f"run {run_id} ({run.summary.workload}) has no kernel data", fix=KERNELS_FIX
        )
    return run, trace


def observations(
    db: Path, run_ids: tuple[int, ...], catalog: Any
) -> tuple[list[KernelObservation], list[int]]:
    """The stored ``--kernels`` runs ``run_ids`` as the kernel model's training data (and
    their ids)."""
    from gpucast.store.db import Store

    out: list[KernelObservation] = []
    with Store(db).open(create=False) as store:
        for run_id in run_ids:
            run, trace = trace_of(store, run_id)
            if run.summary.median_s is None:
                raise InvalidInputError(f"run {run_id} has no measured step time", fix=KERNELS_FIX)
            out.append(
                KernelObservation(
                    workload=run.summary.workload,
                    device=run_device(run, catalog).value,
                    trace=trace,
                    step_time_s=run.summary.median_s,
                )
            )
    return out, list(run_ids)

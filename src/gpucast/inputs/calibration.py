"""Step-time inputs: the fitted efficiencies, and a measurement that sharpens them.

:func:`step_time_efficiency` is the roofline's efficiency set for a software stack: from the
step-time model shipped in the catalog (fitted on every published source, with intervals that
cross-validation earned; :mod:`gpucast.catalog.steptime`), or a model file the user fitted
(``gpucast fit steptime``), else the documented priors.

:func:`store_calibration` finds a stored training measurement of the workload (run
``prefer_run`` when given, else the newest at the precision, any batch, any device) and
calibrates the roofline with it (:func:`gpucast.predict.roofline.calibrate`): the measured
step at its own batch against the roofline of that batch on that device. Given the batch to
predict, the stored measurement nearest it is used. A CPU measurement is
calibrated against :func:`host_cpu_roofline`, the one rough peak of this machine's CPU.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.provenance import Sourced

if TYPE_CHECKING:
    from gpucast.plan.inputs import WorkloadFacts
    from gpucast.predict.roofline import Calibration, DeviceRoofline, RooflineEfficiency


def step_time_efficiency(
    software: str = "pytorch", model_file: Path | None = None
) -> Sourced[RooflineEfficiency]:
    """The roofline efficiencies for ``software``: a fitted model file, else the shipped
    model, else the priors (the source says which)."""
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.predict.roofline import RooflineEfficiency
    from gpucast.predict.steptime import StepTimeModel

    if model_file is not None:
        from gpucast.domain.errors import InvalidSpecError
        from gpucast.store.models import load_model

        model = load_model(Path(model_file))
        if not isinstance(model, StepTimeModel):
            raise InvalidSpecError(
                "steptime-model",
                f"holds a {model.kind!r} model, not a step-time model",
                got=str(model_file),
                fix="pass a file written by `gpucast fit steptime`",
            )
        eff = with_sibling_factors(model.efficiency(software))
        return Sourced(eff, f"{model_file}: {eff.source}")
    shipped = shipped_step_time_model()
    if shipped is None:
        return Sourced(RooflineEfficiency(stack=software), RooflineEfficiency().source)
    eff = with_sibling_factors(shipped.efficiency(software))
    return Sourced(eff, f"gpucast/catalog/data/steptime.json: {eff.source}")


def with_sibling_factors(eff: RooflineEfficiency) -> RooflineEfficiency:
    """``eff`` whose GPU factors also cover catalog GPUs of the same silicon: first the same
    chip at the same clocks (vendor, architecture, every peak and the bandwidth equal; only
    the memory size differs, e.g. V100-16GB and V100-32GB), then the same die and memory
    system on another board (vendor, architecture, SM count and bandwidth equal; clocks and
    power differ, e.g. the V100's PCIe and SXM2 boards, whose peaks carry the clocks). A factor
    is what the silicon sustains relative to its datasheet; one fitted on one board applies to
    its siblings, and ``sibling_factors`` names the board it was fitted on."""
    import dataclasses

    from gpucast.catalog import load_catalog

    def chip(g: Any) -> tuple[Any, ...]:
        return (g.vendor, g.architecture, g.fp32_tflops, g.tf32_tflops, g.fp16_tflops,
                g.bf16_tflops, g.fp8_tflops, g.fp32_dedicated_tflops, g.sustained_clock_mhz,
                g.memory_bandwidth_gbps)  # fmt: skip

    def die(g: Any) -> tuple[Any, ...]:
        return (g.vendor, g.architecture, g.sm_count, g.memory_bandwidth_gbps)

    gpus = load_catalog().gpus
    factors = dict(eff.gpu_factors)
    donors = dict(eff.sibling_factors)
    for key in (chip, die):
        fitted: dict[tuple[Any, ...], list[str]] = {}
        for g in gpus:
            if g.name in eff.gpu_factors:
                fitted.setdefault(key(g), []).append(g.name)
        for g in gpus:
            found = fitted.get(key(g), [])
            if g.name not in factors and len(found) == 1:  # two fitted boards: no one donor
                factors[g.name] = eff.gpu_factors[found[0]]
                donors[g.name] = found[0]
    return dataclasses.replace(eff, gpu_factors=factors, sibling_factors=donors)


#: Rough CPU peak: FP32 FLOP per cycle per core (AVX2, two FMA units) at a typical clock.
CPU_FLOP_PER_CYCLE = 32
CPU_CLOCK_HZ = 2.5e9
#: DRAM bandwidth per core (GB/s), capped at a two-socket server's.
CPU_GBPS_PER_CORE = 10.0
CPU_GBPS_MAX = 200.0


def host_cpu_roofline(cores: int | None = None) -> DeviceRoofline:
    """Rough peak of this machine's CPU (for calibrating from a CPU measurement)."""
    from gpucast.predict.roofline import DeviceRoofline

    n = cores or os.cpu_count() or 1
    return DeviceRoofline(
        name="cpu",
        kind="cpu",
        peak_tflops=n * CPU_FLOP_PER_CYCLE * CPU_CLOCK_HZ / 1e12,
        memory_bandwidth_gbps=min(CPU_GBPS_MAX, CPU_GBPS_PER_CORE * n),
    )


def store_calibration(
    db_path: Path | None,
    workload: str,
    precision: str,
    facts: WorkloadFacts,
    catalog: Any,
    *,
    prefer_run: int | None = None,
    efficiency: RooflineEfficiency | None = None,
    batch: int | None = None,
    gpu: str | None = None,
    prefer_gpu: str | None = None,
) -> Sourced[Calibration] | None:
    """The roofline calibrated by a stored training measurement of ``workload`` (module
    docstring); with ``batch``, the measurement whose batch is nearest it (in doublings; the
    newest of equals), since the error of a calibration grows with the distance between the
    batches; with ``gpu`` (a catalog name), only measurements on that GPU type, with
    ``prefer_gpu`` those first (else any); ``None`` when the store has none."""
    from gpucast.domain.errors import UnknownGpuError
    from gpucast.predict.roofline import calibrate

    def on(r: Any, name: str) -> bool:
        try:
            return bool(catalog.gpu(r.gpu_name or "").name == name)
        except UnknownGpuError:
            return False

    runs = [
        r
        for r in _training_runs(db_path, workload, precision, prefer_run)
        if gpu is None or on(r, gpu)
    ]
    if prefer_gpu is not None:
        runs = [r for r in runs if on(r, prefer_gpu)] or runs
    if batch is not None and batch > 0:
        runs.sort(key=lambda r: abs(math.log2(max(r.batch_size or batch, 1) / batch)))
    if not runs:
        return None
    run = runs[0]
    try:
        device: Any = catalog.gpu(run.gpu_name or "")
    except UnknownGpuError:
        device = host_cpu_roofline()

    def calibration_of(r: Any) -> Calibration:
        return calibrate(
            facts.roofline_workload(r.batch_size), r.median_s, device, precision,
            efficiency=efficiency,
        )  # fmt: skip

    # the same device's measurements at other batches (the newest at each batch)
    others: dict[int, Any] = {}
    for r in sorted(runs[1:], key=lambda r: -r.id):
        if (r.gpu_name, r.device) == (run.gpu_name, run.device) and r.batch_size != run.batch_size:
            others.setdefault(r.batch_size, r)
    cal = dataclasses.replace(
        calibration_of(run), others=tuple(calibration_of(others[b]) for b in sorted(others))
    )
    more = f"; and at batches {', '.join(str(b) for b in sorted(others))}" if others else ""
    return Sourced(
        cal,
        f"store run #{run.id} ({run.device}, batch {run.batch_size}, "
        f"{run.median_s * 1e3:.3g} ms/step){more}",
    )


def measured_gpus(db_path: Path | None, workload: str, precision: str) -> tuple[str, ...]:
    """The GPU names (as measured) of the stored training measurements of ``workload`` at
    ``precision``, newest first."""
    runs = _training_runs(db_path, workload, precision)
    return tuple(dict.fromkeys(r.gpu_name for r in runs if r.gpu_name))


def _training_runs(
    db_path: Path | None, workload: str, precision: str, prefer_run: int | None = None
) -> list[Any]:
    """The store's training measurements of ``workload`` at ``precision`` with a median step
    (newest first; only run ``prefer_run`` when given)."""
    if db_path is None or not Path(db_path).exists():
        return []
    from gpucast.store.db import Store

    with Store(db_path).open(create=False) as store:
        runs = store.list_runs(kind="measurement", workload=workload, limit=50)
        if prefer_run is not None:
            runs = [store.get_run(prefer_run).summary]
    return [
        r
        for r in runs
        if r.precision == precision and r.median_s is not None and r.mode in (None, "train")
    ]

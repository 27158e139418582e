"""Step-time inputs: the fitted efficiencies, and a measurement that sharpens them.

:func:`step_time_efficiency` is the roofline's efficiency set for a software stack: from the
step-time model shipped in the catalog (fitted on every published source, with intervals that
cross-validation earned; :mod:`gpucast.catalog.steptime`), or a model file the user fitted
(``gpucast fit steptime``), else the documented priors.

:func:`store_calibration` finds a stored training measurement of the workload on a catalog
GPU (run ``prefer_run`` when given, else the newest at the precision, any batch, any GPU) and
calibrates the roofline with it (:func:`gpucast.predict.roofline.calibrate`): the measured
step at its own batch against the roofline of that batch on that GPU. Given the batch to
predict, the stored measurement nearest it is used. A measurement on a CPU (or on a GPU the
catalog does not have) calibrates no prediction, at any precision: a CPU's step time does not
tell a GPU's per-kernel costs (:mod:`gpucast.predict.roofline`), and no roofline of an unknown
GPU relates its step to another's. :func:`uncalibrated_source` says so, naming those runs,
where no GPU measurement calibrates.

A measurement taken under a power limit below the GPU's default (``gpucast measure train
--power-limits``: the limit NVML enforced while the steps ran, ``energy.power_limit_w``) is a
throttled step, not the step at the default limit every prediction starts from. Where the
store holds a run at the default limit (or one without a recorded limit) at the same batch on
the same device, the throttled run is left out; otherwise its step is converted to the
default limit by the power model's slowdown (:meth:`gpucast.predict.power.PowerModel.sweep`:
the step at the run's limit, and its measured average power when recorded, as the reference;
the shipped power model), and the calibration's source says so.

:func:`stored_power_reading` is the run ``predict energy`` takes its measured step and average
power from: at the batch on the GPU type, taken at the limit asked for (the model's
``measured_power`` regime).
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
    """Rough peak of this machine's CPU (the kernel models' CPU device,
    :mod:`gpucast.inputs.kernels`)."""
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
    ``prefer_gpu`` those first (else any); ``None`` when the store has none. A run under a
    reduced power limit is left out or converted to the default limit (module docstring)."""
    from gpucast.predict.roofline import calibrate

    def on(r: TrainingRun, name: str) -> bool:
        spec = r.catalog_gpu(catalog)
        return spec is not None and spec.name == name

    runs = [
        r
        for r in training_runs(db_path, workload, precision, prefer_run)
        if r.catalog_gpu(catalog) is not None and (gpu is None or on(r, gpu))
    ]
    runs = _at_default_limit_first(runs, catalog)
    if prefer_gpu is not None:
        runs = [r for r in runs if on(r, prefer_gpu)] or runs
    if batch is not None and batch > 0:
        runs.sort(key=lambda r: abs(math.log2(max(r.summary.batch_size or batch, 1) / batch)))
    if not runs:
        return None
    run = runs[0]
    device: Any = run.catalog_gpu(catalog)

    def default_step(r: TrainingRun) -> tuple[float, str]:
        """The run's step at the device's default limit and how it was had."""
        s = r.summary
        said = f"{s.median_s * 1e3:.3g} ms/step"
        throttled = r.throttled_below(catalog)
        if throttled is None:
            return s.median_s, said
        step = _step_at_default_limit(r, device, facts, precision, efficiency)
        return step, (
            f"{said} under a {r.power_limit_w:g} W power limit, below the default "
            f"{throttled:g} W: {step * 1e3:.3g} ms/step at the default by the power model's "
            "slowdown"
        )

    def calibration_of(r: TrainingRun) -> Calibration:
        return calibrate(
            facts.roofline_workload(r.summary.batch_size), default_step(r)[0], device,
            precision, efficiency=efficiency,
        )  # fmt: skip

    # the same device's measurements at other batches (the newest at each batch)
    others: dict[int, TrainingRun] = {}
    key = run.board(catalog)
    for r in sorted(runs[1:], key=lambda r: -r.summary.id):
        s = r.summary
        if r.board(catalog) == key and s.batch_size != run.summary.batch_size:
            others.setdefault(s.batch_size, r)
    cal = dataclasses.replace(
        calibration_of(run), others=tuple(calibration_of(others[b]) for b in sorted(others))
    )
    more = f"; and at batches {', '.join(str(b) for b in sorted(others))}" if others else ""
    converted = [f"#{o.summary.id}" for o in others.values() if o.throttled_below(catalog)]
    if converted:
        more += f" ({', '.join(converted)} converted to the default power limit likewise)"
    s = run.summary
    return Sourced(
        cal, f"store run #{s.id} ({s.device}, batch {s.batch_size}, {default_step(run)[1]}){more}"
    )


def uncalibrated_source(db_path: Path | None, workload: str, precision: str, catalog: Any) -> str:
    """Why no stored measurement calibrates a GPU prediction of ``workload`` at ``precision``
    (:func:`store_calibration` found none): the store has none on a GPU, and the runs it has on
    a CPU or an unknown GPU, at any precision, calibrate none (named, newest first)."""
    where = "" if db_path is None else f" in {db_path}"
    said = f"no stored training measurement of {workload} at {precision} on a GPU{where}"
    plain = workload.split(" -o ")[0]
    if plain != workload and training_runs(db_path, plain, None):
        said += (
            f"; the store's runs of {plain} ran at its built-in options, which calibrate no "
            f"other configuration (measure this one: `gpucast measure train "
            f"{workload} --device cuda` on this GPU type)"
        )
    if plain == workload:
        configured = _configurations_measured(db_path, workload)
        if configured:
            said += (
                f"; the store's runs of {', '.join(configured[:3])}"
                + (f" and {len(configured) - 3} more" if len(configured) > 3 else "")
                + " calibrate those configurations only (predict with the same -o)"
            )
    stored = training_runs(db_path, workload, None)
    elsewhere = [
        r for r in stored if r.catalog_gpu(catalog) is not None and r.summary.precision != precision
    ]
    if elsewhere:  # on a GPU, at another precision: say which calibrates what
        r = elsewhere[0]
        said += (
            f"; store run #{r.summary.id} ({r.summary.gpu_name}, batch {r.summary.batch_size}) "
            f"ran {r.summary.precision}: it calibrates --precision {r.summary.precision}, not "
            f"{precision} (measure with `gpucast measure train {workload} --precision "
            f"{precision}`, or predict at --precision {r.summary.precision})"
        )
    unused = [r for r in stored if r.catalog_gpu(catalog) is None]
    if not unused:
        return said
    runs = ", ".join(
        f"#{r.summary.id} ({r.summary.gpu_name or r.summary.device}, batch "
        f"{r.summary.batch_size}, {r.summary.precision}, {r.summary.median_s * 1e3:.3g} ms/step)"
        for r in unused[:3]
    ) + (f" and {len(unused) - 3} more" if len(unused) > 3 else "")
    unknown = any(r.summary.gpu_name for r in unused)
    return (
        f"{said}; store run{'s' if len(unused) > 1 else ''} {runs} "
        f"calibrate{'' if len(unused) > 1 else 's'} no GPU prediction, at any precision: a "
        "CPU's step time does not tell a GPU's per-kernel costs"
        + (" (nor has a GPU the catalog lacks a roofline to relate)" if unknown else "")
        + ", so the step keeps the fitted model's value and the band of its uncalibrated regime"
    )


def measured_gpus(db_path: Path | None, workload: str, precision: str) -> tuple[str, ...]:
    """The GPU names (as measured) of the stored training measurements of ``workload`` at
    ``precision``, newest first."""
    runs = training_runs(db_path, workload, precision)
    return tuple(dict.fromkeys(r.summary.gpu_name for r in runs if r.summary.gpu_name))


#: A recorded limit below this share of the GPU's default is a reduced limit (NVML reports
#: the default to the watt; boards of one catalog row differ by a few watts at most).
DEFAULT_LIMIT_TOLERANCE = 0.99


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TrainingRun:
    """A stored training measurement: its summary, and from its energy record the power
    limit NVML enforced while the steps ran and the board's average power (``None``: not
    recorded)."""

    summary: Any  # gpucast.store.records.RunSummary
    power_limit_w: float | None = None
    gpu_avg_power_w: float | None = None

    def catalog_gpu(self, catalog: Any) -> Any:
        """The catalog GPU the run was measured on (``None``: a CPU run, or a GPU the catalog
        does not have)."""
        from gpucast.domain.errors import UnknownGpuError

        if not self.summary.gpu_name:
            return None
        try:
            return catalog.gpu(self.summary.gpu_name)
        except UnknownGpuError:
            return None

    def board(self, catalog: Any) -> tuple[str | None, str | None]:
        """The (catalog GPU, device) the run was measured on: the catalog's name, so runs whose
        drivers spelt one GPU differently (``NVIDIA A100-SXM4-40GB``, ``A100-SXM4-40GB``)
        are one board; the stored name where the catalog lacks the GPU."""
        spec = self.catalog_gpu(catalog)
        return (self.summary.gpu_name if spec is None else spec.name), self.summary.device

    def default_limit_w(self, catalog: Any) -> float | None:
        """The catalog's default power limit of the run's GPU (``None``: unknown GPU or no
        power facts)."""
        spec = self.catalog_gpu(catalog)
        return None if spec is None else spec.max_power_limit_w

    def throttled_below(self, catalog: Any) -> float | None:
        """The GPU's default limit when the run was taken under a lower one, else ``None``."""
        default = self.default_limit_w(catalog)
        if self.power_limit_w is None or default is None:
            return None
        return default if self.power_limit_w < DEFAULT_LIMIT_TOLERANCE * default else None


def _at_default_limit_first(runs: list[TrainingRun], catalog: Any) -> list[TrainingRun]:
    """``runs`` less each run under a reduced power limit that has a run at the default limit
    (or with no recorded limit) at the same batch on the same device (order kept)."""
    unthrottled = {
        (*r.board(catalog), r.summary.batch_size)
        for r in runs
        if r.throttled_below(catalog) is None
    }
    return [
        r
        for r in runs
        if r.throttled_below(catalog) is None
        or (*r.board(catalog), r.summary.batch_size) not in unthrottled
    ]


def _step_at_default_limit(
    run: TrainingRun,
    device: Any,
    facts: WorkloadFacts,
    precision: str,
    efficiency: RooflineEfficiency | None,
) -> float:
    """The step of ``run`` (taken under a reduced power limit on ``device``) at the device's
    default limit: the power model's sweep from the run's limit (its measured average power
    calibrating the model when recorded) to the default."""
    from gpucast.inputs.energy import power_model, power_terms
    from gpucast.predict.power import BoardPower
    from gpucast.predict.roofline import RooflineEfficiency

    assert run.power_limit_w is not None  # only throttled runs are converted
    board = BoardPower.of_gpu(device)
    terms, _ = power_terms(
        facts, run.summary.batch_size, device, precision, efficiency or RooflineEfficiency()
    )
    frame = power_model().value.sweep(
        terms,
        board,
        [board.max_power_limit_w],
        step_time_s=run.summary.median_s,
        measured_power_w=run.gpu_avg_power_w,
        reference_limit_w=run.power_limit_w,
    )
    return float(frame["step_time_s"].iloc[0])


def stored_power_reading(
    db_path: Path | None,
    workload: str,
    precision: str,
    batch_size: int,
    gpu: Any,
    catalog: Any,
    limit_w: float,
) -> TrainingRun | None:
    """The newest stored training measurement of ``workload`` at ``precision`` and
    ``batch_size`` on catalog GPU type ``gpu`` whose power limit was ``limit_w`` (within half a
    watt or 1%: NVML reports the limit it enforced) and whose board energy was recorded;
    ``None`` when the store has none."""

    def on_gpu(r: TrainingRun) -> bool:
        spec = r.catalog_gpu(catalog)
        return spec is not None and spec.name == gpu.name

    tolerance = max(0.5, (1.0 - DEFAULT_LIMIT_TOLERANCE) * limit_w)
    for r in training_runs(db_path, workload, precision):  # newest first
        if (
            r.summary.batch_size == batch_size
            and r.power_limit_w is not None
            and r.gpu_avg_power_w is not None
            and r.gpu_avg_power_w > 0
            and abs(r.power_limit_w - limit_w) <= tolerance
            and on_gpu(r)
        ):
            return r
    return None


def _configurations_measured(db_path: Path | None, workload: str) -> list[str]:
    """The ``-o`` configurations of ``workload`` with a stored training measurement (their
    stored names, newest first)."""
    if db_path is None or not Path(db_path).exists():
        return []
    from gpucast.store.db import Store

    with Store(db_path).open(create=False) as store:
        runs = store.list_runs(kind="measurement", workload=workload, configurations=True)
    names = [r.workload for r in runs if r.mode in (None, "train") and r.workload != workload]
    return [n for n in dict.fromkeys(names) if not _names(n, workload)]


def _names(stored: str, workload: str) -> bool:
    """Whether a run stored as ``stored`` is of configuration ``workload``: the same name, or
    options at their built-in values that name it (``mlp -o hidden=1024,1024`` is ``mlp``: how
    a store written before session 38, or ``Store.save_measurement``, may hold it)."""
    if stored == workload:
        return True
    if stored.split(" -o ")[0] != workload.split(" -o ")[0] or " -o " not in stored:
        return False
    from gpucast.domain.errors import InvalidInputError
    from gpucast.inputs.workload import measured_name_of

    try:
        return measured_name_of(stored) == workload
    except InvalidInputError:  # options this gpucast no longer takes
        return False


def _stored_names(store: Any, workload: str) -> list[str]:
    """The stored names whose runs are of configuration ``workload`` (:func:`_names`)."""
    base = workload.split(" -o ")[0]
    runs = store.list_runs(kind="measurement", workload=base, configurations=True, limit=None)
    return [n for n in dict.fromkeys(r.workload for r in runs) if _names(n, workload)]


def training_runs(
    db_path: Path | None, workload: str, precision: str | None, prefer_run: int | None = None
) -> list[TrainingRun]:
    """The store's training measurements of ``workload`` at ``precision`` (``None``: any) with
    a median step (newest first; only run ``prefer_run`` when given), each with its recorded
    power limit and average board power."""
    if db_path is None or not Path(db_path).exists():
        return []
    from gpucast.store.db import Store

    out: list[TrainingRun] = []
    with Store(db_path).open(create=False) as store:
        runs = sorted(
            (
                r
                for name in _stored_names(store, workload) or [workload]
                for r in store.list_runs(kind="measurement", workload=name, limit=50)
            ),
            key=lambda r: -r.id,
        )[:50]
        if prefer_run is not None:
            runs = [store.get_run(prefer_run).summary]
        for r in runs:
            if precision is not None and r.precision != precision:
                continue
            if r.median_s is None or r.mode not in (None, "train"):
                continue
            limit_w = power_w = None
            if r.gpu_name:  # only a GPU run records a power limit
                energy = store.get_run(r.id).result.get("energy") or {}
                limit_w, power_w = energy.get("power_limit_w"), energy.get("gpu_avg_power_w")
            out.append(
                TrainingRun(
                    summary=r,
                    power_limit_w=None if limit_w is None else float(limit_w),
                    gpu_avg_power_w=None if power_w is None else float(power_w),
                )
            )
    return out

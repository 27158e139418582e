"""``gpucast.predict_kernels``: a measured step predicted operator by operator (issue #20.4).

The run's operator trace (``gpucast measure train|infer --kernels``) is priced by
:class:`gpucast.predict.kernels.KernelTimeModel`, a random forest fitted on the store's
*other* ``--kernels`` runs (every run of another workload, or ``--train-runs``): each call
predicted, summed per operator class, plus the fitted per-step overhead. Beside it: the
measured step (when predicting on the machine that measured it) and the roofline of the same
operators calibrated on the same training runs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.options import documented, option
from gpucast.domain.provenance import Assumption
from gpucast.domain.units import count_of

#: Fewer training workloads than this and the forest's validated error (six other models,
#: benchmarks/kernel_prediction.py) does not describe it: the prediction says so.
MIN_TRAIN_WORKLOADS = 3


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictKernelsRequest:
    """A stored ``--kernels`` run to predict (``gpucast predict kernels RUN_ID``)."""

    VERB: ClassVar[str] = "predict kernels"

    run: int = option(
        help="Id of a run measured with --kernels (gpucast measure train|infer ... --kernels).",
        argument=True,
        metavar="RUN_ID",
        example="3",
    )
    train_runs: tuple[int, ...] = option(
        (),
        help="Runs to fit the forest on (default: every stored --kernels run of another "
        "model; the same model at other -o options is not one).",
        example="1,2,4",
    )
    cpu_instance: str | None = option(
        None,
        help="Predict on this catalog CPU instance type instead of the measuring machine "
        "(not validated).",
        example="c7i.large",
    )
    gpu: str | None = option(
        None,
        help="Predict on this catalog GPU (needs training runs measured with --kernels on a GPU).",
        example="A100-40GB",
    )

    def __post_init__(self) -> None:
        for name, ids in (("run", (self.run,)), ("train-runs", self.train_runs)):
            for run in ids:
                if isinstance(run, bool) or not isinstance(run, int) or run < 1:
                    raise InvalidSpecError(name, "must be run ids >= 1", got=run)
        if self.run in self.train_runs:
            raise InvalidSpecError(
                "train-runs",
                f"must not hold the predicted run {self.run}",
                fix="fit on other runs",
            )
        if self.cpu_instance is not None and self.gpu is not None:
            raise InvalidSpecError(
                "gpu", "and --cpu-instance name two devices", fix="pass one of them"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelClassRow:
    """One operator class of the step: calls and predicted (and measured) seconds."""

    op_class: str
    calls_per_step: float
    predicted_s: float
    measured_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "op_class": self.op_class,
            "calls_per_step": self.calls_per_step,
            "predicted_s": self.predicted_s,
            "measured_s": self.measured_s,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictKernelsResult:
    """The step predicted from its operators, the roofline beside it, what it rests on."""

    run_id: int
    workload: str
    device: str
    device_source: str
    classes: tuple[KernelClassRow, ...]
    operator_time_s: float
    overhead_s: float
    step_time_s: float
    #: the harness's median step of the run (``None`` on another device)
    measured_step_s: float | None
    roofline_step_s: float
    train_runs: tuple[int, ...]
    train_workloads: tuple[str, ...]
    assumptions: tuple[Assumption, ...]
    validation: dict[str, Any]
    #: predicted energy of the step (J) and of its operators, and the measured operators'
    #: energy (same device only); ``None`` without energy readings in the training runs
    energy_j: float | None = None
    operator_energy_j: float | None = None
    measured_operator_energy_j: float | None = None
    #: why there is no energy prediction ("" when there is one)
    energy_note: str = ""
    #: what the prediction's footing lacks (e.g. a forest fitted on fewer workloads than the
    #: one validated)
    warnings: tuple[str, ...] = ()
    #: whether ``overhead_s`` is the floor (-50% of the operators) rather than the fit
    overhead_capped: bool = False

    @property
    def error_pct(self) -> float | None:
        if self.measured_step_s is None:
            return None
        return 100.0 * (self.step_time_s - self.measured_step_s) / self.measured_step_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workload": self.workload,
            "device": self.device,
            "device_source": self.device_source,
            "classes": [c.to_dict() for c in self.classes],
            "operator_time_s": self.operator_time_s,
            "overhead_s": self.overhead_s,
            "overhead_capped": self.overhead_capped,
            "step_time_s": self.step_time_s,
            "measured_step_s": self.measured_step_s,
            "error_pct": self.error_pct,
            "roofline_step_s": self.roofline_step_s,
            "train_runs": list(self.train_runs),
            "train_workloads": list(self.train_workloads),
            "assumptions": [a.to_dict() for a in self.assumptions],
            "validation": self.validation,
            "energy_j": self.energy_j,
            "power_w": None
            if self.energy_j is None or self.step_time_s <= 0
            else self.energy_j / self.step_time_s,
            "operator_energy_j": self.operator_energy_j,
            "measured_operator_energy_j": self.measured_operator_energy_j,
            "energy_note": self.energy_note,
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([c.to_dict() for c in self.classes])


def _model(run: Any) -> str:
    """The model a stored run measured, without its ``-o`` options."""
    spec = run.spec if isinstance(run.spec, dict) else {}
    return str(spec.get("name") or run.summary.workload)


def predict_kernels(
    request: PredictKernelsRequest | int | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> PredictKernelsResult:
    """Predict a ``--kernels`` run's step from its operators with a random forest fitted on
    the store's other ``--kernels`` runs (:mod:`gpucast.predict.kernels`)."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.kernels import (
        KERNELS_FIX,
        cpu_instance_device,
        gpu_device,
        observations,
        run_device,
        trace_of,
    )
    from gpucast.predict.kernels import KernelTimeModel, roofline_step_s
    from gpucast.store import Store, default_db_path

    if isinstance(request, int) and not isinstance(request, bool):
        request = resolve(PredictKernelsRequest, None, {"run": request, **options})
    else:
        request = resolve(PredictKernelsRequest, request, options)
    db_path = Path(db) if db is not None else default_db_path()
    catalog = load_catalog()
    with Store(db_path).open(create=False) as store:
        run, trace = trace_of(store, request.run)
        # another model, not this one at other -o options (QA 39: the validation is
        # leave-one-model-out)
        train_ids = request.train_runs or tuple(
            i
            for i in store.kernel_run_ids()
            if i != request.run and _model(store.get_run(i)) != _model(run)
        )
        own = run_device(run, catalog)
        mode_of = {i: store.get_run(i).summary.mode for i in store.kernel_run_ids()}
    if not train_ids:
        raise InvalidInputError(
            f"no other workload's --kernels run in {db_path} to fit the kernel model on",
            fix=f"{KERNELS_FIX.removesuffix(')')} for two or more other workloads)",
        )
    train, _ = observations(db_path, train_ids, catalog)
    kind = (trace.activity, trace.timer)
    if request.train_runs:
        for run_id, o in zip(train_ids, train, strict=True):
            if (o.trace.activity, o.trace.timer) != kind:
                raise InvalidInputError(
                    f"--train-runs {run_id}: its operators were timed as "
                    f"{o.trace.activity}/{o.trace.timer}, run {request.run}'s as "
                    f"{kind[0]}/{kind[1]}",
                    fix="fit on runs measured the same way (--timer, CPU or GPU)",
                )
    else:
        kept = [(i, o) for i, o in zip(train_ids, train, strict=True)
                if (o.trace.activity, o.trace.timer) == kind]  # fmt: skip
        if not kept:
            raise InvalidInputError(
                f"no other workload's --kernels run timed like run {request.run} "
                f"({kind[0]} operators, --timer {kind[1]}) in {db_path}",
                fix=f"measure two or more other workloads with --kernels --timer {kind[1]}",
            )
        train_ids = tuple(i for i, _ in kept)
        train = [o for _, o in kept]
    assumptions: list[Assumption] = []
    if request.gpu is not None:
        if all(o.device.kind != "gpu" for o in train):
            raise InvalidInputError(
                f"gpu: the training runs ({', '.join(map(str, train_ids))}) hold CPU operator "
                f"times only; the forest cannot learn GPU kernels from them (got {request.gpu!r})",
                fix="measure runs on a GPU with --kernels and pass them with --train-runs",
            )
        device = gpu_device(catalog, request.gpu, run.summary.precision)
        device_source = f"catalog specs of {device.name} ({run.summary.precision} peak)"
    elif request.cpu_instance is not None:
        threads = own.value.cores if own.value.kind == "cpu" else 1
        device = cpu_instance_device(request.cpu_instance, threads)
        device_source = (
            f"catalog CPU instance {request.cpu_instance}: {count_of(device.cores, 'core')} "
            f"x clock x 32 FLOP/cycle = {device.peak_flops_per_s / 1e9:.0f} GFLOP/s, "
            f"{device.memory_bandwidth_bytes_per_s / 1e9:.0f} GB/s"
        )
        assumptions.append(
            Assumption(
                name="another CPU",
                value="the operators' efficiency relative to their roofline carries over",
                source="trained on one machine, the forest sees no other device's specs "
                "(not validated)",
            )
        )
    else:
        device, device_source = own.value, own.source
    if all(o.device.kind == "cpu" for o in train) and own.value.kind == "cpu":
        assumptions.append(
            Assumption(  # QA 41: with --cpu-instance they read as the target's
                name="CPU specs" if device == own.value else "training runs' CPU specs",
                value=f"{own.value.peak_flops_per_s / 1e9:.0f} GFLOP/s, "
                f"{own.value.memory_bandwidth_bytes_per_s / 1e9:.0f} GB/s",
                source=own.source,
            )
        )
    model = KernelTimeModel().fit(train)
    predicted = model.predict_step(trace, device)
    same_device = device == own.value
    measured_by_class = trace.by_class()
    classes = tuple(
        KernelClassRow(
            op_class=c,
            calls_per_step=measured_by_class[c][0],
            predicted_s=predicted.by_class_s[c],
            measured_s=measured_by_class[c][1] if same_device else None,
        )
        for c in predicted.by_class_s
        if measured_by_class[c][0] > 0
    )
    energy_note = ""
    if model.has_power:
        metered = model.training["operators_with_power"]
        assumptions.append(
            Assumption(
                name="power per call",
                value=f"a random forest fitted on {metered} operator energy readings "
                f"({', '.join(sorted({o.trace.energy_source for o in train} - {''}))}); "
                "a package's or board's power, idle draw included",
                source=validation_for("kernel-forest-power", (), "fp32", 1).error
                or "not validated",
            )
        )
    else:
        notes = sorted({o.trace.energy_note for o in train if o.trace.energy_note})
        energy_note = "time only: the training runs have no energy readings" + (
            f" ({notes[0]})" if notes else ""
        )
    scale = statistics.median(o.step_time_s / roofline_step_s(o.trace, o.device) for o in train)
    regime = ("cpu",) if same_device and device.kind == "cpu" else (device.name,)
    check = validation_for("kernel-forest", regime, run.summary.precision, 1)
    workloads = tuple(sorted({o.workload for o in train}))
    warnings = []
    mode = run.summary.mode
    if mode != "train":  # the forest's validation times training steps only
        modes = sorted({str(mode_of.get(i)) for i in train_ids})
        warnings.append(
            f"run {request.run} times {mode} steps; the forest was fitted on "
            f"{'/'.join(modes)} steps and validated on training steps only, so its validated "
            "error does not describe this prediction"
        )
    if predicted.overhead_capped:  # QA 39: shown as "fitted"
        warnings.append(
            "the fitted per-call overhead would take more than half the operators' time off "
            f"the step; capped at {predicted.overhead_s * 1e3:+.3g} ms (-50% of the "
            "operators): the training runs' steps are much shorter than their profiled calls, "
            "so the step rests on that floor, not on the fit"
        )
    if len(workloads) < MIN_TRAIN_WORKLOADS:
        warnings.append(
            f"the forest is fitted on {count_of(len(workloads), 'workload')} "
            f"({', '.join(workloads)}); its validated error is that of a forest fitted on six "
            "other models, so expect a larger one here: measure more workloads with --kernels "
            "(gpucast measure train WORKLOAD --kernels)"
        )
    return PredictKernelsResult(
        run_id=request.run,
        workload=run.summary.workload,
        device=device.name,
        device_source=device_source,
        classes=classes,
        operator_time_s=predicted.operator_time_s,
        overhead_s=predicted.overhead_s,
        overhead_capped=predicted.overhead_capped,
        step_time_s=predicted.step_time_s,
        measured_step_s=run.summary.median_s if same_device else None,
        roofline_step_s=scale * roofline_step_s(trace, device),
        train_runs=tuple(train_ids),
        train_workloads=workloads,
        assumptions=tuple(assumptions),
        validation={
            "model": "kernel-forest",
            "error": check.error,
            "data": check.data,
            "command": check.command,
        },
        energy_j=predicted.energy_j,
        operator_energy_j=math.fsum(predicted.by_class_j.values())
        if predicted.energy_j is not None
        else None,
        measured_operator_energy_j=trace.energy_j_per_step if same_device else None,
        energy_note=energy_note,
        warnings=tuple(warnings),
    )

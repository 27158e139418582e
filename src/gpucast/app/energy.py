"""``gpucast.fit_power`` and ``gpucast.predict_energy``: GPU power, power limits and energy.

* :func:`fit_power` -- fit :class:`gpucast.predict.power.PowerModel` on the Zeus NSDI 2023
  power-limit sweeps (``zeus_nsdi23/``: time per epoch and average board power of 6 models x
  batch sizes x power limits on V100, P100 and RTX 6000), cross-validate it leaving one GPU
  out for the 80% intervals of each regime, and write it as JSON. The shipped model
  (``gpucast/catalog/data/power.json``) is this verb's output on ``../shared/data``.
* :func:`predict_energy` -- one training step of a workload on a GPU under a power limit:
  step time (the roofline step of ``predict train`` at the GPU's default limit, slowed as the
  cap lowers the clock), average board power, energy per step and per epoch, and the whole
  power-limit sweep with the limit Zeus's energy-time cost picks (``--power-limit auto``).
  A stored training run of the workload at the batch on the GPU type, taken at the limit asked
  for (the default for none or ``auto``) with its board energy recorded (``gpucast measure
  train [--power-limits ...]``), gives the step and average power there as measured and
  calibrates the sweep (the ``measured_power`` regime: leave-one-GPU-out power MAPE 4.6%, not
  the predicted regime's 20.6%); ``--step-time-s``/``--power-w`` take precedence over it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.energy import JOULES_PER_KWH, check_eta, eta_option, power_limit_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import documented, lower_text, option
from gpucast.domain.workload import (
    SOFTWARE_HELP,
    WorkloadOptions,
    check_software,
    check_train_precision,
    precision_shown,
    profiled_precision,
    train_precision_option,
    workload_options_field,
)
from gpucast.inputs.workload import measured_name

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from gpucast.domain.provenance import Assumption, Validation
    from gpucast.inputs.calibration import TrainingRun
    from gpucast.predict.power import PowerModel

#: The Zeus (dataset, network) pairs a power fit can read, by dataset name.
ZEUS_DATASETS: tuple[str, ...] = (
    "cifar100",
    "imagenet",
    "librispeech",
    "movielens-1m",
    "squad",
    "sentiment140",
)


def _names(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(s).strip().lower() for s in items if str(s).strip())


# -- fit power --------------------------------------------------------------------------------
@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class FitPowerRequest:
    """Where the Zeus traces are and where the fitted model goes (``gpucast fit power``)."""

    VERB: ClassVar[str] = "fit power"

    out: Path = option(help="Where to write the fitted model (JSON).", example="power.json")
    data_dir: Path | None = option(
        None,
        help="Published data folder holding zeus_nsdi23/ (default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )
    datasets: tuple[str, ...] = option(
        ZEUS_DATASETS,
        help=f"Zeus workloads to fit on, comma-separated: {', '.join(ZEUS_DATASETS)}.",
        example="imagenet,squad",
        parse=_names,
    )
    cross_validate: bool = option(
        True,
        negative="no-cross-validate",
        help="Leave each GPU out once for the interval table (--no-cross-validate: fit only; "
        "the model then has no validated intervals).",
    )

    def __post_init__(self) -> None:
        bad = [s for s in self.datasets if s not in ZEUS_DATASETS]
        if bad or not self.datasets:
            raise InvalidSpecError(
                "datasets",
                f"must name one or more of {', '.join(ZEUS_DATASETS)}",
                got=bad[0] if bad else "",
                fix="e.g. --datasets imagenet,squad",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class FitPowerResult:
    """The fitted model, the rows it rests on and its leave-one-GPU-out errors."""

    model_file: Path
    rows_by_gpu: dict[str, int]
    constants: dict[str, float]
    gpu_factors: dict[str, float]
    train_mape_pct: dict[str, float]
    #: leave-one-GPU-out MAPE (%) per held-out GPU and regime (empty without cross-validation)
    errors: list[dict[str, Any]]
    intervals: dict[str, dict[str, tuple[float, float]]]
    model: PowerModel = field(compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_file": str(self.model_file),
            "rows_by_gpu": dict(self.rows_by_gpu),
            "constants": dict(self.constants),
            "gpu_factors": dict(self.gpu_factors),
            "train_mape_pct": dict(self.train_mape_pct),
            "errors": [dict(e) for e in self.errors],
            "intervals": {r: {q: list(v) for q, v in t.items()} for r, t in self.intervals.items()},
        }

    def to_frame(self) -> pd.DataFrame:
        """The leave-one-GPU-out error table, one row per held-out GPU."""
        import pandas as pd

        return pd.DataFrame(self.errors)


def fit_power(request: FitPowerRequest | None = None, /, **options: Any) -> FitPowerResult:
    """Fit the power model on the Zeus traces and save it (see the module docstring)."""
    import numpy as np

    from gpucast.catalog import load_catalog
    from gpucast.inputs.calibration import step_time_efficiency
    from gpucast.inputs.data import data_path, published_data_dir
    from gpucast.inputs.energy import zeus_power_sweeps
    from gpucast.predict.power import PowerModel, cross_validated, interval_table
    from gpucast.store.models import save_model

    request = resolve(FitPowerRequest, request, options)
    data_dir = published_data_dir(request.data_dir, needs=("zeus_nsdi23",))
    if data_dir is None or data_path(data_dir, "zeus_nsdi23") is None:
        raise InvalidSpecError(
            "data-dir",
            "must hold zeus_nsdi23/ (the Zeus power-limit sweeps to fit on)",
            got=None if data_dir is None else str(data_dir),
            fix="pass --data-dir ../shared/data or set $GPUCAST_SHARED_DATA",
        )
    efficiency = step_time_efficiency("pytorch").value
    sweeps = zeus_power_sweeps(data_dir, load_catalog(), efficiency, datasets=request.datasets)
    if not len(sweeps):
        raise InvalidSpecError(
            "datasets",
            "no power-limit sweep of these workloads in zeus_nsdi23/",
            got=",".join(request.datasets),
            fix="name a Zeus workload with summary_power rows, e.g. --datasets imagenet",
        )
    counts = {str(k): int(v) for k, v in sweeps["gpu"].value_counts().sort_index().items()}
    described = "Zeus NSDI 2023 power traces: " + ", ".join(f"{g} ({n})" for g, n in counts.items())
    model = PowerModel().fit(sweeps, fitted_on=described)
    errors: list[dict[str, Any]] = []
    if request.cross_validate and len(counts) > 1:
        cv = cross_validated(sweeps, "gpu")
        model.with_intervals(interval_table(cv))

        def mape(a: Any, b: Any) -> float:
            return float(100.0 * np.mean(np.abs(np.asarray(a) / np.asarray(b) - 1.0)))

        for gpu, part in cv.groupby("fold", sort=True):
            errors.append(
                {
                    "held_out_gpu": str(gpu),
                    "rows": len(part),
                    "step_time_mape_pct": mape(part["pred_step_time_s"], part["step_time_s"]),
                    "power_mape_pct": mape(part["pred_avg_power_w"], part["avg_power_w"]),
                    "step_time_measured_power_mape_pct": mape(
                        part["cal_step_time_s"], part["step_time_s"]
                    ),
                    "power_measured_power_mape_pct": mape(
                        part["cal_avg_power_w"], part["avg_power_w"]
                    ),
                }
            )
    save_model(model, request.out)
    return FitPowerResult(
        model_file=Path(request.out),
        rows_by_gpu=counts,
        constants=model.constants.to_dict(),
        gpu_factors=dict(model.gpu_factors_),
        train_mape_pct=dict(model.train_mape_pct_),
        errors=errors,
        intervals=dict(model.intervals_),
        model=model,
    )


# -- predict energy ---------------------------------------------------------------------------
def _reading_text(run: TrainingRun, limit_w: float) -> str:
    s = run.summary
    return (
        f"store run #{s.id} ({s.gpu_name}, batch {s.batch_size}, {s.median_s * 1e3:.3g} ms/step "
        f"under the {limit_w:g} W limit)"
    )


def _positive_or_none(name: str, value: float | None, *, example: str) -> None:
    if value is not None and not (
        not isinstance(value, bool) and math.isfinite(value) and value > 0
    ):
        raise InvalidSpecError(
            name, "must be a number > 0", got=value, fix=f"e.g. --{name} {example}"
        )


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictEnergyRequest:
    """A workload, batch, GPU and power limit to predict the power and energy of
    (``gpucast predict energy``)."""

    VERB: ClassVar[str] = "predict energy"

    workload: str = option(
        help="Built-in workload (e.g. resnet50) or your model as module:factory "
        "(path/to/model.py:factory).",
        example="resnet50",
    )
    batch_size: int = option(help="Samples per step per GPU.", example="256")
    gpu: str = option(help="Catalog GPU name, e.g. V100-PCIe, A100.", example="V100-PCIe")
    power_limit: float | str | None = power_limit_option()
    eta: float = eta_option()
    dataset_size: int | None = option(
        None, help="Samples per epoch: adds time and energy per epoch.", example="1281167"
    )
    precision: str = train_precision_option(
        "auto, fp32, tf32, bf16, fp16 or fp8, as predict train reads them (auto: bf16 where "
        "the GPU has bf16 tensor cores, else fp32)."
    )
    software: str = option("pytorch", parse=lower_text, help=SOFTWARE_HELP, example="tuned")
    workload_options: WorkloadOptions = workload_options_field()
    step_time_s: float | None = option(
        None,
        flag="step-time-s",
        help="Step time measured at the default power limit (s): replaces the roofline's.",
        example="0.7",
    )
    measured_power_w: float | None = option(
        None,
        flag="power-w",
        help="Average board power measured at the default limit (W): calibrates the power "
        "model (the 'measured_power' regime).",
        example="220",
    )
    power_step_w: float = option(
        25.0, help="Step of the power-limit sweep (W), as Zeus sweeps.", example="25"
    )
    power_model: Path | None = option(
        None,
        help="Power model JSON from `gpucast fit power` [default: the shipped fit].",
        example="power.json",
    )

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or self.batch_size < 1:
            raise InvalidSpecError(
                "batch-size", "must be >= 1", got=self.batch_size, fix="e.g. --batch-size 64"
            )
        check_train_precision(self.precision)
        check_software(self.software, self.precision)
        check_eta(self.eta)
        if self.dataset_size is not None and (
            isinstance(self.dataset_size, bool) or self.dataset_size < 1
        ):
            raise InvalidSpecError(
                "dataset-size",
                "must be >= 1",
                got=self.dataset_size,
                fix="e.g. --dataset-size 1281167",
            )
        _positive_or_none("step-time-s", self.step_time_s, example="0.25")
        _positive_or_none("power-w", self.measured_power_w, example="220")
        for flag, value, high, unit, example in (
            ("step-time-s", self.step_time_s, 86_400.0, "s", "0.25"),
            ("power-w", self.measured_power_w, 10_000.0, "W", "220"),
        ):
            if value is not None and value > high:
                raise InvalidSpecError(
                    flag,
                    f"must be at most {high:,g} {unit}",
                    got=value,
                    fix=f"e.g. --{flag} {example}",
                )
        if not (math.isfinite(self.power_step_w) and self.power_step_w >= 1.0):
            raise InvalidSpecError(
                "power-step-w",
                "must be >= 1 W",
                got=self.power_step_w,
                fix="e.g. --power-step-w 25",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class EnergyPoint:
    """One power limit of the sweep."""

    power_limit_w: float
    step_time_s: float
    avg_power_w: float
    energy_j_per_step: float
    clock_fraction: float
    zeus_cost_j: float

    def to_dict(self) -> dict[str, float]:
        return {
            "power_limit_w": self.power_limit_w,
            "step_time_s": self.step_time_s,
            "avg_power_w": self.avg_power_w,
            "energy_j_per_step": self.energy_j_per_step,
            "clock_fraction": self.clock_fraction,
            "zeus_cost_j": self.zeus_cost_j,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictEnergyResult:
    """Step time, power and energy of one training step at one power limit, the sweep over
    the GPU's power limits, and what the figures rest on."""

    workload: str
    batch_size: int
    gpu: str
    precision: str
    power_limit_w: float
    default_power_limit_w: float
    min_power_limit_w: float | None
    auto: bool
    eta: float
    step_time_s: float
    step_time_lower_s: float
    step_time_upper_s: float
    avg_power_w: float
    avg_power_lower_w: float
    avg_power_upper_w: float
    clock_fraction: float
    throttled: bool
    regime: str
    dataset_size: int | None
    sweep: tuple[EnergyPoint, ...]
    #: the sweep's limit with the least energy per step, and the one Zeus's cost picks
    energy_optimal_power_limit_w: float
    zeus_optimal_power_limit_w: float
    assumptions: tuple[Assumption, ...]
    validation: Validation
    notes: tuple[str, ...] = ()
    #: the memory plan on one GPU, as ``predict train`` gives it
    #: (:attr:`gpucast.app.predict.PredictTrainResult.memory`), and that plan in one sentence
    memory: Mapping[str, Any] | None = None
    memory_text: str | None = None
    #: the ``--precision`` asked for (``auto``: :attr:`precision` is what it chose)
    precision_requested: str = ""

    @property
    def precision_text(self) -> str:
        """The precision as the headline shows it (what auto chose, and that it did)."""
        return precision_shown(self.precision, self.precision_requested)

    @property
    def fits_memory(self) -> bool:
        """Whether the step fits one GPU (``True`` where no memory plan was made; one that
        does not fit is refused, as ``predict train`` refuses it)."""
        return self.memory is None or self.memory["plan"] is not None

    @property
    def energy_j_per_step(self) -> float:
        return self.step_time_s * self.avg_power_w

    @property
    def steps_per_epoch(self) -> int | None:
        if self.dataset_size is None:
            return None
        return -(-self.dataset_size // self.batch_size)

    def to_dict(self) -> dict[str, Any]:
        steps = self.steps_per_epoch
        epoch: dict[str, Any] | None = None
        if steps is not None:
            energy = steps * self.energy_j_per_step
            epoch = {
                "steps": steps,
                "time_s": steps * self.step_time_s,
                "energy_j": energy,
                "energy_kwh": energy / JOULES_PER_KWH,
            }
        return {
            "workload": self.workload,
            "batch_size": self.batch_size,
            "gpu": self.gpu,
            "precision": self.precision,
            "precision_requested": self.precision_requested,
            "power_limit_w": self.power_limit_w,
            "default_power_limit_w": self.default_power_limit_w,
            "min_power_limit_w": self.min_power_limit_w,
            "auto": self.auto,
            "eta": self.eta,
            "step_time_s": self.step_time_s,
            "step_time_interval_s": [self.step_time_lower_s, self.step_time_upper_s],
            "avg_power_w": self.avg_power_w,
            "avg_power_interval_w": [self.avg_power_lower_w, self.avg_power_upper_w],
            "energy_j_per_step": self.energy_j_per_step,
            "clock_fraction": self.clock_fraction,
            "throttled": self.throttled,
            "regime": self.regime,
            "epoch": epoch,
            "energy_optimal_power_limit_w": self.energy_optimal_power_limit_w,
            "zeus_optimal_power_limit_w": self.zeus_optimal_power_limit_w,
            "sweep": [p.to_dict() for p in self.sweep],
            "assumptions": [a.to_dict() for a in self.assumptions],
            "validation": self.validation.to_dict(),
            "notes": list(self.notes),
            "memory": None if self.memory is None else dict(self.memory),
        }

    def to_frame(self) -> pd.DataFrame:
        """The power-limit sweep, one row per limit."""
        import pandas as pd

        return pd.DataFrame([p.to_dict() for p in self.sweep])


def predict_energy(
    request: PredictEnergyRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> PredictEnergyResult:
    """Power and energy of one training step under a power limit (see the module docstring).
    ``db`` is the store whose measurements calibrate the step time, as for ``predict train``,
    and whose run at the limit asked for gives the measured regime (module docstring)."""
    import numpy as np

    from gpucast.app.predict import predict_train
    from gpucast.catalog import load_catalog
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.provenance import Assumption, Validation
    from gpucast.inputs.calibration import step_time_efficiency, stored_power_reading
    from gpucast.inputs.energy import power_model, power_terms
    from gpucast.inputs.workload import workload_facts, workload_profile
    from gpucast.predict.power import (
        READING_TOLERANCE_W,
        BoardPower,
        energy_optimal,
        power_interval,
        power_limit_grid,
        zeus_cost,
    )
    from gpucast.store.db import default_db_path

    request = resolve(PredictEnergyRequest, request, options)
    catalog = load_catalog()
    spec = catalog.gpu(request.gpu)
    board = BoardPower.of_gpu(spec)
    top = board.max_power_limit_w
    limit = request.power_limit
    if isinstance(limit, float):
        low = board.lowest_power_limit_w
        if limit > top + 1e-9 or limit < low - 1e-9:
            where = (
                "catalog gpus.csv"
                if board.min_power_limit_w is not None
                else "catalog gpus.csv has no minimum: half the default limit assumed"
            )
            raise InvalidSpecError(
                "power-limit",
                f"must be within the {spec.name}'s range {low:g}-{top:g} W ({where})",
                got=limit,
                fix=f"e.g. --power-limit {top:g}, or --power-limit auto",
            )
    reading_w = request.measured_power_w
    if reading_w is not None and reading_w > top + READING_TOLERANCE_W:
        raise InvalidSpecError(
            "power-w",
            f"must be at most the {spec.name}'s default power limit, {top:g} W (catalog "
            f"gpus.csv; +{READING_TOLERANCE_W:g} W of NVML's stated accuracy): the board cannot "
            "draw more on average under it",
            got=reading_w,
            fix="pass the average board power measured at the default limit (nvidia-smi "
            "--query-gpu=power.draw, averaged over the steps), or drop --power-w",
        )
    model = power_model(request.power_model)
    idle_w = model.value.idle_power_w(board)
    if reading_w is not None and reading_w < idle_w - READING_TOLERANCE_W:
        raise InvalidSpecError(
            "power-w",
            f"must be at least the {spec.name}'s idle draw, {idle_w:.0f} W (a board running "
            "steps draws no less than idle; catalog gpus.csv idle_power_w, else the power "
            "model's fitted share of the default limit)",
            got=reading_w,
            fix="pass the average board power measured at the default limit (nvidia-smi "
            "--query-gpu=power.draw, averaged over the steps), or drop --power-w",
        )
    train = predict_train(
        workload=request.workload,
        batch_size=request.batch_size,
        gpu=spec.name,
        precision=request.precision,
        software=request.software,
        workload_options=request.workload_options,
        db=db,
    )
    precision = train.precision  # auto resolved as predict train resolves it
    efficiency = step_time_efficiency(request.software).value
    facts = workload_facts(
        workload_profile(
            request.workload,
            profiled_precision(precision),
            options=dict(request.workload_options),
        )
    )
    terms, estimate = power_terms(
        facts, request.batch_size, spec, precision, efficiency, estimate=train.estimate
    )
    ref_step = request.step_time_s if request.step_time_s is not None else estimate.value
    ref_limit, measured_power = top, request.measured_power_w
    # a stored run at the requested limit (the default for none or auto) on this GPU type and
    # batch, its board energy recorded: the measured regime, more accurate than the predicted
    reading = None
    if request.step_time_s is None and request.measured_power_w is None:
        reading = stored_power_reading(  # a run of this configuration (measured_name)
            Path(db) if db is not None else default_db_path(),
            measured_name(request.workload, request.workload_options), precision,
            request.batch_size, spec, catalog, limit if isinstance(limit, float) else top,
        )  # fmt: skip
    if reading is not None:
        ref_limit = limit if isinstance(limit, float) else top
        ref_step, measured_power = reading.summary.median_s, reading.gpu_avg_power_w
    grid = sorted(
        {
            *power_limit_grid(board, request.power_step_w),
            *([limit] if isinstance(limit, float) else []),
        }
    )
    sweep_frame = model.value.sweep(
        terms,
        board,
        grid,
        step_time_s=ref_step,
        measured_power_w=measured_power,
        reference_limit_w=ref_limit,
    )
    steps = sweep_frame["step_time_s"].to_numpy(dtype=np.float64)
    powers = sweep_frame["avg_power_w"].to_numpy(dtype=np.float64)
    at_reading = np.isclose(sweep_frame["power_limit_w"].to_numpy(dtype=np.float64), ref_limit)
    if measured_power is not None:  # the reading itself there (the store run's or --power-w)
        steps[at_reading], powers[at_reading] = ref_step, measured_power
    costs = zeus_cost(steps, powers, eta=request.eta, max_power_w=top)
    limits = sweep_frame["power_limit_w"].to_numpy(dtype=np.float64)
    i_energy = energy_optimal(limits, steps, powers, eta=1.0, max_power_w=top)
    i_zeus = energy_optimal(limits, steps, powers, eta=request.eta, max_power_w=top)
    chosen = top if limit is None else (float(limits[i_zeus]) if limit == "auto" else limit)
    i = int(np.flatnonzero(np.isclose(limits, chosen))[0])
    sweep = tuple(
        EnergyPoint(
            power_limit_w=float(limits[k]),
            step_time_s=float(steps[k]),
            avg_power_w=float(powers[k]),
            energy_j_per_step=float(steps[k] * powers[k]),
            clock_fraction=float(sweep_frame["clock_fraction"].iloc[k]),
            zeus_cost_j=float(costs[k]),
        )
        for k in range(len(limits))
    )
    regime = "measured_power" if measured_power is not None else "predicted_power"
    fitted = model.value
    ratio = steps[i] / ref_step
    step_band = fitted.interval(regime, "step_time") or (1.0, 1.0)
    power_band = fitted.interval(regime, "avg_power")
    if at_reading[i]:
        # the limit the step time refers to: the step is that step (the power model's band is
        # of the step's ratio to it, 1 there), its interval the step's own -- predict train's
        # for the roofline step, none for a measured one; a power read there is the reading
        step_band = (1.0, 1.0)
        if measured_power is not None:
            power_band = (1.0, 1.0)
    if request.step_time_s is not None:
        step_lo, step_hi = ref_step * ratio * step_band[0], ref_step * ratio * step_band[1]
        step_source = "measured at the default limit (--step-time-s)"
    elif reading is not None:
        step_lo, step_hi = ref_step * ratio * step_band[0], ref_step * ratio * step_band[1]
        step_source = f"measured: {_reading_text(reading, ref_limit)}"
    else:
        step_lo = estimate.lower * ratio * step_band[0]
        step_hi = estimate.upper * ratio * step_band[1]
        step_source = f"roofline step of `predict train`; calibration: {train.calibration_source}"
    # a cap never speeds a step up: no lower bound under the default limit's own (the power
    # model's band of the ratio reaches below 1, which read 179.7 ms at 200 W under 185.6 at 250)
    step_lo = max(
        step_lo, ref_step if request.step_time_s is not None or reading else estimate.lower
    )
    notes: list[str] = []  # (a step that fits no memory plan: predict_train refused it)
    if power_band is None:
        power_band = (1.0, 1.0)
        notes.append("the power model carries no validated interval (fit it with cross-validation)")
    power_lo, power_hi = power_interval(
        float(powers[i]), power_band, idle_w=fitted.idle_power_w(board), limit_w=float(chosen)
    )
    if not sweep_frame["throttled"].any():
        notes.append(
            f"the step draws {float(powers.max()):.0f} W, under every limit from "
            f"{float(limits.min()):g} W: each limit runs the same step, so the least-energy "
            f"limit is a tie (the lowest is shown); measured sweeps of such steps differ from "
            f"limit to limit by their measurement noise alone"
        )
    if board.min_power_limit_w is None:
        notes.append(
            f"the {spec.name}'s minimum power limit is not in the catalog: the sweep starts at "
            f"half its default limit"
        )
    power_source = model.source
    if reading is not None:
        power_source = (
            f"measured: {_reading_text(reading, ref_limit)}, {reading.gpu_avg_power_w:.0f} W "
            f"average (calibrates {model.source})"
        )
    elif request.measured_power_w is not None:
        power_source = f"measured at the default limit (--power-w; calibrates {model.source})"
    assumptions = (
        Assumption(
            name="power model",
            value=regime.replace("_", " "),
            source=power_source,
            override="--power-model FILE (gpucast fit power); --power-w W calibrates it",
        ),
        Assumption(
            name=(
                "step time at the default limit"
                if ref_limit == top
                else f"step time at the {ref_limit:g} W limit"
            ),
            value=f"{ref_step:.4g} s",
            source=step_source,
            override="--step-time-s S",
        ),
        Assumption(
            name="power limit",
            value=f"{chosen:g} W" + (f" (auto, eta {request.eta:g})" if limit == "auto" else ""),
            source=(
                f"the {spec.name}'s default limit (catalog gpus.csv)"
                if limit is None
                else ("Zeus's energy-time cost over the sweep" if limit == "auto" else "given")
            ),
            override="--power-limit W|auto",
        ),
        Assumption(
            name="idle power",
            value=(
                f"{board.idle_power_w:g} W"
                if board.idle_power_w is not None
                else f"{fitted.constants.static_fraction:.2f} x {top:g} W (fitted share)"
            ),
            source="catalog gpus.csv" if board.idle_power_w is not None else model.source,
            override="add idle_power_w to gpus.csv",
        ),
        *([train.precision_assumption] if train.precision_assumption is not None else []),
    )
    return PredictEnergyResult(
        workload=request.workload,
        batch_size=request.batch_size,
        gpu=spec.name,
        precision=precision,
        precision_requested=request.precision,
        power_limit_w=float(chosen),
        default_power_limit_w=top,
        min_power_limit_w=board.min_power_limit_w,
        auto=limit == "auto",
        eta=request.eta,
        step_time_s=float(steps[i]),
        step_time_lower_s=float(min(steps[i], step_lo)),
        step_time_upper_s=float(max(steps[i], step_hi)),
        avg_power_w=float(powers[i]),
        avg_power_lower_w=power_lo,
        avg_power_upper_w=power_hi,
        clock_fraction=float(sweep_frame["clock_fraction"].iloc[i]),
        throttled=bool(sweep_frame["throttled"].iloc[i]),
        regime=regime,
        dataset_size=request.dataset_size,
        sweep=sweep,
        energy_optimal_power_limit_w=float(limits[i_energy]),
        zeus_optimal_power_limit_w=float(limits[i_zeus]),
        assumptions=assumptions,
        validation=(
            validation_for("power-model", [spec.name], precision, 1)
            if request.power_model is None
            else Validation(  # the shipped fit's held-out errors are not this file's
                model="power-model",
                regime=f"{spec.name}, {precision}, 1 GPU: the power model in "
                f"{request.power_model} (the shipped fit's validated errors do not apply to it; "
                "python benchmarks/energy_accuracy.py scores a refit)",
                error=None,
            )
        ),
        notes=tuple(notes),
        memory=train.memory,
        memory_text=train.memory_text(),
    )

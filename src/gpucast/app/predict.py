"""``gpucast.predict_train``, ``predict_speed``, ``predict_cluster``, ``predict_checkpoint``.

* :func:`predict_train` -- the training step time of a workload on one catalog GPU, from the
  workload's profile and the roofline, calibrated by a stored measurement: the same inputs
  (:mod:`gpucast.inputs.workload`, :func:`gpucast.inputs.calibration.store_calibration`) and
  so the same number as ``plan train`` uses for that GPU;
* :func:`predict_speed`, :func:`predict_cluster`, :func:`predict_checkpoint` -- a model saved
  by ``gpucast fit ...`` applied to every row of a CSV; the output is the input rows plus the
  predictions, written atomically and only once every row has been checked.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from gpucast.app._crossbow import crossbow_estimate
from gpucast.app._request import resolve
from gpucast.app._stored_run import stored_profile, with_stored_run
from gpucast.app.fit import require_file
from gpucast.domain.convergence import check_critical_batch, critical_batch_option
from gpucast.domain.errors import DataFormatError, InvalidInputError, InvalidSpecError
from gpucast.domain.offload import optimizer_state_note
from gpucast.domain.options import documented, is_default, lower_text, option
from gpucast.domain.systems import (
    ClusterSettings,
    check_cluster_options,
    cluster_nodes_option,
    cluster_option,
    cluster_price_option,
    cluster_set_option,
)
from gpucast.domain.units import count_of
from gpucast.domain.workload import (
    AUTO_PRECISION,
    SOFTWARE_HELP,
    TF32,
    WorkloadOptions,
    check_precision_units,
    check_software,
    check_train_precision,
    practitioner_precision,
    precision_assumption,
    precision_shown,
    profiled_precision,
    train_precision_option,
    workload_options_field,
)
from gpucast.inputs.workload import RUN_PREFIX, measured_name

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from gpucast.app._data_parallel import DataParallelStep
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.prediction import Estimate
    from gpucast.domain.provenance import Assumption, Validation
    from gpucast.plan.inputs import WorkloadFacts
    from gpucast.predict.base import Estimator

E = TypeVar("E", bound="Estimator")

#: Precisions a speed-model prediction can scale to (the catalog's peak at each).
SPEED_PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8")

# Columns ``predict speed`` adds.
PREDICTED_COL = "Predicted Step Time (s)"
LOWER_COL = "Lower (s)"
UPPER_COL = "Upper (s)"
BOTTLENECK_COL = "Bottleneck"
# Columns ``predict cluster`` adds.
SPEED_OUT_COL = "Predicted Speed (steps/sec)"
SPEED_LOWER_COL = "Lower (steps/sec)"
SPEED_UPPER_COL = "Upper (steps/sec)"
SHARDS_NEEDED_COL = "PS Shards Needed"
#: true where no count up to the search's cap (64) removes the PS bottleneck: the row's
#: ``PS Shards Needed`` is then the cap, read "more than 64" (QA 38 P: it read as a need)
SHARDS_CAPPED_COL = "PS Shards Needed Capped"
# Column ``predict checkpoint`` adds (with Lower (s) and Upper (s)).
DURATION_COL = "Predicted Duration (s)"


def _one_of(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InvalidSpecError(
            name, f"must be one of {', '.join(choices)}", got=value, fix=f"e.g. --{name} fp32"
        )


def _load(path: Path, cls: type[E]) -> E:
    """The model in ``path``, which must be a ``cls`` (else an error naming ``--model``)."""
    from gpucast.store.models import load_model

    model = load_model(require_file(path, "model"))
    if not isinstance(model, cls):
        raise InvalidSpecError(
            "model",
            f"holds a {model.kind!r} model, not a {cls.kind!r} model",
            got=str(path),
            fix=f"pass a file written by `gpucast fit {cls.kind}`",
        )
    return model


# -- predict train --------------------------------------------------------------------------
@documented  # help(PredictTrainRequest) lists each field's --help text (the pattern to follow)
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictTrainRequest:
    """A workload, batch and GPU to predict one training step of (``gpucast predict train``)."""

    VERB: ClassVar[str] = "predict train"

    workload: str = option(
        help="Built-in workload (e.g. resnet50) or your model as module:factory "
        "(path/to/model.py:factory).",
        argument=True,
        example="resnet50",
    )
    batch_size: int | None = option(
        None,
        help="Samples per step per GPU (required, except that --workload run:ID takes the run's).",
        example="64",
    )
    gpu: str | None = option(
        None,
        help="Catalog GPU name, e.g. V100, A100, H100 [default: the --cluster's GPU].",
        example="A100",
    )
    precision: str = train_precision_option(
        "auto (what practitioners train in on the GPU: bf16 where it has bf16 tensor cores, "
        "else fp32), fp32 (on NVIDIA GPUs with TF32, convolutions on TF32 as cuDNN does by "
        "default), tf32 (matmuls too), bf16, fp16, or fp8 (matmuls and convolutions at the "
        "fp8 peak, the rest bf16; GPUs with fp8 units)."
    )
    software: str = option("pytorch", parse=lower_text, help=SOFTWARE_HELP, example="tuned")
    workload_options: WorkloadOptions = workload_options_field()
    cluster: str | None = cluster_option()
    cluster_nodes: int | None = cluster_nodes_option()
    cluster_price_usd_per_gpu_hour: float | None = cluster_price_option()
    cluster_set: ClusterSettings = cluster_set_option()
    gpus: int | None = option(
        None,
        help="--cluster: price the synchronous data-parallel step on this many of its GPUs "
        "(1..k of one node, or whole nodes) [default: all the cluster's GPUs].",
        example="16",
    )
    learners: int = option(
        1,
        help="Crossbow: this many learners of --batch-size each share the GPU (model "
        "averaging), compared with one learner at learners x batch.",
        example="4",
    )
    critical_batch: float | None = critical_batch_option(
        "that prices --learners (Crossbow's small batches against one large one)"
    )

    @property
    def batch(self) -> int:
        """The batch per GPU, once known (``run:ID``'s is filled in by :func:`predict_train`)."""
        if self.batch_size is None:
            raise InvalidSpecError("batch-size", "is required", fix="e.g. --batch-size 64")
        return self.batch_size

    def __post_init__(self) -> None:
        named = check_cluster_options(
            self.cluster, self.cluster_nodes, self.cluster_price_usd_per_gpu_hour, self.cluster_set
        )
        if not named and self.gpu is None:
            raise InvalidSpecError("gpu", "is required (or --cluster)", fix="e.g. --gpu A100")
        if self.gpus is not None:
            if isinstance(self.gpus, bool) or self.gpus < 1:
                raise InvalidSpecError("gpus", "must be >= 1", got=self.gpus, fix="e.g. --gpus 8")
            if not named:
                # a catalog GPU names no node and no network, which set the all-reduce
                raise InvalidSpecError(
                    "gpus",
                    "prices a data-parallel step on a --cluster's nodes and network, and "
                    "none is given",
                    got=self.gpus,
                    fix="add --cluster NAME|FILE (e.g. --cluster DGX-H100 --nodes 2), or "
                    "plan train for catalog instances",
                )
        if isinstance(self.learners, bool) or self.learners < 1:
            raise InvalidSpecError(
                "learners", "must be >= 1", got=self.learners, fix="e.g. --learners 4"
            )
        check_critical_batch(self.critical_batch)
        if self.critical_batch is not None and self.learners == 1:
            raise InvalidSpecError(
                "critical-batch", "only applies with --learners 2 or more (Crossbow)",
                got=self.critical_batch, fix="add --learners 4, or drop --critical-batch",
            )  # fmt: skip
        if self.batch_size is None:  # run:ID takes its run's (QA 41 K F3)
            if not str(self.workload or "").startswith(RUN_PREFIX):
                raise InvalidSpecError("batch-size", "is required", fix="e.g. --batch-size 64")
        elif isinstance(self.batch_size, bool) or self.batch_size < 1:
            raise InvalidSpecError(
                "batch-size", "must be >= 1", got=self.batch_size, fix="e.g. --batch-size 64"
            )
        check_train_precision(self.precision)
        check_software(self.software, self.precision)


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictTrainResult:
    """One training step's time on one GPU, where its calibration came from, and how well the
    roofline was validated in this regime."""

    workload: str
    batch_size: int
    gpu: str
    precision: str
    estimate: Estimate
    calibrated: bool
    calibration_source: str
    validation: Validation
    software: str = "pytorch"
    #: the ``--precision`` asked for (``auto``: :attr:`precision` is what it chose)
    precision_requested: str = ""
    step_time_model: str = ""
    #: the user's cluster the GPU came from (``None``: a catalog GPU named by --gpu)
    cluster: Assumption | None = None
    #: the precision predicted and why (the default, given, or chosen for the GPU)
    precision_assumption: Assumption | None = None
    #: the memory plan on one GPU (:func:`gpucast.predict.memory.fit_memory`, offload priced
    #: by :mod:`gpucast.predict.offload`): plan, bytes, host bytes, slow-down, reason
    memory: Mapping[str, Any] | None = None
    #: ``--learners K``: Crossbow's K learners on the GPU against one at K x batch
    #: (:class:`gpucast.predict.crossbow.CrossbowEstimate`), and where B_noise came from
    crossbow: Any = None
    crossbow_assumption: Assumption | None = None
    #: how a recommender's embedding tables are priced (``None``: not a recommender, or
    #: tables under :data:`DENSE_TABLES_NOTE_BYTES`)
    embeddings_assumption: Assumption | None = None
    #: a user model's profile: from the cache (keyed on its code's hash) or not cacheable
    #: (:func:`gpucast.inputs.workload.profile_origin`); "" when profiled now, or a built-in
    profile_source: str = ""
    #: where the batch came from when not given: "run #N's" (``--workload run:ID``)
    batch_source: str = ""
    #: ``--cluster``: the synchronous data-parallel step on its GPUs (``--gpus``, default all)
    data_parallel: DataParallelStep | None = None

    @property
    def step_time_s(self) -> float:
        return self.estimate.value

    @property
    def precision_text(self) -> str:
        """The precision as the headline shows it (what auto chose, and that it did)."""
        return precision_shown(self.precision, self.precision_requested)

    @property
    def samples_per_s(self) -> float:
        return self.batch_size / self.estimate.value

    def memory_text(self) -> str | None:
        """The memory plan in one sentence (with the host memory and step of an offload
        plan); ``None`` without a memory plan."""
        mem = self.memory
        if mem is None:
            return None
        line = str(mem["reason"])
        if mem["plan"] is not None and "cpu-offload" in str(mem["plan"]):
            line += (
                f"; {mem['host_bytes'] / 2**30:.1f} GiB in host memory, step "
                f"{mem['step_time_s'] * 1e3:.1f} ms with offload (CPU Adam: "
                f"{mem['cpu_adam_source']})"
            )
        if mem.get("optimizer"):
            line += f"; {optimizer_state_note(str(mem['optimizer']), self.workload)}"
        if mem.get("cpu_adam_warning"):
            line += f"; warning: {mem['cpu_adam_warning']}"
        return line

    @property
    def setup(self) -> str:
        """What the step prices, and the verb that prices the job around it."""
        return (
            f"one {self.gpu} alone, {self.software} stack, no parameter server or all-reduce; "
            "`gpucast simulate train` adds them (e.g. CM-DARE's 1 worker + 1 PS) to this step"
        )

    def to_dict(self) -> dict[str, Any]:
        est = self.estimate
        return {
            "workload": self.workload,
            "batch_size": self.batch_size,
            "batch_source": self.batch_source or None,
            "gpu": self.gpu,
            "precision": self.precision,
            "precision_requested": self.precision_requested,
            "step_time_s": {"value": est.value, "lower": est.lower, "upper": est.upper},
            "samples_per_s": self.samples_per_s,
            "bottleneck": est.bottleneck,
            "source": est.source,
            "breakdown_s": dict(est.breakdown),
            "notes": list(est.notes),
            "calibrated": self.calibrated,
            "calibration_source": self.calibration_source,
            "software": self.software,
            "setup": self.setup,
            "step_time_model": self.step_time_model,
            "validation": self.validation.to_dict(),
            "cluster": None if self.cluster is None else self.cluster.to_dict(),
            "precision_assumption": None
            if self.precision_assumption is None
            else self.precision_assumption.to_dict(),
            "memory": None if self.memory is None else dict(self.memory),
            "crossbow": None if self.crossbow is None else self.crossbow.to_dict(),
            "crossbow_assumption": None
            if self.crossbow_assumption is None
            else self.crossbow_assumption.to_dict(),
            "embeddings_assumption": None
            if self.embeddings_assumption is None
            else self.embeddings_assumption.to_dict(),
            "profile_source": self.profile_source or None,  # (null: profiled here, now)
            "data_parallel": None if self.data_parallel is None else self.data_parallel.to_dict(),
        }


def predict_train(
    request: PredictTrainRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> PredictTrainResult:
    """Roofline step time of ``workload`` at ``batch_size`` on catalog GPU ``gpu``.

    ``db`` is the measurement store (default: ``$GPUCAST_DB`` or the user store): a stored
    training measurement of the workload at the precision on a GPU (any batch, any GPU)
    calibrates the prediction, exactly as ``plan train`` calibrates its candidates; one on a
    CPU calibrates none, and the calibration source says so.
    """
    from gpucast.app._data_parallel import data_parallel_on_cluster
    from gpucast.catalog import load_catalog
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.calibration import (
        step_time_efficiency,
        store_calibration,
        uncalibrated_source,
    )
    from gpucast.inputs.clusters import cluster_assumption, cluster_gpu, request_cluster
    from gpucast.inputs.workload import profile_origin, workload_facts, workload_profile
    from gpucast.plan.inputs import GpuPrecision
    from gpucast.predict.roofline import predict_step_time
    from gpucast.store.db import default_db_path

    request = resolve(PredictTrainRequest, request, options)
    store = Path(db) if db is not None else default_db_path()
    batch_taken = request.batch_size is None  # run:ID's then (__post_init__ checked)
    run = with_stored_run(request, store)  # run:ID: its profile or measurement
    request, stored, run_precision = run
    batch = request.batch  # __post_init__ lets None through for run:ID only, filled above
    catalog = load_catalog()
    cluster = request_cluster(request, catalog, request.gpu)
    spec = cluster_gpu(cluster, catalog, request.gpu, request.gpus)
    check_precision_units(request.precision, spec, catalog)
    has_bf16 = spec.bf16_tflops is not None
    has_fp16 = spec.has_units("fp16")
    requested = request.precision
    if request.precision == AUTO_PRECISION:
        request = dataclasses.replace(request, precision=practitioner_precision(has_bf16))
        said = precision_assumption(
            request.precision, [(spec.name, has_bf16)], auto=True, fp16_units=has_fp16
        )
    elif request.precision == TF32 and not spec.has_units(TF32):
        # fp32 with TF32 matmuls where the GPU has TF32 units, fp32 elsewhere -- as plan and
        # simulate train resolve it; the step was fp32's, labelled, calibrated and validated
        # as "tf32" (QA 39)
        request = dataclasses.replace(request, precision="fp32")
        said = dataclasses.replace(
            precision_assumption("fp32", [(spec.name, has_bf16)], given=True, fp16_units=has_fp16),
            value=f"fp32: the {spec.name} has no TF32 units (--precision tf32 trains fp32 with "
            "TF32 matmuls where the GPU has them, fp32 elsewhere)",
            source="--precision tf32",
        )
    else:
        said = precision_assumption(
            request.precision,
            [(spec.name, has_bf16)],
            given=not is_default(request, "precision"),
            fp16_units=has_fp16,
        )
        if stored is not None and run_precision:  # not given: the run's
            said = dataclasses.replace(said, source=f"store run #{stored.run_id}")
    if stored is not None and stored.profile is not None:
        profile = stored_profile(stored, profiled_precision(request.precision), request.precision)
    else:
        profile = workload_profile(
            request.workload,
            profiled_precision(request.precision),
            options=dict(request.workload_options),
        )
    facts = workload_facts(profile)
    efficiency = step_time_efficiency(request.software)
    measured = measured_name(request.workload, request.workload_options)
    calibration = store_calibration(  # the run, else a measurement on this GPU type, else any
        store, measured, request.precision, facts, catalog,
        prefer_run=None if stored is None else stored.measurement_run,
        efficiency=efficiency.value, batch=batch, prefer_gpu=spec.name,
    )  # fmt: skip
    estimate = predict_step_time(
        facts.roofline_workload(batch),
        spec,
        request.precision,
        calibration=None if calibration is None else calibration.value,
        efficiency=efficiency.value,
    )
    memory = _memory_plan(request, facts, spec, estimate.value, store)  # or refused
    memory["optimizer"] = profile.memory.optimizer
    estimate = _with_memory_plan(estimate, memory, spec.name)
    data_parallel = None
    if cluster is not None:  # the step on its GPUs, the GPU priced as the step above
        data_parallel = data_parallel_on_cluster(
            cluster,
            spec,
            gpus=request.gpus,
            batch=batch,
            precision=request.precision,
            choice=GpuPrecision(
                precision=request.precision,
                facts=facts,
                calibration=None if calibration is None else calibration.value,
            ),
            efficiency=efficiency.value,
            store=store,
            catalog=catalog,
        )
    return PredictTrainResult(
        workload=measured,
        batch_size=batch,
        batch_source=f"run #{stored.run_id}'s" if stored is not None and batch_taken else "",
        gpu=spec.name,
        precision=request.precision,
        precision_requested=requested,
        estimate=estimate,
        calibrated=calibration is not None,
        calibration_source=(
            calibration.source
            if calibration is not None
            else "none: " + uncalibrated_source(store, measured, request.precision, catalog)
        ),
        validation=validation_for("roofline-step", [spec.name], request.precision, 1),
        software=request.software,
        step_time_model=efficiency.source,
        cluster=None if cluster is None else _one_gpu_of(cluster_assumption(cluster), cluster),
        data_parallel=data_parallel,
        precision_assumption=said,
        memory=memory,
        embeddings_assumption=_dense_tables(request.workload, facts.weights_bytes),
        profile_source=(
            profile_origin(profile)
            if stored is None
            else f"store run #{stored.run_id} ({'profile' if stored.profile else 'measurement'})"
        ),
        **crossbow_estimate(
            request,
            facts,
            spec,
            estimate,
            calibration,
            efficiency.value,
            store,
            float(memory["usable_bytes"]),
        ),
    )


def _one_gpu_of(said: Assumption, cluster: Any) -> Assumption:
    """The cluster assumption of a one-GPU step, saying where the cluster's other GPUs are
    priced."""
    if cluster.max_gpus <= 1:
        return said
    return dataclasses.replace(
        said,
        value=f"{said.value}; the step above is one GPU's of its {cluster.max_gpus}, the "
        "data-parallel step below runs on --gpus of them as plan train prices that layout "
        "(plan train with the same --cluster searches layouts, batches and strategies; "
        "simulate train runs one through time and failures)",
    )


#: Weights above which a recommender's step is told it prices its tables dense.
DENSE_TABLES_NOTE_BYTES = 2**30


def _dense_tables(workload: str, weights_bytes: float) -> Assumption | None:
    """Say that a recommender's embedding tables are priced as the code runs them -- dense
    gradients and optimizer passes over every row -- and where sparse, sharded training is
    priced (``plan embeddings``), once the tables are big enough for it to matter."""
    from gpucast.domain.provenance import Assumption
    from gpucast.plan.efficiency import FAMILIES, workload_family

    if workload_family(workload) is not FAMILIES["recommender"]:
        return None
    if weights_bytes < DENSE_TABLES_NOTE_BYTES:
        return None
    return Assumption(
        name="embeddings",
        value=f"{weights_bytes / 2**30:.1f} GiB of weights priced as this code runs them: "
        "nn.EmbeddingBag with dense gradients, the optimizer passing over every row of "
        "every table each step; recommenders at this size shard the tables and update only "
        "the rows a batch touches",
        source="the workload's PyTorch code (gpucast profile)",
        override="gpucast plan embeddings (sharded tables, sparse updates, HBM/DRAM/SSD tiers)",
    )


def _whole(n_bytes: float) -> float | int:
    """A byte count as a whole number where it is finite (JSON ``5806211992``, not ``...2.0``)."""
    return round(n_bytes) if math.isfinite(n_bytes) else n_bytes


def _with_memory_plan(estimate: Estimate, memory: Mapping[str, Any], gpu: str) -> Estimate:
    """The step the job runs: where the batch fits one GPU only with a memory plan that slows
    it (recompute, CPU offload), the step and its interval times the plan's slow-down, bound
    by the plan, and a note with the step without it (QA 35 #8: the headline read 198 ms for
    a step that runs 1,272 ms with the offload it needs, as plan train prices it)."""
    slowdown = memory.get("slowdown")
    if slowdown is None or slowdown <= 1.0:
        return estimate
    plan = str(memory["plan"])
    return dataclasses.replace(
        estimate,
        value=estimate.value * slowdown,
        lower=estimate.lower * slowdown,
        upper=estimate.upper * slowdown,
        bottleneck=plan,
        # the terms sum to the step (QA 39 O: breakdown_s left the offload out of a 1,272 ms step)
        breakdown={**estimate.breakdown, "memory_plan": estimate.value * (slowdown - 1.0)},
        notes=(
            f"with {plan}: the batch fits one {gpu} only with it, x{slowdown:.2f} the step "
            f"without it ({estimate.value * 1e3:.1f} ms, bound by {estimate.bottleneck}; its "
            "interval scaled alike)",
            *estimate.notes,
        ),
    )


def _memory_plan(
    request: PredictTrainRequest, facts: WorkloadFacts, spec: GpuSpec, step_s: float, store: Path
) -> dict[str, Any]:
    """How one step fits one GPU (module ``predict.memory``), offload priced by the offload
    model with the CPU Adam speed of the store or the catalog; a step that fits with no
    strategy is refused (:func:`gpucast.app._memory.refuse_unless_fits`)."""
    from gpucast.app._memory import refuse_unless_fits
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
    from gpucast.inputs.offload import cpu_adam, extrapolation_warning
    from gpucast.predict.comm import DEFAULT_BACKWARD_FRACTION
    from gpucast.predict.memory import OffloadCosts, fit_memory

    batch_size = request.batch
    needs = facts.memory_needs(batch_size)
    adam = cpu_adam(store)
    backward = step_s * DEFAULT_BACKWARD_FRACTION  # as plan train splits the step
    costs = OffloadCosts(
        forward_s=step_s - backward,
        backward_s=backward,
        n_params=facts.weights_bytes / 4.0,
        n_tensors=facts.n_tensors,
        pcie_gbps=PCIE_X16_GBIT_PER_S.get(spec.pcie_generation, 128.0) / 8.0,
        cpu_adam=adam.value,
    )
    fit = fit_memory(needs, spec, 1, offload=costs, params_offload=True)
    refuse_unless_fits(
        fit, workload=request.workload, batch=batch_size,
        fixes=[
            "a GPU with more memory (--gpu)",
            f"plan train --workload {request.workload}, which also spreads the model over "
            "several GPUs (FSDP)",
        ],
    )  # fmt: skip
    best = fit.best
    return {
        "plan": None if best is None else best.strategy,
        # (whole bytes: the estimates are sums of byte counts)
        "gpu_bytes": None if best is None else _whole(best.bytes_needed),
        "usable_bytes": _whole(fit.bytes_available),
        "host_bytes": None if best is None else _whole(best.host_bytes),
        "slowdown": None if best is None else best.slowdown,
        "step_time_s": None if best is None else step_s * best.slowdown,
        "reason": fit.reason,
        "cpu_adam_source": adam.source,
        "cpu_adam_validation": validation_for("cpu-adam", ["cpu"], "fp32").text(),
        # (the host steps the offloaded parameters: one GPU's, all of them)
        "cpu_adam_warning": None
        if best is None or "offload" not in best.strategy
        else extrapolation_warning(adam.value, costs.n_params),
    }


# -- predict speed / cluster / checkpoint: rows in, rows out -------------------------------
@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictSpeedRequest:
    """A speed model and rows to predict (``gpucast predict speed``)."""

    VERB: ClassVar[str] = "predict speed"

    model: Path = option(help="Model JSON from `gpucast fit speed`.", example="speed.json")
    input: Path = option(help="Rows to predict (CM-DARE columns).", example="rows.csv")
    output: Path = option(help="CSV to write: input rows + predictions.", example="out.csv")
    precision: str = option(
        "fp32", parse=lower_text, help="fp32, tf32, bf16, fp16 or fp8.", example="bf16"
    )

    def __post_init__(self) -> None:
        _one_of("precision", self.precision, SPEED_PRECISIONS)


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictSpeedResult:
    """The rows written: the input plus predicted step time, interval and bottleneck."""

    output: Path
    rows: int
    gpus_from_catalog_only: tuple[str, ...]
    frame: pd.DataFrame = field(compare=False, repr=False)
    #: each GPU without training data: the peak it was scaled by, the rows' ``GPU TFLOPS``
    #: or the catalog's (``gpucast.predict.speed.ROWS_PEAK`` / ``CATALOG_PEAK``)
    peak_sources: dict[str, str] = field(default_factory=dict)
    #: a row's ``GPU TFLOPS`` used where the catalog gives that GPU a peak far from it
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": str(self.output),
            "rows": self.rows,
            "gpus_from_catalog_only": list(self.gpus_from_catalog_only),
            "peak_sources": dict(self.peak_sources),
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()


def predict_speed(
    request: PredictSpeedRequest | None = None, /, **options: Any
) -> PredictSpeedResult:
    """Single-GPU step time for each row of ``input``; GPUs without training data are
    predicted from their catalog specs. Adds ``Predicted Step Time (s)``, ``Lower (s)``,
    ``Upper (s)`` and ``Bottleneck`` to a copy of the rows and writes it to ``output``."""

    from gpucast.app.fit import catalog_specs
    from gpucast.domain.cmdare import GPU_COL
    from gpucast.predict.speed import SpeedModel
    from gpucast.store.datasets.cmdare_speed import read_speed_rows
    from gpucast.store.files import read_csv_input, write_csv_atomic

    request = resolve(PredictSpeedRequest, request, options)
    estimator = _load(request.model, SpeedModel)
    source = require_file(request.input, "input")
    rows = read_speed_rows(source, require_step_time=False)
    specs = catalog_specs(sorted(set(rows[GPU_COL].astype(str))))
    try:
        pred = estimator.predict_frame(rows, specs, precision=request.precision)
    except InvalidInputError as exc:
        raise DataFormatError(str(source), exc.message, column=GPU_COL, fix=exc.fix) from exc
    out = read_csv_input(source, "input", dtype=str, keep_default_na=False)
    out[PREDICTED_COL] = pred["step_time_s"].to_numpy()
    out[LOWER_COL] = pred["lower_s"].to_numpy()
    out[UPPER_COL] = pred["upper_s"].to_numpy()
    out[BOTTLENECK_COL] = pred["bottleneck"].to_numpy()
    write_csv_atomic(out, request.output)
    unseen = sorted(set(rows.loc[pred["source"] == "catalog", GPU_COL]))
    first = {gpu: pred.loc[rows.index[rows[GPU_COL] == gpu][0]] for gpu in unseen}
    return PredictSpeedResult(
        output=request.output,
        rows=len(out),
        gpus_from_catalog_only=tuple(unseen),
        frame=out,
        peak_sources={gpu: _peak_source(gpu, p, specs.get(gpu)) for gpu, p in first.items()},
        warnings=tuple(
            w
            for gpu, p in first.items()
            if (w := _row_peak_warning(gpu, p, specs.get(gpu), source)) is not None
        ),
    )


def _peak_source(gpu: str, pred: Any, spec: Any) -> str:
    """Where ``gpu``'s peak came from; the catalog's names the GPU it took when the rows'
    name is shorter (QA 39 R #7: "V100 by catalog specs" hid which V100, of three)."""
    from gpucast.predict.speed import CATALOG_PEAK

    said = str(pred["peak_source"])
    if said == CATALOG_PEAK and spec is not None and spec.name != gpu:
        return f"{said} of {spec.name}"
    return said


#: a row's GPU TFLOPS this many times off the catalog's fp32 peak (either way) is a mistake
#: (a cell copied from another GPU), not a clock or board difference: CM-DARE's K80 4.113
#: (boost clock) is 1.47x the catalog's 2.81 (base clock), its P100 9.526 1.02x the 9.3
_ROW_PEAK_MISMATCH = 2.0


def _row_peak_warning(gpu: str, pred: Any, spec: Any, source: Path) -> str | None:
    """A line where ``gpu``'s prediction used its rows' ``GPU TFLOPS`` and the catalog's fp32
    peak for that GPU is far from it (QA session 36: an H100 row with K80's 4.113)."""
    from gpucast.predict.speed import ROWS_PEAK

    if spec is None or pred["peak_source"] != ROWS_PEAK:
        return None
    rows_tflops, catalog_tflops = float(pred["peak_tflops"]), spec.matrix_tflops("fp32")
    if max(rows_tflops / catalog_tflops, catalog_tflops / rows_tflops) <= _ROW_PEAK_MISMATCH:
        return None
    return (
        f"{source}: the {gpu} rows give GPU TFLOPS {rows_tflops:g}, the catalog's {spec.name} "
        f"fp32 peak is {catalog_tflops:g}; the prediction used the rows' figure -- fix the cell, "
        "or leave it empty for the catalog's"
    )


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictClusterRequest:
    """A cluster model and rows to predict (``gpucast predict cluster``)."""

    VERB: ClassVar[str] = "predict cluster"

    model: Path = option(help="JSON from `gpucast fit cluster`", example="cluster.json")
    input: Path = option(
        help="CSV of rows to predict: Number of Parameters, Number of Tensors, Workers, "
        "Parameter Servers, and Step Time (s) or the GPU (temp) and Model (temp) of a fitted "
        "run; optional Strategy, Max Tensor Size (MB) (docs/formats.md)",
        example="rows.csv",
    )
    output: Path = option(help="CSV to write (input + predictions)", example="out.csv")


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictClusterResult:
    """The rows written: the input plus predicted speed, interval, bottleneck, PS shards."""

    output: Path
    rows: int
    bottlenecks: dict[str, int]
    frame: pd.DataFrame = field(compare=False, repr=False)
    #: e.g. that some rows need more PS shards than the search tried
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": str(self.output),
            "rows": self.rows,
            "bottlenecks": self.bottlenecks,
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()


def predict_cluster(
    request: PredictClusterRequest | None = None, /, **options: Any
) -> PredictClusterResult:
    """Cluster speed (steps/s) for each row of ``input``: ``Number of Parameters``, ``Number
    of Tensors``, ``Workers``, ``Parameter Servers``, and ``Step Time (s)`` (single worker) or
    the ``GPU (temp)`` and ``Model (temp)`` of a run in the fit data; optional ``Strategy`` and
    ``Max Tensor Size (MB)``. Adds the predicted speed, its interval, the bottleneck and the
    PS shards needed."""
    import numpy as np
    import pandas as pd

    from gpucast.domain.cmdare import GPU_COL, MODEL_COL, STEP_TIME_COL
    from gpucast.predict.cluster import MAX_SHARDS_SEARCHED, STRATEGIES, ClusterModel
    from gpucast.store.datasets.rows import PS_COL, line_of, read_cluster_rows, text_cell
    from gpucast.store.files import write_csv_atomic

    request = resolve(PredictClusterRequest, request, options)
    fitted = _load(request.model, ClusterModel)
    rows = read_cluster_rows(request.input, STRATEGIES)
    steps = rows.single_worker_step_time_s.copy()
    where = str(request.input)
    # a PS strategy needs its servers; all-reduce and FSDP have none (0, or a CM-DARE row's 1)
    with_ps = np.isin(rows.strategy, ("ps-async", "ps-sync"))
    for bad in np.flatnonzero(with_ps & (rows.ps_shards < 1)).tolist():
        raise DataFormatError(
            where,
            f"must be >= 1 for strategy {rows.strategy[bad]} (got 0)",
            line=line_of(bad),
            column=PS_COL,
            fix="give its parameter servers, or Strategy allreduce / fsdp (no servers)",
        )
    # the step a row gives of an all-reduce or FSDP job is one GPU's alone (no PS time to take
    # out of it); a step looked up from the fit data (CM-DARE) was measured with 1 PS
    includes_ps = with_ps | np.isnan(steps)
    for i in rows.missing_step_time():
        for col in (GPU_COL, MODEL_COL):
            if not text_cell(rows.raw, col, i):
                raise DataFormatError(
                    where,
                    f"no {STEP_TIME_COL!r} and no {col!r} to look the 1-worker step time up",
                    line=line_of(i),
                    column=STEP_TIME_COL,
                    fix=f"give {STEP_TIME_COL!r} (single-worker step time)",
                )
        gpu, model = text_cell(rows.raw, GPU_COL, i), text_cell(rows.raw, MODEL_COL, i)
        seen = fitted.single_worker_step_time(gpu, model)
        if seen is None:
            raise DataFormatError(
                where,
                f"{gpu}/{model} was not in the fit data",
                line=line_of(i),
                column=STEP_TIME_COL,
                fix=f"give {STEP_TIME_COL!r} (e.g. from `gpucast predict speed`)",
            )
        steps[i] = seen
    frame = pd.DataFrame(
        {
            "single_worker_step_time_s": steps,
            "workers": rows.workers.astype(np.int64),
            "ps_shards": np.maximum(rows.ps_shards, 1.0),  # unused without a PS
            "param_bytes": rows.n_parameters * fitted.bytes_per_parameter,
            "n_tensors": rows.n_tensors,
            "max_tensor_bytes": rows.max_tensor_mb * 1e6,
            "strategy": rows.strategy,
            "step_includes_ps": includes_ps,
        }
    )
    pred = fitted.predict_frame(frame)
    out = rows.raw.copy()
    out[SPEED_OUT_COL] = pred["speed_steps_per_s"].to_numpy()
    out[SPEED_LOWER_COL] = pred["lower"].to_numpy()
    out[SPEED_UPPER_COL] = pred["upper"].to_numpy()
    out[BOTTLENECK_COL] = pred["bottleneck"].to_numpy()
    out[SHARDS_NEEDED_COL] = np.where(with_ps, pred["ps_shards_needed"].to_numpy(), 0)
    out[SHARDS_CAPPED_COL] = with_ps & pred["ps_shards_capped"].to_numpy(dtype=bool)
    write_csv_atomic(out, request.output)
    counts = out[BOTTLENECK_COL].astype(str).value_counts()
    n_capped = int(out[SHARDS_CAPPED_COL].sum())
    warnings = (
        (
            f"{count_of(n_capped, 'row')} PS-bound even with {MAX_SHARDS_SEARCHED} shards (the "
            f"most searched): {SHARDS_NEEDED_COL!r} {MAX_SHARDS_SEARCHED} there is that cap, not "
            f"a count that removes the bottleneck ({SHARDS_CAPPED_COL!r} true)",
        )
        if n_capped
        else ()
    )
    return PredictClusterResult(
        output=request.output,
        rows=len(out),
        bottlenecks={str(k): int(v) for k, v in counts.items()},
        frame=out,
        warnings=warnings,
    )


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictCheckpointRequest:
    """A checkpoint model and rows to predict (``gpucast predict checkpoint``)."""

    VERB: ClassVar[str] = "predict checkpoint"

    model: Path = option(help="JSON from `gpucast fit checkpoint`", example="checkpoint.json")
    input: Path = option(help="CSV with Checkpoint Size (MB)", example="rows.csv")
    output: Path | None = option(
        None,
        help="CSV to write (input + predictions); without it the predictions are printed",
        example="out.csv",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictCheckpointResult:
    """The input rows plus predicted checkpoint duration and its interval (written to
    ``output`` when given)."""

    output: Path | None
    rows: int
    frame: pd.DataFrame = field(compare=False, repr=False)

    def predictions(self) -> list[dict[str, float]]:
        """Each row's predicted duration and interval, in input order."""
        cols = {"duration_s": DURATION_COL, "lower_s": LOWER_COL, "upper_s": UPPER_COL}
        return [
            {key: float(row[col]) for key, col in cols.items()} for _, row in self.frame.iterrows()
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": None if self.output is None else str(self.output),
            "rows": self.rows,
            "predictions": self.predictions(),
        }

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()


def predict_checkpoint(
    request: PredictCheckpointRequest | None = None, /, **options: Any
) -> PredictCheckpointResult:
    """Checkpoint duration for each row of ``input`` (``Checkpoint Size (MB)``, optionally
    ``Index File Size``); adds ``Predicted Duration (s)``, ``Lower (s)`` and ``Upper (s)``."""
    import pandas as pd

    from gpucast.predict.overheads import CheckpointModel
    from gpucast.store.datasets.rows import read_checkpoint_rows
    from gpucast.store.files import write_csv_atomic

    request = resolve(PredictCheckpointRequest, request, options)
    fitted = _load(request.model, CheckpointModel)
    rows = read_checkpoint_rows(request.input)
    frame = pd.DataFrame({"checkpoint_mb": rows.checkpoint_mb})
    if rows.index_mb is not None:
        frame["index_mb"] = rows.index_mb
    pred = fitted.predict_frame(frame)
    out = rows.raw.copy()
    out[DURATION_COL] = pred["duration_s"].to_numpy()
    out[LOWER_COL] = pred["lower"].to_numpy()
    out[UPPER_COL] = pred["upper"].to_numpy()
    if request.output is not None:
        write_csv_atomic(out, request.output)
    return PredictCheckpointResult(output=request.output, rows=len(out), frame=out)

"""``gpucast.measure_coldstart`` and ``gpucast.predict_coldstart``: a serverless cold start,
phase by phase (issue #19).

``measure coldstart`` runs one cold start of a workload here (:mod:`gpucast.measure.coldstart`:
state dict saved to a temporary file and dropped from the page cache, ``torch.load``, the copy
to the device, the first forward against the steady ones, the CUDA context on a GPU) and
stores it (``runs list --kind coldstart``).

``predict coldstart`` prices the phases with :func:`gpucast.predict.coldstart.predict_cold_start`:
on a catalog ``--gpu``, weights cross ``--storage`` (a storage class of
``catalog/data/coldstart.csv``), from an EBS volume the instance's dedicated EBS bandwidth
(``--instance``: ``catalog/data/ebs_bandwidth.csv``, or ``--ebs-gbps``;
:mod:`gpucast.inputs.instance_ebs`), the instance network (``--network-gbps``, when the storage
is remote) and the GPU's PCIe link; the first inference is a roofline forward pass on the GPU plus
the first-call cost; container start and CUDA context are the catalog's durations unless given.
Without ``--gpu`` it predicts this machine's CPU cold start from rates measured here apart
from the model (:func:`gpucast.measure.coldstart.measure_host_rates`), ``--storage local``
being this machine's disk -- what ``benchmarks/coldstart_accuracy.py`` checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gpu_memory import usable_gib, usable_text
from gpucast.domain.options import documented, option
from gpucast.domain.units import GIB
from gpucast.domain.workload import WorkloadOptions, workload_options_field
from gpucast.inputs.instance_ebs import check_gbps, check_instance_options

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.llm import TransformerSpec
    from gpucast.domain.provenance import Validation
    from gpucast.domain.serverless import ColdStartMeasurement, ColdStartPrediction, HostRates

#: the storage class meaning "this machine's disk, measured" (the default without --gpu: the
#: CPU validation, ``benchmarks/coldstart_accuracy.py``, reads weights from it)
LOCAL_STORAGE = "local"
#: the default storage class on a catalog --gpu
GPU_STORAGE = "local-nvme"


#: the largest first-inference batch (a cold start serves a request, not a training batch)
MAX_BATCH = 4096


def _check_batch(batch_size: int) -> None:
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= MAX_BATCH
    ):
        raise InvalidSpecError(
            "batch-size",
            f"must be an integer in [1, {MAX_BATCH}]",
            got=batch_size,
            fix="e.g. --batch-size 1",
        )


def _check_seconds(name: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and 0 <= value <= 3600):
        raise InvalidSpecError(name, "must be in [0, 3600] s", got=value, fix=f"e.g. --{name} 1")


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureColdstartRequest:
    """One cold start to time here (``gpucast measure coldstart``)."""

    VERB: ClassVar[str] = "measure coldstart"

    workload: str = option(
        help="A built-in workload name or module:factory.", argument=True, example="resnet50"
    )
    workload_options: WorkloadOptions = workload_options_field()
    device: str = option("cpu", help="cpu, cuda, cuda:N, or auto (a GPU if any).", example="cpu")
    batch_size: int = option(1, help="Samples in the first inference (>= 1).", example="1")
    steady_runs: int = option(
        5, help="Forward passes after the first; their median is the steady one.", example="5"
    )
    save: bool = option(
        True, negative="no-save", help="Write the result to the store (--no-save: do not)."
    )

    def __post_init__(self) -> None:
        if not self.workload or not self.workload.strip():
            raise InvalidSpecError("workload", "must not be empty", fix="e.g. resnet50")
        _check_batch(self.batch_size)
        if isinstance(self.steady_runs, bool) or not 1 <= self.steady_runs <= 1000:
            raise InvalidSpecError(
                "steady-runs", "must be an integer in [1, 1000]", got=self.steady_runs,
                fix="e.g. --steady-runs 3",
            )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureColdstartResult:
    measurement: ColdStartMeasurement
    run_id: int | None
    db: Path | None
    #: the store whose missing folder this write created (its ``parent``), else ``None``
    new_store: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.measurement.to_dict(),
            "run_id": self.run_id,
            "db": None if self.db is None else str(self.db),
        }


def measure_coldstart(
    request: MeasureColdstartRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> MeasureColdstartResult:
    """Time one cold start of a workload on this machine and store it (module docstring)."""
    from gpucast.measure.coldstart import measure_cold_start
    from gpucast.measure.devices import resolve_device
    from gpucast.store import Store, default_db_path
    from gpucast.store.coldstart import save_coldstart
    from gpucast.store.db import new_store
    from gpucast.workloads import get_workload

    request = resolve(MeasureColdstartRequest, request, options)
    resolve_device(request.device)
    opts = dict(request.workload_options)
    workload = get_workload(request.workload, **opts)
    db_path = Path(db) if db is not None else default_db_path()
    store = Store(db_path).open() if request.save else None  # a bad db fails before measuring
    try:
        measured = measure_cold_start(
            workload,
            options=opts,
            device=request.device,
            batch_size=request.batch_size,
            steady_runs=request.steady_runs,
        )
        run_id = None if store is None else save_coldstart(store, measured)
    finally:
        if store is not None:
            store.close()
    return MeasureColdstartResult(
        measurement=measured,
        run_id=run_id,
        db=None if store is None else db_path,
        new_store=new_store(store),
    )


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictColdstartRequest:
    """A cold start to price (``gpucast predict coldstart``)."""

    VERB: ClassVar[str] = "predict coldstart"

    workload: str = option(
        help="A built-in workload name or module:factory.", argument=True, example="resnet50"
    )
    workload_options: WorkloadOptions = workload_options_field()
    gpu: str | None = option(
        None,
        help="Catalog GPU the function runs on (default: this machine's CPU, rates measured here).",
        example="T4",
    )
    storage: str | None = option(
        None,
        help="Where the weights are read from: a storage class of catalog/data/coldstart.csv "
        "(local-nvme, ebs-gp3, ebs-io2, s3, ...) or local (this machine's disk, measured; "
        "what the CPU figure is validated on). Default: local without --gpu, local-nvme with.",
        example="s3",
    )
    network_gbps: float | None = option(
        None,
        help="Instance network (Gbit/s) the weights cross from remote storage (default: not "
        "crossed).",
        example="25",
    )
    instance: str | None = option(
        None,
        help="AWS instance type the function runs on (catalog/data/ebs_bandwidth.csv): weights "
        "from an EBS --storage also cross its dedicated EBS bandwidth (its maximum; said).",
        example="g5.12xlarge",
    )
    ebs_gbps: float | None = option(
        None,
        help="The instance's EBS bandwidth (Gbit/s) weights from an EBS --storage cross, your "
        "own figure (instead of --instance's).",
        example="16",
    )
    batch_size: int = option(1, help="Samples in the first inference (>= 1).", example="1")
    container_s: float | None = option(
        None, help="Runtime/container start (s; default: the catalog's, 0 on the CPU).", example="1"
    )
    cuda_context_s: float | None = option(
        None, help="CUDA context creation (s; default: the catalog's).", example="0.5"
    )
    tp: int | None = option(
        None,
        help="GPUs of --gpu a language model of llm_models.csv is split over (tensor-parallel "
        "ranks, as predict infer's --tp: each loads its shard at once). Default: the fewest "
        "of 1, 2, 4, 8 that hold it; a built-in workload loads on one.",
        example="8",
    )

    def __post_init__(self) -> None:
        if not self.workload or not self.workload.strip():
            raise InvalidSpecError("workload", "must not be empty", fix="e.g. resnet50")
        _check_batch(self.batch_size)
        if self.tp is not None and (
            isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1
        ):
            raise InvalidSpecError("tp", "must be an integer >= 1", got=self.tp,
                                   fix="e.g. --tp 2, or drop it for the fewest GPUs that hold "
                                   "the model")  # fmt: skip
        if self.tp is not None and self.tp > 1 and self.gpu is None:
            raise InvalidSpecError(
                "tp", "splits a language model over GPUs of --gpu", got=self.tp,
                fix="add --gpu, e.g. --gpu H100-SXM, or drop --tp",
            )  # fmt: skip
        check_gbps("network-gbps", self.network_gbps, "25")
        check_instance_options(self.instance, self.ebs_gbps)
        _check_seconds("container-s", self.container_s)
        _check_seconds("cuda-context-s", self.cuda_context_s)
        if self.storage is not None and not self.storage.strip():
            raise InvalidSpecError("storage", "must not be empty", fix="e.g. --storage local-nvme")


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictColdstartResult:
    workload: str
    device: str
    prediction: ColdStartPrediction
    validation: Validation
    host_rates: HostRates | None = None
    assumptions: dict[str, str] = field(default_factory=dict)
    instance: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "device": self.device,
            "instance": self.instance,
            **self.prediction.to_dict(),
            "host_rates": None if self.host_rates is None else self.host_rates.to_dict(),
            "validation": self.validation.to_dict(),
            "assumptions": dict(self.assumptions),
        }


def predict_coldstart(
    request: PredictColdstartRequest | None = None,
    /,
    *,
    host_rates: HostRates | None = None,
    **options: Any,
) -> PredictColdstartResult:
    """Every phase of a cold start (module docstring). ``host_rates``: this machine's rates
    measured beforehand (measured now when needed and not given)."""
    request = resolve(PredictColdstartRequest, request, options)
    from gpucast.catalog import load_catalog
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.inputs.instance_ebs import check_instance, instance_links
    from gpucast.inputs.workload import check_workload_name, workload_profile
    from gpucast.predict.coldstart import predict_cold_start

    facts = load_coldstart_facts()
    gpu = load_catalog().gpu(request.gpu) if request.gpu is not None else None
    storage = (request.storage or (LOCAL_STORAGE if gpu is None else GPU_STORAGE)).strip().lower()
    if storage != LOCAL_STORAGE:
        facts.get("storage", storage)  # an unknown class fails before any work
    elif gpu is not None:
        raise InvalidSpecError(
            "storage",
            "local (this machine's disk) only prices this machine's CPU",
            fix="leave --gpu out, or use a storage class such as local-nvme",
        )
    check_instance(request.instance, gpu, load_catalog())
    crossed = instance_links(
        storage,
        instance=request.instance,
        ebs_gbps=request.ebs_gbps,
        network_gbps=request.network_gbps,
    )  # so does an --ebs-gbps off EBS
    llm = _catalog_llm(request.workload)
    if llm is not None:
        return _predict_llm(request, llm, gpu, storage, crossed)
    if request.tp is not None and request.tp > 1:
        raise InvalidSpecError(
            "tp", f"splits a language model of llm_models.csv; {request.workload} loads on "
            "one GPU", got=request.tp, fix="drop --tp",
        )  # fmt: skip
    check_workload_name(request.workload, language_models=True)
    profile = workload_profile(
        request.workload,
        "fp32",
        batch_size=request.batch_size,
        options=dict(request.workload_options),
    )
    weight_bytes = profile.memory.weights_bytes
    peak_gib = profile.memory.inference_peak_bytes / GIB
    if gpu is not None and peak_gib > usable_gib(gpu.memory_gib):  # the one rule
        raise InvalidSpecError(
            "gpu",
            f"{request.workload} needs {peak_gib:.1f} GiB at batch {request.batch_size}, more "
            f"than a {gpu.name}'s {usable_text(gpu.memory_gib)}",
            fix="use a --gpu with more memory or a smaller --batch-size",
        )
    sources: dict[str, str] = {"weights": f"profile of {request.workload}: {weight_bytes:,} B"}
    needs_host = gpu is None or storage == LOCAL_STORAGE
    if needs_host and host_rates is None:
        from gpucast.measure.coldstart import measure_host_rates

        host_rates = measure_host_rates()
    links: dict[str, float | None] = {}
    if storage == LOCAL_STORAGE:
        assert host_rates is not None
        links["local disk"] = host_rates.read_gbs
        sources["storage"] = f"local disk {host_rates.read_gbs:.2f} GB/s, {host_rates.source}"
    else:
        fact = facts.get("storage", storage)
        links[storage] = fact.value
        sources["storage"] = fact.source()
    more_links, more_sources, instance_assumptions = crossed
    links.update(more_links)
    sources.update(more_sources)
    assumptions = dict(instance_assumptions)
    if gpu is not None:
        from gpucast.inputs.serverless import gpu_cold_start
        from gpucast.inputs.serving import forward_pass_s

        prediction, gpu_assumptions = gpu_cold_start(
            profile.memory.weights_bytes,
            profile.inference_flops,
            gpu,
            links=links,
            sources=sources,
            container_s=request.container_s,
            cuda_context_s=request.cuda_context_s,
            forward=forward_pass_s(
                request.workload,
                gpu,
                batch_size=request.batch_size,
                options=dict(request.workload_options),
            ),
        )
        assumptions.update(gpu_assumptions)
        device = gpu.name
    else:
        assert host_rates is not None
        prediction = predict_cold_start(
            weight_bytes=weight_bytes,
            parameter_tensors=profile.parameter_tensors,
            inference_flops=profile.inference_flops,
            links_gbs=links,
            flops=host_rates.flops,
            memory_gbs=host_rates.memory_gbs,
            container_s=request.container_s or 0.0,
            cuda_context_s=0.0,
            first_call_s=host_rates.first_call_s,
            per_tensor_s=host_rates.per_tensor_s,
            sources={**sources, "forward": f"roofline on this CPU ({host_rates.source})"},
        )
        device = "cpu"
    return PredictColdstartResult(
        workload=request.workload,
        device=device,
        prediction=prediction,
        validation=_validation(device, storage),
        host_rates=host_rates,
        assumptions=assumptions,
        instance=request.instance,
    )


def _validation(device: str, storage: str) -> Validation:
    """The validated error of this cold start: the CPU check read its weights from this
    machine's disk (``--storage local``), so a CPU prediction through a catalog storage class
    is not covered by it and says so."""
    from gpucast.catalog.validation import CPU, validation_for
    from gpucast.domain.provenance import Validation

    validation = validation_for("coldstart", [device], "fp32")
    if device != CPU or storage == LOCAL_STORAGE or not validation.validated:
        return validation
    return Validation(
        model="coldstart",
        regime=f"{validation.regime}, --storage {storage} (the CPU check is validated for "
        f"--storage {LOCAL_STORAGE}, this machine's disk, only)",
        error=None,
    )


def _catalog_llm(workload: str) -> TransformerSpec | None:
    """The language model of ``llm_models.csv`` called ``workload`` when no built-in workload
    is (``llama-3-8b``), else None."""
    from gpucast.catalog.llm import llm_model
    from gpucast.domain.errors import UnknownModelError
    from gpucast.inputs.workload import builtin_workloads

    if ":" in workload or workload.strip().lower() in builtin_workloads():
        return None
    try:
        return llm_model(workload)
    except UnknownModelError:
        return None


def _predict_llm(
    request: PredictColdstartRequest,
    spec: TransformerSpec,
    gpu: GpuSpec | None,
    storage: str,
    instance_links: tuple[dict[str, float | None], dict[str, str], dict[str, str]],
) -> PredictColdstartResult:
    """A language model's cold start on one catalog GPU: its weights at the serving engine's
    default precision through ``--storage``, the instance's links (``instance_links``:
    :func:`gpucast.inputs.instance_ebs.instance_links`) and PCIe
    (:func:`gpucast.inputs.serverless.llm_cold_start`)."""
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.serverless import llm_cold_start

    if gpu is None:
        raise InvalidSpecError(
            "gpu",
            f"{spec.name} is a language model of llm_models.csv, priced on a catalog GPU",
            fix="add --gpu, e.g. --gpu A10G",
        )
    gpus, chosen = _llm_gpus(spec, gpu, request.tp)
    fact = load_coldstart_facts().get("storage", storage)
    more_links, more_sources, instance_assumptions = instance_links
    links: dict[str, float | None] = {storage: fact.value, **more_links}
    sources = {"storage": fact.source(), **more_sources}
    prediction, assumptions = llm_cold_start(
        spec,
        gpu,
        links=links,
        sources=sources,
        container_s=request.container_s,
        cuda_context_s=request.cuda_context_s,
        gpus=gpus,
    )
    return PredictColdstartResult(
        workload=spec.name,
        device=gpu.name if gpus == 1 else f"{gpus} x {gpu.name}",
        prediction=prediction,
        validation=validation_for("coldstart", [gpu.name], "fp16", gpus),
        assumptions={**instance_assumptions, **chosen, **assumptions},
        instance=request.instance,
    )


def _llm_gpus(spec: TransformerSpec, gpu: GpuSpec, tp: int | None) -> tuple[int, dict[str, str]]:
    """The GPUs ``spec`` loads on (``tp``, checked by :func:`_check_llm_fits`; ``None``: the
    fewest of 1, 2, 4, 8 that hold it) and, where the default chose it, the assumption that
    says so."""
    if tp is not None:
        _check_llm_fits(spec, gpu, tp)
        return tp, {}
    from gpucast.catalog.engines import inference_engine
    from gpucast.domain.errors import NoFeasiblePlanError
    from gpucast.inputs.serverless import LLM_ENGINE
    from gpucast.predict.llm_infer import smallest_fitting_tp

    try:
        need = smallest_fitting_tp(
            spec, gpu, inference_engine(LLM_ENGINE), input_len=1, output_len=1
        )
    except NoFeasiblePlanError:
        _check_llm_fits(spec, gpu, 8, field="gpu")  # says what 8 of them lack
        raise
    return need, {
        "tp": f"{need} x {gpu.name}: the fewest of 1, 2, 4, 8 that hold the weights "
        "(the default; --tp N sets it)"
    }


def _check_llm_fits(
    spec: TransformerSpec, gpu: GpuSpec, gpus: int, *, field: str | None = None
) -> None:
    """One clear error where ``gpus`` GPUs of type ``gpu`` cannot split ``spec`` or do not
    hold its weights (and one token's KV cache) in the memory the serving engine of the
    cold-start model (:data:`gpucast.inputs.serverless.LLM_ENGINE`) gives them; the fix names
    the fewest of 1, 2, 4, 8 that do."""
    from gpucast.catalog.engines import inference_engine
    from gpucast.domain.errors import NoFeasiblePlanError
    from gpucast.inputs.serverless import LLM_ENGINE
    from gpucast.predict.llm_infer import (
        TP_CHOICES,
        predict_inference,
        smallest_fitting_tp,
        split_problem,
    )

    engine = inference_engine(LLM_ENGINE)
    problem = split_problem(spec, engine, gpus)
    if problem is not None:
        good = [str(n) for n in TP_CHOICES if split_problem(spec, engine, n) is None]
        raise InvalidSpecError("tp", problem, got=gpus, fix=f"use --tp {' or '.join(good)}")
    one = predict_inference(spec, gpu, engine, batch_size=1, input_len=1, output_len=1, tp=gpus)
    if one.fits:
        return
    try:
        need = smallest_fitting_tp(spec, gpu, engine, input_len=1, output_len=1)
        fix = f"use --tp {need} (the fewest of 1, 2, 4, 8 that hold it) or a GPU with more memory"
    except NoFeasiblePlanError:
        fix = f"use a GPU with more memory: no 8 {gpu.name} GPUs hold it"
    name = engine.display_name
    weights = f"{one.memory.weights_bytes / GIB:.1f} GiB of weights" + (
        "" if gpus == 1 else f" per GPU on {gpus} GPUs"
    )
    raise InvalidSpecError(
        field or ("gpu" if gpus == 1 else "tp"),
        f"{spec.name} needs {weights} ({one.precision}, {name}'s default), more than the "
        f"{one.memory.capacity_bytes / GIB:.1f} GiB {name} fills of "
        f"{'one' if gpus == 1 else 'each'} {gpu.name}'s {gpu.memory_gib:g} GiB",
        fix=fix,
    )

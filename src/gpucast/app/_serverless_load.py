"""A serverless request's load (:class:`_Load`): the trace (or synthetic workload) read, its
functions' models on the GPU, the unit of keep-alive, the stored cold starts and the price;
and the checks that need the load (pool size, warm-up, servable share).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.app._serverless_options import DEFAULT_GPU, ServerlessLoad
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.gpu_memory import usable_gib
from gpucast.domain.units import format_duration

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from gpucast.domain.catalog import GpuSpec
    from gpucast.inputs.coldstart import StoredColdStart
    from gpucast.inputs.serverless import GpuFunction, ServerlessTrace

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


def _price(gpu: str, given: float | None, offers_path: Path | None) -> tuple[float, str]:
    from gpucast.catalog import load_catalog, offers_file

    if given is not None:
        return given, f"--price {given:g} US$/h"
    offers = load_catalog(offers_file(offers_path)).find_offers(gpu=gpu)
    if not offers:
        raise InvalidInputError(
            f"--gpu {gpu}: no cloud offer in the catalog to price it", fix="pass --price US$/h"
        )
    best = min(offers, key=lambda o: o.on_demand_usd_per_hour / o.gpus)
    per_gpu = best.on_demand_usd_per_hour / best.gpus
    return per_gpu, (
        f"{per_gpu:.4g} US$/h per GPU: {best.provider} {best.instance_type} in {best.region} "
        f"on demand ({best.source_url}, as of {best.as_of})"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Load:
    """A :class:`ServerlessLoad` resolved: counts, per-function figures, GPU and price."""

    trace: ServerlessTrace
    functions: tuple[GpuFunction, ...]
    gpu: GpuSpec
    price: float
    price_source: str
    exec_s: FloatArray
    cold_s: FloatArray
    memory_gib: FloatArray
    swap_s: FloatArray
    pcie_gbs: float
    #: each unit's service times at equally likely points (an LLM trace, apps whose functions
    #: differ), else None
    exec_spread: FloatArray | None = None
    warnings: tuple[str, ...] = ()
    #: what a row of ``trace.counts`` is (``app`` or ``function``), the trace's applications
    #: (:func:`~gpucast.inputs.serverless_apps.app_summary`; None: it has none) and each
    #: unit's own memory (MB; ``--unit app`` only)
    unit: str = "function"
    apps: dict[str, Any] | None = None
    host_memory_mb: FloatArray | None = None
    #: the GPUs each unit's instance holds (a language model split over several), None: one
    instance_gpus: FloatArray | None = None
    #: ``(units, bins)`` requests beyond the model's context window, rejected at arrival by
    #: every deployment (an Azure LLM trace; None: none): not invocations, misses in every
    #: latency percentile and SLO share (:func:`gpucast.simulate.serverless.with_rejected`)
    rejected: IntArray | None = None

    @property
    def gpus(self) -> FloatArray:
        """The GPUs of each unit's instance."""
        import numpy as np

        if self.instance_gpus is None:
            return np.ones(self.trace.counts.shape[0])
        return self.instance_gpus


def _llm_functions(
    request: ServerlessLoad, trace: ServerlessTrace, gpu: GpuSpec, storage: str
) -> tuple[tuple[GpuFunction, ...], FloatArray, IntArray, IntArray, tuple[str, ...]]:
    """One :func:`~gpucast.inputs.serverless.llm_gpu_function` per function of an LLM trace
    (function i serves model i mod len(models)), their service-time quantiles, the counts of
    the requests served (those within the model's context window) and of those rejected
    (beyond it) per function and bin, and warnings."""
    import numpy as np

    from gpucast.inputs.llm_serving import is_llm_model
    from gpucast.inputs.serverless import llm_gpu_function
    from gpucast.simulate.serverless import service_quantiles

    for m in request.models:
        if not is_llm_model(m):
            raise InvalidSpecError(
                "models",
                f"{m} is not a language model of llm_models.csv: the requests of an Azure LLM "
                "trace are priced by their tokens",
                fix="e.g. --models llama-2-7b",
            )
    if request.durations == "trace":
        raise InvalidSpecError(
            "durations",
            "the Azure LLM trace has no durations: each request's service time comes from "
            "its tokens",
            fix="drop --durations",
        )
    if request.coldstart_run:
        raise InvalidSpecError(
            "coldstart-run",
            "the functions of an Azure LLM trace serve language models of llm_models.csv, "
            "whose cold starts `measure coldstart` does not measure",
            fix="drop --coldstart-run (--container-s and --cuda-context-s apply)",
        )
    funcs, services, warnings = [], [], []
    n_bins = int(trace.counts.shape[1])
    counts = np.zeros((len(trace.tokens), n_bins), dtype=np.int64)
    rejected = np.zeros_like(counts)
    for i, (bins, inp, out) in enumerate(trace.tokens):
        model = request.models[i % len(request.models)]
        f, service, notes = llm_gpu_function(
            model, gpu, storage=storage, network_gbps=request.network_gbps,
            instance=request.instance, ebs_gbps=request.ebs_gbps, input_tokens=inp,
            output_tokens=out, container_s=request.container_s,
            cuda_context_s=request.cuda_context_s,
        )  # fmt: skip
        served = ~np.isnan(service)
        counts[i] = np.bincount(bins[served], minlength=n_bins)
        rejected[i] = np.bincount(bins[~served], minlength=n_bins)
        funcs.append(f)
        services.append(service[served])
        warnings += [f"{trace.names[i]}: {n}" for n in notes]
    return tuple(funcs), service_quantiles(services), counts, rejected, tuple(warnings)


def _load(request: ServerlessLoad, db: Path | str | None = None) -> _Load:
    import numpy as np

    from gpucast.catalog import load_catalog
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.inputs.instance_ebs import check_instance
    from gpucast.inputs.llm_serving import is_llm_model
    from gpucast.inputs.serverless import gpu_function, synthetic_trace, trace_from_path

    catalog = load_catalog()
    gpu = catalog.gpu(request.gpu or DEFAULT_GPU)
    storage = request.storage.strip().lower()
    load_coldstart_facts().get("storage", storage)
    check_instance(request.instance, gpu, catalog)
    price, price_source = _price(gpu.name, request.price, request.offers_file)
    if request.trace is not None:
        trace = trace_from_path(request.trace, request.day or 1)
        _check_recording(request, trace)
    else:
        assert request.synthetic is not None and request.minutes is not None
        trace = synthetic_trace(request.synthetic, minutes=request.minutes, seed=request.seed)
    pcie = load_coldstart_facts().get("link", f"pcie{gpu.pcie_generation}").value
    if trace.tokens:
        funcs, spread, served, rejected, notes = _llm_functions(request, trace, gpu, storage)
        return _Load(
            trace=dataclasses.replace(trace, counts=served),
            rejected=rejected if rejected.any() else None,
            functions=funcs,
            gpu=gpu,
            price=price,
            price_source=price_source,
            exec_s=np.array([f.forward_s for f in funcs]),
            cold_s=np.array([f.cold_start_s for f in funcs]),
            memory_gib=np.array([f.memory_gib for f in funcs]),
            # each GPU of an instance swaps its shard in over its own link, as it loads it
            swap_s=np.array([f.weight_bytes / (pcie * 1e9 * f.gpus) for f in funcs]),
            pcie_gbs=pcie,
            exec_spread=spread,
            warnings=trace.warnings + notes,
            instance_gpus=np.array([float(f.gpus) for f in funcs]),
        )
    for m in request.models:
        if is_llm_model(m):
            raise InvalidSpecError(
                "models",
                f"{m} is a language model: its requests need token counts, which "
                f"{'a generated workload' if request.trace is None else 'this trace'} has not",
                fix="give --trace an Azure LLM inference trace (AzureLLMInferenceTrace_*.csv), "
                "or a DNN workload (e.g. resnet50)",
            )
    measured, measured_notes = _stored_cold_starts(request, gpu, db)
    funcs = tuple(
        gpu_function(
            m,
            gpu,
            storage=storage,
            network_gbps=request.network_gbps,
            instance=request.instance,
            ebs_gbps=request.ebs_gbps,
            container_s=request.container_s,
            cuda_context_s=request.cuda_context_s,
            measured=measured.get(m),
        )
        for m in request.models
    )
    which = np.arange(trace.counts.shape[0]) % len(funcs)
    forward = np.array([f.forward_s for f in funcs])[which]
    if request.durations == "trace":
        exec_s = np.where(np.isnan(trace.duration_s), forward, np.fmax(trace.duration_s, forward))
    else:
        exec_s = forward
    load = _Load(
        trace=trace,
        functions=funcs,
        gpu=gpu,
        price=price,
        price_source=price_source,
        exec_s=exec_s,
        cold_s=np.array([f.cold_start_s for f in funcs])[which],
        memory_gib=np.array([f.memory_gib for f in funcs])[which],
        swap_s=np.array([f.weight_bytes / (pcie * 1e9) for f in funcs])[which],
        pcie_gbs=pcie,
        warnings=trace.warnings + measured_notes,
    )
    return _with_unit(request, load, which)


def _check_recording(request: ServerlessLoad, trace: ServerlessTrace) -> None:
    """A trace read from one recording (the Azure LLM trace, an ``arrival_s`` CSV: the
    trace's ``paths``) has no days and no applications, and an ``arrival_s`` CSV is one
    function, serving one model: one line for what does not fit."""
    from gpucast.app._serverless_unit import no_apps_in_trace

    if not trace.paths:
        return
    what = (
        "the Azure LLM inference trace"
        if trace.tokens
        else f"{trace.paths[0].name} (an arrival_s CSV: one function's invocations)"
    )
    if request.day is not None:
        raise InvalidSpecError(
            "day",
            f"picks a day of an Azure Functions 2019 trace, and {what} is one recording (no days)",
            got=request.day,
            fix="drop --day",
        )
    if request.unit == "app":
        raise no_apps_in_trace(what)
    if not trace.tokens and len(request.models) > 1:
        raise InvalidSpecError(
            "models",
            f"gives {len(request.models)} models, and {what} is one function, which serves one",
            got=",".join(request.models),
            fix=f"give one, e.g. --models {request.models[0]}",
        )


def _with_unit(request: ServerlessLoad, load: _Load, model_of: IntArray) -> _Load:
    """``load`` per function, or per application (``--unit app``, the default on a trace with
    applications: :func:`gpucast.inputs.serverless_apps.group_by_app`); ``model_of``: each
    function's model."""
    import numpy as np

    from gpucast.app._serverless_unit import app_memory_warnings
    from gpucast.inputs.serverless_apps import app_summary, group_by_app

    trace = load.trace
    if not trace.apps:  # a generated workload (--unit app refused by the request)
        return load
    apps = app_summary(trace, model_of, len(load.functions))
    if request.unit == "function":
        return dataclasses.replace(load, apps=apps)
    units = group_by_app(
        trace, model_of=model_of, functions=load.functions, exec_s=load.exec_s, gpu=load.gpu,
        pcie_gbs=load.pcie_gbs,
    )  # fmt: skip
    return dataclasses.replace(
        load,
        trace=dataclasses.replace(
            trace,
            counts=units.counts,
            names=units.names,
            duration_s=np.full(len(units.names), np.nan),
            apps=units.names,
        ),
        exec_s=units.exec_s,
        exec_spread=units.exec_spread,
        cold_s=units.cold_s,
        memory_gib=units.memory_gib,
        swap_s=units.swap_s,
        unit="app",
        apps=apps,
        host_memory_mb=units.host_memory_mb,
        warnings=load.warnings + app_memory_warnings(apps, trace.memory_file),
    )


def _stored_cold_starts(
    request: ServerlessLoad, gpu: GpuSpec, db: Path | str | None
) -> tuple[dict[str, StoredColdStart], tuple[str, ...]]:
    """The ``--coldstart-run`` runs by model, and warnings (:mod:`gpucast.inputs.coldstart`)."""
    if not request.coldstart_run:
        return {}, ()
    from gpucast.inputs.coldstart import stored_cold_starts
    from gpucast.store.db import default_db_path

    path = Path(db) if db is not None else default_db_path()
    return stored_cold_starts(path, request.coldstart_run, request.models, gpu)


def _check_pool(pool_gpus: int, load: _Load) -> None:
    """``--pool-gpus N``: every unit's instance must fit in the pool -- its GPUs and their
    memory -- or one line (exit 2) names the flag, the instance's need and the fixes."""
    import numpy as np

    gpu = load.gpu
    usable = usable_gib(gpu.memory_gib)  # the one rule: what an instance can fill of a GPU
    capacity = pool_gpus * usable
    gpus = load.gpus
    bad = np.flatnonzero((load.memory_gib > capacity * (1 + 1e-12)) | (gpus > pool_gpus))
    if not bad.size:
        return
    i = int(bad[0])
    name = load.trace.names[i]
    what = (
        f"{load.unit} {name} ({load.functions[i % len(load.functions)].model})"
        if load.unit == "function"
        else f"{load.unit} {name}"
    )
    need = max(int(gpus[i]), math.ceil(float(load.memory_gib[i]) / usable - 1e-9))
    raise InvalidSpecError(
        "pool-gpus",
        f"a pool of {pool_gpus} x {gpu.name} holds {capacity:.1f} GiB usable (of "
        f"{gpu.memory_gib:g} GiB each), and {what} needs "
        f"{float(load.memory_gib[i]):.1f} GiB on {int(gpus[i])} x {gpu.name} per instance",
        got=pool_gpus,
        fix=f"give --pool-gpus {need} or more, a GPU with more memory (--gpu), or a smaller "
        "model in --models",
    )


def _hours(seconds: float) -> str:
    """``3600`` -> ``1 h``, ``5400`` -> ``1.5 h``, ``86400`` -> ``24 h`` (as the header says);
    below an hour in minutes or seconds, as the header has it too: ``60`` -> ``1 min`` (was
    ``0.01667 h``)."""
    return f"{seconds / 3600:,.4g} h" if seconds >= 3600 else format_duration(seconds)


def _check_warmup(request: ServerlessLoad, load: _Load) -> None:
    """A warm-up must leave some of the trace to count (one line, exit 2, naming both)."""
    horizon_s = float(load.trace.counts.shape[1]) * 60.0
    if request.warmup_s >= horizon_s:
        quarter_h = horizon_s / 4 / 3600  # the example: a quarter of this trace
        example = (
            f"{quarter_h:g}h" if quarter_h.is_integer() else f"{max(1, round(quarter_h * 60))}m"
        )
        raise InvalidSpecError(
            "warmup",
            f"{_hours(request.warmup_s)} is not shorter than the trace "
            f"({_hours(horizon_s)}): nothing would be left to count",
            fix=f"give a --warmup shorter than {_hours(horizon_s)}, e.g. --warmup {example}",
        )


def _check_servable_share(load: _Load, percentile: float, warmup_s: float) -> None:
    """Where the requests beyond the context window (after the warm-up, as invocations are
    counted) alone exceed ``100 - percentile``% of the calls, no candidate meets the SLO:
    plan serve's one line (:mod:`gpucast.app._context_window`), before any candidate is
    sized."""
    import numpy as np

    from gpucast.app._context_window import beyond_context_error
    from gpucast.catalog.llm import llm_model
    from gpucast.simulate.serverless import rejected_after, warmup_bins

    if load.rejected is None:
        return
    counts = load.trace.counts
    n_warm = warmup_bins(warmup_s, 60.0, int(counts.shape[1]))
    beyond = int(rejected_after(load.rejected, counts.shape, n_warm).sum())
    models = dict.fromkeys(f.model for f in load.functions)
    error = beyond_context_error(
        beyond=beyond, total=beyond + int(counts[:, n_warm:].sum()),
        longest=max(int(np.max(inp + out)) for _, inp, out in load.trace.tokens),
        windows=tuple((m, llm_model(m).max_context) for m in models),
        percentile=percentile, percentile_flag="--slo pNN<LATENCY",
    )  # fmt: skip
    if error is not None:
        raise error

"""What the serving verbs need from the catalog, the profiler and the user's files.

``plan serve`` and ``simulate serve`` take their inputs from here, so the same question gets
the same answer in both:

* :func:`build_server_options` -- the server types a plan may rent (whole GPUs, MIG slices,
  CPU servers) with their prices; :func:`gpu_server` -- the one server ``simulate serve``
  runs on;
* :func:`mig_price_usd_per_hour` -- THE price of a MIG slice (both verbs);
* :func:`serving_efficiency` -- an inference engine's efficiency figures (eager PyTorch,
  TensorRT-class: ``serving_engines.csv`` says which fitted sets they come from);
* :func:`inference_work`, :func:`roofline_curve`, :func:`read_latency_table`,
  :func:`read_latency_tables`, :func:`model_profiles` -- the latency curve of each model on
  each server at a precision (fp32, fp16, bf16, fp8, int8): the roofline of the profiled
  inference pass, or a measured table;
* :func:`request_overhead`, :func:`pcie_gbps` -- the round trip and the host path's links;
* :func:`arrivals`, :func:`read_trace_arrivals`, :func:`function_arrivals` -- request
  streams, the same for every serving verb: Poisson, constant, the bursty preset, or a trace
  file (Azure LLM, Azure Functions per-minute counts, ``arrival_s`` CSV), time-scaled to a
  rate when one is given; the source names the process used;
* :func:`given_host_capacity`, :func:`calibrated_host_path` -- the shared host, given or
  fitted to measured medians at one or two loads.

Skipped malformed trace rows come back as ``warnings`` (never printed here).

The public names are here (``__all__``); the code lives in private parts: the servers and their
prices (``_serving_servers``), measured latency tables (``_serving_tables``) and the request
streams (``_serving_arrivals``); the latency curves and the host path are here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpucast.domain.catalog import GpuSpec, MigProfile, Offer
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Sourced
from gpucast.domain.serving import LatencyCurve
from gpucast.domain.serving_plan import ModelLoad, ModelProfile, ServerOption
from gpucast.inputs._serving_arrivals import (
    ARRIVAL_KINDS,
    BURSTY_RATE_FACTORS,
    BURSTY_SOJOURN_S,
    FUNCTIONS_TRACE_FORMAT,
    MIN_TRACE_REQUESTS,
    SERVING_TRACE_FORMATS,
    TRACE_PREFIX,
    Arrivals,
    arrival_rate_of,
    arrivals,
    arrivals_at,
    busiest_part,
    check_arrival_kind,
    function_arrivals,
    read_trace_arrivals,
    skipped_rows_warning,
    trace_path,
    whole_trace_note,
)
from gpucast.inputs._serving_servers import (
    PRICE_REPLACES_SPOT,
    GpuServer,
    ServerTarget,
    build_server_options,
    given_price_text,
    gpu_server,
    mig_price_usd_per_hour,
    network_share_gbps,
    no_offer_within,
    pcie_gbps,
    unoffered_gpus,
    unserved_gpus,
)
from gpucast.inputs._serving_tables import (
    _check_tables_used,
    latency_table_warnings,
    parse_latency_table_item,
    read_latency_table,
    read_latency_tables,
)

if TYPE_CHECKING:
    from gpucast.domain.serving import Deployment
    from gpucast.predict.serving import InferenceWork, ServingEfficiency
    from gpucast.simulate.serving import HostPathFit

__all__ = [
    "ARRIVAL_KINDS",
    "BURSTY_RATE_FACTORS",
    "BURSTY_SOJOURN_S",
    "DEFAULT_SERVING_ENGINE",
    "FUNCTIONS_TRACE_FORMAT",
    "MIN_TRACE_REQUESTS",
    "PRICE_REPLACES_SPOT",
    "SERVING_TRACE_FORMATS",
    "TRACE_PREFIX",
    "Arrivals",
    "GpuServer",
    "ServerTarget",
    "arrival_rate_of",
    "arrivals",
    "arrivals_at",
    "build_server_options",
    "busiest_part",
    "calibrated_host_path",
    "check_arrival_kind",
    "forward_pass_s",
    "function_arrivals",
    "given_host_capacity",
    "given_price_text",
    "gpu_server",
    "inference_work",
    "latency_table_warnings",
    "mig_price_usd_per_hour",
    "model_profiles",
    "network_share_gbps",
    "no_offer_within",
    "parse_latency_table_item",
    "payload_text",
    "pcie_gbps",
    "read_latency_table",
    "read_latency_tables",
    "read_trace_arrivals",
    "request_overhead",
    "roofline_curve",
    "serving_efficiency",
    "skipped_rows_warning",
    "trace_path",
    "unoffered_gpus",
    "unserved_gpus",
    "whole_trace_note",
]


# -- latency curves -------------------------------------------------------------------------
def inference_work(
    model: str, precision: str, options: Mapping[str, Any] | None = None
) -> InferenceWork:
    """The inference pass of ``model`` (built with its workload ``options``) from its
    profiles at batch 1 and 2 (fixed and per-sample FLOPs, bytes and memory), at a serving
    precision: int8/fp8 are the 16-bit profile with one byte per element (a request's input: its
    floating-point elements at the precision, :meth:`InferenceWork.at_precision`)."""
    from gpucast.domain.serving import SERVING_PRECISIONS
    from gpucast.inputs.workload import workload_profile
    from gpucast.predict.serving import InferenceWork, profile_precision

    if precision not in SERVING_PRECISIONS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(SERVING_PRECISIONS)}", got=precision,
            fix="e.g. --precision fp16",
        )  # fmt: skip
    profiled = profile_precision(precision)
    # the profile cache (gpucast.inputs.workload) serves repeated calls without PyTorch
    work = InferenceWork.from_profiles(
        workload_profile(model, profiled, batch_size=1, options=options),
        workload_profile(model, profiled, batch_size=2, options=options),
    )
    return work.at_precision(precision, profiled)


#: The engine a served model runs on unless the user names one.
DEFAULT_SERVING_ENGINE = "eager-pytorch"


def serving_efficiency(
    engine: str | None = None, precision: str | None = None
) -> Sourced[ServingEfficiency]:
    """The efficiency figures of ``engine`` (default :data:`DEFAULT_SERVING_ENGINE`), from the
    fitted sets its ``serving_engines.csv`` row names; one clear error when it cannot run
    ``precision``. Without the shipped step-time model, the roofline priors."""
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.predict.roofline import RooflineEfficiency
    from gpucast.predict.serving import ServingEfficiency

    profile = serving_engine(engine or DEFAULT_SERVING_ENGINE)
    if precision is not None:
        profile.check_precision(precision)
    model = shipped_step_time_model()
    if model is None or model.eta_compute_ is None or model.eta_memory_ is None:
        prior = ServingEfficiency.from_roofline(RooflineEfficiency())
        return Sourced(
            dataclasses.replace(prior, engine=profile.name),
            f"{profile.display_name}: roofline priors (no fitted step-time model shipped)",
        )
    stack = profile.stack
    eta = model.eta_compute_
    tensor = eta["tensor16"]
    conv_ratio = model.conv_ratio_
    tensor_from = (
        f"step-time model ({stack} stack; convolutions at {conv_ratio:.2f} of it)"
        if conv_ratio != 1.0
        else f"step-time model ({stack} stack)"
    )
    if profile.gemm_efficiency_from.startswith("inference_engines:"):
        from gpucast.catalog.engines import inference_engine

        row = inference_engine(profile.gemm_efficiency_from.partition(":")[2])
        tensor = row.compute_efficiency
        conv_ratio = 1.0  # fitted on whole passes, not split by operator
        tensor_from = f"inference_engines.csv {row.name} ({row.fitted_on})"
    eff = ServingEfficiency(
        engine=profile.name,
        compute_efficiency_fp32=min(1.0, eta["fp32"]),
        compute_efficiency_tensor=min(1.0, tensor),
        bandwidth_efficiency=min(1.0, model.eta_memory_),
        traffic_factor=model.traffic_[stack],
        kernel_overhead_s=model.overhead_s_[stack],
        source=f"{profile.display_name} (serving_engines.csv)",
        tensor_core_conv_ratio=conv_ratio,
    )
    return Sourced(
        eff,
        f"{profile.display_name}: tensor-core efficiency {eff.compute_efficiency_tensor:.3f} "
        f"from {tensor_from}; fp32 {eff.compute_efficiency_fp32:.3f}, bytes x"
        f"{eff.traffic_factor:.2f} of eager, {eff.kernel_overhead_s * 1e6:.2g} us per kernel "
        f"from the step-time model ({stack} stack, catalog/data/steptime.json: "
        f"{model.fitted_on_})",
    )


def roofline_curve(
    work: InferenceWork,
    device: GpuSpec | Offer,
    precision: str,
    max_batch: int,
    *,
    mig: MigProfile | None = None,
    engine: ServingEfficiency | None = None,
) -> LatencyCurve:
    """The roofline latency curve of ``work`` on a catalog GPU (or its MIG slice ``mig``), or
    on a CPU server given as its offer (always fp32), with ``engine``'s efficiencies (None:
    the roofline priors)."""
    from gpucast.predict import serving as pserve

    if isinstance(device, Offer):
        return pserve.predict_latency_curve(
            work, pserve.cpu_device(device), "fp32", max_batch=max_batch, efficiency=engine
        )
    return pserve.predict_latency_curve(
        work, device, precision, max_batch=max_batch, mig=mig, efficiency=engine
    )


def forward_pass_s(
    model: str,
    gpu: GpuSpec,
    *,
    batch_size: int = 1,
    precision: str = "fp32",
    options: Mapping[str, Any] | None = None,
    engine: str | None = None,
    on_device: bool = False,
) -> Sourced[float]:
    """One forward pass of ``batch_size`` through a built-in (or ``module:factory``) ``model``
    on ``gpu``, as the serving engine's latency model prices it (simulate serve's and plan
    serve's latency curve: per-operator-class roofline at ``engine``'s fitted efficiencies
    plus its per-kernel overhead). predict coldstart's first call, serverless functions and
    KaaS kernels take it, so one forward pass has one latency across the verbs.
    ``on_device``: without the engine's per-kernel launch overhead, for a caller that prices
    launches itself (simulate kaas's --dispatch-us)."""
    eff = serving_efficiency(engine, precision)
    work = inference_work(model, precision, options)
    curve = roofline_curve(work, gpu, precision, batch_size, engine=eff.value)
    name = eff.source.partition(":")[0]
    if on_device:
        return Sourced(
            curve.latency(batch_size) - curve.host_s,
            f"the serving engine's latency model at batch {batch_size}, on the device "
            f"({curve.source}, {name} efficiencies, as simulate serve less its per-kernel "
            "launch overhead)",
        )
    return Sourced(
        curve.latency(batch_size),
        f"the serving engine's latency model at batch {batch_size} ({curve.source}, {name} "
        "efficiencies and per-kernel overhead, as simulate serve)",
    )


def payload_text(work: InferenceWork, precision: str) -> str:
    """What a request of ``work`` carries over the network and PCIe, in words: the model's
    input tensors as it takes them, the floating-point ones at the serving ``precision`` (as
    MLPerf Inference's TensorRT submissions send ResNet-50: preprocessed int8 tensors)."""
    from gpucast.predict.serving import ELEMENT_BYTES

    size = f"{work.input_bytes_per_sample / 1e3:,.4g} KB per request"
    elements = work.input_float_elements_per_sample
    if elements is None:
        return f"{size}: {work.name}'s profiled input batch, per sample (--input-kb to change)"
    parts = []
    if elements:
        width = ELEMENT_BYTES[precision]
        parts.append(f"{elements:,.0f} floating-point elements x {width:g} B ({precision})")
    other = work.input_bytes_per_sample - elements * ELEMENT_BYTES[precision]
    if other > 0.5:
        parts.append(f"{other:,.0f} B of integer inputs (token ids, indices: any precision)")
    sent = (  # the comparison holds for tensors, not for token ids (QA 40 V #6)
        ", sent preprocessed (as MLPerf Inference's TensorRT submissions send ResNet-50: "
        "int8 tensors), no training target (--input-kb to change, e.g. 150 for a 224x224x3 "
        "uint8 image)"
        if elements
        else ", no training target (--input-kb to change)"
    )
    return (
        f"{size}: {work.name}'s input tensors as the model takes them, " + " + ".join(parts) + sent
    )


def request_overhead(work: InferenceWork, network_gbps: float) -> Sourced[float]:
    """The network link a request crosses (its input over ``network_gbps``, a queueing stage
    of the host path) and the round trip, the per-request delay that occupies no stage."""
    from gpucast.predict.serving import ZONE_RTT_S

    transfer_ms = work.input_bytes_per_sample * 8.0 / (network_gbps * 1e9) * 1e3
    most_rps = network_gbps * 1e9 / (8 * work.input_bytes_per_sample)
    return Sourced(
        ZONE_RTT_S,
        f"{ZONE_RTT_S * 1e3:.3g} ms round trip; the {work.input_bytes_per_sample / 1e3:.0f} KB "
        f"input holds the {round(network_gbps, 2):g} Gbit/s link {transfer_ms:.3g} ms "
        f"(a FIFO stage: {most_rps:.0f} req/s at most)",
    )


def _transfer_s(input_bytes: float, option: ServerOption) -> float:
    """Seconds one request's input spends on the option's network link and PCIe copy."""
    total = 0.0
    if option.network_gbps:
        total += input_bytes * 8.0 / (option.network_gbps * 1e9)
    if option.pcie_gbps:
        total += input_bytes / (option.pcie_gbps * 1e9)
    return total


def model_profiles(
    loads: Sequence[ModelLoad],
    options: Sequence[ServerOption],
    targets: Mapping[str, ServerTarget],
    *,
    precision: str,
    max_batch: int,
    measured: Mapping[tuple[str, str], LatencyCurve],
    engine: ServingEfficiency | None = None,
    workload_options: Mapping[str, Any] | None = None,
) -> Sourced[dict[tuple[str, str], ModelProfile]]:
    """What the planner knows of each model on each server option: its latency curve
    (``measured`` where given, else the roofline with ``engine``'s efficiencies), memory,
    request payload and round trip."""
    from gpucast.predict.serving import ZONE_RTT_S

    profiles: dict[tuple[str, str], ModelProfile] = {}
    for load in loads:
        work = inference_work(load.name, precision, workload_options)
        fixed_gib = 1.2 * work.weights_bytes / 2**30
        per_gib = 1.2 * (work.input_bytes_per_sample + work.activation_bytes_per_sample) / 2**30
        for option in options:
            spec, profile, offer = targets[option.name]
            curve = measured.get((load.name, option.name))
            if curve is None:
                curve = roofline_curve(
                    work, offer if spec is None else spec, precision, max_batch, mig=profile,
                    engine=engine,
                )  # fmt: skip
            profiles[(load.name, option.name)] = ModelProfile(
                model=load.name,
                server=option.name,
                curve=curve,
                memory_fixed_gib=fixed_gib,
                memory_per_sample_gib=per_gib,
                request_overhead_s=ZONE_RTT_S,
                input_bytes=work.input_bytes_per_sample,
                transfer_s=_transfer_s(work.input_bytes_per_sample, option),
            )
    _check_tables_used(measured, profiles, [load.name for load in loads], options)
    tables = ", ".join(f"{m}@{s}" for m, s in measured)
    how = f"{engine.engine} efficiencies" if engine is not None else "roofline priors"
    source = (
        f"roofline of the profiled inference pass ({precision}) on each catalog GPU / MIG "
        f"slice / CPU ({how})" + (f"; measured tables for {tables}" if measured else "")
    )
    specs = {spec.name: spec for spec, _, _ in (targets[o.name] for o in options) if spec}
    fallback = [
        f"{name} ({spec.priced_as(precision)})"
        for name, spec in sorted(specs.items())
        if precision not in ("fp32", "tf32") and spec.priced_as(precision) != precision
    ]
    if fallback:  # QA 40 V #3
        source += (
            f"; {precision} priced at another mode's peak where the catalog has no {precision} "
            f"figure: {', '.join(fallback)}"
        )
    return Sourced(profiles, source)


# -- host path ----------------------------------------------------------------------------
def given_host_capacity(capacity_rps: float) -> Sourced[float]:
    return Sourced(capacity_rps, f"{capacity_rps:g} requests/s per server (given)")


def calibrated_host_path(
    deployment: Deployment,
    points: Sequence[tuple[Mapping[str, Any], float]],
    *,
    capacity_rps: float | None,
    seed: int,
    field: str = "measured p50",
) -> Sourced[HostPathFit]:
    """The shared host fitted to measured medians (arrivals, seconds) by
    :func:`gpucast.simulate.serving.calibrate_host_path`: its time alone from one load (at
    the given capacity, None: unlimited), its time and capacity from two."""
    from gpucast.simulate.serving import calibrate_host_path

    fit = calibrate_host_path(deployment, points, capacity_rps=capacity_rps, seed=seed, field=field)
    medians = ", ".join(f"{p50 * 1e3:g} ms" for _a, p50 in points)
    cap = (
        f"capacity {fit.capacity_rps:.1f} req/s fitted"
        if fit.capacity_fitted
        else "capacity unlimited"
        if fit.capacity_rps is None
        else f"capacity {fit.capacity_rps:g} req/s (given)"
    )
    return Sourced(
        fit,
        f"{fit.host_s * 1e3:.2f} ms on the host path alone, {cap}: calibrated to the "
        f"measured median(s) {medians}",
    )

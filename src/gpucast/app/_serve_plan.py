"""``plan serve`` for models served request by request (neither a language model nor
``--mix``): arrivals, latency curves, host path and server options from
:mod:`gpucast.inputs.serving`, searched by :func:`gpucast.plan.serve.plan_serving`; with the
texts of where its prices come from and which of them are estimated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpucast.app._serve_results import PlanServeResult
from gpucast.app._serve_simulate import serving_validation
from gpucast.app._units import servers_with_units, skipped_assumption
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import SERVING_PRECISIONS, ServingEngineProfile
from gpucast.domain.serving_plan import PLAN_TRACE_WINDOW_S, ServeRequest

if TYPE_CHECKING:
    from gpucast.app.serve import PlanServeRequest


def planned_serve(request: PlanServeRequest) -> PlanServeResult:
    """The plan of a checked request (:func:`gpucast.app.serve.plan_serve` dispatches here)."""
    from gpucast.catalog import load_catalog, offers_file
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.domain.serving_plan import ModelLoad
    from gpucast.inputs import serving as inputs
    from gpucast.plan.serve import plan_serving

    loads: list[ModelLoad] = []
    traffic: dict[str, Any] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []
    duration_s = request.run_s
    kind = request.arrival_kind
    processes: list[str] = []
    for k, (name, rate) in enumerate(request.model_rates):
        # a trace: its first --duration-s seconds, or (not given) its busiest hour
        stream = inputs.arrivals(
            kind, rate, request.duration_s if request.trace_path else duration_s,
            request.seed + k, window_s=PLAN_TRACE_WINDOW_S,
        )  # fmt: skip
        times = stream.times_s
        traffic[name] = times
        if request.trace_path is not None:
            duration_s = stream.duration_s
            if rate is None or stream.cut:  # the servers are sized for what is replayed
                rate = inputs.arrival_rate_of(times)
        warnings += stream.warnings
        processes.append(f"{name}: {stream.source}")
        assert rate is not None  # the request checked it
        loads.append(ModelLoad(name=name, rate_rps=rate))
    sources["arrivals"] = "; ".join(processes)
    percentile, slo_s = request.slo_target
    serve_request = ServeRequest(
        models=tuple(loads),
        slo_s=slo_s,
        slo_percentile=percentile,
        budget_usd_per_hour=request.budget_usd_per_hour,
        duration_s=duration_s,
        seed=request.seed,
        max_batch_sizes=request.max_batch_sizes,
        max_delays_s=tuple(d / 1e3 for d in request.max_delays_ms),
        instances=request.instances,
        max_servers=request.max_servers,
        placements=request.placements,
    )
    catalog = load_catalog(offers_file(request.offers_file))
    servers, targets = inputs.build_server_options(
        gpus=request.gpus,
        migs=request.migs,
        no_mig=request.no_mig,
        no_cpu=request.no_cpu,
        providers=request.providers,
        regions=request.regions,
        spot=request.spot,
        catalog=catalog,
        price_usd_per_gpu_hour=request.price,
    )
    asked = (*request.gpus, *(m.partition(":")[0] for m in request.migs))
    unserved = inputs.unserved_gpus(catalog, asked, servers, providers=request.providers,
                                    regions=request.regions, spot=request.spot)  # fmt: skip
    if unserved:  # QA 40 M #4: --mig A30:1g.6gb,A100-40GB:1g.5gb dropped the A30 silently
        sources["not planned"] = "; ".join(unserved) + " (plan serve rents catalog offers)"
    host_changes: dict[str, Any] = {"host_concurrency": request.host_concurrency}
    if request.host_capacity_rps is not None:
        host = inputs.given_host_capacity(request.host_capacity_rps)
        host_changes["host_capacity_rps"] = host.value
        sources["host_capacity"] = host.source
    if request.host_ms is not None:
        host_changes["host_s"] = request.host_ms / 1e3
        sources["host_time"] = f"{request.host_ms:g} ms on the host path alone (given)"
    servers = [dataclasses.replace(o, **host_changes) for o in servers]
    engine_profile = serving_engine(request.engine)
    precision = request.precision or engine_profile.default_precision
    # the GPU types without units for the precision (fp8 on a T4, fp16 on a K80) are skipped
    servers, no_units = servers_with_units(servers, catalog, precision, choices=SERVING_PRECISIONS)
    if no_units:
        said = skipped_assumption(precision, no_units, auto=False)
        sources[said.name] = f"{said.value} ({said.source}; {said.override})"
    servers = _servers_for_engine(servers, engine_profile, catalog, sources)
    engine = inputs.serving_efficiency(request.engine, precision)
    sources["engine"] = engine.source
    profiles = inputs.model_profiles(
        loads,
        servers,
        targets,
        precision=precision,
        max_batch=max(serve_request.max_batch_sizes),
        measured=inputs.read_latency_tables(request.latency_tables),
        engine=engine.value,
        workload_options=dict(request.workload_options),
    )
    sources["latency"] = profiles.source
    sources["payload"] = "; ".join(
        inputs.payload_text(
            inputs.inference_work(m.name, precision, dict(request.workload_options)), precision
        )
        for m in loads
    )
    sources["prices"] = _prices_text(request.price, spot=request.spot) + (
        "; a MIG row rents whole GPUs: n slices of a profile cost ceil(n / the slices one GPU "
        "holds) GPUs (simulate serve --mig charges the one slice it runs, its share)"
        if any(o.kind == "mig" for o in servers)
        else ""
    )
    guessed = _estimated_servers(servers, catalog, gpus_given=request.price is not None)
    if guessed:
        sources["estimated prices"] = guessed
    plan = plan_serving(
        serve_request,
        servers,
        profiles.value,
        arrivals=traffic,
        assumptions=sources,
        saturation_s=request.saturation_s,
    )
    best = plan.best
    gpus = [] if best is None else [g.server.gpu or "cpu" for g in best.groups]
    # the pick's batch latencies are a measured table's where one was given for it
    items = map(inputs.parse_latency_table_item, request.latency_tables)
    tables = {(m, s): path for m, s, path in items}
    used = [
        tables[(m.model, g.server.name)]
        for g in (() if best is None else best.groups)
        for m in g.models
        if (m.model, g.server.name) in tables
    ]
    return PlanServeResult(
        plan=plan,
        warnings=tuple(warnings),
        validation=serving_validation(
            gpus,
            precision,
            calibrated=request.host_capacity_rps is not None or request.host_ms is not None,
            engine=engine_profile.name,
            measured=used[0] if used else None,
            mig=best is not None and any(g.server.kind == "mig" for g in best.groups),
        ),
    )


def _prices_text(price_usd_per_gpu_hour: float | None, *, spot: bool) -> str:
    """Where plan serve's prices come from: the catalog's, or ``--price`` for every GPU."""
    market = "catalog spot" if spot else "catalog on-demand"
    if price_usd_per_gpu_hour is None:
        return market
    from gpucast.inputs.serving import PRICE_REPLACES_SPOT

    replaced = f"; {PRICE_REPLACES_SPOT}" if spot else ""
    return (
        f"{price_usd_per_gpu_hour:.4g} US$/h per GPU for every GPU type (given with --price; a "
        f"MIG slice its share){replaced}; CPU servers at the {market} price"
    )


def _estimated_servers(servers: Sequence[Any], catalog: Any, *, gpus_given: bool = False) -> str:
    """The server options priced from offers whose prices were never read from a source
    (``Offer.price_estimated``), named with their offer; "" when none (``gpus_given``: the
    GPUs are priced by ``--price``, only CPU servers can be)."""
    from gpucast.domain.catalog import estimated_prices_note

    guessed = {(o.provider, o.region, o.instance_type) for o in catalog.offers if o.price_estimated}
    return estimated_prices_note(
        f"{s.name} ({s.provider}/{s.region} {s.instance_type})"
        for s in servers
        if s.kind != "mig"
        and not (gpus_given and s.kind == "gpu")
        and (s.provider, s.region, s.instance_type) in guessed
    )


def _servers_for_engine(
    servers: Sequence[Any], engine: ServingEngineProfile, catalog: Any, sources: dict[str, str]
) -> list[Any]:
    """The server options an engine of some vendors' GPUs only (TensorRT-class: NVIDIA's)
    runs on, the others named in ``sources``; refused where none is left (QA 40 V #12: a CPU
    server was recommended at TensorRT's efficiencies)."""
    if not engine.vendors:
        return list(servers)
    other = sorted(
        {s.gpu for s in servers if s.gpu and not engine.runs_on(catalog.gpu(s.gpu).vendor)}
    )
    kept = [s for s in servers if s.gpu and s.gpu not in other]
    if not kept and other:
        engine.check_runs_on(other[0], catalog.gpu(other[0]).vendor)
    if not kept:
        raise InvalidSpecError(
            "engine",
            f"{engine.display_name} runs on {' / '.join(engine.vendors)} GPUs only, and the "
            "filters leave CPU servers alone",
            got=engine.name,
            fix="use --engine eager-pytorch, or let the plan take GPUs",
        )
    skipped = [*other, *(["CPU servers"] if any(s.gpu is None for s in servers) else [])]
    if skipped:
        sources["engine servers"] = (
            f"{engine.display_name} runs on {' / '.join(engine.vendors)} GPUs only: "
            f"{', '.join(skipped)} not planned (--engine eager-pytorch plans them)"
        )
    return kept

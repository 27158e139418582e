"""``simulate serve`` for a model served request by request: the server, latency curve,
host path, arrivals (open or closed loop), embedding cache and deadlines, simulated by
:mod:`gpucast.simulate.serving`, with the serving models' validated errors
(:func:`serving_validation`) and the overload warnings of a run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.app._serve_options import _check_units
from gpucast.app._serve_results import SimulateServeResult

if TYPE_CHECKING:
    from gpucast.app.serve import SimulateServeRequest
    from gpucast.simulate.serving import ServingResult


def simulated_serve(request: SimulateServeRequest) -> SimulateServeResult:
    """The simulated run of a checked request (:func:`gpucast.app.serve.simulate_serve`
    dispatches here)."""
    import numpy as np

    from gpucast.catalog import load_catalog, offers_file
    from gpucast.catalog.serving_engines import serving_engine
    from gpucast.domain.serving import Deployment, ModelDeployment, ServerGroup, ServerSpec
    from gpucast.inputs import serving as inputs
    from gpucast.inputs.workload import check_workload_name
    from gpucast.simulate.realtime import check_deadlines, check_queue_timeouts, deadline_outcomes
    from gpucast.simulate.serving import (
        analytic_capacity_rps,
        find_saturation,
        simulate_closed_loop,
        simulate_serving,
        with_host_path,
    )

    check_workload_name(request.model, language_models=True, field="model")  # before profiling
    policy = request.batching
    engine_profile = serving_engine(request.engine)
    precision = request.precision or engine_profile.default_precision
    catalog = load_catalog(offers_file(request.offers_file))
    gpu = catalog.gpu(request.gpu)
    engine_profile.check_runs_on(gpu.name, gpu.vendor)  # TensorRT on an MI300X: QA 40 V #12
    _check_units(precision, gpu, catalog)
    server = inputs.gpu_server(
        catalog, request.gpu, request.mig, request.price, providers=request.providers,
        regions=request.regions, spot=request.spot,
    )  # fmt: skip
    sources: dict[str, str] = {"price": server.price.source}
    if server.mig is not None and request.servers > server.mig.max_instances:
        per_gpu = server.mig.max_instances  # QA 40 M #8: 8 slices of 7 a GPU, priced silently
        gpus = math.ceil(request.servers / per_gpu)
        sources["price"] += (
            f"; {request.servers} slices span {gpus} GPUs ({per_gpu} {server.mig.name} a GPU): "
            "the cost counts the slices; rented whole, as plan serve prices them, the GPUs "
            f"cost {gpus * per_gpu * server.price.value:.4g} US$/h"
        )
    engine = inputs.serving_efficiency(request.engine, precision)
    work = inputs.inference_work(request.model, precision, dict(request.workload_options))
    if request.input_kb is not None:
        work = dataclasses.replace(
            work,
            input_bytes_per_sample=request.input_kb * 1e3,
            input_float_elements_per_sample=None,
        )
        sources["payload"] = f"{request.input_kb:g} KB per request (given)"
    else:
        sources["payload"] = inputs.payload_text(work, precision)
    table_warnings: list[str] = []
    if request.latency_table is not None:
        curve = inputs.read_latency_table(request.latency_table)
        table_warnings = inputs.latency_table_warnings(curve, policy.largest_batch, "latency-table")
    else:
        curve = inputs.roofline_curve(
            work, server.spec, precision, policy.largest_batch, mig=server.mig,
            engine=engine.value,
        )  # fmt: skip
        sources["engine"] = engine.source
    model_memory_gib = work.memory_gib(policy.largest_batch)
    slices = server.mig.max_instances if server.mig else 1
    gbps = request.network_gbps or (
        inputs.network_share_gbps(server.offer) / slices if server.offer else None
    )
    overhead = inputs.request_overhead(work, gbps or math.inf) if gbps else None
    pcie = request.pcie_gbps or inputs.pcie_gbps(server.spec).value / slices
    miss_bytes = 0.0  # a request's embedding misses read over PCIe (--cache-fraction)
    cached = None
    if request.cache_fraction is not None:
        from gpucast.inputs.embeddings import embedding_cache_curve

        cached = embedding_cache_curve(
            curve,
            request.model,
            dict(request.workload_options),
            precision,
            server.spec,
            cache_fraction=request.cache_fraction,
            dram_fraction=request.dram_fraction,
            policy=request.cache_policy,
            data_dir=request.data_dir,
        )
        from gpucast.catalog.validation import validation_for

        curve = cached.value.curve
        miss_bytes = cached.value.pcie_bytes_per_request
        checked = validation_for("embedding-serving-cache", [server.spec.name], precision)
        sources["embedding cache"] = f"{cached.source}; validated: {checked.text()}"
    sources["latency"] = curve.source
    if overhead is not None:
        sources["network"] = overhead.source
    sources["pcie"] = (
        f"{pcie:g} GB/s (given)" if request.pcie_gbps else inputs.pcie_gbps(server.spec).source
    )
    if server.mig is not None and slices > 1:  # QA 40 M #16: the line said 31.5, it ran 4.5
        shared = f"shared by {slices} {server.mig.name} slices"
        if not request.pcie_gbps:
            sources["pcie"] = f"{pcie:.3g} GB/s a slice: {sources['pcie']} {shared}"
        if overhead is not None and not request.network_gbps:
            sources["network"] += f"; that link is the GPU's NIC share, {shared}"
    if miss_bytes:
        sources["pcie"] += (
            f"; its share counts the input copies and the embedding misses ({miss_bytes:,.0f} B "
            "a request from host memory, read inside the device time)"
        )
    closed = request.closed_loop
    traffic: dict[str, Any] = {}
    trace = None
    horizon_s = request.run_s
    if closed is None:
        arrivals = inputs.arrivals(request.arrivals, request.rate, request.arrivals_s, request.seed)
        traffic = {request.model: arrivals.times_s}
        horizon_s = arrivals.duration_s  # a trace shorter than --duration-s ends with it
        process = arrivals.source
        trace = arrivals if request.arrivals.startswith("trace:") else None
        warnings = list(arrivals.warnings)
    else:
        process = closed.describe()
        warnings = []
    sources["arrivals"] = process
    if request.cache_fraction is None:  # the embedding cache's options, given without it
        ignored = []
        if request.dram_fraction != 1.0:
            ignored.append(f"--dram-fraction {request.dram_fraction:g}")
        if request.cache_policy != "lru":
            ignored.append(f"--cache-policy {request.cache_policy}")
        if ignored:
            warnings.append(
                f"{' and '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect "
                "without --cache-fraction (no embedding cache: every row is in HBM); add "
                "--cache-fraction to put a recommendation model's rows behind an HBM cache"
            )
    elif request.dram_fraction < request.cache_fraction:
        warnings.append(
            f"--dram-fraction {request.dram_fraction:g} is below --cache-fraction "
            f"{request.cache_fraction:g}: the HBM cache's rows are also in DRAM (inclusive "
            "tiers), so DRAM serves no lookups and every HBM miss reads the SSD; give "
            f"--dram-fraction >= {request.cache_fraction:g} for a DRAM tier"
        )
    if request.cache_fraction is not None:
        from gpucast.inputs.embeddings import fitted_window

        if fitted_window(request.data_dir, "2022") is None:  # QA 39: an assumption line only
            warnings.append(
                f"--cache-fraction {request.cache_fraction:g} is priced at uniform access (hit "
                "rate = the cache's share of the rows): no dlrm_datasets locality data; "
                "production lookups are skewed, so the misses are likely overstated; pass "
                "--data-dir ../shared/data (or set $GPUCAST_SHARED_DATA)"
            )
    base = ModelDeployment(
        model=request.model,
        latency=curve,
        batching=policy,
        instances=request.instances,
        memory_gib=model_memory_gib,
        request_overhead_s=overhead.value if overhead is not None else 0.0,
        input_bytes=work.input_bytes_per_sample,
    )
    deployments: tuple[ModelDeployment, ...] = (base,)
    scheduler: str | None = None
    if request.deadline_ms is not None:
        deployments = (dataclasses.replace(base, deadline_s=request.deadline_ms / 1e3),)
        scheduler = request.scheduler
    elif request.classes:
        deployments = tuple(
            dataclasses.replace(
                base, model=f"{request.model}/{name}", deadline_s=deadline_s, priority=priority
            )
            for name, _share, deadline_s, priority in request.classes
        )
        scheduler = request.scheduler
        # each request of the stream belongs to a class with its share's probability
        # (a thinned Poisson stream is Poisson)
        times = traffic.pop(request.model)
        pick = np.random.default_rng(request.seed).choice(
            len(deployments), size=times.size, p=[c[1] for c in request.classes]
        )
        for k, dep in enumerate(deployments):
            traffic[dep.model] = times[pick == k]
    spec = ServerSpec(
        name=server.name,
        kind=server.kind,
        memory_gib=server.memory_gib,
        price_usd_per_hour=server.price.value,
        models=deployments,
        host_capacity_rps=request.host_capacity_rps,
        host_s=(request.host_ms or 0.0) / 1e3,
        host_concurrency=request.host_concurrency,
        network_gbps=gbps,
        pcie_gbps=pcie,
    )
    if request.host_capacity_rps is not None:
        sources["host_capacity"] = inputs.given_host_capacity(request.host_capacity_rps).source
    if request.host_ms is not None:
        sources["host_time"] = f"{request.host_ms:g} ms on the host path alone (given)"
    deployment = Deployment(
        groups=(ServerGroup(server=spec, count=request.servers),),
        scheduling=scheduler or "none",  # type: ignore[arg-type]
    )
    if scheduler is not None:  # named as the flag the deadlines came from
        check_deadlines(deployment, "request-class" if request.classes else "deadline-ms")
    host_capacity_rps = request.host_capacity_rps
    if request.calibrate_p50_ms is not None or request.calibrate_at:
        points: list[tuple[Mapping[str, Any], float]] = []
        if request.calibrate_p50_ms is not None:
            points.append((traffic, request.calibrate_p50_ms / 1e3))
        for rate, p50_s in request.calibration_points:
            other = inputs.arrivals(request.arrivals, rate, request.arrivals_s, request.seed)
            points.append(({request.model: other.times_s}, p50_s))
        flags = ["calibrate-p50-ms"] if request.calibrate_p50_ms is not None else []
        flags += ["calibrate-at"] if request.calibrate_at else []
        fit = inputs.calibrated_host_path(
            deployment, points, capacity_rps=request.host_capacity_rps, seed=request.seed,
            field=" / ".join(flags),
        )  # fmt: skip
        host_capacity_rps = fit.value.capacity_rps
        deployment = with_host_path(
            deployment, capacity_rps=host_capacity_rps, host_s=fit.value.host_s
        )
        sources["host_path"] = fit.source
    check_queue_timeouts(deployment)
    slo_s = None if request.slo_target is None else request.slo_target[1]
    if closed is None:
        result = simulate_serving(
            deployment, traffic, seed=request.seed, slo_s=slo_s,
            horizon_s=horizon_s, sources=sources,
        )  # fmt: skip
    else:
        result = simulate_closed_loop(
            deployment, {request.model: closed}, request.run_s, seed=request.seed,
            slo_s=slo_s, sources=sources,
        )  # fmt: skip
    if miss_bytes:
        result = _with_pcie_misses(result, miss_bytes, pcie)
    saturation = None
    if request.find_saturation:
        kind = request.arrivals if closed is None else "poisson"
        at = inputs.arrivals_at(kind, request.seed, trace=trace)
        saturation = find_saturation(
            deployment,
            lambda rate, span: {request.model: at(rate, span)},
            duration_s=request.run_s,
            start_rps=analytic_capacity_rps(deployment, request.model),
            seed=request.seed,
        )
    warnings += table_warnings + _overload_warnings(
        result, searched=saturation is not None, clients=None if closed is None else closed.clients
    )
    classes = deadline_outcomes(result, deployment) if scheduler is not None else ()
    host_s = deployment.groups[0].server.host_s
    return SimulateServeResult(
        request=request,
        server=server.name,
        serving=result,
        batching=policy,
        latency_curve=curve,
        host_capacity_rps=host_capacity_rps,
        warnings=tuple(warnings),
        validation=serving_validation(
            [server.name.split("/")[0]],
            precision,
            calibrated=host_capacity_rps is not None or host_s > 0,
            engine=engine_profile.name,
            measured=request.latency_table,
            mig=server.kind == "mig",
        ),
        arrival_process=process,
        engine=engine_profile.name,
        precision=precision,
        host_s=host_s,
        saturation=saturation,
        classes=classes,
        scheduler=scheduler,
        embedding_cache=None if cached is None else cached.value,
    )


def serving_validation(
    gpus: list[str],
    precision: str,
    *,
    calibrated: bool,
    engine: str = "eager-pytorch",
    measured: Path | None = None,
    mig: bool = False,
) -> dict[str, str]:
    """The serving models' validated error for these GPUs (catalog names) and precision: the
    latency model with a host path given or calibrated, else as predicted from the catalog
    alone; and the engine's device throughput where it was checked. ``measured``: a latency
    table gives the device's batch latency, so no roofline curve's error applies to it.
    ``mig``: MIG slices serve, so the slice speed's validation too."""
    from gpucast.catalog.validation import validation_for

    names = sorted(set(gpus))
    key = "serving" if calibrated else "serving-uncalibrated"
    text = validation_for(key, names, precision, 1).text()
    if measured is not None:
        out = {
            "serving latency (your latency table + simulator)": f"the batch latencies are "
            f"{measured.name}'s, as measured; the simulator's queueing was validated with the "
            f"roofline curve: {text}"
        }
    else:
        out = {"serving latency (roofline curve + simulator)": text}
        if engine != "eager-pytorch":
            out[f"device throughput ({engine})"] = validation_for(
                f"serving-engine:{engine}", names, precision, 1
            ).text()
    if mig:
        out["MIG slice speed"] = validation_for("mig-slice", names, precision, 1).text()
    return out


def _with_pcie_misses(
    result: ServingResult, bytes_per_request: float, pcie_gbps: float
) -> ServingResult:
    """Each server's PCIe share with its embedding misses added: the simulator queues the
    input copies on the link, and the misses' reads sit inside the device time."""
    h = result.horizon_s
    servers = tuple(
        dataclasses.replace(
            s,
            stages=dict(s.stages)
            | {
                "pcie": min(
                    1.0,
                    s.stages.get("pcie", 0.0)
                    + (s.requests * bytes_per_request / (pcie_gbps * 1e9 * h) if h > 0 else 0.0),
                )
            },
        )
        for s in result.servers
    )
    return dataclasses.replace(result, servers=servers)


def _steady_backlog(result: ServingResult, served_rps: float) -> float:
    """The requests a server that keeps up still holds at the horizon (Little's law at the
    served requests' median latency), plus the one arriving at it: a backlog beyond this
    grew; one within it is the tail of the traffic (a trace ends on an arrival, so its last
    request is always in flight: a 3-request trace read as overloaded, QA 38 I #6)."""
    import numpy as np

    done = result.arrival_s + result.latency_s  # NaN where dropped
    ran = (result.arrival_s >= result.warmup_s) & (done <= result.horizon_s)
    lat = result.latency_s[ran]
    return 1.0 + (served_rps * float(np.median(lat)) if lat.size else 0.0)


def _overload_warnings(
    result: ServingResult, *, searched: bool = False, clients: int | None = None
) -> list[str]:
    """Shed requests and a backlog the servers did not clear, in words (``searched``: the
    saturation search ran, so its result is pointed to, not the flag). A closed loop of
    ``clients`` holds at most that many requests: its backlog never grows with the run, so a
    busy bottleneck is named as saturation by the clients instead (QA 40 V #1)."""
    out: list[str] = []
    counts = result.counts()
    offered, served = result.offered_rps(), result.throughput_rps()
    if counts["dropped"]:
        out.append(
            f"{counts['dropped']} of {counts['requests']} requests were rejected "
            f"({counts.get('queue_full', 0)} queue full, {counts.get('timeout', 0)} timed out): "
            "the servers shed load. " + _wasted_work(result, counts.get("timeout", 0), served)
        )
    if clients is not None:
        return out + _closed_loop_saturation(result, clients, served)
    dropped_rps = counts["dropped"] / result.window_s if result.window_s > 0 else 0.0
    if (
        counts["requests"]
        and served + dropped_rps < 0.98 * offered
        and counts["in_flight"] > _steady_backlog(result, served)
    ):
        peak = _busiest_stage(result)
        if peak < BURST_BUSY_FRACTION:  # QA 38 I #14: a burst at the end, not a growing queue
            out.append(
                f"behind at the end: {offered:.1f} req/s offered, {served:.1f} served; "
                f"{counts['in_flight']} requests still queued or running when the run ended, "
                f"though no server or host-path stage was busy more than {peak:.0%} of it: a "
                "burst not yet cleared, not a queue that grows with the run. A longer "
                "--duration-s shows the latency bursts cause; add servers to absorb them."
            )
        else:
            out.append(
                f"overloaded: {offered:.1f} req/s offered, {served:.1f} served; "
                f"{counts['in_flight']} requests still queued or running at the end, latency "
                "grows with the run. Add servers, or "
                + ("see the saturation found below." if searched else "see --find-saturation.")
            )
    return out


def _wasted_work(result: ServingResult, timed_out: int, served: float) -> str:
    """The advice after shed load: where the timed-out requests held a busy host-path stage
    first (the timeout runs from arrival; a stage working on a request finishes it), their work
    there was wasted and the served rate collapses, so the fix is shedding at arrival, which
    uses nothing (QA 40 V #10)."""
    stages = [(v, k) for s in result.servers for k, v in s.stages.items()]
    busy, stage = max(stages, default=(0.0, ""))
    if not timed_out or busy < BURST_BUSY_FRACTION:
        return "Add servers or instances."
    return (
        f"The {stage} stage was {busy:.0%} busy while {served:.1f} req/s were served: the "
        "timeout runs from arrival, so requests it worked on then timed out and its work on "
        "them was wasted. Shed at arrival instead with --max-queue (a smaller one if set; a "
        "request rejected there uses nothing), or add servers or instances."
    )


def _closed_loop_saturation(result: ServingResult, clients: int, served: float) -> list[str]:
    """A closed loop whose bottleneck is busy nearly all the run: its clients saturate it, and
    each more client only adds waiting (Little's law), in words; nothing below that."""
    import numpy as np

    peak = _busiest_stage(result)
    ran = result.latency_s[np.isfinite(result.latency_s)]
    if peak < BURST_BUSY_FRACTION or not ran.size:
        return []
    return [
        f"saturated: {clients} clients keep the busiest stage {peak:.0%} busy: {served:.1f} "
        f"req/s served, each request waiting {float(ran.mean()) * 1e3:,.1f} ms on average (a "
        "closed loop's latency grows with its clients, by Little's law, not with the run). "
        "Fewer clients, or add servers or instances."
    ]


#: A backlog at the horizon on servers busy less than this share of the run is a burst
#: they have not cleared yet: a queue that grows keeps its bottleneck busy nearly all the time.
BURST_BUSY_FRACTION = 0.9


def _busiest_stage(result: ServingResult) -> float:
    """The highest busy fraction of any server's GPU or host-path stage over the run."""
    return max((max(s.busy_fraction, *s.stages.values()) for s in result.servers), default=1.0)

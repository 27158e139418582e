"""`gpucast simulate serve`: traffic through a model on catalog GPUs with dynamic batching.

Register with ``app.command("serve")(serve_cmds.serve)`` on the ``simulate`` Typer app.
A thin shell: the latency curve comes from ``--latency-table`` or the roofline of the
profiled model on the catalog GPU (or MIG slice); arrivals from
:mod:`gpucast.simulate.arrivals`; then :func:`gpucast.simulate.serving.simulate_serving`.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import cast

import numpy as np
import typer

from gpucast.cli._common import console, emit_json, err_console
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.serving import (
    BatchingPolicy,
    Deployment,
    LatencyCurve,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)

ARRIVALS_HELP = "poisson | constant | bursty | trace:FILE (Azure LLM trace or arrival_s CSV)"


def read_latency_table(path: Path) -> LatencyCurve:
    """A CSV with columns ``batch_size`` and ``latency_s`` (rows in any order)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataFormatError(str(path), f"cannot read latency table ({exc.strerror})") from exc
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames or not {"batch_size", "latency_s"} <= set(reader.fieldnames):
        raise DataFormatError(
            str(path),
            "needs columns batch_size and latency_s",
            fix="write a header line 'batch_size,latency_s'",
        )
    points: dict[int, float] = {}
    for line, row in enumerate(reader, start=2):
        try:
            b, t = int(row["batch_size"]), float(row["latency_s"])
        except (TypeError, ValueError):
            raise DataFormatError(
                str(path), "batch_size must be an integer and latency_s a number", line=line
            ) from None
        if b < 1 or not math.isfinite(t) or t <= 0:
            raise DataFormatError(str(path), "needs batch_size >= 1 and latency_s > 0", line=line)
        points[b] = t
    if not points:
        raise DataFormatError(str(path), "has no rows")
    sizes = sorted(points)
    return LatencyCurve(
        batch_sizes=tuple(sizes),
        latency_s=tuple(points[b] for b in sizes),
        source=f"measured: {Path(path).name}",
    )


def _arrivals(kind: str, rate: float, duration_s: float, seed: int) -> tuple[np.ndarray, str]:
    from gpucast.simulate import arrivals

    rng = np.random.default_rng(seed)
    if kind == "poisson":
        return arrivals.poisson(rate, duration_s, rng), f"Poisson {rate:g} req/s"
    if kind == "constant":
        return arrivals.constant(rate, duration_s), f"constant {rate:g} req/s"
    if kind == "bursty":
        # calm at 0.5x and bursts at 3x the mean rate, 4:1 time share, mean = rate
        rates = (rate * 0.5, rate * 3.0)
        sojourn = (8.0, 2.0)
        scale = rate / arrivals.bursty_mean_rate(rates, sojourn)
        rates = (rates[0] * scale, rates[1] * scale)
        return (
            arrivals.bursty(rates, sojourn, duration_s, rng),
            f"bursty MMPP {rates[0]:.3g}/{rates[1]:.3g} req/s, sojourns 8 s/2 s",
        )
    if kind.startswith("trace:"):
        from gpucast.store.datasets.azure_traces import read_arrival_trace

        path = Path(kind[len("trace:") :])
        parsed = read_arrival_trace(path)
        if parsed.skipped:
            err_console.print(
                f"[yellow]skipped {len(parsed.skipped)} malformed row(s) of "
                f"{path.name}; first: {parsed.skipped[0]}[/yellow]"
            )
        times = arrivals.from_timestamps(
            parsed.frame["arrival_s"].to_numpy(), duration_s=duration_s
        )
        return times, f"trace {path.name} ({len(parsed.frame)} rows, {len(parsed.skipped)} skipped)"
    raise InvalidSpecError(
        "arrivals",
        "must be poisson, constant, bursty or trace:FILE",
        got=kind,
        fix="e.g. --arrivals poisson",
    )


def serve(
    model: str = typer.Option(..., "--model", help="Workload name, e.g. resnet50."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU, e.g. P4, T4, A100-40GB."),
    rate: float = typer.Option(..., "--rate", help="Mean arrival rate, requests/s."),
    arrivals: str = typer.Option("poisson", "--arrivals", help=ARRIVALS_HELP),
    max_batch: int = typer.Option(8, "--max-batch", help="Largest dynamic batch."),
    max_delay_ms: float = typer.Option(10.0, "--max-delay-ms", help="Max queue delay, ms."),
    preferred: str | None = typer.Option(
        None, "--preferred", help="Preferred batch sizes, e.g. 4,8."
    ),
    instances: int = typer.Option(1, "--instances", help="Model instances per GPU."),
    servers: int = typer.Option(1, "--servers", help="Number of GPUs (load balanced)."),
    mig: str | None = typer.Option(None, "--mig", help="Run on one MIG slice, e.g. 1g.10gb."),
    duration_s: float = typer.Option(60.0, "--duration-s", help="Simulated seconds."),
    slo_ms: float | None = typer.Option(None, "--slo-ms", help="Latency SLO, ms."),
    latency_table: Path | None = typer.Option(
        None, "--latency-table", help="CSV batch_size,latency_s measured per batch."
    ),
    precision: str = typer.Option("fp32", "--precision", help="fp32 | fp16 | bf16."),
    network_gbps: float | None = typer.Option(
        None, "--network-gbps", help="Client network (default: the offer's)."
    ),
    price: float | None = typer.Option(None, "--price", help="US$/h per GPU (default: catalog)."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same result."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Latency percentiles, SLO attainment, throughput and cost of serving MODEL on GPUs."""
    from gpucast.catalog import load_catalog
    from gpucast.predict import serving as pserve
    from gpucast.simulate.serving import simulate_serving

    if not (math.isfinite(rate) and rate > 0):
        raise InvalidSpecError(
            "rate", "must be > 0 requests per second", got=rate, fix="e.g. --rate 150"
        )
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise InvalidSpecError("duration-s", "must be > 0", got=duration_s)
    if max_delay_ms < 0:
        raise InvalidSpecError("max-delay-ms", "must be >= 0", got=max_delay_ms)
    if slo_ms is not None and not slo_ms > 0:
        raise InvalidSpecError("slo-ms", "must be > 0", got=slo_ms, fix="e.g. --slo-ms 100")
    if servers < 1:
        raise InvalidSpecError("servers", "must be >= 1", got=servers)
    prefs: tuple[int, ...] = ()
    if preferred:
        try:
            prefs = tuple(int(p) for p in preferred.split(","))
        except ValueError:
            raise InvalidSpecError(
                "preferred", "must be integers like 4,8", got=preferred
            ) from None
    policy = BatchingPolicy(
        max_batch_size=max_batch, max_queue_delay_s=max_delay_ms / 1e3, preferred_batch_sizes=prefs
    )
    catalog = load_catalog()
    spec = catalog.gpu(gpu)
    mig_profile = pserve.mig_profile(spec, mig) if mig else None
    offers = [o for o in catalog.find_offers(gpu=spec.name) if o.gpus >= 1]
    offer = min(offers, key=lambda o: o.on_demand_usd_per_hour / o.gpus) if offers else None
    if price is None:
        if offer is None:
            raise InvalidSpecError(
                "price",
                f"the catalog has no offer with {spec.name}",
                fix="pass --price USD_PER_HOUR",
            )
        price = offer.on_demand_usd_per_hour / offer.gpus
    if mig_profile is not None:
        price = price * mig_profile.compute_slices / 7.0
    memory_gib = mig_profile.memory_gib if mig_profile else spec.memory_gib
    sources: dict[str, str] = {
        "price": f"{price:.4g} US$/h per "
        f"{'slice' if mig_profile else 'GPU'}"
        + (f" ({offer.provider} {offer.instance_type})" if offer else "")
    }
    overhead_s = 0.0
    model_memory = 0.0
    if latency_table is not None:
        curve = read_latency_table(latency_table)
    else:
        from gpucast.domain.workload import PRECISIONS, Precision, WorkloadSpec
        from gpucast.profile import profile_workload

        if precision not in PRECISIONS:
            raise InvalidSpecError(
                "precision", f"must be one of {', '.join(PRECISIONS)}", got=precision
            )
        prec = cast(Precision, precision)
        work = pserve.InferenceWork.from_profiles(
            profile_workload(WorkloadSpec(name=model, batch_size=1, precision=prec)),
            profile_workload(WorkloadSpec(name=model, batch_size=2, precision=prec)),
        )
        curve = pserve.predict_latency_curve(
            work, spec, precision, max_batch=policy.largest_batch, mig=mig_profile
        )
        model_memory = work.memory_gib(policy.largest_batch)
        gbps = network_gbps or (offer.network_gbps if offer else None)
        if gbps:
            overhead_s = pserve.request_overhead_s(work.input_bytes_per_sample, gbps)
            sources["request_overhead"] = f"{overhead_s * 1e3:.3g} ms (input over {gbps:g} Gb/s)"
    sources["latency"] = curve.source
    times, arrivals_src = _arrivals(arrivals, rate, duration_s, seed)
    sources["arrivals"] = arrivals_src
    name = f"{spec.name}/{mig_profile.name}" if mig_profile else spec.name
    server = ServerSpec(
        name=name,
        kind="mig" if mig_profile else "gpu",
        memory_gib=memory_gib,
        price_usd_per_hour=price,
        models=(
            ModelDeployment(
                model=model,
                latency=curve,
                batching=policy,
                instances=instances,
                memory_gib=model_memory,
                request_overhead_s=overhead_s,
            ),
        ),
    )
    deployment = Deployment(groups=(ServerGroup(server=server, count=servers),))
    result = simulate_serving(
        deployment,
        {model: times},
        seed=seed,
        slo_s=None if slo_ms is None else slo_ms / 1e3,
        sources=sources,
    )
    out = result.to_dict(timeline_bins=30)
    out["batching"] = policy.to_dict()
    out["latency_curve"] = curve.to_dict()
    if json_out:
        emit_json(out)
        return
    lat = out["latency_s"]
    assert isinstance(lat, dict)
    console.print(
        f"[bold]{model}[/bold] on {servers}x {name}, {instances} instance(s) each, "
        f"{policy.describe()}",
        highlight=False,
    )
    console.print(
        f"  requests {out['requests']}  throughput {out['throughput_rps']:.1f} req/s  "
        f"mean batch {out['mean_batch_size']:.2f}",
        highlight=False,
    )
    console.print(
        f"  latency p50 {lat['p50'] * 1e3:.1f} ms  p95 {lat['p95'] * 1e3:.1f} ms  "
        f"p99 {lat['p99'] * 1e3:.1f} ms",
        highlight=False,
    )
    if out["slo_attainment"] is not None:
        console.print(f"  SLO {slo_ms:g} ms met by {out['slo_attainment']:.1%}", highlight=False)
    console.print(
        f"  cost {out['cost_usd_per_hour']:.3f} US$/h, "
        f"{out['cost_usd_per_million']:.2f} US$ per million requests",
        highlight=False,
    )
    for s in result.servers:
        console.print(
            f"  {s.name} #{s.replica}: busy {s.busy_fraction:.0%}, {s.requests} requests",
            highlight=False,
        )
    for key, value in sources.items():
        console.print(f"[dim]{key}: {value}[/dim]", highlight=False)

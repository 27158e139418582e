"""`gpucast simulate serve`: traffic through a model on catalog GPUs with dynamic batching.

Register with ``app.command("serve")(serve_cmds.serve)`` on the ``simulate`` Typer app.
A thin shell: the latency curve comes from ``--latency-table`` or the roofline of the
profiled model on the catalog GPU (or MIG slice); arrivals from
:mod:`gpucast.simulate.arrivals`; then :func:`gpucast.simulate.serving.simulate_serving`.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, cast

import typer

from gpucast.cli._common import console, emit_json, err_console, working
from gpucast.domain.catalog import GpuSpec, MigProfile, Offer
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.serving import (
    BatchingPolicy,
    Deployment,
    LatencyCurve,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)
from gpucast.domain.serving_plan import ServerOption

if TYPE_CHECKING:  # numpy loads with the command that draws arrivals
    import numpy as np

#: What the latency predictor needs for one server option: the GPU and MIG profile (None for
#: a CPU server) and the offer it is rented from.
ServerTarget = tuple[GpuSpec | None, MigProfile | None, Offer]

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
    import numpy as np

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


HOST_CAPACITY_HELP = (
    "Requests/s the host path of one server (CPU, NIC, serving framework, client) carries; "
    "each request waits median-latency x load/(capacity - load) more. Default: unlimited."
)


def _check_host_capacity(value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(
            "host-capacity-rps",
            "must be > 0 requests per second",
            got=value,
            fix="e.g. --host-capacity-rps 330, or leave it out for an unlimited host",
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
    host_capacity_rps: float | None = typer.Option(
        None, "--host-capacity-rps", help=HOST_CAPACITY_HELP
    ),
    calibrate_p50_ms: float | None = typer.Option(
        None,
        "--calibrate-p50-ms",
        help="Median latency you measured at this load, ms: fits --host-capacity-rps to it.",
    ),
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
    _check_host_capacity(host_capacity_rps)
    if calibrate_p50_ms is not None:
        if host_capacity_rps is not None:
            raise InvalidSpecError(
                "calibrate-p50-ms",
                "cannot be combined with --host-capacity-rps",
                fix="give the capacity, or the measured median to fit it from, not both",
            )
        if not (math.isfinite(calibrate_p50_ms) and calibrate_p50_ms > 0):
            raise InvalidSpecError(
                "calibrate-p50-ms", "must be > 0 ms", got=calibrate_p50_ms, fix="e.g. 33.9"
            )
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
        host_capacity_rps=host_capacity_rps,
    )
    if host_capacity_rps is not None:
        sources["host_capacity"] = f"{host_capacity_rps:g} requests/s per server (given)"
    deployment = Deployment(groups=(ServerGroup(server=server, count=servers),))
    if calibrate_p50_ms is not None:
        from gpucast.simulate.serving import calibrate_host_capacity, with_host_capacity

        host_capacity_rps = calibrate_host_capacity(
            deployment, {model: times}, calibrate_p50_ms / 1e3, seed=seed
        )
        deployment = with_host_capacity(deployment, host_capacity_rps)
        sources["host_capacity"] = (
            f"{host_capacity_rps:.1f} requests/s per server, calibrated to the measured "
            f"median {calibrate_p50_ms:g} ms at this load"
        )
    result = simulate_serving(
        deployment,
        {model: times},
        seed=seed,
        slo_s=None if slo_ms is None else slo_ms / 1e3,
        sources=sources,
    )
    out = result.to_dict(timeline_bins=30)
    out["host_capacity_rps"] = host_capacity_rps
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
        host = "" if s.host_utilisation is None else f", host path {s.host_utilisation:.0%}"
        console.print(
            f"  {s.name} #{s.replica}: busy {s.busy_fraction:.0%}, {s.requests} requests{host}",
            highlight=False,
        )
        if s.host_utilisation is not None and s.host_utilisation >= 1.0:
            console.print(
                f"  [yellow]warning:[/yellow] {s.name} #{s.replica}: the host path is "
                f"overloaded ({s.host_utilisation:.0%} of --host-capacity-rps); its latencies "
                "are a lower bound. Add servers or raise the host capacity.",
                highlight=False,
            )
    for key, value in sources.items():
        console.print(f"[dim]{key}: {value}[/dim]", highlight=False)


# -- `gpucast plan serve` ----------------------------------------------------------------------
#
# Register on the ``plan`` Typer group with ``app.command("serve")(serve_cmds.plan_serve_command)``.

PLAN_SERVE_CONFIG_KEYS: tuple[str, ...] = (
    "models", "model", "rate", "trace", "slo", "slo_ms", "slo_percentile", "gpu", "mig", "no_mig",
    "no_cpu", "provider", "region", "spot", "precision", "max_batch_sizes", "max_delays_ms",
    "instances", "max_servers", "budget_usd_per_hour", "placement", "duration_s", "seed",
    "latency_table", "host_capacity_rps",
)  # fmt: skip


def parse_slo(text: str) -> tuple[float, float]:
    """``p99<50ms``, ``p95<=0.1s``, ``50ms`` or ``50`` (ms) -> (percentile, seconds)."""
    import re

    match = re.fullmatch(
        r"\s*(?:p(?P<p>\d+(?:\.\d+)?)\s*<=?\s*)?(?P<v>\d+(?:\.\d+)?)\s*(?P<u>ms|s|us)?\s*",
        text,
    )
    if match is None:
        raise InvalidSpecError(
            "slo", "must look like p99<50ms (percentile < latency)", got=text, fix="--slo p99<50ms"
        )
    percentile = float(match["p"]) if match["p"] else 99.0
    value = float(match["v"])
    unit = match["u"] or "ms"
    seconds = value * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[unit]
    if not 0 < percentile <= 100:
        raise InvalidSpecError("slo percentile", "must be in (0, 100]", got=percentile)
    if seconds <= 0:
        raise InvalidSpecError("slo", "must be > 0", got=text, fix="--slo p99<50ms")
    return percentile, seconds


def parse_model_rate(text: str, default_rate: float | None) -> tuple[str, float | None]:
    """``resnet50:150`` -> ("resnet50", 150.0); ``resnet50`` -> ("resnet50", default_rate).

    A user model ``module:factory`` keeps its colon: only a numeric last part is a rate."""
    name, sep, tail = text.rpartition(":")
    if sep:
        try:
            return name, float(tail)
        except ValueError:
            pass
    return text, default_rate


def read_trace_arrivals(path: Path, seed: int) -> tuple[np.ndarray, str]:
    """Arrival times (s) of a trace file: an Azure Functions 2019 per-minute count file (all
    its functions summed), an Azure LLM trace or an ``arrival_s`` CSV. Malformed rows are
    reported on stderr with their count and skipped."""
    import numpy as np

    from gpucast.simulate import arrivals

    try:
        with Path(path).open(encoding="utf-8") as handle:
            head = handle.readline()
    except OSError as exc:
        raise DataFormatError(str(path), f"cannot read trace ({exc.strerror})") from exc
    if head.startswith("HashOwner"):
        from gpucast.store.datasets.azure_functions import read_invocation_counts

        counts = read_invocation_counts(path)
        skipped = counts.skipped
        times = counts.arrivals(np.random.default_rng(seed))
        what = f"Azure Functions counts, {len(counts.functions)} functions"
    else:
        from gpucast.store.datasets.azure_traces import read_arrival_trace

        parsed = read_arrival_trace(path)
        skipped = parsed.skipped
        times = arrivals.from_timestamps(parsed.frame["arrival_s"].to_numpy())
        what = f"{len(parsed.frame)} requests"
    if skipped:
        err_console.print(
            f"[yellow]skipped {len(skipped)} malformed row(s) of {Path(path).name}; "
            f"first: {skipped[0]}[/yellow]",
            highlight=False,
        )
    if times.size < 2 or times[-1] <= 0:
        raise DataFormatError(str(path), "has fewer than two arrivals", fix="give a longer trace")
    return times, f"trace {Path(path).name} ({what}, {len(skipped)} malformed rows skipped)"


def _load_plan_config(path: Path) -> dict[str, object]:
    import difflib

    import yaml

    if not path.is_file():
        raise InvalidSpecError("config", "file not found", got=str(path), fix="check the path")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DataFormatError(str(path), f"not valid YAML ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DataFormatError(str(path), "must be a mapping of option: value")
    out: dict[str, object] = {}
    for key, value in data.items():
        norm = str(key).strip().replace("-", "_")
        if norm not in PLAN_SERVE_CONFIG_KEYS:
            close = difflib.get_close_matches(norm, PLAN_SERVE_CONFIG_KEYS, n=1)
            raise DataFormatError(
                str(path),
                f"unknown key {key!r}",
                fix=f"did you mean {close[0]!r}?" if close else "see `gpucast plan serve --help`",
            )
        out[norm] = value
    return out


def _listify(value: object) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list | tuple) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, dict):
            out.append(f"{item.get('name')}:{item.get('rate')}")
        else:
            out += [p.strip() for p in str(item).split(",") if p.strip()]
    return out


def _ints(field: str, values: list[str]) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in values)
    except ValueError:
        raise InvalidSpecError(field, "must be integers like 1,2,4,8", got=values) from None


def _floats(field: str, values: list[str]) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in values)
    except ValueError:
        raise InvalidSpecError(field, "must be numbers like 0,2,5,10", got=values) from None


def build_server_options(
    *,
    gpus: list[str],
    migs: list[str],
    no_mig: bool,
    no_cpu: bool,
    providers: list[str],
    regions: list[str],
    spot: bool,
) -> tuple[list[ServerOption], dict[str, ServerTarget]]:
    """Server options from the catalog: the cheapest offer per GPU type (price per GPU), the
    MIG profiles of those GPUs (a layout of ``max_instances`` equal slices per GPU), and the
    cheapest offer per CPU instance type. Returns the options and, per option name, what the
    latency predictor needs (the GpuSpec + MigProfile, or the CPU offer)."""
    from gpucast.catalog import load_catalog
    from gpucast.predict import serving as pserve

    catalog = load_catalog()
    offers: list[Offer] = []
    any_: list[str | None] = [None]
    for provider in providers or any_:
        for region in regions or any_:
            offers += catalog.find_offers(provider=provider, region=region)
    wanted = {catalog.gpu(g).name for g in gpus}
    mig_wanted: dict[str, set[str]] = {}
    for item in migs:
        gpu_name, sep, prof_name = item.partition(":")
        if not sep:
            raise InvalidSpecError(
                "mig", "must be GPU:PROFILE", got=item, fix="e.g. --mig A100-40GB:1g.5gb"
            )
        spec = catalog.gpu(gpu_name)
        pserve.mig_profile(spec, prof_name)  # one clear error when the GPU has no such profile
        mig_wanted.setdefault(spec.name, set()).add(prof_name)
        if gpus:
            wanted.add(spec.name)
    best_gpu: dict[str, Offer] = {}
    best_cpu: dict[str, Offer] = {}
    for offer in offers:
        if spot and offer.spot_usd_per_hour is None:
            continue
        price = offer.price_usd_per_hour(spot=spot)
        if offer.gpu is None:
            if no_cpu or gpus or migs:
                continue
            cur = best_cpu.get(offer.instance_type)
            if cur is None or price < cur.price_usd_per_hour(spot=spot):
                best_cpu[offer.instance_type] = offer
            continue
        if (wanted or mig_wanted) and offer.gpu not in wanted | set(mig_wanted):
            continue
        cur = best_gpu.get(offer.gpu)
        if cur is None or price / offer.gpus < (cur.price_usd_per_hour(spot=spot) / cur.gpus):
            best_gpu[offer.gpu] = offer
    options: list[ServerOption] = []
    targets: dict[str, ServerTarget] = {}
    for gpu_name, offer in sorted(best_gpu.items()):
        spec = catalog.gpu(gpu_name)
        price = offer.price_usd_per_hour(spot=spot) / offer.gpus
        if not mig_wanted or gpu_name in wanted:
            options.append(
                ServerOption(
                    name=gpu_name,
                    kind="gpu",
                    memory_gib=spec.memory_gib,
                    price_usd_per_hour=price,
                    gpu=gpu_name,
                    provider=offer.provider,
                    region=offer.region,
                    instance_type=offer.instance_type,
                )
            )
            targets[gpu_name] = (spec, None, offer)
        if no_mig:
            continue
        for prof in spec.mig_profiles:
            if mig_wanted and prof.name not in mig_wanted.get(gpu_name, set()):
                continue
            name = f"{gpu_name}/{prof.name}"
            options.append(
                ServerOption(
                    name=name,
                    kind="mig",
                    memory_gib=prof.memory_gib,
                    price_usd_per_hour=price / prof.max_instances,
                    gpu=gpu_name,
                    mig_profile=prof.name,
                    per_unit=prof.max_instances,
                    provider=offer.provider,
                    region=offer.region,
                    instance_type=offer.instance_type,
                )
            )
            targets[name] = (spec, prof, offer)
    for itype, offer in sorted(best_cpu.items()):
        name = f"cpu {itype}"
        options.append(
            ServerOption(
                name=name,
                kind="cpu",
                memory_gib=offer.memory_gib,
                price_usd_per_hour=offer.price_usd_per_hour(spot=spot),
                provider=offer.provider,
                region=offer.region,
                instance_type=itype,
            )
        )
        targets[name] = (None, None, offer)
    if not options:
        raise InvalidSpecError(
            "servers",
            "no catalog offer matches the filters",
            fix="relax --gpu / --provider / --region / --spot",
        )
    return options, targets


def plan_serve_command(
    ctx: typer.Context,
    models: list[str] = typer.Option(
        [], "--model", help="NAME:RATE (requests/s), e.g. resnet50:150; repeatable."
    ),
    rate: float | None = typer.Option(None, "--rate", help="Rate for a --model without one."),
    trace: Path | None = typer.Option(
        None, "--trace", help="Arrivals of the (single) --model: Azure LLM / Functions / CSV."
    ),
    slo: str | None = typer.Option(None, "--slo", help="e.g. p99<50ms."),
    slo_ms: float | None = typer.Option(None, "--slo-ms", help="SLO latency, ms."),
    slo_percentile: float | None = typer.Option(None, "--slo-percentile", help="e.g. 99."),
    gpus: list[str] = typer.Option([], "--gpu", help="Only these GPU types; repeatable."),
    migs: list[str] = typer.Option([], "--mig", help="GPU:PROFILE, e.g. A100-40GB:1g.5gb."),
    no_mig: bool = typer.Option(False, "--no-mig", help="Whole GPUs only."),
    no_cpu: bool = typer.Option(False, "--no-cpu", help="No CPU servers."),
    providers: list[str] = typer.Option([], "--provider", help="aws | gcp | azure."),
    regions: list[str] = typer.Option([], "--region", help="Region filter; repeatable."),
    spot: bool = typer.Option(False, "--spot", help="Spot prices."),
    precision: str = typer.Option("fp32", "--precision", help="fp32 | fp16 | bf16."),
    max_batch_sizes: str | None = typer.Option(None, "--max-batch-sizes", help="e.g. 1,4,8,32"),
    max_delays_ms: str | None = typer.Option(None, "--max-delays-ms", help="e.g. 0,2,5,10"),
    instances: str | None = typer.Option(None, "--instances", help="Per server, e.g. 1,2."),
    max_servers: int | None = typer.Option(None, "--max-servers", help="Cap (default 64)."),
    budget: float | None = typer.Option(None, "--budget-usd-per-hour", help="Cost cap, US$/h."),
    placement: list[str] = typer.Option(
        [], "--placement", help="dedicated | shared (co-locate all models); default both."
    ),
    latency_tables: list[str] = typer.Option(
        [], "--latency-table", help="MODEL@SERVER=CSV measured curve (batch_size,latency_s)."
    ),
    duration_s: float | None = typer.Option(None, "--duration-s", help="Simulated seconds."),
    host_capacity_rps: float | None = typer.Option(
        None, "--host-capacity-rps", help=HOST_CAPACITY_HELP
    ),
    seed: int | None = typer.Option(None, "--seed", help="Same seed, same plan."),
    config: Path | None = typer.Option(None, "--config", help="YAML with the same keys."),
    limit: int = typer.Option(15, "--limit", help="Rows in the table."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The cheapest deployments that serve MODELs within a latency SLO, and the cost vs tail
    latency Pareto front: server type (GPU, MIG slice, CPU), count, batching, co-location."""
    with working("planning: pruning server options and simulating the survivors"):
        result = plan_serve_dict(
            models=models, rate=rate, trace=trace, slo=slo, slo_ms=slo_ms,
            slo_percentile=slo_percentile, gpus=gpus, migs=migs, no_mig=no_mig, no_cpu=no_cpu,
            providers=providers, regions=regions, spot=spot, precision=precision,
            max_batch_sizes=max_batch_sizes, max_delays_ms=max_delays_ms, instances=instances,
            max_servers=max_servers, budget=budget, placement=placement,
            latency_tables=latency_tables, duration_s=duration_s, seed=seed, config=config,
            host_capacity_rps=host_capacity_rps,
        )  # fmt: skip
    if json_out:
        emit_json(result)
        return
    print_serve_plan(result, limit=limit)


def plan_serve_dict(**kw: object) -> dict[str, object]:
    """Run `plan serve` from option values (the CLI's and YAML's) to the plan's plain dict:
    ``ServePlan.to_dict()`` plus ``sources`` — what the HTML report can take as is."""
    from gpucast.domain.serving_plan import ModelLoad, ModelProfile, ServeRequest
    from gpucast.domain.workload import PRECISIONS, Precision, WorkloadSpec
    from gpucast.plan.serve import plan_serving
    from gpucast.predict import serving as pserve
    from gpucast.profile import profile_workload

    cfg = _load_plan_config(kw["config"]) if kw.get("config") else {}  # type: ignore[arg-type]

    def opt(key: str, cfg_key: str | None = None) -> object:
        value = kw.get(key)
        if value is None or (isinstance(value, list) and not value):
            return cfg.get(cfg_key or key)
        return value

    seed = int(opt("seed") or 0)  # type: ignore[call-overload]
    rate_default = opt("rate")
    model_items = _listify(opt("models")) + (
        _listify(cfg.get("model")) if not kw.get("models") else []
    )
    if not model_items:
        raise InvalidSpecError("model", "is required", fix="e.g. --model resnet50:150")
    trace = opt("trace")
    loads: list[ModelLoad] = []
    traffic: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    duration = float(opt("duration_s") or 60.0)  # type: ignore[arg-type]
    for item in model_items:
        name, r = parse_model_rate(item, None if rate_default is None else float(rate_default))  # type: ignore[arg-type]
        if trace is not None:
            if len(model_items) != 1:
                raise InvalidSpecError(
                    "trace", "applies to exactly one --model", fix="give one --model with --trace"
                )
            times, what = read_trace_arrivals(Path(str(trace)), seed)
            trace_rate = (times.size - 1) / float(times[-1])
            if r is not None:
                times = times * (trace_rate / _positive_rate(name, r))
            r = r or trace_rate
            traffic[name] = times
            sources[f"arrivals {name}"] = what
        if r is None:
            raise InvalidSpecError(
                f"rate of {name}", "is missing", fix=f"write --model {name}:150 or add --rate"
            )
        loads.append(ModelLoad(name=name, rate_rps=_positive_rate(name, r)))
    if trace is not None:
        duration = float(next(iter(traffic.values()))[-1])
    # SLO
    slo_text = opt("slo")
    if slo_text is not None:
        percentile, slo_s = parse_slo(str(slo_text))
    elif opt("slo_ms") is not None:
        percentile, slo_s = 99.0, float(opt("slo_ms")) / 1e3  # type: ignore[arg-type]
    else:
        raise InvalidSpecError("slo", "is required", fix="e.g. --slo p99<50ms or --slo-ms 50")
    if opt("slo_percentile") is not None:
        percentile = float(opt("slo_percentile"))  # type: ignore[arg-type]
    if not (math.isfinite(slo_s) and slo_s > 0):
        raise InvalidSpecError("slo", "must be > 0 ms", got=slo_s * 1e3, fix="e.g. --slo-ms 50")
    grid: dict[str, object] = {}
    if opt("max_batch_sizes"):
        grid["max_batch_sizes"] = _ints("max-batch-sizes", _listify(opt("max_batch_sizes")))
    if opt("max_delays_ms"):
        delays = _floats("max-delays-ms", _listify(opt("max_delays_ms")))
        grid["max_delays_s"] = tuple(d / 1e3 for d in delays)
    if opt("instances"):
        grid["instances"] = _ints("instances", _listify(opt("instances")))
    if opt("max_servers") is not None:
        grid["max_servers"] = int(opt("max_servers"))  # type: ignore[call-overload]
    if opt("placement"):
        grid["placements"] = tuple(_listify(opt("placement")))
    budget = opt("budget", "budget_usd_per_hour")
    request = ServeRequest(
        models=tuple(loads),
        slo_s=slo_s,
        slo_percentile=percentile,
        budget_usd_per_hour=None if budget is None else float(budget),  # type: ignore[arg-type]
        duration_s=duration,
        seed=seed,
        **grid,  # type: ignore[arg-type]
    )
    options, targets = build_server_options(
        gpus=_listify(opt("gpus", "gpu")),
        migs=_listify(opt("migs", "mig")),
        no_mig=bool(opt("no_mig")),
        no_cpu=bool(opt("no_cpu")),
        providers=_listify(opt("providers", "provider")),
        regions=_listify(opt("regions", "region")),
        spot=bool(opt("spot")),
    )
    host_capacity = opt("host_capacity_rps")
    if host_capacity is not None:
        try:
            host_rps = float(host_capacity)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InvalidSpecError(
                "host-capacity-rps", "must be a number", got=host_capacity
            ) from None
        _check_host_capacity(host_rps)
        options = [dataclasses.replace(o, host_capacity_rps=host_rps) for o in options]
        sources["host_capacity"] = f"{host_rps:g} requests/s per server (given)"
    precision = str(opt("precision") or "fp32")
    if precision not in PRECISIONS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(PRECISIONS)}", got=precision
        )
    prec = cast(Precision, precision)
    measured: dict[tuple[str, str], LatencyCurve] = {}
    for item in _listify(opt("latency_tables", "latency_table")):
        key, sep, path = item.partition("=")
        model_name, at, server_name = key.partition("@")
        if not (sep and at):
            raise InvalidSpecError(
                "latency-table", "must be MODEL@SERVER=CSV", got=item,
                fix="e.g. --latency-table resnet50@T4=t4.csv",
            )  # fmt: skip
        measured[(model_name, server_name)] = read_latency_table(Path(path))
    max_batch = max(request.max_batch_sizes)
    profiles: dict[tuple[str, str], ModelProfile] = {}
    for load in loads:
        work = pserve.InferenceWork.from_profiles(
            profile_workload(WorkloadSpec(name=load.name, batch_size=1, precision=prec)),
            profile_workload(WorkloadSpec(name=load.name, batch_size=2, precision=prec)),
        )
        fixed_gib = 1.2 * work.weights_bytes / 2**30
        per_gib = 1.2 * (work.input_bytes_per_sample + work.activation_bytes_per_sample) / 2**30
        for option in options:
            spec, prof, offer = targets[option.name]
            curve = measured.get((load.name, option.name))
            if curve is None:
                if spec is None:
                    curve = pserve.predict_latency_curve(
                        work, pserve.cpu_device(offer), "fp32", max_batch=max_batch
                    )
                else:
                    curve = pserve.predict_latency_curve(
                        work, spec, precision, max_batch=max_batch, mig=prof
                    )
            profiles[(load.name, option.name)] = ModelProfile(
                model=load.name,
                server=option.name,
                curve=curve,
                memory_fixed_gib=fixed_gib,
                memory_per_sample_gib=per_gib,
                request_overhead_s=pserve.request_overhead_s(
                    work.input_bytes_per_sample,
                    offer.network_gbps,
                ),
            )
    sources["latency"] = (
        "roofline of the profiled inference pass on each catalog GPU / MIG slice / CPU "
        f"(uncalibrated priors){'; measured tables for ' + ', '.join(f'{m}@{s}' for m, s in measured) if measured else ''}"  # noqa: E501
    )
    sources["prices"] = "catalog on-demand" if not opt("spot") else "catalog spot"
    sources["arrivals"] = sources.get("arrivals", "Poisson at each model's rate")
    plan = plan_serving(
        request,
        options,
        profiles,
        arrivals=traffic or None,
        assumptions=sources,
    )
    return plan.to_dict()


def _positive_rate(name: str, rate: float) -> float:
    if not (math.isfinite(rate) and rate > 0):
        raise InvalidSpecError(
            f"rate of {name}", "must be > 0 requests per second", got=rate,
            fix=f"e.g. --model {name}:150",
        )  # fmt: skip
    return float(rate)


def print_serve_plan(plan: dict[str, object], *, limit: int = 15) -> None:
    """The plan as a Rich table (cheapest first; * marks the Pareto front)."""
    from rich.markup import escape
    from rich.table import Table

    request = plan["request"]
    assert isinstance(request, dict)
    candidates = plan["candidates"]
    assert isinstance(candidates, list)
    pareto = set(plan["pareto"])  # type: ignore[call-overload]
    p = request["slo_percentile"]
    table = Table(
        title=f"plan serve: p{p:g} <= {request['slo_s'] * 1e3:g} ms, "
        + ", ".join(f"{m['name']} {m['rate_rps']:g} req/s" for m in request["models"]),
    )
    for col in ("#", "deployment", "US$/h", "US$/M req", f"p{p:g} ms", "headroom", "bound"):
        table.add_column(col, justify="left" if col == "deployment" else "right")
    for i, c in enumerate(candidates[:limit]):
        mark = ("R " if i == plan["recommended"] else "") + ("*" if i in pareto else "")
        table.add_row(
            f"{i}{mark}",
            escape(c["description"]),
            f"{c['cost_usd_per_hour']:.3f}",
            f"{c['cost_usd_per_million']:.3f}",
            f"{c['tail_latency_s'] * 1e3:.1f}",
            f"{c['headroom']:.0%}",
            c["bound"],
        )
    console.print(table)
    console.print(
        f"[dim]R = recommended (cheapest meeting the SLO), * = Pareto front of cost vs p{p:g}; "
        f"{plan['evaluated']} configurations, {plan['simulated']} simulated[/dim]",
        highlight=False,
    )
    infeasible = plan["infeasible"]
    assert isinstance(infeasible, dict)
    for reason, count in sorted(infeasible.items(), key=lambda kv: -kv[1]):
        console.print(f"[dim]  {count} x {reason}[/dim]", highlight=False)
    assumptions = plan["assumptions"]
    assert isinstance(assumptions, dict)
    for key, value in assumptions.items():
        console.print(f"[dim]{key}: {value}[/dim]", highlight=False)


# -- `gpucast measure infer-curve` -------------------------------------------------------------
#
# Register on the ``measure`` Typer group with
# ``app.command("infer-curve")(serve_cmds.measure_curve_command)``.


def measure_curve_command(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="Workload, e.g. resnet50 or mlp."),
    batch_sizes: str = typer.Option("1,2,4,8", "--batch-sizes", help="e.g. 1,2,4,8."),
    precision: str = typer.Option("fp32", "--precision", help="One or more: fp32,fp16."),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda | cuda:N | auto."),
    colocate: list[str] = typer.Option(
        [], "--colocate", help="Also run WORKLOAD with this one at once; repeatable."
    ),
    colocate_batch: int | None = typer.Option(
        None, "--colocate-batch", help="Batch size of the co-location run (default: largest)."
    ),
    max_time_s: float = typer.Option(10.0, "--max-time-s", help="Seconds per point."),
    target_ci: float = typer.Option(0.02, "--target-ci", help="Relative 95% CI target."),
    min_samples: int = typer.Option(10, "--min-samples", help="Least steps per point."),
    no_save: bool = typer.Option(False, "--no-save", help="Do not write to the store."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Latency/throughput of WORKLOAD's inference step over batch sizes (and precisions),
    stored; with --colocate, the slowdown of running models at once on one device."""
    from gpucast.cli._common import state
    from gpucast.measure.curves import measure_colocated, measure_curve, precision_of
    from gpucast.store.db import Store, default_db_path

    sizes = _ints("batch-sizes", _listify(batch_sizes))
    precisions = [precision_of(p) for p in _listify(precision)]
    if not precisions:
        raise InvalidSpecError("precision", "is empty", fix="e.g. --precision fp32")
    db = state(ctx).db_path
    store = None if no_save else Store(db if db is not None else default_db_path()).open()
    out: dict[str, object] = {"workload": workload, "curves": [], "colocation": None}
    try:
        curves = []
        for prec in precisions:
            curve = measure_curve(
                workload,
                sizes,
                precision=prec,
                device=device,
                target_ci=target_ci,
                max_time_s=max_time_s,
                min_samples=min_samples,
                store=store,
            )
            fit = curve.fit()
            fixed, per = fit.coefficients
            curves.append(
                {
                    **curve.to_dict(),
                    "fit": {"fixed_s": fixed, "per_sample_s": per},
                    "latency_curve": curve.latency_curve().to_dict(),
                }
            )
        out["curves"] = curves
        if colocate:
            coloc = measure_colocated(
                [workload, *colocate],
                colocate_batch or max(sizes),
                precision=precisions[0],
                device=device,
                max_time_s=max_time_s,
                min_samples=min(min_samples, 5),
                store=store,
            )
            out["colocation"] = coloc.to_dict()
    finally:
        if store is not None:
            store.close()
    if json_out:
        emit_json(out)
        return
    for c in curves:
        console.print(
            f"[bold]{workload}[/bold] inference on {c['device']} ({c['precision']})",
            highlight=False,
        )
        for p in c["points"]:
            console.print(
                f"  batch {p['batch_size']:>4}: {p['median_s'] * 1e3:9.3f} ms  "
                f"{p['samples_per_s']:10.1f} samples/s  ±{p['ci_halfwidth_rel']:.1%}",
                highlight=False,
            )
        f = c["fit"]
        console.print(
            f"  fit: {f['fixed_s'] * 1e3:.3f} ms + {f['per_sample_s'] * 1e3:.4f} ms x batch"
            + (f"  (runs {c['run_ids']})" if c["run_ids"] else ""),
            highlight=False,
        )
    co = out["colocation"]
    if isinstance(co, dict):
        console.print("co-location (each alone vs all at once):", highlight=False)
        for name, a, t, s in zip(
            co["workloads"], co["alone_median_s"], co["together_median_s"], co["slowdown"],
            strict=True,
        ):  # fmt: skip
            console.print(
                f"  {name}: {a * 1e3:.3f} ms alone, {t * 1e3:.3f} ms together: x{s:.2f}",
                highlight=False,
            )
        console.print(f"  slowdown table {co['slowdown_table']}", highlight=False)

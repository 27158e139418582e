"""`gpucast simulate train`: Monte Carlo of a training job on spot / on-demand GPU clusters.

A thin shell: it gathers prices (catalog or ``--price-table``), lifetimes (fitted from the
published lifetime data, or a hazard / AWS interruption band), start-up delays and the restart
penalty (CM-DARE data when found), the speed (``--speed`` or a published single-worker speed),
then calls :func:`gpucast.simulate.transient.simulate_scenario`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpucast.cli._common import console, emit_json, published_data_dir
from gpucast.domain.errors import InvalidSpecError, UnknownRegionError
from gpucast.domain.simulation import (
    CPU_PS,
    ClusterScenario,
    PriceTable,
    SimulationResult,
    Summary,
    WorkerGroup,
)
from gpucast.domain.units import parse_duration_s
from gpucast.predict.revocation import (
    ExponentialLifetime,
    LifetimeDistribution,
    RevocationModel,
    estimate_restart_penalty,
    hazard_from_interruption_band,
)
from gpucast.simulate.transient import Delay, SpeedTable, empirical_sampler, simulate_scenario

app = typer.Typer(no_args_is_help=True, help="Simulate training on transient clusters.")

#: Restart penalty (s) when CM-DARE's chief_rejoining files are not at hand: the median of the
#: seven runs there (see gpucast.predict.revocation.estimate_restart_penalty).
DEFAULT_RESTART_PENALTY_S = 100.0
#: Checkpoint cost (s) when none is given: CM-DARE's mean checkpoint save time for ResNet-32
#: (checkpoint/aggregated.csv, 3.38 s); the checkpoint model can refine it per model.
DEFAULT_CHECKPOINT_S = 3.38


def _data_dir(given: Path | None) -> Path | None:
    return published_data_dir(given)


def _prices(price_table: Path | None, gpu: str, region: str, provider: str | None) -> PriceTable:
    if price_table is not None:
        from gpucast.store.datasets.transient import read_price_table

        return read_price_table(price_table)
    from gpucast.catalog import load_catalog

    catalog = load_catalog()
    gpu_name = catalog.gpu(gpu).name
    offers = [
        o
        for o in catalog.find_offers(provider=provider, region=region, gpu=gpu_name)
        if o.gpus == 1
    ]
    if not offers:
        raise InvalidSpecError(
            "gpu/region",
            f"the catalog has no 1-GPU {gpu_name} offer in {region}",
            fix="pick another region (gpucast catalog offers) or pass --price-table CSV",
        )
    gpu_offer = min(offers, key=lambda o: o.on_demand_usd_per_hour)
    prices: dict[tuple[str, str], float] = {(gpu, "on-demand"): gpu_offer.on_demand_usd_per_hour}
    if gpu_offer.spot_usd_per_hour is not None:
        prices[(gpu, "spot")] = gpu_offer.spot_usd_per_hour
    cpu = [
        o
        for o in catalog.find_offers(provider=gpu_offer.provider, region=region, cpu_only=True)
        if o.vcpus >= 4
    ]
    if cpu:
        ps = min(cpu, key=lambda o: o.on_demand_usd_per_hour)
        prices[(CPU_PS, "on-demand")] = ps.on_demand_usd_per_hour
        if ps.spot_usd_per_hour is not None:
            prices[(CPU_PS, "spot")] = ps.spot_usd_per_hour
    return PriceTable(
        usd_per_hour=prices,
        source=f"catalog: {gpu_offer.provider} {region} {gpu_offer.instance_type}",
    )


def _check_region(region: str) -> None:
    """Unknown regions fail with close matches from the catalog's regions."""
    from gpucast.catalog import load_catalog

    known = set(load_catalog().regions())
    if region not in known:
        raise UnknownRegionError(region, sorted(known), fix="see `gpucast catalog offers`")


def _lifetime(
    gpu: str,
    region: str,
    data_dir: Path | None,
    hazard: float | None,
    band: str | None,
    method: str,
) -> LifetimeDistribution:
    if hazard is not None:
        return ExponentialLifetime(
            hazard_per_hour=hazard, source=f"user-given hazard {hazard:g} revocations/h"
        )
    fallback = hazard_from_interruption_band(band) if band is not None else None
    path = None if data_dir is None else data_dir / "transient" / "lifetime" / "lifetime.csv"
    if path is None or not path.is_file():
        if fallback is not None:
            return fallback
        raise InvalidSpecError(
            "revocation data",
            f"no lifetime data found for {gpu} spot servers",
            fix="pass --data-dir ../shared/data, --hazard-per-hour H or --interruption-band 5-10%",
        )
    from gpucast.store.datasets.transient import lifetimes_frame, read_lifetimes

    parsed = read_lifetimes(path)
    model = RevocationModel(method=method).fit(lifetimes_frame(parsed.records))
    if fallback is None and gpu.lower() not in model.gpus():
        raise InvalidSpecError(
            "revocation data",
            f"no lifetimes for {gpu} (have {', '.join(model.gpus())})",
            fix="give --hazard-per-hour H or --interruption-band 5-10%",
        )
    return model.distribution(gpu, region, fallback=fallback)


def _startup(gpu: str, region: str, data_dir: Path | None) -> tuple[Delay, Delay, str]:
    folder = None if data_dir is None else data_dir / "cmdare" / "startup_time"
    if folder is None or not folder.is_dir():
        return 0.0, 0.0, "start-up delay not modelled (no cmdare/startup_time data found)"
    from gpucast.store.datasets.transient import read_startup_times

    frame = read_startup_times(folder)
    same_gpu = frame[frame["gpu"].str.lower() == gpu.lower()]
    if same_gpu.empty:
        return 0.0, 0.0, f"start-up delay not modelled (no start-up data for {gpu})"
    out: list[Delay] = []
    for market in ("spot", "on-demand"):
        rows = same_gpu[same_gpu["market"] == market]
        here = rows[rows["region"] == region]
        out.append(empirical_sampler((here if len(here) else rows)["total_s"].to_numpy()))
    return out[0], out[1], f"cmdare startup_time {gpu} (bootstrap of measured launches)"


def _restart_penalty(data_dir: Path | None) -> tuple[float, str]:
    folder = None if data_dir is None else data_dir / "cmdare" / "chief_rejoining"
    if folder is None or not folder.is_dir():
        return DEFAULT_RESTART_PENALTY_S, "default 100 s (CM-DARE chief_rejoining estimate)"
    from gpucast.store.datasets.transient import read_chief_rejoining

    est = estimate_restart_penalty(read_chief_rejoining(folder))
    return (
        est.value,
        f"{est.source}: median {est.value:.0f} s (range {est.lower:.0f}-{est.upper:.0f})",
    )


def _speed(
    workload: str | None, gpu: str, speed: float | None, workers: int
) -> tuple[SpeedTable, str]:
    if speed is not None:
        if not speed > 0:
            raise InvalidSpecError(
                "speed",
                "must be > 0 steps/s",
                got=speed,
                fix="give the measured single-worker steps/s",
            )
        per_worker, src = speed, f"--speed {speed:g} steps/s per worker"
    else:
        from gpucast.store.datasets.transient import PUBLISHED_SINGLE_WORKER_STEPS_PER_S

        key = ((workload or "").lower(), gpu.upper())
        if key not in PUBLISHED_SINGLE_WORKER_STEPS_PER_S:
            known = ", ".join(f"{w} on {g}" for w, g in PUBLISHED_SINGLE_WORKER_STEPS_PER_S)
            raise InvalidSpecError(
                "speed",
                f"no published single-worker speed for {workload or '(no workload)'} "
                f"on {gpu} (known: {known})",
                fix="measure it (gpucast measure train) and pass --speed STEPS_PER_S",
            )
        per_worker, origin = PUBLISHED_SINGLE_WORKER_STEPS_PER_S[key]
        src = f"{per_worker:g} steps/s per worker from {origin}"
    table = SpeedTable.linear([per_worker], [workers])
    return table, src + "; async PS speed adds up over ready workers"


def _print(result: SimulationResult) -> None:
    def row(label: str, s: Summary, fmt: str) -> str:
        return (
            f"  {label:<12} mean {s.mean:{fmt}}  median {s.median:{fmt}}  "
            f"p10 {s.p10:{fmt}}  p90 {s.p90:{fmt}}"
        )

    for name, stats in (("transient", result.transient), ("on-demand", result.on_demand)):
        console.print(f"[bold]{name}[/bold] ({stats.runs} runs)")
        console.print(row("hours", Summary.of(stats.duration_s / 3600.0), ".2f"))
        console.print(row("cost US$", Summary.of(stats.cost_usd), ".2f"))
        console.print(row("revocations", Summary.of(stats.revocations.astype(float)), ".2f"))
        if stats.p_miss_deadline is not None:
            console.print(f"  P(miss deadline) {stats.p_miss_deadline:.1%}")
        if stats.p_unfinished > 0:
            console.print(f"  P(never finishes) {stats.p_unfinished:.1%}")
    for key, value in result.sources.items():
        console.print(f"[dim]{key}: {value}[/dim]", highlight=False)
    for note in result.notes:
        console.print(f"[dim]note: {note}[/dim]", highlight=False)


@app.command("train")
def train(
    gpu: str = typer.Option(..., "--gpu", help="GPU of every worker, e.g. K80."),
    workers: int = typer.Option(..., "--workers", help="Number of GPU workers (>= 1)."),
    ps: int = typer.Option(1, "--ps", help="Number of CPU parameter servers."),
    spot: bool = typer.Option(False, "--spot/--on-demand", help="Workers on spot servers."),
    region: str = typer.Option(..., "--region", help="Cloud region, e.g. us-east1."),
    provider: str | None = typer.Option(None, "--provider", help="aws | gcp | azure."),
    workload: str | None = typer.Option(None, "--workload", help="e.g. cifar-resnet32."),
    steps: int = typer.Option(..., "--steps", help="Global steps of the job."),
    runs: int = typer.Option(2000, "--runs", help="Monte Carlo runs."),
    replace: bool = typer.Option(False, "--replace", help="Replace revoked workers."),
    checkpoint_every: int | None = typer.Option(
        None, "--checkpoint-every", help="Checkpoint every STEPS steps."
    ),
    checkpoint_s: float = typer.Option(
        DEFAULT_CHECKPOINT_S, "--checkpoint-s", help="Seconds one checkpoint takes."
    ),
    deadline: str | None = typer.Option(None, "--deadline", help="e.g. 6h; reports P(miss)."),
    seed: int = typer.Option(0, "--seed", help="Seed; the same seed gives the same result."),
    price_table: Path | None = typer.Option(
        None, "--price-table", help="CSV server,market,usd_per_hour."
    ),
    speed: float | None = typer.Option(
        None, "--speed", help="Measured single-worker speed, steps/s."
    ),
    hazard_per_hour: float | None = typer.Option(
        None, "--hazard-per-hour", help="Revocations per server-hour."
    ),
    interruption_band: str | None = typer.Option(
        None, "--interruption-band", help="AWS Spot Advisor band, e.g. 5-10%."
    ),
    lifetime_method: str = typer.Option("weibull", "--lifetime-method", help="weibull | km."),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help="Published data folder, e.g. ../shared/data (default: $GPUCAST_SHARED_DATA).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """How long and how much a training job takes on N spot (or on-demand) GPU workers."""
    if workers < 1:
        raise InvalidSpecError("workers", "must be >= 1", got=workers, fix="e.g. --workers 4")
    if runs < 1:
        raise InvalidSpecError("runs", "must be >= 1", got=runs, fix="e.g. --runs 2000")
    if checkpoint_s < 0:
        raise InvalidSpecError("checkpoint-s", "must be >= 0", got=checkpoint_s)
    deadline_s = None if deadline is None else parse_duration_s(deadline, field="deadline")
    scenario = ClusterScenario(
        workers=(WorkerGroup(gpu=gpu, count=workers, region=region, spot=spot),),
        ps_count=ps,
        steps=steps,
        checkpoint_every_steps=checkpoint_every,
        replace_revoked=replace,
        deadline_s=deadline_s,
    )
    root = _data_dir(data_dir)
    _check_region(region)
    prices = _prices(price_table, gpu, region, provider)
    prices.price(gpu, spot=False)  # fail early, one line, on a table missing the GPU
    if spot:
        prices.price(gpu, spot=True)
    if ps:
        prices.price(CPU_PS, spot=False)
    table, speed_src = _speed(workload, gpu, speed, workers)
    lifetime = (
        _lifetime(gpu, region, root, hazard_per_hour, interruption_band, lifetime_method)
        if spot
        else None
    )
    start_spot, start_od, start_src = _startup(gpu, region, root)
    penalty, penalty_src = _restart_penalty(root)
    result = simulate_scenario(
        scenario,
        speed=table,
        prices=prices,
        lifetimes=[lifetime],
        startup_spot_s=start_spot,
        startup_on_demand_s=start_od,
        checkpoint_s=checkpoint_s,
        restart_penalty_s=penalty,
        runs=runs,
        seed=seed,
        sources={
            "speed": speed_src,
            "startup": start_src,
            "restart_penalty": penalty_src,
            "checkpoint": f"{checkpoint_s:g} s per checkpoint",
        },
    )
    if json_out:
        emit_json(result.to_dict())
    else:
        _print(result)


def _register_serve() -> None:
    from gpucast.cli.serve_cmds import serve

    app.command("serve")(serve)


_register_serve()

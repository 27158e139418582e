"""`gpucast simulate train`: Monte Carlo of a training job on spot / on-demand GPU clusters.

A thin shell: :mod:`gpucast.cli._simulate_inputs` gathers prices (catalog or
``--price-table``), lifetimes (fitted on the published lifetime data, or a hazard / AWS
interruption band), the cluster's speed for every number of live workers (the distributed-
scaling :class:`~gpucast.predict.cluster.ClusterModel` on the workload's parameter bytes and
tensor count), VM start-up (:class:`~gpucast.predict.overheads.StartupModel`), checkpoint cost
(:class:`~gpucast.predict.overheads.CheckpointModel`) and the restart penalty, then this
module calls :func:`gpucast.simulate.transient.simulate_scenario` and prints the result.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpucast.cli import _simulate_inputs as inputs
from gpucast.cli._common import console, emit_json, published_data_dir
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import parse_duration_s

if TYPE_CHECKING:  # numpy: imported by the command that simulates
    from gpucast.domain.simulation import SimulationResult

app = typer.Typer(no_args_is_help=True, help="Simulate training on transient clusters.")


def _deadline_s(text: str | None, now: datetime | None = None) -> float | None:
    """``--deadline 6h`` (from launch) or an ISO date-time (``2025-06-01T18:00``)."""
    if text is None:
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ].*)?", text.strip()):
        try:
            when = datetime.fromisoformat(text.strip())
        except ValueError:
            raise InvalidSpecError(
                "deadline", "is not an ISO date-time", got=text, fix="e.g. 2025-06-01T18:00"
            ) from None
        clock = now or (datetime.now(when.tzinfo) if when.tzinfo else datetime.now())
        left = (when - clock).total_seconds()
        if left <= 0:
            raise InvalidSpecError(
                "deadline",
                "is in the past",
                got=text,
                fix="give a future date-time or a duration from launch, e.g. --deadline 6h",
            )
        return left
    if text.strip().startswith("-") or text.strip() in ("0", "0s", "0m", "0h", "0d"):
        raise InvalidSpecError(
            "deadline",
            "must be a positive duration (a deadline now or in the past cannot be met)",
            got=text,
            fix="e.g. --deadline 6h",
        )
    return parse_duration_s(text, field="deadline")


def _checkpoint_every(text: str | None) -> tuple[int | None, float | None]:
    """``--checkpoint-every 4000`` (steps) or ``--checkpoint-every 30m`` (seconds)."""
    if text is None:
        return None, None
    if re.fullmatch(r"\d+", text.strip()):
        return int(text), None
    if re.fullmatch(r"-\d+", text.strip()):
        raise InvalidSpecError(
            "checkpoint-every", "must be >= 1 step", got=text, fix="e.g. --checkpoint-every 4000"
        )
    return None, parse_duration_s(text, field="checkpoint-every")


def _print(result: SimulationResult) -> None:
    from gpucast.domain.simulation import Summary

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
    gpu: str = typer.Option(
        ..., "--gpu", help="GPU of the workers: K80, or a mix GPU:N[@REGION],... e.g. K80:2,P100:2."
    ),
    workers: int | None = typer.Option(
        None, "--workers", help="Number of GPU workers (>= 1); implied by counts in --gpu."
    ),
    ps: int | None = typer.Option(
        None, "--ps", help="CPU parameter servers (PS shards) [default: 1; 0 for allreduce]."
    ),
    strategy: str = typer.Option("ps-async", "--strategy", help="ps-async | ps-sync | allreduce."),
    spot: bool = typer.Option(False, "--spot/--on-demand", help="Workers on spot servers."),
    region: str = typer.Option(
        ..., "--region", help="Region of the PS and of workers without @REGION, e.g. us-east1."
    ),
    provider: str | None = typer.Option(None, "--provider", help="aws | gcp | azure."),
    workload: str | None = typer.Option(
        None, "--workload", help="Built-in workload, module:factory or a CM-DARE model name."
    ),
    batch_size: int = typer.Option(
        128, "--batch-size", help="Per-worker batch (for the roofline step time)."
    ),
    precision: str = typer.Option("fp32", "--precision", help="fp32 | tf32 | fp16 | bf16."),
    steps: int = typer.Option(
        ..., "--steps", help="Steps of the job (worker mini-batches, as async PS counts them)."
    ),
    runs: int = typer.Option(2000, "--runs", help="Monte Carlo runs."),
    replace: bool = typer.Option(False, "--replace", help="Replace revoked workers."),
    checkpoint_every: str | None = typer.Option(
        None, "--checkpoint-every", help="Checkpoint every STEPS (e.g. 4000) or DURATION (30m)."
    ),
    checkpoint_s: float | None = typer.Option(
        None, "--checkpoint-s", help="Seconds one checkpoint takes [default: checkpoint model]."
    ),
    deadline: str | None = typer.Option(
        None, "--deadline", help="6h (from launch) or an ISO date-time; reports P(miss)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed; the same seed gives the same result."),
    price_table: Path | None = typer.Option(
        None, "--price-table", help="CSV server,market,usd_per_hour (server: GPU or cpu-ps)."
    ),
    speed: str | None = typer.Option(
        None,
        "--speed",
        help="Measured single-worker steps/s (1 worker + 1 PS for PS strategies); "
        "GPU:S,GPU:S for a mix.",
    ),
    hazard_per_hour: float | None = typer.Option(
        None, "--hazard-per-hour", help="Revocations per server-hour."
    ),
    interruption_band: str | None = typer.Option(
        None, "--interruption-band", help="AWS Spot Advisor band, e.g. 5-10%."
    ),
    lifetime_method: str = typer.Option("weibull", "--lifetime-method", help="weibull | km."),
    inter_region_rtt_ms: float = typer.Option(
        inputs.DEFAULT_INTER_REGION_RTT_S * 1e3,
        "--inter-region-rtt-ms",
        help="Round trip between regions, for workers outside the PS region.",
    ),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        help="Published data folder, e.g. ../shared/data (default: $GPUCAST_SHARED_DATA).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """How long and how much a training job takes on N spot (or on-demand) GPU workers."""
    from gpucast.domain.simulation import ClusterScenario
    from gpucast.simulate.transient import simulate_scenario

    # -- cheap checks first: one line, exit 2, before any model is fitted -----------------
    if workers is not None and workers < 1:
        raise InvalidSpecError("workers", "must be >= 1", got=workers, fix="e.g. --workers 4")
    if runs < 1:
        raise InvalidSpecError("runs", "must be >= 1", got=runs, fix="e.g. --runs 2000")
    if strategy not in inputs.STRATEGIES:
        raise InvalidSpecError(
            "strategy", f"must be one of {', '.join(inputs.STRATEGIES)}", got=strategy
        )
    if ps is None:
        ps = 0 if strategy == "allreduce" else 1
    if strategy == "allreduce" and ps:
        raise InvalidSpecError(
            "ps", "must be 0 with --strategy allreduce (no parameter servers)", got=ps
        )
    if strategy != "allreduce" and ps < 1:
        raise InvalidSpecError(
            "ps", f"must be >= 1 with --strategy {strategy}", got=ps, fix="e.g. --ps 1"
        )
    if checkpoint_s is not None and not (math.isfinite(checkpoint_s) and checkpoint_s >= 0):
        raise InvalidSpecError("checkpoint-s", "must be >= 0", got=checkpoint_s)
    if batch_size < 1:
        raise InvalidSpecError("batch-size", "must be >= 1", got=batch_size)
    if not (math.isfinite(inter_region_rtt_ms) and inter_region_rtt_ms >= 0):
        raise InvalidSpecError("inter-region-rtt-ms", "must be >= 0", got=inter_region_rtt_ms)
    deadline_s = _deadline_s(deadline)
    every_steps, every_s = _checkpoint_every(checkpoint_every)
    groups = inputs.parse_groups(gpu, workers, region, spot)
    scenario = ClusterScenario(
        workers=groups,
        ps_count=ps,
        steps=steps,
        checkpoint_every_steps=every_steps,
        replace_revoked=replace,
        deadline_s=deadline_s,
        worker_loss_restarts=strategy != "ps-async",
    )
    from gpucast.catalog import load_catalog

    catalog = load_catalog()
    inputs.check_names(groups, region, catalog)
    given_speed = inputs.parse_speed(speed, groups)
    root = published_data_dir(data_dir)
    prices, network = inputs.prices_and_network(price_table, groups, region, ps, provider, catalog)
    inputs.check_prices(prices, groups, region, ps)
    lifetimes, lifetime_src = inputs.lifetimes(
        groups, root, hazard_per_hour, interruption_band, lifetime_method
    )
    # -- the models -----------------------------------------------------------------------
    work = inputs.workload_inputs(workload, root, precision)
    single = inputs.step_times(
        groups, work, given_speed, strategy, root, batch_size, precision, catalog
    )
    model, model_src = inputs.cluster_model(root)
    table, speed_src = inputs.speed_table(
        groups,
        single,
        model,
        work,
        strategy=strategy,
        ps_shards=ps,
        ps_region=region,
        network=network,
        rtt_s=inter_region_rtt_ms / 1e3,
    )
    notes: list[str] = []
    if every_s is not None:
        full_speed = float(table.table[tuple(g.count for g in groups)])
        every_steps = max(1, round(every_s * full_speed))
        if every_steps > steps:
            raise InvalidSpecError(
                "checkpoint-every",
                f"is longer than the whole job (~{steps / full_speed / 3600:.2g} h at "
                f"{full_speed:.3g} steps/s)",
                got=checkpoint_every,
                fix="checkpoint more often, or drop --checkpoint-every",
            )
        notes.append(
            f"--checkpoint-every {checkpoint_every} = every {every_steps} steps at the full "
            f"cluster's {full_speed:.3g} steps/s"
        )
        scenario = ClusterScenario(
            workers=groups,
            ps_count=ps,
            steps=steps,
            checkpoint_every_steps=every_steps,
            replace_revoked=replace,
            deadline_s=deadline_s,
            worker_loss_restarts=strategy != "ps-async",
        )
    start_spot, start_od, start_src = inputs.startup(groups, region, root)
    if checkpoint_s is None:
        ckpt_s, ckpt_src = inputs.checkpoint_s(work, root)
    else:
        ckpt_s, ckpt_src = checkpoint_s, f"--checkpoint-s {checkpoint_s:g} s per checkpoint"
    if scenario.checkpoint_every_steps is None:
        ckpt_src += " (not used: no --checkpoint-every; a chief or PS loss restarts from step 0)"
    penalty, penalty_src = inputs.restart_penalty(root)
    if strategy != "ps-async":
        notes.append(
            f"{strategy} is synchronous: losing any worker rolls back to the last checkpoint"
        )
    result = simulate_scenario(
        scenario,
        speed=table,
        prices=prices,
        lifetimes=lifetimes,
        startup_spot_s=start_spot,
        startup_on_demand_s=start_od,
        checkpoint_s=ckpt_s,
        restart_penalty_s=penalty,
        runs=runs,
        seed=seed,
        sources={
            "lifetimes": lifetime_src,
            "workload": work.source,
            "speed": speed_src,
            "cluster_model": model_src,
            "startup": start_src,
            "checkpoint": ckpt_src,
            "restart_penalty": penalty_src,
        },
        notes=notes,
    )
    if json_out:
        emit_json(result.to_dict())
    else:
        _print(result)

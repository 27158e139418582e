"""`gpucast fit speed|cluster|checkpoint|lifetimes|steptime|power|variability`: fit and save.

The flags are the fields of the requests in :mod:`gpucast.app.fit`; the work happens there.
"""

from __future__ import annotations

import math

import typer
from rich.markup import escape

from gpucast.app.energy import FitPowerRequest
from gpucast.app.fit import FitCheckpointRequest, FitClusterRequest, FitSpeedRequest
from gpucast.app.lifetimes import FitLifetimesRequest
from gpucast.app.steptime import FitStepTimeRequest
from gpucast.app.variability import FitVariabilityRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import (
    JSON_OPTION_HELP,
    console,
    emit_json,
    emit_result,
    err_console,
    say_new_store,
    state,
    working,
)

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Fit performance models from data."
)


def _cv(mape_pct: float | None) -> str:
    return "n/a" if mape_pct is None else f"{mape_pct:.1f}%"


@app.command("speed")
@request_command(FitSpeedRequest)
def speed(
    request: FitSpeedRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Fit the single-GPU step-time model from CM-DARE-format rows.

    Needs columns `GPU (temp)`, `Model FLOPs`, `Number of Parameters`, `Number of Tensors` and
    `Step Time (s)` (plus `Model (temp)` for cross-validated intervals); others are ignored.
    """
    from gpucast.app import fit_speed

    result = fit_speed(request)
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(str(warning))}", highlight=False)
    emit_result(
        result.to_dict(),
        f"fitted speed model on {result.rows} rows, {result.models} models, "
        f"GPUs {', '.join(result.gpus)} -> {result.model_file}",
        as_json=json_out,
    )


@app.command("cluster")
@request_command(FitClusterRequest)
def cluster(
    request: FitClusterRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Fit the distributed-scaling model on CM-DARE cluster runs (1 PS, N workers)."""
    from gpucast.app import fit_cluster

    with working("fitting the cluster model (leave-one-model-out included)"):
        result = fit_cluster(request)
    if json_out:
        emit_json(result.to_dict())
        return
    for reason in result.skipped:
        console.print(f"skipped: {reason}", highlight=False)
    console.print(
        f"fitted cluster model on {result.runs} runs of {result.models} models; "
        f"PS network efficiency {result.ps_network_efficiency or 0.0:.2f}, "
        f"per-tensor cost {1e3 * (result.per_tensor_cost_s or 0.0):.3f} ms; "
        f"leave-one-model-out MAPE {_cv(result.lomo_mape_pct)} -> {result.model_file}",
        highlight=False,
    )


@app.command("checkpoint")
@request_command(FitCheckpointRequest)
def checkpoint(
    request: FitCheckpointRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Fit checkpoint duration from checkpoint size (and .index size when present)."""
    from gpucast.app import fit_checkpoint

    result = fit_checkpoint(request)
    if json_out:
        emit_json(result.to_dict())
        return
    for reason in result.skipped:
        console.print(f"skipped: {reason}", highlight=False)
    console.print(
        f"fitted checkpoint model on {result.rows} rows; "
        f"leave-one-model-out MAPE {_cv(result.lomo_mape_pct)} -> {result.model_file}",
        highlight=False,
    )


@app.command("lifetimes")
@request_command(FitLifetimesRequest)
def lifetimes(
    ctx: typer.Context,
    request: FitLifetimesRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Fit spot lifetimes on your own preemption data (instance lifetimes, a SkyPilot
    node-count trace or a hazard) and store them under --name for --lifetimes NAME."""
    from gpucast.app import fit_lifetimes

    with working(f"fitting lifetimes on {request.trace}"):
        result = fit_lifetimes(request, db=state(ctx).db_path)
    say_new_store(result.new_store)
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(str(warning))}", highlight=False)
    if json_out:
        emit_json(result.to_dict())
        return
    for note in result.notes:
        console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
    per_day = result.revocations_per_node_day
    median = result.median_lifetime_h
    gap = result.capacity_gap_median_h
    kind = result.model_kind
    if result.parameters.get("one_state"):
        kind += " (one state explains it as well: a constant hazard)"
    console.print(
        f"{result.name}: {kind} -- "
        + ("" if per_day is None else f"{per_day:.2f} revocations per node per 24 h, ")
        + (
            "no median lifetime (over half the nodes outlive 10 years)"
            if median is None
            else f"median lifetime {median:.2f} h"
        )
        + ("" if gap is None else f", median capacity gap {gap:.2f} h"),
        highlight=False,
    )
    console.print(f"[dim]{escape(str(result.source))}[/dim]", highlight=False)
    if result.saved_in:
        console.print(
            f"stored in {result.saved_in}; use it with --lifetimes {result.name}",
            highlight=False,
        )


@app.command("steptime")
@request_command(FitStepTimeRequest)
def steptime(
    request: FitStepTimeRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Fit the roofline's efficiencies on every published source (CM-DARE, MLPerf, Zeus,
    Pollux) and cross-validate them per regime for honest intervals."""
    from gpucast.app import fit_steptime

    with working("fitting the step-time model on every source (and cross-validating it)"):
        result = fit_steptime(request)
    if json_out:
        emit_json(result.to_dict())
        return
    rows = ", ".join(f"{k} {v}" for k, v in sorted(result.rows_by_source.items()))
    console.print(f"fitted step-time model on {rows} -> {result.model_file}", highlight=False)
    if result.collective:
        tcp = result.collective["tcp"]
        cv = result.collective.get("leave_one_placement_out_mape_pct")
        console.print(
            f"  TCP all-reduce ({result.collective['rows']} Pollux steps): "
            f"{tcp['network_efficiency']:.3f} of the NIC, {tcp['intra_efficiency']:.3f} of "
            f"PCIe, {1e3 * tcp['latency_s']:.1f} ms per step, overlap "
            f"{tcp['overlap_fraction']:.2f}"
            + ("" if cv is None else f"; leave-one-placement-out MAPE {cv:.1f}%"),
            highlight=False,
        )
    if result.fp8:
        fp8 = result.fp8
        console.print(
            f"  fp8 tensor cores ({len(fp8['systems'])} MLPerf fp8 runs, 3D-parallel model): "
            f"{fp8['eta_compute']:.3f} of the fp8 peak = {fp8['ratio']:.2f}x the 16-bit "
            f"efficiency; MAPE {fp8['mape_pct']:.1f}% in sample",
            highlight=False,
        )
    if result.host:
        host = result.host
        console.print(
            f"  host pacing ({len(host['systems'])} MLPerf runs without CUDA graphs, "
            f"3D-parallel model): {1e3 * host['seconds']:.2f} ms per layer and micro-batch, "
            f"a run's warm-up {host.get('warmup_s', 0.0):.1f} s; log-residual SD "
            f"{host['spread_before']:.3f} -> {host['spread_after']:.3f} "
            f"around their level x{host['level']:.2f}",
            highlight=False,
        )
    table = result.intervals
    for regime, n in sorted(table.get("n", {}).items()):
        mape = table["mape_pct"][regime]
        level = float(table.get("level", {}).get(regime, 0.9))
        low, high = math.exp(table["q_low"][regime]), math.exp(table["q_high"][regime])
        console.print(
            f"  {regime}: cross-validated MAPE {mape:.1f}% over {n} held-out predictions; "
            f"80% interval x{low:.2f}-{high:.2f} (quantile level {level:.3f})",
            highlight=False,
        )
    if "new_source/uncalibrated" in table.get("n", {}):
        console.print(
            "  an uncalibrated prediction states the envelope of its regime's interval and "
            "new_source/uncalibrated's (a code base no source ran: leave one source out)",
            highlight=False,
        )


@app.command("power")
@request_command(FitPowerRequest)
def power(
    request: FitPowerRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Fit the GPU power model (power draw and step time under a power limit) on the Zeus
    power-limit sweeps, leaving each GPU out once for its validated intervals."""
    from gpucast.app import fit_power

    result = fit_power(request)
    if json_out:
        emit_json(result.to_dict())
        return
    rows = ", ".join(f"{k} {v}" for k, v in result.rows_by_gpu.items())
    console.print(f"fitted power model on {rows} rows -> {result.model_file}", highlight=False)
    mape = result.train_mape_pct
    console.print(
        f"  in sample: step time {mape['step_time_calibrated']:.1f}%, power "
        f"{mape['avg_power']:.1f}% (measured power at the default limit: "
        f"{mape['avg_power_calibrated']:.1f}%)",
        highlight=False,
    )
    if result.errors:  # not the README's table, which scores the limits below the default
        console.print(
            "  leave one GPU out, scored on all its rows, the default limit's included "
            "(benchmarks/energy_accuracy.py scores the limits below it only):",
            highlight=False,
        )
    for e in result.errors:
        console.print(
            f"  {e['held_out_gpu']} left out ({e['rows']} rows): step time "
            f"{e['step_time_mape_pct']:.1f}%, power {e['power_mape_pct']:.1f}%; with its "
            f"measured power: {e['step_time_measured_power_mape_pct']:.1f}% / "
            f"{e['power_measured_power_mape_pct']:.1f}%",
            highlight=False,
        )


@app.command("variability")
@request_command(FitVariabilityRequest)
def variability(
    ctx: typer.Context,
    request: FitVariabilityRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Fit your GPUs' speed spread (one stored run or CSV row per GPU) and store it for
    --gpu-variability NAME in plan train and simulate train."""
    from gpucast.app import fit_variability
    from gpucast.domain.units import count_of

    r = fit_variability(request, db=state(ctx).db_path)
    say_new_store(r.new_store)
    if json_out:
        emit_json(r.to_dict())
        return
    console.print(
        f"{r.name}: {count_of(r.gpus, 'GPU')}, spread sigma {r.sigma_log:.3f} (log), "
        f"{r.outlier_share:.1%} outliers up to {r.outlier_max_factor:.2f}x ({r.source})",
        highlight=False,
        markup=False,
    )
    slow = ", ".join(f"{count_of(n, 'GPU')} x{s:.3f}" for n, s in r.slowdown.items())
    console.print(f"  synchronous slowdown (the slowest GPU): {slow}", highlight=False)
    for w in r.warnings:
        console.print(f"  warning: {w}", highlight=False, markup=False)
    if r.saved_in is not None:
        console.print(f"  stored as {r.name!r} in {r.saved_in}", highlight=False, markup=False)

"""`gpucast simulate train`: parse the flags into a SimulateTrainRequest, simulate, render.

The flags are the fields of :class:`gpucast.app.simulation.SimulateTrainRequest`; the
work happens in :func:`gpucast.app.simulation`. ``simulate serve`` joins this group in
:mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import typer

from gpucast.app.simulation import SimulateTrainRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, state, working

if TYPE_CHECKING:  # numpy: loaded when a simulation runs
    from collections.abc import Callable

    from gpucast.domain.simulation import SimulationResult

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Simulate training on transient clusters."
)


def simulation_header(result: SimulationResult, request: SimulateTrainRequest) -> str:
    """What was simulated, in one line: the workload, the servers (count x GPU, region,
    market), the parameter servers, the strategy, the steps and (spot) whether revoked nodes
    are replaced."""
    scenario = result.scenario
    groups = " + ".join(
        f"{g.count} x {'' if g.gpus == 1 else f'{g.gpus} '}{g.gpu} in {g.region} "
        f"({'spot' if g.spot else 'on demand'})"
        for g in scenario.workers
    )
    ps = (
        f", {scenario.ps_count} parameter server{'s' if scenario.ps_count > 1 else ''}"
        if scenario.ps_count
        else ""
    )
    spot = any(g.spot for g in scenario.workers) or (scenario.ps_spot and scenario.ps_count)
    replaced = (
        ""
        if not spot
        else "; revoked nodes replaced"
        if scenario.replace_revoked
        else "; revoked nodes not replaced (--no-replace)"
    )
    return (
        f"simulate train: {request.workload} on {groups}{ps}, {request.strategy}, "
        f"{scenario.steps:,} steps{replaced}"
    )


def print_simulation(result: SimulationResult, request: SimulateTrainRequest) -> None:
    from rich.markup import escape

    from gpucast.domain.simulation import Summary
    from gpucast.domain.units import format_amount
    from gpucast.report.tables import scenario_text

    console.print(simulation_header(result, request), highlight=False, markup=False)

    def cell(value: float, fmt: str | Callable[[float], str]) -> str:
        # a run that never finishes has no duration or final cost: say so, never "inf"
        if not math.isfinite(value):
            return "never"
        return fmt(value) if callable(fmt) else f"{value:{fmt}}"

    def mean(value: float, half: float, fmt: str | Callable[[float], str]) -> str:
        # the Monte Carlo's own noise: no CI where it cannot be estimated (a run never ends)
        if not math.isfinite(half):
            return cell(value, fmt)
        # below the last digit shown: "<0.01", not a "0.00" that reads as no noise at all
        unit = 10.0 ** -int(fmt[1:-1]) if isinstance(fmt, str) else 0.0
        shown = f"<{unit:{fmt}}" if 0 < half < 0.5 * unit else cell(half, fmt)
        return f"{cell(value, fmt)} +- {shown}"

    def row(label: str, s: Summary, fmt: str | Callable[[float], str]) -> str:
        return (
            f"  {label:<12} mean {mean(s.mean, s.mean_ci95_half, fmt)}  "
            f"median {cell(s.median, fmt)}  p10 {cell(s.p10, fmt)}  p90 {cell(s.p90, fmt)}"
        )

    scenario = result.scenario
    any_spot = any(w.spot for w in scenario.workers) or (scenario.ps_spot and scenario.ps_count)
    blocks = (("transient", result.transient), ("on-demand", result.on_demand))
    # all on demand: the transient runs are the on-demand ones; show them once
    for name, stats in blocks if any_spot else blocks[1:]:
        console.print(f"[bold]{name}[/bold] ({stats.runs} runs; mean +- its 95% CI)")
        console.print(row("hours", stats.summary_of(stats.duration_s / 3600.0), ".2f"))
        console.print(row("cost US$", stats.summary_of(stats.final_cost_usd), ".2f"))
        gpu_s = stats.final_gpu_s
        if gpu_s is not None:  # billed: capacity gaps are not GPU-hours
            console.print(row("GPU-hours", stats.summary_of(gpu_s / 3600.0), format_amount))
        console.print(row("revocations", stats.summary_of(stats.revocations.astype(float)), ".2f"))
        if stats.stratified:
            d, usd = stats.duration_s / 3600.0, stats.final_cost_usd
            hours = stats.central(d)
            time = (
                f"{mean(hours, stats.central_ci95_half(d), '.2f')} h"
                if math.isfinite(hours)
                else "never (runs that do not finish)"
            )
            central_usd = stats.central(usd)
            cost = (
                f"US$ {mean(central_usd, stats.central_ci95_half(usd), '.2f')}"
                if math.isfinite(central_usd)
                else "no final cost"
            )
            console.print(
                f"  at the central step time (what plan train shows): mean {time}, {cost} "
                "(95% CI); the rows above spread over the step time's interval"
            )
        if stats.p_miss_deadline is not None:
            console.print(f"  P(miss deadline) {stats.p_miss_deadline:.1%}")
        if name == "transient":  # no lifetime data: each documented scenario, as plan train
            central = (
                " (time, cost, revocations: at the central step time)" if stats.stratified else ""
            )
            for scenario_name, out in result.scenarios.items():
                console.print(
                    f"  no lifetime data: {scenario_name} scenario {scenario_text(out)}{central}",
                    highlight=False, markup=False,
                )  # fmt: skip
        if stats.p_unfinished > 0:
            fix = (
                ""
                if result.scenario.replace_revoked
                else " (--no-replace: without it a replacement is launched for each "
                "revoked node, as plan train assumes)"
            )
            console.print(
                f"  P(never finishes) {stats.p_unfinished:.1%}: those runs ran out of workers{fix} "
                f"or of the {result.scenario.horizon_s / 86400:g}-day horizon; 'never' marks "
                "the statistics they make unbounded"
            )
    for key, value in result.sources.items():
        console.print(f"[dim]{escape(f'{key}: {value}')}[/dim]", highlight=False)
    for note in result.notes:
        console.print(f"[dim]note: {escape(str(note))}[/dim]", highlight=False)
    for a in result.assumptions:
        override = f" [override: {a.override}]" if a.override else ""
        console.print(
            f"[dim]{escape(f'assumption {a.name}: {a.value}{override}')}[/dim]", highlight=False
        )
    for model, text in result.validation.items():
        console.print(f"[dim]{escape(f'validated error, {model}: {text}')}[/dim]", highlight=False)


@app.command("train")
@request_command(SimulateTrainRequest, config=True)
def train(
    ctx: typer.Context,
    request: SimulateTrainRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """How long and how much a training job takes on N spot (or on-demand) GPU nodes."""
    from gpucast.app import simulate_train

    with working("simulating: fitting the inputs, running the Monte Carlo"):
        result = simulate_train(request, db=state(ctx).db_path)
    if json_out:
        emit_json(result.to_dict())
    else:
        print_simulation(result, request)

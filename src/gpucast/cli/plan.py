"""`gpucast plan train`: parse the flags into a TrainRequest, plan, render.

The flags are the fields of :class:`gpucast.domain.plan.TrainRequest`; the work happens in
:func:`gpucast.app.planning`. ``app`` is the ``plan`` group; ``plan serve`` joins it in
:mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpucast.app.llm import PlanLlmTrainRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, state, working
from gpucast.domain.plan import TrainRequest

app = typer.Typer(no_args_is_help=True, help="Plan training (and serving) clusters.")


@app.command("train")
@request_command(TrainRequest, config=True)
def train(
    ctx: typer.Context,
    request: TrainRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
    report: Path | None = typer.Option(
        None, "--report", help="Write a self-contained HTML report."
    ),
    save: Path | None = typer.Option(
        None, "--save", help="Save the plan as JSON (for gpucast report)."
    ),
) -> None:
    """The cheapest cluster that meets the deadline (or the fastest within budget), explained."""
    from gpucast.app import plan_train
    from gpucast.app.reports import save_plan, write_plan_report

    with working("planning: profiling the workload, searching the catalog, simulating spot"):
        plan = plan_train(request, db=state(ctx).db_path)
    if save is not None:
        save_plan(plan, save)
    if report is not None:
        write_plan_report(plan, report)
    if json_out:
        emit_json(plan.to_dict())
        return
    from gpucast.report.tables import print_plan

    print_plan(plan, console)
    for path, what in ((report, "report"), (save, "plan")):
        if path is not None:
            console.print(f"{what} -> {path}", highlight=False)


@app.command("llm-train")
@request_command(PlanLlmTrainRequest, config=True)
def llm_train(
    request: PlanLlmTrainRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """The cheapest GPU cluster and 3D layout that trains a published LLM in time."""
    from gpucast.app import plan_llm_train

    with working("planning: searching layouts on every GPU offer"):
        result = plan_llm_train(request)
    if json_out:
        emit_json(result.to_dict())
        return
    shown = sorted(set(result.pareto) | ({result.recommended} - {None}))  # type: ignore[arg-type]
    console.print(f"{result.model}: {result.tokens:.3g} tokens in {result.steps:,} steps; "
                  "Pareto front of time vs cost (> pick):", highlight=False)  # fmt: skip
    for i in shown:
        c = result.candidates[i]
        mark = ">" if i == result.recommended else " "
        console.print(
            f"{mark} {c.provider}/{c.region} {c.nodes}x {c.instance_type} ({c.gpus} {c.gpu}, "
            f"{c.network}): {c.time_s / 3600:.1f} h, ${c.cost_usd:,.0f}; {c.layout}; "
            f"MFU {c.mfu:.0%}, {c.memory_gib:.0f} GiB/GPU",
            highlight=False,
        )
    if result.recommended is None:
        console.print("no row meets the deadline and the budget", highlight=False)
    for name, value in result.assumptions.items():
        console.print(f"  assumption {name}: {value}", highlight=False)

"""`gpucast plan train`: parse the flags into a TrainRequest, plan, render.

The flags are the fields of :class:`gpucast.domain.plan.TrainRequest`; the work happens in
:func:`gpucast.app.planning`. ``app`` is the ``plan`` group; ``plan serve`` joins it in
:mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpucast.app.embeddings import PlanEmbeddingsRequest
from gpucast.app.llm_plan import PlanLlmTrainRequest
from gpucast.app.placement import PlanPlacementRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import (
    JSON_OPTION_HELP,
    console,
    emit_json,
    print_warnings,
    state,
    working,
)
from gpucast.domain.plan import TrainRequest
from gpucast.domain.units import format_ratio

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
    csv: Path | None = typer.Option(
        None, "--csv", help="Write every shown candidate as one CSV row (all columns)."
    ),
    limit: int = typer.Option(
        20, "--limit", help="Rows in the table (the Pareto front and the pick are always shown)."
    ),
    columns: str | None = typer.Option(
        None,
        "--columns",
        help="Table columns, comma-separated: where, instance, gpus, market, strategy, "
        "precision, batch, time, p90, p-meet, cost, gpu-hours, energy (kWh), carbon (kg CO2e; "
        "or co2), bound, help, or all \\[default: all but energy and carbon on a terminal of "
        "200+ columns or a pipe, fewer on a narrower one; energy (and carbon) added for "
        "--objective energy (carbon)].",
    ),
) -> None:
    """The cheapest cluster that meets the deadline (or the fastest within budget), explained."""
    from gpucast.app import plan_train
    from gpucast.app.reports import save_plan, write_plan_report
    from gpucast.domain.errors import InvalidSpecError
    from gpucast.report.tables import plan_columns, print_plan
    from gpucast.store.files import refuse_overwriting_inputs, write_csv_atomic

    if limit < 1:
        raise InvalidSpecError("limit", "must be >= 1", got=limit, fix="e.g. --limit 20")
    shown = plan_columns(
        None if columns is None else columns.split(","), console.width, request.objective
    )
    inputs = [request.profile_file, request.offers_file]
    for path, flag in ((report, "report"), (save, "save"), (csv, "csv")):
        refuse_overwriting_inputs(path, inputs, field=flag)
    with working("planning: profiling the workload, searching the catalog, simulating spot"):
        plan = plan_train(request, db=state(ctx).db_path)
    if save is not None:
        save_plan(plan, save)
    if report is not None:
        write_plan_report(plan, report)
    if csv is not None:
        write_csv_atomic(plan.to_frame(), csv, field="csv")
    if json_out:
        emit_json(plan.to_dict())
        return
    print_plan(plan, console, limit=limit, columns=shown)
    for path, what in ((report, "report"), (save, "plan"), (csv, "candidates")):
        if path is not None:
            console.print(f"{what} -> {path}", highlight=False, markup=False)


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
    console.print(
        f"{result.model}: {result.tokens:.3g} tokens in {result.steps:,} steps; Pareto front "
        "of time vs cost (> pick):",
        highlight=False,
        markup=False,
    )
    for i in result.shown():
        mark = ">" if i == result.recommended else " "
        console.print(f"{mark} {result.candidates[i].text()}", highlight=False, markup=False)
    for line in result.verdict():
        console.print(line, highlight=False, markup=False)
    for name, value in result.assumptions.items():
        console.print(f"  assumption {name}: {value}", highlight=False, markup=False)


@app.command("embeddings")
@request_command(PlanEmbeddingsRequest, config=True)
def embeddings(
    request: PlanEmbeddingsRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Shard a recommendation model's embedding tables over GPUs (data-parallel, table-,
    row-, column-wise, tiered over HBM / DRAM / SSD, a hierarchical parameter server across
    nodes): memory per GPU, step time, the pick."""
    from gpucast.app import plan_embeddings

    result = plan_embeddings(request)
    print_warnings(result.warnings)
    if json_out:
        emit_json(result.to_dict())
        return
    console.print(
        f"{result.model} on {result.hardware.gpus} x {result.gpu}, global batch "
        f"{result.global_batch:,}:",
        highlight=False,
        markup=False,
    )
    for c in result.plans:
        mark = ">" if c is result.best else " "
        hit = "" if c.hit_rate is None else f", UVM hit rate {c.hit_rate:.0%}"
        if c.tier_shares is not None and (c.tier_shares[2] > 0 or c.ps_network_s > 0):
            hbm, dram, ssd = c.tier_shares
            hit = (
                f", lookups HBM {hbm:.1%} / DRAM {dram:.1%} / SSD {ssd:.1%}"
                f" (SSD {c.ssd_bytes_per_node / 2**30:,.0f} GiB/node, {c.ssd_s * 1e3:.1f} ms)"
            )
            if c.ps_network_s:
                hit = (
                    f", distinct rows pulled from DRAM {dram:.1%} / SSD {ssd:.1%}, pull/push "
                    f"{c.ps_network_s * 1e3:.2f} ms over the NICs"
                )
        console.print(
            f"{mark} {c.name:<15} {c.step_time_s * 1e3:9.2f} ms/step  "
            f"{max(c.hbm_bytes_per_gpu) / 2**30:6.1f} GiB/GPU"
            + ("" if c.feasible else f"  does not fit: {c.reason}")
            + hit,
            highlight=False,
            markup=False,
        )
    cost = result.usd_per_million_samples
    console.print(
        f"  {result.explanation()}; {result.samples_per_s:,.0f} samples/s"
        + ("" if cost is None else f", ${cost:.4f} per million samples")
        + ("" if result.dense_priced else " (embeddings only: dense part not priced)"),
        highlight=False,
        markup=False,
    )
    console.print(
        f"  priced as dense weights the step would take {result.dense_priced_step_s:.3g} s "
        f"({format_ratio(result.dense_priced_step_s / result.best.step_time_s)})",
        highlight=False,
        markup=False,
    )
    console.print(f"  validated: {result.validation.text()}", highlight=False, markup=False)
    for name, value in result.assumptions.items():
        console.print(f"  assumption {name}: {value}", highlight=False, markup=False)


def _bw(value: float) -> str:
    return "-" if value == float("inf") else f"{value:.1f} GB/s"


@app.command("placement")
@request_command(PlanPlacementRequest)
def placement(
    request: PlanPlacementRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Which GPUs of a shared server a job should get (topology-aware vs first-fit)."""
    from gpucast.app import plan_placement

    result = plan_placement(request)
    if json_out:
        emit_json(result.to_dict())
        return
    console.print(
        f"{result.topology}: {result.gpus} of the free {','.join(result.free)} "
        f"(links: {result.source})",
        highlight=False,
        markup=False,
    )
    for c in result.candidates:
        mark = ">" if c.gpus == result.mapa.gpus else " "
        console.print(
            f"{mark} {','.join(c.gpus)}: all-reduce {_bw(c.bandwidth_gb_per_s)}, "
            f"cuts {c.fragmentation:.0%} of the free links, score {c.score:.3f}",
            highlight=False,
            markup=False,
        )
    f = result.first_fit
    console.print(
        f"first-fit would take {','.join(f.gpus)}: all-reduce {_bw(f.bandwidth_gb_per_s)}, "
        f"cuts {f.fragmentation:.0%}",
        highlight=False,
        markup=False,
    )
    for q in result.queue:
        console.print(
            f"queue of {q.jobs} jobs, {q.policy}: {q.jobs_per_hour:.2f} jobs/h, makespan "
            f"{q.makespan_s / 3600:.2f} h, mean completion {q.mean_completion_s / 3600:.2f} h, "
            "mean all-reduce "
            + (
                "-"
                if q.mean_allreduce_gb_per_s is None
                else f"{q.mean_allreduce_gb_per_s:.1f} GB/s"
            ),
            highlight=False,
            markup=False,
        )
    if result.throughput_ratio is not None:
        console.print(
            f"topology-aware / first-fit throughput: {result.throughput_ratio:.3f}",
            highlight=False,
            markup=False,
        )
    for name, value in result.assumptions.items():
        console.print(f"  assumption {name}: {value}", highlight=False, markup=False)

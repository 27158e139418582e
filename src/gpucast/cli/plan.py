"""`gpucast plan train`: parse the flags into a TrainRequest, plan, render.

The flags are the fields of :class:`gpucast.domain.plan.TrainRequest`; the work happens in
:func:`gpucast.app.planning`. ``app`` is the ``plan`` group; ``plan serve`` joins it in
:mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpucast.app.embeddings import PlanEmbeddingsRequest
from gpucast.app.llm_plan import PlanLlmTrainRequest
from gpucast.app.placement import PlanPlacementRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import (
    JSON_OPTION_HELP,
    check_outputs,
    console,
    emit_json,
    print_warnings,
    state,
    working,
)
from gpucast.domain.plan import TrainRequest
from gpucast.domain.units import format_ms_sig, format_ratio, format_sig

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Plan training (and serving) clusters."
)


def _report_option() -> Any:
    return typer.Option(None, "--report", help="Write a self-contained HTML report.")


def _save_option() -> Any:
    return typer.Option(None, "--save", help="Save the plan as JSON (for gpucast report).")


def _csv_option(rows: str) -> Any:
    return typer.Option(None, "--csv", help=f"Write {rows} as one CSV row (all columns).")


def _write_outputs(plan: Any, outputs: dict[str, Path | None]) -> None:
    """``--save`` (JSON), ``--report`` (HTML) and ``--csv`` (every candidate) of a training
    plan (``plan_train``'s or ``plan_llm_train``'s), each written atomically."""
    from gpucast.app.reports import save_plan, write_plan_report
    from gpucast.store.files import write_csv_atomic

    if outputs["save"] is not None:
        save_plan(plan, outputs["save"], field="save")
    if outputs["report"] is not None:
        write_plan_report(plan, outputs["report"], field="report")
    if outputs["csv"] is not None:
        write_csv_atomic(plan.to_frame(), outputs["csv"], field="csv")


def _say_outputs(outputs: dict[str, Path | None]) -> None:
    for flag, what in (("report", "report"), ("save", "plan"), ("csv", "candidates")):
        if outputs[flag] is not None:
            console.print(f"{what} -> {outputs[flag]}", highlight=False, markup=False)


@app.command("train")
@request_command(TrainRequest, config=True)
def train(
    ctx: typer.Context,
    request: TrainRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
    report: Path | None = _report_option(),
    save: Path | None = _save_option(),
    csv: Path | None = _csv_option("every shown candidate"),
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
    from gpucast.plan.pareto import check_row_limit
    from gpucast.report.tables import plan_columns, print_plan

    check_row_limit(limit)
    shown = plan_columns(
        None if columns is None else columns.split(","), console.width, request.objective
    )
    outputs = {"report": report, "save": save, "csv": csv}
    check_outputs(outputs, [request.profile_file, request.offers_file])
    with working("planning: profiling the workload, searching the catalog, simulating spot"):
        plan = plan_train(request, db=state(ctx).db_path)
    _write_outputs(plan, outputs)
    if json_out:
        emit_json(plan.to_dict())
        return
    print_plan(plan, console, limit=limit, columns=shown)
    _say_outputs(outputs)


@app.command("llm-train")
@request_command(PlanLlmTrainRequest, config=True)
def llm_train(
    request: PlanLlmTrainRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
    report: Path | None = _report_option(),
    save: Path | None = _save_option(),
    csv: Path | None = _csv_option("every row evaluated (every offer at every node count)"),
    limit: int | None = typer.Option(
        None,
        "--limit",
        help="Rows shown, as plan train's: the Pareto front and the pick always, the cheapest "
        "other rows up to N \\[default: the front and the pick].",
    ),
) -> None:
    """The cheapest GPU cluster and 3D layout that trains a published LLM in time."""
    from gpucast.app import plan_llm_train
    from gpucast.plan.pareto import check_row_limit

    check_row_limit(limit)
    outputs = {"report": report, "save": save, "csv": csv}
    check_outputs(
        outputs, [request.offers_file, *([Path(request.cluster)] if request.cluster else [])]
    )
    with working("planning: searching layouts on every GPU offer"):
        result = plan_llm_train(request)
    _write_outputs(result, outputs)
    if json_out:
        emit_json(result.to_dict())
        return
    header, *lines = result.table_lines(limit)
    console.print(header, highlight=False, markup=False)
    for line in lines:  # one line a row (the terminal wraps it)
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    for line in result.verdict():
        console.print(line, highlight=False, markup=False)
    for name, value in result.assumptions.items():
        console.print(f"  assumption {name}: {value}", highlight=False, markup=False)
    _say_outputs(outputs)


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
        + ("" if cost is None else f", ${format_sig(cost, 2, max_decimals=8)} per million samples")
        + ("" if result.dense_priced else " (embeddings only: dense part not priced)"),
        highlight=False,
        markup=False,
    )
    console.print(
        f"  priced as dense weights the step would take "
        f"{format_ms_sig(result.dense_priced_step_s)} ms "
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
@request_command(PlanPlacementRequest, config=True)
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

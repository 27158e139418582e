"""`gpucast runs list|show|export|delete|import`: browse, export, prune and merge the store.

The flags are the fields of the requests in :mod:`gpucast.app.runs` and
:mod:`gpucast.app.runs_edit`; the work happens in their verbs. This module renders (a stored
measurement with :mod:`gpucast.cli.measure`'s table).
"""

from __future__ import annotations

import json

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from gpucast.app.runs import RunsExportRequest, RunsListRequest, RunsListResult, RunsShowRequest
from gpucast.app.runs_edit import RunsDeleteRequest, RunsImportRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import (
    JSON_OPTION_HELP,
    console,
    emit_json,
    err_console,
    say_new_store,
    state,
)
from gpucast.cli.measure import measurement_table, print_warnings
from gpucast.domain.units import count_of, format_seconds

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="List, show, export, delete and import stored measurements.",
)


def runs_table(result: RunsListResult) -> Table:
    from gpucast.store.campaigns import DISTRIBUTED_KIND
    from gpucast.store.coldstart import COLDSTART_KIND

    runs, total = result.runs, result.total
    table = Table(title=f"{len(runs)} of {count_of(total, 'run')}", title_justify="left")
    for column, justify in (
        ("id", "right"),
        ("kind", "left"),
        ("workload", "left"),
        ("mode", "left"),
        ("batch", "right"),
        ("precision", "left"),
        ("device", "left"),
        ("median", "right"),
        ("±CI of mean", "right"),
        ("samples/s (batch/mean)", "right"),
        ("created (UTC)", "left"),
        ("host", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for r in runs:
        table.add_row(
            str(r.id),
            r.kind,
            escape(r.workload),
            r.mode or "-",
            str(r.batch_size),
            r.precision,
            "-" if r.device is None else r.device + (f" ({r.gpu_name})" if r.gpu_name else ""),
            # a cold start's row holds its one total, not a median of samples
            format_seconds(r.median_s) + (" total" if r.kind == COLDSTART_KIND else ""),
            "-" if r.ci_halfwidth_rel is None else f"{r.ci_halfwidth_rel:.1%}",
            "-" if r.samples_per_s is None else f"{r.samples_per_s:,.1f}",
            r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            escape(r.host or "-"),
        )
    if any(r.kind == DISTRIBUTED_KIND for r in runs):  # QA 38 C #22
        table.caption = (
            "distributed rows: batch is per worker; samples/s is the whole run's, the sum over "
            "workers of each one's batch / its own mean step (not batch / the run's mean step)"
        )
        table.caption_justify = "left"
    return table


@app.command("list")
@request_command(RunsListRequest)
def list_runs(
    ctx: typer.Context,
    request: RunsListRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """List stored runs, newest first."""
    from gpucast.app import runs_list

    result = runs_list(request, db=state(ctx).db_path)
    if as_json:
        emit_json(result.to_dict())
    elif not result.store_exists:
        err_console.print(
            f"no store at {escape(result.store)} yet, so no runs; add one with "
            "`gpucast measure train WORKLOAD`",
            highlight=False,
        )
    elif not result.runs:
        err_console.print(
            f"no runs match in {escape(result.store)}"
            if request.kind or request.workload
            else f"no runs stored yet in {escape(result.store)}; add one with "
            "`gpucast measure train WORKLOAD`",
            highlight=False,
        )
    else:
        console.print(runs_table(result))


@app.command("show")
@request_command(RunsShowRequest)
def show(
    ctx: typer.Context,
    request: RunsShowRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Show one stored run in full."""
    from gpucast.app import runs_show

    run = runs_show(request, db=state(ctx).db_path)
    if as_json:
        emit_json(run.to_dict())
        return
    if run.kind == "program":
        from gpucast.cli.program import print_program

        print_program(run.result, title=f"run {run.id}: program {escape(run.summary.workload)}")
        return
    if run.kind == "measurement":
        m = run.measurement()
        console.print(measurement_table(m, prefix=f"run {run.id}: "))
        print_warnings(m)
        return
    s = run.summary
    console.print(
        f"[bold]run {run.id}[/bold]: {run.kind} of {escape(s.workload)} · batch {s.batch_size} · "
        f"{s.precision} · {s.created_at.isoformat(timespec='seconds')}",
        highlight=False,
    )
    text = json.dumps(run.result, indent=2)
    if console.is_terminal:
        console.print(Syntax(text, "json", word_wrap=True))
    else:  # piped: the JSON as is, not padded to the console's width
        console.print(text, markup=False, highlight=False, soft_wrap=True)


@app.command("export")
@request_command(RunsExportRequest)
def export(
    ctx: typer.Context,
    request: RunsExportRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Export the runs table (summary columns and the full JSON) to CSV or Parquet."""
    from gpucast.app import runs_export

    result = runs_export(request, db=state(ctx).db_path)
    if as_json:
        emit_json(result.to_dict())
    else:
        err_console.print(
            f"wrote {count_of(result.count, 'run')} to {escape(str(result.out))} ({result.format})",
            highlight=False,
        )
        for warning in result.warnings:
            err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)


@app.command("delete")
@request_command(RunsDeleteRequest)
def delete(
    ctx: typer.Context,
    request: RunsDeleteRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Delete stored runs (all or, if an id is unknown, none), with their operator traces."""
    from gpucast.app import runs_delete

    result = runs_delete(request, db=state(ctx).db_path)
    if as_json:
        emit_json(result.to_dict())
        return
    console.print(
        f"deleted {count_of(len(result.deleted), 'run')} from {escape(result.store)}:",
        highlight=False,
    )
    for d in result.deleted:
        also = " and its operator trace" if d.kernel_trace else ""
        if d.campaign_point is not None:
            campaign, point = d.campaign_point
            also += (
                f"; campaign {escape(campaign)} point {escape(point)} is pending again "
                "(gpucast campaign run measures it anew)"
            )
        console.print(f"  run {d.id}: {d.kind} of {escape(d.workload)}{also}", highlight=False)


@app.command("import")
@request_command(RunsImportRequest)
def import_(
    ctx: typer.Context,
    request: RunsImportRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Add the runs of a `runs export` file (CSV or Parquet) under new ids, skipping those
    already stored."""
    from gpucast.app import runs_import

    result = runs_import(request, db=state(ctx).db_path)
    say_new_store(result.new_store)
    if as_json:
        emit_json(result.to_dict())
        return
    console.print(
        f"imported {count_of(result.imported, 'run')} from {escape(str(result.path))} into "
        f"{escape(result.store)}; skipped {result.skipped} already stored",
        highlight=False,
    )
    for old, new in result.mapping:
        where = "is already stored here (skipped)" if new is None else f"-> run {new} here"
        console.print(f"  exported run {old} {where}", highlight=False)
    for note in result.notes:
        err_console.print(f"note: {escape(note)}", highlight=False)

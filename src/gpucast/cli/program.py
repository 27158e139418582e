"""`gpucast measure cmd -- PROGRAM ARGS`: measure any program, render its profile.

The flags are the fields of :class:`gpucast.app.program.MeasureCmdRequest`; the work happens
in :func:`gpucast.app.program.measure_cmd`. The command joins the ``measure`` group in
:mod:`gpucast.cli.verbs`. Everything after ``--`` is the program's (``measure cmd --repeats 3
-- gzip -k f``); without ``--`` an option of the program would be read as gpucast's.
``runs show`` reuses :func:`program_table`.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from gpucast.app.program import MeasureCmdRequest, PredictCmdRequest, PredictCmdResult
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, err_console, state
from gpucast.cli.measure import progress_line
from gpucast.domain.units import count_of, format_seconds


def program_table(result: dict[str, Any], *, title: str | None = None) -> Table:
    """A Rich table of a stored program run (``MeasureCmdResult.to_dict()`` or a stored
    run's result): :func:`gpucast.report.program.program_rows`, as the runs report shows
    them, a failure in red and the bottleneck in bold."""
    from gpucast.report.program import program_rows

    name = escape(str(result["name"]))
    cores = result.get("cores") or []
    pinned = f"pinned to CPUs {','.join(str(c) for c in cores)}" if cores else "not pinned"
    table = Table(
        title=title or f"program {name} · {count_of(result['n_cores'], 'core')} · {pinned}",
        show_header=False,
        title_justify="left",
    )
    table.add_column("what", style="bold")
    table.add_column("value")
    for what, value in program_rows(result):
        text = escape(value)
        if what == "status" and value != "ok":
            text = text.replace("failed", "[red]failed[/red]", 1)
        elif what == "bound by":
            head, _, rest = text.partition(" ")
            text = f"[bold]{head}[/bold] {rest}"
        table.add_row(what, text)
    return table


def print_program(result: dict[str, Any], *, title: str | None = None) -> None:
    console.print(program_table(result, title=title))
    for warning in result.get("warnings", ()):
        console.print(f"[yellow]warning:[/yellow] {escape(str(warning))}", highlight=False)


@request_command(MeasureCmdRequest)
def command(
    ctx: typer.Context,
    request: MeasureCmdRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Run PROGRAM (any command) several times, time it, sample its CPU, memory, disk,
    network and GPU use, and store it: gpucast measure cmd --repeats 5 -- gzip -k -f data."""
    from gpucast.app import measure_cmd
    from gpucast.cli._common import say_new_store

    with progress_line(f"cmd {request.label}") as show:
        result = measure_cmd(request, db=state(ctx).db_path, on_progress=show)
    say_new_store(result.new_store)
    if as_json:
        emit_json(result.to_dict())
        return
    print_program(result.to_dict())
    if result.run_id is not None:
        err_console.print(
            f"saved as run {result.run_id} in {escape(str(result.db))}", highlight=False
        )


@request_command(PredictCmdRequest)
def predict_command(
    ctx: typer.Context,
    request: PredictCmdRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict a measured program's run time and cost per unit of work on the catalog's CPU
    instance types (x86 and Arm), from its measured bottleneck mix."""
    from gpucast.app import predict_cmd

    result = predict_cmd(request, db=state(ctx).db_path)
    if as_json:
        emit_json(result.to_dict())
        return
    print_prediction(result)


def print_prediction(result: PredictCmdResult) -> None:
    unit = escape(result.work_unit)
    measured = Table(title=f"measured: {escape(result.program)}", title_justify="left")
    for column in ("run", "machine", "median run", "dedicated", "bound by", "thread demand"):
        measured.add_column(column)
    for m in result.measured:
        measured.add_row(
            str(m["run_id"]),
            escape(str(m["machine"]["name"])),
            format_seconds(m["median_s"]),
            format_seconds(m.get("dedicated_median_s")),
            f"{m['bound_by']} ("
            + ", ".join(f"{k} {v:.0%}" for k, v in m["shares"].items() if v >= 0.005)
            + ")",
            f"{m['thread_demand']:.2g}",
        )
    console.print(measured)
    # one unit of work: "items" (a metric's name) is priced "$ per item"
    one = unit[:-1] if len(unit) > 3 and unit.endswith("s") and not unit.endswith("ss") else unit
    table = Table(
        title=f"predicted, cheapest per {one} first"
        + (f" · fitted thread demand {result.thread_demand:.3g}" if result.thread_demand else ""),
        title_justify="left",
    )
    for column in ("instance", "arch", "vCPUs", "$/h", "run time", f"{unit}/s", f"$ per {one}"):
        table.add_column(column, justify="left" if column in ("instance", "arch") else "right")
    for p in result.predictions:
        d = p.to_dict()
        table.add_row(
            escape(d["instance_type"]),
            d["arch"],
            str(d["vcpus"]),
            f"{d['on_demand_usd_per_hour']:.4g}",
            format_seconds(d["run_time_s"]),
            f"{d['work_per_s']:,.4g}",
            f"{d['usd_per_unit']:.3g}",
        )
    console.print(table)
    for a in result.assumptions:
        console.print(f"[dim]assumption:[/dim] {escape(a.name)}: {escape(a.text())}")
    v = result.validation
    console.print(
        f"[dim]validated error:[/dim] {escape(str(v['error'] or 'not validated'))}"
        + (f" ({escape(str(v['command']))})" if v.get("command") else ""),
        highlight=False,
    )

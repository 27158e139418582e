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
from gpucast.cli.measure import format_seconds, progress_line
from gpucast.domain.units import count_of


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def program_table(result: dict[str, Any], *, title: str | None = None) -> Table:
    """A Rich table of a stored program run (``MeasureCmdResult.to_dict()`` or a stored
    run's result): timing, work metric, machine, then the resource profile."""
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
    table.add_row("command", escape(" ".join(result["command"]))[:200])
    status = result["status"]
    table.add_row(
        "status",
        "ok" if status == "ok" else f"[red]failed[/red]: {escape(str(result.get('failure')))}",
    )
    table.add_row("median run", format_seconds(result.get("median_s")))
    dedicated = result.get("dedicated_median_s")
    if dedicated is not None:
        table.add_row(
            "dedicated-equivalent",
            f"{format_seconds(dedicated)} median (the wall time less the "
            f"{result.get('contention_share') or 0.0:.0%} other tasks on this machine took)",
        )
    table.add_row("mean run", format_seconds(result.get("mean_s")))
    ci = result.get("ci_halfwidth_rel")
    table.add_row(
        "95% CI of mean",
        "-" if ci is None else f"±{ci:.1%} (target ±{result['target_ci']:.0%})",
    )
    table.add_row("p5 / p95", f"{format_seconds(result.get('p5_s'))} / "
                  f"{format_seconds(result.get('p95_s'))}")  # fmt: skip
    runs = result["runs"]
    n_warm = sum(1 for r in runs if r["warmup"])
    table.add_row(
        "runs", f"{result['n_samples']} measured, {n_warm} warm-up · stop: {result['stop_reason']}"
    )
    if result.get("metric_pattern"):
        value = result.get("metric_median")
        table.add_row(
            "work metric",
            f"{escape(str(result['metric_name']))} = "
            + ("-" if value is None else f"{value:,.4g}")
            + (" (a rate)" if result.get("metric_is_rate") else " per run"),
        )
    work = result.get("work_per_s")
    if work is not None:
        table.add_row("work rate", f"{work:,.4g} {escape(str(result['work_unit']))}/s")
    env = result["environment"]
    table.add_row(
        "host",
        f"{escape(str(env['host']))} · {escape(str(env['cpu_model']))} · {env['cpu_cores']} CPUs",
    )
    profile = result.get("profile")
    if profile:
        shares = profile["shares"]
        table.add_row(
            "bound by",
            f"[bold]{escape(str(profile['bound_by']))}[/bold] ("
            + ", ".join(f"{k} {v:.0%}" for k, v in shares.items() if v >= 0.005)
            + " of the time)",
        )
        table.add_row(
            "phases",
            escape(
                " → ".join(
                    f"{p['bound_by']} {p['start_s']:.1f}-{p['end_s']:.1f} s"
                    for p in profile["phases"][:8]
                )
                + (" …" if len(profile["phases"]) > 8 else "")
            ),
        )
        table.add_row(
            "CPU (cores)",
            f"{profile['cpu_cores_mean']:.2f} mean, {profile['cpu_cores_peak']:.2f} peak · "
            f"{profile['parallelism']:.2f} when busy · burstiness (CV) "
            f"{profile['burstiness']:.2f} · waiting for a CPU {profile['cpu_wait_share']:.0%}",
        )
        table.add_row(
            "memory (RSS)",
            f"{_bytes(profile['rss_mean_bytes'])} mean, {_bytes(profile['rss_peak_bytes'])} peak",
        )
        table.add_row(
            "I/O",
            f"{_bytes(profile['io_mean_bytes_per_s'])}/s mean, "
            f"{_bytes(profile['io_peak_bytes_per_s'])}/s peak",
        )
        if profile.get("gpu_util_mean_pct") is not None:
            table.add_row("GPU utilisation", f"{profile['gpu_util_mean_pct']:.0f}% mean")
    failed = next((r for r in runs if r["status"] != "ok"), None)
    if failed is not None and failed["stderr_tail"]:
        table.add_row("stderr tail", escape("\n".join(failed["stderr_tail"][-5:])))
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

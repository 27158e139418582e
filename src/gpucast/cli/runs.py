"""`gpucast runs list|show|export`: browse and export the measurement store."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table

from gpucast.cli._common import console, emit_json, err_console
from gpucast.cli.measure import db_path_for, format_seconds, measurement_table, print_warnings
from gpucast.domain.errors import InvalidSpecError

app = typer.Typer(no_args_is_help=True, help="List, show and export stored measurements.")


@app.command("list")
def list_runs(
    ctx: typer.Context,
    kind: str | None = typer.Option(None, "--kind", help="measurement or profile."),
    workload: str | None = typer.Option(None, "--workload", help="Only this workload."),
    limit: int = typer.Option(50, "--limit", help="At most this many runs, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List stored runs, newest first."""
    from gpucast.store import Store

    if limit < 1:
        raise InvalidSpecError("--limit", "must be >= 1", got=limit)
    path = db_path_for(ctx)
    if not path.exists():
        runs, total = [], 0
    else:
        with Store(path) as store:
            runs = store.list_runs(kind=kind, workload=workload, limit=limit)
            total = store.count_runs(kind=kind, workload=workload)
    if as_json:
        emit_json({"runs": [r.to_dict() for r in runs], "total": total})
        return
    if not runs:
        err_console.print("no runs stored yet; add one with `gpucast measure train WORKLOAD`")
        return
    table = Table(title=f"{len(runs)} of {total} runs", title_justify="left")
    for column, justify in (
        ("id", "right"),
        ("kind", "left"),
        ("workload", "left"),
        ("mode", "left"),
        ("batch", "right"),
        ("precision", "left"),
        ("device", "left"),
        ("median", "right"),
        ("±CI", "right"),
        ("samples/s", "right"),
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
            format_seconds(r.median_s),
            "-" if r.ci_halfwidth_rel is None else f"{r.ci_halfwidth_rel:.1%}",
            "-" if r.samples_per_s is None else f"{r.samples_per_s:,.1f}",
            r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            escape(r.host or "-"),
        )
    console.print(table)


@app.command("show")
def show(
    ctx: typer.Context,
    run_id: int = typer.Argument(..., help="A run id from `gpucast runs list`."),
    as_json: bool = typer.Option(False, "--json", help="Print the stored run as JSON."),
) -> None:
    """Show one stored run in full."""
    from gpucast.store import Store

    with Store(db_path_for(ctx)).open(create=False) as store:
        run = store.get_run(run_id)
    if as_json:
        emit_json(run.to_dict())
        return
    if run.kind == "measurement":
        m = run.measurement()
        console.print(measurement_table(m, title=f"run {run.id}: {m.mode} {escape(m.spec.name)}"))
        print_warnings(m)
        return
    s = run.summary
    console.print(
        f"[bold]run {run.id}[/bold]: {run.kind} of {escape(s.workload)} · batch {s.batch_size} · "
        f"{s.precision} · {s.created_at.isoformat(timespec='seconds')}",
        highlight=False,
    )
    console.print(Syntax(json.dumps(run.result, indent=2), "json", word_wrap=True))


@app.command("export")
def export(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", help="File to write (replaced atomically)."),
    format: str | None = typer.Option(
        None, "--format", help="csv or parquet (default: from the --out suffix, else csv)."
    ),
    kind: str | None = typer.Option(None, "--kind", help="Only runs of this kind."),
    workload: str | None = typer.Option(None, "--workload", help="Only this workload."),
) -> None:
    """Export the runs table (summary columns and the full JSON) to CSV or Parquet."""
    from gpucast.store import Store

    chosen = format or ("parquet" if out.suffix.lower() in (".parquet", ".pq") else "csv")
    with Store(db_path_for(ctx)).open(create=False) as store:
        count = store.export(out, chosen, kind=kind, workload=workload)
    err_console.print(f"wrote {count} runs to {escape(str(out))} ({chosen})", highlight=False)

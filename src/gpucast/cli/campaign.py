"""`gpucast campaign run|status`: resumable measurement sweeps from a YAML file."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from gpucast.cli._common import console, emit_json, err_console, state

app = typer.Typer(no_args_is_help=True, help="Run measurement sweeps that survive being killed.")


def _db_path(ctx: typer.Context) -> Path:
    from gpucast.store import default_db_path

    return state(ctx).db_path or default_db_path()


class _StopOnSignal:
    """SIGTERM (spot revocation notice) and SIGINT set a flag the campaign polls."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: int | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signum
        self.event.set()

    def __enter__(self) -> _StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


@app.command("run")
def run(
    ctx: typer.Context,
    sweep_file: Path = typer.Argument(..., help="The sweep YAML (see gpucast.measure.campaign)."),
    backend: str = typer.Option("local", "--backend", help="local, or ray (one task per point)."),
    address: str | None = typer.Option(
        None, "--address", help="Ray cluster address (ray://host:10001 or auto); ray only."
    ),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="Run the points that failed before again."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the final status as JSON."),
) -> None:
    """Run every point of SWEEP_FILE not done yet, storing each result as it completes.

    Killed (even with SIGKILL), run it again to finish the rest: no completed point is lost
    or repeated. SIGTERM stops within seconds, keeps what is done and exits 0.
    """
    from gpucast.domain.errors import InvalidSpecError
    from gpucast.measure.campaign import BACKENDS, campaign_status, load_sweep, run_campaign

    if backend not in BACKENDS:
        raise InvalidSpecError("--backend", f"must be one of {', '.join(BACKENDS)}", got=backend)
    if address is not None and backend != "ray":
        raise InvalidSpecError(
            "--address", "only applies to --backend ray", fix="add --backend ray"
        )
    sweep = load_sweep(sweep_file)  # every check before anything runs
    db = _db_path(ctx)
    n_points = len(sweep.points())
    with (
        _StopOnSignal() as stopper,
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[current]}"),
            console=err_console,
            disable=not err_console.is_terminal,
        ) as bar,
    ):
        task = bar.add_task(sweep.name, total=n_points, failed=0, current="")

        def show(p: Any) -> None:
            bar.update(
                task,
                total=p.total,
                completed=p.done + p.failed,
                failed=p.failed,
                current=escape(p.current or ""),
            )

        result = run_campaign(
            sweep,
            db,
            sweep_path=sweep_file,
            backend=backend,
            address=address,
            retry_failed=retry_failed,
            should_stop=stopper.event.is_set,
            on_progress=show,
        )
    status = campaign_status(db, result.campaign_id)
    if as_json:
        emit_json(status)
    else:
        _print_status(status)
    if stopper.signal == signal.SIGINT:
        raise typer.Exit(130)
    if result.status == "incomplete":
        err_console.print(
            f"{result.progress.failed} point(s) failed; rerun with --retry-failed", highlight=False
        )
        raise typer.Exit(1)


@app.command("status")
def status(
    ctx: typer.Context,
    sweep_file: Path | None = typer.Argument(None, help="The sweep YAML (or use --campaign)."),
    campaign: str | None = typer.Option(None, "--campaign", help="A campaign id (its name)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Show a campaign's done / running / failed / pending points and the errors of failures."""
    from gpucast.domain.errors import InvalidInputError
    from gpucast.measure.campaign import campaign_status, load_sweep

    if (sweep_file is None) == (campaign is None):
        raise InvalidInputError(
            "give a sweep file or --campaign ID (one of them)",
            fix="e.g. gpucast campaign status sweep.yaml",
        )
    campaign_id = campaign if campaign is not None else load_sweep(sweep_file).name  # type: ignore[arg-type]
    info = campaign_status(_db_path(ctx), campaign_id)
    if as_json:
        emit_json(info)
    else:
        _print_status(info)


def _print_status(info: dict[str, Any]) -> None:
    summary = Table(
        title=f"campaign {escape(info['campaign'])}: {info['status']}", title_justify="left"
    )
    for column in ("total", "done", "running", "failed", "pending"):
        summary.add_column(column, justify="right")
    summary.add_row(*(str(info[c]) for c in ("total", "done", "running", "failed", "pending")))
    console.print(summary)
    failed = [p for p in info["points"] if p["status"] == "failed"]
    if failed:
        table = Table(title="failed points", title_justify="left")
        table.add_column("point")
        table.add_column("attempts", justify="right")
        table.add_column("error")
        for p in failed:
            table.add_row(escape(p["key"]), str(p["attempts"]), escape(p["error"] or ""))
        console.print(table)
    if info["resumable"]:
        console.print(
            "resumable: run `gpucast campaign run` on the same sweep to finish it"
            + (" (--retry-failed to retry failures)" if failed else ""),
            highlight=False,
        )

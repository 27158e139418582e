"""`gpucast campaign run|status`: resumable measurement sweeps from a YAML file.

The flags are the fields of the requests in :mod:`gpucast.app.campaign`; the work happens in
its verbs. This module turns SIGTERM (a spot revocation notice) and SIGINT into the verb's
``should_stop`` and draws its progress.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from gpucast.app.campaign import CampaignRunRequest, CampaignStatus, CampaignStatusRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, err_console, state
from gpucast.domain.campaign import CampaignProgress
from gpucast.domain.units import count_of

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Run measurement sweeps that survive being killed.",
)


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
@request_command(CampaignRunRequest)
def run(
    ctx: typer.Context,
    request: CampaignRunRequest,
    as_json: bool = typer.Option(False, "--json", help="Print the final status as JSON."),
) -> None:
    """Run every point of SWEEP_FILE not done yet, storing each result as it completes.

    Killed (even with SIGKILL), run it again to finish the rest: no completed point is lost
    or repeated. SIGTERM stops within seconds, keeps what is done and exits 0.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from gpucast.app import campaign_run
    from gpucast.cli._common import say_new_store

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
        task = bar.add_task(escape(request.sweep_file.stem), total=None, failed=0, current="")

        def show(p: CampaignProgress) -> None:
            bar.update(
                task,
                total=p.total,
                completed=p.done + p.failed,
                failed=p.failed,
                current=escape(p.current or ""),
            )

        result = campaign_run(
            request, db=state(ctx).db_path, should_stop=stopper.event.is_set, on_progress=show
        )
    say_new_store(result.new_store)
    if as_json:
        emit_json(result.to_dict())
    else:
        print_status(result.campaign)
    if stopper.signal == signal.SIGINT:
        raise typer.Exit(130)
    if result.status == "incomplete":
        err_console.print(
            f"{count_of(result.progress.failed, 'point')} failed; rerun with --retry-failed",
            highlight=False,
        )
        raise typer.Exit(1)


@app.command("status")
@request_command(CampaignStatusRequest)
def status(
    ctx: typer.Context,
    request: CampaignStatusRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Show a campaign's done / running / failed / pending points and the errors of failures."""
    from gpucast.app import campaign_status

    info = campaign_status(request, db=state(ctx).db_path)
    if as_json:
        emit_json(info.to_dict())
    else:
        print_status(info)


def print_status(info: CampaignStatus) -> None:
    if info.note:
        err_console.print(f"note: {escape(info.note)}", highlight=False)
    summary = Table(title=f"campaign {escape(info.campaign)}: {info.status}", title_justify="left")
    for column in ("total", "done", "running", "failed", "pending"):
        summary.add_column(column, justify="right")
    counts = (info.total, info.done, info.running, info.failed, info.pending)
    summary.add_row(*(str(n) for n in counts))
    console.print(summary)
    failed = info.failed_points
    if failed:
        table = Table(title="failed points", title_justify="left")
        table.add_column("point")
        table.add_column("attempts", justify="right")
        table.add_column("error")
        for p in failed:
            table.add_row(escape(p["key"]), str(p["attempts"]), escape(p["error"] or ""))
        console.print(table)
    if info.resumable:
        console.print(
            "resumable: run `gpucast campaign run` on the same sweep to finish it"
            + (" (--retry-failed to retry failures)" if failed else ""),
            highlight=False,
        )

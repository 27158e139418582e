"""`gpucast report`: the self-contained HTML report of a saved plan or of stored measurements.

``gpucast report --plan saved.json --out report.html`` renders a plan saved by
``gpucast plan train --save``; ``gpucast report --runs [--workload W] --out report.html``
renders the measurements in the store (``--db``).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from gpucast.cli._common import console, state
from gpucast.domain.errors import DataFormatError, InvalidSpecError


def command(
    ctx: typer.Context,
    plan: Path | None = typer.Option(
        None, "--plan", help="Plan JSON from gpucast plan train --save."
    ),
    runs: bool = typer.Option(False, "--runs", help="Report the measurements in the store."),
    workload: str | None = typer.Option(None, "--workload", help="Only runs of this workload."),
    limit: int = typer.Option(200, "--limit", help="At most this many runs (newest first)."),
    out: Path = typer.Option(..., "--out", help="HTML file to write."),
) -> None:
    """Write a self-contained HTML report (no network needed to open it)."""
    from gpucast.report.html import measurements_html, plan_html
    from gpucast.store.files import write_text_atomic

    if (plan is None) == (not runs):
        raise InvalidSpecError(
            "report", "needs exactly one source", fix="give --plan saved.json or --runs"
        )
    if plan is not None:
        from gpucast.domain.plan import TrainPlan

        if not plan.is_file():
            raise InvalidSpecError("plan", "file not found", got=str(plan), fix="check the path")
        try:
            data = json.loads(plan.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataFormatError(
                str(plan),
                f"not JSON ({exc})",
                fix="pass a file written by gpucast plan train --save",
            ) from None
        if not isinstance(data, dict):
            raise DataFormatError(str(plan), "not a saved plan (not a JSON object)")
        html = plan_html(TrainPlan.from_dict(data, path=str(plan)))
    else:
        from gpucast.store.db import default_db_path, open_store

        db = state(ctx).db_path or default_db_path()
        if not Path(db).exists():
            raise InvalidSpecError(
                "db",
                "no measurement store there",
                got=str(db),
                fix="measure first (gpucast measure train ...) or pass --db PATH",
            )
        with open_store(db) as store:
            rows = [r.to_dict() for r in store.list_runs(workload=workload, limit=limit)]
        title = f"gpucast measurements{'' if workload is None else ': ' + workload}"
        html = measurements_html(rows, title=title, source=str(db))
    write_text_atomic(out, html)
    console.print(f"report -> {out}", highlight=False)

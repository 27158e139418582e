"""`gpucast validate`: leave-one-model-out cross-validation on the published CM-DARE data.

The flags are the fields of :class:`gpucast.app.validation.ValidateRequest`; the checks run in
:func:`gpucast.app.validation.validate`. This module renders the result: Rich tables of MAPE
per model and per GPU plus the mean, or one JSON object.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from gpucast.app.validation import ValidateRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, working


def _table(title: str, records: list[dict[str, Any]], keys: list[str], unit: str) -> Table:
    table = Table(title=title, title_justify="left")
    for key in keys:
        table.add_column(key)
    table.add_column("rows", justify="right")
    table.add_column(f"measured {unit}", justify="right")
    table.add_column(f"predicted {unit}", justify="right")
    table.add_column("MAPE %", justify="right")
    table.add_column("max APE %", justify="right")
    table.add_column("interval coverage", justify="right")
    for rec in records:
        coverage = rec.get("coverage")
        table.add_row(
            *(str(rec[k]) for k in keys),
            str(rec["rows"]),
            f"{rec['actual']:.4g}",
            f"{rec['predicted']:.4g}",
            f"{rec['mape_pct']:.2f}",
            f"{rec['max_ape_pct']:.1f}",
            "-" if coverage is None else f"{coverage:.0%}",
        )
    return table


def print_validation(result: dict[str, Any]) -> None:
    """Tables and a verdict per check, from :meth:`ValidateResult.to_dict`."""
    for name, check in result["checks"].items():
        unit = check["quantity"]
        keys = [k for k in ("gpu", "model") if check["per_model"] and k in check["per_model"][0]]
        console.print(_table(f"{name}: {check['cv']}, per model", check["per_model"], keys, unit))
        if check["per_gpu"]:
            console.print(_table(f"{name}: per GPU", check["per_gpu"], ["gpu"], unit))
        worst = check["worst"]
        where = " ".join(str(worst[k]) for k in keys)
        status = "[green]met[/green]" if check["target_met"] else "[red]not met[/red]"
        console.print(
            f"[bold]{escape(name)}[/bold]: mean MAPE {check['mape_pct']:.2f}% over "
            f"{check['rows']} rows; "
            f"worst {where} {worst['mape_pct']:.1f}%; target <= {check['target_mape_pct']:g}%"
            + (" per GPU, no model > 8%" if name == "speed" else "")
            + f": {status}\n"
        )


@request_command(ValidateRequest)
def command(
    request: ValidateRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Leave-one-model-out cross-validation: MAPE per model and per GPU, plus the mean."""
    from gpucast.app import validate

    with working(f"cross-validating {request.what}"):
        result = validate(request)
    if json_out:
        emit_json(result.to_dict())
    else:
        print_validation(result.to_dict())

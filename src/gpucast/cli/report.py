"""`gpucast report`: the self-contained HTML report of a saved plan or of stored runs."""

from __future__ import annotations

import typer

from gpucast.app.reports import ReportRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, emit_result, print_warnings, state


@request_command(ReportRequest)
def command(
    ctx: typer.Context,
    request: ReportRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Write a self-contained HTML report (no network needed to open it); without --out,
    --json prints its data."""
    from gpucast.app import write_report
    from gpucast.domain.errors import InvalidSpecError

    if request.out is None and not json_out:
        raise InvalidSpecError(
            "out", "is required to write the HTML report",
            fix="give --out report.html, or --json to print the report's data",
        )  # fmt: skip
    result = write_report(request, db=state(ctx).db_path)
    print_warnings(result.warnings)
    emit_result(result.to_dict(), f"report -> {result.out}", as_json=json_out)

"""`gpucast predict kernels RUN_ID`: a ``--kernels`` run predicted operator by operator.

The flags are the fields of :class:`gpucast.app.kernels.PredictKernelsRequest`; the work
happens in :func:`gpucast.app.kernels.predict_kernels`. The command joins the ``predict``
group in :mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from gpucast.app.kernels import PredictKernelsRequest, PredictKernelsResult
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, state
from gpucast.domain.units import format_seconds


@request_command(PredictKernelsRequest)
def predict_command(
    ctx: typer.Context,
    request: PredictKernelsRequest,
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict a run measured with --kernels from its operators: a random forest of per-call
    time fitted on the store's other --kernels runs, summed per class plus the step's
    overhead, beside the measured step and the roofline."""
    from gpucast.app import predict_kernels

    result = predict_kernels(request, db=state(ctx).db_path)
    if as_json:
        emit_json(result.to_dict())
        return
    print_kernels(result)


def print_kernels(result: PredictKernelsResult) -> None:
    table = Table(
        title=f"run {result.run_id}: {escape(result.workload)} on {escape(result.device)}, "
        "per operator class",
        title_justify="left",
    )
    for column in ("class", "calls/step", "predicted", "measured (profiled)"):
        table.add_column(column, justify="left" if column == "class" else "right")
    for row in result.classes:
        table.add_row(
            row.op_class,
            f"{row.calls_per_step:.0f}",
            format_seconds(row.predicted_s),
            format_seconds(row.measured_s),
        )
    table.add_row("operators", "", format_seconds(result.operator_time_s), "")
    label = "step overhead (capped)" if result.overhead_capped else "step overhead (fitted)"
    table.add_row(label, "", f"{result.overhead_s * 1e3:+.3g} ms", "")
    table.add_row(
        "[b]step[/b]", "", f"[b]{format_seconds(result.step_time_s)}[/b]",
        format_seconds(result.measured_step_s),
    )  # fmt: skip
    console.print(table)
    if result.error_pct is not None:
        console.print(f"forest vs measured step: {result.error_pct:+.1f}%", highlight=False)
    console.print(
        f"roofline of the same operators (calibrated on the training runs): "
        f"{format_seconds(result.roofline_step_s)}",
        highlight=False,
    )
    if result.energy_j is not None:
        measured = result.measured_operator_energy_j
        console.print(
            f"energy: {result.energy_j:.4g} J per step "
            f"({result.energy_j / max(result.step_time_s, 1e-12):.4g} W), operators "
            f"{result.operator_energy_j or 0.0:.4g} J"
            + ("" if measured is None else f" (measured {measured:.4g} J)"),
            highlight=False,
        )
    elif result.energy_note:
        console.print(f"[dim]{escape(result.energy_note)}[/dim]", highlight=False)
    console.print(
        f"[dim]trained on:[/dim] runs {', '.join(map(str, result.train_runs))} "
        f"({escape(', '.join(result.train_workloads))}); device specs: "
        f"{escape(result.device_source)}",
        highlight=False,
    )
    for a in result.assumptions:
        console.print(f"[dim]assumption:[/dim] {escape(a.name)}: {escape(a.text())}")
    v = result.validation
    console.print(
        f"[dim]validated error:[/dim] {escape(str(v['error'] or 'not validated'))}"
        + (f" ({escape(str(v['command']))})" if v.get("command") else ""),
        highlight=False,
    )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)

"""`gpucast measure infer-curve`: parse the flags, measure, render.

The flags are the fields of :class:`gpucast.app.curves.InferCurveRequest`; the work happens
in :func:`gpucast.app.curves.measure_infer_curve`. The command joins the ``measure`` group in
:mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from gpucast.app.curves import InferCurveRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, say_new_store, state, working
from gpucast.domain.workload import configured_name

if TYPE_CHECKING:
    from gpucast.app.curves import InferCurveResult


@request_command(InferCurveRequest)
def command(
    ctx: typer.Context,
    request: InferCurveRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Latency/throughput of WORKLOAD's inference step over batch sizes (and precisions),
    stored; with --colocate, the slowdown of running models at once on one device."""
    from gpucast.app import measure_infer_curve

    points = len(request.batch_sizes) * len(request.precisions)
    name = configured_name(request.workload, request.workload_options)
    with working(f"measuring {points} inference points of {name}"):
        result = measure_infer_curve(request, db=state(ctx).db_path)
    say_new_store(result.new_store)
    if json_out:
        emit_json(result.to_dict())
        return
    print_curves(result)


def point_warnings(points: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each measured point's warnings (a busy host, a CI target the time budget missed, a
    warm-up cut short), each text once with the batch sizes it came from, in order."""
    out: dict[str, list[int]] = {}
    for p in points:
        for text in p.get("warnings") or ():
            out.setdefault(text, []).append(p["batch_size"])
    return out


def print_curves(result: InferCurveResult) -> None:
    """Each curve point by point with its fit, then the co-location slowdowns."""
    for curve in result.curves:
        c = curve.to_dict()
        console.print(
            f"[bold]{escape(result.workload)}[/bold] inference on "
            f"{escape(str(c['device']))} ({c['precision']})",
            highlight=False,
        )
        console.print(
            "  (latency: the median step; samples/s: batch / the mean step, and ± the CI of "
            "the mean -- a skewed run shows them apart)",
            highlight=False,
        )
        for p in c["points"]:
            console.print(
                f"  batch {p['batch_size']:>4}: median {p['median_s'] * 1e3:9.3f} ms, mean "
                f"{p['mean_s'] * 1e3:9.3f} ms  {p['samples_per_s']:10.1f} samples/s  "
                f"±{p['ci_halfwidth_rel']:.1%}",
                highlight=False,
            )
        console.print(
            f"  fit: {curve.fixed_s * 1e3:.3f} ms + {curve.per_sample_s * 1e3:.4f} ms x batch"
            + (f"  (runs {c['run_ids']})" if c["run_ids"] else ""),
            highlight=False,
        )
        if c["fit"]["warning"]:
            console.print(f"  warning: {c['fit']['warning']}", highlight=False, markup=False)
        for text, batches in point_warnings(c["points"]).items():
            console.print(
                f"  warning (batch {', '.join(map(str, batches))}): {text}",
                highlight=False,
                markup=False,
            )
    if result.latency_table is not None:
        path = escape(str(result.latency_table))
        console.print(
            f"latency table: {path} (batch_size,latency_s: the medians; simulate serve "
            f"--latency-table {path})",
            highlight=False,
        )
    if result.colocation is not None:
        co = result.colocation.to_dict()
        console.print("co-location (each alone vs all at once):", highlight=False)
        for name, a, t, s in zip(
            co["workloads"], co["alone_median_s"], co["together_median_s"], co["slowdown"],
            strict=True,
        ):  # fmt: skip
            console.print(
                f"  {name}: {a * 1e3:.3f} ms alone, {t * 1e3:.3f} ms together: x{s:.2f}",
                highlight=False,
            )
        table = ", ".join(f"{x:.3g}" for x in co["slowdown_table"])
        console.print(f"  slowdown table [{table}]", highlight=False)
        console.print(  # what the entries index (QA 39 R #9)
            "  (entry n: each batch's slowdown while n batches share the device, the geometric "
            "mean above; gpucast.domain.serving.ServerSpec's colocation_slowdown in Python)",
            highlight=False,
        )

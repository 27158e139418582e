"""`gpucast simulate serverless`, `gpucast simulate kaas`, `gpucast plan serverless`,
`gpucast measure coldstart`, `gpucast predict coldstart`.

The flags are the fields of :class:`gpucast.app.serverless.SimulateServerlessRequest`,
:class:`gpucast.app.coldstart.MeasureColdstartRequest` and
:class:`~gpucast.app.coldstart.PredictColdstartRequest`; the work happens in :mod:`gpucast.app`.
The commands join the ``simulate``, ``plan``, ``measure`` and ``predict`` groups in
:mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

import math
from typing import Any

import typer
from rich.table import Table

from gpucast.app.coldstart import MeasureColdstartRequest, PredictColdstartRequest
from gpucast.app.kaas import SimulateKaasRequest
from gpucast.app.serverless import PlanServerlessRequest, SimulateServerlessRequest
from gpucast.app.serverless_text import (
    footer_lines,
    kaas_lines,
    plan_header_lines,
    plan_note_lines,
    short_unit,
    simulate_lines,
    slo_quantile,
)
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, state, working
from gpucast.domain.provenance import Validation
from gpucast.domain.units import (
    format_amount,
    format_ms,
    format_ms_against,
    format_pct_against,
)


def _say(text: str) -> None:
    console.print(text, highlight=False, markup=False)


def _footer(d: dict[str, Any]) -> None:
    for line in footer_lines(d):
        _say(line)


@request_command(SimulateServerlessRequest, config=True)
def simulate_command(
    ctx: typer.Context,
    request: SimulateServerlessRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Serverless GPU functions under a keep-alive policy: cold starts, latency, GPU-hours
    billed, warm-but-idle memory and cost (an Azure Functions trace or a generated one)."""
    from gpucast.app import simulate_serverless

    with working("simulating serverless functions"):
        result = simulate_serverless(request, db=state(ctx).db_path)
    d = result.to_dict()
    if json_out:
        emit_json(d)
        return
    for line in simulate_lines(d):
        _say(line)
    if d["invocations"] == 0:
        return
    _validated(result.validation, result.cold_start_validation, d["cold_start_measured"])
    _footer(d)


def _validated(
    validation: Validation | None, cold_start: Validation | None, measured: dict[str, str]
) -> None:
    """The keep-alive simulator's and the predicted cold start's validated errors, and the
    provenance of each measured cold start (``--coldstart-run``; both verbs)."""
    if validation is not None:
        _say(f"  validated: {validation.text()}")
    if cold_start is not None:
        which = " (the predicted models')" if measured else ""
        _say(f"  validated cold start{which}: {cold_start.text()}")
    for model, source in measured.items():
        _say(f"  measured cold start of {model}: {source}")


def _share(share: float, limit: float) -> str:
    """A share of functions as a percentage, ``-`` when no function was called."""
    return "-" if math.isnan(share) else f"{format_pct_against(share, limit)}%"


def _plan_table(d: dict[str, Any], q: str) -> Table:
    """The candidates of ``plan serverless``, one a row; the latency at the SLO percentile
    with the decimals that show which side of the SLO it is (one column when that is p50);
    ``fn met``: the share of functions meeting the SLO on their own calls (what
    ``--slo-scope functions`` judges), and, when the SLO's percentile is not p99, ``fn
    p99>SLO``: the share whose own p99 exceeds the SLO latency (the cold-start tail)."""
    from rich.markup import escape

    latency = ["p50 ms"] if q == "p50" else ["p50 ms", f"{q} ms"]
    short = short_unit(d)
    tail = [] if q == "p99" else [f"{short} p99>SLO"]
    need = d["slo_function_share"] if d["slo_scope"] == "functions" else 1.0
    table = Table(box=None, padding=(0, 0, 0, 2), show_edge=False)
    met = f"{short} met"
    for col in ("deployment", "cold", "swaps", *latency, met, *tail, "GPU-h", "US$", "SLO"):
        table.add_column(col, justify="left" if col in ("deployment", "SLO") else "right")
    for o in d["options"]:
        at_slo = format_ms_against(o["slo_latency_s"], d["slo_s"])
        p50 = [] if q == "p50" else [format_ms(o["p50_s"])]
        over = [] if q == "p99" else [_share(o["function_share_p99_over_slo"], 1e-12)]
        table.add_row(
            escape(o["name"]), f"{o['cold_starts']:,}", f"{o['swaps']:,}", *p50, at_slo,
            _share(o["function_share_meeting_slo"], need), *over,
            format_amount(o["gpu_hours"]), f"{o['cost_usd']:,.2f}",
            ("met" if o["meets_slo"] else "missed")
            + ("" if o["within_budget"] else ", over budget"),
        )  # fmt: skip
    return table


@request_command(PlanServerlessRequest, config=True)
def plan_command(
    ctx: typer.Context,
    request: PlanServerlessRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Serverless (per keep-alive policy) vs always-on GPU deployments of the same functions:
    cold starts, p50/pNN latency, GPU-hours, cost; the cheapest meeting --slo, and why."""
    from gpucast.app import plan_serverless

    with working("planning serverless vs always-on"):
        result = plan_serverless(request, db=state(ctx).db_path)
    d = result.to_dict()
    if json_out:
        emit_json(d)
        return
    for line in plan_header_lines(d):
        _say(line)
    console.print(_plan_table(d, slo_quantile(d)), highlight=False)
    for line in plan_note_lines(d):
        _say(line)
    _validated(result.validation, result.cold_start_validation, d["cold_start_measured"])
    _footer(d)


@request_command(SimulateKaasRequest, config=True)
def kaas_command(
    ctx: typer.Context,
    request: SimulateKaasRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Kernel-as-a-Service: functions as sequences of their profiled kernels sharing a GPU
    pool per kernel, vs per invocation, vs one GPU per function (latency, throughput)."""
    from gpucast.app import simulate_kaas

    with working("simulating kernel-level sharing"):
        result = simulate_kaas(request)
    d = result.to_dict()
    if json_out:
        emit_json(d)
        return
    for line in kaas_lines(d):
        _say(line)
    _say(f"  validated: {result.validation.text()}")
    _footer(d)


@request_command(MeasureColdstartRequest)
def measure_command(
    ctx: typer.Context,
    request: MeasureColdstartRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Time one cold start of WORKLOAD here, phase by phase (weights read from a file dropped
    from the page cache, copy to the device, first inference, CUDA context), and store it."""
    from gpucast.app import measure_coldstart
    from gpucast.cli._common import say_new_store

    with working(f"measuring a cold start of {request.workload}"):
        result = measure_coldstart(request, db=state(ctx).db_path)
    say_new_store(result.new_store)
    d = result.to_dict()
    if json_out:
        emit_json(d)
        return
    ctx_s = d["cuda_context_s"]
    _say(
        f"cold start of {d['workload']} on {d['device']}: {d['weight_bytes'] / 1e6:,.1f} MB in "
        f"{d['parameter_tensors']} tensors"
    )
    _say(f"  CUDA context      {'-' if ctx_s is None else format(ctx_s, '.3f') + ' s'}")
    _say(
        f"  weights read      {d['weight_read_s']:.3f} s "
        f"({d['weight_bytes'] / max(d['weight_read_s'], 1e-12) / 1e9:.2f} GB/s"
        f"{', page cache dropped' if d['cache_dropped'] else ', page cache NOT dropped'})"
    )
    copy = d["to_device_s"]
    on_cpu = str(d["device"]).startswith("cpu")
    _say(f"  to device         {'- (on the CPU: no copy)' if on_cpu else f'{copy:.3f} s'}")
    _say(
        f"  first inference   {d['first_inference_s'] * 1e3:.2f} ms (steady "
        f"{d['steady_inference_s'] * 1e3:.2f} ms, "
        f"first call +{d['first_call_overhead_s'] * 1e3:.2f} ms)"
    )
    _say(f"  total             {d['total_s']:.3f} s")
    if d["run_id"] is not None:
        _say(f"  stored as run {d['run_id']} in {d['db']}")


@request_command(PredictColdstartRequest)
def predict_command(
    ctx: typer.Context,
    request: PredictColdstartRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict a cold start of WORKLOAD phase by phase: container, CUDA context, weights =
    bytes / min(storage, the instance's EBS link, network, PCIe), first inference (without
    --gpu: this machine's CPU, its rates measured first)."""
    from gpucast.app import predict_coldstart

    with working(f"predicting a cold start of {request.workload}"):
        result = predict_coldstart(request)
    d = result.to_dict()
    if json_out:
        emit_json(d)
        return
    _say(f"cold start of {d['workload']} on {d['device']}: {d['total_s']:.3f} s")
    _say(f"  container         {d['container_s']:.3f} s")
    _say(f"  CUDA context      {d['cuda_context_s']:.3f} s")
    size = d["weight_bytes"]
    size_text = f"{size / 1e9:,.1f} GB" if size >= 1e9 else f"{size / 1e6:,.1f} MB"
    _say(
        f"  weights           {d['weight_load_s']:.3f} s ({size_text} at "
        f"{d['load_gb_per_s']:.3g} GB/s, bound by {d['bound_by']})"
    )
    _say(f"  first inference   {d['first_inference_s'] * 1e3:.2f} ms")
    _footer(d)
    _say(f"  validated: {result.validation.text()}")

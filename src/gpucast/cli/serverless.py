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
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, state, working
from gpucast.domain.units import format_ms_against, format_pct_against


def _say(text: str) -> None:
    console.print(text, highlight=False, markup=False)


def _hours(d: dict[str, Any]) -> str:
    """The trace's length, and its warm-up when it has one: ``24 h`` or ``24 h (the first 1 h
    a warm-up, not counted)``."""
    text = f"{d['horizon_s'] / 3600:g} h"
    if d["warmup_s"] > 0:
        text += f" (the first {d['warmup_s'] / 3600:g} h a warm-up, not counted)"
    return text


def _units(d: dict[str, Any]) -> str:
    """``3 functions`` or ``2 apps (5 functions)``: what the verb simulated, by its unit."""

    def count(n: int, what: str) -> str:
        return f"{n:,} {what}{'' if n == 1 else 's'}"

    if d["unit"] == "app":
        return f"{count(d['units'], 'app')} ({count(d['functions'], 'function')})"
    return count(d["units"], "function")


def _apps_line(d: dict[str, Any]) -> str | None:
    """The trace's applications and their memory (the trace summary), None without apps."""
    apps = d["apps"]
    if apps is None:
        return None
    text = (
        f"  apps {apps['apps']:,} of {apps['functions']:,} functions ("
        f"{apps['functions_per_app_mean']:.2f} per app, at most {apps['functions_per_app_max']:,};"
        f" {apps['single_function_app_share']:.0%} with one), keep-alive per {d['unit']}"
    )
    memory = apps["memory"]
    if memory is None:
        return text + "; no app memory file"
    mb = memory["average_allocated_mb"]
    if mb is None:
        return text + f"; {memory['file']} has no row for them"
    return text + (
        f"; memory ({memory['file']}, {memory['apps_with_row']:,} apps) AverageAllocatedMb "
        f"p50 {mb['p50']:,.0f} MB, p95 {mb['p95']:,.0f} MB, p99 {mb['p99']:,.0f} MB, max "
        f"{mb['max']:,.0f} MB, total {mb['total']:,.0f} MB"
    )


def _footer(d: dict[str, Any]) -> None:
    """The result's sources, assumptions and warnings (where it has them), one a line."""
    for key, value in d["sources"].items():
        _say(f"  {key}: {value}")
    for key, value in d["assumptions"].items():
        _say(f"  assumption {key}: {value}")
    for w in d.get("warnings", ()):
        _say(f"  warning: {w}")


@request_command(SimulateServerlessRequest)
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
    lat = d["latency_s"]
    _say(f"{_units(d)} on {d['gpu']}, {_hours(d)}, {d['policy_text']}")
    _say(f"  arrivals {d['arrival_process']}")
    apps = _apps_line(d)
    if apps is not None:
        _say(apps)
    if d["invocations"] == 0:
        _say("  no invocations in the trace: nothing to simulate")
        return
    _say(
        f"  invocations {d['invocations']:,}, cold starts {d['cold_starts']:,} "
        f"({d['cold_start_rate']:.3%}; 75th percentile of {d['unit']}s "
        f"{d['app_cold_start_pct_p75']:.1f}%)"
    )
    _say(f"  latency p50 {lat['p50'] * 1e3:.1f} ms, p99 {lat['p99'] * 1e3:.1f} ms")
    other = (
        f"execution alone {d['execution_gpu_hours']:,.2f}"
        if d["billing"] == "instance"
        else f"loaded instances {d['instance_gpu_hours']:,.2f}"
    )
    _say(
        f"  GPU-hours billed {d['billed_gpu_hours']:,.2f} ({d['billing']} billing; {other}), "
        f"US$ {d['cost_usd']:,.2f} at {d['price_usd_per_hour']:.4g} US$/h"
    )
    own = d["warm_idle_app_memory_mb_hours"]
    _say(
        f"  warm but idle {d['warm_idle_gib_hours']:,.1f} GiB-hours = "
        f"{d['warm_idle_gpu_hours']:,.2f} GPU-hours of memory (US$ {d['warm_idle_cost_usd']:,.2f})"
        + ("" if own is None else f"; the apps' own memory {own:,.0f} MB-hours")
    )
    pool = d["pool"]
    if pool is not None:
        p99 = (
            f"p99 {pool['latency_s']['p99'] * 1e3:.1f} ms"
            if pool["latency_modelled"]
            else f"p99 not modelled (overloaded in {pool['overloaded_bins']:,} minutes: needs "
            f"{pool['gpus_needed']:,} GPUs)"
        )
        _say(
            f"  pool of {pool['gpus']} GPUs (Torpor-style swapping): {pool['swaps']:,} swaps "
            f"({pool['swap_rate']:.3%}), {p99}, {pool['gpu_hours']:,.1f} GPU-hours "
            f"(US$ {pool['cost_usd']:,.2f}; execution alone {pool['busy_gpu_hours']:,.1f})"
        )
    for m in d["models"]:
        _say(f"  model {m['source']}")
    _footer(d)


def _short(d: dict[str, Any]) -> str:
    """The unit in a column's name: ``fn`` (functions) or ``app``."""
    return "app" if d["unit"] == "app" else "fn"


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
    short = _short(d)
    tail = [] if q == "p99" else [f"{short} p99>SLO"]
    need = d["slo_function_share"] if d["slo_scope"] == "functions" else 1.0
    table = Table(box=None, padding=(0, 0, 0, 2), show_edge=False)
    met = f"{short} met"
    for col in ("deployment", "cold", "swaps", *latency, met, *tail, "GPU-h", "US$", "SLO"):
        table.add_column(col, justify="left" if col in ("deployment", "SLO") else "right")
    for o in d["options"]:
        at_slo = format_ms_against(o["slo_latency_s"], d["slo_s"])
        p50 = [] if q == "p50" else [f"{o['p50_s'] * 1e3:,.1f}"]
        over = [] if q == "p99" else [_share(o["function_share_p99_over_slo"], 1e-12)]
        table.add_row(
            escape(o["name"]), f"{o['cold_starts']:,}", f"{o['swaps']:,}", *p50, at_slo,
            _share(o["function_share_meeting_slo"], need), *over,
            f"{o['gpu_hours']:,.2f}", f"{o['cost_usd']:,.2f}",
            "met" if o["meets_slo"] else "missed",
        )  # fmt: skip
    return table


@request_command(PlanServerlessRequest)
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
    q = f"p{d['slo_percentile']:g}"
    unit, short = d["unit"], _short(d)
    scope = (
        f"for >= {d['slo_function_share'] * 100:g}% of the {d['functions_invoked']:,} invoked "
        f"{unit}s, each on its own calls"
        if d["slo_scope"] == "functions"
        else "over all invocations"
    )
    _say(
        f"{_units(d)} on {d['gpu']}, {_hours(d)}, "
        f"{d['invocations']:,} invocations; SLO {q} <= {d['slo_s'] * 1e3:g} ms {scope} "
        f"(peak {d['peak_gpus']} GPU(s), memory of all models {d['memory_gpus']} GPU(s))"
    )
    _say(f"  arrivals {d['arrival_process']}")
    apps = _apps_line(d)
    if apps is not None:
        _say(apps)
    console.print(_plan_table(d, q), highlight=False)
    tail = "" if q == "p99" else f"; {short} p99>SLO: those whose own p99 exceeds the SLO latency"
    _say(
        f"  {short} met: share of invoked {unit}s whose own {q} over their own calls is within "
        f"the SLO{tail}"
    )
    few = d["function_share_too_few_calls"]
    if not math.isnan(few) and few > 0:
        share = format_pct_against(few, 1e-12)
        _say(
            f"  {share}% of the invoked {unit}s are called so rarely that their first call, "
            f"cold under every keep-alive policy, is their own {q} (--warmup 1h: not counted)"
            if d["warmup_s"] == 0
            else f"  {share}% of the invoked {unit}s are called so rarely after the warm-up "
            f"that one cold call is their own {q} (whether they get one is the policy's doing)"
        )
    _say(f"  choice: {d['reason']}")
    _say(f"  validated: {result.validation.text()}")
    _footer(d)


@request_command(SimulateKaasRequest)
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
    _say(f"{', '.join(d['models'])} on {d['gpu']}")
    _say(f"  {'sharing':<12}{'GPUs':>6}{'calls':>9}{'kernels':>10}{'p50 ms':>10}{'p99 ms':>10}"
         f"{'calls/s':>10}{'util':>7}")  # fmt: skip
    for name, r in d["sharing"].items():
        lat = r["latency_s"]
        _say(
            f"  {name:<12}{r['gpus']:>6}{r['invocations']:>9,}{r['kernels']:>10,}"
            f"{lat['p50'] * 1e3:>10.2f}{lat['p99'] * 1e3:>10.2f}{r['throughput_per_s']:>10.1f}"
            f"{r['utilisation']:>7.0%}"
        )
        for model, f in r["per_function"].items():
            _say(f"    {model:<20} p50 {f['p50_s'] * 1e3:.2f} ms, p99 {f['p99_s'] * 1e3:.2f} ms")
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

    with working(f"measuring a cold start of {request.workload}"):
        result = measure_coldstart(request, db=state(ctx).db_path)
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
    _say(f"  to device         {d['to_device_s']:.3f} s")
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
    bytes / min(storage, network, PCIe), first inference (without --gpu: this machine's CPU,
    its rates measured first)."""
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
    _say(
        f"  weights           {d['weight_load_s']:.3f} s ({d['weight_bytes'] / 1e6:,.1f} MB at "
        f"{d['load_gbs']:.3g} GB/s, bound by {d['bound_by']})"
    )
    _say(f"  first inference   {d['first_inference_s'] * 1e3:.2f} ms")
    _footer(d)
    _say(f"  validated: {result.validation.text()}")

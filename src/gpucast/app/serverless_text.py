"""The text of the serverless verbs' results, from their ``to_dict()``: what ``gpucast
simulate serverless`` and ``gpucast plan serverless`` print above and below their tables, so a
Python user gets the same lines (e.g. ``simulate_lines(result.to_dict())``) and the CLI only
prints them.
"""

from __future__ import annotations

import math
from typing import Any

from gpucast.domain.units import (
    count_of,
    format_amount,
    format_duration,
    format_ms,
    format_ms_against,
    format_pct_against,
    format_slo_latency,
    percent_text,
)


def latency_text(seconds: float) -> str:
    """A latency in ms under 10 s (two significant digits kept: ``0.020 ms``), beyond it as a
    duration (``10 min``, not ``600,000.0 ms``: QA 37 V #12); NaN ``- ms``, inf ``inf ms``."""
    if math.isfinite(seconds) and seconds >= 10.0:
        return format_duration(seconds)
    return f"{format_ms(seconds)} ms"


def hours_text(d: dict[str, Any]) -> str:
    """The trace's length, and its warm-up when it has one, as the house formats durations
    (:func:`~gpucast.domain.units.format_duration`): ``1 day``, ``59 min`` or ``1 day (the
    first 1 h a warm-up, not counted)``."""
    text = format_duration(d["horizon_s"])
    if d["warmup_s"] > 0:
        text += f" (the first {format_duration(d['warmup_s'])} a warm-up, not counted)"
    return text


def units_text(d: dict[str, Any]) -> str:
    """``3 functions`` or ``2 apps (5 functions)``: what the verb simulated, by its unit."""

    def count(n: int, what: str) -> str:
        return f"{n:,} {what}{'' if n == 1 else 's'}"

    if d["unit"] == "app":
        return f"{count(d['units'], 'app')} ({count(d['functions'], 'function')})"
    return count(d["units"], "function")


def default_text(d: dict[str, Any], flag: str) -> str:
    """`` (--gpu default)`` when the result's value of ``flag`` is its default (the result's
    ``defaults``), else ``""``: a default that sets a result is shown as one."""
    return f" ({flag} default)" if flag in d.get("defaults", ()) else ""


def short_unit(d: dict[str, Any]) -> str:
    """The unit in a column's name: ``fn`` (functions) or ``app``."""
    return "app" if d["unit"] == "app" else "fn"


def apps_line(d: dict[str, Any]) -> str | None:
    """The trace's applications and their memory (the trace summary), None without apps."""
    apps = d["apps"]
    if apps is None:
        return None
    text = (
        f"  apps {apps['apps']:,} of {count_of(apps['functions'], 'function')} ("
        f"{apps['functions_per_app_mean']:.2f} per app, at most {apps['functions_per_app_max']:,};"
        f" {apps['single_function_app_share']:.0%} with one), keep-alive per {d['unit']}"
    )
    memory = apps["memory"]
    if memory is None:
        return text + "; no app memory file"
    mb = memory["average_allocated_mb"]
    if mb is None:
        return text + f"; {memory['file']} has no row for them"
    rows = count_of(memory["apps_with_row"], "app")
    return text + (
        f"; memory ({memory['file']}, {rows}) AverageAllocatedMb "
        f"p50 {mb['p50']:,.0f} MB, p95 {mb['p95']:,.0f} MB, p99 {mb['p99']:,.0f} MB, max "
        f"{mb['max']:,.0f} MB, total {mb['total']:,.0f} MB"
    )


def _slo_lines(slo: dict[str, Any] | None, rejected: int = 0) -> list[str]:
    """``--slo`` of simulate serverless: met or missed, the latency at its percentile and the
    share of invocations within it (of the requests, ``rejected`` ones beyond the context
    window counted as misses, where there are any; none without --slo)."""
    if slo is None:
        return []
    calls = "requests (the rejected as misses)" if rejected else "invocations"
    q, limit = f"p{slo['percentile']:g}", format_slo_latency(slo["latency_s"])
    verdict = {True: "met", False: "missed", None: "-"}[slo["met"]]
    return [
        f"  SLO {q} <= {limit} {verdict}: {q} "
        f"{format_ms_against(slo['latency_at_percentile_s'], slo['latency_s'])} ms, "
        f"{format_pct_against(slo['share_within'], slo['percentile'] / 100)}% of {calls} "
        f"within {limit} (cold starts included)"
    ]


def rejected_lines(d: dict[str, Any]) -> list[str]:
    """The requests beyond the context window (an LLM trace), where there are any: rejected
    at arrival, no invocation, misses in every percentile and SLO share."""
    n = d.get("rejected_beyond_context", 0)
    if not n:
        return []
    return [
        f"  rejected: {n:,} beyond the context window (at arrival, by every deployment: not "
        "invocations, infinitely late in every latency percentile and SLO share)"
    ]


def footer_lines(d: dict[str, Any]) -> list[str]:
    """The result's sources, assumptions and warnings (where it has them), one a line."""
    lines = [f"  {key}: {value}" for key, value in d["sources"].items()]
    lines += [f"  assumption {key}: {value}" for key, value in d["assumptions"].items()]
    lines += [f"  warning: {w}" for w in d.get("warnings", ())]
    return lines


def _arrivals(d: dict[str, Any]) -> list[str]:
    apps = apps_line(d)
    return [f"  arrivals {d['arrival_process']}", *([] if apps is None else [apps])]


def simulate_lines(d: dict[str, Any]) -> list[str]:
    """``simulate serverless``'s summary: the load, cold starts, latency, GPU-hours, warm but
    idle memory, the pool and the models (no sources: :func:`footer_lines`)."""
    lines = [
        f"{units_text(d)} on {d['gpu']}{default_text(d, '--gpu')}, {hours_text(d)}, "
        f"{d['policy_text']}",
        *_arrivals(d),
    ]
    if d["invocations"] == 0:
        hint = (
            "; 45% of generated functions are invoked at most hourly: raise --synthetic or "
            "--minutes"
            if str(d["arrival_process"]).startswith("generated")
            else ""
        )
        return [*lines, f"  no invocations in the trace: nothing to simulate{hint}"]
    lat = d["latency_s"]
    other = (
        f"execution and cold starts {format_amount(d['execution_gpu_hours'])}"
        if d["billing"] == "instance"
        else f"loaded instances {format_amount(d['instance_gpu_hours'])}"
    )
    own = d["warm_idle_app_memory_mb_hours"]
    lines += [
        f"  invocations {d['invocations']:,}, cold starts {d['cold_starts']:,} "
        f"({percent_text(d['cold_start_rate'])}; 75th percentile of {d['unit']}s "
        f"{d['unit_cold_start_pct_p75']:.1f}%)",
        *rejected_lines(d),
        f"  latency p50 {latency_text(lat['p50'])}, p99 {latency_text(lat['p99'])}",
        *_slo_lines(d.get("slo"), d.get("rejected_beyond_context", 0)),
        f"  GPU-hours billed {format_amount(d['billed_gpu_hours'])} "
        f"({d['billing']} billing; {other}), "
        f"US$ {d['cost_usd']:,.2f} at {d['price_usd_per_hour']:.4g} US$/h",
        f"  warm but idle {d['warm_idle_gib_hours']:,.1f} GiB-hours = "
        f"{format_amount(d['warm_idle_gpu_hours'])} GPU-hours of memory "
        f"(US$ {d['warm_idle_cost_usd']:,.2f})"
        + ("" if own is None else f"; the apps' own memory {own:,.0f} MB-hours"),
    ]
    pool = d["pool"]
    if pool is not None:
        p99 = (
            f"p99 {latency_text(pool['latency_s']['p99'])}"
            if pool["latency_modelled"]
            else f"p99 not modelled (overloaded in {pool['overloaded_bins']:,} minutes: needs "
            f"{count_of(pool['gpus_needed'], 'GPU')})"
        )
        lines.append(
            f"  pool of {count_of(pool['gpus'], 'GPU')} (Torpor-style swapping): "
            f"{pool['swaps']:,} swaps ({percent_text(pool['swap_rate'])}, "
            f"{pool['swap_time_s']:,.1f} s), {pool['cold_starts']:,} cold starts "
            f"({pool['cold_start_time_s']:,.1f} s), {p99}, "
            f"{format_amount(pool['gpu_hours'])} GPU-hours "
            f"(US$ {pool['cost_usd']:,.2f}; "
            f"execution alone {format_amount(pool['busy_gpu_hours'])})"
        )
    return lines + [f"  {m['served_by']}: model {m['source']}" for m in d["models"]]


def slo_quantile(d: dict[str, Any]) -> str:
    """``p99``: the SLO's percentile as its columns name it."""
    return f"p{d['slo_percentile']:g}"


def plan_header_lines(d: dict[str, Any]) -> list[str]:
    """``plan serverless``'s lines above its table: the load, the SLO and its scope."""
    q = slo_quantile(d)
    scope = (
        f"for >= {d['slo_function_share'] * 100:g}% of the {d['functions_invoked']:,} invoked "
        f"{d['unit']}s, each on its own calls"
        if d["slo_scope"] == "functions"
        else "over all invocations"
    )
    sizing = (
        f"peak {count_of(d['peak_gpus'], 'GPU')}"
        if d["always_on_sizing"] == "peak minute"
        else "no always-on candidate (a warning says why)"
        if d["always_on_sizing"] == "none"
        else f"always-on {count_of(d['peak_gpus'], 'GPU')} sized as "
        f"{d['always_on_sizing']} sizes it"
    )
    return [
        f"{units_text(d)} on {d['gpu']}{default_text(d, '--gpu')}, {hours_text(d)}, "
        f"{d['invocations']:,} invocations; SLO {q} <= {format_slo_latency(d['slo_s'])}"
        f"{default_text(d, '--slo')} {scope} "
        f"({sizing}, memory of all models {count_of(d['memory_gpus'], 'GPU')})",
        *_arrivals(d),
        *rejected_lines(d),
    ]


def plan_note_lines(d: dict[str, Any]) -> list[str]:
    """``plan serverless``'s lines below its table: what its share columns mean, the rarely
    called functions, the choice (then the validation and :func:`footer_lines`)."""
    q, unit, short = slo_quantile(d), d["unit"], short_unit(d)
    tail = "" if q == "p99" else f"; {short} p99>SLO: those whose own p99 exceeds the SLO latency"
    lines = [
        f"  {short} met: share of invoked {unit}s whose own {q} over their own calls is within "
        f"the SLO{tail}"
    ]
    few = d["function_share_too_few_calls"]
    if not math.isnan(few) and few > 0:
        share = format_pct_against(few, 1e-12)
        lines.append(
            f"  {share}% of the invoked {unit}s are called so rarely that their first call, "
            f"cold under every keep-alive policy, is their own {q} (--warmup 1h: not counted)"
            if d["warmup_s"] == 0
            else f"  {share}% of the invoked {unit}s are called so rarely after the warm-up "
            f"that one cold call is their own {q} (whether they get one is the policy's doing)"
        )
    if d["always_on_sizing"] != "peak minute":
        lines += [f"  {o['name']}: {o['detail']}" for o in d["options"] if o["kind"] == "always-on"]
    return [*lines, f"  choice: {d['reason']}"]


def kaas_lines(d: dict[str, Any]) -> list[str]:
    """``simulate kaas``'s table: per way of sharing its GPUs, calls, the kernels they ran
    (the same in every row), the units dispatched one by one (kernels under KaaS, calls
    otherwise), latency, calls/s offered and served, utilisation; then per function. An
    overloaded row's percentiles are marked ``*`` (a warning says why)."""
    lines = [
        f"{', '.join(d['models'])}{default_text(d, '--models')} on {d['gpu']}"
        f"{default_text(d, '--gpu')}",
        f"  arrivals {d['arrival_process']}",
    ]
    lines.append(
        f"  {'sharing':<11}{'GPUs':>5}{'calls':>9}{'kernels':>11}{'dispatches':>11}"
        f"{'p50 ms':>11}{'p99 ms':>11}{'offered/s':>10}{'served/s':>10}{'util':>6}"
    )

    def ms(value: float, mark: str) -> str:
        return format_ms(value, decimals=2) + mark

    for name, r in d["sharing"].items():
        lat, mark = r["latency_s"], "" if r["latency_steady"] else "*"
        lines.append(
            f"  {name:<11}{r['gpus']:>5}{r['invocations']:>9,}{r['kernels']:>11,}"
            f"{r['dispatches']:>11,}{ms(lat['p50'], mark):>11}{ms(lat['p99'], mark):>11}"
            f"{r['offered_per_s']:>10.1f}{r['throughput_per_s']:>10.1f}{r['utilisation']:>6.0%}"
        )
        for model, f in r["per_function"].items():
            lines.append(
                f"    {model:<20} p50 {ms(f['p50_s'], mark)} ms, p99 {ms(f['p99_s'], mark)} ms"
            )
    return lines

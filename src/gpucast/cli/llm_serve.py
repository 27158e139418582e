"""`gpucast simulate serve` and `gpucast plan serve` for language models.

One command per verb serves both kinds of model: :func:`dispatch` wraps the request-level
command of :mod:`gpucast.cli.serve` and adds the options of the LLM requests
(:class:`gpucast.app.llm_serve.SimulateLlmServeRequest`, :class:`PlanLlmServeRequest`) that it
lacks. ``--model NAME`` (or the config file's ``model``) of ``catalog/data/llm_models.csv``
goes to :func:`gpucast.app.simulate_llm_serve` / :func:`gpucast.app.plan_llm_serve`, any other
model to the wrapped command; an option of the other kind is one clear error. Registered in
:mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from gpucast.app._llm_load import closed_loop_text
from gpucast.app.llm_serve import (
    PlanLlmServeRequest,
    SimulateLlmServeRequest,
    cost_text,
    requests_text,
)
from gpucast.app.serve import language_model_values
from gpucast.cli._command import request_parameters
from gpucast.cli._common import console, emit_json, err_console, working
from gpucast.domain.options import fields_of
from gpucast.domain.units import count_of, format_latency, format_ms

if TYPE_CHECKING:
    from gpucast.app.llm_serve import PlanLlmServeResult, SimulateLlmServeResult

#: Parameters of the wrapped commands that are not request fields.
_CLI_ONLY = {"json_out", "config_file", "limit", "ctx", "report", "save"}


def _flag_of(cls: type) -> dict[str, str]:
    """Field name -> flag of a request class."""
    return {f.name: f.flag for f in fields_of(cls) if f.info.cli}


def dispatch(
    command: Callable[..., Any],
    own_cls: type,
    llm_cls: type,
    run_llm: Callable[[Any, Mapping[str, Any]], None],
) -> Callable[..., Any]:
    """``command`` (the request command of ``own_cls``) taking the options of ``llm_cls``
    too, and running ``run_llm(request, cli)`` when ``--model`` names a language model
    (``cli``: the command's own options, e.g. ``json_out``, ``limit``, ``report``, ``save``)."""
    signature = inspect.signature(command)
    own_flags = {flag: name for name, flag in _flag_of(own_cls).items()}
    llm_flags = _flag_of(llm_cls)
    extra = [p for p in request_parameters(llm_cls) if llm_flags[p.name] not in own_flags]
    llm_only = {p.name for p in extra}
    llm_help = {f.flag: f.info.help for f in fields_of(llm_cls) if f.info.cli}
    params = []
    for p in signature.parameters.values():
        flag = _flag_of(own_cls).get(p.name)
        info = p.default
        if flag in llm_help and hasattr(info, "help") and llm_help[flag] != info.help:
            info = copy.copy(info)
            info.help = f"{info.help} Language model: {llm_help[flag]}"
            p = p.replace(default=info)
        params.append(p)
    clash = llm_only & {p.name for p in params}
    if clash:  # pragma: no cover - a programming error caught at import
        raise RuntimeError(f"LLM serving options clash with {own_cls.__name__}: {clash}")
    cut = next(
        (i for i, p in enumerate(params) if p.name in ("config_file", "limit", "json_out")),
        len(params),
    )
    merged = params[:cut] + extra + params[cut:]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from gpucast.app.config import request_from

        config_file = kwargs.get("config_file")
        given = {k: v for k, v in kwargs.items() if k not in _CLI_ONLY}
        values = language_model_values(own_cls, llm_cls, given, config_file)
        if values is not None:
            request = request_from(llm_cls, values, config_file)
            run_llm(request, {k: v for k, v in kwargs.items() if k in _CLI_ONLY})
            return None
        return command(*args, **{k: v for k, v in kwargs.items() if k not in llm_only})

    wrapper.__signature__ = inspect.Signature(merged)  # type: ignore[attr-defined]
    doc = (command.__doc__ or "").strip()
    wrapper.__doc__ = (
        f"{doc}\n\nA language model of catalog/data/llm_models.csv (--model llama-3-8b) is "
        "served token by token: continuous batching, TTFT/TPOT, tokens/s (the LLM options)."
    )
    return wrapper


# -- rendering --------------------------------------------------------------------------------
def _ms(summary: dict[str, float], key: str) -> str:
    """A percentile in ms; ``inf`` (requests that never reached it: ``percentiles:`` line)."""
    value = summary.get(key)
    if value is None or math.isnan(value):
        return "- ms"
    return "inf" if math.isinf(value) else f"{format_ms(value)} ms"


def _run_simulate(request: SimulateLlmServeRequest, cli: Mapping[str, Any]) -> None:
    from gpucast.app import simulate_llm_serve

    as_json = bool(cli.get("json_out"))
    with working("simulating: token-level continuous batching"):
        result = simulate_llm_serve(request)
    for text in result.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False)
    if as_json:
        emit_json(result.to_dict())
        return
    print_llm_serving(result)


def print_llm_serving(result: SimulateLlmServeResult) -> None:
    """The run in a few lines: load, TTFT/TPOT/latency percentiles, tokens/s, cost."""
    out = result.to_dict()
    req = result.request
    console.print(
        f"[bold]{escape(req.model)}[/bold] on {escape(result.deployment)}, "
        f"{escape(req.framework)} ({result.precision})",
        highlight=False,
    )
    console.print(f"  {requests_text(out)}", highlight=False)
    for label, key in (
        ("TTFT", "ttft_s"),
        ("TPOT", "tpot_s"),
        ("ITL", "itl_s"),
        ("latency", "latency_s"),
    ):
        s = out[key]
        console.print(
            f"  {label:<8} p50 {_ms(s, 'p50')}  p90 {_ms(s, 'p90')}  p99 {_ms(s, 'p99')}",
            highlight=False,
        )
    if out["unfinished_in_percentiles"] is not None:
        console.print(f"  percentiles: {out['unfinished_in_percentiles']}", highlight=False)
    if (band := result.band_text()) is not None:
        console.print(f"  {band}", highlight=False)
    console.print(
        f"  throughput {out['throughput_rps']:.2f} req/s, {out['tokens_per_s']:.0f} output "
        f"tokens/s ({out['total_tokens_per_s']:.0f} with prompts) {result.rate_window_text()}",
        highlight=False,
    )
    if out["slo_attainment"] is not None:
        console.print(
            f"  SLO met by {out['slo_attainment']:.1%} (goodput {out['goodput_rps']:.2f} req/s)",
            highlight=False,
        )
    console.print(f"  {cost_text(out)}", highlight=False)
    if result.closed_loop is not None:
        console.print(f"  {closed_loop_text(result.closed_loop)}", highlight=False)
    if result.saturation is not None:
        from gpucast.cli._saturation import print_saturation

        print_saturation(result.saturation, probes=True)
    for line in result.instance_lines():
        console.print(f"  {line}", highlight=False)
    for key, value in {**out["sources"], **out["assumptions"]}.items():
        console.print(f"[dim]{escape(f'{key}: {value}')}[/dim]", highlight=False)
    for key, value in out["validation"].items():
        console.print(f"[dim]{escape(f'validated error, {key}: {value}')}[/dim]", highlight=False)


def _run_plan(request: PlanLlmServeRequest, cli: Mapping[str, Any]) -> None:
    from gpucast.app import plan_llm_serve
    from gpucast.cli.serve import (
        check_plan_outputs,
        say_plan_outputs,
        trace_of,
        write_plan_outputs,
    )

    report, save = cli.get("report"), cli.get("save")
    check_plan_outputs(report, save, [trace_of(request.arrivals)])
    with working("planning: simulating GPU x tp x replicas"):
        result = plan_llm_serve(request)
    for text in result.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False)
    write_plan_outputs(result, report, save)
    if cli.get("json_out"):
        emit_json(result.to_dict())
        return
    print_llm_plan(result, limit=int(cli.get("limit") or 15))
    say_plan_outputs(report, save)


def print_llm_plan(result: PlanLlmServeResult, *, limit: int = 15) -> None:
    from rich.markup import escape
    from rich.table import Table

    from gpucast.cli._common import print_more_rows
    from gpucast.plan.llm_serve import TIE_BREAK

    plan = result.plan
    req = result.request
    p = f"p{req.slo_percentile:g}"
    slo = []
    if req.slo_ttft_ms is not None:
        slo.append(f"TTFT {p} <= {req.slo_ttft_ms:g} ms")
    if req.slo_tpot_ms is not None:
        slo.append(f"TPOT {p} <= {req.slo_tpot_ms:g} ms")
    table = Table(title=f"plan serve {req.model_rate[0]}: {', '.join(slo)}")
    for col in ("#", "deployment", "US$/h", "US$/M tok", f"TTFT {p} ms", f"TPOT {p} ms", "bound"):
        table.add_column(col, justify="left" if col in ("deployment", "bound") else "right")
    pareto = set(plan.pareto)
    # the pick first, so that a --limit below the Pareto front's size never hides it
    shown = [] if plan.recommended is None else [plan.recommended]
    shown += [i for i in range(len(plan.candidates)) if i in pareto and i not in shown]
    shown += [i for i in range(len(plan.candidates)) if i not in shown]
    for i in sorted(shown[:limit]):
        c = plan.candidates[i]
        mark = ("R " if i == plan.recommended else "") + ("*" if i in pareto else "")
        ok = "" if c.meets_slo else " (misses)"
        table.add_row(
            f"{i}{mark}",
            escape(c.describe() + ok),
            f"{c.cost_usd_per_hour:.2f}",
            f"{c.cost_usd_per_million_tokens:.3f}",
            format_latency(c.ttft_s, unit=False),
            format_latency(c.tpot_s, digits=1, unit=False),
            escape(c.bound),
        )
    console.print(table)
    print_more_rows(len(plan.candidates), len(shown[:limit]))
    console.print(
        f"[dim]R = recommended (cheapest meeting the SLOs; ties go to {TIE_BREAK}), "
        "* = Pareto front of cost vs TTFT "
        f"and TPOT; {count_of(plan.simulated, 'deployment')} simulated[/dim]",
        highlight=False,
    )
    if (no_pick := plan.no_pick_text()) is not None:
        console.print(f"[yellow]{escape(no_pick)}[/yellow]", highlight=False)
    if (band := result.band_text()) is not None:
        console.print(f"  {band}", highlight=False)
    for line in plan.reason_lines():
        console.print(f"[dim]  {escape(line)}[/dim]", highlight=False)
    for key, value in result.assumptions.items():
        console.print(f"[dim]{escape(f'{key}: {value}')}[/dim]", highlight=False)
    for key, value in result.validation.items():
        console.print(f"[dim]{escape(f'validated error, {key}: {value}')}[/dim]", highlight=False)


def simulate_command() -> Callable[..., Any]:
    """``simulate serve``: the request-level command, or the LLM one."""
    from gpucast.app.serve import SimulateServeRequest
    from gpucast.cli import serve

    return dispatch(
        serve.simulate_command, SimulateServeRequest, SimulateLlmServeRequest, _run_simulate
    )


def plan_command() -> Callable[..., Any]:
    """``plan serve``: the request-level command, or the LLM one."""
    from gpucast.app.serve import PlanServeRequest
    from gpucast.cli import serve

    return dispatch(serve.plan_command, PlanServeRequest, PlanLlmServeRequest, _run_plan)

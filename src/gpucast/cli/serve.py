"""`gpucast plan serve` and `gpucast simulate serve`: parse the flags, call the app, render.

The flags are the fields of :class:`gpucast.app.serve.PlanServeRequest` and
:class:`gpucast.app.serve.SimulateServeRequest`; the work happens in
:func:`gpucast.app.serve.plan_serve` and :func:`gpucast.app.serve.simulate_serve`. The
commands join the ``plan`` and ``simulate`` groups in :mod:`gpucast.cli.verbs`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from gpucast.app.serve import PlanServeRequest, SimulateServeRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import (
    JSON_OPTION_HELP,
    check_outputs,
    console,
    emit_json,
    print_more_rows,
    print_warnings,
    working,
)
from gpucast.domain.units import count_of, format_latency, format_ms, format_share

if TYPE_CHECKING:
    from gpucast.app.mig_serve import PlanMigServeResult
    from gpucast.app.serve import PlanServeResult, SimulateServeResult


def _rps(rate: float) -> str:
    """A request rate to three significant figures (a trace's mean is 15.0911...), whole
    numbers from 100 up."""
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


def print_validation(validation: Mapping[str, str]) -> None:
    for model, text in validation.items():
        console.print(f"[dim]{escape(f'validated error, {model}: {text}')}[/dim]", highlight=False)


# -- plan serve -----------------------------------------------------------------------------
@request_command(PlanServeRequest, config=True)
def plan_command(
    request: PlanServeRequest,
    limit: int = typer.Option(15, "--limit", help="Rows in the table."),
    report: Path | None = typer.Option(
        None, "--report", help="Write a self-contained HTML report."
    ),
    save: Path | None = typer.Option(
        None, "--save", help="Save the plan as JSON (for gpucast report --plan)."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """The cheapest deployments that serve MODELs within a latency SLO, and the cost vs tail
    latency Pareto front: server type (GPU, MIG slice, CPU), count, batching, co-location.
    Serverless functions against always-on servers: `plan serve --serverless` (the same as
    `gpucast plan serverless`, whose options it takes)."""
    from gpucast.app import plan_serve
    from gpucast.app.mig_serve import PlanMigServeResult

    if request.mix and (report is not None or save is not None):
        from gpucast.domain.errors import InvalidSpecError

        raise InvalidSpecError(
            "report" if report is not None else "save",
            "is not available with --mix yet",
            fix="use --json for the whole MIG plan",
        )
    check_plan_outputs(report, save, [request.trace, trace_of(request.arrivals)])
    with working("planning: pruning server options and simulating the survivors"):
        result = plan_serve(request)
    print_warnings(result.warnings)
    if isinstance(result, PlanMigServeResult):
        if json_out:
            emit_json(result.to_dict())
        else:
            print_mig_plan(result)
        return
    write_plan_outputs(result, report, save)
    if json_out:
        emit_json(result.to_dict())
        return
    print_serve_plan(result, limit=limit)
    say_plan_outputs(report, save)


def check_plan_outputs(
    report: Path | None, save: Path | None, inputs: Iterable[Path | None]
) -> None:
    """``--report`` / ``--save``: checked before planning (:func:`check_outputs`)."""
    check_outputs({"report": report, "save": save}, inputs)


def trace_of(arrivals: str | None) -> Path | None:
    """The file of ``--arrivals trace:FILE`` (else None)."""
    if arrivals and arrivals.startswith("trace:"):
        return Path(arrivals.removeprefix("trace:"))
    return None


def write_plan_outputs(result: object, report: Path | None, save: Path | None) -> None:
    from gpucast.app.reports import save_serve_plan, write_serve_plan_report

    if save is not None:
        save_serve_plan(result, save, field="save")
    if report is not None:
        write_serve_plan_report(result, report, field="report")


def say_plan_outputs(report: Path | None, save: Path | None) -> None:
    for path, what in ((report, "report"), (save, "plan")):
        if path is not None:
            console.print(f"{what} -> {path}", highlight=False)


def print_serve_plan(result: PlanServeResult, *, limit: int = 15) -> None:
    """The plan as a Rich table (cheapest first; R recommended, * on the Pareto front)."""
    from rich.markup import escape
    from rich.table import Table

    from gpucast.plan.serve import TIE_BREAK

    plan = result.plan
    pareto = set(plan.pareto)
    p = plan.request.slo_percentile
    table = Table(
        title=f"plan serve: p{p:g} <= {plan.request.slo_s * 1e3:g} ms, "
        + ", ".join(f"{m.name} {_rps(m.rate_rps)} req/s" for m in plan.request.models),
    )
    for col in ("#", "deployment", "US$/h", "US$/M req", f"p{p:g} ms", "headroom", "bound"):
        table.add_column(col, justify="left" if col == "deployment" else "right")
    for i, c in enumerate(plan.candidates[:limit]):
        mark = ("R " if i == plan.recommended else "") + ("*" if i in pareto else "")
        table.add_row(
            f"{i}{mark}",
            escape(c.describe()),
            f"{c.cost_usd_per_hour:.3f}",
            f"{c.cost_usd_per_million:.3f}",
            format_latency(c.tail_latency_s, digits=1, unit=False),
            f"{c.headroom:.0%}",
            c.bound,
        )
    console.print(table)
    print_more_rows(len(plan.candidates), len(plan.candidates[:limit]))
    console.print(
        f"[dim]R = recommended (cheapest meeting the SLO; ties go to {TIE_BREAK}), "
        f"* = Pareto front of cost vs p{p:g}; "
        f"{plan.evaluated} configurations, {plan.simulated} simulated[/dim]",
        highlight=False,
    )
    for reason, count in sorted(plan.infeasible.items(), key=lambda kv: -kv[1]):
        console.print(f"[dim]  {count} x {escape(str(reason))}[/dim]", highlight=False)
    for key, value in plan.assumptions.items():
        console.print(f"[dim]{escape(f'{key}: {value}')}[/dim]", highlight=False)
    print_validation(result.validation)


def print_mig_plan(result: PlanMigServeResult) -> None:
    """PARIS's layouts and the baselines: GPUs, cost, capacity and the simulated runs."""
    from rich.markup import escape
    from rich.table import Table

    plan = result.plan
    models = ", ".join(
        f"{m.name} {_rps(m.rate_rps)} req/s <= {m.slo_s * 1e3:g} ms" for m in plan.models
    )
    table = Table(title=f"plan serve --mix on {plan.gpu}: {models}")
    for col in ("#", "choice", "layouts", "dispatch", "GPUs", "US$/h", "capacity req/s",
                "in SLO", "goodput req/s", "worst p99 ms"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("choice", "layouts") else "right")
    for k, o in enumerate(plan.outcomes):
        choice = plan.choice(o.choice)
        table.add_row(
            f"{k}{' R' if k == plan.recommended else ''}",
            escape(o.choice),
            escape(choice.describe()),
            o.dispatch,
            str(o.gpus),
            f"{o.cost_usd_per_hour:.2f}",
            f"{choice.capacity_rps:.0f}",
            f"{o.attainment:.1%}",
            f"{o.goodput_rps:.0f}",
            format_latency(o.worst_p99_over_slo, digits=1, unit=False),
        )
    console.print(table)
    target = f"{plan.target_attainment:.0%}"
    console.print(
        f"[dim]R = recommended: the cheapest run with >= {target} of requests within their "
        "SLO (ties: most goodput); capacity = the profile's rate within SLO[/dim]",
        highlight=False,
    )
    paris = plan.choices[0]
    for g in range(paris.gpus):
        parts = [
            f"{s.slice}[{s.model or 'idle'}{f' b{s.batch}' if s.model else ''}]"
            for s in paris.slices
            if s.gpu == g
        ]
        console.print(f"  paris GPU {g}: {escape(' + '.join(parts))}", highlight=False)
    for label, why in plan.skipped.items():
        console.print(f"[dim]{escape(f'  {label}: not planned, {why}')}[/dim]", highlight=False)
    for key, value in {**plan.notes, **result.assumptions}.items():
        console.print(f"[dim]{key}: {escape(value)}[/dim]", highlight=False)
    print_validation(result.validation)


# -- simulate serve -------------------------------------------------------------------------
@request_command(SimulateServeRequest, config=True)
def simulate_command(
    request: SimulateServeRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Latency percentiles, SLO attainment, throughput and cost of serving MODEL on GPUs."""
    from gpucast.app import simulate_serve

    with working("simulating: arrivals through dynamic batching"):
        result = simulate_serve(request)
    print_warnings(result.warnings)
    if json_out:
        emit_json(result.to_dict())
        return
    print_serving(result)


def print_serving(result: SimulateServeResult) -> None:
    """The simulated run in a few lines: load, latency percentiles, SLO, cost, servers."""
    request = result.request
    out = result.to_dict()
    lat = out["latency_s"]
    console.print(
        f"[bold]{escape(request.model)}[/bold] on {request.servers}x {escape(result.server)}, "
        f"{count_of(request.instances, 'instance')} each, {result.batching.describe()}",
        highlight=False,
    )
    console.print(
        f"  requests {out['requests']}  offered {out['offered_rps']:.1f} req/s  "
        f"throughput {out['throughput_rps']:.1f} req/s  mean batch "
        + ("n/a (no batch ran)" if (b := out["mean_batch_size"]) is None else f"{b:.2f}"),
        highlight=False,
    )
    if out["dropped"] or out["in_flight"]:
        console.print(
            f"  served {out['served']}  dropped {out['dropped']} (queue full "
            f"{out['queue_full']}, timed out {out['timeout']})  in flight at the end "
            f"{out['in_flight']}",
            highlight=False,
        )
    console.print(
        f"  latency p50 {format_ms(lat['p50'])} ms  p95 {format_ms(lat['p95'])} ms  "
        f"p99 {format_ms(lat['p99'])} ms",
        highlight=False,
    )
    if out["slo_attainment"] is not None:
        q, verdict = out["slo_percentile"], {True: "met", False: "missed", None: "-"}
        console.print(
            f"  SLO p{q:g} <= {out['slo_s'] * 1e3:g} ms {verdict[out['slo_met']]}: "
            f"{out['slo_attainment']:.1%} of requests within {out['slo_s'] * 1e3:g} ms",
            highlight=False,
        )
    per_m = out["cost_usd_per_million"]  # None (JSON) / inf where nothing was served
    console.print(
        f"  cost {out['cost_usd_per_hour']:.3f} US$/h, "  # plan serve's 3 decimals
        + (f"{per_m:.3f} US$ per million requests" if per_m is not None and math.isfinite(per_m)
           else "no request served in the run: no cost per request"),
        highlight=False,
    )  # fmt: skip
    for s in result.serving.servers:
        stages = "".join(f", {name} {format_share(u)}" for name, u in s.stages.items())
        console.print(
            f"  {s.name} #{s.replica}: busy {s.busy_fraction:.0%}, {s.requests} requests{stages}",
            highlight=False,
        )
    if result.classes:
        console.print(
            f"  scheduler {result.scheduler} (chosen at batch boundaries):", highlight=False
        )
    for c in result.classes:
        worst = "-" if c.worst_latency_s != c.worst_latency_s else f"{c.worst_latency_s * 1e3:.1f}"
        console.print(
            f"    {c.model} (priority {c.priority}, deadline {c.deadline_s * 1e3:g} ms): "
            f"{c.requests} requests, missed {c.deadline_miss_rate:.1%}, worst {worst} ms",
            highlight=False,
        )
    if result.saturation is not None:
        from gpucast.cli._saturation import print_saturation

        print_saturation(result.saturation)
    for key, value in result.sources.items():
        console.print(f"[dim]{escape(f'{key}: {value}')}[/dim]", highlight=False)
    print_validation(result.validation)

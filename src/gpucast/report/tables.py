"""Rich renderings of plans for the terminal (presentation only; the numbers come from plan/)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpucast.domain.plan import TrainPlan


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if not math.isfinite(seconds):
        return "never"
    return f"{seconds / 60:.0f}m" if seconds < 3600 else f"{seconds / 3600:.1f}h"


def _usd(value: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    return f"${value:,.2f}" if value < 100 else f"${value:,.0f}"


def _scenario(out: Mapping[str, float | None]) -> str:
    p = out.get("p_meet_deadline")
    meet = "" if p is None else f", P(meet deadline) {p:.0%}"
    time_s, cost = out.get("time_s"), out.get("cost_usd")
    return f"{_hours(time_s)}, {_usd(float('nan') if cost is None else cost)}{meet}"


def plan_table(plan: TrainPlan, *, limit: int | None = 20) -> Table:
    """The shown candidates, Pareto points marked with *, the pick with >."""
    req = plan.request
    table = Table(
        title=(
            f"{req.workload}: {plan.feasible:,} feasible of {plan.evaluated:,} configurations "
            f"({plan.simulated} spot plans simulated)"
        ),
        show_lines=False,
    )
    for col, justify in (
        ("#", "right"),
        ("where", "left"),
        ("instance", "left"),
        ("GPUs", "right"),
        ("market", "left"),
        ("strategy", "left"),
        ("batch", "right"),
        ("time [interval]", "right"),
        ("p90", "right"),
        ("P(meet)", "right"),
        ("cost", "right"),
        ("GPU-h", "right"),
        ("bound by", "left"),
        ("what would help", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    pareto = set(plan.pareto)
    order = list(range(len(plan.candidates)))
    if limit is not None and len(order) > limit:
        keep = set(plan.pareto) | {plan.recommended} if plan.recommended is not None else set()
        keep |= set(order[:limit])
        order = sorted(keep)[: max(limit, len(pareto) + 1)]
    for k in order:
        c = plan.candidates[k]
        mark = (">" if k == plan.recommended else "") + ("*" if k in pareto else "")
        strat = c.strategy + (f"x{c.ps_shards}" if c.strategy.startswith("ps") else "")
        if c.activation_checkpointing:
            strat += "+ckpt"
        p_meet = "" if c.p_meet_deadline is None else f"{c.p_meet_deadline:.0%}"
        style = "bold green" if k == plan.recommended else None
        table.add_row(
            Text(f"{mark}{k}"),
            Text(f"{c.provider}/{c.region}"),
            Text(f"{c.nodes}x {c.instance_type}"),
            Text(f"{c.gpus} {c.gpu}"),
            Text(c.market),
            Text(strat),
            Text(f"{c.per_worker_batch} ({c.global_batch:,})"),
            Text(f"{_hours(c.time_s)} [{_hours(c.time_lower_s)}, {_hours(c.time_upper_s)}]"),
            Text(_hours(c.time_p90_s)),
            Text(p_meet),
            Text(_usd(c.cost_usd)),
            Text(f"{c.gpu_hours:,.0f}"),
            Text(c.bottleneck),
            Text("; ".join(c.help)),
            style=style,
        )
    return table


def batch_choice_table(plan: TrainPlan) -> Table:
    """The global batches evaluated on the recommended hardware: goodput and its factors."""
    table = Table(title="global batch on the recommended hardware (> chosen)")
    for col in ("global batch", "per GPU", "samples/s", "efficiency", "goodput", "time", "cost"):
        table.add_column(col, justify="right")
    table.add_column("not feasible")
    for o in plan.batch_choice:
        table.add_row(
            f"{'>' if o.chosen else ''}{o.global_batch:,}",
            f"{o.per_worker_batch:,}",
            f"{o.samples_per_s:,.0f}",
            f"{o.statistical_efficiency:.2f}",
            f"{o.goodput_samples_per_s:,.0f}",
            _hours(o.time_s),
            _usd(o.cost_usd),
            o.reason,
        )
    return table


def print_plan(plan: TrainPlan, console: Console) -> None:
    """The table, the pick in one sentence, and why the rest were dropped."""
    console.print(plan_table(plan))
    best = plan.best
    if best is not None:
        extra = (
            "" if best.p_meet_deadline is None else f", P(meet deadline) {best.p_meet_deadline:.0%}"
        )
        console.print(
            Text.assemble(
                ("recommended", "bold green"),
                f" ({plan.request.objective}): {best.label()} -- {_hours(best.time_s)}, "
                f"{_usd(best.cost_usd)}, bound by {best.bottleneck}{extra}",
            )
        )
        if best.energy_kwh is not None:
            co2 = "" if best.co2e_kg is None else f", {best.co2e_kg:,.1f} kg CO2e"
            limit = "" if best.power_limit_w is None else f" at {best.power_limit_w:g} W"
            console.print(Text(f"  energy: {best.energy_kwh:,.1f} kWh{co2} (GPUs{limit}, x PUE)"))
        for name in ("energy", "carbon"):
            k = plan.picks.get(name)
            if k is not None and name != plan.request.objective:
                c = plan.candidates[k]
                figure = (
                    f"{c.energy_kwh:,.1f} kWh" if name == "energy" else f"{c.co2e_kg:,.1f} kg CO2e"
                )
                console.print(
                    Text(
                        f"  least {name}: {c.label()} -- {figure}, {_hours(c.time_s)}, "
                        f"{_usd(c.cost_usd)}",
                        style="dim",
                    )
                )
        if plan.batch_why:
            console.print(Text(f"  batch: {plan.batch_why}"))
        if plan.request.objective == "goodput" and len(plan.batch_choice) > 1:
            console.print(batch_choice_table(plan))
        for name, out in best.scenarios.items():
            console.print(Text(f"  no lifetime data: {name} scenario {_scenario(out)}"))
        for model, text in best.validation.items():
            console.print(Text(f"  {model}: {text}", style="dim"))
    if plan.infeasible:
        parts = ", ".join(f"{k}: {v:,}" for k, v in sorted(plan.infeasible.items()))
        console.print(Text(f"dropped: {parts}", style="dim"))
    for note in plan.notes:
        console.print(Text(f"note: {note}"))
    for a in plan.assumptions:
        override = f" [override: {a.override}]" if a.override else ""
        console.print(Text(f"assumption {a.name}: {a.value}{override}", style="dim"))
    console.print(Text("(sources of every assumption: --json or --report)", style="dim"))
    console.print(
        Text(
            f"catalog {plan.catalog_snapshot.isoformat()}; critical batch "
            f"{plan.critical_batch:,.0f} ({plan.workload_family}); * Pareto front, > pick",
            style="dim",
        )
    )

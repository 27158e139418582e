"""Rich renderings of plans for the terminal (presentation only; the numbers come from plan/)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpucast.domain.convergence import noise_batch_text
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.plan import PlanCandidate, TrainPlan
from gpucast.domain.units import count_of, format_amount, format_cents
from gpucast.plan.pareto import limited_rows


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if not math.isfinite(seconds):
        return "never"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    hours = seconds / 3600
    return f"{hours:.1f}h" if hours < 99.95 else f"{hours:,.0f}h"  # 105h, not 105.0h


def _usd(value: float) -> str:
    """Cents below $100 (a priced sub-cent cost is never "$0.00"), whole dollars above."""
    return format_cents(value) if not math.isfinite(value) or value < 100 else f"${value:,.0f}"


def _amount(value: float | None) -> str:
    """An amount (GPU-h, kWh, kg) as :func:`format_amount` writes it ('' when unpriced)."""
    if value is None or not math.isfinite(value):
        return ""
    return format_amount(value)


def scenario_text(out: Mapping[str, float | None]) -> str:
    """A spot scenario's outcome (``plan train``'s and ``simulate train``'s ``scenarios``):
    time, cost, P(meet deadline) where a deadline was set, revocations where counted."""
    p = out.get("p_meet_deadline")
    meet = "" if p is None else f", P(meet deadline) {p:.0%}"
    revoked = out.get("revocations")
    revocations = "" if revoked is None else f", {format_amount(revoked)} revocations"
    time_s, cost = out.get("time_s"), out.get("cost_usd")
    return f"{_hours(time_s)}, {_usd(float('nan') if cost is None else cost)}{meet}{revocations}"


def _strategy(c: PlanCandidate) -> str:
    strat = c.strategy + (f"x{c.ps_shards}" if c.strategy.startswith("ps") else "")
    offload = (
        "+nvme" if "nvme-offload" in c.memory_plan
        else "+offload" if "cpu-offload" in c.memory_plan
        else ""
    )  # fmt: skip
    return strat + ("+ckpt" if c.activation_checkpointing else "") + offload


#: The plan table's columns: name (for ``--columns``) -> (header, justify, cell).
PLAN_COLUMNS: dict[str, tuple[str, str, Callable[[PlanCandidate], str]]] = {
    "where": ("where", "left", lambda c: f"{c.provider}/{c.region}"),
    "instance": ("instance", "left", lambda c: f"{c.nodes}x {c.instance_type}"),
    "gpus": ("GPUs", "right", lambda c: f"{c.gpus} {c.gpu}"),
    "market": ("market", "left", lambda c: c.market),
    "strategy": ("strategy", "left", _strategy),
    "precision": ("precision", "left", lambda c: c.precision),
    "batch": ("batch", "right", lambda c: f"{c.per_worker_batch} ({c.global_batch:,})"),
    "time": (
        "time [interval]",
        "right",
        lambda c: f"{_hours(c.time_s)} [{_hours(c.time_lower_s)}, {_hours(c.time_upper_s)}]",
    ),
    "p90": ("p90", "right", lambda c: _hours(c.time_p90_s)),
    "p-meet": (
        "P(meet)",
        "right",
        lambda c: "" if c.p_meet_deadline is None else f"{c.p_meet_deadline:.0%}",
    ),
    "cost": ("cost", "right", lambda c: _usd(c.cost_usd)),
    "gpu-hours": ("GPU-h", "right", lambda c: _amount(c.gpu_hours)),
    "energy": ("kWh", "right", lambda c: _amount(c.energy_kwh)),
    "carbon": ("kg CO2e", "right", lambda c: _amount(c.co2e_kg)),
    "bound": ("bound by", "left", lambda c: c.bottleneck),
    "help": ("what would help", "left", lambda c: "; ".join(c.help)),
}
#: Columns shown on a terminal narrower than :data:`WIDE_TERMINAL` (``--columns all``: all).
NARROW_COLUMNS: tuple[str, ...] = (
    "where", "instance", "gpus", "market", "strategy", "precision", "time", "p-meet", "cost",
    "bound",
)  # fmt: skip
WIDE_TERMINAL = 200
#: Columns a narrow terminal adds after ``cost`` for an objective: the figure it ranks by.
OBJECTIVE_COLUMNS: dict[str, tuple[str, ...]] = {
    "energy": ("energy",),
    "carbon": ("energy", "carbon"),
}
#: Other names ``--columns`` takes for a column (its unit).
COLUMN_ALIASES: dict[str, str] = {"kwh": "energy", "co2": "carbon", "co2e": "carbon"}


def plan_columns(
    given: Sequence[str] | None, width: int | None, objective: str | None = None
) -> tuple[str, ...]:
    """The columns to show: ``given`` (names of :data:`PLAN_COLUMNS` or
    :data:`COLUMN_ALIASES`, or ``all``), else on a wide terminal (or a pipe) all but the
    energy figures and on a narrow one :data:`NARROW_COLUMNS`, either with the
    ``objective``'s own figures (:data:`OBJECTIVE_COLUMNS`) after the cost."""
    names = [n.strip().lower() for n in (given or ()) if n.strip()]
    if not names:
        narrow = width is not None and width < WIDE_TERMINAL
        extra = OBJECTIVE_COLUMNS.get(objective or "", ())
        energy = {c for figures in OBJECTIVE_COLUMNS.values() for c in figures}
        base = NARROW_COLUMNS if narrow else tuple(c for c in PLAN_COLUMNS if c not in energy)
        at = base.index("cost") + 1
        return (*base[:at], *extra, *base[at:])
    if names == ["all"]:
        return tuple(PLAN_COLUMNS)
    names = [COLUMN_ALIASES.get(n, n) for n in names]
    unknown = [n for n in names if n not in PLAN_COLUMNS]
    if unknown:
        raise InvalidSpecError(
            "columns",
            f"must name columns of the plan table: {', '.join(PLAN_COLUMNS)} (or all)",
            got=unknown[0],
            fix="e.g. --columns instance,time,cost,energy",
        )
    return tuple(dict.fromkeys(names))


def plan_table(
    plan: TrainPlan, *, limit: int | None = 20, columns: Sequence[str] | None = None
) -> Table:
    """The shown candidates, Pareto points marked with *, the pick with >; ``limit`` rows at
    most, the Pareto front and the pick always among them (beyond ``limit`` where they need
    more), the rest the first candidates (cheapest first); ``columns`` of
    :data:`PLAN_COLUMNS`."""
    req = plan.request
    table = Table(
        title=Text(
            f"{req.workload}: {plan.feasible:,} feasible of {plan.evaluated:,} configurations "
            f"({plan.simulated} spot plans simulated)"
        ),
        show_lines=False,
    )
    shown = tuple(PLAN_COLUMNS) if columns is None else tuple(columns)
    table.add_column("#", justify="right")
    for name in shown:
        header, justify, _cell = PLAN_COLUMNS[name]
        # a Text header: "time [interval]" as a string is Rich markup and loses "[interval]"
        table.add_column(Text(header), justify=justify)  # type: ignore[arg-type]
    pareto = set(plan.pareto)
    for k in _plan_rows(plan, limit):
        c = plan.candidates[k]
        mark = (">" if k == plan.recommended else "") + ("*" if k in pareto else "")
        style = "bold green" if k == plan.recommended else None
        cells = [Text(PLAN_COLUMNS[name][2](c)) for name in shown]
        table.add_row(Text(f"{mark}{k}"), *cells, style=style)
    return table


def mean_above_band(c: PlanCandidate) -> bool:
    """A spot row whose time (the Monte Carlo mean) lies above its p90 (its interval reaches
    up to the mean): a heavy tail the table's "time [interval]" alone would hide."""
    return c.market == "spot" and c.time_p90_s is not None and c.time_s > c.time_p90_s


def skewed_spot_note(plan: TrainPlan, rows: Sequence[int]) -> str:
    """Why a spot row's time lies above its p90 (:func:`mean_above_band`), for those of
    ``rows``; empty when none does. The terminal and the HTML report say it alike."""
    skewed = [k for k in rows if mean_above_band(plan.candidates[k])]
    if not skewed:
        return ""
    return (
        f"spot {'row' if len(skewed) == 1 else 'rows'} {', '.join(f'#{k}' for k in skewed)}: "
        "the time is the mean of the Monte Carlo runs, above the row's p90 (its interval "
        "reaches up to it) -- a few runs took far longer (revocations, waits for capacity); "
        "p90 and P(meet) describe most runs"
    )


def _plan_rows(plan: TrainPlan, limit: int | None) -> list[int]:
    """The candidates :func:`plan_table` shows: ``limit`` rows, beyond it where the Pareto
    front and the pick need more."""
    must = set(plan.pareto) | ({plan.recommended} if plan.recommended is not None else set())
    return list(limited_rows(range(len(plan.candidates)), must, limit))


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


def print_plan(
    plan: TrainPlan,
    console: Console,
    *,
    limit: int | None = 20,
    columns: Sequence[str] | None = None,
) -> None:
    """The table, the pick in one sentence, and why the rest were dropped."""
    console.print(plan_table(plan, limit=limit, columns=columns))
    hidden = len(plan.candidates) - len(_plan_rows(plan, limit))
    hints = []
    if hidden > 0:
        hints.append(f"--limit N shows more of the {count_of(len(plan.candidates), 'candidate')}")
    if columns is not None and len(columns) < len(PLAN_COLUMNS):
        hints.append("--columns all every column")
    if hints:
        console.print(Text(f"({', '.join(hints)}, --csv FILE writes them all)", style="dim"))
    skewed = skewed_spot_note(plan, _plan_rows(plan, limit))
    if skewed:
        console.print(Text(f"({skewed})", style="dim"))
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
        for note in best.notes:  # the spot plan's checkpoint interval (QA 39 K #7), batches
            console.print(Text(f"  {note}", style="dim"))
        if best.energy_kwh is not None:
            co2 = "" if best.co2e_kg is None else f", {_amount(best.co2e_kg)} kg CO2e"
            draw = "" if best.gpu_power_w is None else f" averaging {best.gpu_power_w:.0f} W"
            cap = "" if best.power_limit_w is None else f" under a {best.power_limit_w:g} W limit"
            line = (
                f"  energy: {_amount(best.energy_kwh)} kWh{co2} "
                f"(GPUs{draw}{cap} while training, x PUE)"
            )
            console.print(Text(line))
        for name in ("energy", "carbon"):
            k = plan.picks.get(name)
            if k is not None and name != plan.request.objective:
                c = plan.candidates[k]
                figure = (
                    f"{_amount(c.energy_kwh)} kWh"
                    if name == "energy"
                    else f"{_amount(c.co2e_kg)} kg CO2e"
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
        if plan.learners_why:
            console.print(Text(f"  learners: {plan.learners_why}", style="dim"))
        if plan.request.objective == "goodput" and len(plan.batch_choice) > 1:
            console.print(batch_choice_table(plan))
        for name, out in best.scenarios.items():
            console.print(Text(f"  no lifetime data: {name} scenario {scenario_text(out)}"))
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
            f"{noise_batch_text(plan.critical_batch)} (the statistical efficiency's B_noise; "
            f"workload family {plan.workload_family}); * Pareto front, > pick",
            style="dim",
        )
    )

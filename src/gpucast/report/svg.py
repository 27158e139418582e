"""Hand-written inline SVG charts: no plotting library, no network, every label escaped.

:func:`front_svg` draws a plan's candidates on two log axes: circles and diamonds (on-demand
and spot plans; a serving plan's hits and misses), the Pareto front filled and joined by a
line, the recommended pick ringed, each axis's limit (deadline, budget, SLO) a dashed line;
each point has a ``<title>`` tooltip. :func:`pareto_svg` is a training plan's: time (hours)
against cost (US$); the LLM training and serving reports draw theirs with it too.
:func:`bar_svg` draws a horizontal bar chart (e.g. measured step times).
:func:`series_svg` draws one signal of a program run over time (``measure cmd``), its
bottleneck phases as shaded bands behind the line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from gpucast.domain.plan import TrainPlan
from gpucast.domain.units import format_duration, format_usd

WIDTH = 760
HEIGHT = 440
PAD_L, PAD_R, PAD_T, PAD_B = 72, 24, 20, 56
OD_COLOUR = "#1f77b4"
SPOT_COLOUR = "#d62728"


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks covering [lo, hi] (both > 0)."""
    ticks: list[float] = []
    e = math.floor(math.log10(lo))
    while 10**e <= hi * 10:
        for m in (1, 2, 5):
            v = m * 10.0**e
            if lo <= v <= hi:
                ticks.append(v)
        e += 1
    return ticks or [lo, hi]


def _fmt(v: float) -> str:
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 1:  # an axis's top (a run's peak 1.10922 cores): three figures, as 1-2-5 ticks
        return f"{v:.3g}"
    return f"{v:.2g}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScatterPoint:
    """One candidate of a front chart: its position, its tooltip, whether it is drawn as a
    diamond (spot; a serving plan's miss) rather than a circle, and its place on the front."""

    x: float
    y: float
    tip: str
    diamond: bool = False
    on_front: bool = False
    pick: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Axis:
    """A log axis: its label (with its unit), a prefix for its tick labels ("$") and an
    optional dashed limit line (the deadline, the budget, the SLO)."""

    label: str
    prefix: str = ""
    limit: float | None = None
    limit_label: str = ""


def front_svg(
    points: Sequence[ScatterPoint],
    *,
    x_axis: Axis,
    y_axis: Axis,
    legend: tuple[str, str],
    svg_id: str = "pareto-plot",
    aria: str = "Pareto front",
) -> str:
    """A log-log scatter of a plan's candidates as an ``<svg>`` element: circles and diamonds
    (``legend`` names them), filled on the Pareto front, the front joined by a line, the pick
    ringed, each axis's limit a dashed line. The training, LLM training and serving reports
    draw their fronts with it."""
    pts = [p for p in points if math.isfinite(p.x) and math.isfinite(p.y) and p.x > 0 < p.y]
    xs = [p.x for p in pts] or [1.0]
    ys = [p.y for p in pts] or [1.0]
    if x_axis.limit is not None:
        xs.append(x_axis.limit)
    if y_axis.limit is not None:
        ys.append(y_axis.limit)
    x_lo, x_hi = min(xs) / 1.3, max(xs) * 1.3
    y_lo, y_hi = min(ys) / 1.3, max(ys) * 1.3
    pw = WIDTH - PAD_L - PAD_R
    ph = HEIGHT - PAD_T - PAD_B

    def sx(v: float) -> float:
        return PAD_L + pw * (math.log(v) - math.log(x_lo)) / (math.log(x_hi) - math.log(x_lo))

    def sy(v: float) -> float:
        return PAD_T + ph * (1 - (math.log(v) - math.log(y_lo)) / (math.log(y_hi) - math.log(y_lo)))

    out = [
        f'<svg id="{escape(svg_id)}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(aria)}">',
        f'<rect x="{PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#999"/>',
    ]
    for v in _log_ticks(x_lo, x_hi):
        x = sx(v)
        out.append(
            f'<line x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" y2="{PAD_T + ph}" stroke="#e3e3e3"/>'
            f'<text x="{x:.1f}" y="{PAD_T + ph + 16}" font-size="11" text-anchor="middle">'
            f"{escape(x_axis.prefix)}{_fmt(v)}</text>"
        )
    for v in _log_ticks(y_lo, y_hi):
        y = sy(v)
        out.append(
            f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{PAD_L + pw}" y2="{y:.1f}" stroke="#e3e3e3"/>'
            f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
            f"{escape(y_axis.prefix)}{_fmt(v)}</text>"
        )
    out.append(
        f'<text x="{PAD_L + pw / 2}" y="{HEIGHT - 14}" font-size="12" text-anchor="middle">'
        f"{escape(x_axis.label)}</text>"
        f'<text x="16" y="{PAD_T + ph / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 16 {PAD_T + ph / 2})">{escape(y_axis.label)}</text>'
    )
    if x_axis.limit is not None:
        x = sx(x_axis.limit)
        out.append(
            f'<line x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" y2="{PAD_T + ph}" stroke="#555" '
            f'stroke-dasharray="6 4"/><text x="{x + 4:.1f}" y="{PAD_T + 12}" font-size="11">'
            f"{escape(x_axis.limit_label)}</text>"
        )
    if y_axis.limit is not None:
        y = sy(y_axis.limit)
        out.append(
            f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{PAD_L + pw}" y2="{y:.1f}" stroke="#555" '
            f'stroke-dasharray="6 4"/><text x="{PAD_L + 4}" y="{y - 4:.1f}" font-size="11">'
            f"{escape(y_axis.limit_label)}</text>"
        )
    front = sorted((p for p in pts if p.on_front), key=lambda p: p.x)
    if len(front) > 1:
        path = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in front)
        out.append(
            f'<polyline class="front" points="{path}" fill="none" stroke="#2ca02c" '
            'stroke-width="1.5"/>'
        )
    for p in pts:
        x, y = sx(p.x), sy(p.y)
        colour = SPOT_COLOUR if p.diamond else OD_COLOUR
        fill = colour if p.on_front else "white"
        tip = escape(p.tip)
        if p.diamond:
            shape = (
                f'<polygon points="{x:.1f},{y - 5:.1f} {x + 5:.1f},{y:.1f} {x:.1f},{y + 5:.1f} '
                f'{x - 5:.1f},{y:.1f}" fill="{fill}" stroke="{colour}" stroke-width="1.5">'
            )
            out.append(f'<g class="point spot">{shape}<title>{tip}</title></polygon></g>')
        else:
            out.append(
                f'<g class="point on-demand"><circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" '
                f'fill="{fill}" stroke="{colour}" stroke-width="1.5"><title>{tip}</title>'
                "</circle></g>"
            )
        if p.pick:
            out.append(
                f'<circle class="recommended" cx="{x:.1f}" cy="{y:.1f}" r="10" fill="none" '
                'stroke="#000" stroke-width="2"/>'
            )
    # legend in the bottom-left corner: fast and cheap, where no candidate can be
    lx, ly = PAD_L + 8, PAD_T + ph - 70
    out.append(
        f'<g font-size="11"><rect x="{lx}" y="{ly}" width="182" height="62" '
        'fill="white" stroke="#ccc"/>'
        f'<circle cx="{lx + 12}" cy="{ly + 14}" r="4.5" fill="{OD_COLOUR}"/>'
        f'<text x="{lx + 22}" y="{ly + 18}">{escape(legend[0])}</text>'
        f'<polygon points="{lx + 12},{ly + 27} {lx + 17},{ly + 32} {lx + 12},'
        f'{ly + 37} {lx + 7},{ly + 32}" fill="{SPOT_COLOUR}"/>'
        f'<text x="{lx + 22}" y="{ly + 36}">{escape(legend[1])}</text>'
        f'<circle cx="{lx + 12}" cy="{ly + 50}" r="6" fill="none" stroke="#000" '
        f'stroke-width="2"/><text x="{lx + 22}" y="{ly + 54}">recommended</text></g>'
    )
    out.append("</svg>")
    return "\n".join(out)


#: the training reports' axes: time to target against cost (US$), both log
TIME_AXIS = "time to target (hours, log scale)"
COST_AXIS = "cost (US$, log scale)"
TRAIN_LEGEND = ("on demand (filled: Pareto)", "spot (Monte Carlo mean)")


def pareto_svg(plan: TrainPlan) -> str:
    """The time-cost chart of a plan as an ``<svg>`` element (a string)."""
    front, req = set(plan.pareto), plan.request
    points = [
        ScatterPoint(
            x=c.time_s / 3600.0,
            y=c.cost_usd,
            tip=f"#{k} {c.label()}: {format_duration(c.time_s)}, {format_usd(c.cost_usd)}"
            + ("" if c.p_meet_deadline is None else f", P(meet) {c.p_meet_deadline:.0%}"),
            diamond=c.market == "spot",
            on_front=k in front,
            pick=k == plan.recommended,
        )
        for k, c in enumerate(plan.candidates)
    ]
    deadline_h = None if req.deadline_s is None else req.deadline_s / 3600.0
    return front_svg(
        points,
        x_axis=Axis(label=TIME_AXIS, limit=deadline_h, limit_label="deadline"),
        y_axis=Axis(label=COST_AXIS, prefix="$", limit=req.budget_usd, limit_label="budget"),
        legend=TRAIN_LEGEND,
        aria="Pareto front of time against cost",
    )


def bar_svg(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    unit: str,
    svg_id: str,
    text: Callable[[float], str] | None = None,
) -> str:
    """A horizontal bar chart (one bar per label) as an ``<svg>`` element; ``text`` writes a
    bar's value (default: four figures and ``unit``), e.g. as the page's table does."""
    show: Callable[[float], str] = text or (lambda v: f"{v:.4g} {unit}")

    n = max(len(values), 1)
    row = 22
    height = PAD_T + n * row + 30
    label_w = 300
    bar_w = WIDTH - label_w - 90
    top = max([v for v in values if math.isfinite(v)] or [1.0]) or 1.0
    out = [
        f'<svg id="{escape(svg_id)}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img">'
    ]
    for k, (label, v) in enumerate(zip(labels, values, strict=True)):
        y = PAD_T + k * row
        w = 0.0 if not math.isfinite(v) else bar_w * v / top
        out.append(
            f'<text x="{label_w - 6}" y="{y + 14}" font-size="11" text-anchor="end">'
            f"{escape(label)}</text>"
            f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" '
            f'fill="{OD_COLOUR}">'
            f"<title>{escape(label)}: {escape(show(v))}</title></rect>"
            f'<text x="{label_w + w + 4:.1f}" y="{y + 14}" font-size="11">{escape(show(v))}'
            "</text>"
        )
    out.append("</svg>")
    return "\n".join(out)


#: Band colours of a program's bottleneck phases (predict.program.PHASE_CLASSES).
PHASE_COLOURS = {
    "cpu": "#fde0c5",
    "memory": "#e5d4f0",
    "io": "#d4e8f7",
    "gpu": "#d8f0d2",
    "idle": "#f2f2f2",
}


def series_svg(
    t_s: Sequence[float],
    values: Sequence[float],
    *,
    label: str,
    unit: str,
    svg_id: str,
    bands: Sequence[tuple[float, float, str]] = (),
) -> str:
    """A line chart of ``values`` over ``t_s`` (seconds) as an ``<svg>`` element; ``bands``
    (start s, end s, phase) shade the phases behind it, with a legend."""
    height = 200
    pad_l, pad_r, pad_t, pad_b = PAD_L, PAD_R, 26, 34
    points = [
        (float(t), float(v))
        for t, v in zip(t_s, values, strict=True)
        if math.isfinite(float(t)) and math.isfinite(float(v))
    ]
    t_max = max([t for t, _ in points] + [b[1] for b in bands] + [1e-9])
    v_max = max([v for _, v in points] + [0.0]) or 1.0
    inner_w = WIDTH - pad_l - pad_r
    inner_h = height - pad_t - pad_b

    def sx(t: float) -> float:
        return pad_l + inner_w * t / t_max

    def sy(v: float) -> float:
        return pad_t + inner_h * (1.0 - v / v_max)

    out = [
        f'<svg id="{escape(svg_id)}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img">',
        f'<text x="{pad_l}" y="16" font-size="12" font-weight="bold">{escape(label)} '
        f"({escape(unit)})</text>",
    ]
    for start, end, phase in bands:
        colour = PHASE_COLOURS.get(phase, "#eeeeee")
        out.append(
            f'<rect x="{sx(start):.1f}" y="{pad_t}" width="{max(sx(end) - sx(start), 0.5):.1f}" '
            f'height="{inner_h}" fill="{colour}"><title>{escape(phase)} {start:.2f}-{end:.2f} s'
            "</title></rect>"
        )
    out.append(
        f'<line x1="{pad_l}" y1="{pad_t + inner_h}" x2="{pad_l + inner_w}" '
        f'y2="{pad_t + inner_h}" stroke="#888"/>'
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + inner_h}" stroke="#888"/>'
        f'<text x="{pad_l - 6}" y="{pad_t + 4}" font-size="10" text-anchor="end">'
        f"{_fmt(v_max)}</text>"
        f'<text x="{pad_l - 6}" y="{pad_t + inner_h}" font-size="10" text-anchor="end">0</text>'
        f'<text x="{pad_l + inner_w}" y="{height - 8}" font-size="10" text-anchor="end">'
        f"{t_max:.3g} s</text>"
    )
    if points:
        path = " ".join(f"{sx(t):.1f},{sy(v):.1f}" for t, v in points)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{OD_COLOUR}" stroke-width="1.5"/>'
        )
    legend_x = pad_l + 200
    for phase in dict.fromkeys(b[2] for b in bands):
        out.append(
            f'<rect x="{legend_x}" y="6" width="10" height="10" '
            f'fill="{PHASE_COLOURS.get(phase, "#eeeeee")}" stroke="#999"/>'
            f'<text x="{legend_x + 14}" y="15" font-size="10">{escape(phase)}</text>'
        )
        legend_x += 70
    out.append("</svg>")
    return "\n".join(out)

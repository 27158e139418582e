"""``--find-saturation`` in words, for both kinds of ``simulate serve`` (a CNN's request-level
run and a language model's token-level one share the search and its result type,
:class:`gpucast.simulate.serving.Saturation`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from gpucast.cli._common import console
from gpucast.domain.units import format_latency

if TYPE_CHECKING:
    from gpucast.simulate.serving import Saturation


def print_saturation(sat: Saturation, *, probes: bool = False) -> None:
    """The rate held (offered and served, one probe's) and the peak; with ``probes`` (a
    language model's) tokens/s at saturation and a table of every rate tried with its TTFT /
    TPOT percentiles; then what "held" meant."""
    top = sat.at_saturation
    held = (
        "no rate tried held"
        if top is None
        else f"held at {top.offered_rps:.1f} req/s offered, "
        f"{min(top.served_rps, sat.peak_throughput_rps):.1f} served"
    )
    console.print(
        f"  saturation: {held}; peak throughput {sat.peak_throughput_rps:.1f} req/s served"
        f"{sat.edge_note} ({len(sat.probes)} rates tried)",
        highlight=False,
    )
    if probes and top is not None and top.tokens_per_s is not None:
        console.print(
            f"  at saturation: {top.tokens_per_s:.0f} output tokens/s, TTFT p99 "
            f"{format_latency(top.ttft_p99_s or 0.0)}, TPOT p99 "
            f"{format_latency(top.tpot_p99_s or 0.0, digits=1)}",
            highlight=False,
        )
    if probes:
        from rich.table import Table

        table = Table(title="saturation probes (in the order run)", title_justify="left")
        for col in ("offered req/s", "served req/s", "held", "TTFT p50", "TTFT p99",
                    "TPOT p50", "TPOT p99", "run s"):  # fmt: skip
            table.add_column(col, justify="right")
        for p in sat.probes:
            times = [
                _time(p.ttft_p50_s), _time(p.ttft_p99_s), _time(p.tpot_p50_s, 1),
                _time(p.tpot_p99_s, 1),
            ]  # fmt: skip
            run_s = "-" if p.run_s is None else f"{p.run_s:.0f}"
            held = "yes" if p.held else "no"
            table.add_row(f"{p.offered_rps:.2f}", f"{p.served_rps:.2f}", held, *times, run_s)
        console.print(table)
    console.print(f"[dim]  {escape(sat.criterion)}[/dim]", highlight=False)


def _time(value_s: float | None, digits: int = 0) -> str:
    return "-" if value_s is None or value_s != value_s else format_latency(value_s, digits=digits)

"""The saturation search: the highest offered rate a deployment holds, from probes at doubled or
halved rates and then bisected ones (:func:`search_saturation`), for any kind of server; a
probe's and the search's results (:class:`SaturationProbe`, :class:`Saturation`).

Private part of :mod:`gpucast.simulate.serving`, which re-exports its names and gives the search
its CNN-style probe (:func:`~gpucast.simulate.serving.probe_rate`);
:mod:`gpucast.simulate.llm_load` gives it a language model's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from gpucast.domain.errors import InvalidSpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class SaturationProbe:
    """One offered rate tried by :func:`search_saturation`, measured over the second half of
    the run (after the queues settled). A language model's probe adds its TTFT / TPOT
    percentiles, output tokens/s and the share of its requests preempted (None for a CNN's)."""

    offered_rps: float
    served_rps: float
    dropped_fraction: float
    held: bool
    p50_s: float
    p99_s: float
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    tokens_per_s: float | None = None
    preempted_fraction: float | None = None
    #: seconds the probe simulated (its second half measured)
    run_s: float | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "offered_rps": self.offered_rps,
            "served_rps": self.served_rps,
            "dropped_fraction": self.dropped_fraction,
            "held": self.held,
            "p50_s": self.p50_s,
            "p99_s": self.p99_s,
        }
        for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "tokens_per_s",
                    "preempted_fraction", "run_s"):  # fmt: skip
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Saturation:
    """The highest rate held (``saturation_rps``: the highest offered rate the deployment
    kept up with, counted as what it served there) and the most it carried at any offered
    rate (``peak_throughput_rps``); ``probes`` in the order they ran; ``criterion``: what
    "held" meant, in words. ``counted_peak_rps``: the completions a probe counted over its
    window where they read above the deployment's capacity (the window's edge: its start
    finds requests already in service, whose completions it counts), the rates then clipped
    to that capacity (:meth:`within`); None otherwise."""

    saturation_rps: float
    peak_throughput_rps: float
    criterion: str
    probes: tuple[SaturationProbe, ...]
    counted_peak_rps: float | None = None
    #: what the rates were clipped to, in words (:attr:`edge_note`)
    bound: str = "the capacity of its slowest stage"

    def within(self, capacity_rps: float, bound: str | None = None) -> Saturation:
        """The rates clipped to ``capacity_rps``, an upper bound on what the deployment
        carries for long (:func:`analytic_capacity_rps`; a language model's:
        :func:`gpucast.simulate.llm_load.analytic_capacity_rps`, named by ``bound``), the
        count kept where it was over (QA 40 V #8: a host carrying 244 req/s read a peak of
        244.3)."""
        if self.peak_throughput_rps <= capacity_rps and self.saturation_rps <= capacity_rps:
            return self
        return dataclasses.replace(
            self,
            saturation_rps=min(self.saturation_rps, capacity_rps),
            peak_throughput_rps=min(self.peak_throughput_rps, capacity_rps),
            counted_peak_rps=self.peak_throughput_rps,
            bound=self.bound if bound is None else bound,
        )

    @property
    def edge_note(self) -> str:
        """The clipping in words ("" when none)."""
        if self.counted_peak_rps is None:
            return ""
        return (
            f" ({self.bound}; {self.counted_peak_rps:.1f} counted over a "
            "probe's window, whose start finds requests already in service)"
        )

    @property
    def at_saturation(self) -> SaturationProbe | None:
        """The held probe ``saturation_rps`` is read from (the most it both was offered and
        served; None when none held): its offered and served rates and its latencies are
        the ones reported together."""
        held = [p for p in self.probes if p.held]
        return max(held, key=lambda p: min(p.offered_rps, p.served_rps)) if held else None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "saturation_rps": self.saturation_rps,
            "peak_throughput_rps": self.peak_throughput_rps,
            "criterion": self.criterion,
        }
        if self.counted_peak_rps is not None:
            out["counted_peak_throughput_rps"] = self.counted_peak_rps
        top = self.at_saturation
        if top is not None:
            out["offered_rps_at_saturation"] = top.offered_rps
            out["served_rps_at_saturation"] = min(top.served_rps, self.peak_throughput_rps)
        if top is not None and top.tokens_per_s is not None:
            out["tokens_per_s_at_saturation"] = top.tokens_per_s
        out["probes"] = [p.to_dict() for p in self.probes]
        return out


def search_saturation(
    probe: Callable[[float], SaturationProbe],
    *,
    start_rps: float,
    criterion: str,
    precision: float = 0.005,
    max_probes: int = 30,
) -> Saturation:
    """The highest offered rate ``probe(rate)`` holds: starting from ``start_rps`` (e.g. the
    analytic capacity) the rate doubles or halves until it brackets the edge, then bisects
    (geometrically) to ``precision``; at most ``max_probes`` probes. Any kind of server:
    ``probe`` runs its simulator at one rate and says whether it held (``criterion``)."""
    if not (math.isfinite(start_rps) and start_rps > 0):
        raise InvalidSpecError("saturation start rate", "must be > 0", got=start_rps)
    probes: list[SaturationProbe] = []

    def held(rate: float) -> bool:
        probes.append(probe(rate))
        return probes[-1].held

    lo, hi = 0.0, start_rps
    if held(hi):
        lo = hi
        while len(probes) < max_probes:
            hi = lo * 2.0
            if not held(hi):
                break
            lo = hi
        else:
            hi = math.inf
    else:
        while len(probes) < max_probes and hi > 1e-9:
            lo = hi / 2.0
            if held(lo):
                break
            hi = lo
            lo = 0.0
    while lo > 0 and math.isfinite(hi) and hi / lo - 1.0 > precision and len(probes) < max_probes:
        mid = math.sqrt(lo * hi)
        if held(mid):
            lo = mid
        else:
            hi = mid
    return Saturation(
        saturation_rps=max(
            (min(p.offered_rps, p.served_rps) for p in probes if p.held), default=0.0
        ),
        peak_throughput_rps=max((p.served_rps for p in probes), default=math.nan),
        criterion=criterion,
        probes=tuple(probes),
    )

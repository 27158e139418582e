"""The language-model serving plan: one simulated deployment (:class:`LlmServeCandidate`), the
plan (:class:`LlmServePlan`), the order its rows are ranked in (:func:`_rank`,
:data:`TIE_BREAK`) and the words of its reasons (:func:`grouped_reasons`, :data:`SLO_MISSED`).

Private part of :mod:`gpucast.plan.llm_serve`, which re-exports its public names.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpucast.domain.units import count_of
from gpucast.plan.pareto import tie_note
from gpucast.simulate.llm_serving import LlmServingResult


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmServeCandidate:
    """One simulated deployment."""

    gpu: str
    provider: str
    instance_type: str
    tp: int
    mode: str  # "colocated" or "disaggregated"
    replicas: int  # colocated instances (0 when disaggregated)
    prefill_instances: int
    decode_instances: int
    #: of its instances, those simulated (:data:`SAMPLED_REQUESTS`; all for a small run)
    simulated_instances: int
    gpus: int
    cost_usd_per_hour: float
    ttft_s: float  # at the SLO percentile
    tpot_s: float
    latency_p50_s: float
    tokens_per_s: float
    cost_usd_per_million_tokens: float
    ttft_attainment: float
    tpot_attainment: float
    preemptions: int
    dropped: int
    meets_slo: bool
    within_budget: bool
    bound: str

    def describe(self) -> str:
        if self.mode == "disaggregated":
            shape = f"{self.prefill_instances} prefill + {self.decode_instances} decode"
        else:
            shape = f"{self.replicas} replica{'s' if self.replicas != 1 else ''}"
        return f"{self.gpu} tp={self.tp}, {shape} ({count_of(self.gpus, 'GPU')})"

    def to_dict(self) -> dict[str, object]:
        """Its fields, the description, and the TTFT and TPOT under names that say they are
        at the SLO percentile (``ttft_at_slo_percentile_s``; the plan's ``slo.percentile``
        says which): ``ttft_s`` / ``tpot_s`` stay, the same figures, for saved plans and the
        reports that read them."""
        out = dataclasses.asdict(self)
        out["description"] = self.describe()
        out["ttft_at_slo_percentile_s"] = self.ttft_s
        out["tpot_at_slo_percentile_s"] = self.tpot_s
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmServePlan:
    candidates: tuple[LlmServeCandidate, ...]  # cheapest first
    pareto: tuple[int, ...]
    recommended: int | None
    infeasible: tuple[str, ...]
    simulated: int
    #: with ``band_of``: (lower factor, upper factor, the pick simulated with every iteration
    #: at the lower factor, at the upper)
    best_band: tuple[float, float, LlmServeCandidate, LlmServeCandidate] | None = None
    #: the pick's whole run (its requests' times: how steady its rates are), not in the JSON
    best_result: LlmServingResult | None = None

    def band_dict(self) -> dict[str, Any] | None:
        """The pick at the edges of its iteration-time band: SLO percentiles, attainment and
        whether it still meets the SLOs (fast edge, slow edge)."""
        if self.best_band is None:
            return None
        low, high, fast, slow = self.best_band
        return {
            "iteration_factor": [low, high],
            "ttft_s": [fast.ttft_s, slow.ttft_s],
            "tpot_s": [fast.tpot_s, slow.tpot_s],
            "ttft_at_slo_percentile_s": [fast.ttft_s, slow.ttft_s],
            "tpot_at_slo_percentile_s": [fast.tpot_s, slow.tpot_s],
            "ttft_attainment": [slow.ttft_attainment, fast.ttft_attainment],
            "tpot_attainment": [slow.tpot_attainment, fast.tpot_attainment],
            "meets_slo": [fast.meets_slo, slow.meets_slo],
        }

    @property
    def best(self) -> LlmServeCandidate | None:
        return None if self.recommended is None else self.candidates[self.recommended]

    def reason_lines(self) -> list[str]:
        """:attr:`infeasible` as the text says it, one line per reason (:func:`grouped_reasons`):
        ``not simulated: ...`` but for a GPU x degree simulated whose rows all missed the SLO
        (:data:`SLO_MISSED`: its rows stand in the table)."""
        return [
            line if SLO_MISSED in line else f"not simulated: {line}"
            for line in grouped_reasons(self.infeasible)
        ]

    def no_pick_text(self) -> str | None:
        """Why nothing was recommended, in one line (``None`` when something was): no row met
        the SLOs, or rows did and the budget ruled each out -- then the cheapest of them."""
        if self.recommended is not None:
            return None
        met = [c for c in self.candidates if c.meets_slo]
        if not met:
            return "no deployment meets the SLOs within the limits"
        cheapest = min(met, key=lambda c: c.cost_usd_per_hour)
        return (
            f"no deployment meets the SLOs within the budget: the cheapest that meets them, "
            f"{cheapest.describe()}, costs {cheapest.cost_usd_per_hour:.2f} US$/h; raise "
            f"--budget-usd-per-hour to >= {math.ceil(cheapest.cost_usd_per_hour * 100) / 100:.2f}"
        )

    def tie_note(self) -> str | None:
        """Which rule picked among the deployments that meet the SLOs and the budget at the
        pick's cost (:data:`TIE_BREAK`); ``None`` when its cost alone did."""
        if self.recommended is None:
            return None
        ok = [i for i, c in enumerate(self.candidates) if c.meets_slo and c.within_budget]
        costs = [self.candidates[i].cost_usd_per_hour for i in ok]
        return tie_note(costs, ok.index(self.recommended), TIE_BREAK)


def grouped_reasons(reasons: Sequence[str]) -> list[str]:
    """Every ``LABEL: WHY`` of a plan's ``infeasible``, one line per distinct WHY naming all
    its labels, a GPU's degrees together (``A10G tp=1, 2; L4 tp=1: does not fit (...)``)."""
    groups: dict[str, dict[str, list[str]]] = {}
    for reason in reasons:
        label, sep, why = reason.partition(": ")
        if not sep:
            label, why = "", reason
        gpu, tp_sep, degrees = label.partition(" tp=")
        by_label = groups.setdefault(why, {})
        by_label.setdefault(gpu if tp_sep else label, []).extend([degrees] if tp_sep else [])
    lines = []
    for why, by_label in groups.items():
        labels = [k + (f" tp={', '.join(d)}" if d else "") for k, d in by_label.items() if k]
        lines.append(f"{'; '.join(labels)}: {why}" if labels else why)
    return lines


SLO_MISSED = "simulated, every replica count tried misses the SLO"
"""Why a GPU x degree gives no pick though it was simulated: its rows stand in the table, each
marked as missing; :attr:`LlmServePlan.infeasible` holds it beside the ones not simulated."""

#: How the pick is chosen among deployments that meet the SLOs at the same cost (``--price P``
#: prices every GPU type alike): the rule :func:`_rank` orders them by, as the output says.
TIE_BREAK = "lower TTFT, then lower TPOT, then fewer GPUs"


def _rank(row: LlmServeCandidate) -> tuple[float, float, float, int, str]:
    """Cheapest first; at one cost, :data:`TIE_BREAK` (the description last: one order
    whatever order the search found them in)."""
    return (row.cost_usd_per_hour, row.ttft_s, row.tpot_s, row.gpus, row.describe())

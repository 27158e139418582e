"""What ``plan serve`` and ``simulate serve`` return: :class:`PlanServeResult` (the plan,
its warnings and validated errors) and :class:`SimulateServeResult` (the simulated run, what
it ran on, its warnings), with their ``to_dict`` (``--json``) and ``to_frame``. Re-exported by
:mod:`gpucast.app.serve`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpucast.domain.serving import BatchingPolicy, LatencyCurve
from gpucast.domain.serving_plan import ServePlan

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.app.serve import SimulateServeRequest
    from gpucast.simulate.serving import Saturation, ServingResult


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanServeResult:
    """The serving plan (its ``assumptions`` are the sources of every input) and the
    warnings gathered on the way (e.g. skipped malformed trace rows)."""

    plan: ServePlan
    warnings: tuple[str, ...] = ()
    #: model -> its validated error in the regime of the recommended deployment
    validation: Mapping[str, str] = field(default_factory=dict)

    @property
    def best(self) -> Any:
        return self.plan.best

    def to_dict(self) -> dict[str, Any]:
        """What ``gpucast plan serve --json`` prints: :meth:`ServePlan.to_dict` and the
        validated error of the recommended deployment's regime, and the warnings the text
        prints on stderr (QA 38 I #22: --json dropped them)."""
        return {
            **self.plan.to_dict(),
            "validation": dict(self.validation),
            "warnings": list(self.warnings),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate (cheapest first), with its Pareto and recommended marks."""
        import pandas as pd

        pareto = set(self.plan.pareto)
        rows = [
            {
                "candidate": i,
                "description": c.describe(),
                "placement": c.placement,
                "servers": c.servers,
                "cost_usd_per_hour": c.cost_usd_per_hour,
                "cost_usd_per_million": c.cost_usd_per_million,
                "tail_latency_s": c.tail_latency_s,
                "meets_slo": c.meets_slo,
                "headroom": c.headroom,
                "latency_headroom": c.latency_headroom,
                "bound": c.bound,
                "pareto": i in pareto,
                "recommended": i == self.plan.recommended,
            }
            for i, c in enumerate(self.plan.candidates)
        ]
        return pd.DataFrame(rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServeResult:
    """The simulated serving run, what it ran on, and its warnings (skipped trace rows, an
    overloaded server, shed requests)."""

    request: SimulateServeRequest
    server: str  # e.g. "T4" or "A100-40GB/1g.10gb"
    serving: ServingResult
    batching: BatchingPolicy
    latency_curve: LatencyCurve
    host_capacity_rps: float | None
    warnings: tuple[str, ...] = ()
    #: model -> its validated error in this run's regime (GPU, precision)
    validation: Mapping[str, str] = field(default_factory=dict)
    arrival_process: str = ""
    engine: str = ""
    precision: str = "fp32"
    host_s: float = 0.0
    saturation: Saturation | None = None
    #: per request class (with --deadline-ms / --request-class): misses, worst latency
    classes: tuple[Any, ...] = ()  # gpucast.simulate.realtime.ClassOutcome
    scheduler: str | None = None
    #: with --cache-fraction: the tiers' lookup shares and miss bytes (CachedCurve)
    embedding_cache: Any = None

    @property
    def sources(self) -> dict[str, str]:
        return dict(self.serving.sources)

    def to_dict(self) -> dict[str, Any]:
        """What ``gpucast simulate serve --json`` prints: the run with a 30-bin timeline,
        the arrival process, the host path, the batching policy, the latency curve and,
        when searched, the saturation."""
        out: dict[str, Any] = dict(self.serving.to_dict(timeline_bins=30))
        out["arrival_process"] = self.arrival_process
        out["engine"] = self.engine
        out["precision"] = self.precision
        out["host_capacity_rps"] = self.host_capacity_rps
        out["host_s"] = self.host_s
        out["batching"] = self.batching.to_dict()
        out["latency_curve"] = self.latency_curve.to_dict()
        out["saturation"] = None if self.saturation is None else self.saturation.to_dict()
        out["validation"] = dict(self.validation)
        out["warnings"] = list(self.warnings)  # as a language model's run has them
        out["scheduler"] = self.scheduler
        out["classes"] = [dataclasses.asdict(c) for c in self.classes]
        out["embedding_cache"] = (
            None if self.embedding_cache is None else self.embedding_cache.to_dict()
        )
        target = self.request.slo_target
        out["slo_percentile"] = None if target is None else target[0]
        # the SLO's percentile is within it when at least that share of requests is (a
        # dropped request misses it)
        attained = out["slo_attainment"]
        out["slo_met"] = (
            None
            if target is None or attained is None or math.isnan(attained)
            else bool(attained >= target[0] / 100.0 - 1e-12)
        )
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per simulated server (device)."""
        import pandas as pd

        return pd.DataFrame([s.to_dict() for s in self.serving.servers])

"""The result of ``gpucast plan serve --mix``: PARIS's heterogeneous MIG layouts and ELSA's
dispatch (:func:`gpucast.app.serve.plan_serve` builds it: the inputs come from the same places
as ``plan serve``'s, :mod:`gpucast.inputs.serving` -- the GPU's cheapest offer, its latency
curve whole and on every MIG profile with published placements, the arrivals; the layouts
from :mod:`gpucast.predict.mig`; the planning and the simulations in
:func:`gpucast.plan.mig_serve.plan_mig_mix`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpucast.domain.serving_plan import ModelProfile
from gpucast.plan.mig_serve import Layout, MigMixPlan, MixModel, SliceType

if TYPE_CHECKING:
    import pandas as pd

#: the GPU ``--mix`` plans on when no ``--gpu`` is given
DEFAULT_MIX_GPU = "A100-40GB"


@dataclass(frozen=True, slots=True, kw_only=True)
class MigMixInputs:
    """What ``plan serve --mix`` plans with (:func:`gpucast.app.serve.mig_mix_inputs`)."""

    gpu: str
    gpu_given: bool
    price_usd_per_hour: float
    offer: str
    mix: tuple[MixModel, ...]
    slice_types: Mapping[str, SliceType]
    layouts: tuple[Layout, ...]  # every full MIG layout, then the whole GPU
    baselines: tuple[Layout, ...]  # one per homogeneous layout, then the whole GPU
    profiles: Mapping[tuple[str, str], ModelProfile]  # (model, slice type) -> curve
    latency_source: str
    engine_source: str
    engine: str
    precision: str
    max_batch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanMigServeResult:
    """PARIS's layouts and the baselines, simulated; the sources of every input."""

    plan: MigMixPlan
    assumptions: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    validation: Mapping[str, str] = field(default_factory=dict)

    @property
    def best(self) -> Any:
        return self.plan.best

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "assumptions": dict(self.assumptions),
            "validation": dict(self.validation),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per (choice, dispatcher) run."""
        import pandas as pd

        rows = []
        for k, o in enumerate(self.plan.outcomes):
            choice = self.plan.choice(o.choice)
            rows.append(
                {
                    "choice": o.choice,
                    "layouts": choice.describe(),
                    "dispatch": o.dispatch,
                    "gpus": o.gpus,
                    "cost_usd_per_hour": o.cost_usd_per_hour,
                    "capacity_rps": choice.capacity_rps,
                    "offered_rps": o.offered_rps,
                    "attainment": o.attainment,
                    "goodput_rps": o.goodput_rps,
                    "worst_p99_s": o.worst_p99_over_slo,
                    "recommended": k == self.plan.recommended,
                }
            )
        return pd.DataFrame(rows)

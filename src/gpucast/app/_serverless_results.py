"""The results of ``simulate serverless`` and ``plan serverless``
(:class:`SimulateServerlessResult`, :class:`PlanServerlessResult`) and which model serves
which function (:func:`served_by`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

    from gpucast.domain.provenance import Validation
    from gpucast.inputs.serverless import GpuFunction
    from gpucast.plan.serverless import ServerlessPlan
    from gpucast.simulate.serverless import PoolResult, ServerlessResult

    FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateServerlessResult:
    """The simulated day(s): totals, per-model figures, sources and assumptions."""

    result: ServerlessResult
    functions: tuple[GpuFunction, ...]
    gpu: str
    gpu_memory_gib: float
    price_usd_per_hour: float
    price_source: str
    trace_source: str
    arrival_process: str = ""
    warnings: tuple[str, ...] = ()
    assumptions: dict[str, str] = field(default_factory=dict)
    pool: PoolResult | None = None
    pool_gpus: int | None = None
    billing: str = "instance"
    #: what one instance serves (``app`` or ``function``), the trace's applications (None:
    #: it has none) and each unit's own memory in MB (``--unit app``; NaN: unknown)
    unit: str = "function"
    apps: dict[str, Any] | None = None
    host_memory_mb: FloatArray | None = None
    #: the flags whose default set the result (``--gpu``)
    defaults: tuple[str, ...] = ()
    #: ``--slo``: percentile, latency_s, the latency at the percentile, the share of
    #: invocations within latency_s and whether the SLO is met (None: no --slo)
    slo: dict[str, Any] | None = None
    #: the keep-alive simulator's validated error (:func:`_keepalive_validation`), as
    #: ``plan serverless`` names it (None: not given, the API's older callers)
    validation: Validation | None = None
    #: the predicted cold start's validated error (:func:`_coldstart_validation`; None when
    #: every model's cold start was measured)
    cold_start_validation: Validation | None = None
    #: each model whose cold start a stored run measured: that run's provenance
    cold_start_measured: dict[str, str] = field(default_factory=dict)

    @property
    def billed_gpu_hours(self) -> float:
        """GPU-hours billed under :attr:`billing` (``plan serverless``'s bill)."""
        return self.result.bill_s(self.billing) / 3600.0

    @property
    def warm_idle_gib_hours(self) -> float:
        return float(self.result.wasted_memory_gib_s.sum()) / 3600.0

    @property
    def warm_idle_app_memory_mb_hours(self) -> float | None:
        """The apps' own memory (the trace's ``AverageAllocatedMb``) x the time each was loaded
        while idle, in MB-hours (``--unit app`` with a memory file; apps without a row not
        counted), else None."""
        import numpy as np

        mb, idle = self.host_memory_mb, self.result.idle_s
        if mb is None or idle is None or not np.isfinite(mb).any():
            return None
        known = np.isfinite(mb)
        return float((idle[known] * mb[known]).sum()) / 3600.0

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        idle_gpu_hours = self.warm_idle_gib_hours / self.gpu_memory_gib
        return {
            **r.to_dict(),
            "rejected_beyond_context": 0 if r.rejected is None else int(r.rejected.sum()),
            "unit": self.unit,
            "units": len(r.functions),
            "functions": _functions(self.apps, len(r.functions)),
            "apps": self.apps,
            "gpu": self.gpu,
            "defaults": list(self.defaults),
            "arrival_process": self.arrival_process,
            "billing": self.billing,
            "billed_gpu_s": r.bill_s(self.billing),
            "billed_gpu_hours": self.billed_gpu_hours,
            "execution_gpu_hours": r.billed_s / 3600.0,
            "instance_gpu_hours": r.instance_s / 3600.0,
            "warm_idle_gib_hours": self.warm_idle_gib_hours,
            "warm_idle_gpu_hours": idle_gpu_hours,
            "warm_idle_app_memory_mb_hours": self.warm_idle_app_memory_mb_hours,
            "price_usd_per_hour": self.price_usd_per_hour,
            "cost_usd": self.billed_gpu_hours * self.price_usd_per_hour,
            "warm_idle_cost_usd": idle_gpu_hours * self.price_usd_per_hour,
            "models": _model_dicts(
                self.functions,
                r.functions if self.unit == "function" else None,
                _functions(self.apps, len(r.functions)),
            ),
            "pool": self._pool_dict(),
            "slo": self.slo,
            "validation": None if self.validation is None else self.validation.to_dict(),
            "cold_start_validation": None
            if self.cold_start_validation is None
            else self.cold_start_validation.to_dict(),
            "cold_start_measured": dict(self.cold_start_measured),
            "sources": {"trace": self.trace_source, "price": self.price_source},
            "warnings": list(self.warnings),
            "assumptions": dict(self.assumptions),
        }

    def _pool_dict(self) -> dict[str, Any] | None:
        if self.pool is None:
            return None
        return {
            **self.pool.to_dict(),
            "cost_usd": self.pool.gpu_hours * self.price_usd_per_hour,
        }


def _functions(apps: dict[str, Any] | None, units: int) -> int:
    """The functions of the trace: its apps' functions, else one per unit."""
    return int(apps["functions"]) if apps is not None else units


def served_by(k: int, models: int, names: Sequence[str] | None, functions: int) -> str:
    """Which functions the ``k``-th of ``models`` function models serves (function ``i``
    serves model ``i mod models``), in words: ``function conv`` (one model a function, the
    Azure LLM trace), ``functions f0, f2, f4, ... (10 of 20)`` or, without the functions'
    names (``--unit app`` groups them), ``10 of 20 functions (i mod 2 = 0)``."""
    if names is not None and len(names) == models:
        return f"function {names[k]}"
    if models == 1:
        return "the function" if functions == 1 else f"all {functions:,} functions"
    served = range(k, functions, models)
    if names is None or len(names) != functions:
        return f"{len(served):,} of {functions:,} functions (i mod {models} = {k})"
    shown = ", ".join(names[i] for i in served[:3]) + (", ..." if len(served) > 3 else "")
    return f"function{'s' if len(served) != 1 else ''} {shown} ({len(served):,} of {functions:,})"


def _model_dicts(
    functions: tuple[GpuFunction, ...], names: Sequence[str] | None, count: int
) -> list[dict[str, Any]]:
    """Each function model's figures, its cold start phase by phase (measured or predicted),
    and the functions it serves (:func:`served_by`; ``names``: the functions', ``count`` of
    them)."""
    return [
        {
            "model": f.model,
            "served_by": served_by(k, len(functions), names, count),
            "memory_gib": f.memory_gib,
            "weight_bytes": f.weight_bytes,
            "forward_s": f.forward_s,
            "cold_start_s": f.cold_start_s,
            "cold_start": f.cold_start_dict(),
            "gpus": f.gpus,
            "source": f.source,
        }
        for k, f in enumerate(functions)
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanServerlessResult:
    """The candidates, the choice and why, with sources and assumptions."""

    plan: ServerlessPlan
    gpu: str
    functions: int
    price_usd_per_hour: float
    sources: dict[str, str]
    assumptions: dict[str, str]
    validation: Validation
    arrival_process: str = ""
    #: the predicted cold start's validated error (:func:`_coldstart_validation`; None when
    #: every model's cold start was measured)
    cold_start_validation: Validation | None = None
    #: each model whose cold start a stored run measured: that run's provenance
    cold_start_measured: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    models: tuple[GpuFunction, ...] = ()
    #: what a candidate's instance serves (``app`` or ``function``), how many of them, and the
    #: trace's applications (None: it has none)
    unit: str = "function"
    units: int = 0
    apps: dict[str, Any] | None = None
    #: the functions' names (empty: ``--unit app`` grouped them into apps)
    function_names: tuple[str, ...] = ()
    #: the flags whose default set the result (``--gpu``, ``--slo``)
    defaults: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "rejected_beyond_context": self.plan.rejected,
            "validation": self.validation.to_dict(),
            "cold_start_validation": None
            if self.cold_start_validation is None
            else self.cold_start_validation.to_dict(),
            "cold_start_measured": dict(self.cold_start_measured),
            "gpu": self.gpu,
            "defaults": list(self.defaults),
            "arrival_process": self.arrival_process,
            "unit": self.unit,
            "units": self.units,
            "apps": self.apps,
            "functions": self.functions,
            "models": _model_dicts(self.models, self.function_names or None, self.functions),
            "price_usd_per_hour": self.price_usd_per_hour,
            "sources": dict(self.sources),
            "assumptions": dict(self.assumptions),
            "warnings": list(self.warnings),
        }

"""What the training planner's parts share: the context a search runs in
(:class:`PlanContext`), the reasons a row is cut (and how to relax each), the search's
result (:class:`SearchResult`) and the extremes of the rows it let go (:class:`Unkept`,
:func:`_limits`). Split from :mod:`gpucast.plan.train`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import Catalog
from gpucast.domain.evaluation import EvaluationCost
from gpucast.domain.plan import ModelInfo, TrainRequest
from gpucast.domain.provenance import Assumption
from gpucast.domain.systems import ClusterSpec
from gpucast.plan.evaluate import Evaluation, Work
from gpucast.plan.infeasible import Limits, needed_deadline_s
from gpucast.plan.inputs import GpuPrecision, GpuTable, PerfParams, RiskInputs, WorkloadFacts
from gpucast.plan.risk import SpotOutcome
from gpucast.plan.space import Space
from gpucast.predict.convergence import ConvergenceCurve
from gpucast.predict.roofline import Calibration, RooflineEfficiency

IntArray = npt.NDArray[np.int64]


FloatArray = npt.NDArray[np.float64]


BoolArray = npt.NDArray[np.bool_]


R_SPOT = "not offered: no spot market for this instance"


R_BATCH = "global batch smaller than the number of workers"


R_CPU = "no CPU server for a parameter server in this region"


R_MEMORY = "does not fit in GPU memory"


R_HOST_MEMORY = "fits only with the optimizer in host memory, and the instance has too little"


R_DEADLINE = "misses the deadline"


R_BUDGET = "over budget"


R_RISK = "P(meet deadline) below --min-p-meet"


R_UNFINISHED = "spot: runs that never finish"


#: The reasons a search marks, by code (0: passed): a search labels its chunks with these
#: small integers and names only the rows it keeps (:func:`_reason_in` reads both).
_REASONS: tuple[str, ...] = (
    "",
    R_SPOT,
    R_BATCH,
    R_CPU,
    R_HOST_MEMORY,
    R_MEMORY,
    R_DEADLINE,
    R_RISK,
    R_BUDGET,
)


_REASON_NAMES = np.array(_REASONS, dtype=object)


RELAX = {
    R_SPOT: "drop spot (--no-spot) or pick instances with a spot market",
    R_BATCH: "raise --global-batch or lower --max-gpus",
    R_CPU: "use --strategy ddp/fsdp or a region with CPU servers",
    R_MEMORY: "pick GPUs with more memory (--gpu), allow FSDP with more GPUs (--max-gpus) or "
    "use a smaller --batch-size",
    R_HOST_MEMORY: "use more GPUs (the host state is partitioned over them: --max-gpus) or "
    "instances with more memory per GPU",
    R_DEADLINE: "relax --deadline or raise --max-gpus",
    R_BUDGET: "raise --budget",
    R_RISK: "lower --min-p-meet, relax --deadline, or narrow the step-time interval with a "
    "stored measurement of the workload (gpucast measure train)",
    R_UNFINISHED: "use on-demand (--no-spot)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanContext:
    """Everything the planner needs besides the request."""

    catalog: Catalog
    facts: WorkloadFacts
    perf: PerfParams
    risk: RiskInputs
    calibration: Calibration | None = None
    #: the roofline's efficiencies (fitted on published data, or the priors when None)
    efficiency: RooflineEfficiency | None = None
    models: tuple[ModelInfo, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    #: a user's cluster: searched instead of the catalog's offers
    cluster: ClusterSpec | None = None
    #: gCO2e per kWh of each (provider, region)'s grid (a region without a figure: no carbon)
    grid_gco2e_per_kwh: Mapping[tuple[str, str], float] = field(default_factory=dict)
    #: facility overhead on the GPUs' energy (1: the boards' energy alone)
    pue: float = 1.0
    #: samples to target at every global batch (None: the request's epochs/steps at its
    #: reference batch, scaled by the family's critical batch)
    work_curve: ConvergenceCurve | None = None
    #: evaluations the timed run holds (an MLPerf target's rules); None: none counted
    evaluation: EvaluationCost | None = None
    #: GPU types that train at their own precision (``--precision auto``): each one's
    #: precision, facts and calibration (a GPU not in it: ``facts`` and ``calibration``)
    per_gpu: Mapping[str, GpuPrecision] = field(default_factory=dict)
    #: Gbit/s per GPU of the data-parallel all-reduce inside a node, by (GPU type, GPUs in the
    #: node): the catalog's rule for its offers, the cluster's for a cluster (PCIe at NCCL's
    #: figures; :func:`gpucast.inputs.clusters.node_link_gbps`); a node not in it: the
    #: GPU's datasheet link (a cluster's: its node's)
    node_link_gbps: Mapping[tuple[str, int], float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """The raw arrays of a search (for benchmarks and tests); :func:`plan_training` uses it."""

    space: Space
    evaluation: Evaluation
    gpus: GpuTable
    work: Work
    reason: npt.NDArray[np.object_]  # first failing reason per row, "" when none
    dropped: dict[str, int]
    #: P(meet deadline) from the step-time model's uncertainty alone (no revocations): the
    #: answer for on-demand rows, an upper bound for spot ones; nan without a deadline
    p_model: FloatArray
    marked: dict[str, int]  # rows of the space dropped by search(), by reason
    ok: npt.NDArray[np.bool_]  # rows search() kept (reason "")
    #: rows of the whole space (with ``compact``, ``space`` holds only the kept ones)
    evaluated: int = 0
    #: what the "no feasible plan" message needs from rows not kept (``compact``)
    unkept: Unkept | None = None
    #: rows of the whole space that passed every check, by market
    passed_on_demand: int = 0
    passed_spot: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Unkept:
    """Extremes over the rows ``search(compact=True)`` evaluated and let go (``inf`` / ``-inf``
    / False when none): what :func:`_no_plan` says about the whole space."""

    any_fits_market: bool = False
    min_mem_bytes: float = math.inf
    #: over the rows cut by deadline, budget or risk only: which of them binds
    limits: Limits = field(default_factory=Limits)
    best_p_on_demand: float = -math.inf  # of those, on-demand P(meet deadline)
    min_host_need_bytes: float = math.inf  # offload rows short of host memory: least need
    max_host_bytes: float = -math.inf  # and the most host memory per GPU among them

    def merge(self, other: Unkept) -> Unkept:
        return Unkept(
            any_fits_market=self.any_fits_market or other.any_fits_market,
            min_mem_bytes=min(self.min_mem_bytes, other.min_mem_bytes),
            limits=self.limits.merge(other.limits),
            best_p_on_demand=max(self.best_p_on_demand, other.best_p_on_demand),
            min_host_need_bytes=min(self.min_host_need_bytes, other.min_host_need_bytes),
            max_host_bytes=max(self.max_host_bytes, other.max_host_bytes),
        )

    @staticmethod
    def of(
        space: Space,
        ev: Evaluation,
        reason: npt.NDArray[np.generic],
        p_model: FloatArray,
        rows: npt.NDArray[np.bool_],
        limits: Limits,
    ) -> Unkept:
        """The extremes over ``rows`` (a mask) of an evaluated chunk (``limits``: theirs,
        :func:`_limits`)."""
        if not rows.any():
            return Unkept()
        physical = rows & _reason_in(reason, (R_DEADLINE, R_BUDGET, R_RISK))
        od = physical & ~space.spot & np.isfinite(p_model)
        return Unkept(
            any_fits_market=bool((ev.fits & ev.has_market & rows).any()),
            min_mem_bytes=float(np.min(ev.mem_bytes[rows])),
            limits=limits,
            best_p_on_demand=float(np.max(p_model[od])) if od.any() else -math.inf,
            min_host_need_bytes=_host_extremes(space, ev, rows)[0],
            max_host_bytes=_host_extremes(space, ev, rows)[1],
        )


def _limits(
    request: TrainRequest,
    ctx: PlanContext,
    space: Space,
    ev: Evaluation,
    reason: npt.NDArray[np.generic],
    rows: npt.NDArray[np.bool_],
    spot_out: Mapping[int, SpotOutcome] | None = None,
) -> Limits:
    """:class:`Limits` over ``rows`` (a mask) that only the deadline, ``--min-p-meet`` or the
    budget cut (or none): the on-demand rows and the simulated spot rows (``spot_out``), which
    cost their simulated mean and, where the simulated P(meet) fell short of ``min_p_meet``,
    meet no deadline that can be named (revocations, not the step time, set it). Spot rows
    that were not simulated are left out: without revocations their time and cost would
    promise too much."""
    physical = rows & _reason_in(reason, ("", R_DEADLINE, R_BUDGET, R_RISK))
    simulated = np.zeros(len(space), dtype=bool)
    simulated[list(spot_out or {})] = True
    physical &= ~space.spot | simulated
    need = needed_deadline_s(
        time_s=ev.time_s,
        train_s=ev.train_s,
        ratio_lower=ev.train_ratio_lower,
        ratio_upper=ev.train_ratio_upper,
        spot=space.spot,
        startup_s=ctx.risk.startup_mean_s,
        min_p_meet=request.min_p_meet,
    )
    cost = ev.cost_usd
    if spot_out:
        cost = cost.copy()
        for i, out in spot_out.items():
            cost[i] = out.cost_mean_usd
            if out.p_meet_deadline is not None and out.p_meet_deadline < request.min_p_meet:
                need[i] = math.inf
    return Limits.of(
        rows=physical,
        time_s=ev.time_s,
        need_s=need,
        cost_usd=cost,
        deadline_s=request.deadline_s,
        budget_usd=request.budget_usd,
    )


def _reason_in(reason: npt.NDArray[np.generic], names: tuple[str, ...]) -> BoolArray:
    """Whether each row's reason is one of ``names``: ``reason`` holds the names, or a
    search's codes into :data:`_REASONS`."""
    if reason.dtype == object:
        return np.isin(reason, list(names))
    return np.isin(reason, [_REASONS.index(n) for n in names])


def _host_extremes(
    space: Space, ev: Evaluation, rows: npt.NDArray[np.bool_]
) -> tuple[float, float]:
    """(least host bytes per GPU an offload row short of host memory needs, most host bytes
    per GPU those rows' instances have) over ``rows``; (inf, -inf) without such rows."""
    short = rows & ev.host_short & ev.has_market
    host = space.offers.host_bytes_per_gpu
    if not short.any() or host is None:
        return math.inf, -math.inf
    return float(np.min(ev.host_bytes[short])), float(np.max(host[space.offer[short]]))

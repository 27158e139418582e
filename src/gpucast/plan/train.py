"""`plan train`: the cheapest (or fastest) cluster that meets the constraints, explained.

:func:`plan_training` runs the whole search:

1. filter the catalog's offers (provider, region, GPU; unknown names fail with close matches),
   or, for a user's cluster (``PlanContext.cluster``), take its offers
   (:func:`~gpucast.plan.space.cluster_offers`: 1..k GPUs of a node, whole nodes up to its
   node count, its own links and price; on demand only unless it has a spot price);
2. build every candidate row (:mod:`.space`) and evaluate all of them at once (:mod:`.evaluate`);
3. drop the infeasible ones, counting each by the first constraint it breaks (spot market,
   global batch, PS server, memory, deadline, budget);
4. P(meet deadline) folds in the step-time model's own uncertainty (:mod:`.uncertainty`):
   on-demand plans get it in closed form and must reach ``min_p_meet`` (as well as meet the
   deadline with the model's central value); spot candidates: a first-order revocation
   estimate ranks them, the Pareto front of (estimated time, estimated cost) survives pruning
   (at most ``max_simulated``, spread along the front) and each survivor gets ``mc_runs``
   Monte Carlo runs over strata of the speed factor (:mod:`.risk`); the budget and
   ``min_p_meet`` are then checked on the simulated mean cost and P(meet deadline);
5. the Pareto front of (time, cost, risk) over the feasible plans, the pick for each
   objective, and "what would help" for every shown candidate (:mod:`.explain`).

No feasible plan raises :class:`NoFeasiblePlanError` naming the constraint that excludes the
plans -- the deadline, the budget or the two together, with the deadline or budget that admits
one (:mod:`.infeasible`) -- else the constraint that cut the most candidates, and how to relax
it. Pure: the catalog, workload facts and risk inputs come in as
values; nothing here reads files, the clock or the terminal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field, fields, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import Catalog, Offer, estimated_prices_note
from gpucast.domain.errors import (
    InvalidSpecError,
    NoFeasiblePlanError,
    UnknownRegionError,
)
from gpucast.domain.evaluation import EvaluationCost
from gpucast.domain.options import is_default
from gpucast.domain.plan import (
    MAX_SAMPLES,
    BatchOption,
    LearnerOption,
    ModelInfo,
    PlanCandidate,
    TrainPlan,
    TrainRequest,
    WorkerPart,
)
from gpucast.domain.provenance import Assumption
from gpucast.domain.spot import SPOT_ONLY_OPTIONS, check_spot_only
from gpucast.domain.systems import NO_PRICE_NOTE, ClusterSpec
from gpucast.domain.units import GIB
from gpucast.plan.cluster_step import cluster_perf
from gpucast.plan.efficiency import at_batch_note, workload_family
from gpucast.plan.energy import OBJECTIVE_TIE, no_figure_error, ungridded_note
from gpucast.plan.evaluate import (
    BOTTLENECKS,
    EvalMemo,
    Evaluation,
    Work,
    evaluate,
    memory_plan_name,
)
from gpucast.plan.explain import explain
from gpucast.plan.goodput import (
    GOODPUT_BATCHES,
    WIDE_BATCH_OBJECTIVES,
    batch_choice,
    batch_why,
    efficiency_and_goodput,
)
from gpucast.plan.hetero import SPLIT_EQUAL, SPLIT_LABELS
from gpucast.plan.infeasible import Limits, binding, budget_flag, needed_deadline_s
from gpucast.plan.inputs import (
    GpuPrecision,
    GpuTable,
    PerfParams,
    RiskInputs,
    WorkloadFacts,
    build_gpu_table,
)
from gpucast.plan.learners import learner_choice
from gpucast.plan.pareto import first_least, nondominated, pareto_front_2d, spread
from gpucast.plan.risk import (
    SpotOutcome,
    WindowHazards,
    approx_spot_time_s,
)
from gpucast.plan.space import (
    CHUNK_ROWS,
    PS,
    PS_SYNC,
    STRATEGY_LABELS,
    OfferTable,
    Space,
    cluster_offers,
    concat,
    market_twins,
    ps_prototypes,
    single_chunk_count,
    space_chunks,
    twin_source,
)
from gpucast.plan.spot_rows import hazards, lifetime_of, mean_gaps, part_offers, simulate_rows
from gpucast.plan.uncertainty import SPOT_STRATA, p_meet_deadline
from gpucast.predict.convergence import ConvergenceCurve
from gpucast.predict.roofline import Calibration, RooflineEfficiency
from gpucast.predict.variability import PROBE_S

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

#: How many shown candidates at most (the front is thinned evenly beyond this).
MAX_SHOWN_FRONT = 24


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


class OfferFilters(Protocol):
    """The catalog filters of a planning request (``--provider --region --gpu --exclude-gpu``
    of ``plan train`` and ``plan llm-train``)."""

    @property
    def providers(self) -> tuple[str, ...]: ...
    @property
    def regions(self) -> tuple[str, ...]: ...
    @property
    def gpus(self) -> tuple[str, ...]: ...
    @property
    def exclude_gpus(self) -> tuple[str, ...]: ...


def _resolve_names(
    request: OfferFilters, catalog: Catalog
) -> tuple[set[str], set[str], set[str], set[str]]:
    """Canonical (providers, regions, wanted GPUs, excluded GPUs); unknown names raise."""
    providers = {p.lower() for p in request.providers}
    for p in providers:
        catalog.find_offers(provider=p)  # raises UnknownProviderError with close matches
    known_regions = set(catalog.regions())
    lowered = {k.lower(): k for k in known_regions}
    regions = set()
    for r in request.regions:
        if r.lower() not in lowered:
            raise UnknownRegionError(r, known_regions, fix="see `gpucast catalog offers`")
        regions.add(lowered[r.lower()])
    wanted = {catalog.gpu(g).name for g in request.gpus}
    excluded = {catalog.gpu(g).name for g in request.exclude_gpus}
    if wanted & excluded:
        raise InvalidSpecError(
            "gpu/exclude-gpu",
            f"{sorted(wanted & excluded)[0]} is both required and excluded",
            fix="drop it from --gpu or from --exclude-gpu",
        )
    return providers, regions, wanted, excluded


def filtered_offers(request: OfferFilters, catalog: Catalog) -> tuple[list[Offer], list[Offer]]:
    """The catalog's (GPU offers, CPU-only offers) that ``request``'s filters keep; unknown
    names raise, and no GPU offer left is :class:`NoFeasiblePlanError` naming the filters."""
    providers, regions, wanted, excluded = _resolve_names(request, catalog)
    gpu_offers = []
    cpu_offers = []
    for o in catalog.offers:
        if providers and o.provider not in providers:
            continue
        if regions and o.region not in regions:
            continue
        if o.gpu is None:
            cpu_offers.append(o)
            continue
        if (wanted and o.gpu not in wanted) or o.gpu in excluded:
            continue
        gpu_offers.append(o)
    if not gpu_offers:
        what = []
        if providers:
            what.append(f"--provider {','.join(sorted(providers))}")
        if regions:
            what.append(f"--region {','.join(sorted(regions))}")
        if wanted:
            what.append(f"--gpu {','.join(sorted(wanted))}")
        if excluded:
            what.append(f"--exclude-gpu {','.join(sorted(excluded))}")
        raise NoFeasiblePlanError(
            f"no GPU offer in the catalog matches {' '.join(what) or 'the filters'}",
            fix="relax the filters; see `gpucast catalog offers` for what is offered where",
        )
    return gpu_offers, cpu_offers


def _offers(
    request: OfferFilters,
    catalog: Catalog,
    node_link_gbps: Mapping[tuple[str, int], float] | None = None,
) -> OfferTable:
    gpu_offers, cpu_offers = filtered_offers(request, catalog)
    names = sorted({str(o.gpu) for o in gpu_offers})
    index = {n: i for i, n in enumerate(names)}
    return OfferTable.build(gpu_offers, cpu_offers, index, node_link_gbps)


def planned_gpus(
    request: OfferFilters, catalog: Catalog, cluster: ClusterSpec | None = None
) -> tuple[str, ...]:
    """The GPU types a search of ``request`` evaluates: the cluster's, or those of the
    catalog offers its filters keep (unknown names and an empty selection raise as in
    :func:`search`)."""
    if cluster is not None:
        return (catalog.gpu(cluster.gpu).name,)
    return tuple(sorted(set(_offers(request, catalog).gpu_name)))


def _cluster_table(ctx: PlanContext) -> OfferTable:
    assert ctx.cluster is not None
    return cluster_offers(ctx.cluster, ctx.catalog.gpu(ctx.cluster.gpu), 0, ctx.node_link_gbps)


def with_cluster(ctx: PlanContext) -> PlanContext:
    """``ctx`` whose collective constants know the cluster's network: an RDMA-class one
    (InfiniBand, RoCE, EFA) joins ``rdma_instances`` under its offers' names, as the
    catalog's RDMA instance types do. Unchanged without a cluster (and when applied twice)."""
    if ctx.cluster is None:
        return ctx
    perf = cluster_perf(ctx.perf, ctx.cluster, _cluster_table(ctx))
    return ctx if perf is ctx.perf else replace(ctx, perf=perf)


def within_cluster(request: TrainRequest, cluster: ClusterSpec) -> TrainRequest:
    """The request the cluster's space is built from: its whole size unless ``--max-gpus``
    says less, and on demand only unless the cluster has a spot price. A budget needs a
    price: without one every plan costs $0 and ``--budget`` would hold whatever it is."""
    cluster.check_budget(request.budget_usd)
    check_spot_only(  # before the request turns on demand below, in the cluster's words
        request,
        spot=cluster.has_spot,
        names=(*SPOT_ONLY_OPTIONS, "elastic"),
        market=f"the cluster {cluster.name} has no spot price",
        fix="give the cluster a spot price (--cluster-set spot_usd_per_gpu_hour=...)",
    )
    max_gpus = cluster.max_gpus if is_default(request, "max_gpus") else request.max_gpus
    return replace(request, max_gpus=max_gpus, allow_spot=request.allow_spot and cluster.has_spot)


def make_work(
    request: TrainRequest,
    facts: WorkloadFacts,
    curve: ConvergenceCurve | None = None,
    evaluation: EvaluationCost | None = None,
) -> Work:
    dataset = None if request.dataset_size is None else float(request.dataset_size)
    if curve is not None:
        ref = curve.reference_batch
        return Work(
            samples_at_reference=float(curve.samples([ref])[0]),
            reference_batch=ref,
            critical_batch=curve.noise_batch,
            dataset_size=dataset,
            curve=curve,
            evaluation=evaluation,
        )
    fam = workload_family(request.workload)
    ref = float(request.reference_batch or fam.reference_batch)
    crit = float(request.critical_batch or fam.critical_batch)
    if request.steps is not None:
        samples = float(request.steps) * ref
    elif request.epochs is None or request.dataset_size is None:
        raise InvalidSpecError(
            "epochs" if request.epochs is None else "dataset-size",
            "is required (the amount of work: --epochs with --dataset-size, or --steps)",
            fix="e.g. --epochs 90 --dataset-size 1281167",
        )
    else:
        samples = float(request.epochs) * float(request.dataset_size)
    if not samples <= MAX_SAMPLES:
        flag = "steps" if request.steps is not None else "epochs"
        raise InvalidSpecError(
            flag,
            f"asks for {samples:.3g} samples at the reference batch of {ref:g}, more than any "
            f"job trains on ({MAX_SAMPLES:.3g})",
            fix=f"check --{flag}" + (" and --reference-batch" if flag == "steps" else ""),
        )
    return Work(
        samples_at_reference=samples,
        reference_batch=ref,
        critical_batch=crit,
        dataset_size=None if request.dataset_size is None else float(request.dataset_size),
    )


def search(
    request: TrainRequest,
    ctx: PlanContext,
    *,
    compact: bool = False,
    executor: Executor | None = None,
    workers: int = 1,
) -> SearchResult:
    """Build and evaluate the whole space; label each row with its first failing reason.

    With ``compact`` the space is evaluated a chunk at a time (:func:`space_chunks`) and only
    the rows that pass every check, with their twins in the other market, are kept (with all
    their columns); the extremes the error message needs are kept from the others
    (:class:`Unkept`). Memory then grows with the survivors, not with the space: the planner
    itself always searches this way, the full arrays are for tests and benchmarks.
    ``executor`` (``workers`` worker processes) scans runs of the chunks side by side, a
    space of :data:`PARALLEL_MIN_CHUNKS` chunks or more: the same result.
    """
    cluster = ctx.cluster
    if cluster is None:
        offers = _offers(request, ctx.catalog, ctx.node_link_gbps)
        space_request = request
    else:
        ctx = with_cluster(ctx)
        offers = _cluster_table(ctx)
        space_request = within_cluster(request, cluster)
    if request.objective in WIDE_BATCH_OBJECTIVES and is_default(request, "batch_sizes"):
        space_request = replace(space_request, batch_sizes=GOODPUT_BATCHES)
    specs = [ctx.catalog.gpu(n) for n in sorted(set(offers.gpu_name))]
    gpus = build_gpu_table(
        ctx.facts,
        specs,
        calibration=ctx.calibration,
        efficiency=ctx.efficiency,
        per_gpu=ctx.per_gpu,
    )
    count = single_chunk_count(space_request, offers)
    parts = 0
    if compact and executor is not None and count >= PARALLEL_MIN_CHUNKS:
        parts = min(count, 4 * workers)
    chunks, dropped = space_chunks(space_request, offers, mixed_only=parts > 0)
    work = make_work(request, ctx.facts, ctx.work_curve, ctx.evaluation)
    memo = EvalMemo(space_request.max_gpus)
    warm = ps_prototypes(space_request, offers)
    if warm is not None:  # every PS network solved once, up front (the memo keeps them)
        evaluate(warm, facts=ctx.facts, gpus=gpus, params=ctx.perf, work=work,
                 startup_s=ctx.risk.startup_mean_s, memo=memo)  # fmt: skip
    scan = _Scan(request, ctx, gpus, work, memo)
    if not compact:
        space = _concat_spaces(list(chunks))
        ev, reason, p_model, ok, _ = scan.run(space)
        return SearchResult(
            space=space, evaluation=ev, gpus=gpus, work=work, reason=_REASON_NAMES[reason],
            dropped=dropped,
            p_model=p_model, marked=scan.marked, ok=ok, evaluated=len(space), unkept=Unkept(),
            passed_on_demand=int(np.count_nonzero(ok & ~space.spot)),
            passed_spot=int(np.count_nonzero(ok & space.spot)),
        )  # fmt: skip
    if parts:  # runs of chunks in worker processes, taken in order
        args = (request, ctx, space_request, offers, gpus, work, memo)
        assert executor is not None
        futures = [executor.submit(_scan_part, *args, (k, parts)) for k in range(parts)]
        try:
            for future in futures:
                scan.absorb(future.result())
        finally:  # an error (here or in a worker): the runs not started are not
            for future in futures:
                future.cancel()
    for chunk in chunks:
        scan.add(chunk)
    rows = _concat_rows(scan.kept)
    return SearchResult(
        space=rows[0],
        evaluation=rows[1],
        gpus=gpus,
        work=work,
        reason=_REASON_NAMES[rows[2]],
        dropped=dropped,
        p_model=rows[3],
        marked=scan.marked,
        ok=rows[4],
        evaluated=scan.evaluated,
        unkept=scan.unkept,
        passed_on_demand=scan.passed[0],
        passed_spot=scan.passed[1],
    )


#: Single-type chunks below which a search runs in this process: a plan of fewer takes a few
#: seconds at most, about what starting worker processes costs (``--max-gpus 1024``: 116).
PARALLEL_MIN_CHUNKS = 24


class _Scan:
    """A compact search's state over the chunks it has evaluated, in order: the rows worth
    keeping (pruned again over all chunks once they pass :data:`REPRUNE_ROWS`), the extremes
    of the rows let go, counts. A worker process scans a run of chunks into one
    (:func:`_scan_part`) and the caller absorbs the runs in order: the same rows as one scan."""

    def __init__(
        self, request: TrainRequest, ctx: PlanContext, gpus: GpuTable, work: Work, memo: EvalMemo
    ) -> None:
        self.request, self.ctx, self.gpus, self.work, self.memo = request, ctx, gpus, work, memo
        self.marked: dict[str, int] = {}
        self.kept: list[_Rows] = []
        self.held = 0  # rows in `kept`
        self.unkept = Unkept()
        self.evaluated = 0
        self.passed = [0, 0]  # on demand, spot
        self.cache = _Pruning()

    def run(
        self, chunk: Space
    ) -> tuple[Evaluation, npt.NDArray[np.int8], FloatArray, BoolArray, IntArray]:
        twin = market_twins(chunk)  # chunks keep space_chunks' layout: twins are findable
        ev = evaluate(
            chunk,
            twin=twin,
            facts=self.ctx.facts,
            gpus=self.gpus,
            params=self.ctx.perf,
            work=self.work,
            startup_s=self.ctx.risk.startup_mean_s,
            memo=self.memo,
        )
        reason, ok, p_model = _mark(
            self.request, self.ctx, chunk, ev, self.marked, source=twin_source(chunk, twin)
        )
        return ev, reason, p_model, ok, twin

    def let_go(self, rows: _Rows, twin: IntArray | None = None) -> _Rows:
        """The rows of ``rows`` worth keeping; the others' extremes go to ``unkept``."""
        part, ev, reason, p_model, ok = rows
        keep = _worth_keeping(
            part, ev, ok, self.ctx, self.work, self.cache, elastic=self.request.elastic,
            twin=twin,
        )  # fmt: skip
        limits = _limits(self.request, self.ctx, part, ev, reason, ~keep)
        self.unkept = self.unkept.merge(Unkept.of(part, ev, reason, p_model, ~keep, limits))
        idx = np.flatnonzero(keep)
        return part.take(idx), _take(ev, idx), reason[idx], p_model[idx], ok[idx]

    def add(self, chunk: Space) -> None:
        ev, reason, p_model, ok, twin = self.run(chunk)
        self.evaluated += len(chunk)
        self.passed[0] += int(np.count_nonzero(ok & ~chunk.spot))
        self.passed[1] += int(np.count_nonzero(ok & chunk.spot))
        self.keep(self.let_go((chunk, ev, reason, p_model, ok), twin))

    def keep(self, rows: _Rows) -> None:
        if len(rows[0]) or not self.kept:  # (the first chunk's rows, even none, set the shapes)
            self.kept.append(rows)
            self.held += len(rows[0])
        if self.held > REPRUNE_ROWS and len(self.kept) > 1:
            # what each chunk kept, kept again over all of them: a row another chunk beats
            # goes (the front of fronts is the front), so `kept` stays near the plan's size
            self.kept = [self.let_go(_concat_rows(self.kept))]
            self.held = len(self.kept[0][0])

    def absorb(self, other: _Scanned) -> None:
        """A worker's run of the next chunks (:func:`_scan_part`), as if scanned here."""
        for why, k in other.marked.items():
            self.marked[why] = self.marked.get(why, 0) + k
        self.unkept = self.unkept.merge(other.unkept)
        self.evaluated += other.evaluated
        self.passed = [a + b for a, b in zip(self.passed, other.passed, strict=True)]
        for key in other.lifetimes:  # looked up here too: the plan's sources name them all
            lifetime_of(self.ctx, self.cache.lifetimes, key)
        if other.rows is not None:
            self.keep(other.rows)


@dataclass(frozen=True, slots=True)
class _Scanned:
    """What a worker's :class:`_Scan` of a run of chunks hands back."""

    rows: _Rows | None
    marked: dict[str, int]
    unkept: Unkept
    evaluated: int
    passed: tuple[int, int]
    lifetimes: tuple[tuple[str, str, str], ...]  # the spot lifetimes its pruning looked up


def _scan_part(
    request: TrainRequest,
    ctx: PlanContext,
    space_request: TrainRequest,
    offers: OfferTable,
    gpus: GpuTable,
    work: Work,
    memo: EvalMemo,
    part: tuple[int, int],
) -> _Scanned:
    """One run of the space's chunks scanned (a task a worker process runs)."""
    scan = _Scan(request, ctx, gpus, work, memo)
    chunks, _ = space_chunks(space_request, offers, part=part)
    for chunk in chunks:
        scan.add(chunk)
    rows = _concat_rows(scan.kept) if scan.kept else None
    passed = (scan.passed[0], scan.passed[1])
    lifetimes = tuple(scan.cache.lifetimes)
    return _Scanned(rows, scan.marked, scan.unkept, scan.evaluated, passed, lifetimes)


def _mark(
    request: TrainRequest,
    ctx: PlanContext,
    space: Space,
    ev: Evaluation,
    marked: dict[str, int],
    *,
    source: IntArray | None = None,
) -> tuple[npt.NDArray[np.int8], BoolArray, FloatArray]:
    """Each row's first failing reason (a code into :data:`_REASONS`, 0 when none), whether
    it passed, and its P(meet deadline) from the model's uncertainty; ``marked`` counts the
    reasons. ``source`` (:func:`gpucast.plan.space.twin_source`): rows whose P(meet) is
    another row's, computed once."""
    reason = np.zeros(len(space), dtype=np.int8)  # codes into _REASONS
    open_rows = np.ones(len(space), dtype=bool)  # rows with no reason yet

    def mark(mask: npt.NDArray[np.bool_], why: str) -> None:
        hit = open_rows & mask
        reason[hit] = _REASONS.index(why)
        open_rows[hit] = False
        k = int(np.count_nonzero(hit))
        if k:
            marked[why] = marked.get(why, 0) + k

    mark(~ev.has_market, R_SPOT)
    mark(~ev.valid_batch, R_BATCH)
    mark(np.isin(space.strategy, (PS, PS_SYNC)) & ~ev.has_cpu, R_CPU)
    mark(~ev.fits & ev.host_short, R_HOST_MEMORY)
    mark(~ev.fits, R_MEMORY)
    p_model = np.full(len(space), np.nan)
    if request.deadline_s is not None:
        rows = (
            np.arange(len(space))
            if source is None
            else np.flatnonzero(source == np.arange(len(space)))
        )
        at = np.zeros(len(space), dtype=np.int64)
        at[rows] = np.arange(rows.size)
        p_model = p_meet_deadline(
            request.deadline_s,
            ctx.risk.startup_mean_s,
            ev.train_s[rows],
            ev.train_ratio_lower[rows],
            ev.train_ratio_upper[rows],
        )[at if source is None else at[source]]
        late = ev.time_s > request.deadline_s
        # on demand: the central value must meet the deadline and P(meet) reach min_p_meet;
        # spot: revocations only slow a plan down, so P(meet) <= p_model -- drop the ones
        # that cannot reach min_p_meet even without revocations (min_p_meet 0: any risk)
        hopeless = p_model < request.min_p_meet
        mark(late & (~space.spot | hopeless), R_DEADLINE)
        mark(hopeless, R_RISK)
    if request.budget_usd is not None:
        mark(~space.spot & (ev.cost_usd > request.budget_usd), R_BUDGET)
    return reason, open_rows, p_model


def _concat_spaces(parts: list[Space]) -> Space:
    return concat(*parts)


#: Rows of a compact search: space, evaluation, reason, P(meet) of the model, passed.
_Rows = tuple[Space, Evaluation, npt.NDArray[np.int8], FloatArray, BoolArray]
#: Rows a compact search holds before it prunes what its chunks kept over all of them.
REPRUNE_ROWS = CHUNK_ROWS


def _concat_rows(parts: list[_Rows]) -> _Rows:
    return (
        _concat_spaces([p[0] for p in parts]),
        _concat_evaluations([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[3] for p in parts]),
        np.concatenate([p[4] for p in parts]),
    )


def _take(ev: Evaluation, idx: IntArray) -> Evaluation:
    # np.take: ~10x faster than indexing for the 2-D columns (part_batch, ...)
    return Evaluation(
        **{f.name: np.take(getattr(ev, f.name), idx, axis=0) for f in fields(Evaluation)}
    )


def _concat_evaluations(parts: list[Evaluation]) -> Evaluation:
    if len(parts) == 1:
        return parts[0]
    return Evaluation(
        **{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Evaluation)}
    )


@dataclass
class _Pruning:
    """Per-offer caches of the spot pruning estimate (lifetimes, their window hazards,
    capacity gaps)."""

    lifetimes: dict[tuple[str, str, str], object] = field(default_factory=dict)
    windows: dict[int, WindowHazards] = field(default_factory=dict)
    gaps: dict[int, float] = field(default_factory=dict)


def _mc_noise(spot: SpotOutcome) -> str:
    """The Monte Carlo's own noise of a spot row's mean time and cost (95% CI half-widths,
    relative), or nothing where it is unknown."""
    t, c = spot.time_ci95_half_s, spot.cost_ci95_half_usd
    if not (math.isfinite(t) and math.isfinite(c) and spot.time_mean_s > 0 < spot.cost_mean_usd):
        return ""
    return (
        f"; the Monte Carlo's 95% CI +-{t / spot.time_mean_s:.1%} time, "
        f"+-{c / spot.cost_mean_usd:.1%} cost"
    )


def _spot_estimates(
    space: Space,
    ev: Evaluation,
    ctx: PlanContext,
    rows: IntArray,
    cache: _Pruning,
    *,
    elastic: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """First-order (time, cost) of spot ``rows`` with revocations (the pruning estimate). An
    elastic synchronous row loses no work to a revocation: it pays the restart penalty and
    runs without the node for its capacity gap and start-up (``1 / nodes`` of its progress)."""
    hz = hazards(space, ctx, rows, ev.train_s[rows], cache.lifetimes, cache.windows)
    gaps = mean_gaps(space, ctx, rows, cache.gaps)
    approx_t = approx_spot_time_s(
        ev.train_s[rows],
        hz,
        checkpoint_s=ctx.risk.checkpoint_s(ctx.facts),
        restart_s=ctx.risk.restart_penalty_s + gaps,
        startup_s=ctx.risk.startup_mean_s,
    )
    if elastic:
        nodes = space.nodes[rows] + space.count2[rows]
        lost = ctx.risk.restart_penalty_s + (gaps + ctx.risk.startup_mean_s) / nodes
        flowing = ctx.risk.startup_mean_s + ev.train_s[rows] * (1.0 + hz * lost)
        approx_t = np.where(space.strategy[rows] != PS, flowing, approx_t)
    return approx_t, approx_t / 3600.0 * ev.usd_per_hour[rows]


def _worth_keeping(
    space: Space,
    ev: Evaluation,
    ok: BoolArray,
    ctx: PlanContext,
    work: Work,
    cache: _Pruning,
    *,
    elastic: bool = False,
    twin: IntArray | None = None,
) -> BoolArray:
    """The rows a plan can still show, pick or simulate, whatever the other chunks hold
    (see :func:`plan_training`): of the passing on-demand rows, the (time, cost) front, the
    cheapest of each GPU type (mixed: one type), the most goodput, the least energy and
    carbon; of the passing spot rows, the front of the pruning estimate. Then their twins in
    the other market (what "spot saves ..." compares with) and their siblings at every
    batch on the same hardware (what the batch choice lists)."""
    keep = np.zeros(len(space), dtype=bool)
    od = np.flatnonzero(ok & ~space.spot)
    if od.size:
        t = ev.time_s[od]
        c = _cost_or_gpu_hours(ctx, ev.cost_usd[od], ev.workers[od] * t)
        keep[od[pareto_front_2d(t, c)]] = True
        gpu_of = np.where(space.mixed[od], -1, space.offers.gpu[space.offer[od]])
        order = np.lexsort((c, gpu_of))  # stable: the first cheapest per type
        first = np.r_[True, gpu_of[order][1:] != gpu_of[order][:-1]]
        keep[od[order[first]]] = True
        good = ev.samples_per_s[od] * (work.samples_at_reference / ev.samples_needed[od])
        keep[od[first_least(-good, t, c)]] = True
        kwh = ev.workers[od] * ev.gpu_power_w[od] * ev.train_s[od] * ctx.pue / 3.6e6
        off = space.offers
        per_offer = np.array(
            [ctx.grid_gco2e_per_kwh.get(pr, np.nan)
             for pr in zip(off.provider, off.region, strict=True)],
            dtype=np.float64,
        )  # fmt: skip
        intensity = per_offer[space.offer[od]]
        for values in (kwh, kwh * intensity):
            known = np.flatnonzero(np.isfinite(values))
            if known.size:
                keep[od[known[first_least(values[known], c[known], t[known])]]] = True
    sp = np.flatnonzero(ok & space.spot)
    if sp.size:
        t, c = _spot_estimates(space, ev, ctx, sp, cache, elastic=elastic)
        keep[sp[pareto_front_2d(t, c)]] = True
    twin = market_twins(space) if twin is None else twin
    keep |= (twin >= 0) & keep[np.maximum(twin, 0)]
    if keep.any():  # every batch on a kept row's hardware, strategy and market
        key = np.stack([space.offer, space.nodes, space.part2, space.count2], axis=1)
        block = np.cumsum(np.r_[True, np.any(key[1:] != key[:-1], axis=1)])
        code = ((block * 8 + space.strategy) * (int(space.shards.max()) + 1) + space.shards) * 2
        code = code + space.spot
        hit = np.zeros(int(code.max()) + 1, dtype=bool)  # codes are small: a lookup table
        hit[code[keep]] = True
        keep |= hit[code]
    return keep


def _cost_or_gpu_hours(ctx: PlanContext, cost_usd: FloatArray, gpu_s: FloatArray) -> FloatArray:
    """What the front and 'cheapest' rank by: US$, or on a cluster without a price (every
    plan $0, where the $ front is one point and would drop the single-node layouts) the
    GPU-hours billed (``gpu_s`` / 3600), in the pruning and in the plan alike."""
    if ctx.cluster is not None and not ctx.cluster.priced:
        return gpu_s / 3600.0
    return cost_usd


def _batch_flag(request: TrainRequest) -> str:
    """The flag that set the batches searched."""
    if request.global_batch is not None:
        return "--global-batch"
    return "--batch-size" if request.batch_size is not None else "--batch-sizes"


def _no_plan(
    request: TrainRequest,
    ctx: PlanContext,
    res: SearchResult,
    counts: dict[str, int],
    spot_out: dict[int, SpotOutcome],
) -> NoFeasiblePlanError:
    worst = max(counts, key=lambda k: counts[k])
    ev, reason = res.evaluation, res.reason
    gone = res.unkept or Unkept()  # extremes over the rows a compact search let go
    fix = RELAX.get(worst, "relax the constraints")
    physical = np.isin(reason, ["", R_DEADLINE, R_BUDGET, R_RISK])
    # what stopped the rows searched: those never generated (--max-gpus) out-count them
    # easily, and their message would hide the memory that stopped every searched instance
    searched = {k: n - res.dropped.get(k, 0) for k, n in counts.items()}
    inner = max(searched, key=lambda k: searched[k]) if any(searched.values()) else worst
    if inner == R_MEMORY and not ((ev.fits & ev.has_market).any() or gone.any_fits_market):
        need = min(float(np.min(ev.mem_bytes, initial=math.inf)), gone.min_mem_bytes) / GIB
        most = float(np.max(res.gpus.usable_bytes)) / GIB
        return NoFeasiblePlanError(
            f"{request.workload} fits no GPU with any strategy: the smallest need is "
            f"{need:.1f} GiB per GPU, the largest usable is {most:.1f} GiB",
            # the flag the batch came from (QA 39 Y #17: --batch-sizes 65536 read "--batch-size")
            fix=f"use a smaller {_batch_flag(request)}, more GPUs for FSDP (--max-gpus) or "
            "larger GPUs",
        )
    if inner == R_HOST_MEMORY and not ((ev.fits & ev.has_market).any() or gone.any_fits_market):
        here = _host_extremes(res.space, ev, np.ones(len(res.space), dtype=bool))
        need = min(here[0], gone.min_host_need_bytes) / GIB
        have = max(here[1], gone.max_host_bytes) / GIB
        return NoFeasiblePlanError(
            f"{request.workload} fits in GPU memory only with its optimizer state (or also its "
            "parameters) in host memory (ZeRO-Offload / ZeRO-Infinity)"
            + ("" if request.nvme_gbps is None else ", or on NVMe with the gradients in it")
            + f", which needs at least {need:.1f} GiB per GPU; the offers "
            f"have at most {have:.1f} GiB per GPU",
            fix="raise --max-gpus (the host state is partitioned over the GPUs), pick "
            "instances with more memory per GPU"
            + (
                ""
                if request.nvme_gbps is not None
                else ", or give --nvme-gbps (the node's "
                "local NVMe holds the optimizer state, ZeRO-Infinity)"
            ),
        )
    everything = np.ones(len(res.space), dtype=bool)
    limits = _limits(request, ctx, res.space, ev, reason, everything, spot_out).merge(gone.limits)
    binds = binding(
        limits,
        deadline_s=request.deadline_s,
        budget_usd=request.budget_usd,
        min_p_meet=request.min_p_meet,
        deadline_default=is_default(request, "deadline_s"),
    )
    if binds is not None:
        return binding_error(binds, counts)
    fastest = limits.fastest_s
    if worst == R_DEADLINE and math.isfinite(fastest):
        fix = deadline_fix(fastest)
    elif worst == R_BUDGET:
        cheapest = limits.cheapest_on_time_usd
        if math.isfinite(cheapest):
            fix = budget_fix(cheapest)
    elif worst == R_RISK:
        p = [s.p_meet_deadline or 0.0 for s in spot_out.values()]
        od = physical & ~res.space.spot & np.isfinite(res.p_model)
        if od.any():
            p.append(float(np.max(res.p_model[od])))
        if math.isfinite(gone.best_p_on_demand):
            p.append(gone.best_p_on_demand)
        if p:
            fix = (
                f"the best plan meets the deadline with p={max(p):.2f} (revocations and the "
                f"step-time model's interval): lower --min-p-meet, relax --deadline or "
                "calibrate the model with a stored measurement (gpucast measure train)"
            )
    return no_plan_error(counts, fix=fix)


def deadline_fix(fastest_s: float, *, plan: str = "", more: str = "raise --max-gpus") -> str:
    """What a plan that no candidate meets the deadline of says to do: the fastest candidate's
    time (``plan``: which one it is) and the deadline that it would meet."""
    named = f" ({plan})" if plan else ""
    return (
        f"the fastest plan takes {fastest_s / 3600:.1f} h{named}: relax --deadline to at least "
        f"{math.ceil(fastest_s / 3600)}h or {more}"
    )


def budget_fix(cheapest_usd: float, *, plan: str = "") -> str:
    """What a plan that no candidate meets the budget of says to do: the cost of the cheapest
    candidate that meets the deadline (``plan``: which one it is), in cents, and a ``--budget``
    rounded up from it (whole dollars named a figure below the cost, QA 39 F8 #1)."""
    named = f" ({plan})" if plan else ""
    return (
        f"the cheapest plan costs ${cheapest_usd:,.2f}{named}: raise --budget to at least "
        f"{budget_flag(cheapest_usd)}"
    )


def binding_error(binds: tuple[str, str], counts: Mapping[str, int]) -> NoFeasiblePlanError:
    """No candidate is feasible and :func:`~gpucast.plan.infeasible.binding` told which limit
    excludes the plans (``binds``: what, how to relax it); ``counts``: candidates by reason."""
    what, fix = binds
    worst = max(counts, key=lambda k: counts[k])
    return NoFeasiblePlanError(
        f"no feasible plan: {what} ('{worst}' cut the most candidates: "
        f"{counts[worst]:,} of {sum(counts.values()):,})",
        fix=fix,
    )


def no_plan_error(counts: Mapping[str, int], *, fix: str) -> NoFeasiblePlanError:
    """No candidate is feasible: the reason that cut the most of them (``counts``: candidates
    by reason), and ``fix``."""
    worst = max(counts, key=lambda k: counts[k])
    return NoFeasiblePlanError(
        f"no feasible plan: '{worst}' cut the most candidates ({counts[worst]:,} of "
        f"{sum(counts.values()):,})",
        fix=fix,
    )


def plan_training(
    request: TrainRequest,
    ctx: PlanContext,
    *,
    executor: Executor | None = None,
    workers: int = 1,
) -> TrainPlan:
    """Search, simulate the surviving spot plans, pick and explain (module docstring);
    ``executor`` (``workers`` worker processes) searches a large space side by side."""
    ctx = with_cluster(ctx)
    res = search(request, ctx, compact=True, executor=executor, workers=workers)
    space, ev, reason = res.space, res.evaluation, res.reason
    counts: dict[str, int] = dict(res.dropped)
    lifetimes: dict[tuple[str, str, str], object] = {}

    # the search kept every passing row a plan can show or simulate (and counted them all)
    od_ok = np.flatnonzero(res.ok & ~space.spot)
    spot_pre = np.flatnonzero(res.ok & space.spot)
    spot_out: dict[int, SpotOutcome] = {}
    pruned = 0
    if spot_pre.size:
        approx_t, approx_c = _spot_estimates(
            space, ev, ctx, spot_pre, _Pruning(lifetimes=lifetimes), elastic=request.elastic
        )
        front = pareto_front_2d(approx_t, approx_c)
        chosen = spot_pre[spread(front, request.max_simulated)]
        pruned = int(res.passed_spot - chosen.size)
        spot_out = simulate_rows(res, ctx, request, chosen.tolist(), lifetimes)

    # feasibility of the simulated spot plans
    spot_ok: list[int] = []
    for i, out in spot_out.items():
        if not math.isfinite(out.time_mean_s) and request.deadline_s is None:
            why = R_UNFINISHED
        elif (
            request.deadline_s is not None
            and out.p_meet_deadline is not None
            and out.p_meet_deadline < request.min_p_meet
        ):
            why = R_RISK
        elif request.budget_usd is not None and out.cost_mean_usd > request.budget_usd:
            why = R_BUDGET
        elif not math.isfinite(out.time_mean_s) and request.min_p_meet > 0:
            why = R_UNFINISHED
        else:
            spot_ok.append(i)
            continue
        reason[i] = why
        counts[why] = counts.get(why, 0) + 1
    for why, k in res.marked.items():
        counts[why] = counts.get(why, 0) + k

    feasible = int(res.passed_on_demand + len(spot_ok))
    if feasible == 0:
        raise _no_plan(request, ctx, res, counts, spot_out)

    # time / cost / risk of every feasible plan
    rows = np.concatenate([od_ok, np.asarray(spot_ok, dtype=np.int64)])
    t = ev.time_s[rows].copy()
    c = ev.cost_usd[rows].copy()
    risk = np.nan_to_num(1.0 - res.p_model[rows], nan=0.0)
    # GPU-seconds billed (on demand: the whole run, and the probe nodes' start-up and minute)
    gpu_s = ev.workers[rows] * t + _probe_gpus(ctx, res, rows) * (ctx.risk.startup_mean_s + PROBE_S)
    for j, i in enumerate(spot_ok, start=od_ok.size):
        out = spot_out[i]
        t[j], c[j] = out.time_mean_s, out.cost_mean_usd
        risk[j] = 0.0 if out.p_meet_deadline is None else 1.0 - out.p_meet_deadline
        # spot: what the Monte Carlo billed (not the capacity gaps, when no node runs)
        gpu_s[j] = ev.workers[i] * t[j] if out.gpu_hours_mean is None else out.gpu_hours_mean * 3600
    c = _cost_or_gpu_hours(ctx, c, gpu_s)
    cheapest = int(np.lexsort((t, c))[0])
    fastest = int(np.lexsort((c, t))[0])
    kwh, co2 = _energy(ctx, res, rows, gpu_s)
    ungridded = _ungridded(res, rows, kwh, co2)
    greenest = {
        name: _least(values, c, t, request.objective == name, then=other, ungridded=ungridded)
        for name, values, other in (("energy", kwh, co2), ("carbon", co2, kwh))
    }
    efficiency, good = efficiency_and_goodput(res, rows)
    most_goodput = int(np.lexsort((c, t, -good))[0])

    # what to show: the (time, cost) front of on-demand plans (thinned), every feasible
    # simulated spot plan, the picks, and the cheapest plan of each GPU type and market
    od_front = pareto_front_2d(t[: od_ok.size], c[: od_ok.size])
    shown = set(spread(od_front, MAX_SHOWN_FRONT).tolist())
    shown |= set(range(od_ok.size, rows.size))
    shown |= {cheapest, fastest, most_goodput}
    shown |= {j for j in greenest.values() if j is not None}
    # one key per GPU type; every mixed cluster shares the key -1 (its cheapest is shown)
    gpu_of = np.where(space.mixed[rows], -1, space.offers.gpu[space.offer[rows]])
    mkt = space.spot[rows]
    for g in np.unique(gpu_of):
        for m in (False, True):
            sel = np.flatnonzero((gpu_of == g) & (mkt == m))
            if sel.size:
                shown.add(int(sel[np.argmin(c[sel])]))
    order = sorted(shown, key=lambda j: (c[j], t[j]))
    objectives = np.stack([t[order], c[order], risk[order]], axis=1)
    pareto = tuple(int(k) for k in nondominated(objectives))

    twins = _od_twins(res, [int(rows[j]) for j in order])
    # spot twins of the two picks (a few more simulations, only for "spot saves ..."; they
    # do not join the candidates, so what is feasible never depends on which were picked)
    pick_rows = sorted({int(rows[cheapest]), int(rows[fastest])})
    extra = []
    for r in pick_rows:
        tw = twins.get(r)
        if tw is not None and tw not in spot_out and ev.has_market[tw] and ev.fits[tw]:
            extra.append(tw)
    twin_out = dict(spot_out)
    if extra:
        twin_out.update(simulate_rows(res, ctx, request, extra, lifetimes))

    scenario_out = _other_scenario(res, ctx, request, [int(rows[j]) for j in order], spot_out)
    candidates = []
    for j in order:
        i = int(rows[j])
        c = _candidate(res, ctx, request, i, spot_out.get(i), twins, twin_out)
        c = replace(
            c,
            energy_kwh=_finite_or_none(kwh[j]),
            co2e_kg=_finite_or_none(co2[j]),
            gpu_power_w=_finite_or_none(ev.gpu_power_w[i]),
            power_limit_w=_finite_or_none(ev.power_limit_w[i]),
            statistical_efficiency=float(efficiency[j]),
            goodput_samples_per_s=float(good[j]),
        )
        if i in scenario_out:
            c = replace(c, scenarios=scenario_out[i])
        candidates.append(c)
    picks: dict[str, int | None] = {
        "cheapest": order.index(cheapest),
        "fastest": order.index(fastest),
        "goodput": order.index(most_goodput),
    }
    for name, pick in greenest.items():
        picks[name] = None if pick is None else order.index(pick)
    fam = workload_family(request.workload)
    assumptions = list(ctx.assumptions)

    def assume(name: str, value: str, source: str = "", override: str = "") -> None:
        if all(a.name != name for a in assumptions):
            assumptions.append(Assumption(name=name, value=value, source=source, override=override))

    assume(
        "statistical efficiency",
        f"epochs(B) = E0 (1 + B/{res.work.critical_batch:g}) / (1 + "
        f"{res.work.reference_batch:g}/{res.work.critical_batch:g})",
        fam.source,
        "--critical-batch, --reference-batch",
    )
    pick = picks[request.objective]
    choice: tuple[BatchOption, ...] = ()
    learners: tuple[LearnerOption, ...] = ()
    learners_text = ""
    if pick is not None:
        row = int(rows[order[pick]])
        spec = ctx.catalog.gpu(res.gpus.names[int(res.space.offers.gpu[res.space.offer[row]])])
        eff = ctx.efficiency or RooflineEfficiency()
        learners, learners_text = learner_choice(
            res, row, ctx.facts, spec.memory_bandwidth_gbps * 1e9 * eff.bandwidth_efficiency
        )
        choice = batch_choice(res, int(rows[order[pick]]))
        chosen_batch = float(ev.global_batch[rows[order[pick]]])
        curve = res.work.curve_or_rule()
        note = at_batch_note(curve, chosen_batch, res.work.dataset_size)
        if curve.lr is not None and curve.lr.rule != curve.lr.baseline:
            note += "; " + curve.lr.text(chosen_batch, curve.noise_batch)
        assumptions = [
            replace(a, value=f"{a.value}; {note}") if a.name == "statistical efficiency" else a
            for a in assumptions
        ]
    assume(
        "risk",
        "P(meet deadline) covers the step-time model's own uncertainty and, for spot, "
        "revocations: each plan's time interval is read as the 10th-90th percentile of a "
        "per-run speed factor (two-piece lognormal, median = the model's value; the interval "
        "is the band of cross-validated errors in the prediction's regime that covered 80% "
        "of held-out GPUs and workloads). "
        "On demand: P(start-up + training x factor <= deadline) in closed form; spot: the "
        f"Monte Carlo runs are split evenly over {SPOT_STRATA} strata "
        "of the factor (revocations, restarts, start-up delays simulated in each). "
        "--min-p-meet applies to both markets; on-demand plans must also meet the deadline "
        "with the model's central value",
        "",
        "--min-p-meet",
    )
    if request.allow_mixed:
        assume(
            "mixed GPU types",
            "pairs of GPU types in one provider/region, each on its smallest instance, "
            "1/2/4/8 nodes per type; DDP and synchronous PS split the global batch in "
            "proportion to each worker's speed (equal compute per step, whole samples); "
            "asynchronous PS: every worker at the same batch, rates add up to the PS bound "
            "(exact MVA with an equivalent think time)",
        )
    if request.elastic:
        assume(
            "elastic",
            "spot candidates of synchronous strategies go on with the ready nodes instead of "
            "waiting for revoked nodes' replacements: at each count the better of the planned "
            "global batch split over them (where it fits) and the planned per-GPU batch, each "
            "at its samples to target (plan.elastic, Pollux-style); each change in ready nodes "
            "costs the restart penalty; losing every node rolls back to the checkpoint",
            "",
            "drop --elastic",
        )
    assume(
        "spot simulation",
        f"{request.mc_runs} Monte Carlo runs per spot plan that survived pruning "
        f"({len(spot_out)} simulated, {pruned} pruned as dominated)",
        "",
        "--runs, --max-simulated, --seed",
    )
    return TrainPlan(
        request=request,
        candidates=tuple(candidates),
        pareto=pareto,
        recommended=picks[request.objective],
        picks=picks,
        infeasible=counts,
        evaluated=res.evaluated + sum(res.dropped.values()),
        feasible=feasible,
        simulated=len(spot_out),
        pruned=pruned,
        catalog_snapshot=ctx.catalog.snapshot_date,
        workload_family=fam.family,
        critical_batch=res.work.critical_batch,
        reference_batch=int(res.work.reference_batch),
        assumptions=tuple(assumptions),
        models=ctx.models,
        notes=(
            (NO_PRICE_NOTE + "; 'cheapest' ranks by GPU-hours",)
            if ctx.cluster is not None and not ctx.cluster.priced
            else ()
        )
        + _estimated_prices(res, [int(rows[j]) for j in order], picks[request.objective])
        + (ungridded_note(ungridded) if request.objective == "carbon" else ()),
        batch_choice=choice,
        batch_why=batch_why(choice, request.objective),
        learner_choice=learners,
        learners_why=learners_text,
    )


def _estimated_prices(res: SearchResult, shown: list[int], pick: int | None) -> tuple[str, ...]:
    """A note naming the offers of the ``shown`` rows whose prices are estimates, not read from
    a source (``pick``: the recommended row's position in ``shown``), or none."""
    space = res.space
    off = space.offers
    if off.price_estimated is None or off.cpu_price_estimated is None:
        return ()
    named: dict[str, bool] = {}
    for k, i in enumerate(shown):
        offers = [f"{off.provider[o]}/{off.region[o]} {off.instance_type[o]}"
                  for o, _ in part_offers(space, i) if off.price_estimated[o]]  # fmt: skip
        o = int(space.offer[i])
        if space.strategy[i] in (PS, PS_SYNC) and off.cpu_price_estimated[o]:
            offers.append(f"{off.provider[o]}/{off.region[o]} {off.cpu_instance[o]} (PS)")
        for name in offers:
            named[name] = named.get(name, False) or k == pick
    note = estimated_prices_note(f"{n}{' (the pick)' if mine else ''}" for n, mine in named.items())
    return (f"estimated prices: {note}",) if note else ()


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(float(value)) else None


def _energy(
    ctx: PlanContext, res: SearchResult, rows: IntArray, gpu_s: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(kWh, kg CO2e) of the feasible ``rows`` from their billed GPU-seconds: every GPU at its
    average board power for that time less the first start-up, times the PUE (a spot run's
    replacement start-ups and waits count at that power: an upper bound); NaN where a GPU has
    no power facts or a region no grid figure."""
    ev, space = res.evaluation, res.space
    startup = ev.time_s[rows] - ev.train_s[rows]
    # the probe nodes start beside the first start-up (QA 40 E #13)
    started = ev.workers[rows] + _probe_gpus(ctx, res, rows)
    busy_gpu_s = np.maximum(gpu_s - started * startup, 0.0)
    kwh = ev.gpu_power_w[rows] * busy_gpu_s * ctx.pue / 3.6e6
    off = space.offers
    o = space.offer[rows]
    intensity = np.array(
        [ctx.grid_gco2e_per_kwh.get((off.provider[k], off.region[k]), np.nan) for k in o.tolist()],
        dtype=np.float64,
    )
    return kwh, kwh * intensity / 1000.0


def _probe_gpus(ctx: PlanContext, res: SearchResult, rows: IntArray) -> FloatArray:
    """GPUs of the nodes started beside each of ``rows`` to find and release the slowest
    (``exclude_slowest``; 0 elsewhere): billed, as their cost says, for the start-up and
    :data:`~gpucast.predict.variability.PROBE_S` (simulate train's on-demand GPU-seconds
    count them so)."""
    nodes = np.maximum(res.space.nodes[rows].astype(np.float64), 1.0)
    extra = ctx.perf.probe_nodes(nodes, res.space.strategy[rows] != PS)
    return np.asarray(extra * res.evaluation.workers[rows] / nodes, dtype=np.float64)


def _ungridded(res: SearchResult, rows: IntArray, kwh: FloatArray, co2: FloatArray) -> list[str]:
    """The regions (provider/region) of feasible plans with an energy figure but no grid
    carbon figure: their plans have no kg CO2e and are not ranked by carbon."""
    off, o = res.space.offers, res.space.offer[rows]
    lost = np.flatnonzero(np.isfinite(kwh) & ~np.isfinite(co2))
    return sorted({f"{off.provider[k]}/{off.region[k]}" for k in o[lost].tolist()})


def _least(
    values: FloatArray,
    cost: FloatArray,
    time_s: FloatArray,
    wanted: bool,
    *,
    then: FloatArray,
    ungridded: list[str],
) -> int | None:
    """The feasible plan with the least ``values``, plans within :data:`OBJECTIVE_TIE` of it
    counting as tied (the cheapest of them, then the fastest, then the least ``then``: the
    same offer in a cleaner region wins an energy tie); None when no plan has a figure -- an
    error when the request ranks by it, naming what is missing (``ungridded``: the regions
    whose plans have energy but no grid figure)."""
    known = np.flatnonzero(np.isfinite(values))
    if not known.size:
        if wanted:
            raise no_figure_error(ungridded)
        return None
    tied = known[values[known] <= np.min(values[known]) * (1.0 + OBJECTIVE_TIE)]
    order = np.lexsort((then[tied], time_s[tied], cost[tied]))
    return int(tied[order[0]])


def _outcome(out: SpotOutcome) -> dict[str, float | None]:
    return {
        "time_s": out.time_mean_s,
        "time_p90_s": out.time_p90_s,
        "cost_usd": out.cost_mean_usd,
        "p_meet_deadline": out.p_meet_deadline,
        "revocations": out.revocations_mean,
        "moves": out.moves_mean,
    }


def _other_scenario(
    res: SearchResult,
    ctx: PlanContext,
    request: TrainRequest,
    shown: list[int],
    spot_out: dict[int, SpotOutcome],
) -> dict[int, dict[str, dict[str, float | None]]]:
    """For shown spot plans whose nodes rest on a documented scenario (no lifetime data),
    their outcome under the ranking scenario and under the other one (simulated here)."""
    risk = ctx.risk
    if risk.alternative is None or risk.on_scenario is None:
        return {}
    off = res.space.offers
    rows = []
    for i in shown:
        if i not in spot_out:
            continue
        parts = part_offers(res.space, i)
        if any(risk.on_scenario(off.gpu_name[o], off.region[o], off.provider[o]) for o, _ in parts):
            rows.append(i)
    if not rows:
        return {}
    name, other = risk.alternative
    alt_ctx = replace(ctx, risk=replace(risk, lifetime=other, alternative=None))
    # shown beside the ranking scenario, not ranked by: a quarter of the runs is enough
    alt_request = replace(request, mc_runs=max(200, request.mc_runs // 4))
    alt_out = simulate_rows(res, alt_ctx, alt_request, rows, {})
    return {i: {risk.scenario: _outcome(spot_out[i]), name: _outcome(alt_out[i])} for i in rows}


def _od_twins(res: SearchResult, rows: list[int]) -> dict[int, int | None]:
    """For each of ``rows``, the index of the same configuration in the other market."""
    space = res.space
    out: dict[int, int | None] = {}
    for r in rows:
        pool = np.flatnonzero((space.offer == space.offer[r]) & (space.nodes == space.nodes[r]))
        same = pool[
            (space.strategy[pool] == space.strategy[r])
            & (space.shards[pool] == space.shards[r])
            & (space.batch[pool] == space.batch[r])
            & (space.part2[pool] == space.part2[r])
            & (space.count2[pool] == space.count2[r])
            & (space.spot[pool] != space.spot[r])
        ]
        out[r] = int(same[0]) if same.size else None
    return out


def _candidate(
    res: SearchResult,
    ctx: PlanContext,
    request: TrainRequest,
    i: int,
    spot: SpotOutcome | None,
    twins: dict[int, int | None],
    twin_out: dict[int, SpotOutcome],
) -> PlanCandidate:
    space, ev = res.space, res.evaluation
    off = space.offers
    o = int(space.offer[i])
    gpus = int(ev.workers[i])
    time_s = float(ev.time_s[i])
    cost = float(ev.cost_usd[i])
    notes: list[str] = []
    p_meet = None if not math.isfinite(res.p_model[i]) else float(res.p_model[i])
    if spot is not None:
        time_s, cost = spot.time_mean_s, spot.cost_mean_usd
        p_meet = spot.p_meet_deadline
        notes.append(
            f"spot: {spot.runs} simulated runs, {spot.revocations_mean:.2f} revocations on "
            f"average, checkpoint every {spot.checkpoint_every_steps:,} steps; time and cost "
            f"are their mean at the central step time (as on demand{_mc_noise(spot)}), p90 and "
            "P(meet deadline) span the step time's interval too"
        )
        if spot.moved_to is not None:
            notes.append(
                f"managed recovery: a replacement that waited "
                f"{ctx.risk.move_after_s / 60:g} min for spot capacity is launched in "
                f"{spot.moved_to} ({spot.moves_mean or 0.0:.2f} moves per run on average)"
            )
    parts = []
    for k, (po, nodes) in enumerate(part_offers(space, i)):
        parts.append(
            WorkerPart(
                gpu=off.gpu_name[po],
                instance_type=off.instance_type[po],
                nodes=nodes,
                gpus=nodes * int(off.gpus_per_node[po]),
                per_worker_batch=int(ev.part_batch[i, k]),
                workers_with_one_more=int(ev.part_extra[i, k]),
                compute_s=float(ev.part_compute_s[i, k]),
            )
        )
    strategy = STRATEGY_LABELS[int(space.strategy[i])]
    if len(parts) > 1:
        if strategy == "ps":
            notes.append(
                f"asynchronous PS: every worker trains on {int(ev.batch[i])} samples per step"
            )
        else:
            split = ", ".join(
                f"{p.gpu} {p.per_worker_batch}"
                + (
                    f" ({p.workers_with_one_more} of them {p.per_worker_batch + 1})"
                    if p.workers_with_one_more
                    else ""
                )
                for p in parts
            )
            idle = 1.0 - min(p.compute_s for p in parts) / max(p.compute_s for p in parts)
            how = int(ev.batch_split[i])
            note = (
                f"per-worker batches {SPLIT_LABELS[how]}: {split}; global batch "
                f"{int(ev.global_batch[i]):,}; the worker done first waits {idle:.1%} of the "
                "step's compute"
            )
            if how != SPLIT_EQUAL:
                slow = max(parts, key=lambda p: p.compute_s / max(p.per_worker_batch, 1))
                note += (
                    f"; equal batches of {int(ev.batch[i])} would take "
                    f"{float(ev.equal_compute_s[i]) / float(ev.compute_s[i]):.2f}x the step "
                    f"compute (paced by the {slow.gpu} workers)"
                )
            notes.append(note)
    if ctx.cluster is not None and not ctx.cluster.priced:
        notes.append("no price given: cost shown as $0")
    # without a dataset size the work is samples (--steps, Nsamples@B): no epoch count exists
    size = res.work.dataset_size
    epochs = float(ev.samples_needed[i]) / size if size else None
    offload_s = float(ev.offload_s[i])  # the host side's own key, not compute (QA 39 O #15)
    breakdown = {
        "compute_s": float(ev.compute_s[i]) - offload_s,
        "offload_s": offload_s,
        "communication_s": float(ev.comm_s[i]),
        "exposed_communication_s": float(ev.exposed_s[i]),
        "step_s": float(ev.step_s[i]),
        "startup_s": float(ev.time_s[i] - ev.train_s[i]),
        "train_s": float(ev.train_s[i]),
        "evaluation_s": float(ev.eval_s[i]),
    }
    if space.strategy[i] in (PS, PS_SYNC):
        breakdown["ps_utilization"] = float(ev.ps_utilization[i])
    helps = explain(res, ctx, request, i, spot, twins, twin_out)
    return PlanCandidate(
        provider=off.provider[o],
        region=off.region[o],
        instance_type="+".join(p.instance_type for p in parts),
        gpu="+".join(p.gpu for p in parts),
        gpus=gpus,
        nodes=sum(p.nodes for p in parts),
        market="spot" if space.spot[i] else "on-demand",
        strategy=strategy,
        ps_shards=int(space.shards[i]) if space.strategy[i] in (PS, PS_SYNC) else 0,
        per_worker_batch=int(ev.batch[i]),
        global_batch=int(ev.global_batch[i]),
        epochs=epochs,
        steps=int(ev.steps[i]),
        step_time_s=float(ev.step_s[i]),
        time_s=time_s,
        time_lower_s=float(ev.time_lower_s[i]),
        # a spot row's interval reaches its p90 and its mean: a few very long runs (waits for
        # capacity) pull the mean above p90, and "4m [2m, 3m]" hid it (QA 39 O #12)
        time_upper_s=float(ev.time_upper_s[i])
        if spot is None
        else max(float(ev.time_upper_s[i]), spot.time_p90_s, time_s),
        cost_usd=cost,
        usd_per_hour=float(ev.usd_per_hour[i]),
        gpu_hours=(
            spot.gpu_hours_mean
            if spot is not None and spot.gpu_hours_mean is not None
            else (
                gpus * time_s
                + float(_probe_gpus(ctx, res, np.array([i]))[0])
                * (ctx.risk.startup_mean_s + PROBE_S)
            )
            / 3600.0
        ),
        bottleneck=BOTTLENECKS[int(ev.bottleneck[i])],
        breakdown_s=breakdown,
        time_p90_s=None if spot is None else spot.time_p90_s,
        cost_p90_usd=None if spot is None else spot.cost_p90_usd,
        p_meet_deadline=p_meet,
        mc_runs=0 if spot is None else spot.runs,
        activation_checkpointing=bool(ev.checkpointing[i]),
        memory_plan=memory_plan_name(
            int(space.strategy[i]),
            bool(ev.checkpointing[i]),
            bool(ev.offload[i]),
            bool(ev.params_offload[i]),
            bool(ev.nvme_offload[i]),
        ),
        host_memory_bytes=float(ev.host_bytes[i]) if ev.offload[i] else 0.0,
        parts=tuple(parts),
        help=tuple(helps),
        notes=tuple(notes),
        precision="+".join(dict.fromkeys(res.gpus.precision[res.gpus.index(p.gpu)] for p in parts)),
    )

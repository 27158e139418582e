"""The training search (:func:`search`): the work to target, every candidate row built and
evaluated a chunk at a time, each labelled with its first failing reason (:func:`_mark`)
and pruned to the rows worth keeping (:class:`_Scan`), runs of chunks in worker
processes for a large space (:func:`_scan_part`). Split from :mod:`gpucast.plan.train`.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.evaluation import EvaluationCost
from gpucast.domain.plan import MAX_SAMPLES, TrainRequest
from gpucast.plan._train_context import (
    _REASON_NAMES,
    _REASONS,
    R_BATCH,
    R_BUDGET,
    R_CPU,
    R_DEADLINE,
    R_HOST_MEMORY,
    R_MEMORY,
    R_RISK,
    R_SPOT,
    BoolArray,
    FloatArray,
    IntArray,
    PlanContext,
    SearchResult,
    Unkept,
    _limits,
)
from gpucast.plan._train_offers import _cluster_table, _offers, with_cluster, within_cluster
from gpucast.plan._train_pruning import _Pruning, _worth_keeping
from gpucast.plan.efficiency import workload_family
from gpucast.plan.evaluate import EvalMemo, Evaluation, Work, evaluate
from gpucast.plan.inputs import GpuTable, WorkloadFacts, build_gpu_table
from gpucast.plan.space import (
    CHUNK_ROWS,
    PS,
    PS_SYNC,
    OfferTable,
    Space,
    concat,
    market_twins,
    ps_prototypes,
    single_chunk_count,
    space_chunks,
    twin_source,
)
from gpucast.plan.spot_rows import lifetime_of
from gpucast.plan.uncertainty import p_meet_deadline
from gpucast.predict.convergence import ConvergenceCurve


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

"""Monte Carlo of a training job on transient (spot / preemptible) GPU clusters, vectorised.

Pure: numbers in, numbers out; the RNG is passed in (or made from a seed), never global.

The model, per run:

* Servers are the scenario's GPU workers (grouped by GPU type, region and market) plus its CPU
  parameter servers. Each server incarnation is requested at ``req``, is ready at ``up``
  (after a start-up delay) and is revoked at ``down`` (``req`` + a lifetime drawn from its
  group's :class:`~gpucast.predict.revocation.LifetimeDistribution`; ``inf`` on demand).
* Correlated revocations: a group whose distribution is a
  :class:`~gpucast.predict.revocation.CorrelatedLifetime` draws one hazard path per run
  (``environment``, over the scenario's ``horizon_s``) and each incarnation's lifetime given
  that path and its request time (``sample_at``). Groups (and spot parameter servers) given the
  *same* distribution object share the path — one market, so a storm revokes them together;
  equal but distinct objects are independent markets.
* The job advances at ``speed(alive workers per group)`` global steps/s while the chief worker
  and every parameter server are ready and no checkpoint or restart is in progress (async
  parameter-server training: losing an ordinary worker only slows the job).
* Every ``checkpoint_every_steps`` the job pauses for a checkpoint. When the chief or a
  parameter server is revoked, progress falls back to the last checkpoint and the job restarts
  ``restart_penalty_s`` after the chief and all parameter servers are ready again: a revoked
  chief is replaced by a new server (``replace_revoked``) or by the first surviving worker.
* Synchronous training (``scenario.worker_loss_restarts``: sync PS, all-reduce) treats every
  worker like the chief: losing one rolls back to the last checkpoint, and the job resumes
  ``restart_penalty_s`` after every remaining (or replacement) worker and PS is ready.
* Revoked workers are replaced after a start-up delay when ``replace_revoked``, otherwise the
  job goes on with fewer; parameter servers are always replaced (no job without them).
* Capacity gaps (``capacity_gap_s``): a spot replacement first waits this long for capacity,
  then starts up; it is billed, and its lifetime counts, from its launch after the gap.
  Initial launches do not wait. With ``scenario.fallback_after_s``, a replacement whose gap
  would exceed it is launched on demand after ``fallback_after_s`` instead (on-demand start-up
  delay and price, never revoked); the fallbacks per run are reported.
* Start-up delays are one distribution per market, or one per worker group (+ one for the
  parameter servers) for mixed GPU types and regions. With ``include_startup=False`` the
  clock starts when the cluster is up, so initial lifetimes are drawn conditioned on
  outliving the start-up (a server revoked while starting was never part of the job).
* Cost = sum over server incarnations of (end - request) x its US$/h (each server's uptime).

The hot path loops over *event rounds*; every round handles the next event of all active runs
at once — no per-run Python loop. The (runs, servers) matrices are only touched in the rows
whose servers changed (a revocation, a start-up ending); per run the loop keeps the earliest
revocation, the next start-up and the ready servers per group, so a round costs O(runs) plus
O(servers) per run with an event. The draws are made in the same order as the original
full-matrix rounds, so a seed gives the same runs bit for bit.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.simulation import (
    CPU_PS,
    ClusterScenario,
    PriceTable,
    RunStatistics,
    SimulationResult,
)
from gpucast.predict.revocation import CorrelatedLifetime, LifetimeDistribution
from gpucast.predict.variability import SpeedVariability, run_slowdowns

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
#: draws ``n`` values (seconds) from a distribution
Sampler = Callable[[np.random.Generator, int], FloatArray]
#: cluster steps/s from the (runs, groups) matrix of ready workers per group
SpeedFunction = Callable[[IntArray], FloatArray]
Delay = float | Sampler
#: one delay for every server, or one per worker group plus one for the parameter servers
Delays = Delay | Sequence[Delay]
#: redraws of an initial lifetime that ended during start-up (include_startup=False)
_MAX_REDRAWS = 50


def _samplers(delays: Delays, field: str, n_classes: int) -> list[Sampler]:
    """One sampler per class (worker groups, then the parameter servers)."""
    if isinstance(delays, (list, tuple)):
        if len(delays) != n_classes:
            raise InvalidSpecError(
                field,
                f"needs one delay per worker group plus one for the parameter servers "
                f"({n_classes}), got {len(delays)}",
            )
        return [_sampler(d, f"{field}[{i}]") for i, d in enumerate(delays)]
    one = _sampler(delays, field)  # type: ignore[arg-type]
    return [one] * n_classes


def _sampler(delay: Delay, field: str) -> Sampler:
    if callable(delay):
        return delay
    value = float(delay)
    if not (math.isfinite(value) and value >= 0):
        raise InvalidSpecError(field, "must be a finite number of seconds >= 0", got=delay)
    return lambda rng, n: np.full(n, value)


@dataclass(frozen=True, slots=True)
class SpeedTable:
    """Cluster speed (global steps/s) indexed by ready workers per group: ``table[n0, n1, ...]``.

    For one GPU type it is ``speed_by_alive[n]`` for n = 0..N (``speed_by_alive[0] == 0``).
    """

    table: FloatArray

    def __post_init__(self) -> None:
        t = np.asarray(self.table, dtype=np.float64)
        if t.ndim < 1 or not np.all(np.isfinite(t)) or np.any(t < 0):
            raise InvalidSpecError("speed table", "must be finite steps/s >= 0")
        object.__setattr__(self, "table", t)

    def __call__(self, alive: IntArray) -> FloatArray:
        return np.asarray(self.table[tuple(alive.T)], dtype=np.float64)

    @staticmethod
    def linear(steps_per_s_per_worker: Sequence[float], counts: Sequence[int]) -> SpeedTable:
        """Speeds that add up over workers (perfect async scaling) — a baseline, not a model."""
        grids = np.meshgrid(*[np.arange(n + 1) for n in counts], indexing="ij")
        total = sum(g * s for g, s in zip(grids, steps_per_s_per_worker, strict=True))
        return SpeedTable(np.asarray(total, dtype=np.float64))

    @staticmethod
    def from_function(fn: Callable[[Sequence[int]], float], counts: Sequence[int]) -> SpeedTable:
        """Tabulate ``fn(alive counts per group)`` once (e.g. the cluster-scaling model)."""
        shape = tuple(n + 1 for n in counts)
        table = np.zeros(shape)
        for index in np.ndindex(*shape):
            table[index] = 0.0 if sum(index) == 0 else float(fn(index))
        return SpeedTable(table)


@dataclass(frozen=True, slots=True)
class _Columns:
    """Static description of the server columns: workers first (group by group, each group's
    columns contiguous), then parameter servers."""

    group: IntArray  # worker group index, -1 for a PS
    is_ps: npt.NDArray[np.bool_]
    spot: npt.NDArray[np.bool_]
    price_usd_per_s: FloatArray
    #: on-demand price of each column (what a fallback incarnation costs); None: no fallback
    fallback_price_usd_per_s: FloatArray | None
    cls: IntArray  # lifetime/start-up class: group index, or G for PS
    #: the columns of class c are ``bounds[c]:bounds[c + 1]`` (workers by group, then the PS)
    bounds: tuple[int, ...]


def _columns(
    scenario: ClusterScenario, prices: PriceTable, *, transient: bool, fallback: bool
) -> _Columns:
    group, spot, price, od_price = [], [], [], []
    for g, wg in enumerate(scenario.workers):
        is_spot = wg.spot and transient
        p = prices.price(wg.gpu, spot=is_spot, region=wg.region) / 3600.0
        od = prices.price(wg.gpu, spot=False, region=wg.region) / 3600.0 if fallback else p
        group += [g] * wg.count
        spot += [is_spot] * wg.count
        price += [p] * wg.count
        od_price += [od] * wg.count
    ps_spot = scenario.ps_spot and transient
    ps_price = ps_od = 0.0
    if scenario.ps_count:
        ps_price = prices.price(CPU_PS, spot=ps_spot, region=scenario.region) / 3600.0
        ps_od = (
            prices.price(CPU_PS, spot=False, region=scenario.region) / 3600.0
            if fallback and ps_spot
            else ps_price
        )
    group += [-1] * scenario.ps_count
    spot += [ps_spot] * scenario.ps_count
    price += [ps_price] * scenario.ps_count
    od_price += [ps_od] * scenario.ps_count
    g_arr = np.asarray(group, dtype=np.int64)
    n_groups = len(scenario.workers)
    counts = [wg.count for wg in scenario.workers] + [scenario.ps_count]
    return _Columns(
        group=g_arr,
        is_ps=g_arr < 0,
        spot=np.asarray(spot, dtype=bool),
        price_usd_per_s=np.asarray(price, dtype=np.float64),
        fallback_price_usd_per_s=np.asarray(od_price, dtype=np.float64) if fallback else None,
        cls=np.where(g_arr < 0, n_groups, g_arr),
        bounds=(0, *itertools.accumulate(counts)),
    )


def _is_zero(delays: Delays) -> bool:
    """Whether ``delays`` is the constant 0 for every class (no capacity gaps at all)."""
    items = list(delays) if isinstance(delays, (list, tuple)) else [delays]
    return all(isinstance(d, (int, float)) and d == 0 for d in items)


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One scenario of a batch (:func:`simulate_batch`): its cluster, speed, prices, lifetimes
    and delays, and how many runs of it (``run_slowdown``: one factor > 0 per run dividing its
    speed, or ``None``)."""

    scenario: ClusterScenario
    speed: SpeedFunction
    prices: PriceTable
    lifetimes: Sequence[LifetimeDistribution | None]
    ps_lifetime: LifetimeDistribution | None = None
    startup_spot_s: Delays = 0.0
    startup_on_demand_s: Delays = 0.0
    capacity_gap_s: Delays = 0.0
    runs: int
    run_slowdown: npt.ArrayLike | None = None


def simulate_runs(
    scenario: ClusterScenario,
    *,
    speed: SpeedFunction,
    prices: PriceTable,
    lifetimes: Sequence[LifetimeDistribution | None],
    ps_lifetime: LifetimeDistribution | None = None,
    startup_spot_s: Delays = 0.0,
    startup_on_demand_s: Delays = 0.0,
    capacity_gap_s: Delays = 0.0,
    checkpoint_s: Delay = 0.0,
    restart_penalty_s: float = 0.0,
    runs: int,
    rng: np.random.Generator | int | None = None,
    transient: bool = True,
    max_rounds: int = 100_000,
    run_slowdown: FloatArray | None = None,
) -> RunStatistics:
    """Simulate ``runs`` independent executions of ``scenario``; see the module docstring.

    ``run_slowdown`` (one factor > 0 per run, e.g. the slowest of the run's GPUs drawn from a
    :class:`~gpucast.predict.variability.SpeedVariability`, or a stratum of the step-time
    model's uncertainty) divides each run's speed; ``None`` leaves every run at the speed
    function's.

    ``lifetimes[g]`` is the lifetime distribution of worker group ``g`` (used when it is spot;
    ``None`` is allowed only for on-demand groups); a
    :class:`~gpucast.predict.revocation.CorrelatedLifetime` shares its hazard state among all
    the servers drawing from that same object within a run. ``capacity_gap_s``: how long a
    spot replacement waits for capacity before its start-up begins (one delay for all, or one
    per worker group plus one for the parameter servers); initial launches do not wait, and
    with ``scenario.fallback_after_s`` a long wait is cut short by an on-demand launch.
    ``transient=False`` runs every server on demand with on-demand prices (the comparison
    baseline). ``rng``: a Generator, a seed, or ``None`` for seed 0 — the same seed gives the
    same result bit for bit.
    """
    job = Job(
        scenario=scenario,
        speed=speed,
        prices=prices,
        lifetimes=lifetimes,
        ps_lifetime=ps_lifetime,
        startup_spot_s=startup_spot_s,
        startup_on_demand_s=startup_on_demand_s,
        capacity_gap_s=capacity_gap_s,
        runs=runs,
        run_slowdown=run_slowdown,
    )
    (stats,) = simulate_batch(
        [job],
        checkpoint_s=checkpoint_s,
        restart_penalty_s=restart_penalty_s,
        rng=rng,
        transient=transient,
        max_rounds=max_rounds,
    )
    return stats


def simulate_batch(
    jobs: Sequence[Job],
    *,
    checkpoint_s: Delay = 0.0,
    restart_penalty_s: float = 0.0,
    rng: np.random.Generator | int | None = None,
    transient: bool = True,
    max_rounds: int = 100_000,
) -> list[RunStatistics]:
    """The runs of several scenarios in one event loop (one round handles the next event of
    every active run of every job): what :func:`simulate_runs` does for each job, at the cost
    of the longest job's rounds rather than the sum of all jobs' rounds.

    The jobs share the checkpoint cost, the restart penalty, the RNG and the market mode;
    their ``include_startup`` and (where they have capacity gaps) ``fallback_after_s`` must
    agree. With more than one job each ``speed`` must be a :class:`SpeedTable`. One
    :class:`RunStatistics` per job, in order; a batch of one job gives exactly what
    :func:`simulate_runs` gives.
    """
    if not jobs:
        return []
    if not (math.isfinite(restart_penalty_s) and restart_penalty_s >= 0):
        raise InvalidSpecError("restart_penalty_s", "must be >= 0", got=restart_penalty_s)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng or 0)
    prepared = [_prepare(job, transient) for job in jobs]
    if len({job.scenario.include_startup for job in jobs}) > 1:
        raise InvalidSpecError("jobs", "must agree on include_startup")
    fallbacks = {p.fallback_after_s for p in prepared if p.has_gaps}
    if len(fallbacks) > 1:
        raise InvalidSpecError("jobs", "with capacity gaps must share fallback_after_s")
    if len(jobs) > 1 and not all(isinstance(job.speed, SpeedTable) for job in jobs):
        raise InvalidSpecError("speed", "must be a SpeedTable for a batch of several jobs")
    return _Engine(
        jobs=list(jobs),
        prepared=prepared,
        fallback_after_s=next(iter(fallbacks)) if fallbacks else None,
        ckpt_cost=_sampler(checkpoint_s, "checkpoint_s"),
        penalty=float(restart_penalty_s),
        rng=gen,
        max_rounds=max_rounds,
    ).run()


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A job's classes (its worker groups, then its parameter servers) and columns."""

    classes: list[LifetimeDistribution | None]
    cls_spot: list[bool]
    start_spot: list[Sampler]
    start_od: list[Sampler]
    gaps: list[Sampler]
    has_gaps: bool
    fallback_after_s: float | None
    cols: _Columns
    run_slowdown: FloatArray | None


def _prepare(job: Job, transient: bool) -> _Prepared:
    scenario, lifetimes = job.scenario, job.lifetimes
    if job.runs < 1:
        raise InvalidSpecError("runs", "must be >= 1", got=job.runs, fix="e.g. --runs 2000")
    if len(lifetimes) != len(scenario.workers):
        raise InvalidSpecError("lifetimes", "need one distribution (or None) per worker group")
    factors = None
    if job.run_slowdown is not None:
        factors = np.asarray(job.run_slowdown, dtype=np.float64)
        if factors.shape != (job.runs,) or not np.all(np.isfinite(factors) & (factors > 0)):
            raise InvalidSpecError("run_slowdown", "needs one finite factor > 0 per run")
    n_groups = len(scenario.workers)
    classes: list[LifetimeDistribution | None] = []
    for g, wg in enumerate(scenario.workers):
        if wg.spot and transient and lifetimes[g] is None:
            raise InvalidSpecError(
                f"lifetimes ({wg.gpu} in {wg.region})",
                "a spot group needs a distribution",
                fix="fit the revocation model or give a hazard",
            )
        classes.append(lifetimes[g] if (wg.spot and transient) else None)
    if scenario.ps_spot and transient and scenario.ps_count and job.ps_lifetime is None:
        raise InvalidSpecError("ps lifetime", "spot parameter servers need a distribution")
    classes.append(job.ps_lifetime if (scenario.ps_spot and transient) else None)
    cls_spot = [wg.spot and transient for wg in scenario.workers] + [scenario.ps_spot and transient]
    has_gaps = any(cls_spot) and not _is_zero(job.capacity_gap_s)
    fallback_after = scenario.fallback_after_s if has_gaps else None
    return _Prepared(
        classes=classes,
        cls_spot=cls_spot,
        start_spot=_samplers(job.startup_spot_s, "startup_spot_s", n_groups + 1),
        start_od=_samplers(job.startup_on_demand_s, "startup_on_demand_s", n_groups + 1),
        gaps=_samplers(job.capacity_gap_s, "capacity_gap_s", n_groups + 1),
        has_gaps=has_gaps,
        fallback_after_s=fallback_after,
        cols=_columns(
            scenario, job.prices, transient=transient, fallback=fallback_after is not None
        ),
        run_slowdown=factors,
    )


class _Rows:
    """Per-run state of the active runs (one entry per row; rows are compacted as runs end).

    The (runs, servers) matrices live in :class:`_Engine`, indexed by the run's original index
    ``rid``; per row we keep what the event loop needs every round, maintained incrementally:
    ``next_down`` (the earliest revocation), ``next_up`` (the earliest start-up ending after
    ``t``), ``alive`` (ready workers per group), ``ps_ready`` and ``workers_gone``.
    """

    __slots__ = (
        "alive",
        "chief",
        "ckpt",
        "cost",
        "fallbacks",
        "next_down",
        "next_up",
        "pause",
        "prog",
        "ps_ready",
        "revs",
        "rid",
        "t",
        "workers_gone",
    )

    def __init__(self, runs: int, n_groups: int, next_down: FloatArray) -> None:
        self.rid = np.arange(runs)
        self.t = np.zeros(runs)
        self.prog = np.zeros(runs)
        self.ckpt = np.zeros(runs)
        self.pause = np.zeros(runs)
        self.chief = np.zeros(runs, dtype=np.int64)
        self.revs = np.zeros(runs, dtype=np.int64)
        self.fallbacks = np.zeros(runs, dtype=np.int64)
        self.cost = np.zeros(runs)
        self.next_down = next_down
        self.next_up = np.full(runs, -np.inf)  # every row is refreshed in the first round
        self.alive = np.zeros((runs, n_groups), dtype=np.int64)
        self.ps_ready = np.zeros(runs, dtype=np.int64)
        self.workers_gone = np.zeros(runs, dtype=np.int64)

    def keep(self, mask: npt.NDArray[np.bool_]) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name)[mask])


class _Engine:
    """One batch of runs (of one or more jobs): the server matrices (original run x column)
    and the event loop.

    Jobs are laid side by side: run ``r`` belongs to job ``job[r]``; its columns are that
    job's workers (group by group), then its parameter servers, then padding up to the widest
    job (never ready, never revoked, never billed). Lifetime/start-up classes are numbered
    across jobs (job 0's groups and PS, then job 1's, ...), so the draws go class by class in
    a fixed order and one job alone draws exactly as :func:`simulate_runs` always has.
    """

    def __init__(
        self,
        *,
        jobs: list[Job],
        prepared: list[_Prepared],
        fallback_after_s: float | None,
        ckpt_cost: Sampler,
        penalty: float,
        rng: np.random.Generator,
        max_rounds: int,
    ) -> None:
        self.jobs = jobs
        self.rng = rng
        self.max_rounds = max_rounds
        self.ckpt_cost = ckpt_cost
        self.penalty = penalty
        self.fallback_after_s = fallback_after_s
        K = len(jobs)
        sizes = np.array([j.runs for j in jobs], dtype=np.int64)
        self.runs = R = int(sizes.sum())
        self.job = np.repeat(np.arange(K), sizes)  # job of each original run
        self.first_run = np.concatenate([[0], np.cumsum(sizes)])
        widths = [p.cols.group.size for p in prepared]
        self.n_cols = C = max(widths)
        self.n_groups = G = max(len(j.scenario.workers) for j in jobs)
        # classes across jobs: job k's class c is class_base[k] + c
        self.class_base = np.concatenate([[0], np.cumsum([len(p.classes) for p in prepared])])
        self.classes = [c for p in prepared for c in p.classes]
        self.cls_spot = [c for p in prepared for c in p.cls_spot]
        self.start_spot = [s for p in prepared for s in p.start_spot]
        self.start_od = [s for p in prepared for s in p.start_od]
        any_gaps = any(p.has_gaps for p in prepared)
        zero = _sampler(0.0, "capacity_gap_s")
        self.gaps: list[Sampler] | None = (
            [g if p.has_gaps else zero for p in prepared for g in p.gaps] if any_gaps else None
        )
        self.n_classes = len(self.classes)
        # per job and column: class (-1 padding), worker / PS flags, prices
        self.col_cls = np.full((K, C), -1, dtype=np.int64)
        self.col_worker = np.zeros((K, C), dtype=bool)
        self.col_ps = np.zeros((K, C), dtype=bool)
        self.col_price = np.zeros((K, C))
        self.col_od_price = np.zeros((K, C))
        self.bounds = np.zeros((K, G + 1), dtype=np.int64)  # group g: bounds[k, g]:bounds[k, g+1]
        self.n_workers = np.zeros(K, dtype=np.int64)
        self.n_ps = np.zeros(K, dtype=np.int64)
        self.col_bounds = [p.cols.bounds for p in prepared]
        for k, p in enumerate(prepared):
            cols, w = p.cols, p.cols.group.size
            self.col_cls[k, :w] = cols.cls + self.class_base[k]
            self.col_worker[k, :w] = ~cols.is_ps
            self.col_ps[k, :w] = cols.is_ps
            self.col_price[k, :w] = cols.price_usd_per_s
            od = cols.fallback_price_usd_per_s
            self.col_od_price[k, :w] = cols.price_usd_per_s if od is None else od
            groups = len(jobs[k].scenario.workers)
            self.bounds[k, : groups + 1] = cols.bounds[: groups + 1]
            self.bounds[k, groups + 1 :] = cols.bounds[groups]
            self.n_workers[k] = int(np.count_nonzero(~cols.is_ps))
            self.n_ps[k] = w - self.n_workers[k]
        self.count_fallbacks = [j.scenario.fallback_after_s is not None for j in jobs]
        # per run: the job's scenario figures
        sc = [j.scenario for j in jobs]
        self.include_startup = sc[0].include_startup
        self.steps = np.array([float(s.steps) for s in sc])[self.job]
        self.every = np.array(
            [float(s.checkpoint_every_steps) if s.checkpoint_every_steps else math.inf for s in sc]
        )[self.job]
        self.horizon = np.array([s.horizon_s for s in sc])[self.job]
        self.replace_revoked = np.array([s.replace_revoked for s in sc])[self.job]
        self.restarts_on_worker_loss = np.array([s.worker_loss_restarts for s in sc])[self.job]
        self.single = K == 1
        self.speed: SpeedFunction = jobs[0].speed  # one job: its own speed function
        self.speeds = None if self.single else _flat_speed(jobs, G)  # several: their tables
        slow = [p.run_slowdown for p in prepared]
        self.run_slowdown: FloatArray | None = None
        if any(s is not None for s in slow):
            self.run_slowdown = np.concatenate(
                [np.ones(j.runs) if s is None else s for j, s in zip(jobs, slow, strict=True)]
            )
        # correlated classes: one environment per distinct distribution object (one market)
        self.shared: dict[int, int] = {}  # class -> index into self.envs
        self.markets: list[CorrelatedLifetime] = []
        for c, dist in enumerate(self.classes):
            if isinstance(dist, CorrelatedLifetime):
                same = [k for k, m in enumerate(self.markets) if m is dist]
                if not same:
                    self.markets.append(dist)
                self.shared[c] = same[0] if same else len(self.markets) - 1
        self.envs: list[Any] = []
        self.env_offset_s = np.zeros(R)  # run clock -> environment clock
        self.env_horizon_s = float(max(s.horizon_s for s in sc))
        # the server matrices, (runs, columns), row = original run index
        self.req = np.zeros((R, C))
        self.up = np.zeros((R, C))
        self.down = np.zeros((R, C))
        self.gone = np.zeros((R, C), dtype=bool)
        # per-incarnation prices, only where a replacement may fall back to on demand
        self.price: FloatArray | None = None
        if fallback_after_s is not None:
            self.price = self.col_price[self.job]

    # -- sampling helpers ---------------------------------------------------------------------
    def _startup_sampler(self, c: int, on_demand: bool = False) -> Sampler:
        return self.start_spot[c] if (self.cls_spot[c] and not on_demand) else self.start_od[c]

    def _by_class(self, cls_of: IntArray) -> list[tuple[int, IntArray | slice, int]]:
        """(class, its entries of ``cls_of``, how many) in class order — the order of the
        draws; the entries are a plain slice when one class has them all (the usual case)."""
        counts = np.bincount(cls_of, minlength=self.n_classes)
        present = np.flatnonzero(counts)
        if present.size == 1:
            return [(int(present[0]), slice(None), cls_of.size)]
        return [(int(c), np.flatnonzero(cls_of == c), int(counts[c])) for c in present]

    def _cls(self, run: IntArray, col: IntArray) -> IntArray:
        return np.asarray(self.col_cls[self.job[run], col], dtype=np.int64)

    def _is_ps(self, run: IntArray, col: IntArray) -> npt.NDArray[np.bool_]:
        return np.asarray(self.col_ps[self.job[run], col], dtype=np.bool_)

    def _draw_startup(
        self, cls_of: IntArray, on_demand: npt.NDArray[np.bool_] | None = None
    ) -> FloatArray:
        """One start-up delay per entry of ``cls_of``, class by class (a deterministic order);
        entries flagged ``on_demand`` (fallbacks) use their class's on-demand delays."""
        out = np.empty(cls_of.size)
        for c, sel, n in self._by_class(cls_of):
            if on_demand is None:
                out[sel] = self._startup_sampler(c)(self.rng, n)
                continue
            idx = np.arange(cls_of.size)[sel]
            for od in (False, True):
                part = idx[on_demand[idx] == od]
                if part.size:
                    out[part] = self._startup_sampler(c, od)(self.rng, part.size)
        return out

    def _draw_gap(self, cls_of: IntArray) -> FloatArray:
        assert self.gaps is not None
        out = np.empty(cls_of.size)
        for c, sel, n in self._by_class(cls_of):
            out[sel] = self.gaps[c](self.rng, n)
        return out

    def _lifetimes(self, c: int, n: int, start_s: FloatArray | None, run: IntArray | None) -> Any:
        """``n`` lifetimes of class ``c``; a correlated class needs the environment-clock
        request times ``start_s`` and original run indices ``run`` of the servers."""
        dist = self.classes[c]
        if dist is None:
            return np.inf
        if c in self.shared:
            assert start_s is not None and run is not None
            market = self.markets[self.shared[c]]
            # a launch after the environment's horizon cannot matter (the run is over by then):
            # it is drawn as if launched at the horizon
            start = np.minimum(start_s, self.env_horizon_s)
            env = self.envs[self.shared[c]]
            return np.asarray(market.sample_at(self.rng, start, run, env), dtype=np.float64)
        return dist.sample(self.rng, n)

    def _draw_life(self, cls_of: IntArray, start_s: FloatArray, run: IntArray) -> FloatArray:
        """One lifetime per entry of ``cls_of``, class by class (a deterministic order).

        ``start_s``: each server's request time on the run's clock; ``run``: its original run.
        """
        out = np.empty(cls_of.size)
        for c, sel, n in self._by_class(cls_of):
            if c in self.shared:
                env_start = start_s[sel] + self.env_offset_s[run[sel]]
                out[sel] = self._lifetimes(c, n, env_start, run[sel])
            else:
                out[sel] = self._lifetimes(c, n, None, None)
        return out

    def _class_blocks(self) -> list[tuple[int, int, int, int, int]]:
        """(class, first run, end run, first column, end column) of every class, in class
        order: job by job, its worker groups then its parameter servers."""
        out = []
        for k, p_bounds in enumerate(self.col_bounds):
            r0, r1 = int(self.first_run[k]), int(self.first_run[k + 1])
            for c in range(len(p_bounds) - 1):
                out.append((int(self.class_base[k]) + c, r0, r1, p_bounds[c], p_bounds[c + 1]))
        return out

    def _initial(self) -> None:
        """First incarnations of every server (all requested at the start of the run)."""
        R, C = self.runs, self.n_cols
        blocks = self._class_blocks()
        startup = np.zeros((R, C))
        for c, r0, r1, lo, hi in blocks:  # class by class: the same draws as _draw_startup
            if hi > lo:
                drawn = self._startup_sampler(c)(self.rng, (r1 - r0) * (hi - lo))
                startup[r0:r1, lo:hi] = np.reshape(drawn, (r1 - r0, hi - lo))
        # with include_startup=False the run clock starts when the servers are up: their
        # environment clock starts at the run's first request, the longest start-up earlier
        if self.markets:
            if not self.include_startup:
                self.env_offset_s = startup.max(axis=1)
                self.env_horizon_s = self.env_horizon_s + float(self.env_offset_s.max())
            self.envs = [m.environment(self.rng, R, self.env_horizon_s) for m in self.markets]
        req_clock = np.zeros((R, C)) if self.include_startup else -startup
        life = np.full((R, C), np.inf)  # padding columns: never revoked
        for c, r0, r1, lo, hi in blocks:
            if hi == lo:
                continue
            n, k = r1 - r0, hi - lo
            if c in self.shared:
                run = np.repeat(np.arange(r0, r1), k)
                env_start = (req_clock[r0:r1, lo:hi] + self.env_offset_s[r0:r1, None]).ravel()
                drawn = self._lifetimes(c, n * k, env_start, run)
            else:
                drawn = self._lifetimes(c, n * k, None, None)
            life[r0:r1, lo:hi] = np.reshape(drawn, (n, k)) if np.ndim(drawn) else drawn
        if not self.include_startup:
            # the clock starts when the cluster is up: its servers outlived their start-up
            cls_flat = self.col_cls[self.job].ravel()
            life_flat, startup_flat = life.ravel(), startup.ravel()
            req_flat = req_clock.ravel()
            short = np.flatnonzero(life_flat <= startup_flat)
            for _ in range(_MAX_REDRAWS):
                if short.size == 0:
                    break
                life_flat[short] = self._draw_life(cls_flat[short], req_flat[short], short // C)
                short = short[life_flat[short] <= startup_flat[short]]
            self.down = np.maximum(life - startup, 0.0)  # servers are already `startup` old
        else:
            self.up = startup
            self.down = life

    def _price_at(self, o: IntArray, c: IntArray) -> FloatArray:
        if self.price is None:
            return np.asarray(self.col_price[self.job[o], c], dtype=np.float64)
        return self.price[o, c]

    # -- the events of one round --------------------------------------------------------------
    def _revoke(self, s: _Rows, cand: IntArray) -> None:
        """Revocations due now in rows ``cand`` (rows whose earliest revocation is <= t)."""
        n = s.rid.size
        req, up, down, gone = self.req, self.up, self.down, self.gone
        orig = s.rid[cand]
        sub = down[orig]  # a copy, kept up to date below for the rows' next revocation
        due = sub <= s.t[cand][:, None]
        sr, c_idx = np.nonzero(due)
        r_idx, o_idx = cand[sr], orig[sr]
        s.revs += np.bincount(r_idx, minlength=n)
        billed = (sub[sr, c_idx] - req[o_idx, c_idx]) * self._price_at(o_idx, c_idx)
        s.cost[cand] += np.bincount(sr, weights=billed, minlength=cand.size)
        is_ps = self._is_ps(o_idx, c_idx)
        renew = self.replace_revoked[o_idx] | is_ps  # parameter servers are always replaced
        if renew.all():
            self._replace(s, r_idx, c_idx, o_idx)
        else:
            if renew.any():
                self._replace(s, r_idx[renew], c_idx[renew], o_idx[renew])
            dead_r, dead_c, dead_o = r_idx[~renew], c_idx[~renew], o_idx[~renew]
            if dead_r.size:
                gone[dead_o, dead_c] = True
                up[dead_o, dead_c] = np.inf
                down[dead_o, dead_c] = np.inf
                s.workers_gone += np.bincount(dead_r, minlength=n)
        sub[sr, c_idx] = down[o_idx, c_idx]
        s.next_down[cand] = sub.min(axis=1)
        # chief or PS lost: back to the last checkpoint, re-elect a chief if needed
        lost = np.zeros(n, dtype=bool)
        critical = is_ps | (c_idx == s.chief[r_idx]) | self.restarts_on_worker_loss[o_idx]
        lost[r_idx[critical]] = True
        if lost.any():
            self._roll_back(s, np.flatnonzero(lost))

    def _replace(self, s: _Rows, rr: IntArray, cc: IntArray, oo: IntArray) -> None:
        """New incarnations of the revoked servers (row ``rr``, column ``cc``, run ``oo``)."""
        cls_of = self._cls(oo, cc)
        launch = s.t[rr]
        on_demand: npt.NDArray[np.bool_] | None = None
        if self.gaps is not None:
            gap = self._draw_gap(cls_of)
            if self.fallback_after_s is not None:
                on_demand = gap > self.fallback_after_s
                gap = np.where(on_demand, self.fallback_after_s, gap)
                if not on_demand.any():
                    on_demand = None
            launch = launch + gap
        self.req[oo, cc] = launch
        self.up[oo, cc] = launch + self._draw_startup(cls_of, on_demand)
        if on_demand is None:
            self.down[oo, cc] = launch + self._draw_life(cls_of, launch, oo)
            return
        spot = ~on_demand
        life = np.full(cc.size, np.inf)  # an on-demand incarnation is never revoked
        life[spot] = self._draw_life(cls_of[spot], launch[spot], oo[spot])
        self.down[oo, cc] = launch + life
        assert self.price is not None
        fb_o, fb_c = oo[on_demand], cc[on_demand]
        self.price[fb_o, fb_c] = self.col_od_price[self.job[fb_o], fb_c]
        s.fallbacks += np.bincount(rr[on_demand], minlength=s.rid.size)

    def _roll_back(self, s: _Rows, lr: IntArray) -> None:
        """Rows ``lr`` lost their chief, a PS or (synchronous) a worker: back to the checkpoint;
        resume ``penalty`` after the chief (re-elected if gone), the PS and, when synchronous,
        every worker are ready."""
        up, gone = self.up, self.gone
        lo = s.rid[lr]
        jobs = self.job[lo]
        workers = self.col_worker[jobs]
        s.prog[lr] = s.ckpt[lr]
        gone_chief = gone[lo, s.chief[lr]]
        if gone_chief.any():
            gr = lr[gone_chief]
            go = s.rid[gr]
            up_w = up[go]
            key = np.where(up_w <= s.t[gr][:, None], -np.inf, up_w)
            key = np.where(gone[go] | ~workers[gone_chief], np.inf, key)
            s.chief[gr] = np.argmin(key, axis=1)
        resume = up[lo, s.chief[lr]]
        sync = self.restarts_on_worker_loss[lo]
        if sync.any():  # synchronous: wait for every worker
            wait = np.where(workers & ~gone[lo], up[lo], -np.inf).max(axis=1)
            resume = np.where(sync, np.maximum(resume, wait), resume)
        ps = self.col_ps[jobs]
        if ps.any():
            resume = np.maximum(resume, np.where(ps, up[lo], -np.inf).max(axis=1))
        s.pause[lr] = np.maximum(s.t[lr], resume) + self.penalty

    def _refresh(self, s: _Rows, rows: IntArray) -> None:
        """Recount ready servers and the next start-up of ``rows`` (their ``up`` changed, or
        their clock passed ``next_up``)."""
        orig = s.rid[rows]
        up = self.up[orig]
        now = s.t[rows][:, None]
        ready = up <= now  # a revoked server without replacement is up at inf: never ready
        if self.single:
            bounds, W = self.col_bounds[0], int(self.n_workers[0])
            for g in range(self.n_groups):
                s.alive[rows, g] = np.count_nonzero(ready[:, bounds[g] : bounds[g + 1]], axis=1)
            if self.n_ps[0]:
                s.ps_ready[rows] = np.count_nonzero(ready[:, W:], axis=1)
        else:
            jobs = self.job[orig]
            counted = np.zeros((rows.size, self.n_cols + 1), dtype=np.int64)
            np.cumsum(ready, axis=1, out=counted[:, 1:])
            at = np.take_along_axis(counted, self.bounds[jobs], axis=1)
            s.alive[rows] = np.diff(at, axis=1)
            s.ps_ready[rows] = np.count_nonzero(ready & self.col_ps[jobs], axis=1)
        np.putmask(up, ready, np.inf)  # (a copy) in place: far cheaper than np.where here
        s.next_up[rows] = up.min(axis=1)

    def _finish(
        self, s: _Rows, mask: npt.NDArray[np.bool_], out: dict[str, Any], finished: bool
    ) -> None:
        """Bill the live incarnations of rows ``mask`` up to their ``t``; write their outputs."""
        orig = s.rid[mask]
        end = s.t[mask]
        live = ~self.gone[orig]
        billed = np.clip(end[:, None] - self.req[orig], 0.0, None) * live
        if self.price is None and self.single:
            total = s.cost[mask] + billed @ self.col_price[0]
        else:
            price = self.col_price[self.job[orig]] if self.price is None else self.price[orig]
            total = s.cost[mask] + np.einsum("ij,ij->i", billed, price)
        out["cost"][orig] = total
        out["revs"][orig] = s.revs[mask]
        out["fallbacks"][orig] = s.fallbacks[mask]
        out["dur"][orig] = end if finished else np.inf

    # -- the simulation -------------------------------------------------------------------------
    def run(self) -> list[RunStatistics]:
        R = self.runs
        self._initial()
        out: dict[str, Any] = {
            "dur": np.full(R, np.inf),
            "cost": np.zeros(R),
            "revs": np.zeros(R, dtype=np.int64),
            "fallbacks": np.zeros(R, dtype=np.int64),
        }
        s = _Rows(R, self.n_groups, self.down.min(axis=1))
        rounds = 0
        while s.rid.size:
            rounds += 1
            jobs = self.job[s.rid]
            # 1) revocations due now (only rows whose earliest revocation has come)
            cand = np.flatnonzero(s.next_down <= s.t)
            if cand.size:
                self._revoke(s, cand)
            # 2) which runs can never finish (no worker left) -> unfinished
            stalled = s.workers_gone == self.n_workers[jobs]
            # 3) the speed now: recount the rows whose servers changed or came up
            dirty = s.next_up <= s.t
            dirty[cand] = True
            if dirty.any():
                self._refresh(s, np.flatnonzero(dirty))
            chief_ok = self.up[s.rid, s.chief] <= s.t
            ps_ok = s.ps_ready == self.n_ps[jobs]
            running = chief_ok & ps_ok & (s.pause <= s.t) & ~stalled
            batch = self.speeds
            full = self.speed(s.alive.copy()) if batch is None else batch(s.alive, jobs)
            spd = np.where(running, full, 0.0)
            if self.run_slowdown is not None:
                spd = spd / self.run_slowdown[s.rid]
            # 4) the next event
            t = s.t
            total_steps = self.steps[s.rid]
            horizon = self.horizon[s.rid]
            target = np.minimum(total_steps, s.ckpt + self.every[s.rid])
            moving = running & (spd > 0)
            t_prog = np.where(moving, t + (target - s.prog) / np.where(moving, spd, 1.0), np.inf)
            t_pause = np.where(s.pause > t, s.pause, np.inf)
            t_next = np.minimum(np.minimum(t_prog, s.next_up), np.minimum(s.next_down, t_pause))
            # 5) advance
            dt = np.where(np.isfinite(t_next), t_next - t, 0.0)
            s.prog = np.where(running, s.prog + spd * dt, s.prog)
            hit = running & (t_prog <= t_next)
            s.prog[hit] = target[hit]
            t_new = np.minimum(t_next, horizon)
            done = hit & (target >= total_steps) & (t_next <= horizon)
            ckpt_hit = hit & ~done
            if ckpt_hit.any():
                ch = np.flatnonzero(ckpt_hit)
                s.ckpt[ch] = target[ch]
                s.pause[ch] = t_new[ch] + self.ckpt_cost(self.rng, ch.size)
            out_of_time = ~done & ((t_next >= horizon) | stalled)
            if rounds >= self.max_rounds:
                out_of_time |= ~done
            s.t = np.where(stalled, t, t_new)
            if done.any():
                self._finish(s, done, out, finished=True)
            if out_of_time.any():
                self._finish(s, out_of_time, out, finished=False)
            keep = ~(done | out_of_time)
            if not keep.all():
                s.keep(keep)
        stats = []
        for k, job in enumerate(self.jobs):
            part = slice(int(self.first_run[k]), int(self.first_run[k + 1]))
            stats.append(
                RunStatistics(
                    duration_s=out["dur"][part],
                    cost_usd=out["cost"][part],
                    revocations=out["revs"][part],
                    deadline_s=job.scenario.deadline_s,
                    fallbacks=out["fallbacks"][part] if self.count_fallbacks[k] else None,
                )
            )
        return stats


def _flat_speed(jobs: Sequence[Job], n_groups: int) -> Callable[[IntArray, IntArray], FloatArray]:
    """The jobs' speed tables as one flat array: row ``r`` of job ``k`` with ready workers
    ``alive[r]`` per group reads ``flat[offset[k] + sum_g alive[r, g] * stride[k, g]]``."""
    tables = [
        np.ascontiguousarray(job.speed.table, dtype=np.float64)  # type: ignore[attr-defined]
        for job in jobs
    ]
    offsets = np.concatenate([[0], np.cumsum([t.size for t in tables])[:-1]]).astype(np.int64)
    strides = np.zeros((len(tables), n_groups), dtype=np.int64)
    for k, t in enumerate(tables):
        strides[k, : t.ndim] = np.array(t.strides, dtype=np.int64) // t.itemsize
    flat = np.concatenate([t.ravel() for t in tables])

    def speed(alive: IntArray, job: IntArray) -> FloatArray:
        return np.asarray(flat[offsets[job] + np.sum(alive * strides[job], axis=1)])

    return speed


def simulate_scenario(
    scenario: ClusterScenario,
    *,
    speed: SpeedFunction,
    prices: PriceTable,
    lifetimes: Sequence[LifetimeDistribution | None],
    ps_lifetime: LifetimeDistribution | None = None,
    startup_spot_s: Delays = 0.0,
    startup_on_demand_s: Delays = 0.0,
    capacity_gap_s: Delays = 0.0,
    checkpoint_s: Delay = 0.0,
    restart_penalty_s: float = 0.0,
    runs: int,
    seed: int = 0,
    speed_factors: Sequence[float] = (1.0,),
    variability: SpeedVariability | None = None,
    exclude_slowest: float = 0.0,
    sources: dict[str, str] | None = None,
    notes: Sequence[str] = (),
) -> SimulationResult:
    """The scenario and its on-demand equivalent (same cluster, no revocations, on-demand
    prices), from one seed: two independent streams spawned from ``SeedSequence(seed)``.

    ``speed_factors`` are equally likely strata of the step-time model's uncertainty
    (:func:`gpucast.plan.uncertainty.strata`): the runs are split evenly over them and each
    stratum's job runs ``factor`` times slower (one factor of 1: no model uncertainty).
    ``capacity_gap_s`` and ``scenario.fallback_after_s``: see :func:`simulate_runs` (the
    on-demand equivalent has no revocations, hence no gaps or fallbacks).

    ``variability``: each run draws one speed factor per GPU of the cluster (from a third
    stream, so runs without it are unchanged bit for bit) and runs at its slowest GPU's pace
    when the job is synchronous (``scenario.worker_loss_restarts``), at the mean speed of its
    workers otherwise; ``exclude_slowest`` rents ``ceil(n / (1 - share))`` GPUs per run and
    keeps the fastest ``n``. A replacement keeps the factor of the GPU it replaces.
    """
    transient_ss, on_demand_ss, variability_ss = np.random.SeedSequence(seed).spawn(3)
    slowdowns: dict[bool, FloatArray] = {}
    if variability is not None:
        n_gpus = sum(w.count for w in scenario.workers)
        vrng = np.random.default_rng(variability_ss)
        for kind in (True, False):
            slowdowns[kind] = run_slowdowns(
                variability,
                vrng,
                runs,
                n_gpus,
                sync=scenario.worker_loss_restarts,
                exclude=exclude_slowest,
            )
    factors = [float(f) for f in speed_factors] or [1.0]
    k = max(1, min(len(factors), runs))
    split = [runs // k + (1 if j < runs % k else 0) for j in range(k)]

    def one(ss: np.random.SeedSequence, transient: bool) -> RunStatistics:
        streams = [ss] if k == 1 and factors[0] == 1.0 else ss.spawn(k)
        parts = []
        offset = 0
        for factor, n, stream in zip(factors[:k], split, streams, strict=True):
            slow = slowdowns.get(transient)
            part_slowdown = None if slow is None else slow[offset : offset + n]
            offset += n
            parts.append(
                simulate_runs(
                    scenario,
                    speed=speed if factor == 1.0 else _scaled(speed, factor),
                    prices=prices,
                    lifetimes=lifetimes,
                    ps_lifetime=ps_lifetime,
                    startup_spot_s=startup_spot_s,
                    startup_on_demand_s=startup_on_demand_s,
                    capacity_gap_s=capacity_gap_s,
                    checkpoint_s=checkpoint_s,
                    restart_penalty_s=restart_penalty_s,
                    runs=n,
                    rng=np.random.default_rng(stream),
                    transient=transient,
                    run_slowdown=part_slowdown,
                )
            )
        if len(parts) == 1:
            return parts[0]
        return RunStatistics(
            duration_s=np.concatenate([p.duration_s for p in parts]),
            cost_usd=np.concatenate([p.cost_usd for p in parts]),
            revocations=np.concatenate([p.revocations for p in parts]),
            deadline_s=scenario.deadline_s,
            fallbacks=(
                np.concatenate([p.fallbacks for p in parts if p.fallbacks is not None])
                if scenario.fallback_after_s is not None
                else None
            ),
        )

    transient = one(transient_ss, True)
    on_demand = one(on_demand_ss, False)
    src = dict(sources or {})
    for g, (wg, dist) in enumerate(zip(scenario.workers, lifetimes, strict=True)):
        if wg.spot and dist is not None:
            src.setdefault(f"lifetime[{g}] {wg.gpu} {wg.region}", dist.source)
    if scenario.ps_spot and ps_lifetime is not None:
        src.setdefault("lifetime[ps]", ps_lifetime.source)
    src.setdefault("prices", prices.source)
    return SimulationResult(
        scenario=scenario,
        transient=transient,
        on_demand=on_demand,
        seed=seed,
        sources=src,
        notes=tuple(notes),
    )


def _scaled(speed: SpeedFunction, factor: float) -> SpeedFunction:
    """``speed`` ``factor`` times slower (a :class:`SpeedTable` stays a table)."""
    if isinstance(speed, SpeedTable):
        return SpeedTable(np.asarray(speed.table, dtype=np.float64) / factor)

    def slower(ready: IntArray) -> FloatArray:
        return np.asarray(speed(ready), dtype=np.float64) / factor

    return slower


def empirical_sampler(values: Sequence[float] | FloatArray) -> Sampler:
    """Bootstrap sampler over measured values (e.g. VM start-up times in seconds)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0 or not np.all(np.isfinite(data)) or np.any(data < 0):
        raise InvalidSpecError("samples", "need at least one finite value >= 0")
    return lambda rng, n: data[rng.integers(0, data.size, size=n)]

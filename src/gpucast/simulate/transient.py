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
* Elastic synchronous training (``scenario.elastic``): no worker is critical -- the job goes
  on at ``speed(ready workers)`` (the caller's re-planned progress rate), each change in
  their number costs ``scenario.reshard_s`` without progress (overlapping pauses merge; the
  initial workers' arrivals are the job's start, not changes), and only losing the last
  ready worker (its state was in memory) or a parameter server rolls back.
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

The engine works window by window (a time span per run, the next one sized from the pace so
far), vectorised over runs and never per event: (1) every server's *chain* of incarnations is
drawn to the window's end, a generation at a time -- a server's timeline does not depend on the
job (replacements launch at revocations, whatever the job is doing); (2) one sort gives, per
run, the ready workers and so the speed between their events, and the steps done up to each
(``work``); (3) the job then moves from one checkpoint, end or *critical* revocation (the
chief, a parameter server, any worker when synchronous) to the next, a sorted search in
``work`` per move. A round per checkpoint or rollback, not per revocation: a 64-node job
under 17 revocations per node-day is ~70 rounds instead of ~2,000. Where revoked servers are
replaced, what follows a rollback depends on its time alone until the next checkpoint, so a
chain of rollbacks (a job revoked faster than it restarts) is one round too: the rollbacks at
a block of the run's next critical revocations are played at once and the chain followed to
its last (the same runs, bit for bit: 100 synchronous nodes revoked every ~49 s, 50 runs over
the 30-day horizon, went from 93 s to 3 s). Runs go in chunks of about
50,000 servers to bound the window's arrays. The same seed gives the same runs bit for bit.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

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
from gpucast.predict.variability import (
    PROBE_S,
    SpeedVariability,
    rented_nodes,
    run_slowdowns,
)

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
#: incarnations simulated together in a first window: bounds a window's event arrays
_CHUNK_INCARNATIONS = 500_000


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
    gpus: FloatArray  # GPUs each column's server holds (0 for a PS): its billed GPU-time
    #: the columns of class c are ``bounds[c]:bounds[c + 1]`` (workers by group, then the PS)
    bounds: tuple[int, ...]


def _columns(
    scenario: ClusterScenario, prices: PriceTable, *, transient: bool, fallback: bool
) -> _Columns:
    group, spot, price, od_price, gpus = [], [], [], [], []
    for g, wg in enumerate(scenario.workers):
        is_spot = wg.spot and transient
        p = prices.price(wg.gpu, spot=is_spot, region=wg.region) / 3600.0
        od = prices.price(wg.gpu, spot=False, region=wg.region) / 3600.0 if fallback else p
        group += [g] * wg.count
        spot += [is_spot] * wg.count
        price += [p] * wg.count
        od_price += [od] * wg.count
        gpus += [float(wg.gpus)] * wg.count
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
    gpus += [0.0] * scenario.ps_count
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
        gpus=np.asarray(gpus, dtype=np.float64),
        bounds=(0, *itertools.accumulate(counts)),
    )


def _is_zero(delays: Delays) -> bool:
    """Whether ``delays`` is the constant 0 for every class (no capacity gaps at all)."""
    items = list(delays) if isinstance(delays, (list, tuple)) else [delays]
    return all(isinstance(d, (int, float)) and d == 0 for d in items)


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """Managed recovery across regions (SkyPilot's failover): a spot *replacement* that has
    waited ``after_s`` for capacity in its region is launched in ``region`` instead -- it
    waits for capacity there, and is revoked, started and billed as that region's -- and the
    next replacement of that server starts from there (and moves back the same way). The
    initial launches stay home. ``lifetimes``, ``startup_spot_s``, ``capacity_gap_s`` and
    the spot and on-demand US$/h per worker group are ``region``'s; parameter servers do not
    move."""

    region: str
    after_s: float
    lifetimes: Sequence[LifetimeDistribution | None]
    spot_usd_per_hour: Sequence[float]
    on_demand_usd_per_hour: Sequence[float]
    startup_spot_s: Delays = 0.0
    capacity_gap_s: Delays = 0.0


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
    move: Move | None = None
    #: this job's own checkpoint cost and restart penalty (s); None: the batch's
    checkpoint_s: float | None = None
    restart_penalty_s: float | None = None


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
    move: Move | None = None,
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
    with ``scenario.fallback_after_s`` a long wait is cut short by an on-demand launch;
    ``move`` (:class:`Move`) sends a replacement that waited long enough to another region.
    ``transient=False`` runs every server on demand with on-demand prices (the comparison
    baseline). ``rng``: a Generator, a seed, or ``None`` for seed 0 — the same seed gives the
    same result bit for bit. ``max_rounds`` caps, per chunk of runs, the rounds (one per
    checkpoint or chain of rollbacks) and the incarnations a server may go through in one
    window: runs still going then are reported unfinished.
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
        move=move,
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
    """The runs of several scenarios side by side in the same windows and rounds (see the
    module docstring): what :func:`simulate_runs` does for each job, in one pass.

    The jobs share the RNG and the market mode, and the checkpoint cost and the restart
    penalty where a job does not carry its own (``Job.checkpoint_s``, ``.restart_penalty_s``);
    their ``include_startup`` and (where they have capacity gaps) ``fallback_after_s`` must
    agree. With more than one job each ``speed`` must be a :class:`SpeedTable`. One
    :class:`RunStatistics` per job, in order; a batch of one job gives exactly what
    :func:`simulate_runs` gives.
    """
    if not jobs:
        return []
    for value in (restart_penalty_s, *(j.restart_penalty_s for j in jobs),
                  *(j.checkpoint_s for j in jobs)):  # fmt: skip
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise InvalidSpecError("restart_penalty_s / checkpoint_s", "must be >= 0", got=value)
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
        jump=not callable(checkpoint_s),
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
    #: the other region's class per worker group (lifetime, start-ups, gap, US$/s spot and
    #: on demand) and the wait before moving; None: the job does not move
    alt: list[tuple[LifetimeDistribution | None, Sampler, Sampler, Sampler, float, float]] | None
    move_after_s: float


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
    alt = _alternative(job, cls_spot[:n_groups]) if transient else None
    has_gaps = any(cls_spot) and not (_is_zero(job.capacity_gap_s) and alt is None)
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
        alt=alt,
        move_after_s=math.inf if job.move is None else float(job.move.after_s),
    )


def _alternative(
    job: Job, spot: list[bool]
) -> list[tuple[LifetimeDistribution | None, Sampler, Sampler, Sampler, float, float]] | None:
    """The classes of ``job.move``'s region, one per worker group (see :class:`Move`)."""
    move, n = job.move, len(spot)
    if move is None or not any(spot):
        return None
    if not (math.isfinite(move.after_s) and move.after_s >= 0):
        raise InvalidSpecError("move after", "must be a finite wait >= 0 s", got=move.after_s)
    lists = (move.lifetimes, move.spot_usd_per_hour, move.on_demand_usd_per_hour)
    if any(len(x) != n for x in lists):
        raise InvalidSpecError("move", f"needs one lifetime and one price per worker group ({n})")
    for g, is_spot in enumerate(spot):
        if is_spot and move.lifetimes[g] is None:
            raise InvalidSpecError(
                f"lifetimes in {move.region}",
                "a spot group that may move needs that region's distribution",
                fix="fit the revocation model there or give a hazard",
            )
        prices = (
            ("spot", move.spot_usd_per_hour[g]),
            ("on demand", move.on_demand_usd_per_hour[g]),
        )
        for label, usd in prices:
            if not (math.isfinite(usd) and usd >= 0):
                raise InvalidSpecError(f"{label} price in {move.region}", "must be >= 0", got=usd)
    start = _samplers(move.startup_spot_s, "move startup_spot_s", n + 1)
    gaps = _samplers(move.capacity_gap_s, "move capacity_gap_s", n + 1)
    od_start = _samplers(job.startup_on_demand_s, "startup_on_demand_s", n + 1)
    return [
        (move.lifetimes[g] if spot[g] else None, start[g], od_start[g], gaps[g],
         move.spot_usd_per_hour[g] / 3600.0 if spot[g] else move.on_demand_usd_per_hour[g] / 3600.0,
         move.on_demand_usd_per_hour[g] / 3600.0)
        for g in range(n)
    ]  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class _Incarnations:
    """Server incarnations, one entry each: the window's run (local index) and column,
    request, up and down times, US$/s, whether launched on demand as a fallback, and when
    it was created (its predecessor's revocation)."""

    loc: IntArray
    col: IntArray
    req: FloatArray
    up: FloatArray
    down: FloatArray
    price: FloatArray
    fb: npt.NDArray[np.bool_]
    created: FloatArray
    moved: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Window:
    """A time window ``[a, b)`` of some runs (``runs``; row = local index): its incarnations,
    the up and down times of the chains a restart waits for (``look_*``: sorted by row, column
    and creation; ``look_first``/``look_count`` per row x column), the speed
    between the events of its ready workers (``ev_*``, sorted by row and time; ``work`` = the
    steps done before each event, accumulated over all rows so one search finds a row's),
    and its critical revocations (``crit_*``). ``*_key`` are times made increasing over rows
    (``t - a + spans``) so one sorted search serves every row."""

    runs: IntArray
    a: FloatArray
    b: FloatArray
    inc: _Incarnations
    look_up: FloatArray
    look_down: FloatArray
    look_first: IntArray
    look_count: IntArray
    spans: FloatArray
    ev_t: FloatArray
    ev_key: FloatArray
    ev_off: IntArray
    full_next: IntArray | None
    speed: FloatArray
    #: when progress resumes in each event's interval (elastic jobs: after the re-shard
    #: pause that a change in ready workers starts); None: at the event (no elastic run)
    resume: FloatArray | None
    work: FloatArray
    crit_t: FloatArray
    crit_key: FloatArray
    crit_off: IntArray
    capped: npt.NDArray[np.bool_]


@dataclass(slots=True, kw_only=True)
class _Chains:
    """Each server's (run x column) latest incarnation; ``live``: the chain goes on."""

    live: npt.NDArray[np.bool_]
    req: FloatArray
    up: FloatArray
    down: FloatArray
    price: FloatArray
    fb: npt.NDArray[np.bool_]
    created: FloatArray
    cls: IntArray
    moved: npt.NDArray[np.bool_]


class _State:
    """The job's state per run: clock, progress, last checkpoint, paused until, chief column,
    last critical revocation handled, and what was billed and counted in earlier windows."""

    __slots__ = (
        "chief",
        "ckpt",
        "cost",
        "crit_after",
        "fallbacks",
        "gpu_s",
        "moves",
        "pause",
        "prog",
        "revs",
        "t",
    )

    def __init__(self, runs: int) -> None:
        self.t = np.zeros(runs)
        self.prog = np.zeros(runs)
        self.ckpt = np.zeros(runs)
        self.pause = np.zeros(runs)
        self.chief = np.zeros(runs, dtype=np.int64)
        self.crit_after = np.full(runs, -np.inf)
        self.cost = np.zeros(runs)
        self.gpu_s = np.zeros(runs)
        self.revs = np.zeros(runs, dtype=np.int64)
        self.fallbacks = np.zeros(runs, dtype=np.int64)
        self.moves = np.zeros(runs, dtype=np.int64)


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
        jump: bool = True,
    ) -> None:
        self.jobs = jobs
        #: follow a chain of rollbacks in one round (:meth:`_last_roll_back`): not with a
        #: drawn checkpoint cost, whose draws go round by round
        self.jump = jump
        self.rng = rng
        self.max_rounds = max_rounds
        self.ckpt_cost = ckpt_cost
        #: per job: its own restart penalty, and its own checkpoint cost (nan: the batch's)
        self.penalty = np.array(
            [penalty if j.restart_penalty_s is None else j.restart_penalty_s for j in jobs]
        )
        self.own_ckpt = np.array(
            [math.nan if j.checkpoint_s is None else j.checkpoint_s for j in jobs]
        )
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
        self.col_group = np.full((K, C), -1, dtype=np.int64)
        self.col_ps = np.zeros((K, C), dtype=bool)
        self.col_price = np.zeros((K, C))
        self.col_gpus = np.zeros((K, C))
        self.n_workers_by_group = np.zeros((K, G), dtype=np.int64)
        self.n_ps = np.zeros(K, dtype=np.int64)
        self.col_bounds = [p.cols.bounds for p in prepared]
        for k, p in enumerate(prepared):
            cols, w = p.cols, p.cols.group.size
            self.col_cls[k, :w] = cols.cls + self.class_base[k]
            self.col_worker[k, :w] = ~cols.is_ps
            self.col_group[k, :w] = cols.group
            self.col_ps[k, :w] = cols.is_ps
            self.col_price[k, :w] = cols.price_usd_per_s
            self.col_gpus[k, :w] = cols.gpus
            groups = len(jobs[k].scenario.workers)
            self.n_workers_by_group[k, :groups] = [wg.count for wg in jobs[k].scenario.workers]
            self.n_ps[k] = int(np.count_nonzero(cols.is_ps))
        # per class: US$/s of an incarnation and of an on-demand fallback; the other region's
        # classes (Move) follow everyone's own, paired both ways in ``alt_class``
        self.cls_price = np.zeros(self.n_classes)
        self.cls_od_price = np.zeros(self.n_classes)
        for k, p in enumerate(prepared):
            cols, w = p.cols, p.cols.group.size
            od = cols.fallback_price_usd_per_s
            self.cls_price[self.col_cls[k, :w]] = cols.price_usd_per_s
            self.cls_od_price[self.col_cls[k, :w]] = cols.price_usd_per_s if od is None else od
        alt_class = [-1] * self.n_classes
        self.move_after = np.full(K, np.inf)
        for k, p in enumerate(prepared):
            if p.alt is None:
                continue
            assert self.gaps is not None  # (a job that may move has gaps)
            self.move_after[k] = p.move_after_s
            for g, (life, start, start_od, gap, usd, od_usd) in enumerate(p.alt):
                home, alt = int(self.class_base[k]) + g, len(self.classes)
                self.classes.append(life)
                self.cls_spot.append(self.cls_spot[home])
                self.start_spot.append(start)
                self.start_od.append(start_od)
                self.gaps.append(gap)
                alt_class[home] = alt
                alt_class.append(home)
                self.cls_price = np.append(self.cls_price, usd)
                self.cls_od_price = np.append(self.cls_od_price, od_usd)
        self.alt_class = np.asarray(alt_class, dtype=np.int64)
        self.n_classes = len(self.classes)
        self.count_moves = [p.alt is not None for p in prepared]
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
        self.elastic = np.array([s.elastic for s in sc])[self.job]
        self.reshard_s = np.array([s.reshard_s if s.elastic else 0.0 for s in sc])[self.job]
        self.speed: SpeedFunction = jobs[0].speed  # one job: its own speed function
        self.speeds = None if K == 1 else _flat_speed(jobs, G)  # several: their tables
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
        # the first incarnations, (runs, columns), row = original run index (see _initial)
        self.req = np.zeros((R, C))
        self.up = np.zeros((R, C))
        self.down = np.zeros((R, C))

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

    # -- server chains: incarnation after incarnation -----------------------------------------
    def _launch(
        self, o: IntArray, col: IntArray, created: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, npt.NDArray[np.bool_], IntArray]:
        """The next incarnations of servers (run ``o``, column ``col``) revoked at ``created``:
        (request, up, down, US$/s, launched on demand, class). A spot replacement first waits
        its capacity gap; once it would wait its job's ``Move.after_s`` it goes to the other
        region and waits there; once the whole wait would exceed ``fallback_after_s`` it is
        launched on demand instead."""
        cls_of = self.chain.cls[o, col]
        launch = created
        on_demand: npt.NDArray[np.bool_] | None = None
        if self.gaps is not None:
            gap = self._draw_gap(cls_of)
            after = self.move_after[self.job[o]]
            move = (gap > after) & (self.alt_class[cls_of] >= 0)
            if move.any():
                cls_of = cls_of.copy()
                cls_of[move] = self.alt_class[cls_of[move]]
                gap[move] = after[move] + self._draw_gap(cls_of[move])
            if self.fallback_after_s is not None:
                on_demand = gap > self.fallback_after_s
                gap = np.where(on_demand, self.fallback_after_s, gap)
                if not on_demand.any():
                    on_demand = None
            launch = launch + gap
        up = launch + self._draw_startup(cls_of, on_demand)
        price = self.cls_price[cls_of]
        if on_demand is None:
            down = launch + self._draw_life(cls_of, launch, o)
            return launch, up, down, price, np.zeros(o.size, dtype=bool), cls_of
        spot = ~on_demand
        life = np.full(col.size, np.inf)  # an on-demand incarnation is never revoked
        life[spot] = self._draw_life(cls_of[spot], launch[spot], o[spot])
        price = np.where(on_demand, self.cls_od_price[cls_of], price)
        return launch, up, launch + life, price, on_demand, cls_of

    def _window(self, rs: IntArray, a: FloatArray, b: FloatArray) -> _Window:
        """Every incarnation of runs ``rs`` alive in their windows ``[a, b)`` (the chains'
        current ones, then replacements until each chain outlives ``b`` or ends), the ready
        workers and the speed between their events, and the critical revocations."""
        ch = self.chain
        C = self.n_cols
        loc0, col0 = np.nonzero(ch.live[rs])
        o0 = rs[loc0]
        parts = [(loc0, col0, ch.req[o0, col0], ch.up[o0, col0], ch.down[o0, col0],
                  ch.price[o0, col0], ch.fb[o0, col0], ch.created[o0, col0],
                  ch.moved[o0, col0])]  # fmt: skip
        todo = self.renew[o0, col0] & (ch.down[o0, col0] < b[loc0])
        loc, col = loc0[todo], col0[todo]
        capped = np.zeros(rs.size, dtype=bool)
        generations = 0
        while loc.size:
            generations += 1
            if generations > self.max_rounds:  # a chain that never outlives its window
                capped[loc] = True
                break
            o = rs[loc]
            created = ch.down[o, col]
            req, up, down, price, fb, cls = self._launch(o, col, created)
            moved = cls != ch.cls[o, col]
            ch.req[o, col], ch.up[o, col], ch.down[o, col] = req, up, down
            ch.price[o, col], ch.fb[o, col], ch.created[o, col] = price, fb, created
            ch.cls[o, col], ch.moved[o, col] = cls, moved
            parts.append((loc, col, req, up, down, price, fb, created, moved))
            more = down < b[loc]
            loc, col = loc[more], col[more]
        cat = [np.concatenate(x) for x in zip(*parts, strict=True)]
        inc = _Incarnations(
            loc=cat[0], col=cat[1], req=cat[2], up=cat[3], down=cat[4], price=cat[5],
            fb=cat[6], created=cat[7], moved=cat[8],
        )  # fmt: skip
        L, G = rs.size, self.n_groups
        job = self.job[rs]
        j_inc = job[inc.loc]
        spans = np.concatenate([[0.0], np.cumsum(b - a + 1.0)[:-1]])  # times, increasing
        # the chains a restart waits for -- the parameter servers, the chief column when it
        # is replaced (a synchronous job's workers: see ``full_next``) -- by row, column and
        # creation (each generation is sorted by row and column: a stable sort merges)
        o_inc = rs[inc.loc]
        sync = self.restarts_on_worker_loss[o_inc]
        keep = self.replace_revoked[o_inc]
        worker = self.col_worker[j_inc, inc.col]
        looked = self.col_ps[j_inc, inc.col] | (
            (inc.col == 0) & keep & ~sync & ~self.elastic[o_inc]
        )
        pick = np.flatnonzero(looked)
        pick = pick[np.argsort(inc.loc[pick] * C + inc.col[pick], kind="stable")]
        l_loc, l_col, l_up, l_down = inc.loc[pick], inc.col[pick], inc.up[pick], inc.down[pick]
        counts = np.bincount(l_loc * C + l_col, minlength=L * C)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        # critical revocations: those chains' (a dropped chief is followed separately) and
        # any worker's of a synchronous job
        crit_inc = worker & sync
        c_loc = np.concatenate([l_loc, inc.loc[crit_inc]])
        c_t = np.concatenate([l_down, inc.down[crit_inc]])
        within = c_t < b[c_loc]
        c_loc, c_t = c_loc[within], c_t[within]
        c_key = c_t - a[c_loc] + spans[c_loc]
        order = np.argsort(c_key, kind="stable")
        c_loc, c_t, c_key = c_loc[order], c_t[order], c_key[order]
        # ready workers: +1 at up, -1 at down, within [a, b); the rest at a
        group = self.col_group[j_inc, inc.col]
        ready = (group >= 0) & (inc.up < inc.down)
        a_i, b_i = a[inc.loc], b[inc.loc]
        at_start = ready & (inc.up < a_i)  # (every incarnation here has down >= a)
        ups = np.flatnonzero(ready & (inc.up >= a_i) & (inc.up < b_i))
        downs = np.flatnonzero(ready & (inc.down < b_i))
        start = np.zeros((L, G), dtype=np.int64)
        np.add.at(start, (inc.loc[at_start], group[at_start]), 1)
        # at one instant: the window's start first, then revocations, then start-ups (a
        # replacement up the moment its predecessor goes never counts twice)
        ev_loc = np.concatenate([np.arange(L), inc.loc[downs], inc.loc[ups]])
        ev_t = np.concatenate([a, inc.down[downs], inc.up[ups]])
        ev_key = ev_t - a[ev_loc] + spans[ev_loc]  # over the rows: one sort for all
        order = np.argsort(ev_key, kind="stable")
        per_row = np.bincount(ev_loc, minlength=L)
        ev_off = np.concatenate([[0], np.cumsum(per_row)])
        ev_loc = np.repeat(np.arange(L), per_row)  # = ev_loc[order]: rows stay in order
        ev_t, ev_key = ev_t[order], ev_key[order]
        pos = np.empty_like(order)
        pos[order] = np.arange(order.size)  # where each event went
        n_down = downs.size
        delta = np.zeros((ev_loc.size, G), dtype=np.int64)
        delta[pos[:L]] = start
        delta[pos[L : L + n_down], group[downs]] = -1
        delta[pos[L + n_down :], group[ups]] = 1
        total = np.cumsum(delta, axis=0)
        base = total[ev_off[:-1]] - delta[ev_off[:-1]]
        # (times a few 1e-7 s apart may swap in the key: keep counts in range)
        alive = np.clip(total - base[ev_loc], 0, self.n_workers_by_group[job[ev_loc]])
        runs_e = rs[ev_loc]
        if self.speeds is None:
            spd = np.asarray(self.speed(alive), dtype=np.float64)
        else:
            spd = self.speeds(alive, self.job[runs_e])
        if self.run_slowdown is not None:
            spd = spd / self.run_slowdown[runs_e]
        if self.elastic[rs].any():
            # an elastic job keeps its state in its workers' memory: losing the last one is
            # critical (back to the checkpoint)
            last = np.flatnonzero(
                self.elastic[runs_e]
                & (delta.sum(axis=1) < 0)
                & (alive.sum(axis=1) == 0)
                & (ev_t < b[ev_loc])
            )
            if last.size:
                c_loc = np.concatenate([c_loc, ev_loc[last]])
                c_t = np.concatenate([c_t, ev_t[last]])
                c_key = c_t - a[c_loc] + spans[c_loc]
                order = np.argsort(c_key, kind="stable")
                c_loc, c_t, c_key = c_loc[order], c_t[order], c_key[order]
        # synchronous jobs: the first event from which every worker is ready
        full_next = None
        if self.restarts_on_worker_loss[rs].any():
            full = np.all(alive == self.n_workers_by_group[job[ev_loc]], axis=1)
            marks = np.where(full, np.arange(full.size), full.size)
            full_next = np.minimum.accumulate(marks[::-1])[::-1]
        nxt = np.empty_like(ev_t)
        nxt[:-1] = ev_t[1:]
        nxt[ev_off[1:] - 1] = b
        resume = None
        if (self.reshard_s[rs] > 0).any():
            # elastic: each change in ready workers (not a window's start) pauses progress
            # for reshard_s; pauses that overlap merge (the latest change's end counts)
            change = ev_t > self.elastic_start[runs_e]
            change[ev_off[:-1]] = False
            idx = np.maximum.accumulate(np.where(change, np.arange(ev_t.size), -1))
            mine = idx >= ev_off[ev_loc]
            until = np.where(mine, ev_t[np.maximum(idx, 0)] + self.reshard_s[runs_e], -np.inf)
            resume = np.clip(until, ev_t, nxt)
            work = np.concatenate([[0.0], np.cumsum(spd * (nxt - resume))])
        else:
            work = np.concatenate([[0.0], np.cumsum(spd * (nxt - ev_t))])
        return _Window(
            runs=rs, a=a, b=b, inc=inc, look_up=l_up, look_down=l_down, look_first=first,
            look_count=counts, spans=spans, ev_t=ev_t, ev_key=ev_key, ev_off=ev_off, speed=spd,
            full_next=full_next, resume=resume,
            work=work, crit_t=c_t, crit_key=c_key,
            crit_off=np.concatenate([[0], np.cumsum(np.bincount(c_loc, minlength=L))]),
            capped=capped,
        )  # fmt: skip

    def _current_up(self, w: _Window, loc: IntArray, col: IntArray, at: FloatArray) -> FloatArray:
        """Up time of each chain's incarnation current at ``at`` (the first one revoked after
        it); ``inf`` where the chain has ended."""
        k = loc * self.n_cols + col
        idx, end = w.look_first[k], w.look_first[k] + w.look_count[k]
        while True:
            move = (idx < end) & (_take(w.look_down, idx, idx < end, np.inf) <= at)
            if not move.any():
                break
            idx = idx + move
        return _take(w.look_up, idx, idx < end, np.inf)

    def _latest_up(
        self, w: _Window, loc: IntArray, mask: npt.NDArray[np.bool_], at: FloatArray
    ) -> FloatArray:
        """Per row, the latest up time of the current incarnations of the columns ``mask``
        (rows x columns) at ``at``; -inf for a row without such columns."""
        rr, cc = np.nonzero(mask)
        out = np.full(loc.size, -np.inf)
        if rr.size:
            np.maximum.at(out, rr, self._current_up(w, loc[rr], cc, at[rr]))
        return out

    def _all_ready(self, w: _Window, loc: IntArray, o: IntArray, at: FloatArray) -> FloatArray:
        """When every worker of a synchronous job that replaces them is ready again after a
        revocation at ``at``: the first full count of ready workers from ``at`` on. Where the
        window has none, the latest start-up among the chains' latest incarnations: then a
        current incarnation is either the latest or revoked within the window, and that
        revocation rolls the job back before this time could count (the same time for every
        revocation of the window after ``at``)."""
        assert w.full_next is not None
        lo, hi = w.ev_off[loc], w.ev_off[loc + 1]
        first = np.clip(np.searchsorted(w.ev_key, at - w.a[loc] + w.spans[loc], "left"), lo, hi)
        nxt = w.full_next[np.minimum(first, w.full_next.size - 1)]
        found = (first < hi) & (nxt < hi)
        latest = np.where(self.col_worker[self.job[o]], self.chain.up[o], -np.inf).max(axis=1)
        return np.where(found, w.ev_t[np.minimum(nxt, w.ev_t.size - 1)], latest)

    # -- the job on top of its servers ----------------------------------------------------------
    def _next_critical(
        self, w: _Window, loc: IntArray, o: IntArray, after: FloatArray
    ) -> tuple[FloatArray, IntArray]:
        """The next critical revocation after ``after``, the last one handled (``inf``: none
        in the window), and its index in ``w.crit_t`` (where it is one of those)."""
        q = after - w.a[loc] + w.spans[loc]
        lo, hi = w.crit_off[loc], w.crit_off[loc + 1]
        idx = np.maximum(np.searchsorted(w.crit_key, q, side="right"), lo)
        c = _take(w.crit_t, idx, idx < hi, np.inf)
        # the chief of a job that drops revoked workers (an elastic job has none)
        dropped = ~self.replace_revoked[o] & ~self.elastic[o]
        if dropped.any():
            chief_down = self.down[o, self.state.chief[o]]
            follow = dropped & (chief_down > after) & (chief_down < w.b[loc])
            c = np.where(follow, np.minimum(c, chief_down), c)
        return c, idx

    def _reach(self, w: _Window, loc: IntArray, start: FloatArray, need: FloatArray) -> FloatArray:
        """When each row, progressing from ``start``, has made ``need`` more steps (``inf``:
        not within its window)."""
        lo, hi = w.ev_off[loc], w.ev_off[loc + 1] - 1
        i0 = np.clip(
            np.searchsorted(w.ev_key, start - w.a[loc] + w.spans[loc], "right") - 1, lo, hi
        )
        if w.resume is None:
            v = w.work[i0] + w.speed[i0] * (start - w.ev_t[i0]) + need
        else:
            v = w.work[i0] + w.speed[i0] * np.maximum(start - w.resume[i0], 0.0) + need
        j = np.clip(np.searchsorted(w.work, v, "left") - 1, lo, hi)
        rate = w.speed[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            at = w.ev_t[j] if w.resume is None else w.resume[j]
            t = at + (v - w.work[j]) / rate
        ok = (v <= w.work[hi + 1]) & (rate > 0) & (start < w.b[loc])
        return np.where(ok, np.maximum(t, start), np.inf)

    def _roll_back(self, w: _Window, loc: IntArray, o: IntArray, at: FloatArray) -> None:
        """A critical revocation at ``at``: back to the checkpoint; resume ``penalty`` after
        the chief (re-elected among the survivors if it was dropped), every parameter server
        and, when synchronous, every remaining worker are ready."""
        s = self.state
        s.prog[o] = s.ckpt[o]
        s.crit_after[o], s.pause[o] = self._rolled_back(w, loc, o, at)
        s.t[o] = s.crit_after[o]

    def _rolled_back(
        self, w: _Window, loc: IntArray, o: IntArray, at: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """After a rollback at ``at``: the last critical revocation it handles (``at``, or a
        later one of the same storm) and when the job resumes. Only a job that drops revoked
        workers changes state here (it re-elects its chief): for the others both are a
        function of ``at`` alone."""
        s = self.state
        jobs = self.job[o]
        after = np.array(at, dtype=np.float64)
        keep = self.replace_revoked[o]
        resume = np.full(o.size, -np.inf)
        sync_keep = keep & self.restarts_on_worker_loss[o]
        elastic = self.elastic[o]  # (no chief to wait for: the PS only)
        if (keep & ~sync_keep & ~elastic).any():  # (a synchronous job's chief: a worker)
            k = np.flatnonzero(keep & ~sync_keep & ~elastic)
            resume[k] = self._current_up(w, loc[k], s.chief[o[k]], at[k])
        drop = np.flatnonzero(~keep & ~elastic)
        if drop.size:
            od, at_d = o[drop], at[drop]
            up0, down0 = self.up[od], self.down[od]
            gone = down0 <= at_d[:, None]
            workers = self.col_worker[jobs[drop]]
            lost = gone[np.arange(drop.size), s.chief[od]]
            if lost.any():
                key = np.where(up0 <= at_d[:, None], -np.inf, up0)
                key = np.where(gone | ~workers, np.inf, key)
                s.chief[od[lost]] = np.argmin(key[lost], axis=1)
            chief = s.chief[od]
            ok = ~gone[np.arange(drop.size), chief]
            resume[drop] = np.where(ok, up0[np.arange(drop.size), chief], np.inf)
            sync = self.restarts_on_worker_loss[od]
            if sync.any():
                wait = np.where(workers & ~gone, up0, -np.inf).max(axis=1)
                resume[drop] = np.where(sync, np.maximum(resume[drop], wait), resume[drop])
        if sync_keep.any():
            k = np.flatnonzero(sync_keep)
            ready = self._all_ready(w, loc[k], o[k], at[k])
            resume[k] = np.maximum(resume[k], ready)
            # without parameter servers, the revocations before every worker is ready again
            # change nothing: the job stays at its checkpoint until then, and each of them
            # would find the same ready time (a storm is one rollback, not one per node)
            quiet = self.n_ps[jobs[k]] == 0
            if quiet.any():
                q = k[quiet]
                key = ready[quiet] - w.a[loc[q]] + w.spans[loc[q]]
                last = np.searchsorted(w.crit_key, key, "left") - 1
                later = last >= w.crit_off[loc[q]]
                skip = _take(w.crit_t, last, later, -np.inf)
                moved = later & (skip > at[q])
                after[q[moved]] = skip[moved]
        ps = self.col_ps[jobs]
        if ps.any():
            resume = np.maximum(resume, self._latest_up(w, loc, ps, at))
        return after, np.maximum(at, resume) + self.penalty[self.job[o]]

    def _ahead(
        self,
        w: _Window,
        loc: IntArray,
        o: IntArray,
        t: FloatArray,
        pause: FloatArray,
        after: FloatArray,
        prog: FloatArray,
    ) -> tuple[FloatArray, FloatArray, IntArray, FloatArray]:
        """From a state (clock, paused until, last critical revocation handled, progress):
        when the job reaches its next checkpoint target (``inf``: not within the window, or
        not before ``start`` catches up), the next critical revocation and its index in
        ``w.crit_t`` (see :meth:`_next_critical`), and that target."""
        start = np.maximum(t, pause)
        c, idx = self._next_critical(w, loc, o, after)
        target = np.minimum(self.steps[o], self.state.ckpt[o] + self.every[o])
        reach = np.full(loc.size, np.inf)
        go = start < np.minimum(c, w.b[loc])
        if go.any():
            g = np.flatnonzero(go)
            reach[g] = self._reach(w, loc[g], start[g], target[g] - prog[g])
        return reach, c, idx, target

    def _last_roll_back(self, w: _Window, loc: IntArray, o: IntArray, idx: IntArray) -> IntArray:
        """Rows whose revoked servers are replaced, rolling back at critical revocation
        ``idx`` (an index into ``w.crit_t``): the index of their last rollback before the job
        next checkpoints, ends or needs the next window. What follows a rollback depends on
        its time alone (the checkpoint stays until the next one), so a block of each row's
        next critical revocations is played at once and the chain of rollbacks followed by
        pointer doubling: a storm of revocations is a few rounds, not one per revocation,
        and every row ends where the round-by-round loop would have left it."""
        s = self.state
        hi = w.crit_off[loc + 1]
        out = np.array(idx, dtype=np.int64)
        todo = np.arange(loc.size)
        block = 16
        while todo.size:
            i0 = out[todo]
            n = np.minimum(i0 + block, hi[todo]) - i0  # >= 1: i0 itself is a rollback
            first = np.concatenate([[0], np.cumsum(n)[:-1]])
            row = np.repeat(np.arange(todo.size), n)
            pos = np.arange(row.size)
            k = i0[row] + pos - first[row]
            lr, orr = loc[todo][row], o[todo][row]
            after, pause = self._rolled_back(w, lr, orr, w.crit_t[k])
            reach, c, j, _ = self._ahead(w, lr, orr, after, pause, after, s.ckpt[orr])
            back = np.isfinite(c) & (reach > c)  # the next round rolls back at c (= j's)
            f = np.where(back & (j < (i0 + n)[row]), pos + (j - k), pos)
            while True:
                g = f[f]
                if np.array_equal(g, f):
                    break
                f = g
            last = f[first]
            leave = back[last]  # the chain goes on past the block, at j
            out[todo] = np.where(leave, j[last], k[last])
            todo = todo[leave]
            # bound the block's (rows x columns) arrays
            block = max(16, min(4 * block, (1 << 22) // max(1, todo.size * self.n_cols)))
        return out

    def _settle(self, w: _Window, ended: list[tuple[IntArray, FloatArray, bool]]) -> None:
        """Rows that ended (rows, end times, finished?): bill their incarnations up to the
        end, count revocations and fallbacks, write their outputs."""
        if not ended:
            return
        s, inc = self.state, w.inc
        loc = np.concatenate([e[0] for e in ended])
        if loc.size == 0:
            return
        end = np.concatenate([e[1] for e in ended])
        finished = np.concatenate([np.full(e[0].size, e[2]) for e in ended])
        o = w.runs[loc]
        L = w.runs.size
        stop = np.full(L, np.nan)
        stop[loc] = end
        e = stop[inc.loc]
        mine = ~np.isnan(e)
        e, li = e[mine], inc.loc[mine]
        down = inc.down[mine]
        billed_s = np.clip(np.minimum(down, e) - inc.req[mine], 0.0, None)
        billed = billed_s * inc.price[mine]
        gpus = self.col_gpus[self.job[w.runs[li]], inc.col[mine]]
        fb = inc.fb[mine] & (inc.created[mine] <= e)
        self.out_cost[o] = s.cost[o] + np.bincount(li, weights=billed, minlength=L)[loc]
        self.out_gpu_s[o] = s.gpu_s[o] + np.bincount(li, weights=billed_s * gpus, minlength=L)[loc]
        revs = np.bincount(li, weights=down <= e, minlength=L)[loc]
        self.out_revs[o] = s.revs[o] + revs.astype(np.int64)
        fbs = np.bincount(li, weights=fb, minlength=L)[loc]
        self.out_fallbacks[o] = s.fallbacks[o] + fbs.astype(np.int64)
        mv = inc.moved[mine] & (inc.created[mine] <= e)
        self.out_moves[o] = s.moves[o] + np.bincount(li, weights=mv, minlength=L)[loc].astype(
            np.int64
        )
        self.out_dur[o] = np.where(finished, end, np.inf)

    def _retire(self, w: _Window, loc: IntArray) -> None:
        """Rows ``loc`` go on past their window: bill and count what ended within it."""
        s, inc = self.state, w.inc
        moving = np.zeros(w.runs.size, dtype=bool)
        moving[loc] = True
        old = moving[inc.loc] & (inc.down < w.b[inc.loc])
        li = inc.loc[old]
        L = w.runs.size
        o = w.runs[loc]
        paid_s = inc.down[old] - inc.req[old]
        s.cost[o] += np.bincount(li, weights=paid_s * inc.price[old], minlength=L)[loc]
        gpus = self.col_gpus[self.job[w.runs[li]], inc.col[old]]
        s.gpu_s[o] += np.bincount(li, weights=paid_s * gpus, minlength=L)[loc]
        s.revs[o] += np.bincount(li, minlength=L)[loc]
        s.fallbacks[o] += np.bincount(li, weights=inc.fb[old], minlength=L)[loc].astype(np.int64)
        s.moves[o] += np.bincount(li, weights=inc.moved[old], minlength=L)[loc].astype(np.int64)
        gone = old & ~self.renew[w.runs[inc.loc], inc.col]
        self.chain.live[w.runs[inc.loc[gone]], inc.col[gone]] = False

    def _play(self, w: _Window) -> IntArray:
        """Advance the job of every run of window ``w`` from event to event (a checkpoint, the
        end, a critical revocation) until it ends or needs the next window; returns the rows
        that need it."""
        s = self.state
        later: list[IntArray] = []
        ended: list[tuple[IntArray, FloatArray, bool]] = []
        pending = np.arange(w.runs.size)
        capped = np.flatnonzero(w.capped)
        if capped.size:
            ended.append((capped, s.t[w.runs[capped]], False))
            pending = pending[~w.capped]
        while pending.size:
            self.rounds += 1
            o = w.runs[pending]
            if self.rounds > self.max_rounds:  # the cap: what is left ends unfinished
                rest = np.concatenate([pending, *later])
                ended.append((rest, s.t[w.runs[rest]], False))
                later = []
                break
            b, horizon = w.b[pending], self.horizon[o]
            reach, c, idx, target = self._ahead(
                w, pending, o, s.t[o], s.pause[o], s.crit_after[o], s.prog[o]
            )
            steps = self.steps[o]
            first = np.minimum(reach, c)
            stall = self.stall_s[o]
            stalled = (stall < b) & (stall <= first)
            unknown = ~stalled & ~np.isfinite(first)
            out_of_time = unknown & (b >= horizon)
            wait = unknown & ~out_of_time
            hit = ~stalled & ~unknown & (reach <= c)
            done = hit & (target >= steps)
            ckpt = hit & ~done
            back = ~stalled & ~unknown & ~hit
            ended.append((pending[stalled], stall[stalled], False))
            ended.append((pending[out_of_time], horizon[out_of_time], False))
            ended.append((pending[done], reach[done], True))
            if ckpt.any():
                k = o[ckpt]
                s.t[k] = reach[ckpt]
                s.prog[k] = s.ckpt[k] = target[ckpt]
                cost = self.ckpt_cost(self.rng, k.size)
                own = self.own_ckpt[self.job[k]]
                s.pause[k] = reach[ckpt] + np.where(np.isnan(own), cost, own)
            if back.any():
                at = c[back]
                fast = np.flatnonzero(self.replace_revoked[o[back]] & self.jump)
                if fast.size:  # a storm: straight to its last rollback
                    rows = pending[back][fast]
                    last = self._last_roll_back(w, rows, o[back][fast], idx[back][fast])
                    at[fast] = w.crit_t[last]
                self._roll_back(w, pending[back], o[back], at)
            if wait.any():
                later.append(pending[wait])
            pending = pending[ckpt | back]
        self._settle(w, ended)
        # (in row order: the next window draws the same whatever round each row stopped in)
        return np.sort(np.concatenate(later)) if later else np.zeros(0, dtype=np.int64)

    # -- the simulation -------------------------------------------------------------------------
    def run(self) -> list[RunStatistics]:
        R, C = self.runs, self.n_cols
        self._initial()
        real = self.col_cls[self.job] >= 0
        self.renew = real & (self.replace_revoked[:, None] | self.col_ps[self.job])
        self.chain = _Chains(
            live=real, req=self.req.copy(), up=self.up.copy(), down=self.down.copy(),
            price=self.col_price[self.job], fb=np.zeros((R, C), dtype=bool),
            created=np.full((R, C), -np.inf), cls=self.col_cls[self.job],
            moved=np.zeros((R, C), dtype=bool),
        )  # fmt: skip
        # a job dropping revoked workers stalls when its last worker is gone
        workers = self.col_worker[self.job]
        last = np.where(workers, self.down, -np.inf).max(axis=1)
        self.stall_s = np.where(self.replace_revoked, np.inf, last)
        s = self.state = _State(R)
        s.chief[:] = 0
        first_up = self.up[np.arange(R), 0]
        ps_up = np.where(self.col_ps[self.job], self.up, -np.inf).max(axis=1)
        s.pause[:] = np.maximum(first_up, ps_up)
        # an elastic job starts once its initial workers are all up (their arrivals are its
        # first rendezvous, not re-shards)
        all_up = np.where(workers & (self.down > self.up), self.up, -np.inf).max(axis=1)
        self.elastic_start = np.where(self.elastic, np.maximum(all_up, 0.0), np.inf)
        s.pause[:] = np.where(self.elastic, np.maximum(s.pause, all_up), s.pause)
        self.out_dur = np.full(R, np.inf)
        self.out_cost = np.zeros(R)
        self.out_gpu_s = np.zeros(R)
        self.out_revs = np.zeros(R, dtype=np.int64)
        self.out_fallbacks = np.zeros(R, dtype=np.int64)
        self.out_moves = np.zeros(R, dtype=np.int64)
        first_span = self._first_span()
        # runs in chunks of about _CHUNK_INCARNATIONS incarnations in their first window, from
        # each job's incarnations per server so far: the windows' arrays stay small
        servers = np.count_nonzero(self.col_cls >= 0, axis=1).astype(np.float64)
        per_server = np.full(len(self.jobs), 4.0)  # until measured
        lo = 0
        while lo < R:
            expected = np.cumsum(servers[self.job[lo:]] * per_server[self.job[lo:]])
            hi = lo + max(int(np.searchsorted(expected, _CHUNK_INCARNATIONS, side="right")), 1)
            self.rounds = 0
            rs = np.arange(lo, hi)
            a, span = np.zeros(rs.size), first_span[lo:hi]
            first = True
            while rs.size:
                b = np.minimum(a + span, self.horizon[rs])
                w = self._window(rs, a, b)
                if first:
                    K = len(self.jobs)
                    made = np.bincount(self.job[rs[w.inc.loc]], minlength=K)
                    had = np.bincount(self.job[rs], weights=servers[self.job[rs]], minlength=K)
                    seen = had > 0
                    per_server[seen] = np.maximum(made[seen] / had[seen], 1.0)
                    first = False
                later = self._play(w)
                if later.size == 0:
                    break
                self._retire(w, later)
                rs, a = rs[later], b[later]
                span = self._next_span(rs, a, span[later])
            lo = hi
        stats = []
        for k, job in enumerate(self.jobs):
            part = slice(int(self.first_run[k]), int(self.first_run[k + 1]))
            stats.append(
                RunStatistics(
                    duration_s=self.out_dur[part],
                    cost_usd=self.out_cost[part],
                    revocations=self.out_revs[part],
                    deadline_s=job.scenario.deadline_s,
                    fallbacks=self.out_fallbacks[part] if self.count_fallbacks[k] else None,
                    moves=self.out_moves[part] if self.count_moves[k] else None,
                    gpu_s=self.out_gpu_s[part],
                )
            )
        return stats

    def _first_span(self) -> FloatArray:
        """Each run's first window: 1.5x its time at full speed plus its start-up, at least
        an hour (a run past it goes on in a window twice as long)."""
        R = self.runs
        full = np.asarray(self._full_speed(), dtype=np.float64)
        slow = np.ones(R) if self.run_slowdown is None else self.run_slowdown
        with np.errstate(divide="ignore"):
            ideal = np.where(full > 0, self.steps * slow / full, np.inf)
        startup = np.max(self.up, axis=1)
        span = 1.5 * (ideal + startup) + 3600.0
        return np.where(np.isfinite(span), span, self.horizon)

    def _next_span(self, o: IntArray, now: FloatArray, span: FloatArray) -> FloatArray:
        """The next window of runs going on at ``now``: 1.3x the time their checkpointed
        pace so far leaves (between half and four times the last window), plus an hour."""
        s = self.state
        done = s.ckpt[o]
        with np.errstate(divide="ignore", invalid="ignore"):
            left = (self.steps[o] - done) * now / done
        guess = np.where(done > 0, 1.3 * left + 3600.0, 2.0 * span)
        return np.clip(guess, 0.5 * span, 4.0 * span)

    def _full_speed(self) -> FloatArray:
        """Each run's speed with every worker ready."""
        counts = self.n_workers_by_group[self.job]
        if self.speeds is None:
            return np.asarray(self.speed(counts), dtype=np.float64)
        return self.speeds(counts, self.job)


def _take(values: FloatArray, idx: IntArray, ok: npt.NDArray[np.bool_], fill: float) -> FloatArray:
    """``values[idx]`` where ``ok``, ``fill`` elsewhere (``idx`` may be out of range there)."""
    if values.size == 0:
        return np.full(idx.shape, fill)
    return np.where(ok, values[np.minimum(idx, values.size - 1)], fill)


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
        if alive.shape[1] == 1:  # one GPU group: no sum over groups
            return np.asarray(flat[offsets[job] + alive[:, 0] * strides[job, 0]])
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
    balance_batches: bool = False,
    compute_share: float = 1.0,
    sources: dict[str, str] | None = None,
    notes: Sequence[str] = (),
    move: Move | None = None,
    on_demand_checkpoint_every_steps: int | Literal["same"] | None = "same",
) -> SimulationResult:
    """The scenario and its on-demand equivalent (same cluster, no revocations, on-demand
    prices), from one seed: two independent streams spawned from ``SeedSequence(seed)``.
    ``on_demand_checkpoint_every_steps``: the on-demand equivalent's checkpoint interval where
    it differs from ``scenario``'s (an interval chosen for the spot lifetimes, as Young's is,
    does not apply to a job that is never revoked); ``"same"``: ``scenario``'s.

    ``speed_factors`` are equally likely strata of the step-time model's uncertainty
    (:func:`gpucast.plan.uncertainty.strata`): the runs are split evenly over them and each
    stratum's job runs ``factor`` times slower (one factor of 1: no model uncertainty).
    ``capacity_gap_s``, ``scenario.fallback_after_s`` and ``move``: see
    :func:`simulate_runs` (the on-demand equivalent has no revocations, hence no gaps,
    fallbacks or moves).

    ``variability``: each run draws one speed factor per GPU of the cluster (from a third
    stream, so runs without it are unchanged bit for bit) and runs at its slowest GPU's pace
    when the job is synchronous (``scenario.worker_loss_restarts`` or ``scenario.elastic``), at
    the mean speed of its workers otherwise; ``exclude_slowest`` rents ``ceil(n / (1 -
    share))`` GPUs per run of a job its slowest GPU paces and keeps the fastest ``n``. A
    replacement keeps the factor of the GPU it replaces. With ``balance_batches`` a
    synchronous job's batch is split by speed: it runs at the mean speed. ``compute_share``:
    how much of a GPU's slowdown ``f`` reaches the step, ``1 + share (f - 1)`` (1: the whole
    step; less where communication is exposed, which no slow GPU stretches).
    """
    transient_ss, on_demand_ss, variability_ss = np.random.SeedSequence(seed).spawn(3)
    slowdowns: dict[bool, FloatArray] = {}
    probes: dict[bool, tuple[FloatArray, FloatArray]] = {}
    if variability is not None:
        servers = sum(w.count for w in scenario.workers)
        per_server = max(1, max(int(w.gpus) for w in scenario.workers))
        vrng = np.random.default_rng(variability_ss)
        # an elastic job is synchronous too (it only goes on without a lost node); the
        # slowest are dropped where they pace the job, as plan train prices it
        sync = (scenario.worker_loss_restarts or scenario.elastic) and not balance_batches
        exclude = exclude_slowest if sync else 0.0
        for kind in (True, False):
            slowdowns[kind] = run_slowdowns(
                variability,
                vrng,
                runs,
                sum(w.count * max(1, int(w.gpus)) for w in scenario.workers),
                sync=sync,
                exclude=exclude,
                gpus_per_node=per_server,
            )
            # a slow GPU stretches the step's compute, not its exposed communication
            slowdowns[kind] = 1.0 + compute_share * (slowdowns[kind] - 1.0)
        extra = int(rented_nodes(servers, exclude)) - servers
        if extra > 0:
            for kind in (True, False):
                probes[kind] = _probe_bill(
                    scenario, prices, extra, vrng, runs, transient=kind,
                    startup_s=startup_spot_s if kind else startup_on_demand_s,
                )  # fmt: skip
    factors = [float(f) for f in speed_factors] or [1.0]
    k = max(1, min(len(factors), runs))
    split = [runs // k + (1 if j < runs % k else 0) for j in range(k)]

    od_scenario = (
        scenario
        if on_demand_checkpoint_every_steps == "same"
        else dataclasses.replace(scenario, checkpoint_every_steps=on_demand_checkpoint_every_steps)
    )

    def one(ss: np.random.SeedSequence, transient: bool) -> RunStatistics:
        streams = [ss] if k == 1 and factors[0] == 1.0 else ss.spawn(k)
        job = scenario if transient else od_scenario
        parts = []
        offset = 0
        for factor, n, stream in zip(factors[:k], split, streams, strict=True):
            slow = slowdowns.get(transient)
            part_slowdown = None if slow is None else slow[offset : offset + n]
            offset += n
            parts.append(
                simulate_runs(
                    job,
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
                    move=move,
                )
            )
        if len(parts) == 1:
            return parts[0]
        return RunStatistics(
            speed_factor=np.repeat(np.asarray(factors[:k], dtype=np.float64), split),
            duration_s=np.concatenate([p.duration_s for p in parts]),
            cost_usd=np.concatenate([p.cost_usd for p in parts]),
            revocations=np.concatenate([p.revocations for p in parts]),
            deadline_s=job.deadline_s,
            fallbacks=(
                np.concatenate([p.fallbacks for p in parts if p.fallbacks is not None])
                if job.fallback_after_s is not None
                else None
            ),
            moves=(
                np.concatenate([p.moves for p in parts if p.moves is not None])
                if all(p.moves is not None for p in parts)
                else None
            ),
            gpu_s=(
                np.concatenate([p.gpu_s for p in parts if p.gpu_s is not None])
                if all(p.gpu_s is not None for p in parts)
                else None
            ),
        )

    transient = _billed(one(transient_ss, True), probes.get(True))
    on_demand = _billed(one(on_demand_ss, False), probes.get(False))
    src = dict(sources or {})
    for g, (wg, dist) in enumerate(zip(scenario.workers, lifetimes, strict=True)):
        if wg.spot and dist is not None:
            src.setdefault(f"lifetime[{g}] {wg.gpu} {wg.region}", dist.source)
    if scenario.ps_spot and ps_lifetime is not None:
        src.setdefault("lifetime[ps]", ps_lifetime.source)
    if move is not None:
        for g, (wg, dist) in enumerate(zip(scenario.workers, move.lifetimes, strict=True)):
            if wg.spot and dist is not None:
                src.setdefault(f"lifetime[{g}] {wg.gpu} {move.region} (after a move)", dist.source)
    src.setdefault("prices", prices.source)
    return SimulationResult(
        scenario=scenario,
        transient=transient,
        on_demand=on_demand,
        seed=seed,
        sources=src,
        notes=tuple(notes),
    )


def _probe_bill(
    scenario: ClusterScenario,
    prices: PriceTable,
    extra: int,
    rng: np.random.Generator,
    runs: int,
    *,
    transient: bool,
    startup_s: Delays,
) -> tuple[FloatArray, FloatArray]:
    """(USD, GPU-seconds) per run of the ``extra`` servers started beside the job to drop the
    slowest (``exclude_slowest``): each as the first worker group's, billed for its start-up
    and :data:`~gpucast.predict.variability.PROBE_S`, then released."""
    wg = scenario.workers[0]
    usd_per_s = prices.price(wg.gpu, spot=wg.spot and transient, region=wg.region) / 3600.0
    start = _samplers(startup_s, "startup", len(scenario.workers) + 1)[0](rng, runs * extra)
    held_s = (np.asarray(start, dtype=np.float64) + PROBE_S).reshape(runs, extra).sum(axis=1)
    return held_s * usd_per_s, held_s * float(wg.gpus)


def _billed(stats: RunStatistics, probe: tuple[FloatArray, FloatArray] | None) -> RunStatistics:
    """``stats`` with the probe's bill added to each run's cost and GPU-seconds."""
    if probe is None:
        return stats
    usd, gpu_s = probe
    return dataclasses.replace(
        stats,
        cost_usd=stats.cost_usd + usd,
        gpu_s=None if stats.gpu_s is None else stats.gpu_s + gpu_s,
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

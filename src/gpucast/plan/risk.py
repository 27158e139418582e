"""Spot risk: a quick first-order estimate for pruning, then the Monte Carlo simulator.

How a spot cluster is simulated (:func:`simulate_spot`, through
:func:`gpucast.simulate.transient.simulate_runs`):

* **DDP / FSDP** are synchronous: losing any node stops every worker, so the job rolls back to
  its last checkpoint and resumes when a replacement node is up (every node billed while the
  job waits). Each node is simulated with its own lifetime, and a revoked one is replaced
  alone: its survivors keep their age. (Until session 39 the cluster was one server whose
  lifetime was the first of its nodes', so a replacement restarted every node's clock: exact
  for a constant hazard, but with GCE's K80 fit (Weibull shape 0.49) a 16-node cluster saw
  ~10x the revocations a per-node simulation gives.)
* **Parameter server** (asynchronous): each node is a server; losing an ordinary node only
  slows the job (the speed table gives the cluster's speed for each number of live nodes),
  losing the chief node rolls back to the last checkpoint. PS shards stay on demand.
* Checkpoints every ``tau = sqrt(2 C / hazard)`` seconds of progress (Young 1974), with ``C``
  the checkpoint time; revoked nodes are replaced after a start-up delay.
* Mixed clusters: one group per instance type, the speed table indexed by the live nodes of
  both (the chief is in the first; a synchronous job progresses with all of them up).
* The step-time model's own uncertainty: the runs are split evenly over strata of the speed
  factor (:mod:`gpucast.plan.uncertainty`), each stratum simulated that much slower or
  faster, so P(meet deadline) covers revocations *and* the model's error.

Pure: the RNG is seeded from the request's seed and the candidate's identity, so a candidate
gets the same runs whatever else is simulated.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.domain.simulation import (
    CPU_PS,
    ClusterScenario,
    PriceTable,
    RunStatistics,
    Summary,
    WorkerGroup,
    at_central_step,
    mean_ci95_half,
)
from gpucast.predict.revocation import ExponentialLifetime, LifetimeDistribution
from gpucast.simulate.transient import Delay, Job, Move, SpeedTable, simulate_batch

if TYPE_CHECKING:
    from gpucast.plan.inputs import RiskInputs

FloatArray = npt.NDArray[np.float64]


def mean_lifetime_s(dist: LifetimeDistribution, *, draws: int = 4000, seed: int = 12345) -> float:
    """Mean node lifetime (s) by sampling; a forced stop (cap) counts as an end of life."""
    life = dist.sample(np.random.default_rng(seed), draws)
    finite = life[np.isfinite(life)]
    if finite.size == 0:
        return math.inf
    # never-revoked draws: count them at the largest finite life (a conservative floor)
    return float(np.mean(np.where(np.isfinite(life), life, finite.max())))


#: rounds of renewals :func:`window_hazard_per_s` draws at most (64 x 256 per draw)
_MAX_RENEWAL_ROUNDS = 256


def window_hazard_per_s(
    dist: LifetimeDistribution,
    horizon_s: float,
    *,
    draws: int = 2000,
    renewals: int = 64,
    seed: int = 12345,
) -> float:
    """Revocations per second a fresh node, and the fresh nodes replacing it, see over the
    job's first ``horizon_s``: E[N(horizon)] / horizon of the renewal process of ``dist``'s
    lifetimes: the first revocation's probability from ``dist.survival``, the later ones by
    sampling (``renewals`` lifetimes a round, rounds until every draw's node outlives the
    horizon: a fixed 64 undercounted a busy cluster). It is the hazard Young's
    interval wants: ``1 / mean lifetime`` is the long-run rate, which a job much shorter than
    the mean lifetime never reaches where young nodes go first (a Weibull shape below 1: GCE's
    K80 fit, shape 0.49, is ~35x likelier to be revoked in its first hour than the mean says;
    QA 37 T #5); a shape above 1 gives the reverse. ``horizon_s`` not finite: the long-run
    rate."""
    if not (math.isfinite(horizon_s) and horizon_s > 0) or _memoryless(dist):
        return 1.0 / max(mean_lifetime_s(dist), 1.0)  # the same at every age
    rng = np.random.default_rng(seed)
    clock = np.zeros(draws)  # each draw's last revocation so far
    count = np.zeros(draws)  # each draw's revocations after its first one
    live = np.arange(draws)  # the draws whose clock has not passed the horizon
    for k in range(_MAX_RENEWAL_ROUNDS):  # until every draw's node outlives the horizon
        life = dist.sample(rng, live.size * renewals).reshape(live.size, renewals)
        ends = clock[live, None] + np.cumsum(life, axis=1)
        count[live] += (ends[:, 1 if k == 0 else 0 :] <= horizon_s).sum(axis=1)
        clock[live] = ends[:, -1]
        live = live[clock[live] <= horizon_s]
        if live.size == 0:
            break
    # the first revocation exactly (the survival function), the later ones sampled: a short
    # job's revocations are rare events, which 2,000 draws alone count within +-25%
    first = 1.0 - float(np.asarray(dist.survival(horizon_s)))
    return (first + float(count.mean())) / horizon_s


def _memoryless(dist: LifetimeDistribution) -> bool:
    """A constant hazard (exponential lifetimes, no forced stop)."""
    return isinstance(dist, ExponentialLifetime) and dist.cap_s is None


#: horizons (s) of :class:`WindowHazards`' table: 1 minute to ~116 days, 4 points a decade
_WINDOW_GRID_S = np.logspace(math.log10(60.0), 7.0, 22)


@dataclass(frozen=True, slots=True)
class WindowHazards:
    """:func:`window_hazard_per_s` of one node's lifetimes at any job length, vectorised (the
    pruning estimates' hazard, one table per market): interpolated log-log (a Weibull's rate
    is a power of the run's length while few nodes are revoked) on a table from 1 minute to
    ~116 days (1,000 draws a point), with points either side of a forced stop (the rate
    jumps there); beyond the table the last point's rate, within ~2% of the long-run
    ``1 / mean lifetime``. Within ~6% of :func:`window_hazard_per_s` at any length from 2
    minutes to 58 days for Weibull shapes 0.49-3 (``tests/plan/test_window_hazard.py``), but
    up to ~20% between the first multiples of a forced stop, where the rate saw-tooths."""

    horizons_s: FloatArray
    rates_per_s: FloatArray  # at each of horizons_s, > 0

    @classmethod
    def of(cls, dist: LifetimeDistribution) -> WindowHazards:
        long_run = 1.0 / max(mean_lifetime_s(dist), 1.0)
        if _memoryless(dist):
            return cls(_WINDOW_GRID_S, np.full(_WINDOW_GRID_S.size, long_run))
        cap = getattr(dist, "cap_s", None)
        grid = _WINDOW_GRID_S
        if cap is not None and grid[0] < cap < grid[-1]:
            grid = np.unique(np.concatenate([grid, [cap * 0.999, cap]]))
        # past ~100 mean lifetimes a run's rate is the long-run one within ~2% (renewal
        # theorem); sampling there cost 0.4 s a busy market (thousands of renewals a draw)
        rates = [
            long_run if t * long_run > 100.0 else window_hazard_per_s(dist, float(t), draws=1000)
            for t in grid
        ]
        return cls(grid, np.maximum(np.asarray(rates, dtype=np.float64), 1e-300))

    def __call__(self, horizon_s: npt.ArrayLike) -> FloatArray:
        grid = self.horizons_s
        t = np.clip(np.asarray(horizon_s, dtype=np.float64), grid[0], grid[-1])
        log_rate = np.interp(np.log(t), np.log(grid), np.log(self.rates_per_s))
        return np.asarray(np.exp(log_rate), dtype=np.float64)


def young_interval_s(checkpoint_s: float, hazard_per_s: float) -> float:
    """Young's optimal checkpoint interval ``sqrt(2 C / hazard)`` (inf with no hazard)."""
    if hazard_per_s <= 0:
        return math.inf
    return math.sqrt(2.0 * max(checkpoint_s, 1e-3) / hazard_per_s)


def approx_spot_time_s(
    train_s: FloatArray,
    hazard_per_s: FloatArray,
    *,
    checkpoint_s: float,
    restart_s: float | FloatArray,
    startup_s: float,
) -> FloatArray:
    """First-order expected time with revocations (for pruning only, vectorised)::

    startup + train * (1 + C / tau + hazard * (tau / 2 + restart + startup)), tau = Young's.
    """
    h = np.maximum(np.asarray(hazard_per_s, dtype=np.float64), 1e-12)
    tau = np.sqrt(2.0 * max(checkpoint_s, 1e-3) / h)
    factor = 1.0 + checkpoint_s / tau + h * (tau / 2.0 + restart_s + startup_s)
    return np.asarray(startup_s + train_s * factor, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotPart:
    """One kind of node of a spot cluster (one instance type)."""

    instance_type: str
    nodes: int
    spot_usd_per_hour: float  # one node
    on_demand_usd_per_hour: float  # one node
    lifetime: LifetimeDistribution
    #: the GPUs the job uses on one node (what its billed GPU-hours count)
    gpus_per_node: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotJob:
    """One spot candidate, as the simulator needs it.

    ``parts`` has one entry (one GPU type) or two (a mixed cluster). ``speed`` is the
    progress rate: synchronous jobs ``[0, global steps/s]`` (the rate with every node up;
    :func:`simulate_spots` simulates each node); asynchronous ones worker steps/s indexed by
    live nodes of each part (shape ``(nodes_0 + 1, nodes_1 + 1, ...)``). ``speed_factors``
    are the strata of the step-time model's uncertainty (:mod:`gpucast.plan.uncertainty`):
    the runs are split evenly over them and each stratum's job runs ``factor`` times slower.
    """

    key: str
    region: str
    parts: tuple[SpotPart, ...]
    synchronous: bool
    steps: int
    speed: FloatArray
    ps_shards: int
    cpu_usd_per_hour: float
    deadline_s: float | None
    expected_time_s: float  # without revocations, for the horizon
    speed_factors: tuple[float, ...] = (1.0,)
    #: synchronous and elastic: the job goes on with the ready nodes (``speed`` indexed by
    #: ready nodes of each part, in steps of the planned job per second) and pays the
    #: restart penalty per change in their number instead of waiting for replacements
    elastic: bool = False
    #: this candidate's own checkpoint cost and restart penalty (s); None: the batch's
    checkpoint_s: float | None = None
    restart_penalty_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotOutcome:
    """A simulated spot plan. ``time_mean_s``, ``cost_mean_usd``, ``revocations_mean`` and
    ``gpu_hours_mean`` are means over revocations at the central step time, as an on-demand
    plan states its time and cost (:func:`at_central_step`); the p90s and the probabilities
    are over every stratum of the step-time model's uncertainty too."""

    runs: int
    time_mean_s: float
    time_p90_s: float
    cost_mean_usd: float
    cost_p90_usd: float
    p_meet_deadline: float | None
    p_unfinished: float
    revocations_mean: float
    checkpoint_every_steps: int
    #: the region replacements may move to (managed recovery) and the moves per run
    moved_to: str | None = None
    moves_mean: float | None = None
    #: mean GPU-hours billed per run: every node's time from its launch (after any capacity
    #: gap) to its revocation or the end, start-ups and lost work included, gaps not
    gpu_hours_mean: float | None = None
    #: half-widths of the 95% CIs of ``time_mean_s`` and ``cost_mean_usd``: the Monte
    #: Carlo's own noise (:func:`~gpucast.domain.simulation.mean_ci95_half`); nan: unknown
    time_ci95_half_s: float = math.nan
    cost_ci95_half_usd: float = math.nan


def candidate_seed(seed: int, key: str) -> int:
    return (int(seed) * 1_000_003 + zlib.crc32(key.encode("utf-8"))) % (2**32)


def _split(runs: int, k: int) -> list[int]:
    k = max(1, min(k, runs))
    return [runs // k + (1 if j < runs % k else 0) for j in range(k)]


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotDelays:
    """The delays a spot candidate's nodes see: start-up per market, capacity gaps, and after
    how long a replacement falls back to on demand (None: never)."""

    startup_spot_s: Delay
    startup_on_demand_s: Delay
    capacity_gap_s: Delay = 0.0
    fallback_after_s: float | None = None
    move: SpotMove | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotMove:
    """Managed recovery (:class:`gpucast.simulate.transient.Move`): a replacement that waited
    ``after_s`` for capacity is launched in ``region``; ``parts`` are the candidate's parts as
    that region sells and revokes them (same instance types and node counts), with that
    region's start-up and capacity gap."""

    region: str
    after_s: float
    parts: tuple[SpotPart, ...]
    startup_spot_s: Delay
    capacity_gap_s: Delay = 0.0


def spot_move(
    risk: RiskInputs,
    part: SpotPart,
    gpu: str,
    region: str,
    provider: str,
    lifetime: Callable[[str, str, str], LifetimeDistribution] | None = None,
) -> SpotMove | None:
    """Where a one-part candidate's replacements move after waiting ``risk.move_after_s`` for
    capacity (managed recovery, ``risk.move_to``), as that region sells, revokes, starts and
    delays them (``lifetime``: a cached ``risk.lifetime``); None: they stay."""
    if risk.move_to is None:
        return None
    target = risk.move_to(provider, part.instance_type, region)
    if target is None:
        return None
    there, spot_usd, od_usd = target
    moved = replace(
        part,
        spot_usd_per_hour=spot_usd,
        on_demand_usd_per_hour=od_usd,
        lifetime=(lifetime or risk.lifetime)(gpu, there, provider),
    )
    return SpotMove(
        region=there,
        after_s=risk.move_after_s,
        parts=(moved,),
        startup_spot_s=risk.startup_delay(gpu, "spot", there),
        capacity_gap_s=risk.gap(gpu, there, provider),
    )


def simulate_spot(
    job: SpotJob,
    *,
    runs: int,
    seed: int,
    checkpoint_s: float,
    restart_penalty_s: float,
    startup_spot_s: Delay,
    startup_on_demand_s: Delay,
    capacity_gap_s: Delay = 0.0,
    fallback_after_s: float | None = None,
) -> SpotOutcome:
    """Monte Carlo of one spot candidate (see the module docstring). A revoked node's
    replacement waits ``capacity_gap_s`` for spot capacity, or is launched on demand once
    it has waited ``fallback_after_s`` (None: never)."""
    delays = SpotDelays(
        startup_spot_s=startup_spot_s,
        startup_on_demand_s=startup_on_demand_s,
        capacity_gap_s=capacity_gap_s,
        fallback_after_s=fallback_after_s,
    )
    (out,) = simulate_spots(
        [(job, delays)],
        runs=runs,
        seed=seed,
        checkpoint_s=checkpoint_s,
        restart_penalty_s=restart_penalty_s,
    )
    return out


def simulate_spots(
    candidates: Sequence[tuple[SpotJob, SpotDelays]],
    *,
    runs: int,
    seed: int,
    checkpoint_s: float,
    restart_penalty_s: float,
) -> list[SpotOutcome]:
    """Monte Carlo of spot candidates, ``runs`` runs each, in one batch per fallback setting
    (:func:`gpucast.simulate.transient.simulate_batch`: the candidates' runs side by side in
    the same windows and rounds); each candidate's runs are split
    evenly over the strata of its step-time factor. The same seed and candidates give the
    same outcomes."""
    if not candidates:
        return []
    built = [
        _batch_job(
            job,
            delays,
            runs,
            checkpoint_s if job.checkpoint_s is None else job.checkpoint_s,
            restart_penalty_s if job.restart_penalty_s is None else job.restart_penalty_s,
        )
        for job, delays in candidates
    ]
    key = "|".join(job.key for job, _ in candidates)
    by_fallback: dict[float | None, list[int]] = {}
    for i, (_, delays) in enumerate(candidates):
        by_fallback.setdefault(delays.fallback_after_s, []).append(i)
    stats: dict[int, RunStatistics] = {}
    for members in by_fallback.values():
        out = simulate_batch(
            [built[i][0] for i in members],
            checkpoint_s=checkpoint_s,
            restart_penalty_s=restart_penalty_s,
            rng=np.random.default_rng([candidate_seed(seed, key), members[0]]),
        )
        stats.update(zip(members, out, strict=True))
    return [
        _outcome(
            stats[i],
            candidates[i][0],
            built[i][1],
            candidates[i][1].move,
            slowdown=built[i][0].run_slowdown,
        )
        for i in range(len(candidates))
    ]


def _batch_job(
    job: SpotJob, delays: SpotDelays, runs: int, checkpoint_s: float, reshard_s: float = 0.0
) -> tuple[Job, int]:
    """The simulator's job for one spot candidate, and its checkpoint interval (steps)."""
    prices: dict[tuple[str, str], float] = {}
    rolls_back = job.synchronous and not job.elastic  # losing any node rolls the job back
    groups = tuple(
        WorkerGroup(
            gpu=p.instance_type, count=p.nodes, region=job.region, spot=True, gpus=p.gpus_per_node
        )
        for p in job.parts
    )
    for p in job.parts:
        prices[(p.instance_type, "spot")] = p.spot_usd_per_hour
        prices[(p.instance_type, "on-demand")] = p.on_demand_usd_per_hour
    table = np.asarray(job.speed, dtype=np.float64)
    rate = float(table.flat[-1])
    if rolls_back:  # progress with every node of every part up, none otherwise
        table = np.zeros(tuple(p.nodes + 1 for p in job.parts))
        table[tuple(p.nodes for p in job.parts)] = rate
    # what rolls the job back over its run: any node (each replaced alone), else the chief
    run_s = job.steps / max(rate, 1e-12)
    if rolls_back:
        hazard = sum(p.nodes * window_hazard_per_s(p.lifetime, run_s) for p in job.parts)
    else:
        hazard = window_hazard_per_s(job.parts[0].lifetime, run_s)
    if job.ps_shards:
        prices[(CPU_PS, "on-demand")] = job.cpu_usd_per_hour
    tau_s = young_interval_s(checkpoint_s, hazard)
    every = int(min(max(round(tau_s * rate), 1), job.steps)) if math.isfinite(tau_s) else job.steps
    slowest = max(job.speed_factors)
    horizon = 4.0 * job.expected_time_s * max(slowest, 1.0) + 7 * 86400.0
    if job.deadline_s is not None:
        horizon = max(horizon, 2.0 * job.deadline_s)
    scenario = ClusterScenario(
        workers=groups,
        ps_count=job.ps_shards,
        ps_spot=False,
        steps=job.steps,
        checkpoint_every_steps=every,
        replace_revoked=True,
        deadline_s=job.deadline_s,
        include_startup=True,
        worker_loss_restarts=rolls_back,
        horizon_s=horizon,
        fallback_after_s=delays.fallback_after_s,
        elastic=job.elastic,
        reshard_s=reshard_s if job.elastic else 0.0,
    )
    # the strata of the step-time model's uncertainty: run i is slowed by its stratum's factor
    split = _split(runs, len(job.speed_factors))
    slowdown = np.repeat(np.asarray(job.speed_factors[: len(split)], dtype=np.float64), split)
    batch_job = Job(
        scenario=scenario,
        speed=SpeedTable(table),
        prices=PriceTable(usd_per_hour=prices, source="catalog"),
        lifetimes=[p.lifetime for p in job.parts],
        startup_spot_s=delays.startup_spot_s,
        startup_on_demand_s=delays.startup_on_demand_s,
        capacity_gap_s=delays.capacity_gap_s,
        runs=int(slowdown.size),
        run_slowdown=slowdown,
        move=_move(delays.move),
        checkpoint_s=job.checkpoint_s,
        restart_penalty_s=job.restart_penalty_s,
    )
    return batch_job, every


def _move(move: SpotMove | None) -> Move | None:
    if move is None:
        return None
    return Move(
        region=move.region,
        after_s=move.after_s,
        lifetimes=[p.lifetime for p in move.parts],
        spot_usd_per_hour=[p.spot_usd_per_hour for p in move.parts],
        on_demand_usd_per_hour=[p.on_demand_usd_per_hour for p in move.parts],
        startup_spot_s=move.startup_spot_s,
        capacity_gap_s=move.capacity_gap_s,
    )


def _outcome(
    pooled: RunStatistics,
    job: SpotJob,
    every: int,
    move: SpotMove | None = None,
    *,
    slowdown: npt.ArrayLike | None = None,
) -> SpotOutcome:
    """Time, cost and GPU-hours at the central step time (what an on-demand plan states:
    :func:`at_central_step`); the p90s, P(meet deadline) and P(unfinished) over every stratum,
    so they carry the step-time model's uncertainty as an on-demand plan's interval does."""
    # a run that never finishes has no final cost or GPU-hours (inf): the bill to the horizon
    # would rank a plan that may never finish as cheap (QA 35 E #17)
    dur = Summary.of(pooled.duration_s)
    final_usd, final_gpu_s = pooled.final_cost_usd, pooled.final_gpu_s
    cost = Summary.of(final_usd)
    p_meet = None if job.deadline_s is None else 1.0 - float(pooled.p_miss_deadline or 0.0)
    gpu_h = None if final_gpu_s is None else at_central_step(final_gpu_s, slowdown) / 3600.0
    return SpotOutcome(
        runs=pooled.runs,
        time_mean_s=at_central_step(pooled.duration_s, slowdown),
        time_p90_s=dur.p90,
        cost_mean_usd=at_central_step(final_usd, slowdown),
        cost_p90_usd=cost.p90,
        p_meet_deadline=p_meet,
        p_unfinished=pooled.p_unfinished,
        revocations_mean=at_central_step(pooled.revocations, slowdown),
        checkpoint_every_steps=every,
        moved_to=None if move is None else move.region,
        moves_mean=None if pooled.moves is None else at_central_step(pooled.moves, slowdown),
        gpu_hours_mean=gpu_h,
        time_ci95_half_s=mean_ci95_half(pooled.duration_s, slowdown, central=True),
        cost_ci95_half_usd=mean_ci95_half(final_usd, slowdown, central=True),
    )

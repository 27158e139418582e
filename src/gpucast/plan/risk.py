"""Spot risk: a quick first-order estimate for pruning, then the Monte Carlo simulator.

How a spot cluster is simulated (:func:`simulate_spot`, through
:func:`gpucast.simulate.transient.simulate_runs`):

* **DDP / FSDP** are synchronous: losing any node stops every worker, so the job rolls back to
  its last checkpoint and resumes when a replacement node is up. The cluster is simulated as
  one server whose lifetime is the *minimum* of its nodes' lifetimes (:class:`MinLifetime`)
  and whose price is all nodes' price (every node is billed while the job waits). For a
  constant hazard this is exact; for a Weibull or empirical lifetime the replacement's
  lifetime restarts the clock of all nodes (an approximation, said in the notes).
* **Parameter server** (asynchronous): each node is a server; losing an ordinary node only
  slows the job (the speed table gives the cluster's speed for each number of live nodes),
  losing the chief node rolls back to the last checkpoint. PS shards stay on demand.
* Checkpoints every ``tau = sqrt(2 C / hazard)`` seconds of progress (Young 1974), with ``C``
  the checkpoint time; revoked nodes are replaced after a start-up delay.

Pure: the RNG is seeded from the request's seed and the candidate's identity, so a candidate
gets the same runs whatever else is simulated.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.simulation import CPU_PS, ClusterScenario, PriceTable, Summary, WorkerGroup
from gpucast.predict.revocation import LifetimeDistribution
from gpucast.simulate.transient import Delay, SpeedTable, simulate_runs

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class MinLifetime:
    """Lifetime of a group of ``count`` independent nodes: the first revocation among them."""

    base: LifetimeDistribution
    count: int

    @property
    def source(self) -> str:
        return f"first of {self.count} nodes; node: {self.base.source}"

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        if self.count == 1:
            return self.base.sample(rng, n)
        draws = self.base.sample(rng, n * self.count).reshape(n, self.count)
        return np.asarray(draws.min(axis=1), dtype=np.float64)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        return np.asarray(self.base.survival(t_s) ** self.count, dtype=np.float64)


def mean_lifetime_s(dist: LifetimeDistribution, *, draws: int = 4000, seed: int = 12345) -> float:
    """Mean node lifetime (s) by sampling; a forced stop (cap) counts as an end of life."""
    life = dist.sample(np.random.default_rng(seed), draws)
    finite = life[np.isfinite(life)]
    if finite.size == 0:
        return math.inf
    # never-revoked draws: count them at the largest finite life (a conservative floor)
    return float(np.mean(np.where(np.isfinite(life), life, finite.max())))


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
    restart_s: float,
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
class SpotJob:
    """One spot candidate, as the simulator needs it."""

    key: str
    region: str
    instance_type: str
    nodes: int
    synchronous: bool
    steps: int
    #: sync: [0, global steps/s]; async: worker steps/s with 0..nodes live nodes
    speed_by_live_nodes: tuple[float, ...]
    spot_usd_per_hour: float  # one node
    on_demand_usd_per_hour: float  # one node
    ps_shards: int
    cpu_usd_per_hour: float
    lifetime: LifetimeDistribution
    deadline_s: float | None
    expected_time_s: float  # without revocations, for the horizon


@dataclass(frozen=True, slots=True, kw_only=True)
class SpotOutcome:
    runs: int
    time_mean_s: float
    time_p90_s: float
    cost_mean_usd: float
    cost_p90_usd: float
    p_meet_deadline: float | None
    p_unfinished: float
    revocations_mean: float
    checkpoint_every_steps: int


def candidate_seed(seed: int, key: str) -> int:
    return (int(seed) * 1_000_003 + zlib.crc32(key.encode("utf-8"))) % (2**32)


def simulate_spot(
    job: SpotJob,
    *,
    runs: int,
    seed: int,
    checkpoint_s: float,
    restart_penalty_s: float,
    startup_spot_s: Delay,
    startup_on_demand_s: Delay,
) -> SpotOutcome:
    """Monte Carlo of one spot candidate (see the module docstring)."""
    if job.synchronous:
        label = f"{job.nodes}x {job.instance_type}"
        group = WorkerGroup(gpu=label, count=1, region=job.region, spot=True)
        lifetime: LifetimeDistribution = MinLifetime(base=job.lifetime, count=job.nodes)
        prices = {
            (label, "spot"): job.spot_usd_per_hour * job.nodes,
            (label, "on-demand"): job.on_demand_usd_per_hour * job.nodes,
        }
        table = np.array([0.0, job.speed_by_live_nodes[-1]])
        hazard = 1.0 / max(mean_lifetime_s(lifetime), 1.0)
        rate = float(table[-1])
    else:
        label = job.instance_type
        group = WorkerGroup(gpu=label, count=job.nodes, region=job.region, spot=True)
        lifetime = job.lifetime
        prices = {
            (label, "spot"): job.spot_usd_per_hour,
            (label, "on-demand"): job.on_demand_usd_per_hour,
        }
        table = np.asarray(job.speed_by_live_nodes, dtype=np.float64)
        hazard = 1.0 / max(mean_lifetime_s(lifetime), 1.0)  # the chief's: rollbacks
        rate = float(table[-1])
    if job.ps_shards:
        prices[(CPU_PS, "on-demand")] = job.cpu_usd_per_hour
    tau_s = young_interval_s(checkpoint_s, hazard)
    every = int(min(max(round(tau_s * rate), 1), job.steps)) if math.isfinite(tau_s) else job.steps
    horizon = 4.0 * job.expected_time_s + 7 * 86400.0
    if job.deadline_s is not None:
        horizon = max(horizon, 2.0 * job.deadline_s)
    scenario = ClusterScenario(
        workers=(group,),
        ps_count=job.ps_shards,
        ps_spot=False,
        steps=job.steps,
        checkpoint_every_steps=every,
        replace_revoked=True,
        deadline_s=job.deadline_s,
        include_startup=True,
        horizon_s=horizon,
    )
    stats = simulate_runs(
        scenario,
        speed=SpeedTable(table),
        prices=PriceTable(usd_per_hour=prices, source="catalog"),
        lifetimes=[lifetime],
        startup_spot_s=startup_spot_s,
        startup_on_demand_s=startup_on_demand_s,
        checkpoint_s=checkpoint_s,
        restart_penalty_s=restart_penalty_s,
        runs=runs,
        rng=np.random.default_rng(candidate_seed(seed, job.key)),
    )
    dur = Summary.of(stats.duration_s)
    cost = Summary.of(stats.cost_usd)
    p_meet = None if job.deadline_s is None else 1.0 - float(stats.p_miss_deadline or 0.0)
    return SpotOutcome(
        runs=stats.runs,
        time_mean_s=dur.mean,
        time_p90_s=dur.p90,
        cost_mean_usd=cost.mean,
        cost_p90_usd=cost.p90,
        p_meet_deadline=p_meet,
        p_unfinished=stats.p_unfinished,
        revocations_mean=float(np.mean(stats.revocations)),
        checkpoint_every_steps=every,
    )

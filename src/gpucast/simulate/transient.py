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

The public names are here (``__all__``); the code lives in private parts: the job, its delays,
speed table and preparation into per-column arrays (``_transient_job``), the engine's window,
chain and state arrays (``_transient_window``), the engine's server matrices and their draws
(``_transient_servers``) and the engine itself (``_transient_engine``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.simulation import (
    ClusterScenario,
    PriceTable,
    RunStatistics,
    SimulationResult,
)
from gpucast.predict.revocation import LifetimeDistribution
from gpucast.predict.variability import (
    PROBE_S,
    SpeedVariability,
    rented_nodes,
    run_slowdowns,
)
from gpucast.simulate._transient_engine import _Engine
from gpucast.simulate._transient_job import (
    Delay,
    Delays,
    FloatArray,
    IntArray,
    Job,
    Move,
    Sampler,
    SpeedFunction,
    SpeedTable,
    _prepare,
    _sampler,
    _samplers,
)

__all__ = [
    "Delay",
    "Delays",
    "FloatArray",
    "IntArray",
    "Job",
    "Move",
    "Sampler",
    "SpeedFunction",
    "SpeedTable",
    "empirical_sampler",
    "simulate_batch",
    "simulate_runs",
    "simulate_scenario",
]


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

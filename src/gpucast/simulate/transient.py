"""Monte Carlo of a training job on transient (spot / preemptible) GPU clusters, vectorised.

Pure: numbers in, numbers out; the RNG is passed in (or made from a seed), never global.

The model, per run:

* Servers are the scenario's GPU workers (grouped by GPU type, region and market) plus its CPU
  parameter servers. Each server incarnation is requested at ``req``, is ready at ``up``
  (after a start-up delay) and is revoked at ``down`` (``req`` + a lifetime drawn from its
  group's :class:`~gpucast.predict.revocation.LifetimeDistribution`; ``inf`` on demand).
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
* Start-up delays are one distribution per market, or one per worker group (+ one for the
  parameter servers) for mixed GPU types and regions. With ``include_startup=False`` the
  clock starts when the cluster is up, so initial lifetimes are drawn conditioned on
  outliving the start-up (a server revoked while starting was never part of the job).
* Cost = sum over server incarnations of (end - request) x its US$/h (each server's uptime).

The hot path loops over *event rounds*; every round handles the next event of all active runs
at once with numpy arrays of shape (runs, servers) — no per-run Python loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
from gpucast.predict.revocation import LifetimeDistribution

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
    """Static description of the server columns: workers first, then parameter servers."""

    group: IntArray  # worker group index, -1 for a PS
    is_ps: npt.NDArray[np.bool_]
    spot: npt.NDArray[np.bool_]
    price_usd_per_s: FloatArray
    cls: IntArray  # lifetime/start-up class: group index, or G for PS


def _columns(scenario: ClusterScenario, prices: PriceTable, *, transient: bool) -> _Columns:
    group, spot, price = [], [], []
    for g, wg in enumerate(scenario.workers):
        is_spot = wg.spot and transient
        p = prices.price(wg.gpu, spot=is_spot, region=wg.region) / 3600.0
        group += [g] * wg.count
        spot += [is_spot] * wg.count
        price += [p] * wg.count
    ps_spot = scenario.ps_spot and transient
    ps_price = (
        prices.price(CPU_PS, spot=ps_spot, region=scenario.region) / 3600.0
        if scenario.ps_count
        else 0.0
    )
    group += [-1] * scenario.ps_count
    spot += [ps_spot] * scenario.ps_count
    price += [ps_price] * scenario.ps_count
    g_arr = np.asarray(group, dtype=np.int64)
    n_groups = len(scenario.workers)
    return _Columns(
        group=g_arr,
        is_ps=g_arr < 0,
        spot=np.asarray(spot, dtype=bool),
        price_usd_per_s=np.asarray(price, dtype=np.float64),
        cls=np.where(g_arr < 0, n_groups, g_arr),
    )


def simulate_runs(
    scenario: ClusterScenario,
    *,
    speed: SpeedFunction,
    prices: PriceTable,
    lifetimes: Sequence[LifetimeDistribution | None],
    ps_lifetime: LifetimeDistribution | None = None,
    startup_spot_s: Delays = 0.0,
    startup_on_demand_s: Delays = 0.0,
    checkpoint_s: Delay = 0.0,
    restart_penalty_s: float = 0.0,
    runs: int,
    rng: np.random.Generator | int | None = None,
    transient: bool = True,
    max_rounds: int = 100_000,
) -> RunStatistics:
    """Simulate ``runs`` independent executions of ``scenario``; see the module docstring.

    ``lifetimes[g]`` is the lifetime distribution of worker group ``g`` (used when it is spot;
    ``None`` is allowed only for on-demand groups). ``transient=False`` runs every server on
    demand with on-demand prices (the comparison baseline). ``rng``: a Generator, a seed, or
    ``None`` for seed 0 — the same seed gives the same result bit for bit.
    """
    if runs < 1:
        raise InvalidSpecError("runs", "must be >= 1", got=runs, fix="e.g. --runs 2000")
    if len(lifetimes) != len(scenario.workers):
        raise InvalidSpecError("lifetimes", "need one distribution (or None) per worker group")
    if not (math.isfinite(restart_penalty_s) and restart_penalty_s >= 0):
        raise InvalidSpecError("restart_penalty_s", "must be >= 0", got=restart_penalty_s)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng or 0)
    cols = _columns(scenario, prices, transient=transient)
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
    if scenario.ps_spot and transient and scenario.ps_count and ps_lifetime is None:
        raise InvalidSpecError("ps lifetime", "spot parameter servers need a distribution")
    classes.append(ps_lifetime if (scenario.ps_spot and transient) else None)
    cls_spot = [wg.spot and transient for wg in scenario.workers] + [scenario.ps_spot and transient]
    start_spot = _samplers(startup_spot_s, "startup_spot_s", n_groups + 1)
    start_od = _samplers(startup_on_demand_s, "startup_on_demand_s", n_groups + 1)
    ckpt_cost = _sampler(checkpoint_s, "checkpoint_s")
    return _Engine(
        scenario=scenario,
        speed=speed,
        cols=cols,
        n_groups=n_groups,
        classes=classes,
        cls_spot=cls_spot,
        start_spot=start_spot,
        start_od=start_od,
        ckpt_cost=ckpt_cost,
        penalty=float(restart_penalty_s),
        runs=runs,
        rng=gen,
        max_rounds=max_rounds,
    ).run()


class _Engine:
    """State arrays of the active runs; rows are compacted as runs finish."""

    def __init__(
        self,
        *,
        scenario: ClusterScenario,
        speed: SpeedFunction,
        cols: _Columns,
        n_groups: int,
        classes: list[LifetimeDistribution | None],
        cls_spot: list[bool],
        start_spot: list[Sampler],
        start_od: list[Sampler],
        ckpt_cost: Sampler,
        penalty: float,
        runs: int,
        rng: np.random.Generator,
        max_rounds: int,
    ) -> None:
        self.sc = scenario
        self.speed = speed
        self.cols = cols
        self.n_groups = n_groups
        self.classes = classes
        self.cls_spot = cls_spot
        self.start_spot = start_spot
        self.start_od = start_od
        self.ckpt_cost = ckpt_cost
        self.penalty = penalty
        self.runs = runs
        self.rng = rng
        self.max_rounds = max_rounds
        self.n_cols = cols.group.size
        self.worker_cols = np.flatnonzero(~cols.is_ps)
        self.ps_cols = np.flatnonzero(cols.is_ps)
        self.group_masks = [cols.group == g for g in range(n_groups)]

    # -- sampling helpers ---------------------------------------------------------------------
    def _draw(self, cls_of: IntArray, what: str) -> FloatArray:
        """One draw per entry of ``cls_of`` (a class per event), in a deterministic order."""
        out = np.empty(cls_of.size)
        for c in range(self.n_groups + 1):
            sel = np.flatnonzero(cls_of == c)
            if sel.size == 0:
                continue
            if what == "startup":
                sampler = self.start_spot[c] if self.cls_spot[c] else self.start_od[c]
                out[sel] = sampler(self.rng, sel.size)
            else:
                dist = self.classes[c]
                out[sel] = np.inf if dist is None else dist.sample(self.rng, sel.size)
        return out

    # -- the simulation -------------------------------------------------------------------------
    def run(self) -> RunStatistics:
        sc, cols, R, C = self.sc, self.cols, self.runs, self.n_cols
        total_steps = float(sc.steps)
        every = float(sc.checkpoint_every_steps) if sc.checkpoint_every_steps else math.inf
        horizon = sc.horizon_s

        cls_flat = np.broadcast_to(cols.cls, (R, C)).ravel()
        startup_flat = self._draw(cls_flat, "startup")
        life_flat = self._draw(cls_flat, "lifetime")
        if not sc.include_startup:
            # the clock starts when the cluster is up: its servers outlived their start-up
            short = np.flatnonzero(life_flat <= startup_flat)
            for _ in range(_MAX_REDRAWS):
                if short.size == 0:
                    break
                life_flat[short] = self._draw(cls_flat[short], "lifetime")
                short = short[life_flat[short] <= startup_flat[short]]
        startup = startup_flat.reshape(R, C)
        life = life_flat.reshape(R, C)
        if sc.include_startup:
            req = np.zeros((R, C))
            up = startup
            down = life
        else:  # the clock starts when the cluster is up; servers are already `startup` old
            req = np.zeros((R, C))
            up = np.zeros((R, C))
            down = np.maximum(life - startup, 0.0)

        out_dur = np.full(R, np.inf)
        out_cost = np.zeros(R)
        out_revs = np.zeros(R, dtype=np.int64)

        rid = np.arange(R)
        t = np.zeros(R)
        prog = np.zeros(R)
        ckpt = np.zeros(R)
        pause = np.zeros(R)
        chief = np.zeros(R, dtype=np.int64)
        revs = np.zeros(R, dtype=np.int64)
        cost = np.zeros(R)
        gone = np.zeros((R, C), dtype=bool)
        price = cols.price_usd_per_s
        is_ps = cols.is_ps
        replace = sc.replace_revoked
        ps_cols, worker_cols = self.ps_cols, self.worker_cols

        def finish(mask: npt.NDArray[np.bool_], end: FloatArray, finished: bool) -> None:
            """Bill the live incarnations up to ``end`` and write the outputs of ``mask``."""
            live = ~gone[mask]
            billed = np.clip(end[mask][:, None] - req[mask], 0.0, None) * live
            total = cost[mask] + billed @ price
            out_cost[rid[mask]] = total
            out_revs[rid[mask]] = revs[mask]
            out_dur[rid[mask]] = end[mask] if finished else np.inf

        rounds = 0
        while rid.size:
            rounds += 1
            n = rid.size
            rows = np.arange(n)
            # 1) revocations due now (down <= t)
            due = (down <= t[:, None]) & ~gone
            if due.any():
                r_idx, c_idx = np.nonzero(due)
                revs += np.bincount(r_idx, minlength=n)
                cost += np.bincount(
                    r_idx, weights=(down[due] - req[due]) * price[c_idx], minlength=n
                )
                renew = is_ps[c_idx] | replace
                rr, cc = r_idx[renew], c_idx[renew]
                if rr.size:
                    now = t[rr]
                    req[rr, cc] = now
                    up[rr, cc] = now + self._draw(cols.cls[cc], "startup")
                    down[rr, cc] = now + self._draw(cols.cls[cc], "lifetime")
                dead_r, dead_c = r_idx[~renew], c_idx[~renew]
                gone[dead_r, dead_c] = True
                up[dead_r, dead_c] = np.inf
                down[dead_r, dead_c] = np.inf
                # chief or PS lost: back to the last checkpoint, re-elect a chief if needed
                lost = np.zeros(n, dtype=bool)
                critical = is_ps[c_idx] | (c_idx == chief[r_idx]) | self.sc.worker_loss_restarts
                lost[r_idx[critical]] = True
                if lost.any():
                    lr = np.flatnonzero(lost)
                    prog[lr] = ckpt[lr]
                    gone_chief = gone[lr, chief[lr]]
                    if gone_chief.any():
                        gr = lr[gone_chief]
                        ready_now = up[gr][:, worker_cols] <= t[gr][:, None]
                        key = np.where(ready_now, -np.inf, up[gr][:, worker_cols])
                        key = np.where(gone[gr][:, worker_cols], np.inf, key)
                        best = np.argmin(key, axis=1)
                        chief[gr] = worker_cols[best]
                    resume = up[lr, chief[lr]]
                    if self.sc.worker_loss_restarts:  # synchronous: wait for every worker
                        wait = np.where(gone[lr][:, worker_cols], -np.inf, up[lr][:, worker_cols])
                        resume = np.maximum(resume, wait.max(axis=1))
                    if ps_cols.size:
                        resume = np.maximum(resume, up[lr][:, ps_cols].max(axis=1))
                    pause[lr] = np.maximum(t[lr], resume) + self.penalty
            # 2) which runs can never finish (no worker left) -> unfinished
            stalled = gone[:, worker_cols].all(axis=1)
            # 3) the speed now
            ready = (up <= t[:, None]) & ~gone
            alive = np.stack([ready[:, m].sum(axis=1) for m in self.group_masks], axis=1)
            chief_ok = ready[rows, chief]
            ps_ok = ready[:, ps_cols].all(axis=1) if ps_cols.size else np.ones(n, dtype=bool)
            running = chief_ok & ps_ok & (pause <= t) & ~stalled
            spd = np.where(running, self.speed(alive.astype(np.int64)), 0.0)
            # 4) the next event
            target = np.minimum(total_steps, ckpt + every)
            with np.errstate(divide="ignore", invalid="ignore"):
                t_prog = np.where(running & (spd > 0), t + (target - prog) / spd, np.inf)
            t_up = np.where(up > t[:, None], up, np.inf).min(axis=1)
            t_down = np.where(~gone, down, np.inf).min(axis=1)
            t_pause = np.where(pause > t, pause, np.inf)
            t_next = np.minimum(np.minimum(t_prog, t_up), np.minimum(t_down, t_pause))
            # 5) advance
            dt = np.where(np.isfinite(t_next), t_next - t, 0.0)
            prog = np.where(running, prog + spd * dt, prog)
            hit = running & (t_prog <= t_next)
            prog[hit] = target[hit]
            t_new = np.minimum(t_next, horizon)
            done = hit & (target >= total_steps) & (t_next <= horizon)
            ckpt_hit = hit & ~done
            if ckpt_hit.any():
                ch = np.flatnonzero(ckpt_hit)
                ckpt[ch] = target[ch]
                pause[ch] = t_new[ch] + self.ckpt_cost(self.rng, ch.size)
            out_of_time = ~done & ((t_next >= horizon) | stalled)
            if rounds >= self.max_rounds:
                out_of_time |= ~done
            t = np.where(stalled, t, t_new)
            if done.any():
                finish(done, t, finished=True)
            if out_of_time.any():
                finish(out_of_time, t, finished=False)
            keep = ~(done | out_of_time)
            if not keep.all():
                rid, t, prog, ckpt, pause, chief, revs, cost = (
                    a[keep] for a in (rid, t, prog, ckpt, pause, chief, revs, cost)
                )
                req, up, down, gone = req[keep], up[keep], down[keep], gone[keep]
        return RunStatistics(
            duration_s=out_dur,
            cost_usd=out_cost,
            revocations=out_revs,
            deadline_s=sc.deadline_s,
        )


def simulate_scenario(
    scenario: ClusterScenario,
    *,
    speed: SpeedFunction,
    prices: PriceTable,
    lifetimes: Sequence[LifetimeDistribution | None],
    ps_lifetime: LifetimeDistribution | None = None,
    startup_spot_s: Delays = 0.0,
    startup_on_demand_s: Delays = 0.0,
    checkpoint_s: Delay = 0.0,
    restart_penalty_s: float = 0.0,
    runs: int,
    seed: int = 0,
    speed_factors: Sequence[float] = (1.0,),
    sources: dict[str, str] | None = None,
    notes: Sequence[str] = (),
) -> SimulationResult:
    """The scenario and its on-demand equivalent (same cluster, no revocations, on-demand
    prices), from one seed: two independent streams spawned from ``SeedSequence(seed)``.

    ``speed_factors`` are equally likely strata of the step-time model's uncertainty
    (:func:`gpucast.plan.uncertainty.strata`): the runs are split evenly over them and each
    stratum's job runs ``factor`` times slower (one factor of 1: no model uncertainty).
    """
    transient_ss, on_demand_ss = np.random.SeedSequence(seed).spawn(2)
    factors = [float(f) for f in speed_factors] or [1.0]
    k = max(1, min(len(factors), runs))
    split = [runs // k + (1 if j < runs % k else 0) for j in range(k)]

    def one(ss: np.random.SeedSequence, transient: bool) -> RunStatistics:
        streams = [ss] if k == 1 and factors[0] == 1.0 else ss.spawn(k)
        parts = []
        for factor, n, stream in zip(factors[:k], split, streams, strict=True):
            parts.append(
                simulate_runs(
                    scenario,
                    speed=speed if factor == 1.0 else _scaled(speed, factor),
                    prices=prices,
                    lifetimes=lifetimes,
                    ps_lifetime=ps_lifetime,
                    startup_spot_s=startup_spot_s,
                    startup_on_demand_s=startup_on_demand_s,
                    checkpoint_s=checkpoint_s,
                    restart_penalty_s=restart_penalty_s,
                    runs=n,
                    rng=np.random.default_rng(stream),
                    transient=transient,
                )
            )
        if len(parts) == 1:
            return parts[0]
        return RunStatistics(
            duration_s=np.concatenate([p.duration_s for p in parts]),
            cost_usd=np.concatenate([p.cost_usd for p in parts]),
            revocations=np.concatenate([p.revocations for p in parts]),
            deadline_s=scenario.deadline_s,
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

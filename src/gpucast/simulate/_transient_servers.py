"""The server matrices of a batch of transient-cluster runs and the draws of their
start-ups, capacity gaps and lifetimes, class by class (:class:`_Servers`, the base of
:class:`~gpucast.simulate._transient_engine._Engine`, which plays the job on them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.predict.revocation import CorrelatedLifetime
from gpucast.simulate._transient_job import (
    FloatArray,
    IntArray,
    Job,
    Sampler,
    SpeedFunction,
    _flat_speed,
    _Prepared,
    _sampler,
)

#: redraws of an initial lifetime that ended during start-up (include_startup=False)
_MAX_REDRAWS = 50


class _Servers:
    """The server matrices of one batch of runs, laid out as
    :class:`~gpucast.simulate._transient_engine._Engine` says, and the draws of their
    start-ups, capacity gaps and lifetimes, class by class (a fixed order)."""

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

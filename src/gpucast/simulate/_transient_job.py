"""What :mod:`gpucast.simulate.transient` simulates: the delay and speed types, the
samplers, the :class:`SpeedTable`, a :class:`Job` (with its :class:`Move`) and its preparation
into the engine's per-column arrays (:func:`_prepare`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.simulation import CPU_PS, ClusterScenario, PriceTable
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

"""Frozen values of the transient-training simulator: the cluster, its prices, the result.

A :class:`ClusterScenario` describes *what* is run (a job of ``steps`` global steps on groups of
GPU workers plus CPU parameter servers); how fast and how often servers die are the
simulator's arguments (speed function, lifetime distributions), so the planner can vary them.
A :class:`SimulationResult` keeps the raw per-run arrays and the summaries computed from them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Assumption

#: The price-table name of a CPU parameter server.
CPU_PS = "cpu-ps"
#: Canonical market names; :func:`normalise_market` maps other spellings onto them.
MARKETS = ("spot", "on-demand")
_MARKET_SPELLINGS = {
    "spot": "spot",
    "preemptible": "spot",
    "pre": "spot",
    "on-demand": "on-demand",
    "on_demand": "on-demand",
    "ondemand": "on-demand",
    "on demand": "on-demand",
    "demand": "on-demand",
}


def normalise_market(text: str, *, field: str = "market") -> str:
    """``spot`` or ``on-demand`` from any usual spelling (``on_demand``, ``preemptible``, ...).

    The one place market spellings are reconciled: price tables, the start-up model and the
    published data files each spell on-demand differently.
    """
    key = " ".join(str(text).strip().lower().split())
    if key in _MARKET_SPELLINGS:
        return _MARKET_SPELLINGS[key]
    raise InvalidSpecError(
        field,
        f"must be one of {', '.join(MARKETS)}",
        got=text,
        fix="spell the market 'spot' or 'on-demand' ('on_demand' and 'preemptible' also work)",
    )


def _market(spot: bool) -> str:
    return "spot" if spot else "on-demand"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerGroup:
    """``count`` workers with one ``gpu`` each, in one region and one market. ``gpus``: the
    GPUs one worker server holds (a planner simulating a node or a whole cluster as one
    server), which the billed GPU-time counts (:attr:`RunStatistics.gpu_s`)."""

    gpu: str
    count: int
    region: str
    spot: bool
    gpus: int = 1

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise InvalidSpecError(f"gpus per worker ({self.gpu})", "must be >= 1", got=self.gpus)
        if self.count < 1:
            raise InvalidSpecError(
                f"workers ({self.gpu})",
                "must be >= 1",
                got=self.count,
                fix="give at least one worker, e.g. --workers 4",
            )
        if not self.gpu:
            raise InvalidSpecError("gpu", "must not be empty", fix="e.g. --gpu K80")


#: how long a simulated training run may take before it counts as never finishing: 30 days
HORIZON_S = 30 * 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterScenario:
    """A training job of ``steps`` global steps on ``workers`` plus ``ps_count`` parameter servers.

    The first worker of the first group starts as the chief (it checkpoints; losing it, or a
    parameter server, rolls the job back to the last checkpoint). ``checkpoint_every_steps``
    ``None`` means no periodic checkpoint (a chief or PS loss restarts from step 0).
    ``include_startup``: the clock (duration and billing) starts when the servers are requested,
    so the first start-up delay is part of the job; ``False`` starts it when they are up (how
    the published runs measured ``Duration``), the servers' lifetimes still counting that age
    (and conditioned on having survived it: a server revoked while starting never joined).
    ``worker_loss_restarts``: synchronous training (sync PS, all-reduce) — losing *any* worker
    rolls the job back to its last checkpoint and it resumes once every remaining (or
    replacement) worker is up; ``False`` (asynchronous PS) — only the chief or a PS does.
    ``horizon_s``: runs not finished by then are reported as unfinished (duration ``inf``).
    ``fallback_after_s``: a spot replacement whose capacity gap (the wait for spot capacity
    after a revocation) would exceed this many seconds is launched on demand instead, after
    waiting ``fallback_after_s``; that incarnation is billed at the on-demand price and never
    revoked. "Fall back after K failed launches retried every r seconds" is
    ``fallback_after_s = K * r``; ``0`` falls back at once whenever spot capacity is short;
    ``None`` (default) never falls back.
    ``elastic`` (synchronous training that re-plans as workers come and go, e.g. TorchElastic
    or Horovod Elastic): a lost worker, the chief included, only changes the progress rate,
    and each change in the number of ready workers costs ``reshard_s`` without progress
    (re-rendezvous, re-sharding the data, rebuilding the communicators); losing the last
    ready worker loses the state in memory (back to the last checkpoint).
    """

    workers: tuple[WorkerGroup, ...]
    ps_count: int = 1
    ps_spot: bool = False
    ps_region: str | None = None
    steps: int
    checkpoint_every_steps: int | None = None
    replace_revoked: bool = False
    deadline_s: float | None = None
    include_startup: bool = True
    worker_loss_restarts: bool = False
    horizon_s: float = HORIZON_S
    fallback_after_s: float | None = None
    #: elastic synchronous training: no worker (the chief included) is critical -- the job
    #: goes on with the ready workers (the speed function gives its progress rate at each
    #: count) and pays ``reshard_s`` without progress after every change in their number
    elastic: bool = False
    reshard_s: float = 0.0

    def __post_init__(self) -> None:
        if self.elastic and self.worker_loss_restarts:
            raise InvalidSpecError(
                "elastic",
                "an elastic job never waits for lost workers: it cannot also restart on one",
                fix="set worker_loss_restarts=False with elastic=True",
            )
        if not (math.isfinite(self.reshard_s) and self.reshard_s >= 0):
            raise InvalidSpecError(
                "reshard-s", "must be a finite number of seconds >= 0", got=self.reshard_s
            )
        if not self.workers:
            raise InvalidSpecError(
                "workers", "must be >= 1", got=0, fix="give at least one worker, e.g. --workers 4"
            )
        if self.ps_count < 0:
            raise InvalidSpecError("ps", "must be >= 0", got=self.ps_count, fix="e.g. --ps 1")
        if self.steps < 1:
            raise InvalidSpecError(
                "steps", "must be >= 1", got=self.steps, fix="e.g. --steps 64000"
            )
        every = self.checkpoint_every_steps
        if every is not None and (every < 1 or every > self.steps):
            raise InvalidSpecError(
                "checkpoint-every",
                f"must be between 1 and the job's {self.steps} steps",
                got=every,
                fix="checkpoint at most every --steps steps, or drop --checkpoint-every",
            )
        if self.deadline_s is not None and not (
            math.isfinite(self.deadline_s) and self.deadline_s > 0
        ):
            raise InvalidSpecError(
                "deadline",
                "must be a positive duration",
                got=self.deadline_s,
                fix="e.g. --deadline 6h",
            )
        if not (math.isfinite(self.horizon_s) and self.horizon_s > 0):
            raise InvalidSpecError("horizon_s", "must be > 0", got=self.horizon_s)
        fallback = self.fallback_after_s
        if fallback is not None and not (math.isfinite(fallback) and fallback >= 0):
            raise InvalidSpecError(
                "fallback_after_s",
                "must be a finite number of seconds >= 0 (or None: never fall back)",
                got=fallback,
                fix="e.g. 3 failed launches retried every 5 min: fallback_after_s=900",
            )

    @property
    def worker_count(self) -> int:
        return sum(g.count for g in self.workers)

    @property
    def region(self) -> str:
        """Region of the parameter servers (default: the chief's region)."""
        return self.ps_region or self.workers[0].region

    def on_demand(self) -> ClusterScenario:
        """The same cluster with every server on demand (the comparison baseline)."""
        groups = tuple(replace(g, spot=False) for g in self.workers)
        return replace(self, workers=groups, ps_spot=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceTable:
    """US$ per server-hour keyed by ``(server, market)``: server is a GPU name or ``cpu-ps``."""

    usd_per_hour: Mapping[tuple[str, str], float]
    source: str = "price table"

    def __post_init__(self) -> None:
        clean: dict[tuple[str, str], float] = {}
        for (server, raw_market), price in self.usd_per_hour.items():
            market = normalise_market(raw_market)
            if not (math.isfinite(price) and price >= 0):
                raise InvalidSpecError(f"price of {server} ({market})", "must be >= 0", got=price)
            clean[(server, market)] = float(price)
        object.__setattr__(self, "usd_per_hour", MappingProxyType(clean))

    def price(self, server: str, *, spot: bool, region: str | None = None) -> float:
        """US$/h of ``server`` in the spot or on-demand market; a missing row is bad input.

        With ``region``, a row for ``server@region`` (e.g. ``K80@us-east1``) wins over the
        plain ``server`` row, so one table can price the same GPU in several regions.
        """
        market = _market(spot)
        lowered = {(s.lower(), m): p for (s, m), p in self.usd_per_hour.items()}
        names = ([f"{server}@{region}"] if region else []) + [server]
        for name in names:
            if (name, market) in self.usd_per_hour:
                return self.usd_per_hour[(name, market)]
            if (name.lower(), market) in lowered:
                return lowered[(name.lower(), market)]
        raise InvalidSpecError(
            "price table",
            f"has no {market} price for {server}" + (f" in {region}" if region else ""),
            got=self.source,
            fix=f"add a row '{server},{market},<usd_per_hour>' or use catalog prices",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Mean, median and the 10th/90th percentiles of a sample (``inf`` where runs never end).

    ``mean_ci95_half``: the half-width of the mean's 95% confidence interval, the Monte Carlo's
    own noise (:func:`mean_ci95_half`); ``nan`` where it cannot be estimated."""

    mean: float
    median: float
    p10: float
    p90: float
    mean_ci95_half: float = math.nan

    @staticmethod
    def of(values: npt.NDArray[np.float64], strata: npt.ArrayLike | None = None) -> Summary:
        """The summary of ``values``; ``strata``: each value's stratum (the runs' speed
        factors, :attr:`RunStatistics.speed_factor`) for the mean's confidence interval,
        ``None``: the values are one simple random sample."""
        raw = np.asarray(values, dtype=np.float64)
        x = np.sort(raw)
        if x.size == 0:
            nan = float("nan")
            return Summary(mean=nan, median=nan, p10=nan, p90=nan)
        return Summary(
            mean=float(np.mean(x)) if np.all(np.isfinite(x)) else math.inf,
            median=_quantile_sorted(x, 0.5),
            p10=_quantile_sorted(x, 0.1),
            p90=_quantile_sorted(x, 0.9),
            mean_ci95_half=mean_ci95_half(raw, strata),
        )

    def to_dict(self) -> dict[str, float]:
        return {
            "mean": self.mean,
            "mean_ci95_half": self.mean_ci95_half,
            "median": self.median,
            "p10": self.p10,
            "p90": self.p90,
        }


def _quantile_sorted(x: npt.NDArray[np.float64], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) that returns ``inf`` next to an ``inf``."""
    pos = q * (x.size - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, x.size - 1)
    a, b = float(x[lo]), float(x[hi])
    if math.isinf(a) or math.isinf(b):
        return b if pos > lo else a
    return a + (b - a) * (pos - lo)


def at_central_step(values: npt.ArrayLike, factors: npt.ArrayLike | None) -> float:
    """The mean of a per-run quantity at the central step time (stratum factor 1).

    Runs spread over strata of the step-time model's uncertainty (``factors``, one per run)
    have a plain mean over that factor too -- x1.6-1.8 for an uncalibrated step's x0.33-3.90
    band -- where an on-demand plan states its central step time. A least-squares line
    through the runs against their factor, read at 1, uses every run (the middle stratum
    alone holds a ``1/k`` share) and is exact where a run's time grows linearly with its step
    time (compute, checkpoint rounds and lost work do; start-ups and capacity gaps do not
    grow). ``inf`` where a run never ends; the plain mean without strata. The value is kept
    within the runs' range: a count near 0 except in the slow strata (revocations) is convex
    in the factor, and the line read at 1 fell below every run (session 39: -0.00019).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan
    if not np.all(np.isfinite(x)):
        return math.inf
    if factors is None:
        return float(np.mean(x))
    f = np.asarray(factors, dtype=np.float64)
    if f.shape != x.shape or float(np.ptp(f)) == 0.0:
        return float(np.mean(x))
    slope, intercept = np.polyfit(f, x, 1)
    return float(np.clip(intercept + slope, np.min(x), np.max(x)))


#: the standard normal's two-sided 95% quantile
Z95 = 1.959963984540054


def mean_ci95_half(
    values: npt.ArrayLike, strata: npt.ArrayLike | None = None, *, central: bool = False
) -> float:
    """Half-width of the 95% confidence interval of a Monte Carlo mean (normal approximation).

    The runs are split evenly over the strata of the step-time factor (``strata``, one factor
    per run; :func:`gpucast.plan.uncertainty.strata`), each stratum an independent sample, so
    the standard error is the stratified one, ``sqrt(sum_h W_h^2 s_h^2 / n_h)`` (``s_h``: the
    sample standard deviation of stratum ``h``'s ``n_h`` runs), not ``s / sqrt(n)`` (which
    would add the spread *between* strata, fixed by design, to the noise).

    The plain mean weighs stratum ``h`` by ``W_h = n_h / n``. With ``central`` the estimate is
    :func:`at_central_step`'s: not the central stratum's mean (that stratum holds ``1/k`` of
    the runs) but the least-squares line through every run read at factor 1, which is a
    weighted sum of *all* the strata's means -- run ``i`` weighs ``1/n + (1 - fbar)(f_i -
    fbar) / Sxx``, so ``W_h = n_h (1/n + (1 - fbar)(f_h - fbar) / Sxx)`` (they sum to 1) --
    and the same formula gives its standard error exactly. It is the Monte Carlo's noise
    only: not the line's own error where a run's time is not linear in its step time, nor
    the step-time model's. ``nan`` where it cannot be estimated: a stratum with fewer than 2
    runs, or a run that never ends (the mean is ``inf``).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2 or not np.all(np.isfinite(x)):
        return math.nan
    f = None if strata is None else np.asarray(strata, dtype=np.float64)
    if f is None or f.shape != x.shape or float(np.ptp(f)) == 0.0:
        return Z95 * float(np.std(x, ddof=1)) / math.sqrt(x.size)
    levels, which = np.unique(f, return_inverse=True)
    n_h = np.bincount(which, minlength=levels.size).astype(np.float64)
    if np.any(n_h < 2):
        return math.nan
    mean_h = np.bincount(which, weights=x) / n_h
    var_h = np.bincount(which, weights=(x - mean_h[which]) ** 2) / (n_h - 1.0)
    weight = np.full(x.size, 1.0 / x.size)
    if central:
        centred = f - float(np.mean(f))
        weight = weight + (1.0 - float(np.mean(f))) * centred / float(np.sum(centred**2))
    w_h = np.bincount(which, weights=weight)
    return Z95 * math.sqrt(float(np.sum(w_h**2 * var_h / n_h)))


def _frozen(values: npt.ArrayLike, dtype: type) -> npt.NDArray[np.generic]:
    arr: npt.NDArray[np.generic] = np.array(values, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStatistics:
    """Per-run arrays of one simulated scenario and their summaries.

    ``fallbacks``: spot replacements launched on demand per run (``None`` where the scenario
    has no fallback, so the summary keeps its shape); ``moves``: spot replacements launched
    in the other region after waiting for capacity (``None`` without a region to move to).
    ``gpu_s``: the GPU-seconds billed per run, every worker server's billed time (from its
    launch after any capacity gap to its revocation or the job's end, start-ups included)
    times its :attr:`WorkerGroup.gpus` -- what the cost is billed on, without the parameter
    servers (``None``: not recorded).
    """

    duration_s: npt.NDArray[np.float64]
    cost_usd: npt.NDArray[np.float64]
    revocations: npt.NDArray[np.int64]
    deadline_s: float | None = None
    fallbacks: npt.NDArray[np.int64] | None = None
    moves: npt.NDArray[np.int64] | None = None
    gpu_s: npt.NDArray[np.float64] | None = None
    #: each run's stratum of the step-time model's uncertainty (its step time over the
    #: central one); None: every run at the central step time
    speed_factor: npt.NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "duration_s", _frozen(self.duration_s, np.float64))
        object.__setattr__(self, "cost_usd", _frozen(self.cost_usd, np.float64))
        object.__setattr__(self, "revocations", _frozen(self.revocations, np.int64))
        if self.fallbacks is not None:
            object.__setattr__(self, "fallbacks", _frozen(self.fallbacks, np.int64))
        n = self.duration_s.shape
        if self.cost_usd.shape != n or self.revocations.shape != n or len(n) != 1:
            raise InvalidSpecError("run arrays", "must be 1-D and of equal length")
        if self.fallbacks is not None and self.fallbacks.shape != n:
            raise InvalidSpecError("run arrays", "fallbacks must have one count per run")
        if self.moves is not None:
            object.__setattr__(self, "moves", _frozen(self.moves, np.int64))
            if self.moves.shape != n:
                raise InvalidSpecError("run arrays", "moves must have one count per run")
        if self.gpu_s is not None:
            object.__setattr__(self, "gpu_s", _frozen(self.gpu_s, np.float64))
            if self.gpu_s.shape != n:
                raise InvalidSpecError("run arrays", "gpu_s must have one figure per run")
        if self.speed_factor is not None:
            object.__setattr__(self, "speed_factor", _frozen(self.speed_factor, np.float64))
            if self.speed_factor.shape != n:
                raise InvalidSpecError("run arrays", "speed_factor must have one factor per run")

    @property
    def runs(self) -> int:
        return int(self.duration_s.size)

    @property
    def finished(self) -> npt.NDArray[np.bool_]:
        return np.isfinite(self.duration_s)

    @property
    def final_cost_usd(self) -> npt.NDArray[np.float64]:
        """Each run's final bill, ``inf`` for a run that never finishes: what it billed up to
        the horizon is only a lower bound, and its duration is ``inf`` alike."""
        return np.where(self.finished, self.cost_usd, math.inf)

    @property
    def final_gpu_s(self) -> npt.NDArray[np.float64] | None:
        """Each run's GPU-seconds, ``inf`` for a run that never finishes (as
        :attr:`final_cost_usd`: what it held up to the horizon is only a lower bound)."""
        return None if self.gpu_s is None else np.where(self.finished, self.gpu_s, math.inf)

    @property
    def p_unfinished(self) -> float:
        return float(np.mean(~self.finished)) if self.runs else math.nan

    @property
    def p_miss_deadline(self) -> float | None:
        if self.deadline_s is None:
            return None
        return float(np.mean(self.duration_s > self.deadline_s)) if self.runs else math.nan

    def central(self, values: npt.ArrayLike) -> float:
        """Mean of a per-run quantity at the central step time (:func:`at_central_step`)."""
        return at_central_step(values, self.speed_factor)

    def central_ci95_half(self, values: npt.ArrayLike) -> float:
        """Half-width of the 95% CI of :meth:`central` (:func:`mean_ci95_half`)."""
        return mean_ci95_half(values, self.speed_factor, central=True)

    def summary_of(self, values: npt.NDArray[np.float64]) -> Summary:
        """:meth:`Summary.of` a per-run quantity, its mean's CI over these runs' strata."""
        return Summary.of(values, self.speed_factor)

    @property
    def stratified(self) -> bool:
        """Whether the runs spread over strata of the step-time model's uncertainty."""
        return self.speed_factor is not None and float(np.ptp(self.speed_factor)) > 0.0

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {
            "runs": self.runs,
            "duration_s": self.summary_of(self.duration_s).to_dict(),
            "cost_usd": self.summary_of(self.final_cost_usd).to_dict(),
            "revocations": self.summary_of(self.revocations.astype(np.float64)).to_dict(),
        }
        if self.fallbacks is not None:
            out["fallbacks"] = self.summary_of(self.fallbacks.astype(np.float64)).to_dict()
        if self.moves is not None:
            out["moves"] = self.summary_of(self.moves.astype(np.float64)).to_dict()
        if self.final_gpu_s is not None:
            out["gpu_hours"] = self.summary_of(self.final_gpu_s / 3600.0).to_dict()
        if self.stratified:
            # what plan train shows: the mean over revocations at the central step time
            out["central"] = {
                "duration_s": self.central(self.duration_s),
                "duration_s_ci95_half": self.central_ci95_half(self.duration_s),
                "cost_usd": self.central(self.final_cost_usd),
                "cost_usd_ci95_half": self.central_ci95_half(self.final_cost_usd),
            }
        out["p_unfinished"] = self.p_unfinished
        if self.deadline_s is not None:
            out["p_miss_deadline"] = self.p_miss_deadline
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationResult:
    """The scenario's Monte Carlo runs and the same job on on-demand servers.

    ``sources`` says where each input came from (lifetime fit, hazard band, speed model, prices).
    """

    scenario: ClusterScenario
    transient: RunStatistics
    on_demand: RunStatistics
    seed: int | None = None
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()
    #: the defaults and derived inputs the result rests on, with the flag that changes each
    assumptions: tuple[Assumption, ...] = ()
    #: model -> its validated error in this scenario's regime (or "not validated for ...")
    validation: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: where no lifetime data applies: the outcome under each documented scenario
    scenarios: Mapping[str, Mapping[str, float | None]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))
        object.__setattr__(self, "validation", MappingProxyType(dict(self.validation)))

    def to_frame(self) -> Any:
        """Every simulated run as a pandas DataFrame: ``scenario`` (``transient`` or
        ``on-demand``), ``duration_s`` (inf: never finished), ``cost_usd``, ``revocations``,
        ``met_deadline`` (None without a deadline); plus ``fallbacks`` (spot replacements
        launched on demand) where the scenario falls back, ``moves`` where it moves region."""
        import pandas as pd

        frames = []
        for name, stats in (("transient", self.transient), ("on-demand", self.on_demand)):
            deadline = stats.deadline_s
            columns: dict[str, object] = {
                "scenario": name,
                "duration_s": stats.duration_s,
                "cost_usd": stats.cost_usd,
                "revocations": stats.revocations,
            }
            if self.transient.fallbacks is not None:
                columns["fallbacks"] = (
                    stats.fallbacks if stats.fallbacks is not None else np.zeros(stats.runs, int)
                )
            if self.transient.moves is not None:
                columns["moves"] = (
                    stats.moves if stats.moves is not None else np.zeros(stats.runs, int)
                )
            columns["met_deadline"] = None if deadline is None else stats.duration_s <= deadline
            frames.append(pd.DataFrame(columns))
        return pd.concat(frames, ignore_index=True)

    def to_dict(self) -> dict[str, object]:
        """The CLI's ``--json`` object: summaries of the scenario, plus ``on_demand``."""
        out = self.transient.summary()
        out["on_demand"] = self.on_demand.summary()
        od_cost = Summary.of(self.on_demand.final_cost_usd).mean
        tr_cost = Summary.of(self.transient.final_cost_usd).mean
        saving = 1.0 - tr_cost / od_cost if math.isfinite(tr_cost) and od_cost > 0 else None
        # a fraction of the on-demand cost (0.25: a quarter cheaper); the unitless key stays
        out["saving_vs_on_demand_fraction"] = saving
        out["saving_vs_on_demand"] = saving
        out["seed"] = self.seed
        out["sources"] = dict(self.sources)
        out["notes"] = list(self.notes)
        out["assumptions"] = [a.to_dict() for a in self.assumptions]
        out["validation"] = dict(self.validation)
        out["scenarios"] = {k: dict(v) for k, v in self.scenarios.items()}
        return out

"""Any program: what bounds it over time, and its run time on other machines.

Characterisation (:func:`characterise`)
    Each sample interval of a run is classed by what the program did in it:

    * ``gpu``: the GPUs were busy (mean utilisation >= 50%);
    * ``cpu`` or ``memory``: its threads used or waited for at least half of the cores they
      could use (``cpu_cores + cpu_wait_cores >= 0.5 x min(cores, active threads)``); called
      ``memory`` when its resident set is over ``MEMORY_BOUND_RSS_BYTES`` (1 GiB: far beyond any
      cache) or grows faster than ``MEMORY_GROWTH_BYTES_PER_S`` (256 MB/s). psutil sees no memory
      bandwidth, so this is a heuristic; a cache-resident compute kernel is ``cpu``;
    * ``io``: not CPU-busy but moving >= 5 MB/s to or from storage, >= 50 MB/s through
      read/write calls, or >= 1 MB/s over the network (machine-wide);
    * ``idle``: none of these (sleeping, waiting on locks or a peer).

    The shares are of the *dedicated-equivalent* time where the runs recorded their
    contention (``ResourceSeries.contention_s``): each interval counts for its length less
    the time other tasks took from the program in it, so a loaded machine does not inflate
    the CPU share of a program that also does I/O.

    Phases are the runs of one class (a class held for fewer than ``MIN_PHASE_SAMPLES``
    samples joins the phase before it). Burstiness is the coefficient of variation of the
    CPU demand; peak vs mean is given for CPU, memory and I/O rate.

Cross-hardware prediction (:class:`ProgramModel`)
    A run's wall time splits by those shares into busy (cpu + memory), I/O, GPU and idle
    time. On a target machine with ``c`` cores at ``f`` GHz, memory bandwidth ``B`` and disk
    throughput ``D``::

        T = T_cpu * (p0 f0) / (p f) + T_mem * B_eff0 / B_eff + T_io * D0 / D + T_gpu + T_idle

    where ``p = min(d, c)`` is the parallelism the program gets (``d``: its demand, the
    threads it keeps busy; on a shared machine with ``L`` other runnable tasks over ``C``
    cores, at most its fair share ``C d / (d + L)``: the scheduler balances tasks over every
    core, so pinning to fewer cores than the machine has gains a loaded machine little),
    and ``B_eff = min(p * PER_CORE_BANDWIDTH_GBS, B)`` (one core
    cannot draw a socket's bandwidth). GPU time is carried over unchanged (GPU programs are
    predicted by the step-time model, not this one). ``d`` is the 90th percentile of the
    active threads in busy intervals (with per-thread schedstat, at most the time-weighted
    median of the threads kept runnable: cores used plus cores waited for); with measurements
    at two or more core counts,
    :meth:`ProgramModel.fit` picks the ``d`` that best predicts them from one another.
    Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.program import ProgramMeasurement, ResourceSeries
from gpucast.predict.base import Estimator, register

PHASE_CLASSES: tuple[str, ...] = ("cpu", "memory", "io", "gpu", "idle")
BUSY_SHARE = 0.5
GPU_BUSY_PCT = 50.0
MEMORY_BOUND_RSS_BYTES = 1024.0**3
MEMORY_GROWTH_BYTES_PER_S = 256e6
STORAGE_IO_BYTES_PER_S = 5e6
CHAR_IO_BYTES_PER_S = 50e6
NETWORK_BYTES_PER_S = 1e6
MIN_PHASE_SAMPLES = 3
#: Stream bandwidth one core sustains (GB/s): the ceiling of a single-threaded memory-bound
#: program, whatever the socket offers (STREAM triad on one core of current x86/Arm servers is
#: 10-20 GB/s; the low end is taken).
PER_CORE_BANDWIDTH_GBS = 10.0


def _rate(cumulative: np.ndarray, dt: np.ndarray) -> np.ndarray:
    delta = np.diff(cumulative, prepend=cumulative[:1] if cumulative.size else cumulative)
    return np.asarray(np.divide(delta, dt, out=np.zeros_like(delta), where=dt > 0))


def classify(series: ResourceSeries, n_cores: int) -> np.ndarray:
    """One class index (into :data:`PHASE_CLASSES`) per sample of ``series``."""
    t = np.asarray(series.t_s, dtype=np.float64)
    n = t.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    dt = np.diff(t, prepend=0.0)
    cpu = np.nan_to_num(np.asarray(series.cpu_cores, dtype=np.float64))
    wait = (
        np.nan_to_num(np.asarray(series.cpu_wait_cores, dtype=np.float64))
        if series.cpu_wait_cores
        else np.zeros(n)
    )
    threads = (
        np.nan_to_num(np.asarray(series.active_threads, dtype=np.float64))
        if series.active_threads
        else np.ones(n)
    )
    usable = np.maximum(1.0, np.minimum(float(n_cores), threads))
    busy = (cpu + wait) >= BUSY_SHARE * usable
    rss = np.nan_to_num(np.asarray(series.rss_bytes, dtype=np.float64))
    growth = _rate(rss, dt)
    memory = (rss >= MEMORY_BOUND_RSS_BYTES) | (growth >= MEMORY_GROWTH_BYTES_PER_S)
    storage = _rate(np.add(series.read_bytes, series.write_bytes), dt)
    chars = _rate(np.add(series.read_chars, series.write_chars), dt)
    net = _rate(np.add(series.net_sent_bytes, series.net_recv_bytes), dt)
    io = (
        (storage >= STORAGE_IO_BYTES_PER_S)
        | (chars >= CHAR_IO_BYTES_PER_S)
        | (net >= NETWORK_BYTES_PER_S)
    )
    gpu = (
        np.nan_to_num(np.asarray(series.gpu_util_pct, dtype=np.float64)) >= GPU_BUSY_PCT
        if series.gpu_util_pct is not None
        else np.zeros(n, dtype=bool)
    )
    out = np.full(n, PHASE_CLASSES.index("idle"), dtype=np.int64)
    out[io] = PHASE_CLASSES.index("io")
    out[busy] = PHASE_CLASSES.index("cpu")
    out[busy & memory] = PHASE_CLASSES.index("memory")
    out[gpu] = PHASE_CLASSES.index("gpu")
    out[0] = out[1] if n > 1 else out[0]  # the first sample has no interval behind it
    return out


def phases(classes: np.ndarray, t_s: Sequence[float]) -> list[tuple[float, float, str]]:
    """(start s, end s, class) runs of one class; short runs join the phase before them, and
    a phase is named by the class of most of its samples (a run of 1 idle and 2 cpu samples
    is a cpu phase, as the shares count it, not an idle one)."""
    n = classes.size
    if n == 0:
        return []
    t = np.asarray(t_s, dtype=np.float64)
    change = np.flatnonzero(np.diff(classes)) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [n]))
    merged: list[list[Any]] = []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        label = PHASE_CLASSES[int(classes[s])]
        if merged and (e - s < MIN_PHASE_SAMPLES or merged[-1][2] == label):
            merged[-1][1] = e
        else:
            merged.append([s, e, label])
    out: list[tuple[float, float, str]] = []
    for s, e, _ in merged:
        counts = np.bincount(classes[s:e], minlength=len(PHASE_CLASSES))
        label = PHASE_CLASSES[int(np.argmax(counts))]  # ties: the first class listed
        start = 0.0 if s == 0 else float(t[s - 1])  # sample i covers (t[i-1], t[i]]
        if out and out[-1][2] == label:
            out[-1] = (out[-1][0], float(t[e - 1]), label)
        else:
            out.append((start, float(t[e - 1]), label))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramProfile:
    """What bounds a program over its measured runs (see the module docstring).

    ``shares`` maps each class of :data:`PHASE_CLASSES` to its share of the sampled time;
    ``phases`` are the first measured run's phases; ``parallelism`` the mean cores used in
    busy intervals; ``thread_demand`` the threads it keeps busy (``d`` of the model);
    ``background_tasks`` the other tasks runnable on the machine meanwhile (mean over busy
    intervals of the machine's runnable tasks less the program's demand and the sampler).
    """

    shares: dict[str, float]
    phases: tuple[tuple[float, float, str], ...]
    bound_by: str
    burstiness: float
    cpu_cores_mean: float
    cpu_cores_peak: float
    rss_mean_bytes: float
    rss_peak_bytes: float
    io_mean_bytes_per_s: float
    io_peak_bytes_per_s: float
    cpu_wait_share: float
    parallelism: float
    thread_demand: float
    gpu_util_mean_pct: float | None
    n_samples: int
    background_tasks: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "background_tasks": self.background_tasks,
            "shares": dict(self.shares),
            "phases": [{"start_s": s, "end_s": e, "bound_by": c} for s, e, c in self.phases],
            "bound_by": self.bound_by,
            "burstiness": self.burstiness,
            "cpu_cores_mean": self.cpu_cores_mean,
            "cpu_cores_peak": self.cpu_cores_peak,
            "rss_mean_bytes": self.rss_mean_bytes,
            "rss_peak_bytes": self.rss_peak_bytes,
            "io_mean_bytes_per_s": self.io_mean_bytes_per_s,
            "io_peak_bytes_per_s": self.io_peak_bytes_per_s,
            "cpu_wait_share": self.cpu_wait_share,
            "parallelism": self.parallelism,
            "thread_demand": self.thread_demand,
            "gpu_util_mean_pct": self.gpu_util_mean_pct,
            "n_samples": self.n_samples,
        }


def characterise(measurement: ProgramMeasurement) -> ProgramProfile | None:
    """The profile of the measured runs of ``measurement`` (``None``: no samples)."""
    runs = [r for r in measurement.runs if r.series is not None and r.series.n_samples > 1]
    measured = [r for r in runs if not r.warmup and r.ok] or runs
    if not measured:
        return None
    classes: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    dedicated: list[np.ndarray] = []
    cpu: list[np.ndarray] = []
    wait: list[np.ndarray] = []
    threads: list[np.ndarray] = []
    rss: list[np.ndarray] = []
    io: list[np.ndarray] = []
    gpu: list[np.ndarray] = []
    runnable: list[np.ndarray] = []
    for run in measured:
        s = run.series
        assert s is not None
        t = np.asarray(s.t_s, dtype=np.float64)
        dt = np.diff(t, prepend=0.0)
        dt[0] = 0.0
        classes.append(classify(s, measurement.n_cores))
        weights.append(dt)
        lost = (
            np.diff(np.nan_to_num(np.asarray(s.contention_s, dtype=np.float64)), prepend=0.0)
            if s.contention_s
            else np.zeros(t.size)
        )
        lost[0] = 0.0
        dedicated.append(np.clip(dt - lost, 0.0, None))
        cpu.append(np.nan_to_num(np.asarray(s.cpu_cores, dtype=np.float64)))
        wait.append(
            np.nan_to_num(np.asarray(s.cpu_wait_cores, dtype=np.float64))
            if s.cpu_wait_cores
            else np.zeros(t.size)
        )
        threads.append(
            np.asarray(s.active_threads, dtype=np.float64) if s.active_threads else np.ones(t.size)
        )
        rss.append(np.nan_to_num(np.asarray(s.rss_bytes, dtype=np.float64)))
        io.append(
            _rate(np.add(s.read_chars, s.write_chars), dt)
            + _rate(np.add(s.read_bytes, s.write_bytes), dt)
        )
        if s.gpu_util_pct is not None:
            gpu.append(np.asarray(s.gpu_util_pct, dtype=np.float64))
        runnable.append(
            np.asarray(s.runnable_tasks, dtype=np.float64)
            if s.runnable_tasks
            else np.full(t.size, np.nan)
        )
    cls = np.concatenate(classes)
    w = np.concatenate(weights)
    total = float(w.sum()) or 1.0
    wd = np.concatenate(dedicated)
    if not wd.sum() > 0:
        wd = w
    shares = {
        name: float(wd[cls == i].sum() / (float(wd.sum()) or 1.0))
        for i, name in enumerate(PHASE_CLASSES)
    }
    c = np.concatenate(cpu)
    demand = c + np.concatenate(wait)
    th = np.concatenate(threads)
    r = np.concatenate(rss)
    rate = np.concatenate(io)
    busy = np.isin(cls, (PHASE_CLASSES.index("cpu"), PHASE_CLASSES.index("memory"))) & (w > 0)
    mean_demand = float(np.average(demand, weights=w)) if w.sum() > 0 else 0.0
    std_demand = (
        float(math.sqrt(np.average((demand - mean_demand) ** 2, weights=w))) if w.sum() > 0 else 0.0
    )
    parallelism = float(np.average(c[busy], weights=w[busy])) if busy.any() else 0.0
    thread_demand = float(np.percentile(th[busy], 90)) if busy.any() else 1.0
    if busy.any() and all(r.series is not None and r.series.contention_s for r in measured):
        # per-thread schedstat (runs that recorded their contention): the threads it kept
        # runnable, on a CPU or waiting for one, over most of its busy time -- a start-up
        # burst of helper threads (numpy's pool) counts as active but is not its demand
        kept = demand[busy]
        order = np.argsort(kept)
        half = int(np.searchsorted(np.cumsum(w[busy][order]), 0.5 * float(w[busy].sum())))
        thread_demand = min(thread_demand, float(kept[order][min(half, order.size - 1)]))
    first = measured[0].series
    assert first is not None
    gpu_all = np.concatenate(gpu) if gpu else np.zeros(0)
    cpu_total = float(np.sum(c * w))
    # others' runnable tasks: the machine's, less the program's demand and the sampler's own
    others = np.maximum(0.0, np.concatenate(runnable) - demand - 1.0)
    keep = busy & np.isfinite(others)
    background = float(np.average(others[keep], weights=w[keep])) if keep.any() else 0.0
    return ProgramProfile(
        background_tasks=background,
        shares=shares,
        phases=tuple(phases(classes[0], first.t_s)),
        bound_by=max(shares, key=lambda k: shares[k]),
        burstiness=std_demand / mean_demand if mean_demand > 0 else 0.0,
        cpu_cores_mean=cpu_total / total,
        cpu_cores_peak=float(c.max()) if c.size else 0.0,
        rss_mean_bytes=float(np.average(r, weights=w)) if w.sum() > 0 else 0.0,
        rss_peak_bytes=float(r.max()) if r.size else 0.0,
        io_mean_bytes_per_s=float(np.sum(rate * w) / total),
        io_peak_bytes_per_s=float(rate.max()) if rate.size else 0.0,
        cpu_wait_share=float(np.sum(np.concatenate(wait) * w) / max(np.sum(demand * w), 1e-12)),
        parallelism=parallelism,
        thread_demand=max(1.0, thread_demand),
        gpu_util_mean_pct=float(np.nanmean(gpu_all)) if gpu_all.size else None,
        n_samples=int(cls.size),
    )


# -- cross-hardware prediction -------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class CpuMachine:
    """What the program model needs to know about a machine (or the cores it was given).

    ``cores`` are the cores the program may use (pinned or the whole machine); on a shared
    machine, ``host_cpus`` are all of its cores and ``background_tasks`` the other runnable
    tasks competing for them (0: a dedicated machine, such as a catalog instance).
    """

    name: str
    cores: float
    clock_ghz: float
    memory_bandwidth_gbs: float
    disk_mb_per_s: float
    host_cpus: float | None = None
    background_tasks: float = 0.0

    def __post_init__(self) -> None:
        for name in ("cores", "clock_ghz", "memory_bandwidth_gbs", "disk_mb_per_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a finite number > 0", got=value)
            object.__setattr__(self, name, float(value))
        if self.host_cpus is not None:
            if not (math.isfinite(self.host_cpus) and self.host_cpus >= self.cores):
                raise InvalidSpecError("host_cpus", "must be >= cores", got=self.host_cpus)
            object.__setattr__(self, "host_cpus", float(self.host_cpus))
        if not (math.isfinite(self.background_tasks) and self.background_tasks >= 0):
            raise InvalidSpecError("background_tasks", "must be >= 0", got=self.background_tasks)
        object.__setattr__(self, "background_tasks", float(self.background_tasks))

    def available_cores(self, demand: float) -> float:
        """The cores a program keeping ``demand`` threads busy gets: at most its demand and the
        cores it may use and, with ``background_tasks`` others runnable, its fair share of
        the machine (Linux's scheduler balances tasks over every core)."""
        share = min(demand, self.cores)
        if self.background_tasks > 0:
            total = self.host_cpus if self.host_cpus is not None else self.cores
            share = min(share, total * demand / (demand + self.background_tasks))
        return share

    def to_dict(self) -> dict[str, Any]:
        return {
            "host_cpus": self.host_cpus,
            "background_tasks": self.background_tasks,
            "name": self.name,
            "cores": self.cores,
            "clock_ghz": self.clock_ghz,
            "memory_bandwidth_gbs": self.memory_bandwidth_gbs,
            "disk_mb_per_s": self.disk_mb_per_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CpuMachine:
        return cls(
            name=str(data["name"]),
            cores=float(data["cores"]),
            clock_ghz=float(data["clock_ghz"]),
            memory_bandwidth_gbs=float(data["memory_bandwidth_gbs"]),
            disk_mb_per_s=float(data["disk_mb_per_s"]),
            host_cpus=None if data.get("host_cpus") is None else float(data["host_cpus"]),
            background_tasks=float(data.get("background_tasks", 0.0)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramObservation:
    """One measured configuration: the wall time split by bottleneck, on ``machine``."""

    machine: CpuMachine
    wall_s: float
    shares: dict[str, float]
    thread_demand: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.wall_s) and self.wall_s > 0):
            raise InvalidSpecError("wall_s", "must be a finite number > 0", got=self.wall_s)
        if not (math.isfinite(self.thread_demand) and self.thread_demand >= 1):
            raise InvalidSpecError("thread_demand", "must be >= 1", got=self.thread_demand)

    @classmethod
    def of(
        cls,
        measurement: ProgramMeasurement,
        profile: ProgramProfile,
        machine: CpuMachine,
        *,
        dedicated: bool = False,
    ) -> ProgramObservation:
        """``measurement`` on ``machine``: its median wall time or, with ``dedicated``, its
        median dedicated-equivalent time (``machine`` should then carry no background load)."""
        wall = measurement.dedicated_median_s if dedicated else measurement.median_s
        if wall is None or not wall > 0:
            raise InvalidSpecError(
                "run",
                f"{measurement.name}: has no successful measured run"
                + (" with its contention recorded" if dedicated else "")
                + " to predict from",
            )
        return cls(
            machine=machine,
            wall_s=wall,
            shares=dict(profile.shares),
            thread_demand=profile.thread_demand,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine.to_dict(),
            "wall_s": self.wall_s,
            "shares": dict(self.shares),
            "thread_demand": self.thread_demand,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgramObservation:
        return cls(
            machine=CpuMachine.from_dict(data["machine"]),
            wall_s=float(data["wall_s"]),
            shares={str(k): float(v) for k, v in data["shares"].items()},
            thread_demand=float(data["thread_demand"]),
        )


def _bandwidth(parallel: float, machine: CpuMachine) -> float:
    return min(parallel * PER_CORE_BANDWIDTH_GBS, machine.memory_bandwidth_gbs)


def scale(obs: ProgramObservation, target: CpuMachine, demand: float) -> float:
    """``obs``'s wall time moved to ``target`` (the formula of the module docstring)."""
    p0 = obs.machine.available_cores(demand)
    p1 = target.available_cores(demand)
    s = obs.shares
    busy_cpu = s.get("cpu", 0.0) * (p0 * obs.machine.clock_ghz) / (p1 * target.clock_ghz)
    busy_mem = s.get("memory", 0.0) * _bandwidth(p0, obs.machine) / _bandwidth(p1, target)
    io = s.get("io", 0.0) * obs.machine.disk_mb_per_s / target.disk_mb_per_s
    rest = s.get("gpu", 0.0) + s.get("idle", 0.0)
    return obs.wall_s * (busy_cpu + busy_mem + io + rest)


_DEMAND_GRID = np.round(np.concatenate((np.arange(1.0, 4.0, 0.05), np.arange(4.0, 257.0, 1.0))), 4)


@register
class ProgramModel(Estimator):
    """Predicts a program's wall time per run on a machine from measured configurations.

    The constructor stores only ``fit_demand``; :meth:`fit` takes the observations (one per
    measured machine or core count) and returns ``self``; predict before fit raises
    :class:`NotFittedError`. With observations at two or more core counts (and
    ``fit_demand``), the thread demand ``d`` is the grid value that minimises the squared log
    error of predicting each observation from the others; else each observation's own ``d``.
    """

    kind: ClassVar[str] = "program"
    schema_version: ClassVar[int] = 1

    def __init__(self, *, fit_demand: bool = True) -> None:
        self.fit_demand = fit_demand
        self._observations: tuple[ProgramObservation, ...] | None = None
        self._demand: float | None = None

    @property
    def is_fitted(self) -> bool:
        return self._observations is not None

    def fit(self, observations: Sequence[ProgramObservation]) -> ProgramModel:
        obs = tuple(observations)
        if not obs:
            raise InvalidSpecError("observations", "needs at least one measured configuration")
        demand: float | None = None
        if self.fit_demand and len({o.machine.cores for o in obs}) >= 2:
            errors = np.zeros(_DEMAND_GRID.size)
            for i, held in enumerate(obs):
                for j, other in enumerate(obs):
                    if i != j:
                        predicted = np.array([scale(other, held.machine, d) for d in _DEMAND_GRID])
                        errors += np.log(predicted / held.wall_s) ** 2
            demand = float(_DEMAND_GRID[int(np.argmin(errors))])
        self._observations = obs
        self._demand = demand
        return self

    @property
    def demand(self) -> float | None:
        """The fitted thread demand (``None``: each observation's own)."""
        self._require_fitted()
        return self._demand

    def predict(self, targets: Sequence[CpuMachine]) -> np.ndarray:
        """Wall time per run (s) on each target: the median over the observations."""
        self._require_fitted()
        obs = self._observations
        assert obs is not None
        table = np.array(
            [
                [scale(o, t, self._demand if self._demand is not None else o.thread_demand)
                 for o in obs]
                for t in targets
            ],
            dtype=np.float64,
        ).reshape(len(targets), len(obs))  # fmt: skip
        return np.asarray(np.median(table, axis=1), dtype=np.float64)

    def _state(self) -> dict[str, Any]:
        assert self._observations is not None
        return {
            "fit_demand": self.fit_demand,
            "observations": [o.to_dict() for o in self._observations],
            "demand": self._demand,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> ProgramModel:
        try:
            model = cls(fit_demand=bool(state["fit_demand"]))
            model._observations = tuple(
                ProgramObservation.from_dict(o) for o in state["observations"]
            )
            demand = state["demand"]
            model._demand = None if demand is None else float(demand)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInputError(
                f"program model state is malformed ({type(exc).__name__}: {exc})",
                fix="refit it with gpucast predict cmd",
            ) from None
        if not model._observations:
            raise InvalidInputError("program model state has no observations", fix="refit it")
        return model

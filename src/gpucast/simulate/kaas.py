"""Kernel-as-a-Service: functions as sequences of GPU kernels sharing a pool (issue #19).

An invocation of function ``f`` runs ``kernels[f]`` (seconds each, in order) on a GPU.
Three ways to give GPUs to functions, on the same arrivals:

* ``dedicated``: one GPU per function; a function's invocations queue first come first
  served on its own GPU (:func:`gpucast.simulate.stages.fifo_departures`, the whole
  invocation its service time);
* ``function``: a pool of ``gpus`` GPUs shared at function granularity -- an invocation takes
  the first free GPU for all its kernels (FCFS, non-preemptive: an M/G/c queue);
* ``kernel`` (KaaS): the same pool shared at kernel granularity -- each kernel is dispatched
  on its own to the first free GPU, in the order kernels become ready (an invocation's next
  kernel is ready when its previous one ends, plus ``dispatch_s``: what dispatching one kernel
  as a request costs). A short function's kernels interleave with a long one's instead of
  waiting behind the whole of it.

Assumptions: every GPU of the pool holds every function's weights (no cold starts, no copies
between GPUs: KaaS keeps function state in GPU memory); kernels do not overlap on one GPU
(one at a time, each at its solo duration); ``function`` pays ``dispatch_s`` once per
invocation, ``kernel`` once per kernel.

Overload: the offered work (invocations x their kernels' time over the arrivals' window,
``window_s``) against the GPUs that serve it. A pool whose work exceeds its GPUs (a
dedicated GPU whose function's work exceeds it) has no steady state: calls queue for as long
as they keep coming, so the latency percentiles grow with the window. :class:`KaasResult`
says so (``overloaded``) and gives the GPUs the work keeps busy (``gpus_needed``), as the
serverless pool does (:func:`gpucast.simulate.stages.gpus_needed`).

Pure: numbers in, numbers out. The pool is one event loop over kernels (a heap of ready
kernels and one of GPU free times), the dedicated case vectorised per function.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.simulate.stages import fifo_departures, gpus_needed

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
SHARINGS: tuple[str, ...] = ("dedicated", "function", "kernel")
#: most units (kernels under KaaS, invocations under function-level sharing) one pool
#: simulation may schedule: the loop is per unit
MAX_KERNELS = 5_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class KaasResult:
    """Per invocation its latency (arrival to last kernel's end); throughput over the span
    from the first arrival to the last completion, at least the arrivals' window (so never
    above ``offered_per_s``); GPU busy time over GPUs x that span.

    ``kernels``: the kernels the invocations ran (the same under every sharing);
    ``dispatches``: the units of work scheduled one by one (kernels under kernel-level
    sharing, invocations otherwise); ``offered_per_s``: invocations over the arrivals' window;
    ``gpus_needed`` and ``overloaded``: the module docstring's overload."""

    sharing: str
    gpus: int
    func: IntArray
    latency_s: FloatArray
    throughput_per_s: float
    utilisation: float
    kernels: int
    dispatches: int
    offered_per_s: float
    gpus_needed: int
    overloaded: bool

    def percentile_s(self, q: float, function: int | None = None) -> float:
        lat = self.latency_s if function is None else self.latency_s[self.func == function]
        return float(np.percentile(lat, q)) if lat.size else math.nan

    def to_dict(self, names: Sequence[str] | None = None) -> dict[str, object]:
        n_f = int(self.func.max()) + 1 if self.func.size else 0
        labels = list(names) if names is not None else [f"f{i}" for i in range(n_f)]
        return {
            "sharing": self.sharing,
            "gpus": self.gpus,
            "invocations": int(self.latency_s.size),
            "kernels": self.kernels,
            "dispatches": self.dispatches,
            "offered_per_s": self.offered_per_s,
            "throughput_per_s": self.throughput_per_s,
            "utilisation": self.utilisation,
            "gpus_needed": self.gpus_needed,
            "overloaded": self.overloaded,
            # an overloaded run's percentiles measure how long it ran, not a steady state
            "latency_steady": not self.overloaded,
            "latency_s": {
                "p50": self.percentile_s(50.0),
                "p99": self.percentile_s(99.0),
                "mean": float(self.latency_s.mean()) if self.latency_s.size else math.nan,
            },
            "per_function": {
                labels[f]: {
                    "p50_s": self.percentile_s(50.0, f),
                    "p99_s": self.percentile_s(99.0, f),
                }
                for f in range(n_f)
            },
        }


def _pool(
    kernels: Sequence[FloatArray],
    func: IntArray,
    arrival_s: FloatArray,
    gpus: int,
    dispatch_s: float,
) -> tuple[FloatArray, float]:
    """Completion time of each invocation and GPU busy seconds (module docstring)."""
    ready: list[tuple[float, int, int]] = [
        (float(a) + dispatch_s, i, 0) for i, a in enumerate(arrival_s)
    ]
    heapq.heapify(ready)
    free = [0.0] * gpus
    done = np.zeros(arrival_s.size)
    busy = 0.0
    while ready:
        at, i, k = heapq.heappop(ready)
        seq = kernels[int(func[i])]
        g = heapq.heappop(free)
        end = max(g, at) + float(seq[k])
        busy += float(seq[k])
        heapq.heappush(free, end)
        if k + 1 < seq.size:
            heapq.heappush(ready, (end + dispatch_s, i, k + 1))
        else:
            done[i] = end
    return done, busy


def simulate_kaas(
    kernels: Sequence[npt.ArrayLike],
    func: npt.ArrayLike,
    arrival_s: npt.ArrayLike,
    *,
    sharing: str,
    gpus: int = 1,
    dispatch_s: float = 0.0,
    window_s: float | None = None,
    max_dispatches: float = MAX_KERNELS,
) -> KaasResult:
    """Latency and throughput of invocations ``func[i]`` arriving at ``arrival_s[i]`` under
    ``sharing`` (module docstring); ``gpus`` is the pool's size (``dedicated``: one per
    function, ``gpus`` ignored); ``window_s`` the span the arrivals were drawn over (default:
    first to last arrival), the load's denominator; more than ``max_dispatches`` units of
    work to schedule one by one are refused."""
    if sharing not in SHARINGS:
        raise InvalidSpecError("sharing", f"must be one of {', '.join(SHARINGS)}", got=sharing)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InvalidSpecError("pool-gpus", "must be an integer >= 1", got=gpus)
    if not (math.isfinite(dispatch_s) and dispatch_s >= 0):
        raise InvalidSpecError("dispatch", "must be >= 0 s", got=dispatch_s)
    seqs = [np.asarray(k, dtype=np.float64).ravel() for k in kernels]
    for f, seq in enumerate(seqs):
        if seq.size == 0 or not np.all(np.isfinite(seq)) or np.any(seq < 0):
            raise InvalidSpecError(f"kernels of function {f}", "need durations >= 0 s")
    owner = np.asarray(func, dtype=np.int64)
    arrival = np.asarray(arrival_s, dtype=np.float64)
    if owner.shape != arrival.shape or owner.ndim != 1:
        raise InvalidSpecError("func/arrival_s", "must be 1-D arrays of the same length")
    if owner.size and (owner.min() < 0 or owner.max() >= len(seqs)):
        raise InvalidSpecError("func", f"must index the {len(seqs)} functions")
    if not np.all(np.isfinite(arrival)):
        raise InvalidSpecError("arrival_s", "must be finite")
    order = np.argsort(arrival, kind="stable")
    owner, arrival = owner[order], arrival[order]
    total = np.array([s.sum() for s in seqs])
    sizes = np.array([s.size for s in seqs], dtype=np.int64)
    window = _window(arrival, window_s)
    calls = np.bincount(owner, minlength=len(seqs))
    if sharing == "dedicated":
        done = np.zeros(arrival.size)
        for f in range(len(seqs)):
            mine = owner == f
            done[mine] = fifo_departures(arrival[mine], total[f] + dispatch_s)
        busy = float(total[owner].sum())
        n_gpus = len(seqs)
        dispatches = int(owner.size)
        # each function's own GPU: its calls x (kernels + the dispatch it holds the GPU for)
        work = calls * (total + dispatch_s)
        needed = sum(gpus_needed(float(w), window) for w in work)
        overloaded = bool(np.any(work > window * (1.0 + 1e-12)))
    else:
        unit = [np.array([t]) for t in total] if sharing == "function" else seqs
        dispatches = int(owner.size if sharing == "function" else sizes[owner].sum())
        if dispatches > max_dispatches:
            what = "invocations" if sharing == "function" else "kernels"
            raise InvalidSpecError(
                what, f"{dispatches:,} to schedule one by one on the pool ({sharing}-level "
                f"sharing), more than {max_dispatches:,.0f}",
                fix="simulate fewer invocations (a lower rate or a shorter span)",
            )  # fmt: skip
        done, busy = _pool(unit, owner, arrival, gpus, dispatch_s)
        n_gpus = gpus
        work_s = float(calls @ total)  # dispatching is off the GPU: ready after it
        needed = gpus_needed(work_s, window)
        overloaded = work_s > gpus * window * (1.0 + 1e-12)
    # from the first arrival to the last completion, and never shorter than the window the
    # arrivals were offered over: served calls/s above offered (39.2 vs 39.0) read as a gain
    span = max(float(done.max() - arrival.min()), window) if arrival.size else 0.0
    return KaasResult(
        sharing=sharing,
        gpus=n_gpus,
        func=owner,
        latency_s=done - arrival,
        throughput_per_s=arrival.size / span if span > 0 else math.nan,
        utilisation=busy / (n_gpus * span) if span > 0 else math.nan,
        kernels=int(sizes[owner].sum()),
        dispatches=dispatches,
        offered_per_s=arrival.size / window if window > 0 else math.nan,
        gpus_needed=needed,
        overloaded=bool(window > 0 and overloaded),
    )


def _window(arrival_s: FloatArray, window_s: float | None) -> float:
    """The span the arrivals were offered over: ``window_s``, else first to last arrival."""
    if window_s is None:
        return float(arrival_s.max() - arrival_s.min()) if arrival_s.size else 0.0
    if not (math.isfinite(window_s) and window_s > 0):
        raise InvalidSpecError("window_s", "must be > 0 s", got=window_s)
    return float(window_s)


def poisson_arrivals(
    rates_per_s: Sequence[float], duration_s: float, rng: np.random.Generator
) -> tuple[IntArray, FloatArray]:
    """Independent Poisson arrivals of each function over ``[0, duration_s)``, sorted:
    (function, time)."""
    rates = np.asarray(rates_per_s, dtype=np.float64)
    if not np.all(np.isfinite(rates)) or np.any(rates < 0):
        raise InvalidSpecError("rate", "must be >= 0 per second")
    n = rng.poisson(rates * duration_s)
    owner = np.repeat(np.arange(rates.size), n)
    t = rng.random(owner.size) * duration_s
    order = np.argsort(t, kind="stable")
    return owner[order].astype(np.int64), t[order]

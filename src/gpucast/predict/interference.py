"""Slowdown of jobs sharing one GPU, per sharing mechanism, from their resource demands. Pure.

Each job is described by what it does alone on the device (:class:`JobDemand`): the share of
its device time bound by SM compute (``compute_fraction``, the roofline's compute term over
its compute + memory terms), the fraction of the GPU's SMs and of its peak memory bandwidth
it keeps busy (``sm_utilisation``, ``bandwidth_utilisation``; launch gaps and host time leave
both below 1), and the fraction of wall time it has work on the device at all (``duty``).

* **MIG**: isolated slices (own SMs, memory slices and L2): slowdown 1 against the job alone
  on its slice.
* **Time-slicing** (the default when several processes share a GPU without MPS): the
  contexts take turns owning the whole GPU, and a context with no work yields its turn, so
  the device's time is split max-min fairly over the jobs' duties (:func:`fair_shares`): a
  job's slowdown is its duty over its share (n always-busy jobs: n each; an always-busy job
  beside one busy 30% of the time: 1 / 0.7).
* **Streams** (one process, concurrent kernels) and **MPS** (processes whose kernels run
  concurrently): the SMs and the memory bandwidth are shared. With ``S`` the summed SM
  demand and ``B`` the summed bandwidth demand (each weighted by duty), a job's compute
  part runs ``max(1, S)`` and its memory part ``max(1, B)`` times slower:
  ``compute_fraction * max(1, S) + (1 - compute_fraction) * max(1, B)``. Under MPS a
  client's active thread percentage ``p`` caps the SMs it may use: its SM demand is
  ``min(sm, p)`` and its own compute part slows by ``sm / p`` when the cap binds, so limits
  that sum to <= 100% partition the SMs (no compute interference, the bandwidth still
  shared). Streams are MPS without limits.

Not modelled: L2 capacity contention (no profile feature measures a job's L2 working set),
context-switch costs of time-slicing, and the scheduling quirks of particular drivers.
The CPU proxy in ``benchmarks/colocation_interference.py`` checks the time-slicing rule on
real processes sharing one core; nothing here is checked on a GPU yet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpucast.domain.errors import InvalidSpecError

MECHANISMS: tuple[str, ...] = ("mig", "mps", "streams", "time-slicing")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobDemand:
    """What one job asks of the device when alone (see the module docstring)."""

    name: str
    compute_fraction: float
    sm_utilisation: float = 1.0
    bandwidth_utilisation: float = 0.0
    duty: float = 1.0
    #: MPS active thread percentage (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), 100: no limit
    thread_percentage: float = 100.0

    def __post_init__(self) -> None:
        for attr in ("compute_fraction", "sm_utilisation", "bandwidth_utilisation", "duty"):
            value = getattr(self, attr)
            if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1):
                raise InvalidSpecError(
                    f"{self.name} {attr}", "must be in [0, 1]", got=value,
                    fix="give shares of the job alone on the device",
                )  # fmt: skip
        p = self.thread_percentage
        if not (isinstance(p, int | float) and math.isfinite(p) and 0 < p <= 100):
            raise InvalidSpecError(
                f"{self.name} thread percentage", "must be in (0, 100]", got=p,
                fix="e.g. 50 (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)",
            )  # fmt: skip


def demand_from_roofline(
    name: str, *, compute_s: float, memory_s: float, other_s: float = 0.0, duty: float = 1.0
) -> JobDemand:
    """A job's demand from its roofline terms alone on the device: ``compute_s`` at the SMs'
    peak, ``memory_s`` at peak bandwidth, ``other_s`` neither (launch gaps, host sync); the
    terms add up to its step. Its SM and bandwidth utilisation are their shares of it."""
    for what, value in (("compute_s", compute_s), ("memory_s", memory_s), ("other_s", other_s)):
        if not (math.isfinite(value) and value >= 0):
            raise InvalidSpecError(f"{name} {what}", "must be >= 0 seconds", got=value)
    total = compute_s + memory_s + other_s
    if total <= 0:
        raise InvalidSpecError(f"{name} step", "must take some time", got=total)
    device = compute_s + memory_s
    return JobDemand(
        name=name,
        compute_fraction=compute_s / device if device > 0 else 0.0,
        sm_utilisation=compute_s / total,
        bandwidth_utilisation=memory_s / total,
        duty=duty,
    )


def fair_shares(demands: Sequence[float]) -> tuple[float, ...]:
    """Max-min fair shares of one device among ``demands`` (fractions of it, each in [0, 1]):
    every demand below an equal share of what is left is met in full, the rest split it."""
    order = sorted(range(len(demands)), key=lambda k: demands[k])
    out = [0.0] * len(demands)
    left = 1.0
    for rank, k in enumerate(order):
        equal = left / (len(demands) - rank)
        out[k] = min(demands[k], equal)
        left -= out[k]
    return tuple(out)


def colocated_slowdowns(jobs: Sequence[JobDemand], mechanism: str) -> tuple[float, ...]:
    """Each job's run time together over its run time alone (>= 1) under ``mechanism``."""
    if mechanism not in MECHANISMS:
        raise InvalidSpecError(
            "sharing mechanism", f"must be one of {', '.join(MECHANISMS)}", got=mechanism
        )
    if not jobs:
        raise InvalidSpecError("jobs", "none given", fix="give two or more co-located jobs")
    if mechanism == "mig":
        return tuple(1.0 for _ in jobs)
    if mechanism == "time-slicing":
        share = fair_shares([j.duty for j in jobs])
        return tuple(
            max(1.0, j.duty / s) if s > 0 else 1.0 for j, s in zip(jobs, share, strict=True)
        )
    limited = mechanism == "mps"
    caps = [j.thread_percentage / 100.0 if limited else 1.0 for j in jobs]
    sm = [min(j.sm_utilisation, c) for j, c in zip(jobs, caps, strict=True)]
    s_total = sum(j.duty * u for j, u in zip(jobs, sm, strict=True))
    b_total = sum(j.duty * j.bandwidth_utilisation for j in jobs)
    out = []
    for j, cap in zip(jobs, caps, strict=True):
        own = max(1.0, j.sm_utilisation / cap)  # its MPS limit alone
        compute = j.compute_fraction * own * max(1.0, s_total)
        memory = (1.0 - j.compute_fraction) * max(1.0, b_total)
        out.append(max(1.0, compute + memory))
    return tuple(out)

"""`plan serverless`: serverless vs always-on GPU deployments for the same load (issue #19).

Pure: per-minute invocation counts and per-function figures in, a :class:`ServerlessPlan` out.

Candidates, each priced over the load's horizon at one GPU price:

* **serverless**, one per keep-alive policy (:func:`gpucast.simulate.serverless.
  simulate_keep_alive`): cold starts, latency with the cold starts, and what is billed --
  ``billing="instance"`` (the GPU is billed while an instance is loaded: its busy and
  warm-but-idle minutes, and its cold starts; GPU serverless platforms bill a container's
  keep-alive window) or ``billing="execution"`` (execution plus cold-start seconds only, a
  per-request bill);
* **always-on, all models resident**: enough GPUs for the peak minute's GPU-seconds at
  ``max_utilisation`` and for every function's memory (perfectly packed: a lower bound);
  latency is the execution time (queueing below ``max_utilisation`` not modelled);
* **always-on pool with swapping** (Torpor-style, :func:`gpucast.simulate.serverless.
  simulate_gpu_pool`), when the models do not all fit in the compute-sized pool: the pool
  from the compute-bound size doubling up to the resident size, each simulated (every model
  in host memory from the start, so a miss -- a first call too -- is a swap over PCIe).

The choice is the cheapest candidate whose latency at the SLO percentile is within the SLO
(invocation-weighted, as the simulators report it); the reason names it, its cost and latency,
and the cheaper candidates that miss the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serverless import KeepAlivePolicy
from gpucast.domain.units import format_ms_against
from gpucast.simulate.serverless import (
    BILLINGS,
    latency_summary,
    simulate_gpu_pool,
    simulate_keep_alive,
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeploymentOption:
    """One candidate: ``kind`` is ``serverless``, ``always-on`` or ``pool``."""

    kind: str
    name: str
    gpus: int | None
    cold_starts: int
    swaps: int
    p50_s: float
    slo_latency_s: float
    gpu_hours: float
    cost_usd: float
    meets_slo: bool
    detail: str

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "name": self.name,
            "gpus": self.gpus,
            "cold_starts": self.cold_starts,
            "swaps": self.swaps,
            "p50_s": self.p50_s,
            "slo_latency_s": self.slo_latency_s,
            "gpu_hours": self.gpu_hours,
            "cost_usd": self.cost_usd,
            "meets_slo": self.meets_slo,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerlessPlan:
    """Every candidate (cheapest first), the choice (None: none meets the SLO) and why."""

    options: tuple[DeploymentOption, ...]
    choice: DeploymentOption | None
    reason: str
    slo_percentile: float
    slo_s: float
    horizon_s: float
    invocations: int
    peak_gpus: int
    memory_gpus: int
    billing: str

    def to_dict(self) -> dict[str, object]:
        return {
            "slo_percentile": self.slo_percentile,
            "slo_s": self.slo_s,
            "horizon_s": self.horizon_s,
            "invocations": self.invocations,
            "peak_gpus": self.peak_gpus,
            "memory_gpus": self.memory_gpus,
            "billing": self.billing,
            "choice": None if self.choice is None else self.choice.to_dict(),
            "reason": self.reason,
            "options": [o.to_dict() for o in self.options],
        }


def _duration(seconds: float) -> str:
    """``600`` -> ``10m``, ``3600`` -> ``1h``, ``90`` -> ``90s``."""
    for unit, size in (("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _latency(
    run: FloatArray,
    cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    q: float,
    spread: FloatArray | None,
) -> tuple[float, float]:
    """Invocation-weighted p50 and ``q``-th percentile of latency (:func:`latency_summary`)."""
    out = latency_summary(run, cases, spread=spread, qs=(50.0, q))
    return out["p50"], out[f"p{q:g}"]


def plan_serverless(
    counts: npt.ArrayLike,
    *,
    exec_s: npt.ArrayLike,
    cold_s: npt.ArrayLike,
    memory_gib: npt.ArrayLike,
    swap_s: npt.ArrayLike,
    gpu_memory_gib: float,
    price_usd_per_hour: float,
    policies: Sequence[KeepAlivePolicy],
    slo_percentile: float,
    slo_s: float,
    billing: str = "instance",
    max_utilisation: float = 0.7,
    gpu_name: str = "GPU",
    exec_spread: FloatArray | None = None,
) -> ServerlessPlan:
    """The candidates for ``counts`` (module docstring), cheapest first, and the choice."""
    if billing not in BILLINGS:
        raise InvalidSpecError("billing", f"must be one of {', '.join(BILLINGS)}", got=billing)
    if not (math.isfinite(max_utilisation) and 0 < max_utilisation <= 1):
        raise InvalidSpecError("max-utilisation", "must be in (0, 1]", got=max_utilisation)
    if not (math.isfinite(slo_s) and slo_s > 0) or not 0 < slo_percentile <= 100:
        raise InvalidSpecError("slo", "needs a percentile in (0, 100] and a latency > 0")
    if not (math.isfinite(price_usd_per_hour) and price_usd_per_hour > 0):
        raise InvalidSpecError("price", "must be > 0", got=price_usd_per_hour)
    if not policies:
        raise InvalidSpecError("policies", "needs at least one keep-alive policy")
    table = np.asarray(counts)
    if table.ndim != 2:
        raise InvalidSpecError("counts", "must be a (functions, minutes) table")
    n_f, n_t = table.shape
    run = np.broadcast_to(np.asarray(exec_s, dtype=np.float64), (n_f,))
    cold = np.broadcast_to(np.asarray(cold_s, dtype=np.float64), (n_f,))
    mem = np.broadcast_to(np.asarray(memory_gib, dtype=np.float64), (n_f,))
    bin_s = policies[0].bin_s
    horizon_h = n_t * bin_s / 3600.0
    invocations = table.sum(axis=1).astype(np.float64)

    def ok(latency_s: float) -> bool:
        return latency_s <= slo_s + 1e-12

    options: list[DeploymentOption] = []

    for policy in policies:
        r = simulate_keep_alive(
            table, policy=policy, exec_s=run, cold_s=cold, memory_gib=mem, exec_spread=exec_spread
        )
        warm = r.invocations - r.cold_starts
        p50, pq = _latency(run, ((0.0, warm), (cold, r.cold_starts)), slo_percentile, exec_spread)
        hours = r.bill_s(billing) / 3600.0
        options.append(
            DeploymentOption(
                kind="serverless",
                name=f"serverless {policy.kind}"
                + (f":{_duration(policy.keep_alive_s)}" if policy.kind == "fixed" else ""),
                gpus=None,
                cold_starts=int(r.cold_starts.sum()),
                swaps=0,
                p50_s=p50,
                slo_latency_s=pq,
                gpu_hours=hours,
                cost_usd=hours * price_usd_per_hour,
                meets_slo=ok(pq),
                detail=f"{policy.describe()}; {r.cold_start_rate:.3%} of invocations cold; "
                f"billed per GPU-second ({billing})",
            )
        )

    demand_s = run @ table  # GPU-seconds per minute
    peak = int(max(1, math.ceil(float(demand_s.max(initial=0.0)) / (bin_s * max_utilisation))))
    memory_gpus = int(max(1, math.ceil(float(mem.sum()) / gpu_memory_gib - 1e-9)))
    resident = max(peak, memory_gpus)
    p50, pq = _latency(run, ((0.0, invocations),), slo_percentile, exec_spread)
    options.append(
        DeploymentOption(
            kind="always-on",
            name=f"always-on {resident} x {gpu_name}",
            gpus=resident,
            cold_starts=0,
            swaps=0,
            p50_s=p50,
            slo_latency_s=pq,
            gpu_hours=resident * horizon_h,
            cost_usd=resident * horizon_h * price_usd_per_hour,
            meets_slo=ok(pq),
            detail=f"every model resident: {memory_gpus} GPU(s) of memory, {peak} for the peak "
            f"minute at {max_utilisation:.0%} utilisation",
        )
    )
    size = peak
    while size < memory_gpus:
        pool = simulate_gpu_pool(
            table,
            gpus=size,
            capacity_gib=size * gpu_memory_gib,
            memory_gib=mem,
            swap_s=swap_s,
            cold_s=cold,
            exec_s=run,
            bin_s=bin_s,
            exec_spread=exec_spread,
        )
        swap = np.broadcast_to(np.asarray(swap_s, dtype=np.float64), (n_f,))
        # always on: every model is in host memory before the traffic, so a function's first
        # call is a swap too, not a load from storage
        swaps = pool.swaps + pool.cold_starts
        p50, pq = _latency(
            run, ((0.0, pool.invocations - swaps), (swap, swaps)), slo_percentile, exec_spread
        )
        meets = ok(pq) and pool.latency_modelled  # sized for the peak: never overloaded
        options.append(
            DeploymentOption(
                kind="pool",
                name=f"always-on pool {size} x {gpu_name} (swapping)",
                gpus=size,
                cold_starts=0,
                swaps=int(swaps.sum()),
                p50_s=p50,
                slo_latency_s=pq,
                gpu_hours=pool.gpu_hours,
                cost_usd=pool.gpu_hours * price_usd_per_hour,
                meets_slo=meets,
                detail="every model in host memory, GPU memory an LRU cache of them, a miss "
                f"swapped in over PCIe (Torpor-style); {int(swaps.sum()):,} swaps",
            )
        )
        if meets:
            break
        size *= 2

    ordered = tuple(sorted(options, key=lambda o: (o.cost_usd, o.slo_latency_s)))
    feasible = [o for o in ordered if o.meets_slo]
    choice = feasible[0] if feasible else None
    slo_text = f"p{slo_percentile:g} <= {slo_s * 1e3:g} ms"
    if choice is None:
        best = min(ordered, key=lambda o: o.slo_latency_s)
        reason = (
            f"no candidate meets {slo_text}: the lowest is {best.name} at "
            f"{format_ms_against(best.slo_latency_s, slo_s)} ms (US$ {best.cost_usd:,.2f}); "
            "loosen the SLO or cut the cold start (faster storage, smaller models)"
        )
    else:
        cheaper = [o for o in ordered if o.cost_usd < choice.cost_usd]
        missed = "; ".join(
            f"{o.name} US$ {o.cost_usd:,.2f} misses it "
            f"({format_ms_against(o.slo_latency_s, slo_s)} ms)"
            for o in cheaper
        )
        other_kind = [
            o for o in feasible if (o.kind == "serverless") != (choice.kind == "serverless")
        ]
        versus = (
            f"; the cheapest {'always-on' if choice.kind == 'serverless' else 'serverless'} "
            f"deployment meeting it, {other_kind[0].name}, costs US$ {other_kind[0].cost_usd:,.2f}"
            if other_kind
            else ""
        )
        reason = (
            f"{choice.name}: US$ {choice.cost_usd:,.2f} over {horizon_h:g} h, "
            f"p{slo_percentile:g} {format_ms_against(choice.slo_latency_s, slo_s)} ms within "
            f"{slo_text}" + versus + (f"; cheaper but too slow: {missed}" if missed else "")
        )
    return ServerlessPlan(
        options=ordered,
        choice=choice,
        reason=reason,
        slo_percentile=slo_percentile,
        slo_s=slo_s,
        horizon_s=n_t * bin_s,
        invocations=int(invocations.sum()),
        peak_gpus=peak,
        memory_gpus=memory_gpus,
        billing=billing,
    )

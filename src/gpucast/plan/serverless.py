"""`plan serverless`: serverless vs always-on GPU deployments for the same load (issue #19).

Pure: per-minute invocation counts and per-function figures in, a :class:`ServerlessPlan` out.
An instance of a function holds ``instance_gpus`` GPUs (a language model split over several):
its GPU-seconds, GPU-hours and cost count all of them, in every candidate.

Candidates, each priced over the load's horizon at one GPU price:

* **serverless**, one per keep-alive policy (:func:`gpucast.simulate.serverless.
  simulate_keep_alive`): cold starts, latency with the cold starts, and what is billed --
  ``billing="instance"`` (the GPU is billed while an instance is loaded: its busy and
  warm-but-idle minutes, and its cold starts; GPU serverless platforms bill a container's
  keep-alive window) or ``billing="execution"`` (execution plus cold-start seconds only, a
  per-request bill);
* **always-on, all models resident**: enough GPUs for the peak minute's GPU-seconds at
  ``max_utilisation`` and for every function's memory (perfectly packed: a lower bound; an
  instance of several GPUs, ``instance_gpus``, takes all of them); latency is the execution
  time (queueing below ``max_utilisation`` not modelled) -- or, given ``always_on`` (an
  :class:`AlwaysOnSizing`: a deployment sized elsewhere, e.g. a language model's continuous
  batching sized as ``plan serve`` sizes it), those GPUs and latencies, and no pool;
* **always-on pool with swapping** (Torpor-style, :func:`gpucast.simulate.serverless.
  simulate_gpu_pool`), when the models do not all fit in the compute-sized pool: the pool
  from the compute-bound size doubling up to the resident size, each simulated (every model
  in host memory from the start, so a miss -- a first call too -- is a swap over PCIe).

The choice is the cheapest candidate that meets the SLO, judged on one of two scopes
(``slo_scope``):

* ``invocations`` (the default, and the meaning the README and ``simulate serverless`` give
  the p50/p99: one percentile over every call of every function): the latency at the SLO
  percentile over all calls is within the SLO. Busy functions make almost all the calls, so a
  rarely called function's cold starts hardly reach the p99 and the keep-alive policy hardly
  moves it; it stays the default because it is the platform-wide figure users already read
  (and a changed default would change their plans silently);
* ``functions``: each invoked function's own latency at the SLO percentile, over its own calls
  (:func:`gpucast.simulate.serverless.function_percentiles`), is within the SLO for at least
  ``slo_function_share`` of the invoked functions -- the cold-start tail that the keep-alive
  policy decides.

A warm-up (``warmup_s``) is simulated and not counted (:mod:`gpucast.simulate.serverless`):
every candidate -- cold starts, swaps, latency, shares of functions, GPU-hours -- and the
always-on sizing count only the minutes after it, and the always-on GPUs are priced over them.

Whatever the scope, every candidate reports the share of invoked functions meeting the SLO on
their own calls and the share whose own p99 exceeds the SLO latency. The reason names the
choice, its cost and latency (or share of functions), and the cheaper candidates that miss.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.serverless import KeepAlivePolicy
from gpucast.domain.units import (
    count_of,
    format_cents,
    format_duration,
    format_ms_against,
    format_pct_against,
    format_slo_latency,
    percent_text,
)
from gpucast.simulate.serverless import (
    BILLINGS,
    function_percentiles,
    latency_summary,
    rejected_after,
    simulate_gpu_pool,
    simulate_keep_alive,
    warmup_bins,
    with_rejected,
)

FloatArray = npt.NDArray[np.float64]
#: what an SLO is judged on (module docstring); the first is the default
SLO_SCOPES: tuple[str, ...] = ("invocations", "functions")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeploymentOption:
    """One candidate: ``kind`` is ``serverless``, ``always-on`` or ``pool``.

    ``slo_latency_s``: latency at the SLO percentile over all calls (invocation-weighted);
    ``function_share_meeting_slo``: share of the invoked functions whose own latency at the SLO
    percentile, over their own calls, is within the SLO; ``function_share_p99_over_slo``: share
    whose own p99 exceeds the SLO latency (the cold-start tail; NaN without invoked functions).
    ``meets_slo`` is judged on the plan's ``slo_scope``."""

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
    function_share_meeting_slo: float = math.nan
    function_share_p99_over_slo: float = math.nan
    #: its cost is within the plan's ``budget_usd`` (True without one)
    within_budget: bool = True

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
            "function_share_meeting_slo": self.function_share_meeting_slo,
            "function_share_p99_over_slo": self.function_share_p99_over_slo,
            "meets_slo": self.meets_slo,
            "within_budget": self.within_budget,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AlwaysOnSizing:
    """An always-on deployment sized outside this planner: ``gpus`` in all, each function's
    request latencies at K equally likely points (``latency_s``, ``(functions, K)``, the
    :func:`gpucast.simulate.serverless.service_quantiles` of its requests' latencies; inf: a
    request that did not finish) and their means (``mean_s``), ``how`` (the sizing, one
    line: the candidate's detail) and ``sizing`` (a short name of it, e.g. ``plan serve``)."""

    gpus: int
    latency_s: FloatArray
    mean_s: FloatArray
    how: str
    sizing: str

    def __post_init__(self) -> None:
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 1:
            raise InvalidSpecError("always-on gpus", "must be an integer >= 1", got=self.gpus)
        if self.latency_s.ndim != 2 or self.latency_s.shape[0] != self.mean_s.size:
            raise InvalidSpecError("always-on latency_s", "must be (functions, K)")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerlessPlan:
    """Every candidate (cheapest first), the choice (None: none meets the SLO) and why.

    ``function_share_too_few_calls``: share of the invoked functions called so rarely (``n``
    calls after the warm-up, ``n x (1 - q/100) < 1``) that one cold start is their own
    latency at the SLO percentile. Without a warm-up (``warmup_s`` 0) a serverless function's
    first call is one under every keep-alive policy, so the functions scope can never count
    them as met for a serverless candidate; after one, the policy decides whether they get
    one. ``horizon_s``: the whole trace; the candidates count ``horizon_s - warmup_s``."""

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
    slo_scope: str = "invocations"
    slo_function_share: float = 0.95
    functions_invoked: int = 0
    function_share_too_few_calls: float = math.nan
    warmup_s: float = 0.0
    #: how the always-on candidate was sized: ``peak minute`` (its GPU-seconds and the
    #: models' memory), the :attr:`AlwaysOnSizing.sizing` given, or ``none`` (no candidate)
    always_on_sizing: str = "peak minute"
    #: the most a candidate may cost over the counted minutes, US$ (None: no cap)
    budget_usd: float | None = None
    #: calls every candidate refuses at arrival, counted after the warm-up (not invocations;
    #: infinitely late in every candidate's percentiles and shares)
    rejected: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "always_on_sizing": self.always_on_sizing,
            "slo_percentile": self.slo_percentile,
            "slo_s": self.slo_s,
            "slo_scope": self.slo_scope,
            "slo_function_share": self.slo_function_share,
            "functions_invoked": self.functions_invoked,
            "function_share_too_few_calls": self.function_share_too_few_calls,
            "horizon_s": self.horizon_s,
            "warmup_s": self.warmup_s,
            "measured_s": self.horizon_s - self.warmup_s,
            "invocations": self.invocations,
            "peak_gpus": self.peak_gpus,
            "memory_gpus": self.memory_gpus,
            "billing": self.billing,
            "budget_usd": self.budget_usd,
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


def _us(usd: float) -> str:
    """``US$ 0.45``, ``US$ 1,234.50``; two significant digits under a cent (``US$ 0.0001``,
    not ``US$ 0.00``: QA 41 QF F10), as :func:`~gpucast.domain.units.format_cents`."""
    return f"US$ {format_cents(usd).removeprefix('$')}"


def _latency(
    run: FloatArray,
    cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    q: float,
    spread: FloatArray | None,
) -> tuple[float, float]:
    """Invocation-weighted p50 and ``q``-th percentile of latency (:func:`latency_summary`)."""
    out = latency_summary(run, cases, spread=spread, qs=(50.0, q))
    return out["p50"], out[f"p{q:g}"]


def _function_shares(
    run: FloatArray,
    cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    q: float,
    slo_s: float,
    spread: FloatArray | None,
) -> tuple[float, float]:
    """Of the functions with calls: the share whose own ``q``-th percentile is within
    ``slo_s``, and the share whose own p99 exceeds it (NaN, NaN without calls)."""
    own_q, own_p99 = function_percentiles(run, cases, spread=spread, qs=(q, 99.0))
    called = ~np.isnan(own_q)
    if not called.any():
        return math.nan, math.nan
    limit = slo_s + 1e-12
    return float(np.mean(own_q[called] <= limit)), float(np.mean(own_p99[called] > limit))


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
    slo_scope: str = "invocations",
    slo_function_share: float = 0.95,
    warmup_s: float = 0.0,
    unit: str = "function",
    instance_gpus: npt.ArrayLike = 1,
    always_on: AlwaysOnSizing | None = None,
    always_on_by_peak: bool = True,
    budget_usd: float | None = None,
    rejected: npt.ArrayLike | None = None,
) -> ServerlessPlan:
    """The candidates for ``counts`` (module docstring), cheapest first, and the choice.

    ``slo_scope``: ``invocations`` (the SLO percentile over all calls) or ``functions`` (at
    least ``slo_function_share`` of the invoked functions meet it on their own calls);
    ``warmup_s``: the first minutes simulated, not counted (module docstring); ``unit``: what
    a row of ``counts`` is (``function`` or ``app``), as the reason names it;
    ``instance_gpus``: the GPUs of each function's instance; ``gpu_memory_gib``: what one GPU
    holds (the app gives the usable memory of the one rule,
    :func:`gpucast.domain.gpu_memory.usable_gib`); ``always_on``: the always-on
    candidate sized elsewhere (module docstring); without it, ``always_on_by_peak`` False
    leaves the always-on and pool candidates out (they could not be sized: the caller says
    why); ``budget_usd``: the most the choice may cost over the counted minutes (a candidate
    above it is marked ``within_budget`` False; candidates meeting the SLO, none within it:
    :class:`~gpucast.domain.errors.NoFeasiblePlanError` naming the cheapest of them);
    ``rejected``: ``(functions, minutes)`` calls every deployment refuses at arrival (an LLM
    request beyond the context window): no invocation, infinitely late in every candidate's
    latency (:func:`gpucast.simulate.serverless.with_rejected`)."""
    if billing not in BILLINGS:
        raise InvalidSpecError("billing", f"must be one of {', '.join(BILLINGS)}", got=billing)
    if slo_scope not in SLO_SCOPES:
        raise InvalidSpecError(
            "slo-scope", f"must be one of {', '.join(SLO_SCOPES)}", got=slo_scope
        )
    if not (math.isfinite(slo_function_share) and 0 < slo_function_share <= 1):
        raise InvalidSpecError(
            "slo-functions",
            "must be a share of functions in (0, 1]",
            got=slo_function_share,
            fix="e.g. --slo-functions 0.95",
        )
    if not (math.isfinite(max_utilisation) and 0 < max_utilisation <= 1):
        raise InvalidSpecError("max-utilisation", "must be in (0, 1]", got=max_utilisation)
    if not (math.isfinite(slo_s) and slo_s > 0) or not 0 < slo_percentile <= 100:
        raise InvalidSpecError("slo", "needs a percentile in (0, 100] and a latency > 0")
    if not (math.isfinite(price_usd_per_hour) and price_usd_per_hour > 0):
        raise InvalidSpecError("price", "must be > 0", got=price_usd_per_hour)
    if not policies:
        raise InvalidSpecError("policies", "needs at least one keep-alive policy")
    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd > 0):
        raise InvalidSpecError("budget-usd", "must be > 0 US$", got=budget_usd)
    table = np.asarray(counts)
    if table.ndim != 2:
        raise InvalidSpecError("counts", "must be a (functions, minutes) table")
    n_f, n_t = table.shape
    run = np.broadcast_to(np.asarray(exec_s, dtype=np.float64), (n_f,))
    cold = np.broadcast_to(np.asarray(cold_s, dtype=np.float64), (n_f,))
    mem = np.broadcast_to(np.asarray(memory_gib, dtype=np.float64), (n_f,))
    gpus = np.broadcast_to(np.asarray(instance_gpus, dtype=np.float64), (n_f,))
    if always_on is not None and always_on.mean_s.size != n_f:
        raise InvalidSpecError("always_on", f"must give all {n_f} functions' latencies")
    bin_s = policies[0].bin_s
    n_warm = warmup_bins(warmup_s, bin_s, n_t)
    horizon_h = (n_t - n_warm) * bin_s / 3600.0  # what is counted and priced
    measured = table[:, n_warm:]
    invocations = measured.sum(axis=1).astype(np.float64)
    refused = rejected_after(rejected, table.shape, n_warm)

    def ok(latency_s: float, share: float) -> bool:
        if slo_scope == "functions":
            return share >= slo_function_share - 1e-12  # NaN (no calls): not met
        return latency_s <= slo_s + 1e-12

    def judged(
        cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
        service: tuple[FloatArray, FloatArray | None] = (run, exec_spread),
    ) -> tuple[float, float, float, float, bool]:
        """p50, latency at the SLO percentile, the two shares of functions, and the verdict
        (``service``: the mean service time per function and its spread)."""
        mean, spread = service
        cases = with_rejected(cases, refused)
        p50, pq = _latency(mean, cases, slo_percentile, spread)
        met, over = _function_shares(mean, cases, slo_percentile, slo_s, spread)
        return p50, pq, met, over, ok(pq, met)

    options: list[DeploymentOption] = []

    for policy in policies:
        r = simulate_keep_alive(
            table, policy=policy, exec_s=run, cold_s=cold, memory_gib=mem,
            exec_spread=exec_spread, warmup_s=warmup_s, instance_gpus=gpus,
        )  # fmt: skip
        warm = r.invocations - r.cold_starts
        p50, pq, met, over, meets = judged(((0.0, warm), (cold, r.cold_starts)))
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
                meets_slo=meets,
                function_share_meeting_slo=met,
                function_share_p99_over_slo=over,
                detail=f"{policy.describe()}; {percent_text(r.cold_start_rate)} of invocations "
                f"cold; billed per GPU-second ({billing})",
            )
        )

    demand_s = (run * gpus) @ measured  # GPU-seconds per minute after the warm-up
    peak = int(max(1, math.ceil(float(demand_s.max(initial=0.0)) / (bin_s * max_utilisation))))
    # an instance of several GPUs takes all of them; one-GPU models pack together
    alone = gpus > 1
    memory_gpus = int(
        max(1, gpus[alone].sum() + math.ceil(float(mem[~alone].sum()) / gpu_memory_gib - 1e-9))
    )
    by_peak = always_on is None and always_on_by_peak
    if by_peak:
        resident = max(peak, memory_gpus)
        p50, pq, met, over, meets = judged(((0.0, invocations),))
        detail = (
            f"every model resident: {count_of(memory_gpus, 'GPU')} of memory, {peak} for the peak "
            f"minute at {max_utilisation:.0%} utilisation"
        )
    elif always_on is not None:
        resident = peak = always_on.gpus
        p50, pq, met, over, meets = judged(
            ((0.0, invocations),), (always_on.mean_s, always_on.latency_s)
        )
        detail = always_on.how
    if by_peak or always_on is not None:
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
                meets_slo=meets,
                function_share_meeting_slo=met,
                function_share_p99_over_slo=over,
                detail=detail,
            )
        )
    # a pool must hold the largest instance; a deployment sized elsewhere holds every model
    size = max(peak, int(gpus.max(initial=1.0)))
    while by_peak and size < memory_gpus:
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
            warmup_s=warmup_s,
            instance_gpus=gpus,
        )
        swap = np.broadcast_to(np.asarray(swap_s, dtype=np.float64), (n_f,))
        # always on: every model is in host memory before the traffic, so a function's first
        # call is a swap too, not a load from storage
        swaps = pool.swaps + pool.cold_starts
        p50, pq, met, over, meets = judged(((0.0, pool.invocations - swaps), (swap, swaps)))
        meets = meets and pool.latency_modelled  # sized for the peak: never overloaded
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
                function_share_meeting_slo=met,
                function_share_p99_over_slo=over,
                detail="every model in host memory, GPU memory an LRU cache of them, a miss "
                f"swapped in over PCIe (Torpor-style); {int(swaps.sum()):,} swaps",
            )
        )
        if meets:
            break
        size *= 2

    by_functions = slo_scope == "functions"
    called = invocations > 0
    # one cold call of n reaches the q-th percentile when the n - 1 warm ones fall short of
    # q% of n (the 1e-9: 100 calls x 1% is one call, not a hair more)
    few = invocations * (1.0 - slo_percentile / 100.0) < 1.0 - 1e-9

    def share(o: DeploymentOption) -> float:
        """Share of functions meeting the SLO, NaN (no calls) as none."""
        met = o.function_share_meeting_slo
        return 0.0 if math.isnan(met) else met

    def standing(o: DeploymentOption) -> str:
        """How close ``o`` is to the SLO, in the scope's terms."""
        if by_functions:
            return (
                f"{format_pct_against(o.function_share_meeting_slo, slo_function_share)}% of "
                f"{unit}s"
            )
        return f"{format_ms_against(o.slo_latency_s, slo_s)} ms"

    if budget_usd is not None:
        options = [
            dataclasses.replace(o, within_budget=o.cost_usd <= budget_usd + 1e-9) for o in options
        ]
    if by_functions:
        ordered = tuple(sorted(options, key=lambda o: (o.cost_usd, -share(o), o.slo_latency_s)))
    else:
        ordered = tuple(sorted(options, key=lambda o: (o.cost_usd, o.slo_latency_s)))
    feasible = [o for o in ordered if o.meets_slo and o.within_budget]
    choice = feasible[0] if feasible else None
    base = f"p{slo_percentile:g} <= {format_slo_latency(slo_s)}"
    need = f"{slo_function_share * 100:g}%"
    slo_text = f"{base} for >= {need} of {unit}s, each on its own calls" if by_functions else base
    dearer = [o for o in ordered if o.meets_slo and not o.within_budget]
    if choice is None and dearer and budget_usd is not None:  # dearer: over a given budget
        raise NoFeasiblePlanError(
            f"budget-usd: no candidate meeting {slo_text} costs at most {_us(budget_usd)} "
            f"over {format_duration(horizon_h * 3600)}; the cheapest meeting it, {dearer[0].name}, "
            f"costs {_us(dearer[0].cost_usd)}",
            fix=f"raise --budget-usd to >= {math.ceil(dearer[0].cost_usd * 100) / 100:.2f}",
        )
    if choice is None:
        if by_functions:
            best = max(ordered, key=share)
            closest = f"the most is {best.name} with {standing(best)}"
        else:
            best = min(ordered, key=lambda o: o.slo_latency_s)
            closest = f"the lowest is {best.name} at {standing(best)}"
        # the closest pays no cold start or swap: the execution itself misses the SLO
        fix = (
            "loosen the SLO or cut the execution (a faster --gpu, smaller models): it misses "
            "without a cold start"
            if best.cold_starts == 0 and best.swaps == 0
            else "loosen the SLO or cut the cold start (faster storage, smaller models)"
        )
        reason = f"no candidate meets {slo_text}: {closest} (US$ {best.cost_usd:,.2f}); {fix}"

    else:
        cheaper = [o for o in ordered if o.cost_usd < choice.cost_usd]
        missed = "; ".join(
            f"{o.name} US$ {o.cost_usd:,.2f} misses it ({standing(o)})" for o in cheaper
        )
        other_kind = [
            o
            for o in ordered
            if o.meets_slo and (o.kind == "serverless") != (choice.kind == "serverless")
        ]
        versus = (
            f"; the cheapest {'always-on' if choice.kind == 'serverless' else 'serverless'} "
            f"deployment meeting it, {other_kind[0].name}, costs US$ {other_kind[0].cost_usd:,.2f}"
            + ("" if other_kind[0].within_budget else " (over budget)")
            if other_kind
            else ""
        )
        verdict = (
            f"{standing(choice)} meet {base} on their own calls (>= {need} needed)"
            if by_functions
            else f"p{slo_percentile:g} {standing(choice)} within {slo_text}"
        )
        reason = (
            f"{choice.name}: US$ {choice.cost_usd:,.2f} over {format_duration(horizon_h * 3600)}"
            + ("" if budget_usd is None else f" (budget US$ {budget_usd:,.2f})")
            + f", {verdict}"
            + versus
            + (f"; cheaper but too slow: {missed}" if missed else "")
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
        slo_scope=slo_scope,
        slo_function_share=slo_function_share,
        functions_invoked=int(called.sum()),
        function_share_too_few_calls=float(np.mean(few[called])) if called.any() else math.nan,
        warmup_s=n_warm * bin_s,
        always_on_sizing=(
            always_on.sizing if always_on is not None else "peak minute" if by_peak else "none"
        ),
        budget_usd=budget_usd,
        rejected=int(refused.sum()),
    )

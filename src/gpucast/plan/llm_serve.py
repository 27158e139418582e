"""Plan LLM serving: the cheapest GPU type x tensor-parallel degree x replicas (x prefill/
decode disaggregation) whose simulated traffic meets a TTFT and a TPOT SLO.

For every GPU choice (a catalog GPU with its cheapest offer: price per GPU, GPUs per node,
network) and every tensor-parallel degree that splits the model within one node and holds
it, the token-level simulator (:mod:`gpucast.simulate.llm_serving`) replays the requests on
``r`` replicas, ``r`` found by growing from 1.5x a work-based lower bound and then bisecting: the
fewest replicas whose ``percentile`` TTFT and TPOT are within the SLOs (dropped and
unfinished requests count as misses). Disaggregated pools (``p`` prefill + ``d`` decode
instances, Splitwise) are tried for the cheapest colocated choices, with ``p`` set by the
share of the work that is prefill. Every simulated configuration is a row; the front is the
Pareto set of cost vs the TTFT and TPOT percentiles, the pick the cheapest row that meets
both SLOs (and the budget). Each row says what bounds it.

Pure: numbers in, numbers out. The GPU x degree searches are independent (a large run's
pruning reads only the searches before it), so an ``executor`` (the caller's process pool)
runs them side by side; the plan is the same with one worker or many.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpucast.domain.catalog import GpuSpec, Offer
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile
from gpucast.domain.llm_serving import (
    Disaggregation,
    IterationCost,
    LlmRequests,
    SchedulerConfig,
)
from gpucast.domain.parallel import SWITCHED, NodeLinks
from gpucast.domain.units import count_of, format_latency
from gpucast.plan.pareto import nondominated, tie_note
from gpucast.predict.llm_infer import (
    TP_CHOICES,
    check_tp,
    iteration_cost,
    lighter_weights_fix,
    split_problem,
    tp_fix,
)
from gpucast.simulate.llm_load import work_s
from gpucast.simulate.llm_serving import (
    KvLinkLoad,
    LlmServingResult,
    replica_share,
    simulate_llm_serving,
    tail_percentiles,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuChoice:
    """An instance type to rent GPUs of: its price per GPU-hour, its GPUs (the largest
    tensor-parallel degree it serves), the link a KV cache crosses between instances, PCIe
    for swap. Several per GPU type: a degree ``tp`` rents the cheapest with ``>= tp``."""

    gpu: GpuSpec
    offer: Offer | None
    price_usd_per_gpu_hour: float
    max_tp: int
    kv_link_gbps: float
    swap_gbps: float
    #: how the instance joins its GPUs (a mesh: a smaller TP group, fewer links; bridged
    #: pairs: beyond a pair, PCIe)
    node: NodeLinks = SWITCHED


def cheapest_for_tp(choices: Sequence[GpuChoice], tp: int) -> GpuChoice | None:
    """The instance ``tp`` GPUs of one type are rented on, and what they cost: the cheapest
    per GPU of ``choices`` with at least ``tp`` GPUs (None: no instance has that many). A
    deployment pays ``tp`` x its price per GPU per instance; ``plan serve`` and ``simulate
    serve`` both price by this rule."""
    fit = [c for c in choices if c.max_tp >= tp]
    return min(fit, key=lambda c: c.price_usd_per_gpu_hour) if fit else None


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmServeCandidate:
    """One simulated deployment."""

    gpu: str
    provider: str
    instance_type: str
    tp: int
    mode: str  # "colocated" or "disaggregated"
    replicas: int  # colocated instances (0 when disaggregated)
    prefill_instances: int
    decode_instances: int
    #: of its instances, those simulated (:data:`SAMPLED_REQUESTS`; all for a small run)
    simulated_instances: int
    gpus: int
    cost_usd_per_hour: float
    ttft_s: float  # at the SLO percentile
    tpot_s: float
    latency_p50_s: float
    tokens_per_s: float
    cost_usd_per_million_tokens: float
    ttft_attainment: float
    tpot_attainment: float
    preemptions: int
    dropped: int
    meets_slo: bool
    within_budget: bool
    bound: str

    def describe(self) -> str:
        if self.mode == "disaggregated":
            shape = f"{self.prefill_instances} prefill + {self.decode_instances} decode"
        else:
            shape = f"{self.replicas} replica{'s' if self.replicas != 1 else ''}"
        return f"{self.gpu} tp={self.tp}, {shape} ({count_of(self.gpus, 'GPU')})"

    def to_dict(self) -> dict[str, object]:
        """Its fields, the description, and the TTFT and TPOT under names that say they are
        at the SLO percentile (``ttft_at_slo_percentile_s``; the plan's ``slo.percentile``
        says which): ``ttft_s`` / ``tpot_s`` stay, the same figures, for saved plans and the
        reports that read them."""
        out = dataclasses.asdict(self)
        out["description"] = self.describe()
        out["ttft_at_slo_percentile_s"] = self.ttft_s
        out["tpot_at_slo_percentile_s"] = self.tpot_s
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmServePlan:
    candidates: tuple[LlmServeCandidate, ...]  # cheapest first
    pareto: tuple[int, ...]
    recommended: int | None
    infeasible: tuple[str, ...]
    simulated: int
    #: with ``band_of``: (lower factor, upper factor, the pick simulated with every iteration
    #: at the lower factor, at the upper)
    best_band: tuple[float, float, LlmServeCandidate, LlmServeCandidate] | None = None
    #: the pick's whole run (its requests' times: how steady its rates are), not in the JSON
    best_result: LlmServingResult | None = None

    def band_dict(self) -> dict[str, Any] | None:
        """The pick at the edges of its iteration-time band: SLO percentiles, attainment and
        whether it still meets the SLOs (fast edge, slow edge)."""
        if self.best_band is None:
            return None
        low, high, fast, slow = self.best_band
        return {
            "iteration_factor": [low, high],
            "ttft_s": [fast.ttft_s, slow.ttft_s],
            "tpot_s": [fast.tpot_s, slow.tpot_s],
            "ttft_at_slo_percentile_s": [fast.ttft_s, slow.ttft_s],
            "tpot_at_slo_percentile_s": [fast.tpot_s, slow.tpot_s],
            "ttft_attainment": [slow.ttft_attainment, fast.ttft_attainment],
            "tpot_attainment": [slow.tpot_attainment, fast.tpot_attainment],
            "meets_slo": [fast.meets_slo, slow.meets_slo],
        }

    @property
    def best(self) -> LlmServeCandidate | None:
        return None if self.recommended is None else self.candidates[self.recommended]

    def reason_lines(self) -> list[str]:
        """:attr:`infeasible` as the text says it, one line per reason (:func:`grouped_reasons`):
        ``not simulated: ...`` but for a GPU x degree simulated whose rows all missed the SLO
        (:data:`SLO_MISSED`: its rows stand in the table)."""
        return [
            line if SLO_MISSED in line else f"not simulated: {line}"
            for line in grouped_reasons(self.infeasible)
        ]

    def no_pick_text(self) -> str | None:
        """Why nothing was recommended, in one line (``None`` when something was): no row met
        the SLOs, or rows did and the budget ruled each out -- then the cheapest of them."""
        if self.recommended is not None:
            return None
        met = [c for c in self.candidates if c.meets_slo]
        if not met:
            return "no deployment meets the SLOs within the limits"
        cheapest = min(met, key=lambda c: c.cost_usd_per_hour)
        return (
            f"no deployment meets the SLOs within the budget: the cheapest that meets them, "
            f"{cheapest.describe()}, costs {cheapest.cost_usd_per_hour:.2f} US$/h; raise "
            f"--budget-usd-per-hour to >= {math.ceil(cheapest.cost_usd_per_hour * 100) / 100:.2f}"
        )

    def tie_note(self) -> str | None:
        """Which rule picked among the deployments that meet the SLOs and the budget at the
        pick's cost (:data:`TIE_BREAK`); ``None`` when its cost alone did."""
        if self.recommended is None:
            return None
        ok = [i for i, c in enumerate(self.candidates) if c.meets_slo and c.within_budget]
        costs = [self.candidates[i].cost_usd_per_hour for i in ok]
        return tie_note(costs, ok.index(self.recommended), TIE_BREAK)


def grouped_reasons(reasons: Sequence[str]) -> list[str]:
    """Every ``LABEL: WHY`` of a plan's ``infeasible``, one line per distinct WHY naming all
    its labels, a GPU's degrees together (``A10G tp=1, 2; L4 tp=1: does not fit (...)``)."""
    groups: dict[str, dict[str, list[str]]] = {}
    for reason in reasons:
        label, sep, why = reason.partition(": ")
        if not sep:
            label, why = "", reason
        gpu, tp_sep, degrees = label.partition(" tp=")
        by_label = groups.setdefault(why, {})
        by_label.setdefault(gpu if tp_sep else label, []).extend([degrees] if tp_sep else [])
    lines = []
    for why, by_label in groups.items():
        labels = [k + (f" tp={', '.join(d)}" if d else "") for k, d in by_label.items() if k]
        lines.append(f"{'; '.join(labels)}: {why}" if labels else why)
    return lines


#: A colocated deployment's run over more requests than this simulates a share of its
#: replicas with at least this many requests (:func:`_evaluate`); the pick is re-simulated
#: whole (:func:`_whole_pick`).
SAMPLED_REQUESTS = 20_000

#: The replica search stops within this fraction of the fewest (exact below 200 replicas):
#: a 1% step is well inside the model's error.
SEARCH_WITHIN = 0.01

#: The replica search starts at this many times the work's lower bound (every instance busy
#: all the time, which no latency SLO allows) and grows by :data:`SEARCH_GROWTH` twice, then
#: doubles, until one meets: on the built-in models' plans the fewest meeting are 1.2-3.5x
#: the bound, and this start and growth simulate ~20% fewer deployments than doubling from
#: the bound (`llama-3-8b:100`: 198 of 244).
SEARCH_START = 1.5
SEARCH_GROWTH = 1.3

#: Requests x GPU x degrees searched below which an ``executor`` is left unused: the search
#: then takes a few seconds at most here, about what starting worker processes costs.
PARALLEL_MIN_WORK = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class _Setting:
    spec: TransformerSpec
    engine: EngineProfile
    scheduler: SchedulerConfig
    requests: LlmRequests
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    percentile: float
    budget_usd_per_hour: float | None
    precision: str | None
    kv_precision: str | None


def _evaluate(
    s: _Setting,
    choice: GpuChoice,
    tp: int,
    cost: IterationCost,
    *,
    replicas: int,
    split: tuple[int, int] | None,
    full: bool = False,
    pods: int = 1,
) -> tuple[LlmServeCandidate, LlmServingResult]:
    """One deployment simulated; a run of more than :data:`SAMPLED_REQUESTS` requests (unless
    ``full``) from a share of it. Colocated: a share of its replicas (:func:`replica_share`:
    each serves exactly the arrivals it would in the whole). Disaggregated into ``pods``
    alike pods (``split`` divisible by it): one pod on every ``pods``-th request, its prefill
    instances serving exactly what theirs would. Percentiles are the share's, counts and
    tokens/s scaled to the whole."""
    instances = replicas if split is None else split[0] + split[1]
    if split is None:
        simulated = replicas
        if not full and s.requests.count > SAMPLED_REQUESTS:
            simulated = min(replicas, math.ceil(replicas * SAMPLED_REQUESTS / s.requests.count))
        deal, run_split = (replicas, simulated), None
    else:
        pods = 1 if full else pods
        deal, run_split = (pods, 1), (split[0] // pods, split[1] // pods)
        simulated = run_split[0] + run_split[1]
    if simulated < instances:
        share = replica_share(
            s.requests, cost, s.scheduler, max_context=s.spec.max_context, replicas=deal[0],
            simulated=deal[1],
        )  # fmt: skip
        s = dataclasses.replace(s, requests=share)
    scale = instances / simulated
    disagg = (
        None
        if run_split is None
        else Disaggregation(
            prefill_instances=run_split[0],
            decode_instances=run_split[1],
            kv_link_gbps=choice.kv_link_gbps,
        )
    )
    price = choice.price_usd_per_gpu_hour * tp * instances
    result = simulate_llm_serving(
        s.requests, cost, s.scheduler, max_context=s.spec.max_context, replicas=simulated,
        disaggregation=disagg, price_usd_per_hour=price / scale, slo_ttft_s=s.slo_ttft_s,
        slo_tpot_s=s.slo_tpot_s, swap_gbps=choice.swap_gbps,
    )  # fmt: skip
    q = s.percentile
    # the requests simulate serve's percentiles are over, NaN (no token, unfinished) a miss
    ttft = result.counted(result.ttft_s)
    tpot = result.counted(result.tpot_s, per_output_token=True)
    ttft_ok = _share_within(ttft, s.slo_ttft_s)
    tpot_ok = _share_within(tpot, s.slo_tpot_s)
    need = q / 100.0
    meets = ttft_ok >= need - 1e-12 and tpot_ok >= need - 1e-12
    summary = result.to_dict()
    tokens_per_s = float(summary["tokens_per_s"])  # type: ignore[arg-type]
    offer = choice.offer
    row = LlmServeCandidate(
        gpu=choice.gpu.name,
        provider=offer.provider if offer else "",
        instance_type=offer.instance_type if offer else "",
        tp=tp,
        mode="colocated" if split is None else "disaggregated",
        replicas=replicas if split is None else 0,
        simulated_instances=simulated,
        prefill_instances=0 if split is None else split[0],
        decode_instances=0 if split is None else split[1],
        gpus=tp * instances,
        cost_usd_per_hour=price,
        ttft_s=tail_percentiles(ttft, [q])[0],
        tpot_s=tail_percentiles(tpot, [q])[0],
        latency_p50_s=tail_percentiles(result.counted(result.latency_s), [50.0])[0],
        tokens_per_s=tokens_per_s * scale,
        cost_usd_per_million_tokens=float(summary["cost_usd_per_million_tokens"]),  # type: ignore[arg-type]
        ttft_attainment=ttft_ok,
        tpot_attainment=tpot_ok,
        preemptions=round(int(result.preemptions.sum()) * scale),
        dropped=round(result.count(1) * scale),
        meets_slo=meets,
        within_budget=s.budget_usd_per_hour is None or price <= s.budget_usd_per_hour,
        bound="",
    )
    return dataclasses.replace(row, bound=_bound(s, row, result, cost)), result


def _share_within(values: np.ndarray, limit_s: float | None) -> float:
    """Share of ``values`` at or under ``limit_s`` (no limit: finite), NaN a miss -- the
    share :func:`tail_percentiles` agrees with; 1 when no request has the value."""
    if values.size == 0:
        return 1.0
    return float(np.count_nonzero(values <= (limit_s or np.inf))) / values.size


#: A TPOT percentile this many times the slowest decode step of the run (at its fullest KV
#: cache) is not the decode steps' doing: the sequences waited between their steps.
STALL_FACTOR = 2.0


def _decode_step(cost: IterationCost, n: int, ctx: float) -> tuple[float, float]:
    """(weights + overhead, KV cache) seconds of one decode step of ``n`` sequences with
    ``ctx`` tokens of context each."""
    fixed = float(cost.pass_s[min(n, cost.max_tokens)]) + (cost.token_s + cost.sequence_s) * n
    return fixed, (cost.kv_s_per_token + cost.attention_s_per_unit) * n * ctx


def _tpot_why(
    s: _Setting,
    row: LlmServeCandidate,
    result: LlmServingResult,
    cost: IterationCost,
    ctx: float,
    step_s: float | None,
) -> str:
    """Why a TPOT percentile is over its SLO: decode steps too slow, or (far above the
    slowest decode step of the run, :data:`STALL_FACTOR`) sequences waiting between their
    steps: for a decode slot of a disaggregated pool, out of a preemption (when enough
    requests were preempted to reach the percentile), behind prompt chunks, or behind whole
    prompts' prefills. ``step_s``: the decode step at the mean batch (None: no decode ran)."""
    # the slowest decode step: the batch the fullest KV cache of a decoding instance held
    peak = max((i.peak_kv_utilisation for i in result.instances if i.role != "prefill"),
               default=1.0)  # fmt: skip
    seqs = s.scheduler.max_num_seqs
    if ctx > 0:
        seqs = max(1, min(seqs, round(peak * cost.kv_capacity_tokens / ctx)))
    slowest = sum(_decode_step(cost, seqs, ctx))
    if row.tpot_s <= STALL_FACTOR * slowest:
        return ": decode steps too slow at this batch (higher tp, fewer sequences)"
    most = f"{row.tpot_s / slowest:,.0f}x its slowest ({slowest * 1e3:.1f} ms at {seqs} sequences)"
    times = f"TPOT {row.tpot_s / step_s:,.0f}x its mean decode step, {most}" if step_s else most
    if row.mode == "disaggregated":
        link = result.kv_link
        if link is not None and link.bound:
            return f": requests queue for the KV link ({times}; {link_text(link)})"
        return f": sequences wait for a decode slot ({times}): more decode instances"
    preempted = int(np.count_nonzero(result.preemptions))
    if preempted >= (1.0 - s.percentile / 100.0) * s.requests.count:
        how = "recomputed" if s.scheduler.preemption == "recompute" else "swapped back"
        return (
            f": the KV cache is full, sequences wait out preemptions ({preempted} of "
            f"{s.requests.count} requests preempted and {how}; {times}): more KV cache (higher "
            "tp, --kv-precision fp8) or fewer sequences (--max-num-seqs)"
        )
    if s.scheduler.chunked_prefill:
        return (
            f": decodes share their iterations with prompt chunks ({times}): lower "
            "--max-batched-tokens, or prefill/decode pools (the disaggregated rows)"
        )
    return (
        f": decodes stall behind long prompts' prefills ({times}): --chunked-prefill, or "
        "prefill/decode pools (the disaggregated rows)"
    )


def _bound(
    s: _Setting, row: LlmServeCandidate, result: LlmServingResult, cost: IterationCost
) -> str:
    """What limits a row: the SLO closest to (or past) its limit and why, and what a decode
    step at the simulated batch spends its time on."""
    parts = []
    q = f"p{s.percentile:g}"
    req = s.requests
    ctx = float(np.mean(req.input_tokens + req.output_tokens / 2.0)) if req.count else 0.0
    ratios = []
    if s.slo_ttft_s is not None:
        ratios.append((row.ttft_s / s.slo_ttft_s, "TTFT", row.ttft_s, s.slo_ttft_s))
    if s.slo_tpot_s is not None:
        ratios.append((row.tpot_s / s.slo_tpot_s, "TPOT", row.tpot_s, s.slo_tpot_s))
    ratio, name, value, limit = max(ratios)
    running = [i.mean_running for i in result.instances if i.role != "prefill" and i.iterations]
    n = max(1, round(float(np.mean(running)))) if running else 0
    fixed, kv = _decode_step(cost, n, ctx) if n else (0.0, 0.0)
    step = fixed + kv
    if math.isinf(value):
        parts.append(f"{name} {q}: requests unserved ({row.dropped} dropped)")
    else:
        verb = "over" if ratio > 1 else "within"
        why = ""
        if ratio > 1 and name == "TTFT":
            why = ": prompts queue (add replicas or faster prefill)"
        elif ratio > 1:
            why = _tpot_why(s, row, result, cost, ctx, step or None)
        parts.append(
            f"{name} {q} {format_latency(value)} {verb} {format_latency(limit)} ({ratio:.0%}){why}"
        )
    if n:
        parts.append(
            f"decode step {step * 1e3:.1f} ms at batch {n}: weights + overhead "
            f"{fixed / step:.0%}, KV cache {kv / step:.0%}"
        )
    if row.preemptions:
        parts.append(f"KV cache full: {row.preemptions} preemptions")
    link = result.kv_link
    if link is not None and link.bound and "KV link" not in parts[0]:
        parts.append(link_text(link))
    return "; ".join(parts)


def link_text(link: KvLinkLoad) -> str:
    """A link-bound run's KV link in words (:attr:`LlmServingResult.kv_link`)."""
    return (
        f"KV-link bound: the prefill->decode link is busy {link.utilisation:.0%} and carries "
        f"at most {link.capacity_rps:.3g} req/s (a request's KV cache: "
        f"{link.bytes_per_request / 1e6:.3g} MB per GPU, at {link.gbps:g} Gbit/s): raise "
        "--kv-link-gbps or add prefill instances"
    )


def plan_llm_serving(
    requests: LlmRequests,
    spec: TransformerSpec,
    engine: EngineProfile,
    choices: Sequence[GpuChoice],
    *,
    scheduler: SchedulerConfig,
    slo_ttft_s: float | None,
    slo_tpot_s: float | None,
    percentile: float = 99.0,
    tps: Sequence[int] = (1, 2, 4, 8),
    max_replicas: int = 32,
    disaggregation: bool = True,
    budget_usd_per_hour: float | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    band_of: Callable[[GpuSpec], tuple[float, float]] | None = None,
    skipped: Sequence[str] = (),
    executor: Executor | None = None,
    workers: int = 1,
) -> LlmServePlan:
    """Every GPU choice x tensor-parallel degree x replica count searched (module docstring).
    ``band_of`` (a GPU -> the engine's 80% iteration-time factors) re-simulates the pick at
    both edges (:attr:`LlmServePlan.best_band`). ``skipped``: GPUs asked for that the caller
    could not offer, each with why ("MI300X: no catalog offer ..."), listed first among
    :attr:`LlmServePlan.infeasible`, where every GPU x degree not simulated is, with why (and
    each one simulated whose every replica count missed: :data:`SLO_MISSED`). ``executor``
    (with ``workers`` workers) runs the GPU x degree searches side by side (a search of
    :data:`PARALLEL_MIN_WORK` or more): the same plan."""
    if slo_ttft_s is None and slo_tpot_s is None:
        raise InvalidSpecError("slo", "is required", fix="give --slo-ttft-ms and/or --slo-tpot-ms")
    if requests.count == 0:
        raise InvalidSpecError("requests", "is empty", fix="give a trace or a rate")
    s = _Setting(
        spec=spec, engine=engine, scheduler=scheduler, requests=requests, slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s, percentile=percentile, budget_usd_per_hour=budget_usd_per_hour,
        precision=precision, kv_precision=kv_precision,
    )  # fmt: skip
    budget = scheduler.budget(spec.max_context)
    q = percentile
    p_in = int(np.percentile(requests.input_tokens, q, method="higher"))
    med_in = int(np.median(requests.input_tokens))
    med_out = int(np.median(requests.output_tokens))
    span = float(requests.arrival_s[-1] - requests.arrival_s[0]) if requests.count > 1 else 0.0
    rows: list[LlmServeCandidate] = []
    infeasible: list[str] = list(skipped)
    pairs, tried = _pairs(spec, engine, choices, tps, infeasible)
    limits = infeasible[len(skipped) :]  # the degrees and instance sizes left out
    unfit: list[tuple[int, int, str]] = []  # the GPU x degrees tried that did not fit: why
    fitting = 0
    fastest_prefill: tuple[float, str] | None = None
    fastest_step: tuple[float, str] | None = None
    colocated_best: list[tuple[float, GpuChoice, int, IterationCost, int, float]] = []
    built: dict[tuple[str, int], tuple[GpuChoice, IterationCost]] = {}
    searchable: list[tuple[float, str, GpuChoice, int, IterationCost, int]] = []
    for choice, tp in pairs:
        label = f"{choice.gpu.name} tp={tp}"
        try:
            cost = iteration_cost(
                spec, choice.gpu, engine, tp=tp, precision=precision,
                kv_precision=kv_precision, max_tokens=max(budget, scheduler.max_num_seqs),
                node=choice.node,
            )  # fmt: skip
        except InvalidSpecError as exc:
            unfit.append((tp, -1, f"{label}: {exc}"))
            infeasible.append(unfit[-1][2])
            continue
        if cost.kv_capacity_tokens < med_in + med_out:
            unfit.append((tp, cost.kv_capacity_tokens, (
                f"{label}: does not fit ({cost.kv_capacity_tokens} tokens of KV cache left "
                f"by the weights, a median request needs {med_in + med_out})"
            )))  # fmt: skip
            infeasible.append(unfit[-1][2])
            continue
        fitting += 1
        built[(choice.gpu.name, tp)] = (choice, cost)
        alone = cost.iteration_s(p_in, 1, p_in, 0.5 * p_in * p_in, cost.passes(p_in))
        step = cost.iteration_s(1, 1, med_in + med_out / 2, med_in + med_out / 2)
        if fastest_prefill is None or alone < fastest_prefill[0]:
            fastest_prefill = (alone, label)
        if fastest_step is None or step < fastest_step[0]:
            fastest_step = (step, label)
        if slo_ttft_s is not None and alone > slo_ttft_s:
            infeasible.append(
                f"{label}: a p{q:g} prompt ({p_in} tokens) alone takes "
                f"{alone * 1e3:.0f} ms to prefill > TTFT SLO"
            )
            continue
        if slo_tpot_s is not None and step > slo_tpot_s:
            infeasible.append(
                f"{label}: one sequence's decode step takes {step * 1e3:.1f} ms > TPOT SLO"
            )
            continue
        # the replicas the work needs at best (every instance busy): the search's lower bound
        work = sum(work_s(requests, cost, scheduler.max_num_seqs))
        low = max(1, math.floor(work / span)) if span > 0 else 1
        searchable.append((choice.price_usd_per_gpu_hour * tp * low, label, choice, tp, cost, low))
    order = sorted(searchable, key=lambda item: item[0])
    if len(order) * requests.count < PARALLEL_MIN_WORK:
        executor = None
    large = requests.count > SAMPLED_REQUESTS
    cheapest_met = math.inf  # US$/h of the cheapest deployment found to meet the SLOs
    ahead: dict[int, Future[tuple[int | None, list[LlmServeCandidate]]]] = {}
    launched = 0
    try:
        for i, (least, label, choice, tp, cost, low) in enumerate(order):
            if large and least * PRUNE_MARGIN > cheapest_met:
                infeasible.append(f"{label}: {PRUNED}")
                if i in ahead:  # started before the deployment that prunes it was found
                    ahead.pop(i).cancel()
                continue
            if executor is None:
                best, found = _replica_search(s, choice, tp, cost, low, max_replicas)
            else:
                # keep the workers busy in search order; one a prefix already prunes never starts
                # (the cheapest met only falls), the others are taken in order as serially
                while launched < len(order) and len(ahead) < 2 * workers:
                    j, launched = launched, launched + 1
                    if not (large and order[j][0] * PRUNE_MARGIN > cheapest_met):
                        ahead[j] = executor.submit(_replica_search, s, *order[j][2:], max_replicas)
                best, found = ahead.pop(i).result()
            rows.extend(found)
            if best is None:
                infeasible.append(
                    f"{label}: {SLO_MISSED} (up to {count_of(max_replicas, 'replica')})"
                )
                continue
            price = choice.price_usd_per_gpu_hour * tp * best
            colocated_best.append((price, choice, tp, cost, best, span))
            if s.budget_usd_per_hour is None or price <= s.budget_usd_per_hour:
                cheapest_met = min(cheapest_met, price)
    finally:  # an error (here or in a worker): the searches not started are not
        for future in ahead.values():
            future.cancel()
    if fitting == 0:

        def fits_on(weights: str) -> str | None:
            """The first GPU x degree tried that holds a median request with ``weights``."""
            for choice, tp in pairs:
                try:
                    cost = iteration_cost(
                        spec, choice.gpu, engine, tp=tp, precision=weights,
                        kv_precision=kv_precision, node=choice.node,
                    )  # fmt: skip
                except InvalidSpecError:
                    continue
                if cost.kv_capacity_tokens >= med_in + med_out:
                    return f"{tp} x {choice.gpu.name}"
            return None

        weights = precision or engine.default_precision
        _no_fit(spec, engine, weights, choices, tried, pairs, unfit, limits, fits_on)
    if not rows:
        parts: dict[str, str] = {}
        if slo_ttft_s is not None and fastest_prefill is not None:
            parts["slo-ttft-ms"] = (
                f"the fastest prefill of a p{q:g} prompt ({p_in} tokens) is "
                f"{fastest_prefill[0] * 1e3:.0f} ms ({fastest_prefill[1]})"
            )
        if slo_tpot_s is not None and fastest_step is not None:
            parts["slo-tpot-ms"] = (
                f"the fastest single-sequence decode step is {fastest_step[0] * 1e3:.1f} ms "
                f"({fastest_step[1]})"
            )
        below = {
            flag: text
            for flag, text, slo_s, fastest in (
                ("slo-ttft-ms", parts.get("slo-ttft-ms"), slo_ttft_s, fastest_prefill),
                ("slo-tpot-ms", parts.get("slo-tpot-ms"), slo_tpot_s, fastest_step),
            )
            if text is not None and slo_s is not None and fastest is not None
            and slo_s < fastest[0]
        } or parts  # fmt: skip
        verb = "is" if len(below) == 1 else "are"
        raise NoFeasiblePlanError(
            f"{' and '.join(below)}: {verb} below what one request alone takes on every GPU "
            "offered: " + "; ".join(below.values()),
            fix=f"raise {' / '.join(f'--{flag}' for flag in below)}",
        )
    if disaggregation:
        colocated_best.sort(key=lambda item: item[0])
        splits = [
            (s, choice, tp, cost, best) for _p, choice, tp, cost, best, _ in colocated_best[:3]
        ]
        if executor is None:
            rows.extend(row for args in splits for row in _search_split(*args))
        else:
            for pending in [executor.submit(_search_split, *args) for args in splits]:
                rows.extend(pending.result())
    whole = _whole_pick(s, rows, built, max_replicas)
    ranked = tuple(sorted(rows, key=_rank))
    points = np.array([[r.cost_usd_per_hour, _finite(r.ttft_s), _finite(r.tpot_s)] for r in ranked])
    front = tuple(sorted(int(i) for i in nondominated(points))) if len(ranked) else ()
    ok = [i for i, r in enumerate(ranked) if r.meets_slo and r.within_budget]
    pick = min(ok, key=lambda i: _rank(ranked[i])) if ok else None  # a tie: TIE_BREAK
    best_band = best_result = None
    if pick is not None:
        row = ranked[pick]
        choice, cost = built[(row.gpu, row.tp)]
        split = None if row.mode == "colocated" else (row.prefill_instances, row.decode_instances)
        best_result = whole.get(id(row))
        if best_result is None:  # simulated in a search (a worker's): once more, here
            _, best_result = _evaluate(
                s, choice, row.tp, cost, replicas=row.replicas or 1, split=split, full=True
            )
    if band_of is not None and pick is not None:
        f_low, f_high = band_of(choice.gpu)
        args = [
            (s, choice, row.tp, cost.scaled(f), row.replicas or 1, split) for f in (f_low, f_high)
        ]
        if executor is None:
            edges = [_band_edge(*a) for a in args]
        else:  # both edges side by side
            edges = [
                pending.result() for pending in [executor.submit(_band_edge, *a) for a in args]
            ]
        best_band = (f_low, f_high, edges[0], edges[1])
    return LlmServePlan(
        candidates=ranked,
        pareto=front,
        recommended=pick,
        infeasible=tuple(infeasible),
        simulated=len(rows),
        best_band=best_band,
        best_result=best_result,
    )


#: How the pick is chosen among deployments that meet the SLOs at the same cost (``--price P``
#: prices every GPU type alike): the rule :func:`_rank` orders them by, as the output says.
SLO_MISSED = "simulated, every replica count tried misses the SLO"
"""Why a GPU x degree gives no pick though it was simulated: its rows stand in the table, each
marked as missing; :attr:`LlmServePlan.infeasible` holds it beside the ones not simulated."""

TIE_BREAK = "lower TTFT, then lower TPOT, then fewer GPUs"

PRUNED = (
    "its work alone (every instance busy all the time) costs more than a deployment found "
    "to meet the SLOs"
)
"""Why a GPU x degree of a run of more than :data:`SAMPLED_REQUESTS` requests is not
searched: the replicas its work needs at best (the search's lower bound) already cost more
than the cheapest deployment that met the SLOs (within the budget), with
:data:`PRUNE_MARGIN` to spare. GPU x degrees are searched from the least such bound up, so a
large run stops early where one GPU is far cheaper per token; a smaller run searches them all
(the whole cost vs latency front)."""

#: The lower bound is priced at this fraction before it rules a GPU x degree out.
PRUNE_MARGIN = 0.9


def _rank(row: LlmServeCandidate) -> tuple[float, float, float, int, str]:
    """Cheapest first; at one cost, :data:`TIE_BREAK` (the description last: one order
    whatever order the search found them in)."""
    return (row.cost_usd_per_hour, row.ttft_s, row.tpot_s, row.gpus, row.describe())


def _degrees(tps: Sequence[int]) -> str:
    return ", ".join(str(t) for t in tps)


def _pairs(
    spec: TransformerSpec,
    engine: EngineProfile,
    choices: Sequence[GpuChoice],
    tps: Sequence[int],
    infeasible: list[str],
) -> tuple[list[tuple[GpuChoice, int]], list[int]]:
    """(GPU choice, degree) to try -- per GPU type and degree the cheapest instance (per GPU)
    with at least ``tp`` GPUs of the type -- and the degrees that split ``spec``. Every degree
    and GPU x degree left out goes to ``infeasible`` with why: a degree that does not split
    the model (:func:`gpucast.predict.llm_infer.split_problem`; none does: ``check_tp``'s
    error), a degree beyond the largest instance of a GPU type."""
    tried: list[int] = []
    for tp in tps:
        problem = split_problem(spec, engine, tp)
        if problem is None:
            tried.append(tp)
        else:
            infeasible.append(f"tp={tp} (every GPU): {problem}")
    if not tried:
        if len(tps) == 1:
            check_tp(spec, engine, tps[0])  # the error of predict infer and simulate serve
        why = (str(split_problem(spec, engine, tp)) for tp in tps)
        raise InvalidSpecError(
            "tp", f"none of the degrees given splits {spec.name}: "
            + "; ".join(w.removeprefix(f"cannot split {spec.name}: ") for w in why),
            got=list(tps), fix=tp_fix(spec, engine),
        )  # fmt: skip
    by_gpu: dict[str, list[GpuChoice]] = {}
    for c in choices:
        by_gpu.setdefault(c.gpu.name, []).append(c)
    pairs: list[tuple[GpuChoice, int]] = []
    for name in sorted(by_gpu):
        largest = max(c.max_tp for c in by_gpu[name])
        beyond = [tp for tp in tried if tp > largest]
        if beyond:
            infeasible.append(f"{name} tp={_degrees(beyond)}: {largest_node_text(name, largest)}")
        for tp in tried:
            rented = cheapest_for_tp(by_gpu[name], tp)
            if rented is not None:
                pairs.append((rented, tp))
    return pairs, tried


def largest_node_text(gpu: str, gpus: int, where: str = "instance offered") -> str:
    """Why a tensor-parallel degree above ``gpus`` is refused: the largest ``where`` (an
    instance offered, by plan serve; any node of the catalog, by one deployment) of ``gpu``
    holds ``gpus`` -- tensor parallelism is priced at its node's links."""
    return (
        f"the largest {gpu} {where} has {count_of(gpus, 'GPU')} (tensor parallelism stays "
        f"within one {where.split()[0]})"
    )


def _no_fit(
    spec: TransformerSpec,
    engine: EngineProfile,
    weights: str,
    choices: Sequence[GpuChoice],
    tried: Sequence[int],
    pairs: Sequence[tuple[GpuChoice, int]],
    unfit: Sequence[tuple[int, int, str]],
    limits: Sequence[str],
    fits_on: Callable[[str], str | None],
) -> None:
    """Raise why no GPU x degree holds the model: each GPU x degree tried leaves no KV cache
    for a request (``unfit``: degree, KV tokens left, why), the rest were left out
    (``limits``: degrees that do not split the model, instances too small for the degree).
    The reason named is the largest degree's (the nearest to fitting), and a lighter weight
    precision is offered only where ``fits_on`` finds GPUs that hold it, as predict infer's
    :func:`~gpucast.predict.llm_infer.smallest_fitting_tp` does."""
    built = sorted({tp for _choice, tp in pairs})
    left_out = "".join(f"; {why}" for why in limits)
    if not built:
        raise NoFeasiblePlanError(
            f"no GPU offered runs {spec.name} at tensor-parallel degree {_degrees(tried)}"
            + left_out,
            fix="use a --tp the instances offer, or other --gpu types",
        )
    largest = max(c.max_tp for c in choices)
    larger = [
        t for t in TP_CHOICES
        if max(built) < t <= largest and split_problem(spec, engine, t) is None
    ]  # fmt: skip
    fix = lighter_weights_fix(weights, fits_on)
    if larger:
        fix += f", or a larger --tp ({_degrees(larger)})"
    nearest = max(unfit, key=lambda u: (u[0], u[1]))[2]
    raise NoFeasiblePlanError(
        f"gpu: {spec.name} in {weights} does not fit on any GPU offered at tensor-parallel "
        f"degree {_degrees(built)} ({nearest})" + left_out,
        fix=fix,
    )


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 1e18


def _search_replicas(
    s: _Setting,
    choice: GpuChoice,
    tp: int,
    cost: IterationCost,
    low: int,
    max_replicas: int,
    rows: list[LlmServeCandidate],
    *,
    failing: int = 0,
    full: bool = False,
) -> int | None:
    """The fewest replicas meeting the SLO: growing from ``low``, then bisection down to
    ``failing`` (:func:`fewest_meeting`); ``full``: every replica simulated."""
    seen: dict[int, bool] = {}

    def meets(r: int) -> bool:
        if r not in seen:
            row, _ = _evaluate(s, choice, tp, cost, replicas=r, split=None, full=full)
            rows.append(row)
            seen[r] = row.meets_slo
        return seen[r]

    return fewest_meeting(meets, low, max_replicas, failing=failing, within=SEARCH_WITHIN)


def _replica_search(
    s: _Setting, choice: GpuChoice, tp: int, cost: IterationCost, low: int, max_replicas: int
) -> tuple[int | None, list[LlmServeCandidate]]:
    """One GPU x degree's replica search from :data:`SEARCH_START` times ``low``, the work's
    lower bound, which fails (:func:`_search_replicas`): its fewest meeting replicas and the
    rows it simulated (a task a worker process runs)."""
    rows: list[LlmServeCandidate] = []
    start = math.ceil(low * SEARCH_START)
    best = _search_replicas(s, choice, tp, cost, start, max_replicas, rows, failing=low - 1)
    return best, rows


def _band_edge(
    s: _Setting,
    choice: GpuChoice,
    tp: int,
    cost: IterationCost,
    replicas: int,
    split: tuple[int, int] | None,
) -> LlmServeCandidate:
    """The pick with every iteration at one edge of the engine's band (``cost`` scaled): its
    row (a task a worker process runs; the run itself stays there)."""
    return _evaluate(s, choice, tp, cost, replicas=replicas, split=split)[0]


def _whole_pick(
    s: _Setting,
    rows: list[LlmServeCandidate],
    built: dict[tuple[str, int], tuple[GpuChoice, IterationCost]],
    max_replicas: int,
) -> dict[int, LlmServingResult]:
    """The pick simulated whole: while the cheapest row meeting the SLOs was simulated from a
    share of its instances (:data:`SAMPLED_REQUESTS`), its row is replaced by the whole
    deployment's; where the whole misses (the share met by the luck of its sample), a
    colocated GPU x degree is searched on, whole, from one replica more. Returns the runs
    simulated whole here, by their rows' ``id``."""
    runs: dict[int, LlmServingResult] = {}
    while True:
        ok = [r for r in rows if r.meets_slo and r.within_budget]
        if not ok:
            return runs
        row = min(ok, key=_rank)
        if row.simulated_instances == row.gpus // row.tp:  # whole already
            return runs
        choice, cost = built[(row.gpu, row.tp)]
        split = None if row.mode == "colocated" else (row.prefill_instances, row.decode_instances)
        whole, run = _evaluate(
            s, choice, row.tp, cost, replicas=row.replicas, split=split, full=True
        )
        runs[id(whole)] = run
        rows[rows.index(row)] = whole
        if not whole.meets_slo and split is None and row.replicas < max_replicas:
            _search_replicas(
                s, choice, row.tp, cost, row.replicas + 1, max_replicas, rows,
                failing=row.replicas, full=True,
            )  # fmt: skip


def fewest_meeting(
    meets: Callable[[int], bool],
    low: int,
    high: int,
    *,
    failing: int = 0,
    within: float = 0.0,
    grow: float = SEARCH_GROWTH,
) -> int | None:
    """The fewest ``r`` in ``[1, high]`` with ``meets(r)`` (``meets`` rising with ``r``):
    growing ``grow`` times (at least by one) from ``low`` twice, then doubling, then
    bisecting down to ``failing``, a count known to fail (0: none; ``low - 1``: nothing
    below ``low`` is tried); None when ``high`` fails. ``within``: the bisection stops once
    ``r`` is within that fraction of a failing count (0: exact)."""
    r = min(max(low, 1), high)
    fail = min(failing, r - 1)
    misses = 0
    while not meets(r):
        fail = r
        if r >= high:
            return None
        misses += 1
        r = min(max(r + 1, math.ceil(r * (grow if misses <= 2 else 2.0))), high)
    while r - fail > max(1, math.floor(r * within)):
        mid = (r + fail) // 2
        if meets(mid):
            r = mid
        else:
            fail = mid
    return r


def _search_split(
    s: _Setting,
    choice: GpuChoice,
    tp: int,
    cost: IterationCost,
    colocated: int,
) -> list[LlmServeCandidate]:
    """Prefill/decode pools of ``colocated`` instances in all or fewer: the fewest total
    meeting the SLOs, searched as the replicas are (:func:`fewest_meeting`), each total tried
    at ``p`` prefill instances from the share of the work that is prefill, and one either
    side. A run of more than :data:`SAMPLED_REQUESTS` requests searches in ``m`` alike pods
    (:func:`_evaluate`): totals and pools in steps of ``m``. Returns the rows simulated."""
    rows: list[LlmServeCandidate] = []
    req = s.requests
    prefill, decode = work_s(req, cost, s.scheduler.max_num_seqs)
    share = prefill / max(prefill + decode, 1e-12)
    m = max(1, min(req.count // SAMPLED_REQUESTS, colocated // 2))
    top = max(colocated // m, 2)  # instances per pod at most

    def meets(u: int) -> bool:  # u + 1 instances per pod (a pod needs 2)
        t = u + 1
        base = min(max(1, round(t * share)), t - 1)
        met = False
        for p in sorted({base, max(1, base - 1), min(t - 1, base + 1)}):
            split = (m * p, m * (t - p))
            row, _ = _evaluate(s, choice, tp, cost, replicas=1, split=split, pods=m)
            rows.append(row)
            met = met or row.meets_slo
        return met

    fewest_meeting(meets, top - 1, top - 1, within=SEARCH_WITHIN)
    return rows

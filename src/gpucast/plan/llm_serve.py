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

The public names are here (``__all__``); the code lives in private parts: the GPU choices and
the GPU x degrees tried (``_llm_serve_choices``), the plan and its rows (``_llm_serve_result``),
one deployment simulated (``_llm_serve_evaluate``) and the searches over them
(``_llm_serve_search``); the search's orchestration, :func:`plan_llm_serving`, is here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future

import numpy as np

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile
from gpucast.domain.llm_serving import IterationCost, LlmRequests, SchedulerConfig
from gpucast.domain.units import count_of
from gpucast.plan._llm_serve_choices import (
    GpuChoice,
    _no_fit,
    _pairs,
    cheapest_for_tp,
    largest_node_text,
)
from gpucast.plan._llm_serve_evaluate import (
    SAMPLED_REQUESTS,
    STALL_FACTOR,
    _evaluate,
    _Setting,
    link_text,
)
from gpucast.plan._llm_serve_result import (
    SLO_MISSED,
    TIE_BREAK,
    LlmServeCandidate,
    LlmServePlan,
    _rank,
    grouped_reasons,
)
from gpucast.plan._llm_serve_search import (
    SEARCH_GROWTH,
    SEARCH_START,
    SEARCH_WITHIN,
    _band_edge,
    _replica_search,
    _search_split,
    _whole_pick,
    fewest_meeting,
)
from gpucast.plan.pareto import nondominated
from gpucast.predict.llm_infer import iteration_cost
from gpucast.simulate.llm_load import work_s

__all__ = [
    "PARALLEL_MIN_WORK",
    "PRUNED",
    "PRUNE_MARGIN",
    "SAMPLED_REQUESTS",
    "SEARCH_GROWTH",
    "SEARCH_START",
    "SEARCH_WITHIN",
    "SLO_MISSED",
    "STALL_FACTOR",
    "TIE_BREAK",
    "GpuChoice",
    "LlmServeCandidate",
    "LlmServePlan",
    "cheapest_for_tp",
    "fewest_meeting",
    "grouped_reasons",
    "largest_node_text",
    "link_text",
    "plan_llm_serving",
]

#: Requests x GPU x degrees searched below which an ``executor`` is left unused: the search
#: then takes a few seconds at most here, about what starting worker processes costs.
PARALLEL_MIN_WORK = 100_000


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


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 1e18

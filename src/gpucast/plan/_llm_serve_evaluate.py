"""One deployment simulated (:func:`_evaluate`): a colocated run or prefill/decode pools, from a
share of its instances above :data:`SAMPLED_REQUESTS` requests, as a plan row with what bounds
it (:func:`_bound`: the SLO nearest its limit, why a TPOT is over, what a decode step spends its
time on, :func:`link_text`).

Private part of :mod:`gpucast.plan.llm_serve`, which re-exports its public names.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile
from gpucast.domain.llm_serving import Disaggregation, IterationCost, LlmRequests, SchedulerConfig
from gpucast.domain.units import format_latency
from gpucast.plan._llm_serve_choices import GpuChoice
from gpucast.plan._llm_serve_result import LlmServeCandidate
from gpucast.simulate.llm_serving import (
    KvLinkLoad,
    LlmServingResult,
    replica_share,
    simulate_llm_serving,
    tail_percentiles,
)

#: A colocated deployment's run over more requests than this simulates a share of its
#: replicas with at least this many requests (:func:`_evaluate`); the pick is re-simulated
#: whole (:func:`_whole_pick`).
SAMPLED_REQUESTS = 20_000


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

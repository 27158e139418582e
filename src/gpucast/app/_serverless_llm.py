"""The always-on side of ``plan serverless`` on an Azure LLM trace (issue #19).

An always-on LLM deployment batches continuously, so it is sized with ``plan serve``'s own
machinery, per function (one trace file, one model of ``--models``), colocated (no
prefill/decode split) on ``--gpu``:

1. :func:`gpucast.app.llm_serve.plan_llm_serve` with a TTFT SLO of the serverless SLO
   (``--slo pNN<L`` -> TTFT pNN <= L): the tensor-parallel degree and the fewest replicas
   whose first tokens come within L. A request's latency is at least its TTFT, so no fewer
   replicas can meet the SLO.
2. The serverless candidates are judged on each request's end-to-end latency, so the
   always-on one is too: replicas are added (doubling, then bisecting) until the end-to-end
   pNN of the requests after the warm-up, each replayed by the token-level simulator
   (:func:`gpucast.app.llm_serve.simulate_llm_serve`, as ``simulate serve`` does), is within L,
   up to ``plan serve``'s ``--max-replicas``.

A request beyond the model's context window is rejected at arrival by every deployment and
counts as infinitely late, here as in ``plan serve`` and the serverless candidates: in step 2's
pNN, and in the planner, which adds those of the trace to every candidate's latency (so the
:class:`~gpucast.plan.serverless.AlwaysOnSizing` holds the latencies of the requests within
the window only).

The latencies go to :func:`gpucast.plan.serverless.plan_serverless` as an
:class:`~gpucast.plan.serverless.AlwaysOnSizing`, judged and priced like every candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from gpucast.domain.errors import GpucastError

if TYPE_CHECKING:
    from pathlib import Path

    import numpy.typing as npt

    from gpucast.plan.serverless import AlwaysOnSizing

#: how the always-on candidate's sizing is named (``plan serverless`` header and JSON)
SIZING = "plan serve"


def fewest(meets: Callable[[int], bool], low: int, high: int) -> int:
    """The fewest ``r`` in ``[low, high]`` with ``meets(r)`` (growing from ``low``, then
    bisecting, as plan serve's replica search; ``meets`` rising with ``r``, ``low`` a lower
    bound: nothing below it is tried), or ``high`` when none does."""
    from gpucast.plan.llm_serve import fewest_meeting

    low = max(1, min(low, high))
    found = fewest_meeting(meets, low, high, failing=low - 1)
    return high if found is None else found


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sized:
    """One function's always-on deployment: ``tp`` x ``replicas`` GPUs, the end-to-end
    latency of each request counted (inf: unfinished or rejected), which of them are within
    the context window (``served``), and what plan serve alone gave."""

    tp: int
    replicas: int
    latency_s: npt.NDArray[np.float64]
    served: npt.NDArray[np.bool_]
    plan_replicas: int
    plan_ttft_s: float


def _latencies(
    model: str, gpu: str, path: Path, *, tp: int, replicas: int, price: float, after_s: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """End-to-end latency of each request of ``path`` that arrives at or after ``after_s``
    (the file's own clock), inf when it did not finish (one beyond the model's context window
    is rejected: inf), and which of them are within the window."""
    from gpucast.app.llm_serve import simulate_llm_serve
    from gpucast.catalog.llm import llm_model

    run = simulate_llm_serve(
        model=model, gpu=gpu, arrivals=f"trace:{path}", tp=tp, replicas=replicas, price=price
    )
    req = run.serving.requests
    counted = req.arrival_s >= after_s - 1e-9
    within = req.input_tokens + req.output_tokens <= llm_model(model).max_context
    latency = run.serving.latency_s[counted]
    return np.where(np.isnan(latency), np.inf, latency), within[counted]


def _own_percentile(latency: npt.NDArray[np.float64], q: float) -> float:
    """``latency``'s ``q``-th percentile as the planner reads it (64 equally likely points,
    :func:`gpucast.simulate.serverless.latency_summary`)."""
    from gpucast.simulate.serverless import latency_summary, service_quantiles

    if latency.size == 0:
        return 0.0
    table = service_quantiles([latency])
    return latency_summary(np.zeros(1), ((0.0, 1),), spread=table, qs=(q,))[f"p{q:g}"]


def _size_one(
    model: str, gpu: str, path: Path, *, q: float, slo_s: float, price: float, after_s: float
) -> _Sized:
    """Steps 1 and 2 of the module docstring for one function."""
    from gpucast.app.llm_serve import PlanLlmServeRequest, plan_llm_serve
    from gpucast.domain.errors import NoFeasiblePlanError

    # plan serve's own --max-replicas default: the most it tries
    most = cast("int", PlanLlmServeRequest.__dataclass_fields__["max_replicas"].default)
    planned = plan_llm_serve(
        model=model, trace=path, gpus=(gpu,), no_disaggregation=True,
        slo_ttft_ms=slo_s * 1e3, slo_percentile=q, max_replicas=most,
    )  # fmt: skip
    best = planned.best
    if best is None:
        raise NoFeasiblePlanError(
            f"no deployment of {model} on {gpu} has TTFT p{q:g} <= {slo_s:g} s within {most} "
            "replicas"
        )
    seen: dict[int, tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]] = {}

    def run(r: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        if r not in seen:
            seen[r] = _latencies(
                model, gpu, path, tp=best.tp, replicas=r, price=price, after_s=after_s
            )
        return seen[r]

    replicas = fewest(lambda r: _own_percentile(run(r)[0], q) <= slo_s + 1e-12, best.replicas, most)
    return _Sized(
        tp=best.tp,
        replicas=replicas,
        latency_s=run(replicas)[0],
        served=run(replicas)[1],
        plan_replicas=best.replicas,
        plan_ttft_s=best.ttft_s,
    )


def llm_always_on(
    *,
    models: tuple[str, ...],
    names: tuple[str, ...],
    paths: tuple[Path, ...],
    offsets_s: tuple[float, ...],
    gpu: str,
    percentile: float,
    slo_s: float,
    warmup_s: float,
    price: float,
) -> tuple[AlwaysOnSizing | None, tuple[str, ...]]:
    """The always-on deployment of each function (``names[i]``: ``models[i]`` on the requests
    of ``paths[i]``, which start ``offsets_s[i]`` after the trace's first; module docstring)
    and warnings; None with a warning when ``plan serve`` finds none for a function."""
    from gpucast.plan.serverless import AlwaysOnSizing
    from gpucast.simulate.serverless import service_quantiles

    sized: list[_Sized] = []
    for model, name, path, offset in zip(models, names, paths, offsets_s, strict=True):
        try:
            one = _size_one(
                model, gpu, path, q=percentile, slo_s=slo_s, price=price,
                after_s=warmup_s - offset,
            )  # fmt: skip
            sized.append(one)
        except GpucastError as exc:
            return None, (
                f"no always-on candidate: {name} ({model}) cannot be sized as plan serve "
                f"sizes it: {exc}",
            )
    q = f"p{percentile:g}"

    def text(name: str, s: _Sized) -> str:
        e2e = f"end-to-end {q} {_own_percentile(s.latency_s, percentile):.2f} s"
        plan = f"plan serve: {s.plan_replicas} for TTFT {q} {s.plan_ttft_s:.2f} s"
        if _own_percentile(s.latency_s, percentile) > slo_s + 1e-12:
            more = f"; {e2e} even at {s.replicas}, the most plan serve tries (--max-replicas)"
        elif s.replicas == s.plan_replicas:
            more = f", {e2e}"
        else:
            more = f"; {s.replicas} for {e2e}"
        return (
            f"{name} {s.replicas} replica{'s' if s.replicas > 1 else ''} of {s.tp} x {gpu} "
            f"({plan}{more})"
        )

    parts = [text(name, s) for name, s in zip(names, sized, strict=True)]
    # the planner adds the rejected requests to every candidate: the served ones' latencies
    served = [s.latency_s[s.served] for s in sized]
    means = np.array([float(v.mean()) if v.size else 0.0 for v in served], dtype=np.float64)
    sizing = AlwaysOnSizing(
        gpus=sum(s.tp * s.replicas for s in sized),
        latency_s=service_quantiles(served),
        mean_s=means,
        how="continuous batching, sized as plan serve sizes it: " + "; ".join(parts),
        sizing=SIZING,
    )
    return sizing, ()

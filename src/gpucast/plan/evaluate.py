"""Vectorised evaluation of candidate rows: step time, time to target, cost, bottleneck, fit.

Everything is an array over candidates; there is no per-candidate Python loop. Per row:

* **compute**: the roofline step time of one worker at its per-worker batch
  (:class:`~gpucast.plan.inputs.GpuTable`, linear in the batch), times 1.33 when the batch
  only fits with activation checkpointing.
* **memory** (per GPU, as :func:`gpucast.predict.memory.fit_memory` counts it): DDP holds
  weights + gradients + optimizer state + activations; FSDP shards the first three over the
  workers and adds a gather buffer of twice the largest tensor; a PS worker keeps no optimizer
  state (the PS applies the update). Usable memory is :func:`~gpucast.predict.memory.usable_bytes`.
* **DDP / FSDP** (synchronous): the gradient all-reduce (FSDP: two all-gathers and a
  reduce-scatter) as NCCL runs it, :func:`gpucast.predict.comm.hierarchical_collective_s`:
  an intra-node phase over NVLink/PCIe, then the nodes exchange shards through their NICs
  as a ring or a log-depth tree, whichever is faster. Up to ``overlap_fraction`` of it hides
  under the backward pass.
* **PS** (asynchronous, CM-DARE style): exact mean value analysis of the closed network of
  ``n`` workers and the busiest of ``k`` CPU shards, a push station (NIC ingress + apply)
  and a pull station (NIC egress) (:func:`gpucast.predict.comm.ps_async_table`, every
  ``n`` in one pass); a worker's own node NIC, carrying every shard's bytes, adds a delay
  where it is the slower end and bounds the node's update rate (a node-NIC bound).
* **statistical efficiency**: the global batch (``n x b`` synchronous, ``b`` asynchronous)
  sets the samples needed (:class:`Work`: a fitted
  :class:`~gpucast.predict.convergence.ConvergenceCurve`, else
  :func:`gpucast.plan.efficiency.epochs_needed`).
* **time** = start-up + samples needed / samples per second; **cost** = time x (instances x
  US$/h + PS shards x CPU US$/h).
* **interval**: ``train_ratio_lower`` / ``train_ratio_upper`` scale the training time to the
  ends of the step-time model's interval: the compute at the roofline's interval with, at
  the same end, +-``collective_uncertainty`` on a DDP/FSDP row's exposed communication, or a
  PS row's stations and NICs at the PS model's residual quantiles (an asynchronous PS row
  solves its network again at each end: a PS-bound row gains little from faster GPUs and
  loses much to slower ones, whose compute the PS no longer hides); and, with a fitted
  convergence curve, the run-to-run spread of the samples to target (:meth:`Work.widen`).
  :mod:`gpucast.plan.uncertainty` reads them as the 10th / 90th percentiles of the run's
  speed factor.
* **mixed GPU types** (rows with a second part): :func:`evaluate_mixed`, the formulas of
  :mod:`gpucast.plan.hetero`.

Pure: numbers in, numbers out.

The public names are here (``__all__``); the code lives in private parts: what an evaluation
reads and returns (``_evaluate_types``), the terms single-type and mixed rows share: power,
PS demands, prices (``_evaluate_terms``), ZeRO-Offload rows (``_evaluate_offload``), rows of
one GPU type (``_evaluate_single``) and of two (``_evaluate_mixed``); :func:`evaluate` and
the market twins' pricing stay here.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

import numpy as np

from gpucast.plan._evaluate_mixed import evaluate_mixed
from gpucast.plan._evaluate_single import _evaluate_single
from gpucast.plan._evaluate_terms import _single_prices, ps_demands
from gpucast.plan._evaluate_types import (
    BOTTLENECKS,
    Z80,
    BoolArray,
    EvalMemo,
    Evaluation,
    IntArray,
    Work,
    memory_plan_name,
)
from gpucast.plan.inputs import GpuTable, PerfParams, WorkloadFacts
from gpucast.plan.space import Space, twin_source

if TYPE_CHECKING:
    from gpucast.plan.train import PlanContext, SearchResult

__all__ = [
    "BOTTLENECKS",
    "Z80",
    "EvalMemo",
    "Evaluation",
    "Work",
    "evaluate",
    "evaluate_like",
    "evaluate_mixed",
    "memory_plan_name",
    "ps_demands",
]


def evaluate_like(space: Space, res: SearchResult, ctx: PlanContext) -> Evaluation:
    """``space`` (rows derived from a search: what-ifs, the same offer at other node counts)
    evaluated with that search's facts, GPU table, work and parameters."""
    return evaluate(
        space,
        facts=ctx.facts,
        gpus=res.gpus,
        params=ctx.perf,
        work=res.work,
        startup_s=ctx.risk.startup_mean_s,
    )


def evaluate(
    space: Space,
    *,
    facts: WorkloadFacts,
    gpus: GpuTable,
    params: PerfParams,
    work: Work,
    startup_s: float,
    memo: EvalMemo | None = None,
    twin: IntArray | None = None,
) -> Evaluation:
    """Evaluate every row of ``space`` (see the module docstring). ``memo`` keeps the PS
    networks solved by earlier calls (the planner's chunks): the same numbers, sooner. With
    ``twin`` (:func:`gpucast.plan.space.market_twins` of ``space``), a spot row of one GPU
    type whose on-demand twin is in ``space`` takes the twin's numbers and prices only its
    market (:func:`_single_prices`): the same arrays for half the work."""
    if twin is not None:
        source = twin_source(space, twin)
        derived = source != np.arange(len(space))
        if derived.any():
            return _priced_twins(
                space, source, derived, facts=facts, gpus=gpus, params=params, work=work,
                startup_s=startup_s, memo=memo,
            )  # fmt: skip
    mixed = space.mixed
    if not mixed.any():
        return _evaluate_single(
            space, facts=facts, gpus=gpus, params=params, work=work, startup_s=startup_s,
            memo=memo,
        )  # fmt: skip
    k = int(np.argmax(mixed))  # first mixed row
    if not mixed[:k].any() and mixed[k:].all():
        # the usual layout (build_space puts mixed rows last): slices, no gathers
        single: IntArray | slice = slice(0, k)
        multi: IntArray | slice = slice(k, len(space))
    else:
        single, multi = np.flatnonzero(~mixed), np.flatnonzero(mixed)
    one = _evaluate_single(
        space.take(single), facts=facts, gpus=gpus, params=params, work=work, startup_s=startup_s,
        memo=memo,
    )  # fmt: skip
    two = evaluate_mixed(
        space.take(multi), facts=facts, gpus=gpus, params=params, work=work, startup_s=startup_s
    )
    out: dict[str, np.ndarray] = {}
    for f in fields(Evaluation):
        a, b = getattr(one, f.name), getattr(two, f.name)
        if isinstance(single, slice):
            out[f.name] = np.concatenate([a, b.astype(a.dtype, copy=False)])
        else:
            arr = np.zeros((len(space), *a.shape[1:]), dtype=a.dtype)
            arr[single] = a
            arr[multi] = b
            out[f.name] = arr
    return Evaluation(**out)


def _priced_twins(
    space: Space,
    source: IntArray,
    derived: BoolArray,
    *,
    params: PerfParams,
    startup_s: float,
    **kw: object,
) -> Evaluation:
    """:func:`evaluate` with ``twin``: the rows not ``derived`` evaluated, the others copied
    from their ``source`` row and priced in their own market."""
    base = np.flatnonzero(~derived)
    ev = evaluate(space.take(base), params=params, startup_s=startup_s, **kw)  # type: ignore[arg-type]
    at = np.zeros(len(space), dtype=np.int64)
    at[base] = np.arange(base.size)
    # np.take: a gather of rows of a 2-D column is ~10x faster than indexing with an array
    cols = {f.name: np.take(getattr(ev, f.name), at[source], axis=0) for f in fields(Evaluation)}
    rows = np.flatnonzero(derived)
    priced = _single_prices(
        space.take(rows), params, cols["time_s"][rows], cols["has_cpu"][rows], startup_s
    )
    for name, values in zip(
        ("has_market", "usd_per_hour", "probe_usd", "cost_usd"), priced, strict=True
    ):
        cols[name][rows] = values
    return Evaluation(**cols)

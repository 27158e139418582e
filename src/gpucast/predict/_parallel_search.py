"""The layout search of :mod:`gpucast.predict.parallel`: the layouts a space allows
(:func:`enumerate_layouts`), why a fixed layout cannot run (:func:`fixed_layout_conflict`),
every layout timed (:func:`rank_layouts`) and the fastest that fits, timed in the order of
its step-time floor (:func:`best_layout`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import (
    PIPELINE_MAX_ZERO,
    ClusterShape,
    FixedLayout,
    LayoutSpace,
    ParallelAssumptions,
    ParallelLayout,
    ParallelStepPrediction,
)
from gpucast.domain.units import GIB
from gpucast.predict._parallel_layout import FloatArray, _divisors, cluster_shape, validate_layout
from gpucast.predict._parallel_memo import SearchMemo, _SearchTable, _shapes_of, _step_time_floors
from gpucast.predict._parallel_memory import _all_stage_memory, training_memory
from gpucast.predict._parallel_step import predict_training_step
from gpucast.predict.memory import usable_bytes
from gpucast.predict.roofline import RooflineEfficiency


def enumerate_layouts(
    spec: TransformerSpec,
    gpus: int,
    gpus_per_node: int,
    global_batch: int,
    *,
    seq_len: int,
    space: LayoutSpace | None = None,
    allow_cross_node_tp: bool = False,
    allow_uneven_pp: bool = False,
) -> tuple[ParallelLayout, ...]:
    """Every valid layout of ``gpus`` GPUs with ``global_batch`` sequences per step.

    ``dp * tp * pp * cp = gpus``, ``dp * micro_batch_size * micro_batches = global_batch``;
    ``space`` bounds the other choices. ZeRO stages above 0 are only tried when ``dp * cp >
    1`` (they shard nothing otherwise), and ZeRO-3 only at ``pp = 1`` (:data:`PIPELINE_MAX_ZERO`).
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InvalidSpecError("gpus", "must be an integer >= 1", got=gpus)
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise InvalidSpecError("global_batch", "must be an integer >= 1", got=global_batch)
    sp = space or LayoutSpace()
    out: list[ParallelLayout] = []
    ep_sizes = sp.ep_sizes or tuple(_divisors(spec.n_experts))

    def check(sized: Callable[..., ParallelLayout], ep: int, v: int) -> bool:
        try:
            validate_layout(
                spec, sized(ep=ep, virtual_stages=v), seq_len=seq_len,
                gpus_per_node=gpus_per_node, gpus=gpus, allow_cross_node_tp=allow_cross_node_tp,
                allow_uneven_pp=allow_uneven_pp,
            )  # fmt: skip
        except InvalidSpecError:
            return False
        return True

    for tp in _divisors(gpus):
        for pp in _divisors(gpus // tp):
            for cp in sp.cp_sizes:
                if (gpus // tp // pp) % cp:
                    continue
                dp = gpus // (tp * pp * cp)
                if global_batch % dp:
                    continue
                per_replica = global_batch // dp
                for b in sp.micro_batch_sizes:
                    if per_replica % b:
                        continue
                    m = per_replica // b
                    zeros = sorted(set(sp.zero_stages if dp * cp > 1 else (0,)))
                    if pp > 1:  # ZeRO-3 with a pipeline is not planned (PIPELINE_ZERO_NOTE)
                        zeros = [z for z in zeros if z <= PIPELINE_MAX_ZERO]
                    sized = functools.partial(
                        ParallelLayout, dp=dp, tp=tp, pp=pp, cp=cp,
                        sequence_parallel=sp.sequence_parallel, micro_batch_size=b,
                        micro_batches=m, precision=sp.precision, lora_rank=sp.lora_rank,
                        lora_targets=sp.lora_targets,
                    )  # fmt: skip
                    # whether a layout runs does not depend on its ZeRO stage or recomputation:
                    # check each (ep, virtual stages) once, then emit the recipes in order
                    runs = [
                        (ep, v)
                        for ep in ep_sizes
                        for v in sp.virtual_stages
                        if not (v > 1 and pp == 1) and check(sized, ep, v)
                    ]
                    for zero in zeros:
                        for recompute in sp.recompute:
                            for ep, v in runs:
                                try:
                                    out.append(
                                        sized(
                                            ep=ep, virtual_stages=v, zero_stage=zero,
                                            recompute=recompute,
                                        )
                                    )  # fmt: skip
                                except InvalidSpecError:
                                    continue
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutConflict:
    """A rule that a :class:`~gpucast.domain.parallel.FixedLayout` breaks on its own at a GPU
    count: ``rule`` in the same words at every count and node that breaks it (what a plan
    counts the shapes it leaves out by), ``detail`` in this count's own words, ``flags`` the
    fixed choices it involves (those to drop)."""

    rule: str
    detail: str
    flags: tuple[str, ...]


def fixed_layout_conflict(
    spec: TransformerSpec,
    fixed: FixedLayout,
    *,
    gpus: int,
    gpus_per_node: int,
    global_batch: int,
    allow_cross_node_tp: bool = False,
) -> LayoutConflict | None:
    """The first rule the fixed choices break on ``gpus`` GPUs of ``gpus_per_node`` a node,
    whatever the searched choices are (None: some layout may take them -- or only their
    combination fails, which the search finds): the model's heads and layers first, then the
    node, then the GPU count, then the batch."""
    tp, pp, cp, mb = fixed.tp, fixed.pp, fixed.cp, fixed.micro_batch
    if tp is not None and spec.heads % tp:
        rule = f"tp={tp} does not divide the {spec.heads} attention heads"
        return LayoutConflict(rule=rule, detail=rule, flags=("tp",))
    if pp is not None and pp > spec.layers:
        rule = f"pp={pp} is more than the {spec.layers} layers"
        return LayoutConflict(rule=rule, detail=rule, flags=("pp",))
    if fixed.vpp is not None and fixed.vpp > 1 and pp is not None:
        if pp == 1:
            rule = f"vpp={fixed.vpp} interleaves pipeline stages, and pp=1 has one"
            return LayoutConflict(rule=rule, detail=rule, flags=("pp", "vpp"))
        if pp * fixed.vpp > spec.layers:
            rule = f"pp x vpp = {pp * fixed.vpp} is more than the {spec.layers} layers"
            return LayoutConflict(rule=rule, detail=rule, flags=("pp", "vpp"))
    if tp is not None and tp > gpus_per_node and not allow_cross_node_tp:
        return LayoutConflict(
            rule=f"tp={tp} needs {tp} GPUs per node",
            detail=f"tp={tp} is more than the {gpus_per_node} GPUs of a node",
            flags=("tp",),
        )
    split = (tp or 1) * (pp or 1) * (cp or 1)
    named = tuple(f for f, v in (("tp", tp), ("pp", pp), ("cp", cp)) if v is not None and v > 1)
    if gpus % split:
        return LayoutConflict(
            rule=f"tp x pp x cp = {split} needs a multiple of {split} GPUs",
            detail=f"tp x pp x cp = {split} does not divide the {gpus} GPUs",
            flags=named,
        )
    if mb:
        rest = gpus // split
        shares = sorted(
            {global_batch // dp for dp in _divisors(rest) if global_batch % dp == 0},
            reverse=True,
        )
        if shares and all(share % mb for share in shares):
            rule = (
                f"micro-batch {mb} divides no data-parallel replica's share of the "
                f"{global_batch} sequences"
            )
            listed = ", ".join(str(v) for v in shares[:6]) + (", ..." if len(shares) > 6 else "")
            return LayoutConflict(
                rule=rule, detail=f"{rule} ({listed} per replica)", flags=("micro-batch",)
            )
    return None


def rank_layouts(
    spec: TransformerSpec,
    gpu: GpuSpec,
    gpus: int,
    global_batch: int,
    *,
    seq_len: int,
    cluster: ClusterShape | None = None,
    space: LayoutSpace | None = None,
    efficiency: RooflineEfficiency | None = None,
    assumptions: ParallelAssumptions | None = None,
) -> tuple[ParallelStepPrediction, ...]:
    """Predictions for every valid layout: those that fit first, fastest first."""
    links = cluster or cluster_shape(gpu)
    opts = assumptions or ParallelAssumptions()
    layouts = _search(spec, gpus, global_batch, seq_len, links, space, opts)
    memo = SearchMemo()  # shared by the layouts of this search
    time = functools.partial(
        predict_training_step, spec, gpu, seq_len=seq_len, cluster=links, efficiency=efficiency,
        assumptions=opts, memo=memo,
    )  # fmt: skip
    predictions = [time(layout) for layout in layouts]
    return tuple(sorted(predictions, key=lambda pr: (not pr.fits, pr.step_time_s)))


def _search(
    spec: TransformerSpec,
    gpus: int,
    global_batch: int,
    seq_len: int,
    links: ClusterShape,
    space: LayoutSpace | None,
    opts: ParallelAssumptions,
) -> tuple[ParallelLayout, ...]:
    """:func:`enumerate_layouts` on ``links``' node shape under ``opts``."""
    return enumerate_layouts(
        spec, gpus, links.gpus_per_node, global_batch, seq_len=seq_len, space=space,
        allow_cross_node_tp=links.allow_cross_node_tp, allow_uneven_pp=opts.allow_uneven_pp,
    )  # fmt: skip


#: How far below a layout's floor (:func:`_step_time_floors`) its computed step time may fall
#: by rounding alone: the step and the floor add and scale a dozen terms in other orders,
#: each operation off by a relative 1.1e-16 at most; pruning keeps a layout whose floor is
#: within this of the best time found (whether it wins is then left to timing it)
_FLOOR_MARGIN = 1e-9


def _describe(layout: ParallelLayout) -> str:
    zero = (
        f"ZeRO-{layout.zero_stage}"
        if layout.dp * layout.cp > 1
        else f"dp={layout.dp} (ZeRO has nothing to shard)"
    )
    where = f"tp={layout.tp}, pp={layout.pp}" + (f", cp={layout.cp}" if layout.cp > 1 else "")
    recompute = "no recompute" if layout.recompute == "none" else f"{layout.recompute} recompute"
    return f"{zero} + {recompute} at {where}"


def _fastest(
    spec: TransformerSpec,
    gpu: GpuSpec,
    layouts: Sequence[ParallelLayout],
    floors: FloatArray,
    fits: Callable[[int], bool],
    seq_len: int,
    links: ClusterShape,
    efficiency: RooflineEfficiency | None,
    opts: ParallelAssumptions,
    memo: SearchMemo,
) -> ParallelStepPrediction | None:
    """The prediction of the fastest of ``layouts`` that ``fits`` (asked by index; the first
    of equals in their order, as ``min`` and :func:`rank_layouts`' sort take it; None: none
    fits), by branch and bound: layouts are taken in the order of their ``floors``
    (:func:`_step_time_floors`), and the search stops at the first whose floor exceeds the
    best time found -- it and every later one are slower. Whether a layout fits is asked only
    of those taken, so memory is computed for the layouts whose floor can win and no other."""
    best: ParallelStepPrediction | None = None
    best_index = 0
    bound = floors.tolist()
    for i in np.argsort(floors, kind="stable").tolist():
        if best is not None and bound[i] * (1.0 - _FLOOR_MARGIN) > best.step_time_s:
            break
        if not fits(i):
            continue
        found = predict_training_step(
            spec, gpu, layouts[i], seq_len=seq_len, cluster=links, efficiency=efficiency,
            assumptions=opts, memo=memo,
        )  # fmt: skip
        if best is None or (found.step_time_s, i) < (best.step_time_s, best_index):
            best, best_index = found, i
    return best


def _least_memory(floors: FloatArray, peak: Callable[[int], float]) -> int:
    """The index of the least ``peak`` (the first of equals, as ``min`` takes it), working out
    peaks lowest ``floors`` first and stopping where a floor exceeds the least found."""
    least, least_peak = -1, math.inf
    bound = floors.tolist()
    for i in np.argsort(floors, kind="stable").tolist():
        if bound[i] > least_peak:
            break
        if (found := peak(i)) < least_peak or (found == least_peak and i < least):
            least, least_peak = i, found
    return least


def best_layout(
    spec: TransformerSpec,
    gpu: GpuSpec,
    gpus: int,
    global_batch: int,
    *,
    seq_len: int,
    cluster: ClusterShape | None = None,
    space: LayoutSpace | None = None,
    efficiency: RooflineEfficiency | None = None,
    assumptions: ParallelAssumptions | None = None,
    memo: SearchMemo | None = None,
    only: Callable[[ParallelLayout], bool] | None = None,
) -> ParallelStepPrediction:
    """The fastest layout that fits; :class:`NoFeasiblePlanError` saying why when none does.
    ``only``: the layouts the caller allows (e.g. a fixed tp and pp; None: every one).

    Layouts are taken lowest floor on the step time first (:func:`_step_time_floors`, computed
    for all of them at once), and the search stops where the floor exceeds the best step found
    (:func:`_fastest`); only the layouts it takes get their memory computed, and only those
    that fit are timed: the same pick as the head of :func:`rank_layouts`, for a fraction of
    the work (``plan llm-train`` calls this for every GPU type and count).
    ``memo``: one from an earlier search with every argument the same but the host's pace
    (``assumptions.host_layer_s``), whose layouts, memory, floor parts and stage times are
    reused, or one whose layouts and table (only: peak memory and the floor's GPU-free parts)
    come from a search on another GPU (:meth:`SearchMemo.sibling`)."""
    links = cluster or cluster_shape(gpu)
    opts = assumptions or ParallelAssumptions()
    memo = memo if memo is not None else SearchMemo()
    if memo.layouts is None:
        memo.layouts = _search(spec, gpus, global_batch, seq_len, links, space, opts)
    if memo.table is None:
        memo.table = _SearchTable.of(memo.layouts)
    everything, peaks = memo.layouts, memo.table.peak_bytes
    allowed = [i for i, x in enumerate(everything) if only is None or only(x)]
    layouts = [everything[i] for i in allowed]
    usable = usable_bytes(
        gpu, reserved_gib=opts.reserved_gib, reserved_fraction=opts.reserved_fraction
    )

    def peak(j: int) -> float:
        """The peak memory of ``memo.layouts[j]``, computed once per table."""
        if math.isnan(peaks[j]):
            layout = everything[j]
            stages = _all_stage_memory(
                spec, gpu, layout, seq_len, opts, _shapes_of(memo, spec, layout)
            )
            peaks[j] = max(mem.total_bytes for mem in stages)
        return peaks[j]

    if not layouts:
        raise NoFeasiblePlanError(
            f"no valid layout of {gpus} GPUs runs {spec.name} with a global batch of "
            f"{global_batch} sequences of {seq_len} tokens",
            fix="the global batch must be divisible by dp; tp must divide the heads and fit "
            "in a node, pp the layers -- try a GPU count and batch with more divisors",
        )
    eff = efficiency or RooflineEfficiency()
    floors = _step_time_floors(spec, gpu, seq_len, links, eff, opts, memo)[allowed]
    table = memo.table
    assert table.memory_floor is not None  # filled by _step_time_floors
    may_fit = (table.memory_floor[allowed] <= usable).tolist()
    # ParallelMemory.fits: the peak stage's total within the usable bytes
    found = _fastest(
        spec, gpu, layouts, floors, lambda i: may_fit[i] and peak(allowed[i]) <= usable,
        seq_len, links, efficiency, opts, memo,
    )  # fmt: skip
    if found is not None:
        return found
    smallest = layouts[_least_memory(table.memory_floor[allowed], lambda i: peak(allowed[i]))]
    mem = training_memory(spec, gpu, smallest, seq_len=seq_len, assumptions=opts)
    raise NoFeasiblePlanError(
        f"{spec.name} does not fit on {gpus} x {gpu.name} even with "
        f"{_describe(smallest)} (micro-batch {smallest.micro_batch_size}): "
        f"needs {mem.total_bytes / GIB:.1f} GiB per GPU of {mem.usable_bytes / GIB:.1f} GiB "
        "usable",
        fix=_no_fit_fix(layouts),
    )


def _no_fit_fix(searched: Sequence[ParallelLayout]) -> str:
    """What to change when none of ``searched`` fits: only what the search left out (ZeRO-3
    where some layout had data-parallel ranks to shard over, full recompute, LoRA)."""
    left_out: list[tuple[str, str]] = []
    if not any(x.zero_stage == 3 for x in searched) and any(x.dp * x.cp > 1 for x in searched):
        left_out.append(("ZeRO-3", "--zero 3"))
    if not any(x.recompute == "full" for x in searched):
        left_out.append(("full recompute", "--recompute full"))
    fixes = ["use more GPUs or GPUs with more memory"]
    if not any(x.lora_rank for x in searched):
        fixes.append("train LoRA adapters (--lora-rank)")
    if left_out:
        names, flags = zip(*left_out, strict=True)
        fixes.append(f"allow {' and '.join(names)} ({', '.join(flags)})")
    return ", ".join(fixes[:-1]) + (" or " if len(fixes) > 1 else "") + fixes[-1]

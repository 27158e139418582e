"""What one layout search of :mod:`gpucast.predict.parallel` computes once
(:class:`SearchMemo`, with the table of its layouts, :class:`_SearchTable`) and the
step-time floors the search orders layouts by (:func:`_step_time_floors`, whose docstring
has the argument).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import ClusterShape, ParallelAssumptions, ParallelLayout
from gpucast.domain.units import GIB
from gpucast.predict import comm
from gpucast.predict._parallel_layout import HOST_FORWARD_SHARE, FloatArray, IntArray
from gpucast.predict._parallel_memory import (
    _activation_bytes_per_layer,
    _Shapes,
    _shapes,
    _stage_layers,
    _stage_state,
)
from gpucast.predict._parallel_time import (
    _comm_s,
    _comm_work,
    _CommWork,
    _dp_collectives,
    _dp_window,
    _group_gbps,
    _pp_sends,
    _sends_s,
    _stage_work,
    _StageTime,
    _StageWork,
    _wide_factor,
)
from gpucast.predict.roofline import (
    DeviceRoofline,
    RooflineEfficiency,
    RooflineWorkload,
    compute_term_s,
    memory_term_s,
    overhead_term_s,
)


@dataclass(slots=True)
class SearchMemo:
    """What one layout search computes once and its layouts share (every other argument of
    :func:`predict_training_step` the same): stage times and data-parallel traffic by the
    layout without its virtual stages (which change the bubble, the point-to-point sends and
    the memory alone), the step-time floor's parts, and (``table``) the peak memory
    :func:`best_layout` already computed.

    None of it depends on the host's pace (``ParallelAssumptions.host_layer_s``, applied per
    step): searches that differ only in it may share one memo (:func:`best_layout`
    ``memo``), as the fit of that pace does. ``layouts`` and ``table`` do not depend on the
    GPU or its links either: searches of the same model, GPU count, node size, batch,
    sequence, space and assumptions on other GPUs may share them (:meth:`sibling`; ``plan
    llm-train`` does)."""

    #: the layouts :func:`best_layout` enumerated (None until it has)
    layouts: tuple[ParallelLayout, ...] | None = None
    stage_times: dict[tuple[ParallelLayout, int, bool, bool], _StageTime] = field(
        default_factory=dict
    )
    dp_comm_s: dict[ParallelLayout, float] = field(default_factory=dict)
    #: the roofline's interval per regime (``predict_step_time(intervals=...)``)
    intervals: dict[str, tuple[float, float, str, str]] = field(default_factory=dict)
    #: per-GPU shapes by what they depend on (:func:`_shapes_of`)
    shapes: dict[tuple[int, int, bool, int, tuple[str, ...]], _Shapes] = field(default_factory=dict)
    #: the step-time floor's parts on this GPU and links (:func:`_floor_parts`)
    floor_parts: tuple[FloatArray, FloatArray, FloatArray] | None = None
    #: what the search knows of ``layouts`` that depends on no GPU, no links and no host
    #: pace: their floor's parts and their peak memory (:class:`_SearchTable`)
    table: _SearchTable | None = None

    def sibling(self) -> SearchMemo:
        """A memo for the same search on another GPU or other links: it shares ``layouts``
        and their table (none of which depends on the GPU, its links or the host's pace),
        and starts the rest afresh."""
        if self.layouts is not None and self.table is None:
            self.table = _SearchTable.of(self.layouts)
        return SearchMemo(layouts=self.layouts, table=self.table)


def _shapes_of(memo: SearchMemo, spec: TransformerSpec, layout: ParallelLayout) -> _Shapes:
    """:func:`_shapes`, once per search for each (tp, ep, pp > 1, LoRA) it depends on."""
    key = (layout.tp, layout.ep, layout.pp > 1, layout.lora_rank, layout.lora_targets)
    if key not in memo.shapes:
        memo.shapes[key] = _shapes(spec, layout)
    return memo.shapes[key]


def _flop_s(gpu: GpuSpec, precision: str, efficiency: RooflineEfficiency) -> float:
    """The roofline's ``compute`` term of one matrix FLOP at ``precision`` on ``gpu``
    (:func:`gpucast.predict.roofline.compute_term_s`). Without convolutions that term is
    ``factor x min(FLOPs / (efficiency x peak), FLOPs / FP32 rate)`` (or FLOPs over the FP32
    rate in fp32): FLOPs times this, up to rounding."""
    one = RooflineWorkload(
        name="one FLOP", batch_size=1, matmul_flops=1.0, memory_bytes=0.0, n_kernels=0
    )
    return compute_term_s(one, DeviceRoofline.of_gpu(gpu, precision), precision, efficiency)


class _WorkArrays(NamedTuple):
    """:class:`_StageWork` of many stages, as arrays."""

    matmul: FloatArray
    sixteen_bit: FloatArray
    memory_bytes: FloatArray
    kernels: FloatArray

    @classmethod
    def of(cls, works: Sequence[_StageWork]) -> _WorkArrays:
        return cls(
            *(np.asarray([getattr(w, k) for w in works], dtype=np.float64) for k in cls._fields)
        )


@dataclass(slots=True, kw_only=True)
class _SearchTable:
    """What a search knows of its layouts that depends on no GPU, no links and no host pace,
    shared by the searches of a memo and its siblings (:meth:`SearchMemo.sibling`): for
    :func:`_step_time_floors`, one layout for each distinct value of a part of the floor, for
    each layout the one it takes, and (:meth:`fill`, by the first search: it needs the model,
    the sequence, the node size and the assumptions, which its siblings share) the work of
    each part; and each layout's peak memory, once a search has needed it."""

    #: by what :func:`_stage_work` reads: tp, ep, pp, cp, micro-batch size, sequence
    #: parallelism, recompute, precision and LoRA (not dp, the micro-batch count, the ZeRO
    #: stage or vpp)
    compute: tuple[ParallelLayout, ...]
    compute_of: IntArray
    #: by what :func:`_dp_collectives` and :func:`_dp_window` read (ZeRO-0 and 1 move the
    #: same bytes whatever the micro-batch count); -1: no data-parallel traffic (dp x cp = 1)
    dp: tuple[ParallelLayout, ...]
    dp_of: IntArray
    #: by what :func:`_pp_sends` reads; -1: no pipeline (pp = 1)
    sends: tuple[ParallelLayout, ...]
    sends_of: IntArray
    #: by what :func:`_stage_state` reads (tp, ep, pp, dp, cp, ZeRO, precision, LoRA)
    state: tuple[ParallelLayout, ...]
    state_of: IntArray
    #: each layout's micro-batch slots ``m + (p - 1) / v``, stages and full recomputation
    paced: FloatArray
    pp: IntArray
    full: npt.NDArray[np.bool_]
    #: per ``compute`` layout: the work of its first and its last stage, and their traffic
    first: _WorkArrays | None = None
    last: _WorkArrays | None = None
    first_comm: _CommWork | None = None
    last_comm: _CommWork | None = None
    #: the ``dp`` layouts' first-stage collectives, a row each: the layout's index, bytes per
    #: pass, ranks, ranks on a node, passes
    collectives: tuple[IntArray, FloatArray, FloatArray, FloatArray, FloatArray] | None = None
    #: per ``dp`` layout: the backward share x the micro-batches its collectives hide under
    dp_window: FloatArray | None = None
    #: per ``sends`` layout: bytes of a send, sends a step, whether they cross nodes
    sends_work: tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]] | None = None
    #: per layout: a floor on its peak memory, its first stage's bytes (:func:`_stage_memory`)
    #: with one micro-batch's activations through its layers and no logits -- a GPU with
    #: fewer usable bytes does not fit it
    memory_floor: FloatArray | None = None
    #: each layout's bytes per GPU on the stage that needs the most (:func:`training_memory`'s
    #: ``total_bytes``), which a GPU's usable bytes must hold; NaN until a search needs it
    peak_bytes: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, layouts: Sequence[ParallelLayout]) -> _SearchTable:
        index: tuple[dict[tuple[object, ...], int], ...] = ({}, {}, {}, {})
        reps: tuple[list[ParallelLayout], ...] = ([], [], [], [])
        which: tuple[list[int], ...] = ([], [], [], [])
        for x in layouts:
            zero = max(x.zero_stage, 1)
            keys = (
                (x.tp, x.ep, x.pp, x.cp, x.micro_batch_size, x.sequence_parallel, x.recompute,
                 x.precision, x.lora_rank, x.lora_targets),
                None
                if x.dp * x.cp == 1
                else (x.dp, x.tp, x.pp, x.cp, x.ep, x.micro_batches if zero > 1 else 0,
                      zero, x.lora_rank, x.lora_targets),
                None
                if x.pp == 1
                else (x.tp, x.cp, x.dp, x.pp, x.virtual_stages, x.micro_batches,
                      x.micro_batch_size),
                (x.tp, x.ep, x.pp, x.dp, x.cp, x.zero_stage, x.precision, x.lora_rank,
                 x.lora_targets),
            )  # fmt: skip
            for key, seen, rep, of in zip(keys, index, reps, which, strict=True):
                if key is None:
                    of.append(-1)
                    continue
                if key not in seen:
                    seen[key] = len(rep)
                    rep.append(x)
                of.append(seen[key])
        compute_of, dp_of, sends_of, state_of = (np.asarray(of, dtype=np.int64) for of in which)
        return cls(
            compute=tuple(reps[0]),
            compute_of=compute_of,
            dp=tuple(reps[1]),
            dp_of=dp_of,
            sends=tuple(reps[2]),
            sends_of=sends_of,
            state=tuple(reps[3]),
            state_of=state_of,
            paced=np.asarray(
                [x.micro_batches + (x.pp - 1) / x.virtual_stages for x in layouts],
                dtype=np.float64,
            ),
            pp=np.asarray([x.pp for x in layouts], dtype=np.int64),
            full=np.asarray([x.recompute == "full" for x in layouts], dtype=np.bool_),
            peak_bytes=[math.nan] * len(layouts),
        )

    def fill(
        self,
        spec: TransformerSpec,
        seq_len: int,
        gpus_per_node: int,
        assumptions: ParallelAssumptions,
        memo: SearchMemo,
    ) -> None:
        """Work out each part's work, once (a sibling's search may have)."""
        if self.first is not None:
            return

        def column(values: Sequence[float]) -> FloatArray:
            return np.asarray(values, dtype=np.float64)

        first: list[_StageWork] = []
        last: list[_StageWork] = []
        first_comm: list[_CommWork] = []
        last_comm: list[_CommWork] = []
        acts = []
        for x in self.compute:
            shapes = _shapes_of(memo, spec, x)
            layers = _stage_layers(spec, x.pp)
            # full recomputation keeps each layer's input and one layer's working set more
            per_layer = _activation_bytes_per_layer(spec, x, seq_len, x.recompute, shapes.kv_local)
            acts.append(layers[0] * per_layer)
            for n, end, works, comms in (
                (layers[0], x.pp == 1, first, first_comm),
                (layers[-1], True, last, last_comm),
            ):
                works.append(_stage_work(spec, x, shapes, seq_len, n, end, assumptions))
                comms.append(_comm_work(spec, x, shapes, seq_len, n, end, works[-1].attn))
        rows = [
            (j, one)
            for j, x in enumerate(self.dp)
            for one in _dp_collectives(
                x, _shapes_of(memo, spec, x), 0, gpus_per_node, _stage_layers(spec, x.pp)[0]
            )
        ]
        self.collectives = (
            np.asarray([j for j, _ in rows], dtype=np.int64),
            column([one.n_bytes for _, one in rows]),
            column([one.size for _, one in rows]),
            column([one.on_node for _, one in rows]),
            column([one.passes for _, one in rows]),
        )
        self.dp_window = np.asarray(
            [backward * window for window, backward in map(_dp_window, self.dp)],
            dtype=np.float64,
        )
        sends = [_pp_sends(spec, x, seq_len, gpus_per_node) for x in self.sends]
        self.sends_work = (
            np.asarray([m for m, _, _ in sends], dtype=np.float64),
            np.asarray([n for _, n, _ in sends], dtype=np.float64),
            np.asarray([a for _, _, a in sends], dtype=np.bool_),
        )
        states = [
            _stage_state(x, _shapes_of(memo, spec, x), 0, _stage_layers(spec, x.pp)[0])
            for x in self.state
        ]
        # ParallelMemory.total_bytes' order: weights, gradients, optimizer, activations,
        # logits (none here), gather buffer, framework -- each sum at most the stage's
        held = column([st.weights + st.gradients + st.optimizer for st in states])
        gather = column([st.gather for st in states])
        self.memory_floor = (
            held[self.state_of] + column(acts)[self.compute_of] + gather[self.state_of]
        ) + assumptions.framework_overhead_gib * GIB
        self.first_comm, self.last_comm = (
            _CommWork(*(column([getattr(w, k) for w in comms]) for k in _CommWork._fields))
            for comms in (first_comm, last_comm)
        )
        self.first, self.last = _WorkArrays.of(first), _WorkArrays.of(last)


def _slowest_stage_s(
    gpu: GpuSpec,
    table: _SearchTable,
    links: ClusterShape,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
) -> FloatArray:
    """Per ``compute`` layout of ``table``: the slower micro-batch of its first and last stage
    on ``gpu`` and ``links``: its roofline (compute at :func:`_flop_s`, memory and overhead
    terms) and its TP, CP and expert traffic, as :class:`_StageTime` adds them."""
    out = np.zeros(len(table.compute), dtype=np.float64)
    precisions = [x.precision for x in table.compute]
    for precision in dict.fromkeys(precisions):
        mask = np.asarray([p == precision for p in precisions], dtype=np.bool_)
        device = DeviceRoofline.of_gpu(gpu, precision)
        flop_s = _flop_s(gpu, precision, efficiency)
        wide = _wide_factor(gpu, precision, efficiency)
        rate = efficiency.compute_efficiency(precision) * gpu.matrix_tflops(precision) * 1e12
        for work, traffic in ((table.first, table.first_comm), (table.last, table.last_comm)):
            assert work is not None and traffic is not None
            tp_s, cp_s, moe_s = _comm_s(traffic, links, wide, rate, assumptions.tp_overlap_fraction)
            micro_batch = (
                (work.matmul + (wide - 1.0) * work.sixteen_bit) * flop_s
                + memory_term_s(work.memory_bytes, device, efficiency)
                + overhead_term_s(work.kernels, device, efficiency)
            )
            micro_batch = micro_batch + tp_s + cp_s + moe_s
            out = np.where(mask, np.maximum(out, micro_batch), out)
    return out


def _step_time_floors(
    spec: TransformerSpec,
    gpu: GpuSpec,
    seq_len: int,
    links: ClusterShape,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
    memo: SearchMemo,
) -> FloatArray:
    """A lower bound on :func:`predict_training_step`'s step time of each of ``memo``'s
    layouts, all at once: from its first and last stage's micro-batch, the host's pace, its
    pipeline sends and its first stage's data-parallel traffic (no optimizer, no interval).

    The step adds terms that are never negative (the roofline's three -- efficiencies and
    GPU factors are > 0, bytes and kernels >= 0 --, TP traffic times ``1 - tp_overlap`` >=
    0, the exposed parts of CP, expert and data-parallel traffic, the optimizer, the
    sends). Let ``M`` be the slowest stage's micro-batch (its roofline plus its TP, CP and
    expert traffic), ``H`` the host's time for one, ``X = max(M, H)``, ``A = m + (p - 1) /
    v``. The micro-batch terms add to ``m X`` (``host_wait`` is ``m max(0, H - M)``) and the
    bubble is ``(p - 1) / v X``: ``A X`` together. ``M`` is at least any stage's micro-batch:
    the work :func:`_stage_work` gives the stage, its FLOPs times ``flop_s`` (:func:`_flop_s`;
    the ``compute`` term up to rounding, which :data:`_FLOOR_MARGIN` covers) plus its
    ``memory_bandwidth`` and ``overhead`` terms, as :func:`predict_step_time` prices them, and
    its traffic (:func:`_comm_s`, as the step prices it). So ``X >= X0 = max(micro-batch of
    the first stage (the most layers), of the last (the head), H)``. The data-parallel term is
    at least the first stage's exposed traffic (:func:`_dp_comm_s`), ``max((1 - f) T, T - b w
    M0)`` (``T`` its collectives, ``f`` the overlap fraction, ``b`` the backward share, ``w``
    the micro-batches of the window, ``M0 <= M`` the stage's micro-batch). So the step is at
    least ``A X + max((1 - f) T, T - c X)`` with ``c = b w <= A`` (b <= 1 and w is 1 or
    ``m``), which over ``X >= X0`` is least at ``X0``: ``max(A X0 + (1 - f) T, (A - c) X0 +
    T)``, plus the sends, which it computes as the step does.
    """
    assert memo.layouts is not None
    if memo.table is None:
        memo.table = _SearchTable.of(memo.layouts)
    table = memo.table
    table.fill(spec, seq_len, links.gpus_per_node, assumptions, memo)
    if memo.floor_parts is None:  # once per memo: none of it depends on the host's pace
        memo.floor_parts = _floor_parts(table, gpu, links, efficiency, assumptions)
    slowest, dp_total, sends = memo.floor_parts
    paced = table.paced
    # the host's time for a micro-batch of the stage with the most layers, ceil(layers / pp)
    host_mb = (
        assumptions.host_layer_s
        * -(-spec.layers // table.pp)
        * (1.0 + HOST_FORWARD_SHARE * table.full)
    )
    x0 = np.maximum(slowest[table.compute_of], host_mb)
    floor = paced * x0
    if table.dp:
        assert table.dp_window is not None
        has = table.dp_of >= 0
        total, c = dp_total[table.dp_of], table.dp_window[table.dp_of]  # -1: masked below
        floor = np.where(has, floor + (1.0 - assumptions.dp_overlap_fraction) * total, floor)
        # c <= paced always (the docstring); the sharper bound needs it
        sharper = has & (c <= paced)
        floor = np.where(sharper, np.maximum(floor, (paced - c) * x0 + total), floor)
    if table.sends:
        floor = np.where(table.sends_of >= 0, floor + sends[table.sends_of], floor)
    return np.asarray(floor, dtype=np.float64)


def _floor_parts(
    table: _SearchTable,
    gpu: GpuSpec,
    links: ClusterShape,
    efficiency: RooflineEfficiency,
    assumptions: ParallelAssumptions,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The floor's parts on ``gpu`` and ``links``, by ``table`` entry: the slowest stage's
    micro-batch (:func:`_slowest_stage_s`), the first stage's data-parallel collectives and
    the pipeline's sends of a step."""
    assert table.collectives is not None and table.sends_work is not None
    owner, n_bytes, size, on_node, passes = table.collectives
    seconds = comm.collective_function(links.collective)(
        n_bytes,
        size,
        on_node,
        _group_gbps(links, on_node),
        links.node_network_gbps * on_node / links.gpus_per_node,
        links.hop_latency_s,
        passes=passes,
    )
    # each layout's collectives summed in their order, as _dp_traffic sums them
    dp_total = np.bincount(owner, weights=seconds, minlength=len(table.dp))
    return (
        _slowest_stage_s(gpu, table, links, efficiency, assumptions),
        np.asarray(dp_total, dtype=np.float64),
        _sends_s(*table.sends_work, links),
    )

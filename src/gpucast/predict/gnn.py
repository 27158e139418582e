"""Graph neural networks priced as sparse aggregation, sampling and partition traffic.

A GCN or GraphSAGE layer aggregates its neighbours' features (a sparse matrix times a dense
one, SpMM: each of the ``E`` edges gathers ``d_in`` values -- memory-bound) and transforms
the result (a dense ``N x d_in x d_out`` matmul; GraphSAGE concatenates the node's own
features, ``2 d_in``). Pricing the aggregation as a dense ``N x N`` adjacency matmul, as a
dense roofline over the layer does, costs ``2 N^2 d_in`` FLOPs instead: :class:`GnnCost`
carries both so the gap is visible.

* :func:`full_graph_cost` -- one full-graph training step (forward + backward: 3x);
  :func:`full_graph_bytes` -- the memory it needs (edges, features, activations, gradients).
* :func:`training_kernels` / :func:`launch_floor_s` -- the kernels one training step launches
  and the floor they put under it: eager PyTorch launches each kernel from the host (the
  roofline's per-kernel prior, :data:`gpucast.predict.roofline.KERNEL_OVERHEAD_S`), so a step
  of tiny kernels takes at least their launches, however little work they do.
* :func:`sampled_cost` -- one mini-batch with neighbour sampling (fan-outs per layer, from the
  seeds outwards): expected distinct nodes per hop ``n_l = N (1 - exp(-n_{l-1} f_l / N))``
  (draws with replacement over ``N`` nodes, every node at the mean degree), the edges
  sampled, and the input features fetched (over PCIe / UVM when they live in host memory);
  given a degree distribution (:mod:`gpucast.predict.gnn_degrees`) the hops follow it.
* :func:`cpu_sampling_s` / :func:`bounded_step_s` -- the mini-batch's neighbour sampling on
  CPU workers (sampled edges over the workers' rate) and the step it bounds: with prefetching
  the workers prepare the next batches while the GPU trains (the slower of the two counts),
  without it they add.
* :func:`halo_nodes` -- for a partition of the nodes, each part's halo: the distinct nodes of
  other parts with an edge into it, whose features (forward) and gradients (backward) cross
  the network every layer of a full-graph epoch; :func:`halo_bytes_per_epoch` prices them.
  Exact given the partition (vectorised over the edges).
* :func:`expected_random_halo` -- the same from the degree sequence alone, for a uniformly
  random (hash) partition: node ``v`` is in the halo of another part with probability
  ``1 - (1 - 1/k)^deg(v)``.
* :func:`metis_partition` -- a real partitioner (METIS through ``pymetis``, the optional extra
  ``gpucast[graph]``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.predict.gnn_degrees import DegreeDistribution, sampled_hops

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
GnnModel = Literal["gcn", "sage"]
GNN_MODELS: tuple[GnnModel, ...] = ("gcn", "sage")
#: The deepest GNN priced (per-layer lists are built).
MAX_LAYERS = 256
#: Forward + backward: the backward pass moves and computes about twice the forward.
TRAIN_FACTOR = 3.0
#: Forward kernels of one layer as PyG / DGL run it eagerly: GCN the aggregation (an SpMM),
#: the transform (a matmul), the bias and the activation; GraphSAGE the aggregation, the
#: mean's division, two transforms (the neighbours' and the node's own), their sum and the
#: activation.
LAYER_KERNELS: dict[str, int] = {"gcn": 4, "sage": 6}
#: The loss on the output layer: log-softmax and the negative log-likelihood.
LOSS_KERNELS = 2
#: One Adam step over every parameter: PyTorch's multi-tensor (``foreach``) implementation
#: launches about a dozen kernels for all of a small model's tensors together.
OPTIMIZER_KERNELS = 12


def _positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InvalidSpecError(name, "must be an integer >= 1", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class GnnSpec:
    """A GCN or GraphSAGE: layers, widths and, for mini-batches, seeds and fan-outs."""

    model: GnnModel
    feature_dim: int
    hidden: int
    classes: int
    layers: int = 2
    fanouts: tuple[int, ...] = ()
    batch: int | None = None
    bytes_per_value: int = 4

    def __post_init__(self) -> None:
        if self.model not in GNN_MODELS:
            raise InvalidSpecError(
                "model", f"must be one of {', '.join(GNN_MODELS)}", got=self.model
            )
        for name in ("feature_dim", "hidden", "classes", "layers", "bytes_per_value"):
            _positive_int(name, getattr(self, name))
        if self.layers > MAX_LAYERS:
            raise InvalidSpecError("layers", f"must be <= {MAX_LAYERS}", got=self.layers)
        if self.fanouts and len(self.fanouts) != self.layers:
            raise InvalidSpecError(
                "fanouts", f"needs one fan-out per layer ({self.layers})", got=self.fanouts,
                fix=fanouts_fix(self.layers, len(self.fanouts)),
            )  # fmt: skip
        for f in self.fanouts:
            if isinstance(f, bool) or not isinstance(f, int | np.integer) or f < 1:
                raise InvalidSpecError(
                    "fanouts", "every fan-out must be an integer >= 1", got=self.fanouts,
                    fix="e.g. --fanouts 15,10",
                )  # fmt: skip
        if self.batch is not None:
            _positive_int("batch", self.batch)

    def dims(self) -> list[tuple[int, int]]:
        """(d_in, d_out) of each layer."""
        widths = [self.feature_dim] + [self.hidden] * (self.layers - 1) + [self.classes]
        return list(itertools.pairwise(widths))


@dataclass(frozen=True, slots=True, kw_only=True)
class GnnCost:
    """Work of one training step: FLOPs, bytes moved, and the dense-adjacency alternative."""

    transform_flops: float
    aggregation_bytes: float
    dense_aggregation_flops: float
    feature_fetch_bytes: float = 0.0
    edges: float = 0.0
    nodes_per_hop: tuple[float, ...] = ()
    #: kernel launches of the step (:func:`training_kernels`)
    kernels: float = 0.0

    def step_time_s(
        self,
        *,
        tflops: float,
        memory_gbps: float,
        host_link_gbps: float | None = None,
        kernel_overhead_s: float = 0.0,
    ) -> float:
        """Sparse pricing: transforms at ``tflops``, aggregation at ``memory_gbps`` (GB/s),
        at least the step's :attr:`kernels` launches at ``kernel_overhead_s`` each
        (:func:`launch_floor_s`; 0: no floor, as on a CPU, which runs its operators in
        turn), feature fetches at ``host_link_gbps`` (None: features already on the device)."""
        work = self.transform_flops / (tflops * 1e12) + self.aggregation_bytes / (memory_gbps * 1e9)
        return launch_floor_s(work, self.kernels, kernel_overhead_s) + self.fetch_s(host_link_gbps)

    def dense_step_time_s(
        self,
        *,
        tflops: float,
        kernel_overhead_s: float = 0.0,
        host_link_gbps: float | None = None,
    ) -> float:
        """The aggregation priced as a dense adjacency matmul (plus the same transforms), the
        same kernels launched (:func:`launch_floor_s`) and the same feature fetches as
        :meth:`step_time_s`: only the aggregation differs."""
        work = (self.transform_flops + self.dense_aggregation_flops) / (tflops * 1e12)
        return launch_floor_s(work, self.kernels, kernel_overhead_s) + self.fetch_s(host_link_gbps)

    def fetch_s(self, host_link_gbps: float | None) -> float:
        """The feature fetches over the host link (None: the features are on the device)."""
        return 0.0 if host_link_gbps is None else self.feature_fetch_bytes / (host_link_gbps * 1e9)


def fanouts_fix(layers: int, given: int) -> str:
    """The fix for ``given`` fan-outs on ``layers`` layers: that many, or as many layers."""
    example = ",".join(str(f) for f in (15, 10, 5, *[5] * layers)[:layers])
    return f"give {layers} (e.g. --fanouts {example}) or --layers {given}"


def training_kernels(spec: GnnSpec) -> float:
    """Kernel launches of one training step: the forward pass (:data:`LAYER_KERNELS` per
    layer and :data:`LOSS_KERNELS`), the backward about twice as many (``TRAIN_FACTOR`` x the
    forward in all) and the optimizer (:data:`OPTIMIZER_KERNELS`); a mini-batch also copies
    its input features and each layer's block (two index arrays) to the GPU."""
    forward = spec.layers * LAYER_KERNELS[spec.model] + LOSS_KERNELS
    copies = 1 + 2 * spec.layers if spec.batch is not None else 0
    return TRAIN_FACTOR * forward + OPTIMIZER_KERNELS + copies


def launch_floor_s(work_s: float, kernels: float, kernel_overhead_s: float) -> float:
    """A step's GPU time given its kernels' work and how many it launches: eager PyTorch
    enqueues kernels without waiting for them, so each launch overlaps the kernels before it
    and the slower of the two -- the GPU's work or the host's ``kernels x kernel_overhead_s``
    of launches -- paces the step."""
    if not (math.isfinite(kernel_overhead_s) and kernel_overhead_s >= 0):
        raise InvalidSpecError("kernel_overhead_s", "must be >= 0", got=kernel_overhead_s)
    return max(work_s, kernels * kernel_overhead_s)


def _layer_cost(
    spec: GnnSpec, n_dst: Sequence[float], n_src: Sequence[float], edges: Sequence[float]
) -> GnnCost:
    b = spec.bytes_per_value
    flops = agg = dense = 0.0
    for (d_in, d_out), nd, ns, e in zip(spec.dims(), n_dst, n_src, edges, strict=True):
        concat = 2 if spec.model == "sage" else 1
        flops += 2.0 * nd * concat * d_in * d_out
        agg += (e * d_in + nd * d_in) * b  # gather along the edges, write the aggregate
        dense += 2.0 * nd * ns * d_in
    return GnnCost(
        transform_flops=TRAIN_FACTOR * flops,
        aggregation_bytes=TRAIN_FACTOR * agg,
        dense_aggregation_flops=TRAIN_FACTOR * dense,
        edges=float(sum(edges)),
    )


def _check_graph(nodes: int, edges: int) -> None:
    _positive_int("nodes", nodes)
    if isinstance(edges, bool) or not isinstance(edges, int | np.integer) or edges < 0:
        raise InvalidSpecError("edges", "must be an integer >= 0", got=edges)


def full_graph_cost(spec: GnnSpec, *, nodes: int, edges: int) -> GnnCost:
    """One full-graph training step on ``nodes`` nodes and ``edges`` directed edges."""
    _check_graph(nodes, edges)
    n = [float(nodes)] * spec.layers
    cost = _layer_cost(spec, n, n, [float(edges)] * spec.layers)
    return replace(cost, kernels=training_kernels(replace(spec, batch=None, fanouts=())))


def full_graph_bytes(spec: GnnSpec, *, nodes: int, edges: int) -> float:
    """Memory of full-graph training: the edges (two 4-byte ids each), the input features and
    every layer's activations and their gradients (``2 N (sum d_in + classes)`` values)."""
    _check_graph(nodes, edges)
    widths = sum(d_in for d_in, _ in spec.dims()) + spec.classes
    return 8.0 * edges + 2.0 * nodes * widths * spec.bytes_per_value


def sampled_bytes(spec: GnnSpec, cost: GnnCost) -> float:
    """Memory of one mini-batch on the GPU, counted as :func:`full_graph_bytes` counts the full
    graph: its sampled edges (two 4-byte ids each), each layer's input on its source nodes and
    the last layer's output on the seeds, with their gradients; ``cost`` is the batch's
    :func:`sampled_cost` (its ``nodes_per_hop``, seeds first)."""
    hops = cost.nodes_per_hop
    last = spec.layers - 1
    inputs = sum(hops[last + 1 - i] * d_in for i, (d_in, _) in enumerate(spec.dims()))
    values = inputs + hops[0] * spec.classes
    return 8.0 * cost.edges + 2.0 * values * spec.bytes_per_value


def sampled_nodes(nodes: int, batch: int, fanouts: Sequence[float]) -> list[float]:
    """Expected distinct nodes up to each hop, seeds first: after ``D`` draws (the seeds, then
    ``n_{l-1} f_l`` neighbours at hop ``l``) over ``N`` nodes, ``N (1 - exp(-D / N))`` are
    distinct (uniform draws; hubs repeat more, so this is an upper estimate on a skewed graph:
    :func:`gpucast.predict.gnn_degrees.sampled_hops` follows the degrees)."""
    out = [float(min(batch, nodes))]
    draws = out[0]
    for f in fanouts:
        draws += out[-1] * f
        out.append(max(out[-1], nodes * -math.expm1(-draws / nodes)))
    return out


def sampled_cost(
    spec: GnnSpec, *, nodes: int, edges: int, degrees: DegreeDistribution | None = None
) -> GnnCost:
    """One mini-batch: ``spec.batch`` seeds, ``spec.fanouts[0]`` neighbours each at the first
    hop, ...; layer ``l`` computes the ``l``-th hop inwards. Without ``degrees`` every node is
    at the mean degree (fan-outs capped by it, uniform draws); with them the sampled edges
    and distinct nodes per hop follow the distribution
    (:func:`gpucast.predict.gnn_degrees.sampled_hops`)."""
    _check_graph(nodes, edges)
    if spec.batch is None or not spec.fanouts:
        raise InvalidSpecError("fanouts", "mini-batch pricing needs --batch and --fanouts")
    if degrees is None:
        fan = [min(f, max(edges / nodes, 1.0)) for f in spec.fanouts]
        hops = sampled_nodes(nodes, spec.batch, fan)
        per_hop = [hops[hop] * f for hop, f in enumerate(fan)]  # hop h+1 from the nodes up to h
    else:
        hops, per_hop = sampled_hops(degrees, spec.batch, spec.fanouts)
    # the first layer runs on the outermost hop: layer i maps hop L-i -> hop L-i-1
    last = spec.layers - 1
    dst = [hops[last - i] for i in range(spec.layers)]
    src = [hops[last + 1 - i] for i in range(spec.layers)]
    cost = _layer_cost(spec, dst, src, [per_hop[last - i] for i in range(spec.layers)])
    fetch = hops[-1] * spec.feature_dim * spec.bytes_per_value
    return GnnCost(
        transform_flops=cost.transform_flops,
        aggregation_bytes=cost.aggregation_bytes,
        dense_aggregation_flops=cost.dense_aggregation_flops,
        feature_fetch_bytes=fetch,
        edges=cost.edges,
        nodes_per_hop=tuple(hops),
        kernels=training_kernels(spec),
    )


def cpu_sampling_s(sampled_edges: float, *, edges_per_s: float, workers: int) -> float:
    """Seconds of CPU neighbour sampling per mini-batch: ``sampled_edges`` at ``edges_per_s``
    per worker, ``workers`` sampling in parallel (linear: each prepares its own batches)."""
    _positive_int("sampler workers", workers)
    if not (math.isfinite(edges_per_s) and edges_per_s > 0):
        raise InvalidSpecError("sampler rate", "must be a number > 0", got=edges_per_s)
    if not (math.isfinite(sampled_edges) and sampled_edges >= 0):
        raise InvalidSpecError("sampled edges", "must be a number >= 0", got=sampled_edges)
    return sampled_edges / (edges_per_s * workers)


def bounded_step_s(gpu_s: float, sampling_s: float, *, prefetch: bool) -> float:
    """The step a trainer sees: ``max(gpu, sampling)`` when batches are prefetched (sampling
    overlaps the GPU step), ``gpu + sampling`` when it waits for each batch."""
    return max(gpu_s, sampling_s) if prefetch else gpu_s + sampling_s


def _edges(src: npt.ArrayLike, dst: npt.ArrayLike, nodes: int) -> tuple[IntArray, IntArray]:
    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    if s.shape != d.shape or s.ndim != 1:
        raise InvalidSpecError("edges", "src and dst must be 1-D arrays of the same length")
    if s.size and (min(s.min(), d.min()) < 0 or max(s.max(), d.max()) >= nodes):
        raise InvalidSpecError("edges", f"node ids must be in [0, {nodes})")
    return s, d


def halo_nodes(src: npt.ArrayLike, dst: npt.ArrayLike, parts: npt.ArrayLike) -> IntArray:
    """Per part: distinct nodes of other parts with an edge ``src -> dst`` into the part
    (messages flow from ``src`` to ``dst``; pass both directions for an undirected graph)."""
    p = np.asarray(parts, dtype=np.int64)
    s, d = _edges(src, dst, len(p))
    k = int(p.max()) + 1 if p.size else 0
    cross = p[s] != p[d]
    key = np.unique(p[d[cross]] * len(p) + s[cross])  # (receiving part, remote node)
    return np.bincount(key // len(p), minlength=k).astype(np.int64)


def bytes_per_halo_node(spec: GnnSpec) -> float:
    """Bytes one halo node moves in a full-graph epoch: every layer's input forward, and the
    gradient of every layer's input but the first backward (the input features are data: no
    gradient flows to them, so no part sends one back)."""
    dims = spec.dims()
    forward = sum(d_in for d_in, _ in dims)
    backward = forward - dims[0][0]
    return float((forward + backward) * spec.bytes_per_value)


def halo_bytes_per_epoch(halo: npt.ArrayLike, spec: GnnSpec) -> float:
    """Bytes crossing between parts in one full-graph epoch: each halo node's
    :func:`bytes_per_halo_node`."""
    return float(np.asarray(halo, dtype=np.float64).sum() * bytes_per_halo_node(spec))


def expected_random_halo(
    degrees: npt.ArrayLike, parts: int, *, counts: npt.ArrayLike | None = None
) -> float:
    """Expected total halo nodes of a uniformly random partition into ``parts`` parts, from the
    (out-)degree of each node: ``sum_v (k - 1)(1 - (1 - 1/k)^deg(v))``; ``counts`` weighs each
    degree by its nodes (a histogram) instead of one node each."""
    _positive_int("parts", parts)
    deg = np.asarray(degrees, dtype=np.float64)
    weight = np.ones_like(deg) if counts is None else np.asarray(counts, dtype=np.float64)
    if parts == 1:
        return 0.0
    return float((parts - 1) * (weight * -np.expm1(deg * math.log1p(-1.0 / parts))).sum())


def metis_partition(nodes: int, src: npt.ArrayLike, dst: npt.ArrayLike, parts: int) -> IntArray:
    """METIS k-way partition of the undirected graph (needs ``pip install gpucast[graph]``).

    Only the nodes with an edge go to METIS; the isolated ones (no halo, no cut) then fill
    the parts to the same node count. METIS alone took minutes on a few edges among a
    million ids (ids a user's ``--nodes`` or a stray id left unused) and, at 90 million,
    failed with "Caught an unknown exception!"."""
    _positive_int("parts", parts)
    s, d = _edges(src, dst, nodes)
    try:
        import pymetis  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise InvalidInputError(
            "graph partitioning needs pymetis", fix="pip install 'gpucast[graph]'"
        ) from None
    if parts == 1:
        return np.zeros(nodes, dtype=np.int64)
    keep = s != d
    a = np.concatenate([s[keep], d[keep]])
    b = np.concatenate([d[keep], s[keep]])
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    dup = np.concatenate([[False], (a[1:] == a[:-1]) & (b[1:] == b[:-1])])
    a, b = a[~dup], b[~dup]
    degree = np.bincount(a, minlength=nodes)
    linked = np.flatnonzero(degree)
    membership = np.zeros(nodes, dtype=np.int64)
    if linked.size > parts:
        xadj = np.concatenate([[0], np.cumsum(degree[linked])])
        renumbered = np.searchsorted(linked, b)  # the linked nodes as 0..m-1
        adjacency = pymetis.CSRAdjacency(xadj.astype(np.int32), renumbered.astype(np.int32))
        _, linked_parts = pymetis.part_graph(parts, adjacency=adjacency)
        membership[linked] = linked_parts
    else:  # no more linked nodes than parts: one each
        membership[linked] = np.arange(linked.size)
    isolated = np.flatnonzero(degree == 0)
    room = _fill(np.bincount(membership[linked], minlength=parts), isolated.size)
    membership[isolated] = np.repeat(np.arange(parts), room)
    return membership


def _fill(counts: IntArray, more: int) -> IntArray:
    """How many of ``more`` nodes each part takes so the parts' counts end as even as they
    can (water-filling: the fewest first, up to the lowest level that takes them all)."""
    lo, hi = int(counts.min()), int(counts.max()) + more
    while lo < hi:  # the lowest level whose room holds them all
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if np.maximum(mid - counts, 0).sum() >= more else (mid + 1, hi)
    room = np.maximum(lo - 1 - counts, 0)
    room[np.flatnonzero(counts < lo)[: more - int(room.sum())]] += 1
    return room

"""GAT and R-GAT training steps priced from graph statistics (mini-batch, neighbour sampling).

A GAT layer (Velickovic et al.) transforms the source and destination nodes per head (dense
matmuls), computes one attention logit per edge and head (``E x heads`` gathers of the per-node
halves ``a_src . W h_j`` and ``a_dst . W h_i``), normalises them with a softmax over each
node's in-edges (a segment softmax: memory-bound passes over the ``E x heads`` logits) and sums
the weighted messages (``E x hidden`` gathered values, memory-bound). ``hidden`` is the
concatenated width: ``heads`` heads of ``hidden / heads`` units each.

An R-GAT (relational GAT, Busbridge et al.; the MLPerf ``gnn`` model) runs one GAT per
relation type of a heterogeneous graph and sums, per destination node type, the outputs of
the relations into it. The graph is given by its statistics: node types (count, feature
dimension) and relation types (source type, destination type, edges); a homogeneous GAT is
the same with one node type and one relation.

Mini-batch sampling (:func:`gat_cost`): ``batch`` seeds of the target node type, then at hop
``l`` every node reached so far samples ``min(f_l, in-degree)`` in-neighbours per relation
into its type, the draws landing on the source nodes by their out-degree along the relation
and a node reached along several relations counted once
(:func:`gpucast.predict.gnn_degrees.sampled_relations`). Each relation's degrees are its
``powerlaw:ALPHA`` laws where given (:attr:`Relation.in_alpha`, :attr:`Relation.out_alpha`),
else every node at the relation's mean (uniform draws: an upper estimate on a skewed graph,
hubs repeat more); a homogeneous graph may take any degree distribution instead.

Full graph (:func:`full_graph_gat_cost`): every layer runs on all nodes and all edges -- the
same pieces with every node and edge in every layer, no sampling and no feature gathers (the
features are in HBM); a relation within one node type transforms its nodes once (source and
destination are the same rows). :func:`full_graph_gat_bytes` is the memory it needs.

:class:`GatCost` carries the work of one step: transform FLOPs, edge bytes (attention,
softmax, aggregation), sampling bytes, the input features gathered, the aggregation priced
as a dense adjacency matmul (the gap a dense roofline would make) and the kernels the step
launches (:func:`step_kernels`): a step takes at least their launches
(:func:`gpucast.predict.gnn.launch_floor_s`, as GCN and GraphSAGE steps are priced), which
is what paces a mini-batch on a small graph. :func:`place_features`
splits the feature gathers between this GPU's HBM, peers over NVLink, other nodes over the
network and host memory over PCIe, from where the features are stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.gnn import OPTIMIZER_KERNELS, fanouts_fix, launch_floor_s
from gpucast.predict.gnn_degrees import (
    DegreeDistribution,
    RelationDegrees,
    relation_degrees,
    sampled_relations,
)

FloatArray = npt.NDArray[np.float64]
#: Forward + backward: the backward pass moves and computes about twice the forward.
TRAIN_FACTOR = 3.0
#: HBM bytes per sampled edge: the neighbour's index (a 32-byte sector read at random) and its
#: insertion into the hash table that de-duplicates the sampled nodes (another sector).
SAMPLE_BYTES_PER_EDGE = 64.0
#: Attention passes over the ``E x heads`` logits: gather both halves, exponentiate, sum per
#: node, normalise.
SOFTMAX_PASSES = 4
MAX_LAYERS = 64
#: Forward kernels of one relation in one layer besides its transforms (a matmul per side,
#: one when source and destination are the same rows), as GATConv runs eagerly in DGL and PyG:
#: the two attention halves (a multiply and a row sum each), the edge logit (an add and a
#: leaky ReLU), the segment softmax (:data:`SOFTMAX_PASSES`) and the weighted aggregation.
ATTENTION_KERNELS = 4 + 2 + SOFTMAX_PASSES + 1
#: Per destination node type and layer: the bias and the activation (and one add per further
#: relation into the type).
OUTPUT_KERNELS = 2
#: The classifier on the seeds: a matmul, log-softmax and the loss.
CLASSIFIER_KERNELS = 3
#: Neighbour sampling on the GPU per hop and relation: the draws, the de-duplicating hash
#: insert and the relabelling (and one feature gather per node type).
SAMPLER_KERNELS = 3


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InvalidSpecError(name, f"must be an integer >= {minimum}", got=value)
    return int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeType:
    """One node type: how many nodes and the width of their input features."""

    name: str
    count: int
    feature_dim: int

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpecError("node type", "needs a name")
        _count(f"nodes of {self.name}", self.count, 1)
        _count(f"feature_dim of {self.name}", self.feature_dim, 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Relation:
    """One relation type: messages flow along ``edges`` edges from ``src`` to ``dst`` nodes."""

    name: str
    src: str
    dst: str
    edges: int
    #: ``powerlaw:ALPHA`` exponents of the destination nodes' in-degree and the source nodes'
    #: out-degree along the relation; None: the mean (:func:`gnn_degrees.relation_degrees`).
    in_alpha: float | None = None
    out_alpha: float | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpecError("relation", "needs a name")
        _count(f"edges of {self.name}", self.edges, 0)

    def describe_degrees(self) -> str:
        """The relation's laws in words (what the sampler assumed)."""
        into = "mean" if self.in_alpha is None else f"powerlaw:{self.in_alpha:g}"
        if self.out_alpha is not None:
            out = f"powerlaw:{self.out_alpha:g}"
        elif self.in_alpha is not None and self.src == self.dst:
            out = "the same nodes (in = out)"
        else:
            out = "uniform (mean)"
        return f"{self.name} ({self.src} -> {self.dst}): in-degree {into}, out-degree {out}"


@dataclass(frozen=True, slots=True, kw_only=True)
class HeteroGraph:
    """A heterogeneous graph by its statistics."""

    name: str
    node_types: tuple[NodeType, ...]
    relations: tuple[Relation, ...]

    def __post_init__(self) -> None:
        if not self.node_types:
            raise InvalidSpecError("node types", "a graph needs at least one node type")
        if not self.relations:
            raise InvalidSpecError("relations", "a graph needs at least one relation")
        names = [t.name for t in self.node_types]
        if len(set(names)) != len(names):
            raise InvalidSpecError("node types", "names must be distinct", got=names)
        rels = [r.name for r in self.relations]
        if len(set(rels)) != len(rels):
            raise InvalidSpecError("relations", "names must be distinct", got=rels)
        for r in self.relations:
            for end in (r.src, r.dst):
                if end not in names:
                    raise InvalidSpecError(
                        "relation",
                        f"{r.name} names unknown node type {end!r}",
                        fix=f"use one of {', '.join(names)}",
                    )

    @classmethod
    def homogeneous(cls, *, nodes: int, edges: int, feature_dim: int) -> HeteroGraph:
        """One node type and one relation (a plain GAT)."""
        return cls(
            name="graph",
            node_types=(NodeType(name="node", count=nodes, feature_dim=feature_dim),),
            relations=(Relation(name="edge", src="node", dst="node", edges=edges),),
        )

    def index(self, node_type: str) -> int:
        for i, t in enumerate(self.node_types):
            if t.name == node_type:
                return i
        raise InvalidSpecError(
            "target",
            f"unknown node type {node_type!r}",
            fix=f"use one of {', '.join(t.name for t in self.node_types)}",
        )

    def with_reverse(self) -> HeteroGraph:
        """Each relation also sampled backwards (``rev_<name>``, its in- and out-degree laws
        swapped), as the MLPerf reference does; a relation within one node type gets both
        directions in itself (its edges doubled, its law then the total degree's), as the
        reference treats citations."""
        rels: list[Relation] = []
        for r in self.relations:
            if r.src == r.dst:
                rels.append(replace(r, edges=2 * r.edges))
            else:
                rels += [r, Relation(name=f"rev_{r.name}", src=r.dst, dst=r.src, edges=r.edges,
                                     in_alpha=r.out_alpha, out_alpha=r.in_alpha)]  # fmt: skip
        return replace(self, relations=tuple(rels))

    def counts(self) -> FloatArray:
        return np.array([t.count for t in self.node_types], dtype=np.float64)

    def feature_dims(self) -> FloatArray:
        return np.array([t.feature_dim for t in self.node_types], dtype=np.float64)

    def feature_bytes(self, bytes_per_value: float) -> float:
        """All input features of the graph."""
        return float((self.counts() * self.feature_dims()).sum() * bytes_per_value)

    def structure_bytes(self) -> float:
        """The sampled graph in CSC form: an int32 index per edge, an int64 pointer per node
        and relation."""
        return float(
            sum(4.0 * r.edges + 8.0 * self.node_types[self.index(r.dst)].count
                for r in self.relations)
        )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class GatSpec:
    """A GAT / R-GAT: layers, concatenated width, heads, fan-outs and seeds per GPU (neither
    for full-graph training)."""

    heads: int
    hidden: int
    classes: int
    layers: int
    fanouts: tuple[int, ...] = ()
    batch: int | None = None
    target: str = ""
    activation_bytes: int = 2

    def __post_init__(self) -> None:
        _count("heads", self.heads, 1)
        _count("hidden", self.hidden, 1)
        _count("classes", self.classes, 1)
        _count("layers", self.layers, 1)
        if self.batch is not None:
            _count("batch", self.batch, 1)
        _count("activation_bytes", self.activation_bytes, 1)
        if self.layers > MAX_LAYERS:
            raise InvalidSpecError("layers", f"must be <= {MAX_LAYERS}", got=self.layers)
        if self.hidden % self.heads:
            low = self.hidden // self.heads * self.heads
            raise InvalidSpecError(
                "hidden",
                f"must be a multiple of --heads ({self.heads}): it is heads x units per head "
                "(GATConv's out_channels per head, concatenated)",
                got=self.hidden,
                fix=f"e.g. --hidden {f'{low} or ' if low else ''}{low + self.heads}, or --heads "
                "dividing it",
            )
        if self.batch is None and self.fanouts:
            raise InvalidSpecError(
                "fanouts", "are for mini-batches: give --batch too, or neither for the full graph"
            )
        if self.batch is not None and len(self.fanouts) != self.layers:
            raise InvalidSpecError(
                "fanouts", f"needs one fan-out per layer ({self.layers})", got=self.fanouts,
                fix=fanouts_fix(self.layers, len(self.fanouts)),
            )  # fmt: skip
        for f in self.fanouts:
            if isinstance(f, bool) or not isinstance(f, int | np.integer) or f < 1:
                raise InvalidSpecError(
                    "fanouts", "every fan-out must be an integer >= 1", got=self.fanouts,
                    fix="e.g. --fanouts 15,10,5",
                )  # fmt: skip

    def parameters(self, graph: HeteroGraph) -> float:
        """Trainable weights: per layer and relation a source and a destination transform and
        the two attention vectors; the final linear layer on the target type."""
        dims = graph.feature_dims()
        total = 0.0
        for layer in range(self.layers):
            for r in graph.relations:
                d_src = dims[graph.index(r.src)] if layer == 0 else self.hidden
                d_dst = dims[graph.index(r.dst)] if layer == 0 else self.hidden
                total += (d_src + d_dst) * self.hidden + 2 * self.hidden
        return total + self.hidden * self.classes


@dataclass(frozen=True, slots=True, kw_only=True)
class GatCost:
    """Work of one step on one GPU."""

    gemm_flops: tuple[float, ...]
    gemm_bytes: tuple[float, ...]
    edge_bytes: float
    dense_aggregation_flops: float
    sampling_bytes: float
    feature_bytes: float
    sampled_edges: float
    nodes_per_hop: tuple[float, ...]
    input_nodes: float
    forward_share: tuple[float, ...] = ()
    #: kernel launches of the step and of its forward pass alone (:func:`step_kernels`)
    kernels: float = 0.0
    forward_kernels: float = 0.0
    #: HBM one mini-batch takes: its input features, sampled edges and every layer's
    #: activations with their gradients (:func:`gat_cost`)
    batch_bytes: float = 0.0

    @property
    def transform_flops(self) -> float:
        return float(sum(self.gemm_flops))

    def forward_only(self) -> GatCost:
        """The same mini-batch without the backward pass (evaluation)."""
        f = self.forward_share
        return replace(
            self,
            gemm_flops=tuple(v * s for v, s in zip(self.gemm_flops, f, strict=True)),
            gemm_bytes=tuple(v * s for v, s in zip(self.gemm_bytes, f, strict=True)),
            edge_bytes=self.edge_bytes / TRAIN_FACTOR,
            dense_aggregation_flops=self.dense_aggregation_flops / TRAIN_FACTOR,
            forward_share=tuple(1.0 for _ in f),
            kernels=self.forward_kernels,
        )

    def compute_s(self, *, tflops: float, hbm_gbps: float) -> float:
        """Transforms (each matmul at the slower of its FLOPs and its bytes), attention and
        aggregation (HBM-bound) and sampling (HBM-bound)."""
        flops = np.asarray(self.gemm_flops) / (tflops * 1e12)
        moved = np.asarray(self.gemm_bytes) / (hbm_gbps * 1e9)
        gemm = float(np.maximum(flops, moved).sum())
        return gemm + (self.edge_bytes + self.sampling_bytes) / (hbm_gbps * 1e9)

    def dense_s(self, *, tflops: float, kernel_overhead_s: float = 0.0) -> float:
        """The aggregation priced as a dense adjacency matmul, plus the same transforms, the
        same kernels launched (:func:`gpucast.predict.gnn.launch_floor_s`)."""
        work = (self.transform_flops + self.dense_aggregation_flops) / (tflops * 1e12)
        return launch_floor_s(work, self.kernels, kernel_overhead_s)


def step_kernels(
    graph: HeteroGraph, spec: GatSpec, *, shared: npt.NDArray[np.bool_], sampled: bool
) -> tuple[float, float]:
    """(a training step, its forward pass alone) in kernel launches: per layer and relation
    its transforms (one when ``shared``) and :data:`ATTENTION_KERNELS`, per layer and
    destination type :data:`OUTPUT_KERNELS` and the sum over its relations, then
    :data:`CLASSIFIER_KERNELS`; the backward launches about twice the forward (``TRAIN_FACTOR``
    x the forward in all), the optimizer :data:`~gpucast.predict.gnn.OPTIMIZER_KERNELS`; a
    mini-batch also samples (:data:`SAMPLER_KERNELS` per hop and relation, a feature gather
    per node type), in training and evaluation alike."""
    into: dict[str, int] = {}
    for r in graph.relations:
        into[r.dst] = into.get(r.dst, 0) + 1
    per_layer = sum((1.0 if s else 2.0) + ATTENTION_KERNELS for s in shared)
    per_layer += sum(OUTPUT_KERNELS + n - 1 for n in into.values())
    forward = spec.layers * per_layer + CLASSIFIER_KERNELS
    sampling = 0.0
    if sampled:
        sampling = spec.layers * len(graph.relations) * SAMPLER_KERNELS + len(graph.node_types)
    return TRAIN_FACTOR * forward + OPTIMIZER_KERNELS + sampling, forward + sampling


def has_degree_laws(graph: HeteroGraph) -> bool:
    """Whether any relation carries a degree law (else every node is at the mean)."""
    return any(r.in_alpha is not None or r.out_alpha is not None for r in graph.relations)


def relation_laws(graph: HeteroGraph) -> list[RelationDegrees]:
    """Each relation's sides (:func:`gnn_degrees.relation_degrees`); ``rev_<name>`` of a
    relation ``<name>`` (the same edges, ends swapped, as :meth:`HeteroGraph.with_reverse`
    makes) shares its sides, swapped: the same nodes with the same degrees."""
    counts = [t.count for t in graph.node_types]
    out: list[RelationDegrees] = []
    done: dict[str, tuple[Relation, RelationDegrees]] = {}
    for r in graph.relations:
        src, dst = graph.index(r.src), graph.index(r.dst)
        q, law = done.get(r.name.removeprefix("rev_"), (None, None))
        if (
            law is not None and q is not None and r.name.startswith("rev_")
            and (q.src, q.dst, q.edges) == (r.dst, r.src, r.edges)
            and (q.in_alpha, q.out_alpha) == (r.out_alpha, r.in_alpha)
        ):  # fmt: skip
            out.append(RelationDegrees(src=src, dst=dst, into=law.out_of, out_of=law.into))
            continue
        done[r.name] = (r, relation_degrees(
            src=src, dst=dst, nodes_src=counts[src], nodes_dst=counts[dst], edges=r.edges,
            in_alpha=r.in_alpha, out_alpha=r.out_alpha,
        ))  # fmt: skip
        out.append(done[r.name][1])
    return out


def sampled_hetero(
    graph: HeteroGraph, target: str, batch: int, fanouts: Sequence[int],
    degrees: DegreeDistribution | None = None,
) -> tuple[FloatArray, FloatArray]:  # fmt: skip
    """Expected distinct nodes per type up to each hop (``(L+1, T)``, seeds first) and sampled
    edges per hop and relation (``(L, R)``), by :func:`gnn_degrees.sampled_relations` over the
    relations' degree laws (none: every node at the mean); ``degrees`` (one relation only)
    samples a homogeneous graph by that distribution."""
    if degrees is not None:
        if len(graph.relations) != 1:
            raise InvalidSpecError(
                "degrees", "a degree distribution is taken for a homogeneous graph (one relation)"
            )
        laws = [RelationDegrees(src=0, dst=0, into=degrees, out_of=degrees)]
        counts = np.array([degrees.nodes])
    else:
        laws, counts = relation_laws(graph), graph.counts()
    seeds = np.zeros(len(counts))
    seeds[graph.index(target)] = batch
    return sampled_relations(counts, laws, seeds, fanouts)


def _layers_cost(
    graph: HeteroGraph, spec: GatSpec, nodes: FloatArray, edges: FloatArray, *,
    seeds: float, shared: npt.NDArray[np.bool_],
) -> tuple[list[float], list[float], list[float], float, float]:  # fmt: skip
    """The pieces of one training step over layers whose inputs are ``nodes[L - l]`` (per type)
    and edges ``edges[L - 1 - l]`` (per relation): the matmuls' FLOPs, bytes and forward
    shares, the edge bytes and the dense-adjacency FLOPs. ``shared`` relations transform their
    source rows only (the destinations are the same rows)."""
    src = np.array([graph.index(r.src) for r in graph.relations])
    dst = np.array([graph.index(r.dst) for r in graph.relations])
    dims = graph.feature_dims()
    h, b, L = float(spec.hidden), float(spec.activation_bytes), spec.layers
    gemm_flops: list[float] = []
    gemm_bytes: list[float] = []
    share: list[float] = []
    edge_bytes = dense = 0.0
    for layer in range(L):
        hop = L - layer  # the input layer consumes the outermost hop
        n_src, n_dst, e = nodes[hop][src], nodes[hop - 1][dst], edges[hop - 1]
        d_src = dims[src] if layer == 0 else np.full(len(src), h)
        d_dst = dims[dst] if layer == 0 else np.full(len(dst), h)
        # the input features need no gradient: the first layer's backward is the weights' only
        factor = TRAIN_FACTOR - 1.0 if layer == 0 else TRAIN_FACTOR
        for n, d in ((n_src, d_src), (np.where(shared, 0.0, n_dst), d_dst)):  # W_src, W_dst
            gemm_flops += list(factor * 2.0 * n * (d + 1.0) * h)  # and the attention halves
            gemm_bytes += list(factor * n * (d + h) * b)
            share += [1.0 / factor] * len(n)
        edge_bytes += TRAIN_FACTOR * float(
            (e * (h + SOFTMAX_PASSES * spec.heads) * b + n_dst * h * b).sum()
        )
        dense += TRAIN_FACTOR * float((2.0 * n_dst * n_src * h).sum())
    gemm_flops.append(TRAIN_FACTOR * 2.0 * seeds * h * spec.classes)
    gemm_bytes.append(TRAIN_FACTOR * seeds * (h + spec.classes) * b)
    share.append(1.0 / TRAIN_FACTOR)
    return gemm_flops, gemm_bytes, share, edge_bytes, dense


def gat_cost(
    graph: HeteroGraph, spec: GatSpec, *, feature_bytes_per_value: float,
    degrees: DegreeDistribution | None = None,
) -> GatCost:  # fmt: skip
    """One training step of ``spec.batch`` seeds (module docstring)."""
    if spec.batch is None:
        raise InvalidSpecError("batch", "mini-batch pricing needs --batch and --fanouts")
    target = spec.target or graph.node_types[0].name
    nodes, edges = sampled_hetero(graph, target, spec.batch, spec.fanouts, degrees)
    shared = np.zeros(len(graph.relations), dtype=bool)
    flops, moved, share, edge_bytes, dense = _layers_cost(
        graph, spec, nodes, edges, seeds=float(nodes[0].sum()), shared=shared
    )
    kernels, forward_kernels = step_kernels(graph, spec, shared=shared, sampled=True)
    sampled = float(edges.sum())
    features = float((nodes[-1] * graph.feature_dims()).sum() * feature_bytes_per_value)
    return GatCost(
        gemm_flops=tuple(flops),
        gemm_bytes=tuple(moved),
        edge_bytes=edge_bytes,
        dense_aggregation_flops=dense,
        sampling_bytes=sampled * SAMPLE_BYTES_PER_EDGE,
        feature_bytes=features,
        sampled_edges=sampled,
        nodes_per_hop=tuple(float(v) for v in nodes.sum(axis=1)),
        input_nodes=float(nodes[-1].sum()),
        forward_share=tuple(share),
        kernels=kernels,
        forward_kernels=forward_kernels,
        batch_bytes=features + _batch_activation_bytes(graph, spec, nodes, edges),
    )


def _batch_activation_bytes(
    graph: HeteroGraph, spec: GatSpec, nodes: FloatArray, edges: FloatArray
) -> float:
    """A mini-batch's sampled edges (two 4-byte ids each) and every layer's activations with
    their gradients (``x2``), as :func:`full_graph_gat_bytes` counts the full graph: per
    relation the transformed sources and destinations and the attention logits and
    coefficients (``2 E x heads``), per node type the layer's output."""
    src = np.array([graph.index(r.src) for r in graph.relations])
    dst = np.array([graph.index(r.dst) for r in graph.relations])
    values = 0.0
    for hop in range(spec.layers, 0, -1):  # the first layer consumes the outermost hop
        rows = nodes[hop][src] + nodes[hop - 1][dst]
        values += float((rows * spec.hidden + 2.0 * edges[hop - 1] * spec.heads).sum())
        values += float(nodes[hop - 1].sum()) * spec.hidden
    return 8.0 * float(edges.sum()) + 2.0 * values * spec.activation_bytes


def _same_type(graph: HeteroGraph) -> npt.NDArray[np.bool_]:
    return np.array([r.src == r.dst for r in graph.relations], dtype=bool)


def full_graph_gat_cost(graph: HeteroGraph, spec: GatSpec) -> GatCost:
    """One full-graph training step: every layer on all nodes and edges (module docstring);
    the classifier runs on every node of the target type."""
    target = spec.target or graph.node_types[0].name
    counts = graph.counts()
    nodes = np.tile(counts, (spec.layers + 1, 1))
    edges = np.tile([float(r.edges) for r in graph.relations], (spec.layers, 1))
    shared = _same_type(graph)
    flops, moved, share, edge_bytes, dense = _layers_cost(
        graph, spec, nodes, edges, seeds=float(counts[graph.index(target)]), shared=shared
    )
    kernels, forward_kernels = step_kernels(graph, spec, shared=shared, sampled=False)
    return GatCost(
        gemm_flops=tuple(flops),
        gemm_bytes=tuple(moved),
        edge_bytes=edge_bytes,
        dense_aggregation_flops=dense,
        sampling_bytes=0.0,
        feature_bytes=0.0,
        sampled_edges=0.0,
        nodes_per_hop=(),
        input_nodes=float(counts.sum()),
        forward_share=tuple(share),
        kernels=kernels,
        forward_kernels=forward_kernels,
    )


def full_graph_gat_bytes(
    graph: HeteroGraph, spec: GatSpec, *, feature_bytes_per_value: float
) -> float:
    """Memory of full-graph training: the graph (CSC), the input features, and every layer's
    activations with their gradients (``x2``): per relation the transformed sources (and
    destinations of another type), the attention logits and coefficients (``2 E x heads``),
    and per node type the layer's output."""
    counts = graph.counts()
    per_layer = float(counts.sum()) * spec.hidden
    for r, same in zip(graph.relations, _same_type(graph), strict=True):
        rows = counts[graph.index(r.src)] + (0.0 if same else counts[graph.index(r.dst)])
        per_layer += rows * spec.hidden + 2.0 * r.edges * spec.heads
    activations = 2.0 * spec.layers * per_layer * spec.activation_bytes
    return graph.structure_bytes() + graph.feature_bytes(feature_bytes_per_value) + activations


@dataclass(frozen=True, slots=True, kw_only=True)
class FeaturePlacement:
    """Shares of one GPU's feature gathers by where the rows live (they sum to 1)."""

    local: float
    peers: float
    network: float
    host: float

    def fetch_s(
        self, data_bytes: float, *, hbm_gbps: float, peer_gbps: float, network_gbps: float,
        host_gbps: float,
    ) -> float:  # fmt: skip
        """Seconds to gather ``data_bytes``, the parts one after another (GB/s each)."""
        return data_bytes * (
            self.local / hbm_gbps + self.peers / peer_gbps
            + (self.network / network_gbps if self.network else 0.0)
            + (self.host / host_gbps if self.host else 0.0)
        ) / 1e9  # fmt: skip

    def describe(self) -> str:
        parts = [
            (self.local, "this GPU's HBM"),
            (self.peers, "other GPUs of the node (NVLink)"),
            (self.network, "other nodes (network)"),
            (self.host, "host memory (PCIe / UVM)"),
        ]
        return ", ".join(f"{s:.0%} {w}" for s, w in parts if s > 0.0005)


def place_features(
    total_bytes: float, *, gpus: int, gpus_per_node: int, free_bytes_per_gpu: float,
    location: str = "auto", sharding: str = "node",
) -> FeaturePlacement:  # fmt: skip
    """Where a random sampled row lives. ``location`` ``gpu``: sharded evenly over GPU memory
    (NVIDIA's WholeGraph), ``host``: all in host memory, ``auto``: as much as fits in
    ``free_bytes_per_gpu`` on the GPUs of the shard, the rest in host memory. ``sharding``
    ``node``: each node holds a copy over its own GPUs (no feature traffic between nodes);
    ``global``: one copy over all GPUs (a row is on another node with share
    ``(gpus - per_node) / gpus``)."""
    _count("gpus", gpus, 1)
    _count("gpus_per_node", gpus_per_node, 1)
    if location not in ("auto", "gpu", "host"):
        raise InvalidSpecError("feature_location", "must be auto, gpu or host", got=location)
    if sharding not in ("node", "global"):
        raise InvalidSpecError("feature_sharding", "must be node or global", got=sharding)
    if location == "host":
        return FeaturePlacement(local=0.0, peers=0.0, network=0.0, host=1.0)
    per_node = min(gpus, gpus_per_node)
    shard = per_node if sharding == "node" else gpus
    on_gpu = 1.0
    if location == "auto":
        room = max(free_bytes_per_gpu, 0.0) * shard
        on_gpu = 1.0 if total_bytes <= room else room / total_bytes
    return FeaturePlacement(
        local=on_gpu / shard,
        peers=on_gpu * (per_node - 1) / shard,
        network=on_gpu * (shard - per_node) / shard,
        host=1.0 - on_gpu,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GatStepTime:
    """One training step on one GPU by phase (seconds). The GPU's part is the slower of its
    kernels' work (``compute_s``) and the host's launches of them (``launch_s``:
    :func:`gpucast.predict.gnn.launch_floor_s`). With ``overlap`` the next batch's features
    are gathered while this one computes (NVIDIA's ``TRAIN_OVERLAP``): the slower of the two
    counts; without, they add. The gradient all-reduce is added either way."""

    compute_s: float
    feature_fetch_s: float
    allreduce_s: float
    overlap: bool = True
    launch_s: float = 0.0

    @property
    def gpu_s(self) -> float:
        return max(self.compute_s, self.launch_s)

    @property
    def total_s(self) -> float:
        if self.overlap:
            return max(self.gpu_s, self.feature_fetch_s) + self.allreduce_s
        return self.gpu_s + self.feature_fetch_s + self.allreduce_s


def gat_step_time(
    cost: GatCost, placement: FeaturePlacement, *, tflops: float, hbm_gbps: float,
    peer_gbps: float, network_gbps: float, host_gbps: float, allreduce_s: float = 0.0,
    overlap: bool = True, kernel_overhead_s: float = 0.0,
) -> GatStepTime:  # fmt: skip
    """The step from its work, where the features live and the links (GB/s; TFLOP/s), its
    kernels launched at ``kernel_overhead_s`` each (0: no launch floor)."""
    launch = launch_floor_s(0.0, cost.kernels, kernel_overhead_s)
    return GatStepTime(
        compute_s=cost.compute_s(tflops=tflops, hbm_gbps=hbm_gbps),
        feature_fetch_s=placement.fetch_s(
            cost.feature_bytes,
            hbm_gbps=hbm_gbps,
            peer_gbps=peer_gbps,
            network_gbps=network_gbps,
            host_gbps=host_gbps,
        ),
        allreduce_s=allreduce_s,
        overlap=overlap,
        launch_s=launch,
    )

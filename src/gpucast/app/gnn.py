"""``gpucast.predict_gnn``: one GCN / GraphSAGE training step on a GPU, priced sparse.

The graph is given by its statistics (``--nodes``, ``--edges``) or an edge list
(``--edge-list FILE``; self-loops and out-of-range ids are counted and skipped). The step
comes from :mod:`gpucast.predict.gnn`: aggregation as SpMM gathers at the GPU's HBM bandwidth,
transforms at a share of its peak, mini-batches (``--batch`` and ``--fanouts``) with the
sampled nodes' features fetched over PCIe from host memory; the same step priced with a dense
adjacency is shown beside it. With ``--parts K`` and an edge list the graph is partitioned by
METIS (``gpucast[graph]``) and the halo nodes and bytes per full-graph epoch are counted from
the partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import option

#: Achieved share of the GPU's peak on the dense transforms and of HBM on the gathers.
FLOP_EFFICIENCY = 0.4
GATHER_EFFICIENCY = 0.5
#: The most parts a partition is asked for.
MAX_PARTS = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictGnnRequest:
    """A GNN, its graph and the GPU (``gpucast predict gnn``)."""

    VERB: ClassVar[str] = "predict gnn"

    model: str = option("gcn", help="gcn or sage (GraphSAGE, mean aggregator).", example="sage")
    gpu: str = option(help="Catalog GPU name.", example="A100-80GB")
    nodes: int | None = option(
        None, help="Nodes of the graph (or the id range of --edge-list).", example="2449029"
    )
    edges: int | None = option(
        None, help="Directed edges (messages; twice the undirected edges).", example="123718280"
    )
    edge_list: Path | None = option(
        None, help="Edge list: 'src dst' per line (instead of --edges).", example="edges.txt"
    )
    allow_self_loops: bool = option(
        False, negative="no-allow-self-loops", help="Keep self-loops of --edge-list."
    )
    feature_dim: int = option(128, help="Input features per node.", example="100")
    hidden: int = option(256, help="Hidden units per layer.", example="256")
    classes: int = option(47, help="Output classes.", example="47")
    layers: int = option(2, help="GNN layers.", example="3")
    batch: int | None = option(None, help="Seed nodes per mini-batch (with --fanouts).")
    fanouts: tuple[int, ...] = option(
        (), help="Neighbours sampled per layer, seeds outwards (with --batch).", example="15,10"
    )
    parts: int | None = option(
        None, help="Partition --edge-list into this many parts (METIS) for the halo.", example="4"
    )

    def __post_init__(self) -> None:
        for name in ("nodes", "edges", "batch", "parts"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise InvalidSpecError(name, "must be an integer >= 1", got=value)
        if self.parts is not None and self.parts > MAX_PARTS:
            raise InvalidSpecError("parts", f"must be <= {MAX_PARTS}", got=self.parts)
        if self.edge_list is None and (self.nodes is None or self.edges is None):
            raise InvalidSpecError(
                "edges", "give --nodes and --edges, or --edge-list", fix="e.g. --nodes 1e6"
            )
        if self.edge_list is not None and self.edges is not None:
            raise InvalidSpecError("edges", "give --edges or --edge-list, not both")
        if self.parts is not None and self.edge_list is None:
            raise InvalidSpecError("parts", "needs --edge-list (the partition is computed)")
        if (self.batch is None) != (not self.fanouts):
            raise InvalidSpecError("fanouts", "give --batch and --fanouts together")


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictGnnResult:
    """Step time sparse and dense, the sampled sizes, the halo, the notes and assumptions."""

    model: str
    gpu: str
    nodes: int
    edges: int
    step_time_s: float
    dense_step_time_s: float
    feature_fetch_s: float
    nodes_per_hop: tuple[float, ...]
    halo_nodes: tuple[int, ...] | None
    halo_bytes_per_epoch: float | None
    notes: tuple[str, ...] = ()
    assumptions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "nodes": self.nodes,
            "edges": self.edges,
            "step_time_s": self.step_time_s,
            "dense_step_time_s": self.dense_step_time_s,
            "dense_over_sparse": self.dense_step_time_s / self.step_time_s,
            "feature_fetch_s": self.feature_fetch_s,
            "nodes_per_hop": list(self.nodes_per_hop),
            "halo_nodes": None if self.halo_nodes is None else list(self.halo_nodes),
            "halo_bytes_per_epoch": self.halo_bytes_per_epoch,
            "notes": list(self.notes),
            "assumptions": dict(self.assumptions),
        }


def predict_gnn(request: PredictGnnRequest | None = None, /, **options: Any) -> PredictGnnResult:
    """One training step of a GCN / GraphSAGE, sparse vs dense (module docstring)."""
    from gpucast.catalog import load_catalog
    from gpucast.plan.inputs import PCIE_GBPS
    from gpucast.predict import gnn

    request = resolve(PredictGnnRequest, request, options)
    if request.model not in gnn.GNN_MODELS:
        raise InvalidSpecError("model", "must be gcn or sage", got=request.model)
    gpu = load_catalog().gpu(request.gpu)
    spec = gnn.GnnSpec(
        model=request.model,
        feature_dim=request.feature_dim,
        hidden=request.hidden,
        classes=request.classes,
        layers=request.layers,
        fanouts=request.fanouts,
        batch=request.batch,
    )
    notes: list[str] = []
    halo = halo_bytes = None
    if request.edge_list is not None:
        from gpucast.inputs.graph import read_edge_list

        graph = read_edge_list(
            request.edge_list, nodes=request.nodes, allow_self_loops=request.allow_self_loops
        )
        nodes, edges = graph.nodes, len(graph.src)
        notes += graph.notes()
        if request.parts is not None:
            if request.parts > nodes:
                raise InvalidSpecError("parts", f"must be <= the {nodes} nodes", got=request.parts)
            parts = gnn.metis_partition(nodes, graph.src, graph.dst, request.parts)
            counted = gnn.halo_nodes(graph.src, graph.dst, parts)
            halo = tuple(int(v) for v in counted)
            halo_bytes = gnn.halo_bytes_per_epoch(counted, spec)
    else:
        assert request.nodes is not None and request.edges is not None
        nodes, edges = request.nodes, request.edges
    if request.batch is not None:
        cost = gnn.sampled_cost(spec, nodes=nodes, edges=edges)
    else:
        cost = gnn.full_graph_cost(spec, nodes=nodes, edges=edges)
    tflops = gpu.peak_tflops("bf16") * FLOP_EFFICIENCY
    hbm = gpu.memory_bandwidth_gbps * GATHER_EFFICIENCY
    pcie = PCIE_GBPS.get(gpu.pcie_generation, 128.0) / 8.0
    host = pcie if request.batch is not None else None
    step = cost.step_time_s(tflops=tflops, memory_gbps=hbm, host_link_gbps=host)
    return PredictGnnResult(
        model=request.model,
        gpu=gpu.name,
        nodes=nodes,
        edges=edges,
        step_time_s=step,
        dense_step_time_s=cost.dense_step_time_s(tflops=tflops),
        feature_fetch_s=0.0 if host is None else cost.feature_fetch_bytes / (host * 1e9),
        nodes_per_hop=cost.nodes_per_hop,
        halo_nodes=halo,
        halo_bytes_per_epoch=halo_bytes,
        notes=tuple(notes),
        assumptions={
            "compute": f"{FLOP_EFFICIENCY:.0%} of {gpu.name}'s BF16 peak on the transforms",
            "gathers": f"{GATHER_EFFICIENCY:.0%} of HBM bandwidth; x3 for forward + backward",
            "features": "mini-batch features in host memory, fetched over PCIe"
            if host is not None
            else "full graph: features and activations in HBM",
            "sampling": "uniform draws over the nodes for the distinct sampled nodes per hop "
            "(hubs repeat more: an upper estimate); CPU sampling time not included",
            "validated": "not validated against GPU measurements (benchmarks/gnn_cpu.py checks "
            "the pricing on the CPU)",
        },
    )

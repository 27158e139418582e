"""``gpucast.predict_gnn``: one GCN / GraphSAGE training step on a GPU, priced sparse.

The graph is given by its statistics (``--nodes``, ``--edges``) or an edge list
(``--edge-list FILE``; self-loops and out-of-range ids are counted and skipped). The step
comes from :mod:`gpucast.predict.gnn`: aggregation as SpMM gathers at the GPU's HBM bandwidth,
transforms at a share of its peak, mini-batches (``--batch`` and ``--fanouts``) with the
sampled nodes' features fetched over PCIe from host memory; the same step priced with a dense
adjacency is shown beside it. With ``--parts K`` and an edge list the graph is partitioned by
METIS (``gpucast[graph]``) and the halo nodes and bytes per full-graph epoch are counted from
the partition.

Partitioned training (``--gpus N`` for gcn/sage, full graph; ``--parts N`` with an edge list
is the same, one part per GPU): each GPU runs the full-graph step on its part's nodes and
in-edges and exchanges its halo every layer, forward and backward, over the intra-node link or
the NIC (:mod:`gpucast.predict.gnn_partition`); the parts come from METIS with an edge list,
else a random partition is assumed. The epoch's cost uses ``--price`` or the catalog's cheapest
offer with the GPU. Mini-batches add their CPU neighbour sampling (``--sampler-workers``, the
rate of ``catalog/data/gnn_samplers.csv``), overlapped with the GPU step when prefetched.

``--degrees`` (``powerlaw:ALPHA`` or a ``degree,count`` histogram; an edge list's own degrees
without it) shapes mini-batch sampling and random-partition halos
(:mod:`gpucast.predict.gnn_degrees`); without one every node is at the mean degree. R-GAT
takes a law per relation instead: ``in_degree`` / ``out_degree`` columns of ``--graph-stats``.

``--model gat`` without ``--batch`` prices one full-graph step on one GPU
(:func:`gpucast.predict.gat.full_graph_gat_cost`), refused when the graph's activations do not
fit its HBM. ``--model gat`` (one node type: ``--nodes``/``--edges``) and ``--model rgat`` (a
heterogeneous graph: ``--graph igbh-full`` from the catalog or ``--graph-stats FILE``) with
``--batch`` price a mini-batch of
:mod:`gpucast.predict.gat` on each of ``--gpus`` GPUs: attention and aggregation as gathers,
transforms as matmuls at the slower of their FLOPs and bytes, and the sampled input features
gathered from where they live (``--feature-location``: sharded over the GPUs' memory as NVIDIA's
MLPerf submissions do, host memory over PCIe, or ``auto``: as much as fits in HBM).

This module holds the request class and the verb; the work lives in private parts,
re-exported here (``__all__``): the shared rates, limits and notes (``_gnn_shared``), the
result type (``_gnn_results``), the gcn/sage step (``_gnn_step``), partitioned epochs and
``--split`` (``_gnn_parts``) and GAT / R-GAT (``_gnn_gat``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from gpucast.app._gnn_results import PredictGnnResult
from gpucast.app._gnn_shared import (
    DEFAULT_GPUS_PER_NODE,
    FEATURE_BYTES,
    FLOP_EFFICIENCY,
    GAT_MODELS,
    GATHER_EFFICIENCY,
    GNN_SOFTWARE,
    HBM_RESERVE_SHARE,
    MAX_FUNCTIONS,
    MAX_GRAPH_SERVERS,
    MAX_PARTS,
    MAX_SAMPLER_EDGES_PER_S,
    MAX_SAMPLER_WORKERS,
    NETWORK_GBPS_PER_GPU,
    _check_batch,
)
from gpucast.app._gnn_step import predicted_gnn
from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_price
from gpucast.domain.options import as_flags, documented, lower_text, option

#: the public names, defined here or in the parts above (callers import them from here)
__all__ = [
    "DEFAULT_GPUS_PER_NODE",
    "FEATURE_BYTES",
    "FLOP_EFFICIENCY",
    "GATHER_EFFICIENCY",
    "GAT_MODELS",
    "GNN_SOFTWARE",
    "HBM_RESERVE_SHARE",
    "MAX_FUNCTIONS",
    "MAX_GRAPH_SERVERS",
    "MAX_PARTS",
    "MAX_SAMPLER_EDGES_PER_S",
    "MAX_SAMPLER_WORKERS",
    "NETWORK_GBPS_PER_GPU",
    "PredictGnnRequest",
    "PredictGnnResult",
    "predict_gnn",
]


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PredictGnnRequest:
    """A GNN, its graph and the GPU (``gpucast predict gnn``)."""

    VERB: ClassVar[str] = "predict gnn"

    model: str = option(
        "gcn", help="gcn, sage (GraphSAGE, mean aggregator), gat or rgat.", example="rgat"
    )
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
    degrees: str | None = option(
        None,
        help="Degree distribution for neighbour sampling and random-partition halos: "
        "powerlaw:ALPHA (scaled to --edges / --nodes) or a CSV histogram 'degree,count' (it "
        "sets --nodes and --edges when they are not given). --edge-list uses its own degrees. "
        "Without it every node is at the mean degree.",
        example="powerlaw:2.1",
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
    heads: int = option(4, help="gat/rgat: attention heads (--hidden is their total width).")
    graph: str | None = option(
        None, help="rgat: a catalog heterogeneous graph by name.", example="igbh-full"
    )
    graph_stats: Path | None = option(
        None,
        help="rgat: graph statistics CSV (kind,name,src,dst,count,feature_dim per row; "
        "optional in_degree/out_degree columns of powerlaw:ALPHA per relation).",
        example="graph.csv",
    )
    target: str = option("", help="rgat: node type of the seeds (default: the first).")
    reverse_relations: bool = option(
        True,
        negative="no-reverse-relations",
        help="rgat: sample every relation backwards too, as the MLPerf reference does.",
    )
    gpus: int = option(
        1,
        help="gat/rgat: data-parallel GPUs, --batch seeds each. gcn/sage (full graph): "
        "partitioned training, one part per GPU (METIS with --edge-list, else a random "
        "partition): epoch time, halo share and cost.",
        example="8",
    )
    feature_sharding: str = option(
        "node",
        help="gat/rgat: node (a copy of the features per node, over its GPUs) or global "
        "(one copy over all GPUs: rows cross the network).",
    )
    gpus_per_node: int | None = option(
        None,
        help="GPUs per node [default: gat/rgat 8; gcn/sage --gpus: the priced offer's, else 8].",
        example="8",
    )
    price: float | None = option(
        None,
        help="gcn/sage --gpus: US$/h per GPU for the cost per epoch (default: the catalog's "
        "cheapest offer with the GPU).",
        example="2.5",
    )
    sampler_workers: int = option(
        4, help="gcn/sage mini-batch: CPU processes sampling neighbours in parallel.", example="8"
    )
    sampler_edges_per_s: float | None = option(
        None,
        help="gcn/sage mini-batch: sampled edges per second of one sampler worker (default: "
        "PyG's CPU sampler, catalog/data/gnn_samplers.csv).",
        example="3e6",
    )
    prefetch: bool = option(
        True,
        negative="no-prefetch",
        help="gcn/sage mini-batch: sample the next batches while the GPU trains (the step is "
        "the slower of the two); --no-prefetch adds them.",
    )
    overlap_fetch: bool = option(
        True,
        negative="no-overlap-fetch",
        help="gat/rgat: gather the next batch's features while this one computes.",
    )
    feature_precision: str = option(
        "fp16",
        parse=lower_text,
        help="gat/rgat: stored input features: fp32, fp16, bf16 or fp8.",
        example="fp8",
    )
    feature_location: str = option(
        "auto",
        help="gat/rgat: where features live: gpu (sharded over all GPUs), host, or auto "
        "(in HBM as far as they fit, the rest in host memory).",
    )
    software: str = option(
        "pytorch",
        parse=lower_text,
        help="gat/rgat mini-batch: pytorch (eager kernels, the model as priced) or tuned "
        "(MLPerf-class code: fused kernels, WholeGraph features; calibrated on MLPerf Training "
        "v4.0's R-GAT runs, catalog/data/gnn_calibration.csv).",
        example="tuned",
    )

    split: bool = option(
        False,
        help="gcn/sage full graph: also price an epoch Dorylus-style -- graph operations on "
        "CPU servers, tensor operations on the GPU or on serverless functions -- against "
        "GPU-only, time and cost.",
    )
    graph_server: str = option(
        "c5.4xlarge", help="--split: CPU instance type of the graph servers (catalog offers).",
        example="c5.9xlarge",
    )  # fmt: skip
    graph_servers: int | None = option(
        None, help="--split: graph servers (default: enough memory for the graph).", example="4"
    )
    functions: int = option(
        64, help="--split: concurrent serverless functions for the tensor operations.",
        example="128",
    )  # fmt: skip
    function_memory_gb: float = option(
        3.455,
        help="--split: memory per function in billed GB of 1,024 MB (3.455: 3,538 MB, 2 vCPUs "
        "at 1,769 MB each).",
        example="10",
    )
    function: str = option(
        "aws-lambda-x86",
        help="--split: serverless offering of catalog/data/function_compute.csv.",
        example="aws-lambda-arm",
    )

    def _check_degrees(self) -> None:
        if self.degrees is None:
            return
        if self.model == "rgat":
            raise InvalidSpecError(
                "degrees", "is for gcn, sage and gat: rgat takes a law per relation",
                fix="drop --degrees; give --graph-stats FILE with in_degree (and out_degree) "
                "columns of powerlaw:ALPHA on its relation rows",
            )  # fmt: skip
        if self.edge_list is not None:
            raise InvalidSpecError(
                "degrees", "--edge-list gives the graph's own degrees", fix="drop --degrees"
            )
        self._powerlaw_alpha()  # a malformed powerlaw:ALPHA is bad input now

    def _powerlaw_alpha(self) -> float | None:
        from gpucast.inputs.graph import powerlaw_alpha

        return None if self.degrees is None else powerlaw_alpha(str(self.degrees))

    @property
    def partition_gpus(self) -> int | None:
        """gcn/sage: the GPUs of a partitioned full-graph epoch (one part each), or None."""
        if self.model in GAT_MODELS or self.batch is not None:
            return None
        if self.parts is not None:
            return self.parts
        return self.gpus if self.gpus > 1 else None

    def _check_partitioned(self) -> None:
        if self.gpus > 1 and self.batch is not None:
            raise InvalidSpecError(
                "gpus",
                f"{self.model} on several GPUs is priced as partitioned full-graph training",
                fix="drop --batch/--fanouts, or use --model gat for data-parallel mini-batches",
            )
        if self.gpus > MAX_PARTS:
            raise InvalidSpecError("gpus", f"must be <= {MAX_PARTS}", got=self.gpus)
        if self.parts is not None and self.gpus > 1 and self.gpus != self.parts:
            raise InvalidSpecError(
                "gpus", f"is {self.gpus} and --parts {self.parts}: one part per GPU",
                fix="give one of them, or the same number",
            )  # fmt: skip
        if self.gpus > 1 and self.nodes is not None and self.gpus > self.nodes:
            raise InvalidSpecError(
                "gpus", f"must be <= the {self.nodes:,} nodes (one part per GPU)", got=self.gpus,
                fix=f"use --gpus {self.nodes:,} or fewer (a part needs a node)",
            )  # fmt: skip

    def __post_init__(self) -> None:
        with as_flags(type(self)):  # a domain check's field as the flag typed, with a fix
            self._check()

    def _check(self) -> None:
        for name in (
            "nodes", "edges", "batch", "parts", "heads", "gpus", "gpus_per_node",
            "graph_servers", "functions", "sampler_workers", "feature_dim", "hidden",
            "classes", "layers",
        ):  # fmt: skip
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                flag = name.replace("_", "-")
                raise InvalidSpecError(flag, "must be an integer >= 1", got=value)
        if self.parts is not None and self.parts > MAX_PARTS:
            raise InvalidSpecError("parts", f"must be <= {MAX_PARTS}", got=self.parts)
        if self.functions > MAX_FUNCTIONS:
            raise InvalidSpecError(
                "functions", f"must be <= {MAX_FUNCTIONS:,} concurrent functions (AWS Lambda's "
                "default account concurrency is 1,000)", got=self.functions,
                fix="e.g. --functions 128",
            )  # fmt: skip
        if self.graph_servers is not None and self.graph_servers > MAX_GRAPH_SERVERS:
            raise InvalidSpecError(
                "graph-servers", f"must be <= {MAX_GRAPH_SERVERS:,}", got=self.graph_servers,
                fix="e.g. --graph-servers 4, or leave it out (enough memory for the graph)",
            )  # fmt: skip
        if self.sampler_workers > MAX_SAMPLER_WORKERS:
            raise InvalidSpecError(
                "sampler-workers", f"must be <= {MAX_SAMPLER_WORKERS}", got=self.sampler_workers
            )
        if self.sampler_edges_per_s is not None and not (
            math.isfinite(self.sampler_edges_per_s)
            and 0 < self.sampler_edges_per_s <= MAX_SAMPLER_EDGES_PER_S
        ):
            raise InvalidSpecError(
                "sampler-edges-per-s", f"must be a number > 0 and <= {MAX_SAMPLER_EDGES_PER_S:g}",
                got=self.sampler_edges_per_s,
            )  # fmt: skip
        check_price(self.price)
        if self.model not in GAT_MODELS:
            self._check_partitioned()
        if self.software not in GNN_SOFTWARE:
            raise InvalidSpecError(
                "software", f"must be one of {', '.join(GNN_SOFTWARE)}", got=self.software,
                fix="e.g. --software tuned for MLPerf-class code",
            )  # fmt: skip
        if self.software != "pytorch":
            from gpucast.catalog.gnn_graphs import load_gnn_calibrations

            models = load_gnn_calibrations()[self.software].models
            if self.model not in models or self.batch is None:
                listed = "/".join(models)
                raise InvalidSpecError(
                    "software", f"{self.software} is calibrated for {listed} mini-batches only "
                    "(MLPerf's R-GAT runs, catalog/data/gnn_calibration.csv)",
                    got=self.software,
                    fix=f"drop --software, or price --model {listed} with --batch and --fanouts",
                )  # fmt: skip
        if self.model in GAT_MODELS and self.parts is not None:
            raise InvalidSpecError("parts", "partitioning is priced for gcn and sage only")
        if self.model == "rgat" and (
            self.nodes is not None or self.edges is not None or self.edge_list is not None
        ):
            raise InvalidSpecError(
                "graph", "rgat takes its graph from --graph or --graph-stats, not --nodes, "
                "--edges or --edge-list",
            )  # fmt: skip
        if self.model == "rgat":
            if (self.graph is None) == (self.graph_stats is None):
                raise InvalidSpecError(
                    "graph", "rgat needs --graph NAME or --graph-stats FILE (one of them)",
                    fix="e.g. --graph igbh-full",
                )  # fmt: skip
            if self.batch is None:
                raise InvalidSpecError(
                    "batch",
                    "rgat is priced per mini-batch: give --batch and --fanouts",
                    fix="e.g. --batch 1024 --fanouts 15,10,5",
                )
        elif self.graph is not None or self.graph_stats is not None:
            raise InvalidSpecError("graph", "--graph and --graph-stats are for --model rgat")
        if self.model == "gat" and self.batch is None and self.gpus > 1:
            raise InvalidSpecError(
                "gpus",
                "full-graph gat is priced on one GPU (partitioned GAT is not modelled)",
                fix="drop --gpus, or give --batch and --fanouts for data-parallel mini-batches",
            )
        self._check_degrees()
        if self.feature_precision not in FEATURE_BYTES:
            raise InvalidSpecError(
                "feature_precision", f"must be one of {', '.join(FEATURE_BYTES)}",
                got=self.feature_precision,
            )  # fmt: skip
        if self.feature_sharding not in ("node", "global"):
            raise InvalidSpecError(
                "feature_sharding", "must be node or global", got=self.feature_sharding
            )
        if self.feature_location not in ("auto", "gpu", "host"):
            raise InvalidSpecError(
                "feature_location", "must be auto, gpu or host", got=self.feature_location
            )
        histogram = self.degrees is not None and self._powerlaw_alpha() is None
        if self.model == "rgat" or histogram:
            pass
        elif self.edge_list is None and (self.nodes is None or self.edges is None):
            raise InvalidSpecError(
                "edges", "give --nodes and --edges, or --edge-list", fix="e.g. --nodes 1e6"
            )
        if self.edge_list is not None and self.edges is not None:
            raise InvalidSpecError("edges", "give --edges or --edge-list, not both")
        if (
            self.nodes is not None
            and self.edges is not None
            and self.edges > self.nodes * (self.nodes - 1)
        ):
            raise InvalidSpecError(
                "edges",
                f"must be at most nodes x (nodes - 1) = {self.nodes * (self.nodes - 1):,}: the "
                f"directed edges {self.nodes:,} nodes can have without self-loops or repeats",
                got=self.edges,
                fix="check --nodes and --edges (directed edges: twice the undirected ones)",
            )
        if self.nodes is not None:
            _check_batch(self.batch, self.nodes)
        if self.parts is not None and self.edge_list is None:
            raise InvalidSpecError("parts", "needs --edge-list (the partition is computed)")
        if (self.batch is None) != (not self.fanouts):
            raise InvalidSpecError("fanouts", "give --batch and --fanouts together")
        if self.split and (self.model not in ("gcn", "sage") or self.batch is not None):
            raise InvalidSpecError(
                "split",
                "prices full-graph gcn or sage epochs (Dorylus)",
                fix="use --model gcn or sage without --batch/--fanouts",
            )
        if not (math.isfinite(self.function_memory_gb) and self.function_memory_gb > 0):
            raise InvalidSpecError(
                "function-memory-gb", "must be a number > 0", got=self.function_memory_gb
            )


def predict_gnn(request: PredictGnnRequest | None = None, /, **options: Any) -> PredictGnnResult:
    """One training step of a GCN / GraphSAGE, sparse vs dense (module docstring)."""
    request = resolve(PredictGnnRequest, request, options)
    return predicted_gnn(request)

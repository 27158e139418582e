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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._gnn_options import ignored_options
from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_price
from gpucast.domain.options import as_flags, lower_text, option
from gpucast.domain.units import count_of, format_sig

if TYPE_CHECKING:
    from gpucast.predict.gnn_partition import PartitionedEpoch

#: Achieved share of the GPU's peak on the dense transforms and of HBM on the gathers.
FLOP_EFFICIENCY = 0.4
GATHER_EFFICIENCY = 0.5
#: The most parts a partition is asked for.
MAX_PARTS = 4096
#: HBM kept for the mini-batch's activations and workspace when features are placed on the
#: GPUs: the feature store takes the rest, never more than the usable bytes of the one rule
#: (:func:`gpucast.domain.gpu_memory.share_bytes`; the 10% keeps more on a GPU of 20 GiB or
#: more, the rule on a smaller one).
HBM_RESERVE_SHARE = 0.1
#: Network per GPU (GB/s) between nodes: one 400 Gbit/s NIC per GPU (DGX H100 / H200).
NETWORK_GBPS_PER_GPU = 50.0
#: GPUs per node when neither --gpus-per-node nor a catalog offer says (DGX-style nodes).
DEFAULT_GPUS_PER_NODE = 8
#: ``--split``: the most concurrent functions (AWS Lambda's default account concurrency is
#: 1,000, a quota raised on request; 100,000 leaves room for any raised one, not for 1e9) and
#: the most graph servers (Dorylus ran its graphs on at most a few dozen).
MAX_FUNCTIONS = 100_000
MAX_GRAPH_SERVERS = 10_000
#: Most CPU sampler workers, and the most a user's sampler rate (sampled edges/s a worker).
MAX_SAMPLER_WORKERS = 1024
MAX_SAMPLER_EDGES_PER_S = 1e12
FEATURE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
GAT_MODELS = ("gat", "rgat")
#: Software stacks a GAT / R-GAT mini-batch is priced for: ``pytorch`` is the model as priced
#: (eager kernels), the others are calibrated (``catalog/data/gnn_calibration.csv``).
GNN_SOFTWARE = ("pytorch", "tuned")
#: sampled input nodes a step of the MLPerf reference R-GAT (512-2,048 seeds per GPU, fan-outs
#: 15,10,5 on IGBH-full), the scale the ``tuned`` calibration was fitted at
_MLPERF_SAMPLED = "1.6-5.5 million"


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
    phases_s: dict[str, float] = field(default_factory=dict)
    eval_step_time_s: float | None = None
    validated: str = ""
    #: --split: GPU-only, CPU + GPU and CPU + serverless epochs (predict.gnn_split.SplitOption)
    split: tuple[Any, ...] = ()
    #: what the input suggests is a mistake (a stray id in --edge-list)
    warnings: tuple[str, ...] = ()
    #: gcn/sage mini-batch: the GPU's step (compute + feature fetch) and the CPU sampling of
    #: one batch; ``step_time_s`` is what bounds them (``bound``: "gpu" or "sampling")
    gpu_step_time_s: float | None = None
    sampling_s: float | None = None
    bound: str = ""
    #: gcn/sage --gpus N: the partitioned full-graph epoch (predict.gnn_partition), how the
    #: parts were made ("metis" or "random"), the price per GPU-hour and the cost of an epoch
    partitioned: PartitionedEpoch | None = None
    partition_method: str = ""
    usd_per_gpu_hour: float | None = None
    usd_per_epoch: float | None = None
    #: gat/rgat mini-batches: the GPUs each step runs on (data parallel: ``step_time_s`` is
    #: the step on each of them, all-reduce included)
    data_parallel_gpus: int = 1

    def partitioned_dict(self) -> dict[str, Any] | None:
        if self.partitioned is None:
            return None
        return self.partitioned.to_dict() | {
            "method": self.partition_method,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "usd_per_epoch": self.usd_per_epoch,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "nodes": self.nodes,
            "edges": self.edges,
            "step_time_s": self.step_time_s,
            "dense_step_time_s": self.dense_step_time_s,
            "dense_over_sparse": self.dense_step_time_s
            / (self.gpu_step_time_s or self.step_time_s),
            "feature_fetch_s": self.feature_fetch_s,
            "nodes_per_hop": list(self.nodes_per_hop),
            "halo_nodes": None if self.halo_nodes is None else list(self.halo_nodes),
            "halo_bytes_per_epoch": self.halo_bytes_per_epoch,
            "notes": list(self.notes),
            "assumptions": dict(self.assumptions),
            "phases_s": dict(self.phases_s),
            "eval_step_time_s": self.eval_step_time_s,
            "validated": self.validated,
            "split": [o.to_dict() for o in self.split],
            "warnings": list(self.warnings),
            "gpu_step_time_s": self.gpu_step_time_s,
            "sampling_s": self.sampling_s,
            "bound": self.bound,
            "partitioned": self.partitioned_dict(),
            "data_parallel_gpus": self.data_parallel_gpus,
        }


def predict_gnn(request: PredictGnnRequest | None = None, /, **options: Any) -> PredictGnnResult:
    """One training step of a GCN / GraphSAGE, sparse vs dense (module docstring)."""
    from gpucast.catalog import load_catalog
    from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
    from gpucast.domain.gpu_memory import usable_bytes, usable_text
    from gpucast.domain.units import GIB
    from gpucast.predict import gnn
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    request = resolve(PredictGnnRequest, request, options)
    ignored = ignored_options(request)  # options this model and mode do not read: warnings
    if request.model in GAT_MODELS:
        result = _predict_gat(request)
        return replace(result, warnings=(*ignored, *result.warnings))
    if request.model not in gnn.GNN_MODELS:
        raise InvalidSpecError(
            "model", "must be gcn, sage, gat or rgat", got=request.model, fix="e.g. --model sage"
        )
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
    warnings: list[str] = ignored
    halo = halo_bytes = None
    k = request.partition_gpus  # GPUs of a partitioned full-graph epoch (None: one, no parts)
    graph = None
    partition = None
    if request.edge_list is not None:
        from gpucast.inputs.graph import read_edge_list

        graph = read_edge_list(
            request.edge_list, nodes=request.nodes, allow_self_loops=request.allow_self_loops
        )
        nodes, edges = graph.nodes, len(graph.src)
        notes += graph.notes()
        warnings += graph.warnings()
        parts = request.parts if request.parts is not None else k
        if parts is not None:
            if parts > nodes:
                flag = "parts" if request.parts is not None else "gpus"
                raise InvalidSpecError(
                    flag, f"must be <= the {nodes:,} nodes (one part per GPU)", got=parts,
                    fix=f"use --{flag} {nodes:,} or fewer (a part needs a node)",
                )  # fmt: skip
            partition = gnn.metis_partition(nodes, graph.src, graph.dst, parts)
            counted = gnn.halo_nodes(graph.src, graph.dst, partition)
            halo = tuple(int(v) for v in counted)
            halo_bytes = gnn.halo_bytes_per_epoch(counted, spec)
    degrees, nodes, edges = _degrees(request, graph)
    _check_batch(request.batch, nodes)  # the edge list's or histogram's nodes, when not given
    if request.batch is None and (k is None or graph is not None):  # no sampling, no random parts
        if request.degrees is not None:
            warnings.append(
                "--degrees changes nothing here: a single-GPU full-graph step needs only the "
                "node and edge counts (it shapes mini-batch sampling and random-partition halos)"
            )
        degrees = None
    hbm_bytes = usable_bytes(gpu.memory_gib)  # the one rule: what a job can fill
    graph_bytes = None  # full graph: its edges, features and activations, all in HBM
    if request.batch is not None:
        cost = gnn.sampled_cost(spec, nodes=nodes, edges=edges, degrees=degrees)
    else:
        cost = gnn.full_graph_cost(spec, nodes=nodes, edges=edges)
        graph_bytes = gnn.full_graph_bytes(spec, nodes=nodes, edges=edges)
        spread = k is not None and k > 1  # the parts are checked against HBM instead
        if graph_bytes > hbm_bytes and not request.split and not spread:
            raise InvalidSpecError(
                "nodes",
                f"full-graph training needs {graph_bytes / GIB:,.0f} GiB (edges, features, "
                "activations and gradients), more than one "
                f"{gpu.name}'s {usable_text(gpu.memory_gib)}",
                fix=_stray_first(
                    "train on mini-batches (e.g. --batch 1024 --fanouts 15,10), partition it "
                    "over --gpus N, price the graph operations on CPU servers (--split) or use "
                    "a GPU with more memory",
                    [] if graph is None else graph.warnings(),
                ),
            )
        if graph_bytes > hbm_bytes:  # --split / --gpus: the other options are the point
            notes.insert(
                0,
                f"does NOT fit: the full graph needs {graph_bytes / GIB:,.0f} GiB, one "
                f"{gpu.name} has {usable_text(gpu.memory_gib)}; the 1-GPU step"
                + (" and the GPU-only epoch are" if request.split else " is")
                + " priced as if it did",
            )
    tflops, hbm = _achieved_rates(gpu)
    link = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0) / 8.0
    # random feature rows over PCIe at the gathers' one rate, as GAT/R-GAT's (MLPerf-fitted)
    host = link * GATHER_EFFICIENCY if request.batch is not None else None
    step = cost.step_time_s(
        tflops=tflops, memory_gbps=hbm, host_link_gbps=host, kernel_overhead_s=KERNEL_OVERHEAD_S
    )
    assumptions = {
        "compute": f"{FLOP_EFFICIENCY:.0%} of {gpu.name}'s BF16 peak on the transforms",
        "gathers": f"{GATHER_EFFICIENCY:.0%} of HBM bandwidth; x3 for forward + backward",
        "launches": _launch_note(cost.kernels, KERNEL_OVERHEAD_S),
        "features": f"mini-batch features in host memory, gathered over PCIe at "
        f"{GATHER_EFFICIENCY:.0%} of its {link:g} GB/s (random rows, as GAT and R-GAT fetch them)"
        if graph_bytes is None
        else f"full graph: edges, features and activations in HBM ({graph_bytes / GIB:,.3g} "
        f"of {usable_text(gpu.memory_gib)})",
    }
    validated = (
        "not validated against GPU measurements (benchmarks/gnn_cpu.py checks the pricing on "
        "the CPU)"
    )
    sampling = gpu_step = None
    bound = ""
    if request.batch is not None:
        sampling, sampling_note = _cpu_sampling(request, cost.edges)
        gpu_step = step
        step = gnn.bounded_step_s(gpu_step, sampling, prefetch=request.prefetch)
        bound = "sampling" if sampling > gpu_step else "gpu"
        assumptions["sampling"] = _sampling_note(degrees) + "; " + sampling_note
        assumptions["sampling validated"] = _sampling_validated(gpu)
    if degrees is not None:
        assumptions["degrees"] = degrees.name
    partitioned = None
    method = ""
    price = usd = None
    if k is not None:
        offer = _partition_offer(gpu, k)
        per_node = request.gpus_per_node or (offer.gpus if offer else DEFAULT_GPUS_PER_NODE)
        loads, method, partition_notes = _part_loads(
            k, graph, partition, nodes, edges, per_node, degrees
        )
        partitioned, price, hw_notes = _partitioned_epoch(
            request, spec, gpu, offer, per_node, loads, tflops, hbm
        )
        if partitioned.gpus > 1:
            _check_part_memory(spec, loads, gpu, [] if graph is None else graph.warnings())
        usd = None if price is None else partitioned.usd_per_epoch(price)
        assumptions |= partition_notes | hw_notes
        if partitioned.gpus > 1:  # QA 39: the epoch over N GPUs named no validation
            from gpucast.catalog.validation import validation_for

            assumptions["partition validated"] = validation_for(
                "gnn-partition", [gpu.name], "fp32", partitioned.gpus
            ).text()
    split: tuple[Any, ...] = ()
    if request.split:
        split, split_notes = _split(request, spec, cost, nodes, edges, gpu, tflops, hbm)
        assumptions |= split_notes
    return PredictGnnResult(
        model=request.model,
        gpu=gpu.name,
        nodes=nodes,
        edges=edges,
        step_time_s=step,
        dense_step_time_s=cost.dense_step_time_s(
            tflops=tflops, kernel_overhead_s=KERNEL_OVERHEAD_S, host_link_gbps=host
        ),
        feature_fetch_s=cost.fetch_s(host),
        nodes_per_hop=cost.nodes_per_hop,
        halo_nodes=halo,
        halo_bytes_per_epoch=halo_bytes,
        notes=tuple(notes),
        assumptions=assumptions,
        validated=validated,
        split=split,
        warnings=tuple(warnings),
        gpu_step_time_s=gpu_step,
        sampling_s=sampling,
        bound=bound,
        partitioned=partitioned,
        partition_method=method,
        usd_per_gpu_hour=price,
        usd_per_epoch=usd,
    )


def _cpu_sampling(request: PredictGnnRequest, sampled_edges: float) -> tuple[float, str]:
    """Seconds of CPU neighbour sampling a mini-batch and what they rest on."""
    from gpucast.catalog.gnn_samplers import gnn_sampler
    from gpucast.predict import gnn

    if request.sampler_edges_per_s is not None:
        rate, source = request.sampler_edges_per_s, "--sampler-edges-per-s"
    else:
        sampler = gnn_sampler()
        rate, source = sampler.edges_per_s, f"PyG's CPU sampler, {sampler.source}"
    workers = request.sampler_workers
    seconds = gnn.cpu_sampling_s(sampled_edges, edges_per_s=rate, workers=workers)
    overlap = (
        "prefetched: the workers sample the next batches while the GPU trains, the step is "
        "the slower of the two"
        if request.prefetch
        else "not prefetched (--no-prefetch): the step waits for its batch, sampling added"
    )
    return seconds, (
        f"CPU sampling of {sampled_edges:,.0f} sampled edges a batch at {rate / 1e6:.3g} M "
        f"edges/s per worker ({source}) on {workers} workers in parallel (linear in workers: "
        f"enough free cores assumed); {overlap}"
    )


def _check_batch(batch: int | None, nodes: int) -> None:
    """Seed nodes per mini-batch: at most the graph's nodes."""
    if batch is not None and batch > nodes:
        raise InvalidSpecError(
            "batch", f"must be <= the graph's {nodes:,} nodes (seed nodes per mini-batch)",
            got=batch, fix="lower --batch, or drop --batch and --fanouts for full-graph",
        )  # fmt: skip


def _degrees(request: PredictGnnRequest, graph: Any) -> tuple[Any, int, int]:
    """The degree distribution (an edge list's own, --degrees, or None: the mean degree) and
    the node and edge counts (from the edge list, the flags or the histogram)."""
    if graph is not None:
        return graph.degree_distribution(), graph.nodes, len(graph.src)
    if request.degrees is None:
        assert request.nodes is not None and request.edges is not None
        return None, request.nodes, request.edges
    from gpucast.inputs.graph import degree_input

    dist = degree_input(str(request.degrees), nodes=request.nodes, edges=request.edges)
    nodes = request.nodes if request.nodes is not None else round(dist.nodes)
    edges = request.edges if request.edges is not None else round(dist.edges)
    return dist, nodes, edges


def _sampling_note(degrees: Any) -> str:
    """How the sampled edges and distinct nodes per hop were counted."""
    if degrees is None:
        return (
            "every node at the mean degree: fan-outs capped by it and uniform draws for the "
            "distinct nodes per hop (on a skewed graph both overestimate: give --degrees)"
        )
    return (
        "from the degree distribution: each node reached samples min(degree, fan-out), a draw "
        "lands on a node in proportion to its degree, hubs counted once (gnn_degrees)"
    )


def _achieved_rates(gpu: Any) -> tuple[float, float]:
    """TFLOP/s on the transforms and GB/s on the gathers: shares of the GPU's peaks."""
    return gpu.peak_tflops("bf16") * FLOP_EFFICIENCY, gpu.memory_bandwidth_gbps * GATHER_EFFICIENCY


def _sampling_validated(gpu: Any) -> str:
    """The sampled counts against a real sampler (GPU-independent)."""
    from gpucast.catalog.validation import validation_for

    return validation_for("gnn-sampling", [gpu.name], "bf16").text()


def _part_loads(
    k: int, graph: Any, partition: Any, nodes: int, edges: int, per_node: int, degrees: Any
) -> tuple[tuple[Any, ...], str, dict[str, str]]:
    """Each GPU's part: counted from the METIS partition, or a random partition's expectation."""
    from gpucast.predict import gnn_partition

    if graph is not None:
        loads = gnn_partition.part_loads(graph.src, graph.dst, partition, gpus_per_node=per_node)
        return loads, "metis", {
            "partition": f"METIS (pymetis) into {k} parts, one per GPU; each part's nodes, "
            "in-edges and halo counted from the partition; parts 0..g-1 on the first node"
        }  # fmt: skip
    loads = gnn_partition.random_part_loads(
        nodes=nodes, edges=edges, parts=k, gpus_per_node=per_node, degrees=degrees
    )
    halo = (
        f"every node at the mean out-degree {edges / nodes:.3g} (an upper estimate for skewed "
        "degrees: give --degrees)"
        if degrees is None
        else "the degree distribution (assumption degrees)"
    )
    return loads, "random", {
        "partition": f"a random (hash) partition into {k} parts is assumed (no --edge-list): "
        f"{nodes / k:,.0f} nodes and {edges / k:,.0f} edges a part, the expected halo from "
        f"{halo}; METIS cuts far fewer halo nodes -- give --edge-list for the real partition"
    }  # fmt: skip


def _partition_offer(gpu: Any, k: int) -> Any:
    """The catalog node a partitioned epoch is priced on: the cheapest per GPU among the
    offers with as many GPUs as the epoch needs (or the widest), None without an offer."""
    from gpucast.catalog import load_catalog

    offers = [o for o in load_catalog().find_offers(gpu=gpu.name) if o.gpus > 0]
    if not offers:
        return None
    need = min(k, max(o.gpus for o in offers))
    wide = [o for o in offers if o.gpus >= need]
    return min(wide, key=lambda o: (o.on_demand_usd_per_hour / o.gpus, -o.gpus))


def _partitioned_epoch(
    request: PredictGnnRequest,
    spec: Any,
    gpu: Any,
    offer: Any,
    per_node: int,
    loads: tuple[Any, ...],
    tflops: float,
    hbm: float,
) -> tuple[Any, float | None, dict[str, str]]:
    """The partitioned epoch on the links of the GPU and its offer; the price per GPU-hour."""
    from gpucast.plan.inputs import intra_node_gbps
    from gpucast.predict import gnn_partition
    from gpucast.predict.comm import DEFAULT_HOP_LATENCY_S, hierarchical_collective_s
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    k = len(loads)
    intra_gbit = intra_node_gbps(gpu)
    if offer is not None:
        nic_gbit = offer.network_gbps / offer.gpus
        where = (
            f"{offer.provider} {offer.instance_type} ({offer.region}, "
            f"{count_of(offer.gpus, 'GPU')}, {offer.network_gbps:g} Gbit/s)"
        )
    else:
        nic_gbit = NETWORK_GBPS_PER_GPU * 8.0
        where = f"no catalog offer with {gpu.name}: a {nic_gbit:g} Gbit/s NIC per GPU assumed"
    links = gnn_partition.PartitionLinks(
        gpus_per_node=per_node,
        intra_node_gbps=intra_gbit / 8.0 * GATHER_EFFICIENCY,
        network_gbps=nic_gbit / 8.0 * GATHER_EFFICIENCY,
    )
    params = gnn_partition.gnn_parameters(spec)
    allreduce = float(
        hierarchical_collective_s(
            4.0 * params, k, per_node, intra_gbit, nic_gbit * min(k, per_node),
            DEFAULT_HOP_LATENCY_S,
        )
    )  # fmt: skip
    epoch = gnn_partition.partitioned_epoch(
        spec, loads, tflops=tflops, memory_gbps=hbm, links=links, allreduce_s=allreduce,
        kernel_overhead_s=KERNEL_OVERHEAD_S,
    )  # fmt: skip
    if request.price is not None:
        price: float | None = request.price
        priced = f"${request.price:g} per GPU-hour (--price)"
    elif offer is not None:
        price = offer.on_demand_usd_per_hour / offer.gpus
        priced = f"${price:.2f} per GPU-hour on demand, {where} (the catalog's cheapest per GPU)"
    else:
        price, priced = None, f"no price: no catalog offer with {gpu.name}; give --price"
    notes = {
        "exchange": f"every layer, each halo node's input features forward and their gradients "
        "backward but for the first layer's (the input features take no gradient; "
        f"{epoch.bytes_per_halo_node:,.0f} bytes a halo node an epoch) at "
        f"{GATHER_EFFICIENCY:.0%} of the link: {intra_gbit / 8:g} GB/s per GPU inside a node "
        f"of {count_of(per_node, 'GPU')}, {nic_gbit:g} Gbit/s per GPU across nodes ({where}); "
        "the two links run at once, each full duplex",
        "epoch": "the slowest part's compute (at least its kernel launches: assumption "
        "launches) + its halo exchange (NOT overlapped: added) + the "
        f"fp32 all-reduce of the {params:,} weights; every GPU held the whole epoch",
        "price": priced,
    }
    return epoch, price, notes


def _stray_first(fix: str, stray: list[str]) -> str:
    """A memory refusal's fix, led by the edge list's stray-id warning where it has one: the
    node count a stray id inflated may be all that is wrong (the warning alone is lost when
    the request is refused)."""
    return f"{stray[0]}; else {fix}" if stray else fix


def _check_part_memory(spec: Any, loads: tuple[Any, ...], gpu: Any, stray: list[str]) -> None:
    """Each part's nodes, halo and in-edges must fit one GPU's usable HBM (the one rule);
    ``stray``: the edge list's stray-id warning, if any (:func:`_stray_first`)."""
    from gpucast.domain.gpu_memory import usable_bytes, usable_text
    from gpucast.domain.units import GIB
    from gpucast.predict import gnn_partition

    need = [gnn_partition.part_memory_bytes(spec, load) for load in loads]
    worst = max(range(len(need)), key=need.__getitem__)
    if need[worst] > usable_bytes(gpu.memory_gib):
        raise InvalidSpecError(
            "gpus",
            f"part {worst} of {len(loads)} needs {need[worst] / GIB:,.0f} GiB (its nodes, halo "
            f"and edges with features, activations and gradients), more than one {gpu.name}'s "
            f"{usable_text(gpu.memory_gib)}",
            fix=_stray_first(
                "use more --gpus, mini-batches (--batch, --fanouts) or a GPU with more memory",
                stray,
            ),
        )


def _split(
    request: PredictGnnRequest,
    spec: Any,
    cost: Any,
    nodes: int,
    edges: int,
    gpu: Any,
    tflops: float,
    hbm: float,
) -> tuple[tuple[Any, ...], dict[str, str]]:
    """The Dorylus-style epochs (:mod:`gpucast.predict.gnn_split`) with catalog prices."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.function_compute import function_compute
    from gpucast.predict import gnn_split
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S
    from gpucast.predict.serving import CPU_GFLOPS_PER_VCPU, cpu_device

    catalog = load_catalog()
    gpu_offers = [o for o in catalog.find_offers(gpu=gpu.name) if o.gpus > 0]
    if not gpu_offers:
        raise InvalidSpecError(
            "split", f"needs a price: no offer with {gpu.name} in the catalog",
            fix="pick a GPU with offers (gpucast catalog offers)",
        )  # fmt: skip
    g = min(gpu_offers, key=lambda o: (o.on_demand_usd_per_hour / o.gpus, -o.gpus))
    servers = [
        o for o in catalog.find_offers(cpu_only=True) if o.instance_type == request.graph_server
    ]
    if not servers:
        known = sorted({o.instance_type for o in catalog.find_offers(cpu_only=True)})
        raise InvalidSpecError(
            "graph-server", f"no CPU offer {request.graph_server!r}",
            fix=f"use one of {', '.join(known[:8])}, ...",
        )  # fmt: skip
    server = min(servers, key=lambda o: o.on_demand_usd_per_hour)
    from gpucast.predict.gnn import full_graph_bytes

    # the graph, its features and every layer's activations and gradients in DRAM
    graph_bytes = full_graph_bytes(spec, nodes=nodes, edges=edges)
    count = request.graph_servers or max(
        1, math.ceil(graph_bytes / (0.8 * server.memory_gib * 2**30))
    )
    if count > nodes:
        raise InvalidSpecError(
            "graph-servers", f"{count:,} servers for a graph of {nodes:,} nodes leave some "
            "without a vertex", got=count,
            fix=f"use --graph-servers {nodes:,} or fewer, or leave it out",
        )  # fmt: skip
    fn = function_compute(request.function)
    device = cpu_device(server)
    hw = gnn_split.SplitHardware(
        gpu_tflops=tflops,
        gpu_memory_gbps=hbm,
        gpu_network_gbps=g.network_gbps / g.gpus,
        gpu_usd_per_hour=g.on_demand_usd_per_hour / g.gpus,
        graph_servers=count,
        server_memory_gbps=device.memory_bandwidth_gbps * GATHER_EFFICIENCY,
        server_network_gbps=server.network_gbps,
        server_usd_per_hour=server.on_demand_usd_per_hour,
        function=fn,
        functions=request.functions,
        function_gb=request.function_memory_gb,
        function_gflops_per_vcpu=CPU_GFLOPS_PER_VCPU * FLOP_EFFICIENCY,
        kernel_overhead_s=KERNEL_OVERHEAD_S,
    )
    options = gnn_split.split_epoch(cost, spec, nodes=nodes, hw=hw)
    notes = {
        "split": f"Dorylus-style epochs pipelined over {hw.intervals} vertex intervals (slowest "
        "stage + fill); the GPU-only epoch is the full-graph step above; the CPU and serverless "
        "parts are a model with no measurement behind it",
        "split gpu": f"{g.provider} {g.instance_type} ({g.region}): "
        f"${hw.gpu_usd_per_hour:.2f} per GPU-hour, {hw.gpu_network_gbps:g} Gbit/s per GPU",
        "graph servers": f"{count} x {server.provider} {server.instance_type} ({server.region}, "
        f"${server.on_demand_usd_per_hour:g}/h, {server.memory_gib:g} GiB, "
        f"{server.network_gbps:g} Gbit/s): gathers at {GATHER_EFFICIENCY:.0%} of "
        f"{device.memory_bandwidth_gbps:g} GB/s (the CPU roofline prior)"
        + (
            ""
            if request.graph_servers
            else f"; enough for {graph_bytes / 2**30:,.1f} GiB of "
            "graph, features and activations at 80% of memory"
        ),
        "functions": f"{request.functions} x {fn.name} of {request.function_memory_gb:g} GB "
        f"({request.function_memory_gb / fn.gb_per_vcpu:.1f} vCPUs at "
        f"{hw.function_gflops_per_vcpu:g} GFLOP/s each, {FLOP_EFFICIENCY:.0%} of the "
        f"{CPU_GFLOPS_PER_VCPU:g} GFLOP/s prior), billed per GB-second busy and per request "
        f"({fn.source})",
    }
    from gpucast.catalog.validation import validation_for

    notes["split validated"] = validation_for("gnn-split", [gpu.name], "fp32").text()
    return options, notes


def _gat_graph(request: PredictGnnRequest) -> tuple[Any, Any, list[str], list[str]]:
    """The graph of a gat/rgat request, its degree distribution (gat: the edge list's or
    --degrees; None: the mean degree), notes on where it came from and warnings."""
    from gpucast.predict import gat

    if request.model == "gat":
        el = None
        if request.edge_list is not None:
            from gpucast.inputs.graph import read_edge_list

            el = read_edge_list(
                request.edge_list, nodes=request.nodes, allow_self_loops=request.allow_self_loops
            )
        degrees, nodes, edges = _degrees(request, el)
        graph = gat.HeteroGraph.homogeneous(
            nodes=nodes, edges=edges, feature_dim=request.feature_dim
        )
        return (
            graph,
            degrees,
            ([] if el is None else el.notes()),
            ([] if el is None else el.warnings()),
        )
    if request.graph_stats is not None:
        from gpucast.inputs.graph import read_graph_stats

        graph = read_graph_stats(request.graph_stats)
        notes = [f"graph statistics from {request.graph_stats}"]
    else:
        from gpucast.catalog.gnn_graphs import graph_stats

        assert request.graph is not None
        graph = graph_stats(request.graph)
        notes = [f"graph {graph.name} from catalog/data/gnn_graphs.csv"]
    if request.reverse_relations:
        graph = graph.with_reverse()
        notes.append(f"{len(graph.relations)} relations sampled (reverse directions added)")
    return graph, None, notes, []


def _predict_gat(request: PredictGnnRequest) -> PredictGnnResult:
    """One data-parallel GAT / R-GAT training step (module docstring)."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.gnn_graphs import load_gnn_calibrations
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
    from gpucast.domain.gpu_memory import share_bytes
    from gpucast.plan.inputs import intra_node_gbps
    from gpucast.predict import gat
    from gpucast.predict.comm import DEFAULT_HOP_LATENCY_S, hierarchical_collective_s
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    gpu = load_catalog().gpu(request.gpu)
    graph, degrees, notes, warnings = _gat_graph(request)
    spec = gat.GatSpec(
        heads=request.heads,
        hidden=request.hidden,
        classes=request.classes,
        layers=request.layers,
        fanouts=request.fanouts,
        batch=request.batch,
        target=request.target,
    )
    if request.batch is None:
        stray = list(warnings)  # the edge list's (--degrees is refused with one)
        if request.degrees is not None:
            warnings.append(
                "--degrees changes nothing here: the full-graph step needs only the node and "
                "edge counts"
            )
        return _full_graph_gat(request, graph, spec, gpu, notes, warnings, stray)
    feature_bytes = FEATURE_BYTES[request.feature_precision]
    cost = gat.gat_cost(graph, spec, feature_bytes_per_value=feature_bytes, degrees=degrees)
    total_features = graph.feature_bytes(feature_bytes)
    gpus_per_node = request.gpus_per_node or DEFAULT_GPUS_PER_NODE
    per_node = min(request.gpus, gpus_per_node)
    structure = graph.structure_bytes() / per_node  # the graph replicated per node
    free = share_bytes(gpu.memory_gib, 1.0 - HBM_RESERVE_SHARE) - structure
    placement = gat.place_features(
        total_features, gpus=request.gpus, gpus_per_node=gpus_per_node,
        free_bytes_per_gpu=free, location=request.feature_location,
        sharding=request.feature_sharding,
    )  # fmt: skip
    shard = per_node if request.feature_sharding == "node" else request.gpus
    if request.feature_location == "gpu" and total_features > max(free, 0.0) * shard:
        # refused as a full-graph step that does not fit is (QA 35 #27: priced as if they fit)
        raise InvalidSpecError(
            "feature-location",
            f"gpu: the {format_sig(total_features / 1e9)} GB of features do not fit the "
            f"{format_sig(max(free, 0.0) * shard / 1e9)} GB of HBM left on the "
            f"{count_of(shard, 'GPU')} sharing them",
            fix="--feature-location auto (in HBM as far as they fit, the rest in host memory) "
            "or host, more --gpus, or a smaller --feature-precision",
        )
    tflops, hbm = _achieved_rates(gpu)
    peer = intra_node_gbps(gpu) / 8.0 * GATHER_EFFICIENCY
    pcie = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0) / 8.0 * GATHER_EFFICIENCY
    network = NETWORK_GBPS_PER_GPU * GATHER_EFFICIENCY
    params = spec.parameters(graph)
    allreduce = float(
        hierarchical_collective_s(
            4.0 * params,
            request.gpus,
            gpus_per_node,
            intra_node_gbps(gpu),
            NETWORK_GBPS_PER_GPU * 8.0 * per_node,
            DEFAULT_HOP_LATENCY_S,
        )
    )
    step = gat.gat_step_time(
        cost, placement, tflops=tflops, hbm_gbps=hbm, peer_gbps=peer, network_gbps=network,
        host_gbps=pcie, allreduce_s=allreduce, overlap=request.overlap_fetch,
        kernel_overhead_s=KERNEL_OVERHEAD_S,
    )  # fmt: skip
    evaluation = gat.gat_step_time(
        cost.forward_only(), placement, tflops=tflops, hbm_gbps=hbm, peer_gbps=peer,
        network_gbps=network, host_gbps=pcie, overlap=request.overlap_fetch,
        kernel_overhead_s=KERNEL_OVERHEAD_S,
    )  # fmt: skip
    dense = cost.dense_s(tflops=tflops, kernel_overhead_s=KERNEL_OVERHEAD_S)
    dense += step.feature_fetch_s + allreduce
    validation = validation_for(f"gnn-{request.model}", [gpu.name], "bf16", request.gpus)
    phases = {
        "compute_s": step.compute_s,
        "launch_s": step.launch_s,
        "feature_fetch_s": step.feature_fetch_s,
        "allreduce_s": step.allreduce_s,
    }
    step_s, eval_s, fetch_s = step.total_s, evaluation.total_s, step.feature_fetch_s
    calibration = load_gnn_calibrations().get(request.software)
    if calibration is None:
        validated = (
            f"the eager model as priced, not validated against eager runs (--software tuned: "
            f"MLPerf's runs take {_tuned_words()}; {validation.text()})"
        )
    else:
        validated = validation.text()
        scale, per_step_s = calibration.scale, calibration.per_step_s

        def tuned(seconds: float) -> float:
            return scale * seconds + per_step_s

        if per_step_s > scale * step_s:
            warnings.append(
                f"--software {request.software}: its {per_step_s * 1e3:.3g} ms a step of host "
                f"time, fitted at MLPerf's scale (IGBH-full, {_MLPERF_SAMPLED} sampled nodes a "
                f"step), is most of this {scale * step_s * 1e3:.3g} ms step: a batch this small "
                "is outside what the calibration saw"
            )
        step_s, eval_s, dense = tuned(step_s), tuned(eval_s), tuned(dense)
        fetch_s *= scale
        phases = {k: scale * v for k, v in phases.items()}
        phases["host_s"] = per_step_s
    nodes = int(graph.counts().sum())
    edges = sum(r.edges for r in graph.relations)
    return PredictGnnResult(
        model=request.model,
        gpu=gpu.name,
        nodes=nodes,
        edges=edges,
        step_time_s=step_s,
        dense_step_time_s=dense,
        feature_fetch_s=fetch_s,
        nodes_per_hop=cost.nodes_per_hop,
        halo_nodes=None,
        halo_bytes_per_epoch=None,
        notes=tuple(notes),
        phases_s=phases,
        eval_step_time_s=eval_s,
        validated=validated,
        warnings=tuple(warnings),
        data_parallel_gpus=request.gpus,
        assumptions={
            "compute": _gat_compute_note(gpu),
            "launches": _launch_note(cost.kernels, KERNEL_OVERHEAD_S),
            "attention": f"{_attention_note(request)}; sampling "
            f"{gat.SAMPLE_BYTES_PER_EDGE:.0f} HBM bytes per sampled edge (on the GPU)",
            "features": f"{total_features / 1e9:,.0f} GB of {request.feature_precision} "
            f"features ({request.feature_location}, {request.feature_sharding} sharding): a "
            "sampled row is in "
            f"{placement.describe()}; random rows at {GATHER_EFFICIENCY:.0%} of each link "
            f"(NVLink {intra_node_gbps(gpu) / 8:.0f} GB/s, a {NETWORK_GBPS_PER_GPU * 8:.0f} "
            f"Gbit/s NIC per GPU, PCIe {pcie / GATHER_EFFICIENCY:.0f} GB/s); "
            f"{HBM_RESERVE_SHARE:.0%} of HBM (at least what the one usable-memory rule keeps) "
            "and the graph structure kept out of the feature store",
            "sampling": _sampling_note(degrees)
            if request.model == "gat"
            else _relation_sampling_note(graph, request),
            "sampling validated": _sampling_validated(gpu),
            "gradients": f"{params / 1e6:.1f}M parameters all-reduced in fp32 each step "
            "(NVLink in a node, the NICs across)",
            "phases": "feature gathers overlapped with compute (the slower counts), the "
            "all-reduce added"
            if request.overlap_fetch
            else "added, no overlap",
        }
        | (
            {
                "software": f"{request.software} (MLPerf-class code): {calibration.describe()}; "
                f"the phases are the eager ones x{calibration.scale:.3g}"
            }
            if calibration is not None
            else {
                "software": "pytorch: eager kernels as priced (--software tuned: MLPerf-class "
                f"code, {_tuned_words()})"
            }
        )
        | ({} if degrees is None else {"degrees": degrees.name})
        | (
            {"degrees": "; ".join(r.describe_degrees() for r in graph.relations)}
            if gat.has_degree_laws(graph)
            else {}
        ),
    )


def _tuned_words() -> str:
    from gpucast.catalog.gnn_graphs import load_gnn_calibrations

    tuned = load_gnn_calibrations()["tuned"]
    return f"x{tuned.scale:.3g} of it + {tuned.per_step_s * 1e3:.3g} ms a step"


def _relation_sampling_note(graph: Any, request: PredictGnnRequest) -> str:
    """How an R-GAT's sampled edges and distinct nodes per hop and type were counted."""
    from gpucast.predict import gat

    if not gat.has_degree_laws(graph):
        where = (
            f"the catalog's {graph.name} publishes no per-relation degree laws"
            if request.graph_stats is None
            else "the file gives no in_degree / out_degree laws"
        )
        return (
            f"every node at its relation's mean degree ({where}): fan-outs capped by each "
            "relation's mean in-degree and uniform draws for the distinct nodes per hop and "
            "type (hubs repeat more: an upper estimate)"
        )
    return (
        "per relation from its degree laws (assumption degrees): each reached destination "
        "node samples min(in-degree, fan-out), a draw lands on a source node in proportion to "
        "its out-degree along the relation (an empty out_degree: the in_degree law on the same "
        "nodes within one type, uniform across two), a node reached along several relations "
        "counted once, the relations independent (gnn_degrees.sampled_relations)"
    )


def _attention_note(request: PredictGnnRequest) -> str:
    from gpucast.predict import gat

    return (
        f"per edge: the message ({request.hidden} values) and {gat.SOFTMAX_PASSES} passes over "
        f"{request.heads} logits, HBM-bound"
    )


def _launch_note(kernels: float, kernel_overhead_s: float) -> str:
    """The launch floor every GNN step carries (predict.gnn.launch_floor_s)."""
    return (
        f"{kernels:,.0f} kernel launches a training step at {kernel_overhead_s * 1e6:.0f} us "
        f"each (the roofline's per-kernel prior, predict.roofline.KERNEL_OVERHEAD_S): the GPU "
        f"takes at least {kernels * kernel_overhead_s * 1e3:.3g} ms, the slower of that and "
        "its kernels' work"
    )


def _gat_compute_note(gpu: Any) -> str:
    """The rates every GAT step rests on."""
    return (
        f"matmuls at the slower of {FLOP_EFFICIENCY:.0%} of {gpu.name}'s BF16 peak and "
        f"{GATHER_EFFICIENCY:.0%} of HBM; activations in 16 bits; x3 for forward + backward "
        "(x2 for the first layer: no gradient for the input features)"
    )


def _full_graph_gat(
    request: PredictGnnRequest, graph: Any, spec: Any, gpu: Any, notes: list[str],
    warnings: list[str], stray: list[str],
) -> PredictGnnResult:  # fmt: skip
    """One full-graph GAT training step on one GPU, refused when it does not fit its HBM
    (``stray``: the edge list's stray-id warning, :func:`_stray_first`)."""
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.gpu_memory import usable_bytes, usable_text
    from gpucast.domain.units import GIB
    from gpucast.predict import gat
    from gpucast.predict.gnn import launch_floor_s
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    need = gat.full_graph_gat_bytes(
        graph, spec, feature_bytes_per_value=FEATURE_BYTES[request.feature_precision]
    )
    if need > usable_bytes(gpu.memory_gib):
        raise InvalidSpecError(
            "nodes",
            f"full-graph gat training needs {need / GIB:,.0f} GiB (the graph, features, every "
            "layer's activations and attention coefficients with their gradients), more than "
            f"one {gpu.name}'s {usable_text(gpu.memory_gib)}",
            fix=_stray_first(
                "train on mini-batches (e.g. --batch 1024 --fanouts 10,5) or use a GPU with "
                "more memory",
                stray,
            ),
        )
    cost = gat.full_graph_gat_cost(graph, spec)
    tflops, hbm = _achieved_rates(gpu)
    work = cost.compute_s(tflops=tflops, hbm_gbps=hbm)
    step = launch_floor_s(work, cost.kernels, KERNEL_OVERHEAD_S)
    fwd = cost.forward_only()
    nodes, edges = int(graph.counts().sum()), sum(r.edges for r in graph.relations)
    return PredictGnnResult(
        model=request.model,
        gpu=gpu.name,
        nodes=nodes,
        edges=edges,
        step_time_s=step,
        dense_step_time_s=cost.dense_s(tflops=tflops, kernel_overhead_s=KERNEL_OVERHEAD_S),
        feature_fetch_s=0.0,
        nodes_per_hop=(),
        halo_nodes=None,
        halo_bytes_per_epoch=None,
        notes=tuple(notes),
        phases_s={"compute_s": work, "launch_s": cost.kernels * KERNEL_OVERHEAD_S},
        eval_step_time_s=launch_floor_s(
            fwd.compute_s(tflops=tflops, hbm_gbps=hbm), fwd.kernels, KERNEL_OVERHEAD_S
        ),
        validated=validation_for("gnn-gat", [gpu.name], "bf16", 1).text(),
        warnings=tuple(warnings),
        assumptions={
            "compute": _gat_compute_note(gpu),
            "launches": _launch_note(cost.kernels, KERNEL_OVERHEAD_S),
            "attention": _attention_note(request),
            "full graph": f"every layer on all {nodes:,} nodes and {edges:,} edges, no "
            f"sampling; the graph, its {request.feature_precision} features and every layer's "
            f"activations and attention coefficients with their gradients in HBM "
            f"({need / GIB:,.3g} of {usable_text(gpu.memory_gib)})",
        },
    )

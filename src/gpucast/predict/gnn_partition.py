"""Partitioned (multi-GPU) full-graph GNN training: per-GPU compute, halo exchange, epoch.

The graph's nodes are split into ``K`` parts, one per GPU. Each GPU runs the full-graph step
of :func:`gpucast.predict.gnn.full_graph_cost` on its share -- its own nodes and the edges
into them (the aggregation gathers along every in-edge, the halo's included) -- and, every
layer, receives the input features of its halo (the nodes of other parts with an edge into
it) forward and sends their gradients back, but for the input features, which take none
(:func:`gpucast.predict.gnn.bytes_per_halo_node`).

* :func:`part_loads` -- each part's nodes, in-edges and halo, counted exactly from a
  partition (METIS, or any other), split by link: halo nodes from parts on the same machine
  cross the GPUs' intra-node link (NVLink or PCIe), the rest the NIC. Parts ``0..g-1`` are on
  machine 0, ``g..2g-1`` on machine 1, ... (``g`` GPUs per machine).
* :func:`random_part_loads` -- the same from graph statistics alone (``N`` nodes, ``E``
  directed edges), for a uniformly random (hash) partition: ``N / K`` nodes and ``E / K``
  edges a part and the expected halo of :func:`gpucast.predict.gnn.expected_random_halo` over
  the degree distribution when one is given, else with every node at the mean out-degree
  ``E / N`` -- an upper estimate, since the halo is concave in the degree (a skewed degree
  sequence gives fewer halo nodes); METIS cuts far fewer.
* :func:`partitioned_epoch` -- the epoch: every part's compute plus its exchange, no overlap
  between them; within an exchange the intra-node link and the NIC run at the same time (the
  slower counts) and each link sends and receives at once (the larger direction counts). The
  slowest part sets the epoch; the weight-gradient all-reduce (given) is added.

With one part the epoch is the single-GPU full-graph step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.gnn import (
    GnnSpec,
    _edges,
    bytes_per_halo_node,
    expected_random_halo,
    full_graph_bytes,
    full_graph_cost,
)
from gpucast.predict.gnn_degrees import DegreeDistribution


@dataclass(frozen=True, slots=True, kw_only=True)
class PartLoad:
    """One GPU's share: its nodes, the edges into them, and its halo traffic in nodes per
    layer (received: other parts' nodes it needs; sent: its nodes other parts need), split
    into the parts on its own machine (``node``) and those on others (``network``)."""

    nodes: float
    edges: float
    halo_in_node: float = 0.0
    halo_in_network: float = 0.0
    halo_out_node: float = 0.0
    halo_out_network: float = 0.0

    def __post_init__(self) -> None:
        for name in (
            "nodes", "edges", "halo_in_node", "halo_in_network", "halo_out_node",
            "halo_out_network",
        ):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(name, "must be a number >= 0", got=value)

    @property
    def halo_in(self) -> float:
        return self.halo_in_node + self.halo_in_network


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLinks:
    """Achieved bandwidths (GB/s per GPU) of the halo exchange and the machine shape."""

    gpus_per_node: int
    intra_node_gbps: float
    network_gbps: float

    def __post_init__(self) -> None:
        g = self.gpus_per_node
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise InvalidSpecError("gpus_per_node", "must be an integer >= 1", got=g)
        for name in ("intra_node_gbps", "network_gbps"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a number > 0", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionedEpoch:
    """A partitioned full-graph epoch: per part its compute and exchange (s), the slowest
    part, the all-reduce, and the halo bytes that crossed between GPUs."""

    compute_s: tuple[float, ...]
    exchange_s: tuple[float, ...]
    allreduce_s: float
    halo_bytes: float
    #: input-feature and activation bytes each halo node moves in one epoch (all layers,
    #: forward and backward)
    bytes_per_halo_node: float

    @property
    def gpus(self) -> int:
        return len(self.compute_s)

    @property
    def slowest(self) -> int:
        """Index of the part that sets the epoch (its compute + exchange is the largest)."""
        totals = [c + x for c, x in zip(self.compute_s, self.exchange_s, strict=True)]
        return int(np.argmax(totals))

    @property
    def epoch_s(self) -> float:
        i = self.slowest
        return self.compute_s[i] + self.exchange_s[i] + self.allreduce_s

    @property
    def halo_share(self) -> float:
        """Share of the epoch the slowest part spends exchanging its halo."""
        return self.exchange_s[self.slowest] / self.epoch_s if self.epoch_s > 0 else 0.0

    def usd_per_epoch(self, usd_per_gpu_hour: float) -> float:
        """Every GPU is held for the whole epoch."""
        return self.gpus * usd_per_gpu_hour * self.epoch_s / 3600.0

    def to_dict(self) -> dict[str, object]:
        i = self.slowest
        return {
            "gpus": self.gpus,
            "epoch_s": self.epoch_s,
            "slowest_part": i,
            "compute_s": self.compute_s[i],
            "exchange_s": self.exchange_s[i],
            "allreduce_s": self.allreduce_s,
            "halo_share": self.halo_share,
            "halo_bytes_per_epoch": self.halo_bytes,
            "compute_s_per_part": list(self.compute_s),
            "exchange_s_per_part": list(self.exchange_s),
        }


def part_loads(
    src: npt.ArrayLike, dst: npt.ArrayLike, parts: npt.ArrayLike, *, gpus_per_node: int
) -> tuple[PartLoad, ...]:
    """Each part's load, counted exactly from the partition ``parts`` (node -> part); messages
    flow ``src -> dst`` (pass both directions for an undirected graph)."""
    p = np.asarray(parts, dtype=np.int64)
    s, d = _edges(src, dst, len(p))
    if gpus_per_node < 1:
        raise InvalidSpecError("gpus_per_node", "must be an integer >= 1", got=gpus_per_node)
    n = len(p)
    k = int(p.max()) + 1 if p.size else 0
    cross = p[s] != p[d]
    key = np.unique(p[d[cross]] * n + s[cross])  # (receiving part, remote node), as halo_nodes
    receiver, sender = key // n, p[key % n]
    same = receiver // gpus_per_node == sender // gpus_per_node

    def count(index: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.bincount(index, minlength=k)

    nodes, edges = count(p), count(p[d])
    in_node, in_net = count(receiver[same]), count(receiver[~same])
    out_node, out_net = count(sender[same]), count(sender[~same])
    return tuple(
        PartLoad(
            nodes=float(nodes[i]),
            edges=float(edges[i]),
            halo_in_node=float(in_node[i]),
            halo_in_network=float(in_net[i]),
            halo_out_node=float(out_node[i]),
            halo_out_network=float(out_net[i]),
        )
        for i in range(k)
    )


def random_part_loads(
    *, nodes: int, edges: int, parts: int, gpus_per_node: int,
    degrees: DegreeDistribution | None = None,
) -> tuple[PartLoad, ...]:  # fmt: skip
    """The expected load of each part of a uniformly random partition (module docstring):
    ``ceil(N / K)`` nodes, ``ceil(E / K)`` edges, the expected halo (over ``degrees``' out-
    degrees, else every node at the mean) split between the parts on the same machine
    (``(g - 1) / (K - 1)`` of the others) and the rest; sent = received."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise InvalidSpecError("parts", "must be an integer >= 1", got=parts)
    if parts > nodes:
        raise InvalidSpecError("gpus", f"must be <= the {nodes:,} nodes (one part per GPU)")
    if nodes < 1 or edges < 0:
        raise InvalidSpecError("nodes", "needs nodes >= 1 and edges >= 0", got=(nodes, edges))
    if degrees is None:
        halo = nodes * expected_random_halo(np.array([edges / nodes]), parts) / parts
    else:
        halo = expected_random_halo(degrees.out_degree, parts, counts=degrees.count) / parts
    local = (min(gpus_per_node, parts) - 1) / (parts - 1) if parts > 1 else 0.0
    load = PartLoad(
        nodes=float(math.ceil(nodes / parts)), edges=float(math.ceil(edges / parts)),
        halo_in_node=halo * local, halo_in_network=halo * (1.0 - local),
        halo_out_node=halo * local, halo_out_network=halo * (1.0 - local),
    )  # fmt: skip
    return (load,) * parts


def gnn_parameters(spec: GnnSpec) -> int:
    """Weights and biases of the GCN / GraphSAGE (GraphSAGE's transform takes ``2 d_in``)."""
    concat = 2 if spec.model == "sage" else 1
    return sum(concat * d_in * d_out + d_out for d_in, d_out in spec.dims())


def part_compute_s(
    spec: GnnSpec,
    load: PartLoad,
    *,
    tflops: float,
    memory_gbps: float,
    kernel_overhead_s: float = 0.0,
) -> float:
    """The full-graph step on a part's nodes and in-edges (0 for an empty part), with its
    launch floor at ``kernel_overhead_s`` a kernel (:meth:`GnnCost.step_time_s`)."""
    if load.nodes < 1:
        return 0.0
    cost = full_graph_cost(spec, nodes=int(load.nodes), edges=int(load.edges))
    return cost.step_time_s(
        tflops=tflops, memory_gbps=memory_gbps, kernel_overhead_s=kernel_overhead_s
    )


def part_memory_bytes(spec: GnnSpec, load: PartLoad) -> float:
    """HBM one part needs: the full-graph memory of its nodes and its halo (whose features and
    activations it holds) and its in-edges -- a little high: the halo needs no outputs."""
    nodes = math.ceil(load.nodes + load.halo_in)
    return full_graph_bytes(spec, nodes=max(nodes, 1), edges=int(load.edges))


def exchange_s(load: PartLoad, *, per_node_bytes: float, links: PartitionLinks) -> float:
    """One part's halo exchange over an epoch: intra-node link and NIC at the same time, each
    full duplex (module docstring)."""
    node = max(load.halo_in_node, load.halo_out_node) * per_node_bytes
    net = max(load.halo_in_network, load.halo_out_network) * per_node_bytes
    return max(node / (links.intra_node_gbps * 1e9), net / (links.network_gbps * 1e9))


def partitioned_epoch(
    spec: GnnSpec,
    loads: tuple[PartLoad, ...],
    *,
    tflops: float,
    memory_gbps: float,
    links: PartitionLinks,
    allreduce_s: float = 0.0,
    kernel_overhead_s: float = 0.0,
) -> PartitionedEpoch:
    """The epoch of a partitioned full-graph training (module docstring); each part's step
    launched at ``kernel_overhead_s`` a kernel (0: no launch floor, as on a CPU)."""
    if not loads:
        raise InvalidSpecError("parts", "needs at least one part")
    if spec.batch is not None:
        raise InvalidSpecError(
            "gpus", "partitioned training is priced for full-graph epochs: drop --batch/--fanouts"
        )
    if not (math.isfinite(allreduce_s) and allreduce_s >= 0):
        raise InvalidSpecError("allreduce_s", "must be a number >= 0", got=allreduce_s)
    per_node = bytes_per_halo_node(spec)
    return PartitionedEpoch(
        compute_s=tuple(
            part_compute_s(
                spec,
                load,
                tflops=tflops,
                memory_gbps=memory_gbps,
                kernel_overhead_s=kernel_overhead_s,
            )
            for load in loads
        ),
        exchange_s=tuple(exchange_s(load, per_node_bytes=per_node, links=links) for load in loads),
        allreduce_s=allreduce_s,
        halo_bytes=sum(load.halo_in for load in loads) * per_node,
        bytes_per_halo_node=per_node,
    )

"""Node shapes: how the GPUs of one server talk to each other and to other servers.

A :class:`NodeShape` describes a cluster building block that is not (only) a cloud offer: an
NVIDIA DGX, an OEM server from an MLPerf system description, or a cloud instance's topology.
Units follow the vendors' datasheets, and differ between the two links:

- ``intra_node_gbps`` is GB/s (10^9 bytes/s) per GPU, both directions summed, as NVIDIA quotes
  NVLink (900 GB/s on an H100 SXM = 450 GB/s each way) and as ``GpuSpec.interconnect_gbps``
  counts. PCIe x16 links are counted the same way: Gen3 32, Gen4 64, Gen5 128 GB/s.
- ``inter_node_gbps`` is Gbit/s per node, the sum over the NICs of the compute fabric (storage
  and management NICs are not counted), as NIC and cloud network figures are quoted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Literal, get_args

from gpucast.domain.catalog import lookup_key
from gpucast.domain.errors import InvalidSpecError, UnknownNameError

IntraNode = Literal["nvswitch", "nvlink-bridge", "pcie"]
Network = Literal["infiniband", "roce", "efa", "ethernet"]
INTRA_NODE_KINDS: tuple[str, ...] = get_args(IntraNode)
NETWORKS: tuple[str, ...] = get_args(Network)


class UnknownSystemError(UnknownNameError):
    kind = "system"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeShape:
    """One server (node) type: its GPUs, the link between them, and its network."""

    name: str  # e.g. "DGX-H100", "p5.48xlarge", an MLPerf system id
    gpu: str  # canonical GpuSpec.name
    gpus_per_node: int
    intra_node: IntraNode  # all-to-all switch, bridged pairs, or PCIe only
    intra_node_gbps: float  # GB/s per GPU, both directions (see the module docstring)
    inter_node_gbps: float | None  # Gbit/s per node over the compute NICs; None: not stated
    network: Network | None  # None: not stated by the source
    cpu: str  # host processors as the source names them ("" when not stated)
    aliases: tuple[str, ...] = ()
    source_url: str
    as_of: date
    note: str = ""

    def __post_init__(self) -> None:
        owner = f"system {self.name}"
        if not self.name or not self.gpu:
            raise InvalidSpecError(owner, "name and gpu are required")
        if self.gpus_per_node < 1:
            raise InvalidSpecError(f"{owner}.gpus_per_node", "must be >= 1", got=self.gpus_per_node)
        if self.intra_node not in INTRA_NODE_KINDS:
            raise InvalidSpecError(
                f"{owner}.intra_node",
                f"must be one of {', '.join(INTRA_NODE_KINDS)}",
                got=self.intra_node,
            )
        if self.network is not None and self.network not in NETWORKS:
            raise InvalidSpecError(
                f"{owner}.network", f"must be one of {', '.join(NETWORKS)}", got=self.network
            )
        if self.intra_node == "nvlink-bridge" and self.gpus_per_node % 2:
            raise InvalidSpecError(
                f"{owner}.gpus_per_node",
                "must be even: NVLink bridges join GPUs in pairs",
                got=self.gpus_per_node,
            )
        for name in ("intra_node_gbps", "inter_node_gbps"):
            value = getattr(self, name)
            if value is None and name == "inter_node_gbps":
                continue
            if not math.isfinite(value) or value <= 0:
                raise InvalidSpecError(f"{owner}.{name}", "must be a finite number > 0", got=value)

    @property
    def link_group_gpus(self) -> int:
        """How many GPUs reach each other at ``intra_node_gbps``: a bridged pair, or the node.
        Traffic between bridged pairs goes over PCIe."""
        return 2 if self.intra_node == "nvlink-bridge" else self.gpus_per_node

    @property
    def inter_node_gbps_per_gpu(self) -> float | None:
        """Gbit/s of the node's compute network per GPU (None where not stated)."""
        if self.inter_node_gbps is None:
            return None
        return self.inter_node_gbps / self.gpus_per_node


def node_shape(shapes: Iterable[NodeShape], name: str) -> NodeShape:
    """The shape called ``name`` or one of its aliases (case-, space-, dash-insensitive)."""
    pool = tuple(shapes)
    key = lookup_key(name)
    for shape in pool:
        if key in {lookup_key(label) for label in (shape.name, *shape.aliases)}:
            return shape
    raise UnknownSystemError(
        name,
        [s.name for s in pool] + [a for s in pool for a in s.aliases],
        fix="see gpucast.catalog.systems.load_systems() for the known node shapes",
    )

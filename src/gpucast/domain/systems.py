"""Node shapes: how the GPUs of one server talk to each other and to other servers.

A :class:`NodeShape` describes a cluster building block that is not (only) a cloud offer: an
NVIDIA DGX, an OEM server from an MLPerf system description, or a cloud instance's topology.
Units follow the vendors' datasheets, and differ between the two links:

- ``intra_node_gbps`` is GB/s (10^9 bytes/s) per GPU, both directions summed, as NVIDIA quotes
  NVLink (900 GB/s on an H100 SXM = 450 GB/s each way) and as ``GpuSpec.interconnect_gbps``
  counts. PCIe x16 links are counted the same way: Gen3 32, Gen4 64, Gen5 128 GB/s.
- ``inter_node_gbps`` is Gbit/s per node, the sum over the NICs of the compute fabric (storage
  and management NICs are not counted), as NIC and cloud network figures are quoted.

A :class:`ClusterSpec` is a cluster a user has rather than rents (issue #22 item 5): up to
``nodes`` servers of one shape, with an optional price per GPU-hour. ``plan train``,
``simulate train`` and ``predict train`` take one through ``--cluster FILE|NAME``; the request
options that name it are declared once here (:func:`cluster_option` and its siblings).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, cast, get_args

from gpucast.domain.catalog import lookup_key
from gpucast.domain.errors import InvalidSpecError, UnknownNameError
from gpucast.domain.options import option

#: How a node's GPUs reach each other: through a switch (NVSwitch), in bridged pairs (NVLink
#: bridges; other pairs over PCIe), over PCIe only, or a ``mesh`` of direct links between
#: every pair (Gaudi's on-chip RoCE ports, AMD's Infinity Fabric): a collective over the
#: whole node spreads over every peer's links, as through a switch; a smaller group reaches
#: only its members' links (:meth:`NodeShape.ring_gbps`,
#: :meth:`gpucast.domain.parallel.ClusterShape.group_gbps`).
IntraNode = Literal["nvswitch", "nvlink-bridge", "pcie", "mesh"]
Network = Literal["infiniband", "roce", "efa", "slingshot", "ethernet"]
INTRA_NODE_KINDS: tuple[str, ...] = get_args(IntraNode)
NETWORKS: tuple[str, ...] = get_args(Network)


def as_intra_node(value: str) -> IntraNode:
    """``value`` as an :data:`IntraNode` (one of :data:`INTRA_NODE_KINDS`; callers check)."""
    if value not in INTRA_NODE_KINDS:
        raise InvalidSpecError(
            "intra_node", f"must be one of {', '.join(INTRA_NODE_KINDS)}", got=value
        )
    return cast("IntraNode", value)


def as_network(value: str) -> Network:
    """``value`` as a :data:`Network` (one of :data:`NETWORKS`; callers check)."""
    if value not in NETWORKS:
        raise InvalidSpecError("network", f"must be one of {', '.join(NETWORKS)}", got=value)
    return cast("Network", value)


def group_link_gbps(
    intra_node: IntraNode, link_gbps: float, gpus: int, node_gpus: int, pcie_gbps: float
) -> float:
    """Gbit/s each of ``gpus`` GPUs of one node of ``node_gpus`` reaches the others at in a
    collective among them, where each GPU's intra-node link is ``link_gbps``: all of it
    through a switch or over PCIe only; with bridged pairs the bridge for a pair, and for a
    larger group, whose ring crosses PCIe, ``pcie_gbps`` where that is slower; in a mesh only
    the links to the group's other members, ``(gpus - 1) / (node_gpus - 1)`` of it (a
    point-to-point send, ``gpus`` <= 2: one peer's link). The one rule
    :meth:`NodeShape.ring_gbps` and :meth:`gpucast.domain.parallel.ClusterShape.group_gbps`
    apply."""
    if intra_node == "nvlink-bridge" and gpus > 2:
        return min(link_gbps, pcie_gbps)
    if intra_node == "mesh" and node_gpus > 1:
        return link_gbps * (max(2, min(gpus, node_gpus)) - 1) / (node_gpus - 1)
    return link_gbps


#: Networks NCCL runs over RDMA (the rest is priced as TCP by the collective model); HPE
#: Slingshot-11 through libfabric's CXI provider and the aws-ofi-nccl / aws-ofi-rccl plugin.
RDMA_NETWORKS: frozenset[str] = frozenset({"infiniband", "roce", "efa", "slingshot"})


class UnknownSystemError(UnknownNameError):
    kind = "system"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeShape:
    """One server (node) type: its GPUs, the link between them, and its network."""

    name: str  # e.g. "DGX-H100", "p5.48xlarge", an MLPerf system id
    gpu: str  # canonical GpuSpec.name
    gpus_per_node: int
    intra_node: IntraNode  # all-to-all switch, bridged pairs, PCIe only, or a direct mesh
    intra_node_gbps: float  # GB/s per GPU, both directions (see the module docstring)
    inter_node_gbps: float | None  # Gbit/s per node over the compute NICs; None: not stated
    network: Network | None  # None: not stated by the source
    cpu: str  # host processors as the source names them ("" when not stated)
    aliases: tuple[str, ...] = ()
    source_url: str
    as_of: date
    note: str = ""
    #: where ``intra_node_gbps`` was derived from, when it was (e.g. the ring bandwidth of the
    #: GPUs a job gets on a server topology); shown with the link
    link_source: str = ""

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
    def rdma(self) -> bool:
        """Whether the compute network is RDMA-class (InfiniBand, RoCE, EFA)."""
        return self.network in RDMA_NETWORKS

    @property
    def inter_node_gbps_per_gpu(self) -> float | None:
        """Gbit/s of the node's compute network per GPU (None where not stated)."""
        if self.inter_node_gbps is None:
            return None
        return self.inter_node_gbps / self.gpus_per_node

    def ring_gbps(self, gpus: int, pcie_gbps: float) -> float:
        """Gbit/s per GPU of a collective over ``gpus`` GPUs of one node, in the unit of
        ``GpuSpec.interconnect_gbps x 8`` that the communication model takes: the intra-node
        link, except that a ring over more than a bridged pair also crosses PCIe
        (``pcie_gbps``), whichever is slower, and that in a mesh a group smaller than the
        node reaches only its members' links."""
        link = self.intra_node_gbps * 8.0
        if gpus <= 1:  # no collective: the link as it is
            return link
        return group_link_gbps(self.intra_node, link, gpus, self.gpus_per_node, pcie_gbps)


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


#: Labels of a user's cluster where its description gives none.
ON_PREM = "on-prem"
LOCAL_REGION = "local"


def _price(owner: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpecError(f"{owner}", "must be a number of US$", got=value)
    if not (math.isfinite(value) and value >= 0):
        raise InvalidSpecError(f"{owner}", "must be a finite number >= 0", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """A cluster the user has (on-prem, a reservation): up to ``nodes`` servers of ``shape``.

    ``price_usd_per_gpu_hour`` ``None``: no price given -- results show costs of 0 and say so.
    ``spot_usd_per_gpu_hour`` ``None``: no spot market (plans are on demand only).
    ``provider`` / ``region`` are labels for the results (``on-prem`` / ``local`` by default).
    ``grid_gco2e_per_kwh`` ``None``: the grid's carbon intensity is the catalog's figure for
    ``provider`` / ``region`` (``grid_carbon.csv``), if any; ``grid_source`` says where a given
    one was written (``cluster file lab.yaml, line 7``).
    ``source`` says where it was described: a file path, ``catalog systems.csv: NAME``, or
    the flags; ``set_by`` lists the flags that changed that description (``--nodes 2``).
    """

    shape: NodeShape
    nodes: int
    price_usd_per_gpu_hour: float | None = None
    spot_usd_per_gpu_hour: float | None = None
    provider: str = ON_PREM
    region: str = LOCAL_REGION
    grid_gco2e_per_kwh: float | None = None
    grid_source: str = ""
    source: str
    set_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise InvalidSpecError("cluster.nodes", "must be an integer >= 1", got=self.nodes)
        _price("cluster.price_usd_per_gpu_hour", self.price_usd_per_gpu_hour)
        _price("cluster.spot_usd_per_gpu_hour", self.spot_usd_per_gpu_hour)
        if self.spot_usd_per_gpu_hour is not None and self.price_usd_per_gpu_hour is None:
            raise InvalidSpecError(
                "cluster.price_usd_per_gpu_hour",
                "is required with spot_usd_per_gpu_hour (the on-demand price of the nodes)",
                fix="add price_usd_per_gpu_hour, or drop spot_usd_per_gpu_hour",
            )
        if self.nodes > 1 and self.shape.inter_node_gbps is None:
            raise InvalidSpecError(
                "cluster.inter_node_gbps",
                f"is required for nodes > 1 (got nodes {self.nodes})",
                fix="add inter_node_gbps: 400 (Gbit/s per node over the compute network)",
            )
        if not self.provider or not self.region:
            raise InvalidSpecError("cluster.provider/region", "must not be empty")
        g = self.grid_gco2e_per_kwh
        number = isinstance(g, int | float) and not isinstance(g, bool)
        if g is not None and not (number and math.isfinite(g) and g > 0):
            raise InvalidSpecError(
                "cluster.grid_gco2e_per_kwh", "must be a finite number > 0 (gCO2e/kWh)", got=g
            )

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def gpu(self) -> str:
        return self.shape.gpu

    @property
    def gpus_per_node(self) -> int:
        return self.shape.gpus_per_node

    @property
    def max_gpus(self) -> int:
        return self.nodes * self.shape.gpus_per_node

    @property
    def priced(self) -> bool:
        return self.price_usd_per_gpu_hour is not None

    @property
    def has_spot(self) -> bool:
        return self.spot_usd_per_gpu_hour is not None

    def check_budget(self, budget_usd: float | None) -> None:
        """Refuse a budget on a cluster without a price: every plan costs $0 there, so any
        budget would hold (``plan train`` and ``plan llm-train``)."""
        if budget_usd is not None and not self.priced:
            raise InvalidSpecError(
                "budget",
                f"cannot bind: the cluster {self.name} has no price, so every plan costs $0",
                got=budget_usd,
                fix="give the cluster a price (--price-per-gpu-hour P, or "
                "price_usd_per_gpu_hour in its file), or drop --budget",
            )

    def used_gpus(self, gpus: int | None) -> int:
        """The GPUs a verb runs on: ``--gpus``, or by default (None) all of the cluster's."""
        return self.max_gpus if gpus is None else gpus

    def usd_per_hour(self, gpus: int, *, spot: bool = False) -> float | None:
        """US$/h of ``gpus`` GPUs (0 without a price; ``None``: no spot market)."""
        if spot:
            return None if self.spot_usd_per_gpu_hour is None else self.spot_usd_per_gpu_hour * gpus
        return (self.price_usd_per_gpu_hour or 0.0) * gpus

    def describe(self) -> str:
        """One line: the nodes, their links and the price."""
        s = self.shape
        intra = f"{s.intra_node} {s.intra_node_gbps:g} GB/s per GPU"
        if s.link_source:  # a topology's ring, not a switch (QA 40 M #7 read "nvswitch" on a DGX-1)
            intra = f"{s.intra_node_gbps:g} GB/s per GPU: {s.link_source}"
        if s.inter_node_gbps is None:
            inter = "no inter-node network"
        else:
            inter = f"{s.network or 'network'} {s.inter_node_gbps:g} Gbit/s per node"
        if self.price_usd_per_gpu_hour is None:
            price = "no price given (costs shown as $0)"
        else:
            price = f"${self.price_usd_per_gpu_hour:g} per GPU-hour"
            price += (
                f", spot ${self.spot_usd_per_gpu_hour:g}"
                if self.spot_usd_per_gpu_hour is not None
                else ", on demand only"
            )
        nodes = f"up to {self.nodes} nodes" if self.nodes > 1 else "1 node"
        flags = f"; set by {', '.join(self.set_by)}" if self.set_by else ""
        return (
            f"{self.name} ({self.provider}/{self.region}): {nodes} x {s.gpus_per_node} "
            f"{s.gpu} ({intra}; {inter}); {price}{flags}"
        )


# -- the request options that name a cluster (one declaration for every verb) -------------
ClusterSettings = tuple[tuple[str, Any], ...]

#: A user's note on results without a price.
NO_PRICE_NOTE = (
    "no price given: costs are shown as $0 (add price_usd_per_gpu_hour to the cluster file "
    "or pass --price-per-gpu-hour)"
)


def _bad_setting(text: object) -> InvalidSpecError:
    return InvalidSpecError(
        "cluster-set", "must be KEY=VALUE", got=text, fix="e.g. --cluster-set inter_node_gbps=400"
    )


def parse_cluster_settings(value: Any) -> ClusterSettings:
    """Cluster fields from a mapping, ``(key, value)`` pairs or ``KEY=VALUE`` texts
    (repeated or comma-separated); values stay as given (the cluster reader parses them).
    A piece without ``=`` after a pair continues that pair's value, so a list field reads
    as in a cluster file: ``gpu_ids=0,1,4,5`` (QA 40 M #1: it was "must be KEY=VALUE")."""
    if isinstance(value, Mapping):
        return tuple((str(k).strip(), v) for k, v in value.items())
    out: list[tuple[str, Any]] = []
    for item in value if isinstance(value, list | tuple) else [value]:
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
            out.append((item[0].strip(), item[1]))  # already parsed (to_options)
            continue
        if not isinstance(item, str):
            raise _bad_setting(item)
        for piece in (p.strip() for p in item.split(",") if p.strip()):
            key, eq, text = piece.partition("=")
            if not eq and out and isinstance(out[-1][1], str):
                out[-1] = (out[-1][0], f"{out[-1][1]},{piece}")
                continue
            if not eq or not key.strip():
                raise _bad_setting(piece)
            out.append((key.strip().replace("-", "_"), text.strip()))
    return tuple(out)


def cluster_option() -> Any:
    return option(
        None,
        help="A cluster you have, instead of the cloud catalog: a YAML/TOML file (gpu, "
        "gpus_per_node, nodes, intra_node, intra_node_gbps in GB/s per GPU, inter_node_gbps "
        "in Gbit/s per node, network, price_usd_per_gpu_hour; see the README) or a node "
        "shape of the catalog, e.g. DGX-H100.",
        metavar="FILE|NAME",
        example="cluster.yaml",
    )


def cluster_nodes_option() -> Any:
    return option(
        None,
        flag="nodes",
        help="Nodes of the --cluster [default: the file's nodes; 1 for a catalog shape].",
        example="2",
    )


def cluster_price_option() -> Any:
    return option(
        None,
        flag="price-per-gpu-hour",
        help="US$ per GPU-hour of the --cluster [default: the file's; none: costs shown as 0].",
        example="2.5",
    )


def cluster_set_option() -> Any:
    return option(
        (),
        flag="cluster-set",
        kind="list",
        parse=parse_cluster_settings,
        metavar="KEY=VALUE",
        help="Set a field of the --cluster, e.g. inter_node_gbps=400 (Gbit/s per node; "
        "intra_node_gbps is GB/s per GPU) (repeatable); without --cluster these fields "
        "describe the whole cluster.",
        example="inter_node_gbps=400",
    )


def check_cluster_options(
    cluster: str | None,
    nodes: int | None,
    price: float | None,
    settings: ClusterSettings,
) -> bool:
    """Validate the cluster options of a request; whether a cluster is named at all."""
    named = cluster is not None or bool(settings)
    if cluster is not None and not str(cluster).strip():
        raise InvalidSpecError("cluster", "must not be empty", fix="e.g. --cluster cluster.yaml")
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1):
        raise InvalidSpecError("nodes", "must be an integer >= 1", got=nodes, fix="e.g. --nodes 2")
    _price("price-per-gpu-hour", price)
    if not named and (nodes is not None or price is not None):
        flag = "nodes" if nodes is not None else "price-per-gpu-hour"
        raise InvalidSpecError(
            flag,
            "describes a --cluster, and none is given",
            fix="add --cluster FILE|NAME (e.g. --cluster DGX-H100)",
        )
    return named


def used_gpus_text(gpus: int, cluster_gpus: int, where: str, *, default: bool) -> str:
    """``16 of the cluster's 32 GPUs (2 nodes x 8; --gpus 16)``: the GPUs a verb runs on a
    ``--cluster`` (:meth:`ClusterSpec.used_gpus`), ``where`` they sit, and whether they are
    the default, all of them, or ``--gpus``."""
    why = "default: all of them; --gpus N for fewer" if default else f"--gpus {gpus}"
    return f"{gpus} of the cluster's {cluster_gpus} GPUs ({where}; {why})"

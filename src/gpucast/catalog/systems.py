"""Node shapes (``data/systems.csv``): DGX systems, MLPerf system descriptions, cloud instances.

One row per server type with the source it comes from (a vendor page, or an MLPerf Training
v4.0 ``<submitter>/systems/<system>.json`` at its commit) and the date it was read. The ``gpu``
column may use any GPU alias of the catalog; it is stored canonical. Parsing is strict and
cached per process; :func:`get_system` looks a name or alias up and lists close names when it
is unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources

from gpucast.catalog._csv import (
    parse_date,
    parse_float,
    parse_int,
    read_rows,
    require_float,
    require_text,
    split_bar,
)
from gpucast.catalog.loader import load_catalog
from gpucast.domain.catalog import Catalog, GpuSpec, lookup_key
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownGpuError
from gpucast.domain.systems import (
    INTRA_NODE_KINDS,
    NETWORKS,
    NodeShape,
    as_intra_node,
    as_network,
    node_shape,
)

SYSTEM_COLUMNS = (
    "name",
    "gpu",
    "gpus_per_node",
    "intra_node",
    "intra_node_gbps",
    "inter_node_gbps",
    "network",
    "cpu",
    "aliases",
    "source_url",
    "as_of",
    "note",
)


def parse_systems(text: str, path: str, gpus: Sequence[GpuSpec]) -> tuple[NodeShape, ...]:
    """Node shapes from CSV text; GPU names are checked against ``gpus``."""
    lookup = Catalog(gpus=tuple(gpus), offers=())
    shapes: list[NodeShape] = []
    labels: dict[str, str] = {}
    for line, row in read_rows(text, path, SYSTEM_COLUMNS):
        name = require_text(row["name"], path=path, line=line, column="name")
        aliases = split_bar(row["aliases"])
        if any(shape.name == name for shape in shapes):
            raise DataFormatError(path, f"second row named {name!r}", line=line, column="name")
        for label in (name, *aliases):
            other = labels.get(lookup_key(label))
            if other is not None and other != name:
                raise DataFormatError(
                    path,
                    f"{label!r} is already a name or alias of {other}",
                    line=line,
                    column="name" if label == name else "aliases",
                )
            labels[lookup_key(label)] = name
        try:
            gpu = lookup.gpu(require_text(row["gpu"], path=path, line=line, column="gpu")).name
        except UnknownGpuError as exc:
            raise DataFormatError(path, exc.message, line=line, column="gpu") from exc
        intra = _choice(row["intra_node"], INTRA_NODE_KINDS, path, line, "intra_node")
        per_node = parse_int(
            row["gpus_per_node"], path=path, line=line, column="gpus_per_node", minimum=1
        )
        network = row["network"]
        if network:
            _choice(network, NETWORKS, path, line, "network")
        try:
            shapes.append(
                NodeShape(
                    name=name,
                    gpu=gpu,
                    gpus_per_node=per_node,
                    intra_node=as_intra_node(intra),
                    intra_node_gbps=require_float(
                        row["intra_node_gbps"], path=path, line=line, column="intra_node_gbps"
                    ),
                    inter_node_gbps=parse_float(
                        row["inter_node_gbps"],
                        path=path,
                        line=line,
                        column="inter_node_gbps",
                        optional=True,
                    ),
                    network=as_network(network) if network else None,
                    cpu=row["cpu"],
                    aliases=aliases,
                    source_url=require_text(
                        row["source_url"], path=path, line=line, column="source_url"
                    ),
                    as_of=parse_date(row["as_of"], path=path, line=line, column="as_of"),
                    note=row["note"],
                )
            )
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
    return tuple(shapes)


def _choice(value: str, allowed: tuple[str, ...], path: str, line: int, column: str) -> str:
    if value not in allowed:
        raise DataFormatError(
            path,
            f"{column} must be one of {', '.join(allowed)}, got {value!r}",
            line=line,
            column=column,
        )
    return value


@functools.cache
def load_systems() -> tuple[NodeShape, ...]:
    """The built-in node shapes."""
    text = resources.files("gpucast.catalog").joinpath("data", "systems.csv").read_text("utf-8")
    return parse_systems(text, "systems.csv", load_catalog().gpus)


def get_system(name: str) -> NodeShape:
    """The built-in node shape called ``name`` or one of its aliases; unknown names raise
    :class:`~gpucast.domain.systems.UnknownSystemError` listing close matches."""
    return node_shape(load_systems(), name)


def mesh_node_gpus(gpu: str) -> int:
    """GPUs per node where every node shape of the catalog that holds several ``gpu`` (a
    canonical GPU name) joins them in a ``mesh`` of that size -- the node a prediction for
    that GPU type assumes where no cluster says otherwise (Gaudi 2's 8-device servers); 0
    where the catalog has no such shape or its shapes differ."""
    shapes = {
        (s.intra_node, s.gpus_per_node)
        for s in load_systems()
        if s.gpu == gpu and s.gpus_per_node > 1
    }
    if len(shapes) != 1:
        return 0
    ((kind, gpus),) = shapes
    return gpus if kind == "mesh" else 0


def mesh_linked(gpu: GpuSpec) -> GpuSpec:
    """``gpu`` as the catalog's meshed node of its type links it (:func:`mesh_node_gpus`): where
    that node gives each GPU less to its peers than the chip's own links -- the HPE Cray
    EX235a's MI250X packages reach their peers on 5 of 8 Infinity Fabric links, 500 of 800
    GB/s, the other 3 going to the CPU and the NIC -- its figure; else ``gpu`` itself."""
    from dataclasses import replace

    links = {s.intra_node_gbps for s in load_systems() if s.gpu == gpu.name and s.gpus_per_node > 1}
    if not mesh_node_gpus(gpu.name) or len(links) != 1 or gpu.interconnect_gbps is None:
        return gpu
    (link,) = links
    return gpu if link >= gpu.interconnect_gbps else replace(gpu, interconnect_gbps=link)


def bridged_pairs(gpu: str) -> bool:
    """Whether GPUs of type ``gpu`` (a canonical name) pair up through NVLink bridges where no
    cluster says otherwise: the catalog's node shapes of several such GPUs have no switch or
    mesh and at least one bridges them (PCIe cards: H100 PCIe / NVL, A30, A40, RTX A6000)."""
    kinds = {s.intra_node for s in load_systems() if s.gpu == gpu and s.gpus_per_node > 1}
    return "nvlink-bridge" in kinds and kinds <= {"nvlink-bridge", "pcie"}


def mesh_board_gpus(gpu: str, gpus: int) -> int:
    """The meshed board (:func:`mesh_node_gpus`) an instance of ``gpus`` GPUs of type ``gpu``
    sits on: 0 where the type is not meshed or the instance spans more than one board."""
    board = mesh_node_gpus(gpu)
    return board if gpus <= board else 0

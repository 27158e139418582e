"""All-reduce over PCIe (``data/pcie_allreduce.csv``): what NCCL reaches between GPUs that have
no NVLink (or whose NVLink bridges join only pairs, so a larger group crosses PCIe), from
published ``nccl-tests`` figures and NCCL's own model of a PCIe link.

Each row is sourced and dated: ``measured`` rows are ``all_reduce_perf`` bus bandwidths (GB/s,
the ``busbw`` column) of one server, GPU count, PCIe generation and message size as their
posts give them; ``nccl-model`` rows are the rate NCCL's topology code plans a PCIe x16 link
at (``width x speed / 80``: 75% of the nominal rate per direction).

:func:`pcie_allreduce_gb_per_s` is the rule the collective models take for a group of ``gpus``
GPUs of PCIe generation ``g``: the least of NCCL's figure for a Gen-``g`` link and every
measured figure (each server's largest message) of a server whose links are at least as fast
(generation >= ``g``) with no more GPUs -- a server cannot beat one with faster links and
fewer GPUs. Where neither exists the answer is None and callers keep the x16 link's nominal
rate (:data:`gpucast.domain.catalog.PCIE_X16_GBIT_PER_S`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from gpucast.catalog._csv import (
    parse_date,
    parse_int,
    read_rows,
    require_float,
    require_text,
)
from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S, GpuSpec
from gpucast.domain.errors import DataFormatError
from gpucast.domain.parallel import NodeLinks
from gpucast.domain.provenance import Sourced

_PATH = "pcie_allreduce.csv"
COLUMNS = (
    "kind", "gpu", "gpus", "pcie_generation", "host", "message_bytes", "busbw_gb_per_s",
    "algorithm", "source_url", "as_of", "note",
)  # fmt: skip
KINDS = ("measured", "nccl-model")
#: Tensor-parallel group sizes a node's PCIe figure is given for (the largest PCIe servers).
GROUP_SIZES = range(2, 17)


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieAllreduceFigure:
    """One row: a measured ``busbw_gb_per_s`` of ``gpus`` GPUs at ``message_bytes``, or
    (``kind`` ``nccl-model``, ``gpus`` 0) NCCL's planned rate of a PCIe x16 link."""

    kind: str
    gpu: str
    gpus: int
    pcie_generation: int
    message_bytes: int
    busbw_gb_per_s: float
    source_url: str


def _count(
    row: Mapping[str, str], column: str, line: int, path: str, *, minimum: int, needed: bool = True
) -> int:
    """An integer cell (0 where the row's kind does not use it)."""
    if not needed:
        return 0
    return parse_int(row[column], path=path, line=line, column=column, minimum=minimum)


def parse_pcie_allreduce(text: str, path: str = _PATH) -> tuple[PcieAllreduceFigure, ...]:
    """The rows of CSV text in the format of ``data/pcie_allreduce.csv``."""
    rows: list[PcieAllreduceFigure] = []
    for line, row in read_rows(text, path, COLUMNS):
        kind = require_text(row["kind"], path=path, line=line, column="kind")
        if kind not in KINDS:
            raise DataFormatError(path, f"kind must be one of {', '.join(KINDS)}", line=line)
        measured = kind == "measured"
        rows.append(
            PcieAllreduceFigure(
                kind=kind,
                gpu=require_text(row["gpu"], path=path, line=line, column="gpu")
                if measured
                else "",
                gpus=_count(row, "gpus", line, path, minimum=2, needed=measured),
                pcie_generation=_count(row, "pcie_generation", line, path, minimum=1),
                message_bytes=_count(row, "message_bytes", line, path, minimum=1, needed=measured),
                busbw_gb_per_s=require_float(
                    row["busbw_gb_per_s"], path=path, line=line, column="busbw_gb_per_s"
                ),
                source_url=require_text(
                    row["source_url"], path=path, line=line, column="source_url"
                ),
            )
        )
        parse_date(row["as_of"], path=path, line=line, column="as_of")
    return tuple(rows)


@functools.cache
def load_pcie_allreduce() -> tuple[PcieAllreduceFigure, ...]:
    """The built-in figures."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text("utf-8")
    return parse_pcie_allreduce(text)


def _largest_messages(rows: tuple[PcieAllreduceFigure, ...]) -> list[PcieAllreduceFigure]:
    """Each measured server and GPU count at its largest message (the bandwidth plateau)."""
    best: dict[tuple[str, int, int], PcieAllreduceFigure] = {}
    for r in rows:
        if r.kind != "measured":
            continue
        key = (r.source_url, r.gpus, r.pcie_generation)
        if key not in best or r.message_bytes > best[key].message_bytes:
            best[key] = r
    return list(best.values())


def pcie_allreduce_gb_per_s(
    generation: int, gpus: int, rows: tuple[PcieAllreduceFigure, ...] | None = None
) -> Sourced[float] | None:
    """The all-reduce bus bandwidth (GB/s) ``gpus`` GPUs of PCIe ``generation`` reach (module
    docstring's rule), with the figure it comes from; None where no row bounds it."""
    rows = load_pcie_allreduce() if rows is None else rows
    bounds: list[tuple[float, str]] = [
        (r.busbw_gb_per_s, f"NCCL's model of a PCIe Gen{generation} x16 link ({r.source_url})")
        for r in rows
        if r.kind == "nccl-model" and r.pcie_generation == generation
    ]
    bounds += [
        (
            r.busbw_gb_per_s,
            f"nccl-tests all_reduce_perf on {r.gpus} x {r.gpu} (PCIe Gen{r.pcie_generation}, "
            f"{r.message_bytes / 2**20:,.0f} MiB; {r.source_url})",
        )
        for r in _largest_messages(rows)
        if r.pcie_generation >= generation and r.gpus <= gpus
    ]
    if not bounds:
        return None
    value, source = min(bounds)
    return Sourced(value, source)


def node_pcie_busbw_gbps(gpu: GpuSpec, *, bridged: bool = False) -> tuple[tuple[int, float], ...]:
    """:attr:`~gpucast.domain.parallel.NodeLinks.pcie_busbw_gbps` of a node of ``gpu``: the
    rule's Gbit/s per group size where the GPU has no NVLink or its cards are ``bridged`` in
    pairs (a group beyond a pair crosses PCIe); empty where NVLink joins the group, or where
    no row gives its generation."""
    if gpu.interconnect_gbps is not None and not bridged:
        return ()
    out: list[tuple[int, float]] = []
    for gpus in GROUP_SIZES:
        figure = pcie_allreduce_gb_per_s(gpu.pcie_generation, gpus)
        if figure is not None and (not out or out[-1][1] != figure.value * 8.0):
            out.append((gpus, figure.value * 8.0))
    return tuple(out)


def catalog_node_links(gpu: GpuSpec, mesh_gpus: int = 0) -> NodeLinks:
    """How a node of ``gpu`` joins a tensor-parallel group where no cluster says otherwise:
    its mesh of ``mesh_gpus`` (0: none), its cards bridged in pairs (catalog systems.csv), and
    the PCIe all-reduce figures a group crossing PCIe reaches (:func:`node_pcie_busbw_gbps`:
    GPUs without NVLink, and bridged cards beyond a pair). Every verb that prices a
    tensor-parallel all-reduce on such a node takes it (``predict infer`` / ``llm-serve``,
    ``predict llm-train``, ``plan llm-train``)."""
    from gpucast.catalog.systems import bridged_pairs

    bridged = bridged_pairs(gpu.name)
    return NodeLinks(
        mesh_gpus=mesh_gpus,
        bridged=bridged,
        pcie_busbw_gbps=node_pcie_busbw_gbps(gpu, bridged=bridged),
    )


def pcie_group_gbps(generation: int, gpus: int) -> float:
    """Gbit/s per GPU of an all-reduce of ``gpus`` GPUs that crosses PCIe of ``generation``
    (GPUs without NVLink, or bridged pairs beyond a pair): the rule's figure, else the x16
    link's nominal rate (:data:`gpucast.domain.catalog.PCIE_X16_GBIT_PER_S`)."""
    figure = pcie_allreduce_gb_per_s(generation, gpus)
    return PCIE_X16_GBIT_PER_S.get(generation, 128.0) if figure is None else figure.value * 8.0


def data_parallel_gbps(gpu: GpuSpec, gpus_in_node: int) -> float:
    """Gbit/s per GPU of the data-parallel gradient all-reduce among ``gpus_in_node`` GPUs of
    one node of ``gpu`` where no cluster says otherwise: the rule a tensor-parallel
    all-reduce is priced by (:func:`gpucast.predict.parallel.group_link_gbps` on
    :func:`catalog_node_links`) -- NVLink through a switch at the datasheet link; cards
    bridged in pairs at the bridge for a pair and, beyond a pair, at NCCL's PCIe figure for
    the group (:func:`pcie_group_gbps`); GPUs without NVLink at that figure. ``plan train``'s
    catalog offers and the step-time fit's MLPerf rows take it."""
    from gpucast.predict.parallel import group_link_gbps

    return group_link_gbps(gpu, gpus_in_node, catalog_node_links(gpu))

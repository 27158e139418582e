"""Heterogeneous graphs by their statistics (``data/gnn_graphs.csv``), GNN configurations
(``data/gnn_models.csv``) and the calibration of a software stack's GNN steps
(``data/gnn_calibration.csv``).

Graph rows: ``graph``, ``kind`` (``node`` or ``relation``), ``name``; a node row has ``count``
(nodes) and ``feature_dim``; a relation row has ``src`` and ``dst`` (node types) and ``count``
(edges). Shipped rows carry ``source_url`` and ``as_of``. A user's own graph
(``--graph-stats FILE``) uses the same columns; only ``kind``, ``name``, ``src``, ``dst``,
``count`` and ``feature_dim`` are required there.

Optional relation columns ``in_degree`` and ``out_degree``: ``powerlaw:ALPHA``, the law of the
destination nodes' in-degree and of the source nodes' out-degree along the relation (their
mean is the relation's edges over the type's nodes); empty, or no column, is every node at
the mean. An ``out_degree`` left empty beside an ``in_degree`` law is the same law on the same
nodes for a relation within one node type, the mean (uniform draws) across two types
(:func:`gpucast.predict.gnn_degrees.relation_degrees`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from importlib import resources

from gpucast.catalog._csv import parse_float, parse_int, read_rows, require_text
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownNameError
from gpucast.predict.gat import HeteroGraph, NodeType, Relation, has_degree_laws, relation_laws
from gpucast.predict.gnn_degrees import parse_powerlaw

GRAPH_COLUMNS = ("kind", "name", "src", "dst", "count", "feature_dim")
#: Optional relation columns: ``powerlaw:ALPHA`` or empty (module docstring).
DEGREE_COLUMNS = ("in_degree", "out_degree")
CATALOG_COLUMNS = ("graph", *GRAPH_COLUMNS, "source_url", "as_of")
MODEL_COLUMNS = (
    "model", "graph", "target_type", "layers", "hidden", "heads", "fanouts", "classes",
    "batch_per_gpu", "reverse_relations", "source_url", "as_of",
)  # fmt: skip


class UnknownGraphError(UnknownNameError):
    """A graph not in the catalog's ``gnn_graphs.csv`` (``--graph``)."""

    kind = "graph"


def parse_graphs(
    text: str, path: str, *, required: tuple[str, ...] = CATALOG_COLUMNS, default_graph: str = ""
) -> dict[str, HeteroGraph]:
    """Graphs from CSV text; a malformed cell or an inconsistent graph names the file and line."""
    nodes: dict[str, list[NodeType]] = {}
    rels: dict[str, list[Relation]] = {}
    last_line: dict[str, int] = {}
    rel_line: dict[tuple[str, str], int] = {}
    node_line: dict[tuple[str, str], int] = {}
    for line, row in read_rows(text, path, required):
        graph = require_text(row.get("graph") or default_graph, path=path, line=line,
                             column="graph")  # fmt: skip
        kind = row["kind"].lower()
        name = require_text(row["name"], path=path, line=line, column="name")
        count = parse_int(row["count"], path=path, line=line, column="count",
                          minimum=1 if kind == "node" else 0)  # fmt: skip
        last_line[graph] = line
        try:
            if kind == "node":
                _check_once("node type", (graph, name), node_line, path, line)
                dim = parse_int(row["feature_dim"], path=path, line=line, column="feature_dim",
                                minimum=1)  # fmt: skip
                nodes.setdefault(graph, []).append(
                    NodeType(name=name, count=count, feature_dim=dim)
                )
                node_line[graph, name] = line
            elif kind == "relation":
                _check_once("relation", (graph, name), rel_line, path, line)
                src = require_text(row["src"], path=path, line=line, column="src")
                dst = require_text(row["dst"], path=path, line=line, column="dst")
                alphas = [_law(row, column, path, line) for column in DEGREE_COLUMNS]
                rels.setdefault(graph, []).append(
                    Relation(name=name, src=src, dst=dst, edges=count, in_alpha=alphas[0],
                             out_alpha=alphas[1])
                )  # fmt: skip
                rel_line[graph, name] = line
            else:
                raise DataFormatError(
                    path, f"kind must be node or relation, got {row['kind']!r}", line=line,
                    column="kind",
                )  # fmt: skip
        except InvalidSpecError as exc:
            raise DataFormatError(path, exc.message, line=line) from exc
    out: dict[str, HeteroGraph] = {}
    for graph in sorted(set(nodes) | set(rels)):
        try:
            out[graph] = HeteroGraph(
                name=graph,
                node_types=tuple(nodes.get(graph, ())),
                relations=tuple(rels.get(graph, ())),
            )
        except InvalidSpecError as exc:
            prefix = "" if graph == default_graph else f"graph {graph}: "
            raise DataFormatError(
                path, prefix + exc.message, line=last_line[graph], fix=exc.fix
            ) from exc
        _check_edge_counts(out[graph], path, rel_line)
        _check_laws(out[graph], path, rel_line)
    return out


def _check_once(
    what: str, key: tuple[str, str], seen: dict[tuple[str, str], int], path: str, line: int
) -> None:
    """A node type or relation named a second time is an error on its own line (the graph's
    check, after the last row, named that last row)."""
    if key in seen:
        raise DataFormatError(
            path, f"{what} {key[1]!r} appears twice (first on line {seen[key]})", line=line,
            column="name", fix=f"one row per {what}",
        )  # fmt: skip


def _check_edge_counts(graph: HeteroGraph, path: str, rel_line: dict[tuple[str, str], int]) -> None:
    """Each relation has at most the edges its node types allow without self-loops or
    repeats (``--edges`` is held to ``nodes x (nodes - 1)`` the same way), else its line."""
    counts = {t.name: t.count for t in graph.node_types}
    for r in graph.relations:
        n_src, n_dst = counts[r.src], counts[r.dst]
        most = n_src * n_dst - (n_src if r.src == r.dst else 0)
        if r.edges > most:
            raise DataFormatError(
                path, f"relation {r.name}: {r.edges:,} edges, more than the {most:,} that "
                f"{n_src:,} {r.src} and {n_dst:,} {r.dst} nodes can have without self-loops or "
                "repeats", line=rel_line[graph.name, r.name], column="count",
                fix="check the relation's count (directed edges) and its node types' counts",
            )  # fmt: skip


def _law(row: dict[str, str], column: str, path: str, line: int) -> float | None:
    """A relation's ``powerlaw:ALPHA`` cell (empty or no column: None, the mean)."""
    cell = row.get(column, "")
    if not cell:
        return None
    try:
        alpha = parse_powerlaw(cell, column)
    except InvalidSpecError as exc:
        raise DataFormatError(
            path, exc.message.removeprefix(f"{column}: "), line=line, column=column, fix=exc.fix
        ) from exc
    if alpha is None:
        raise DataFormatError(
            path, f"must be powerlaw:ALPHA or empty, got {cell!r}", line=line, column=column,
            fix="e.g. powerlaw:2.1, or leave it empty for every node at the mean degree",
        )  # fmt: skip
    return alpha


def _check_laws(graph: HeteroGraph, path: str, rel_line: dict[tuple[str, str], int]) -> None:
    """Each relation's laws fit its nodes and edges (a power law starts at degree 1: the
    mean along the relation must be >= 1), else the relation's line and column."""
    if not has_degree_laws(graph):
        return
    for r in graph.relations:
        if r.in_alpha is None and r.out_alpha is None:
            continue
        try:
            relation_laws(replace(graph, relations=(r,)))
        except InvalidSpecError as exc:
            raise DataFormatError(
                path, f"relation {r.name}: " + exc.message.removeprefix(f"{exc.field}: "),
                line=rel_line[graph.name, r.name], column=exc.field, fix=exc.fix,
            ) from exc  # fmt: skip


@functools.lru_cache(maxsize=1)
def load_graphs() -> dict[str, HeteroGraph]:
    """The shipped graphs (cached)."""
    text = resources.files("gpucast.catalog").joinpath("data", "gnn_graphs.csv")
    return parse_graphs(text.read_text(encoding="utf-8"), "catalog/data/gnn_graphs.csv")


def graph_stats(name: str) -> HeteroGraph:
    """A shipped graph by name (case-insensitive)."""
    graphs = load_graphs()
    for key, g in graphs.items():
        if key.lower() == name.lower():
            return g
    raise UnknownGraphError(
        name, sorted(graphs),
        fix="pass --graph-stats FILE with columns kind,name,src,dst,count,feature_dim",
    )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class GnnConfig:
    """A published GNN training configuration (the MLPerf reference R-GAT)."""

    model: str
    graph: str
    target_type: str
    layers: int
    hidden: int
    heads: int
    fanouts: tuple[int, ...]
    classes: int
    batch_per_gpu: int
    reverse_relations: bool
    source_url: str


@functools.lru_cache(maxsize=1)
def load_gnn_configs() -> dict[str, GnnConfig]:
    """The shipped configurations (cached)."""
    path = "catalog/data/gnn_models.csv"
    text = resources.files("gpucast.catalog").joinpath("data", "gnn_models.csv")
    out: dict[str, GnnConfig] = {}
    for line, row in read_rows(text.read_text(encoding="utf-8"), path, MODEL_COLUMNS):

        def num(column: str, _row: dict[str, str] = row, _line: int = line) -> int:
            return parse_int(_row[column], path=path, line=_line, column=column, minimum=1)

        fanouts = tuple(
            parse_int(c, path=path, line=line, column="fanouts", minimum=1)
            for c in row["fanouts"].split(";")
        )
        out[row["model"]] = GnnConfig(
            model=row["model"],
            graph=row["graph"],
            target_type=row["target_type"],
            layers=num("layers"),
            hidden=num("hidden"),
            heads=num("heads"),
            fanouts=fanouts,
            classes=num("classes"),
            batch_per_gpu=num("batch_per_gpu"),
            reverse_relations=row["reverse_relations"] == "1",
            source_url=require_text(row["source_url"], path=path, line=line, column="source_url"),
        )
    return out


CALIBRATION_COLUMNS = ("software", "models", "scale", "per_step_ms", "fitted_on", "command")


@dataclass(frozen=True, slots=True, kw_only=True)
class GnnCalibration:
    """How a software stack's GAT / R-GAT steps relate to the model's: measured ~ ``scale`` x
    predicted + ``per_step_s`` a step (host-side work that does not scale with the GPU),
    fitted on ``fitted_on`` by ``command``."""

    software: str
    models: tuple[str, ...]
    scale: float
    per_step_s: float
    fitted_on: str
    command: str

    def describe(self) -> str:
        return (
            f"x{self.scale:.3g} of this model's time + {self.per_step_s * 1e3:.3g} ms a step "
            f"(host-side sampling and synchronisation), fitted on {self.fitted_on} "
            f"(catalog/data/gnn_calibration.csv; {self.command})"
        )


@functools.lru_cache(maxsize=1)
def load_gnn_calibrations() -> dict[str, GnnCalibration]:
    """The shipped calibrations by software stack (cached)."""
    path = "catalog/data/gnn_calibration.csv"
    text = resources.files("gpucast.catalog").joinpath("data", "gnn_calibration.csv")
    out: dict[str, GnnCalibration] = {}
    for line, row in read_rows(text.read_text(encoding="utf-8"), path, CALIBRATION_COLUMNS):

        def num(column: str, _row: dict[str, str] = row, _line: int = line) -> float:
            value = parse_float(_row[column], path=path, line=_line, column=column)
            assert value is not None  # not optional
            return value

        out[row["software"]] = GnnCalibration(
            software=row["software"],
            models=tuple(row["models"].split(";")),
            scale=num("scale"),
            per_step_s=num("per_step_ms") / 1e3,
            fitted_on=require_text(row["fitted_on"], path=path, line=line, column="fitted_on"),
            command=require_text(row["command"], path=path, line=line, column="command"),
        )
    return out

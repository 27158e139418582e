"""A user's graph as an edge list (``--edge-list FILE``): one ``src dst`` pair per line.

Whitespace- or comma-separated non-negative integers; blank lines and ``#`` or ``%`` comments
(SNAP, KONECT, Matrix Market) are skipped, and so is a Matrix Market file's size line. Columns
after the second (edge weights, timestamps) are ignored, and a note says so. Edges whose ids
fall outside ``[0, nodes)`` (when ``nodes`` is given) and self-loops (unless allowed) are
counted and skipped, and the counts are reported; an edge given more than once is kept (a
multigraph: each copy is aggregated and can be sampled, as DGL and PyG do unless the graph is
coalesced) and the repeats are counted in a note; a line that is not two integers is one
:class:`DataFormatError` naming the file and the line. A node count inferred from the largest
id that is far above the ids seen (a stray id) is a warning.

A well-formed file is parsed in C (:func:`numpy.loadtxt`, about 0.2 s for 2M edges); one it
rejects is read again line by line, which names the line to blame.

A degree distribution (``--degrees``): ``powerlaw:ALPHA`` (:func:`powerlaw_alpha`), or a
``degree,count`` histogram file (:func:`read_degree_histogram`: integer cells, each degree once,
the counts summing to ``--nodes`` and ``degree x count`` to ``--edges`` within
:data:`HISTOGRAM_EDGES_TOLERANCE` where they are given); an edge list gives its own
(:meth:`EdgeList.degree_distribution`).
"""

from __future__ import annotations

import csv
import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.units import count_of
from gpucast.predict import gnn_degrees
from gpucast.predict.gat import HeteroGraph

_SPLIT = re.compile(r"[,\s]+")
_COMMENT = re.compile(r"[#%][^\n]*")
#: bytes that are not part of a cell: what separates an edge list's cells and lines
_NOT_CELL = np.ones(256, dtype=bool)
_NOT_CELL[[ord(c) for c in " \t\r\n,"]] = False
#: a Matrix Market file: its first line that is not a comment is ``rows cols entries``
_MATRIX_MARKET = "%%MatrixMarket"
_FIX = "one edge per line: two integer node ids, e.g. '0 17'"
#: An inferred node count more than this many times the distinct ids seen is warned about.
SPARSE_IDS_FACTOR = 2.0
#: A degree histogram's ``degree x count`` may differ from ``--edges`` by this share.
HISTOGRAM_EDGES_TOLERANCE = 0.01
#: Node ids an edge list may span (its largest id + 1, or ``--nodes``): every node gets an
#: in- and an out-degree count (16 B), so a stray id must not size arrays of terabytes.
MAX_EDGE_LIST_NODES = 2**30
_DEGREES_FIX = "a CSV with the header 'degree,count' and one row per degree, e.g. '3,1200'"


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeList:
    """Directed edges ``src -> dst`` kept, the node count and what was skipped."""

    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    nodes: int
    self_loops_skipped: int
    out_of_range_skipped: int
    #: distinct ids in the file when ``nodes`` was inferred from the largest one (else None)
    distinct_ids: int | None = None
    #: the file, when some line has a column after the two ids (weights): a note says so
    extra_columns_in: str | None = None
    #: kept edges that repeat an earlier ``src -> dst`` (kept: each copy is aggregated)
    repeated: int = 0

    def notes(self) -> list[str]:
        out = []
        if self.self_loops_skipped:
            out.append(f"{count_of(self.self_loops_skipped, 'self-loop')} skipped")
        if self.out_of_range_skipped:
            out.append(
                f"{count_of(self.out_of_range_skipped, 'edge')} with node ids >= {self.nodes:,} "
                "skipped"
            )
        if self.repeated:
            out.append(
                f"{count_of(self.repeated, 'edge')} repeating an earlier one kept (a multigraph: "
                "each copy is aggregated and sampled, as DGL and PyG do unless the graph is "
                "coalesced; drop the repeats for a simple graph)"
            )
        if self.extra_columns_in is not None:
            out.append(
                f"{self.extra_columns_in}: columns after the two node ids (edge weights?) are "
                "ignored: the cost counts edges, not their weights"
            )
        return out

    def degree_distribution(self) -> gnn_degrees.DegreeDistribution:
        """The in-degree (neighbours to sample) and out-degree (edges landing) of every node."""
        in_degree = np.bincount(self.dst, minlength=self.nodes)
        return gnn_degrees.from_sequences(
            in_degree,
            np.bincount(self.src, minlength=self.nodes),
            name=f"the edge list's own in- and out-degrees (max in-degree {in_degree.max():,})",
        )

    def warnings(self) -> list[str]:
        """A node count inferred far above the ids seen: a stray id inflates the graph."""
        if self.distinct_ids is None or self.nodes <= SPARSE_IDS_FACTOR * self.distinct_ids:
            return []
        return [
            f"{self.nodes:,} nodes inferred from the largest id ({self.nodes - 1:,}), but only "
            f"{self.distinct_ids:,} distinct ids appear: a stray id? give --nodes N (edges with "
            "ids >= N are skipped and counted)"
        ]


def _cells(body: str) -> int:
    """Cells in ``body`` (comments dropped): more than two a pair means a line has a third
    column (weights). Counted in numpy: a regex over 2M lines took 0.5 s."""
    cell = _NOT_CELL[np.frombuffer(body.encode(), dtype=np.uint8)]
    return int(np.count_nonzero(cell[1:] & ~cell[:-1])) + int(cell[:1].sum())


def _uncommented(text: str) -> str:
    return _COMMENT.sub("", text) if "#" in text or "%" in text else text


def _parse_fast(text: str, uncommented: str | None = None) -> npt.NDArray[np.int64] | None:
    """The ``(src, dst)`` pairs of a well-formed edge list, parsed in C; None where a line
    is not two ids >= 0 (or the file has none): the line-by-line parser then names it.
    ``uncommented``: ``text`` without its comments, where the caller has it already."""
    body = (_uncommented(text) if uncommented is None else uncommented).replace(",", " ")
    if "-" in body or "+" in body:  # signs: a negative id, or one the strict parser rejects
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": the slow path says so
            pairs = np.loadtxt(
                io.StringIO(body), dtype=np.int64, usecols=(0, 1), ndmin=2, comments=None
            )
    except (ValueError, OverflowError):
        return None
    return pairs if pairs.size else None


def _parse_lines(text: str, path: Path | str) -> npt.NDArray[np.int64]:
    """Line by line: the first line that is not two ids >= 0 is a :class:`DataFormatError`."""
    pairs: list[tuple[int, int]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        cells = _SPLIT.split(line)
        if len(cells) < 2 or not (cells[0].isdigit() and cells[1].isdigit()):
            raise DataFormatError(
                str(path), f"expected two node ids >= 0, found {line[:40]!r}", line=number,
                fix=_FIX,
            )  # fmt: skip
        pair = (int(cells[0]), int(cells[1]))
        if max(pair) >= 2**63:  # what int64 holds; the node-count ceiling is checked below
            raise DataFormatError(
                str(path), f"node id {str(max(pair))[:24]} is not a 64-bit integer",
                line=number, fix="number the nodes 0 to N-1",
            )  # fmt: skip
        pairs.append(pair)
    if not pairs:
        raise DataFormatError(str(path), "has no edges", fix=_FIX)
    return np.array(pairs, dtype=np.int64)


def _distinct(src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], n: int) -> int:
    """Distinct ids among ``src`` and ``dst`` (all in ``[0, n)``) without an ``n``-sized
    array when ``n`` dwarfs the edges."""
    if n <= 8 * src.size:
        seen = np.zeros(n, dtype=bool)
        seen[src] = True
        seen[dst] = True
        return int(np.count_nonzero(seen))
    return int(np.unique(np.concatenate((src, dst))).size)


def _drop_size_line(text: str) -> str:
    """A Matrix Market file without its ``rows cols entries`` line (blanked: line numbers
    hold), which would otherwise read as an edge with a weight."""
    if not text.lstrip().startswith(_MATRIX_MARKET):
        return text
    lines = text.split("\n")
    for i, raw in enumerate(lines):
        if _COMMENT.sub("", raw).strip():
            lines[i] = ""
            break
    return "\n".join(lines)


def read_edge_list(
    path: Path | str, *, nodes: int | None = None, allow_self_loops: bool = False
) -> EdgeList:
    """Parse an edge list (module docstring); ``nodes`` defaults to the largest id + 1."""
    from gpucast.store.files import read_input_text

    if nodes is not None and (isinstance(nodes, bool) or nodes < 1):
        raise InvalidSpecError("nodes", "must be an integer >= 1", got=nodes)
    text = _drop_size_line(read_input_text(path, "edge-list", fix=_FIX))
    body = _uncommented(text)  # once: the C parser and the column count both read it
    edges = _parse_fast(text, body)
    if edges is None:
        edges = _parse_lines(text, path)
    src, dst = edges[:, 0], edges[:, 1]
    n = int(edges.max()) + 1 if nodes is None else nodes
    if n > MAX_EDGE_LIST_NODES:
        raise InvalidSpecError(
            "edge-list" if nodes is None else "nodes",
            f"spans {n:,} node ids, more than the {MAX_EDGE_LIST_NODES:,} an edge list may "
            "(16 B of degree counts a node)",
            got=str(path) if nodes is None else nodes,
            fix="number the nodes 0 to N-1, or give --nodes N (edges with ids >= N are "
            "skipped and counted)"
            if nodes is None
            else "give the graph's node count",
        )
    inside = (src < n) & (dst < n)
    loops = (src == dst) & inside
    keep = inside & (allow_self_loops | ~loops)
    if not keep.any():
        raise InvalidSpecError(
            "edge-list",
            f"no edge is left after skipping {int((~inside).sum()):,} out-of-range edges and "
            f"{int(loops.sum()):,} self-loops",
            got=str(path),
            fix="check --nodes and the node ids",
        )
    return EdgeList(
        src=src[keep],
        dst=dst[keep],
        nodes=n,
        self_loops_skipped=0 if allow_self_loops else int(loops.sum()),
        out_of_range_skipped=int((~inside).sum()),
        distinct_ids=None if nodes is not None else _distinct(src, dst, n),
        extra_columns_in=str(path) if _cells(body) > edges.size else None,
        repeated=_repeated(src[keep], dst[keep], n),
    )


def _repeated(src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], n: int) -> int:
    """Edges that repeat an earlier ``src -> dst`` (ids below ``n`` <= 2^30: the pair's key
    ``src n + dst`` fits in int64). A sort, not ``np.unique``: 0.1 s for 2M edges where
    ``np.unique`` took 2-3.5 s here."""
    keys = np.sort(src * n + dst)
    return int(np.count_nonzero(keys[1:] == keys[:-1]))


def read_graph_stats(path: Path | str) -> tuple[HeteroGraph, str]:
    """A user's heterogeneous graph statistics (``--graph-stats FILE``): one row per node type
    (``kind=node``, ``count`` nodes, ``feature_dim``) or relation (``kind=relation``, ``src``,
    ``dst``, ``count`` edges); a bad cell or a relation naming an unknown node type is one
    :class:`DataFormatError` naming the file and line. With it, a warning naming the columns
    the file has and the model does not read (empty where none)."""
    from gpucast.catalog._csv import unread_columns, unread_columns_warning
    from gpucast.catalog.gnn_graphs import (
        CATALOG_COLUMNS,
        DEGREE_COLUMNS,
        GRAPH_COLUMNS,
        parse_graphs,
    )
    from gpucast.store.files import read_input_text

    text = read_input_text(
        path, "graph-stats", fix="a CSV with columns kind,name,src,dst,count,feature_dim"
    )
    graphs = parse_graphs(text, str(path), required=GRAPH_COLUMNS, default_graph="graph")
    if len(graphs) != 1:
        raise DataFormatError(
            str(path), f"expected one graph, found {len(graphs)}", fix="drop the graph column"
        )
    read = (*CATALOG_COLUMNS, *DEGREE_COLUMNS)
    warning = unread_columns_warning(path, unread_columns(text, read), read)
    return next(iter(graphs.values())), warning


def powerlaw_alpha(text: str) -> float | None:
    """ALPHA of ``--degrees powerlaw:ALPHA``; None when ``text`` is not one (a file)."""
    return gnn_degrees.parse_powerlaw(text, "degrees")


def _histogram_cell(
    row: list[str], index: int, minimum: int, where: tuple[Path | str, int, str]
) -> int:
    path, number, column = where
    cell = row[index].strip() if index < len(row) else ""
    value = int(cell) if cell.isascii() and cell.isdigit() and len(cell) <= 16 else -1
    if value < minimum or value > 2**53:
        raise DataFormatError(
            str(path), f"expected an integer >= {minimum}, found {cell[:20]!r}", line=number,
            column=column, fix=_DEGREES_FIX,
        )  # fmt: skip
    return value


def read_degree_histogram(
    path: Path | str, *, nodes: int | None = None, edges: int | None = None
) -> gnn_degrees.DegreeDistribution:
    """A ``degree,count`` histogram (module docstring); a bad cell, a repeated degree or a degree
    of ``nodes`` or more is one :class:`DataFormatError` naming the file, line and column, counts
    that disagree with ``nodes`` / ``edges`` one :class:`InvalidSpecError`."""
    from gpucast.store.files import read_input_text

    # not found: it may be a power law mistyped (``powerlaw``, ``zipf:2``), not a file
    text = read_input_text(
        path, "degrees", fix=f"{_DEGREES_FIX}; or --degrees powerlaw:ALPHA, e.g. powerlaw:2.1"
    )
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise DataFormatError(
            str(path), f"is not a readable CSV ({exc})", fix=_DEGREES_FIX
        ) from None
    header = [c.strip().lower() for c in rows[0]]
    if "degree" not in header or "count" not in header:
        raise DataFormatError(
            str(path), f"needs the columns degree and count, found {','.join(header)[:60]!r}",
            line=1, fix=_DEGREES_FIX,
        )  # fmt: skip
    d_col, c_col = header.index("degree"), header.index("count")
    seen: dict[int, int] = {}
    counts: list[int] = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        degree = _histogram_cell(row, d_col, 0, (path, number, "degree"))
        if degree in seen:
            raise DataFormatError(
                str(path), f"degree {degree} appears twice (first on line {seen[degree]})",
                line=number, column="degree", fix="one row per degree",
            )  # fmt: skip
        seen[degree] = number
        counts.append(_histogram_cell(row, c_col, 1, (path, number, "count")))
    if not counts:
        raise DataFormatError(str(path), "has no rows", fix=_DEGREES_FIX)
    total = sum(counts)
    degree_sum = sum(d * c for d, c in zip(seen, counts, strict=True))
    top = max(seen)
    if top > (nodes or total) - 1:
        raise DataFormatError(
            str(path), f"degree {top:,} is more than the {nodes or total:,} nodes less one",
            line=seen[top], column="degree", fix="a node has at most nodes - 1 neighbours",
        )  # fmt: skip
    if nodes is not None and total != nodes:
        raise InvalidSpecError(
            "degrees", f"{path}: the counts sum to {total:,} nodes, --nodes is {nodes:,}",
            fix="give the whole graph's histogram, or drop --nodes (the histogram sets it)",
        )  # fmt: skip
    if edges is not None and abs(degree_sum - edges) > HISTOGRAM_EDGES_TOLERANCE * edges:
        raise InvalidSpecError(
            "degrees", f"{path}: degree x count sums to {degree_sum:,} edges (mean degree "
            f"{degree_sum / total:.4g}), --edges is {edges:,} (mean {edges / total:.4g}); they "
            f"must agree within {HISTOGRAM_EDGES_TOLERANCE:.0%}",
            fix="give the in-degree histogram of the same graph, or drop --edges (the "
            "histogram sets it)",
        )  # fmt: skip
    return gnn_degrees.histogram(
        list(seen), counts,
        name=f"the histogram {path} ({total:,} nodes, mean degree {degree_sum / total:.4g}, "
        f"max {top:,})",
    )  # fmt: skip


def degree_input(
    text: str, *, nodes: int | None, edges: int | None
) -> gnn_degrees.DegreeDistribution:
    """``--degrees``: ``powerlaw:ALPHA`` over ``nodes`` and ``edges`` (both needed), or a
    histogram file."""
    alpha = powerlaw_alpha(text)
    if alpha is None:
        return read_degree_histogram(text, nodes=nodes, edges=edges)
    if nodes is None or edges is None:
        raise InvalidSpecError(
            "degrees", "powerlaw:ALPHA needs --nodes and --edges (it is scaled to their mean)"
        )
    return gnn_degrees.powerlaw(alpha, nodes=nodes, edges=edges)

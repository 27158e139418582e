"""A user's graph as an edge list (``--edge-list FILE``): one ``src dst`` pair per line.

Whitespace- or comma-separated non-negative integers; blank lines and ``#`` comments are
skipped. Edges whose ids fall outside ``[0, nodes)`` (when ``nodes`` is given) and self-loops
(unless allowed) are counted and skipped, and the counts are reported; a line that is not two
integers is one :class:`DataFormatError` naming the file and the line. A node count inferred
from the largest id that is far above the ids seen (a stray id) is a warning.

A well-formed file is parsed in C (:func:`numpy.loadtxt`, about 0.2 s for 2M edges); one it
rejects is read again line by line, which names the line to blame.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.predict.gat import HeteroGraph

_SPLIT = re.compile(r"[,\s]+")
_COMMENT = re.compile(r"#[^\n]*")
_FIX = "one edge per line: two integer node ids, e.g. '0 17'"
#: An inferred node count more than this many times the distinct ids seen is warned about.
SPARSE_IDS_FACTOR = 2.0


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

    def notes(self) -> list[str]:
        out = []
        if self.self_loops_skipped:
            out.append(f"{self.self_loops_skipped:,} self-loops skipped")
        if self.out_of_range_skipped:
            out.append(f"{self.out_of_range_skipped:,} edges with node ids >= {self.nodes} skipped")
        return out

    def warnings(self) -> list[str]:
        """A node count inferred far above the ids seen: a stray id inflates the graph."""
        if self.distinct_ids is None or self.nodes <= SPARSE_IDS_FACTOR * self.distinct_ids:
            return []
        return [
            f"{self.nodes:,} nodes inferred from the largest id ({self.nodes - 1:,}), but only "
            f"{self.distinct_ids:,} distinct ids appear: a stray id? give --nodes N (edges with "
            "ids >= N are skipped and counted)"
        ]


def _parse_fast(text: str) -> npt.NDArray[np.int64] | None:
    """The ``(src, dst)`` pairs of a well-formed edge list, parsed in C; None where a line
    is not two ids >= 0 (or the file has none): the line-by-line parser then names it."""
    body = _COMMENT.sub("", text) if "#" in text else text
    body = body.replace(",", " ")
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
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        cells = _SPLIT.split(line)
        if len(cells) < 2 or not (cells[0].isdigit() and cells[1].isdigit()):
            raise DataFormatError(
                str(path), f"expected two node ids >= 0, found {line[:40]!r}", line=number,
                fix=_FIX,
            )  # fmt: skip
        pairs.append((int(cells[0]), int(cells[1])))
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


def read_edge_list(
    path: Path | str, *, nodes: int | None = None, allow_self_loops: bool = False
) -> EdgeList:
    """Parse an edge list (module docstring); ``nodes`` defaults to the largest id + 1."""
    from gpucast.store.files import read_input_text

    if nodes is not None and (isinstance(nodes, bool) or nodes < 1):
        raise InvalidSpecError("nodes", "must be an integer >= 1", got=nodes)
    text = read_input_text(path, "edge-list", fix=_FIX)
    edges = _parse_fast(text)
    if edges is None:
        edges = _parse_lines(text, path)
    src, dst = edges[:, 0], edges[:, 1]
    n = int(edges.max()) + 1 if nodes is None else nodes
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
    )


def read_graph_stats(path: Path | str) -> HeteroGraph:
    """A user's heterogeneous graph statistics (``--graph-stats FILE``): one row per node type
    (``kind=node``, ``count`` nodes, ``feature_dim``) or relation (``kind=relation``, ``src``,
    ``dst``, ``count`` edges); a bad cell or a relation naming an unknown node type is one
    :class:`DataFormatError` naming the file and line."""
    from gpucast.catalog.gnn_graphs import GRAPH_COLUMNS, parse_graphs
    from gpucast.store.files import read_input_text

    text = read_input_text(
        path, "graph-stats", fix="a CSV with columns kind,name,src,dst,count,feature_dim"
    )
    graphs = parse_graphs(text, str(path), required=GRAPH_COLUMNS, default_graph="graph")
    if len(graphs) != 1:
        raise DataFormatError(
            str(path), f"expected one graph, found {len(graphs)}", fix="drop the graph column"
        )
    return next(iter(graphs.values()))

"""Edge lists: skipped self-loops and out-of-range ids are counted; malformed lines fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.inputs.graph import read_edge_list


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "edges.txt"
    path.write_text(text)
    return path


def test_counts_what_it_skips(tmp_path: Path) -> None:
    path = _write(tmp_path, "# a graph\n0 1\n1,2\n2 2\n3 9\n\n4\t0  # tab\n")
    edges = read_edge_list(path, nodes=5)
    assert edges.src.tolist() == [0, 1, 4] and edges.dst.tolist() == [1, 2, 0]
    assert (edges.self_loops_skipped, edges.out_of_range_skipped) == (1, 1)
    assert edges.notes() == ["1 self-loops skipped", "1 edges with node ids >= 5 skipped"]
    kept = read_edge_list(path, allow_self_loops=True)
    assert kept.nodes == 10 and len(kept.src) == 5 and kept.self_loops_skipped == 0


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="line 2"):
        read_edge_list(_write(tmp_path, "0 1\n0 -1\n"))
    with pytest.raises(DataFormatError, match="no edges"):
        read_edge_list(_write(tmp_path, "# nothing\n\n"))
    with pytest.raises(InvalidSpecError, match="no edge is left"):
        read_edge_list(_write(tmp_path, "3 3\n7 8\n"), nodes=5)
    with pytest.raises(InvalidSpecError, match="edge-list: file not found"):
        read_edge_list(tmp_path / "missing.txt")

"""``--degrees``: powerlaw:ALPHA and degree,count histograms, and their bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.inputs.graph import (
    degree_input,
    powerlaw_alpha,
    read_degree_histogram,
    read_edge_list,
)


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "degrees.csv"
    path.write_text(body)
    return path


def test_a_histogram_sets_the_nodes_and_edges(tmp_path: Path) -> None:
    path = _write(tmp_path, "count,degree\n50,1\n30,2\n\n20,10\n")  # any column order
    d = read_degree_histogram(path)
    assert d.nodes == 100 and d.edges == 50 + 60 + 200
    assert sorted(d.in_degree.tolist()) == [1, 2, 10] and "100 nodes" in d.name
    assert read_degree_histogram(path, nodes=100, edges=310).nodes == 100
    assert read_degree_histogram(path, nodes=100, edges=313).edges == 310  # within 1%


@pytest.mark.parametrize(
    ("body", "kw", "error", "text"),
    [
        ("degree,count\n1,50\n2,x\n", {}, DataFormatError, "line 3, column 'count'"),
        ("degree,count\n1.5,50\n", {}, DataFormatError, "line 2, column 'degree'"),
        ("degree,count\n-1,50\n", {}, DataFormatError, "line 2, column 'degree'"),
        ("degree,count\n1,0\n", {}, DataFormatError, "integer >= 1"),
        ("degree,count\n1,50\n1,3\n", {}, DataFormatError, "appears twice (first on line 2)"),
        ("deg,n\n1,50\n", {}, DataFormatError, "line 1: needs the columns degree and count"),
        ("degree,count\n", {}, DataFormatError, "has no rows"),
        ("degree,count\n1,5\n9,1\n", {}, DataFormatError, "line 3, column 'degree': degree 9"),
        ("degree,count\n1,50\n2,50\n", {"nodes": 101}, InvalidSpecError, "sum to 100 nodes"),
        ("degree,count\n1,50\n2,50\n", {"edges": 200}, InvalidSpecError, "within 1%"),
    ],
)
def test_bad_histograms(
    tmp_path: Path, body: str, kw: dict[str, int], error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as err:
        read_degree_histogram(_write(tmp_path, body), **kw)
    assert text in str(err.value)


@pytest.mark.parametrize("text", ["powerlaw:1", "powerlaw:0.5", "powerlaw:abc", "powerlaw:",
                                  "powerlaw:nan", "powerlaw:11"])  # fmt: skip
def test_bad_powerlaw(text: str) -> None:
    with pytest.raises(InvalidSpecError, match="1 < ALPHA <= 10"):
        powerlaw_alpha(text)


def test_powerlaw_input() -> None:
    assert powerlaw_alpha("PowerLaw: 2.5") == 2.5 and powerlaw_alpha("degrees.csv") is None
    d = degree_input("powerlaw:2.5", nodes=10_000, edges=80_000)
    assert d.mean_degree == pytest.approx(8.0)
    with pytest.raises(InvalidSpecError, match="needs --nodes and --edges"):
        degree_input("powerlaw:2.5", nodes=None, edges=None)


def test_an_edge_list_gives_its_in_and_out_degrees(tmp_path: Path) -> None:
    path = tmp_path / "edges.txt"
    path.write_text("0 1\n0 2\n0 3\n1 2\n")
    d = read_edge_list(path).degree_distribution()
    # (in, out): node 0 (0, 3), node 1 (1, 1), node 2 (2, 0), node 3 (1, 0)
    pairs = sorted(zip(d.in_degree.tolist(), d.out_degree.tolist(), d.count.tolist(), strict=True))
    assert pairs == [(0, 3, 1), (1, 0, 1), (1, 1, 1), (2, 0, 1)]
    assert np.isclose(d.edges, 4)


@pytest.mark.parametrize("text", ["powerlaw", "zipf:2"])
def test_a_degrees_file_not_found_may_be_a_mistyped_law(text: str) -> None:
    # QA 37: "degrees: file not found (got 'powerlaw'); a CSV with the header 'degree,count'
    # ..." did not say --degrees also takes powerlaw:ALPHA
    with pytest.raises(InvalidSpecError, match=r"file not found.*or --degrees powerlaw:ALPHA"):
        read_degree_histogram(text)

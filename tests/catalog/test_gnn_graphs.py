"""Graph statistics and GNN configurations in the catalog: strict parsing, sources per row."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from gpucast.catalog.gnn_graphs import (
    UnknownGraphError,
    graph_stats,
    load_gnn_configs,
    parse_graphs,
)
from gpucast.domain.errors import DataFormatError


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("gpucast.catalog").joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


@pytest.mark.parametrize("name", ["gnn_graphs.csv", "gnn_models.csv"])
def test_every_row_has_a_source_and_a_date(name: str) -> None:
    for row in _rows(name):
        assert row["source_url"].startswith("https://github.com/") and row["as_of"]


def test_shipped_graph_and_config() -> None:
    g = graph_stats("igbh-full")
    assert [t.name for t in g.node_types][:2] == ["paper", "author"]
    assert {r.name for r in g.relations} == {"cites", "written_by", "topic", "affiliated_to"}
    assert load_gnn_configs()["rgat-mlperf"].classes == 2983
    with pytest.raises(UnknownGraphError, match="unknown graph 'nope': known: igbh-full"):
        graph_stats("nope")  # a graph, not a "model"
    with pytest.raises(UnknownGraphError, match="igbh-full"):
        graph_stats("ogbn-papers100m")


HEADER = "graph,kind,name,src,dst,count,feature_dim,source_url,as_of\n"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("g,node,a,,,x,8,u,2026-01-01\n", "line 2, column 'count'"),
        ("g,node,a,,,10,0,u,2026-01-01\n", "line 2, column 'feature_dim'"),
        (
            "g,node,a,,,10,,u,2026-01-01\n",
            "line 2, column 'feature_dim': value is required; write a whole number >= 1 such as 8",
        ),
        ("g,node,a,,,10,8,u,2026-01-01\ng,relation,r,a,c,5,,u,2026-01-01\n", "line 3"),
        ("g,node,a,,,10,8,u,2026-01-01\ng,relation,r,a,,5,,u,2026-01-01\n", "column 'dst'"),
        ("g,node,a,,,10,8,u,2026-01-01\n", "at least one relation"),
        # QA 37: 2,000 edges on 10 nodes were priced (--edges is held to nodes x (nodes - 1))
        (
            "g,node,a,,,10,8,u,2026-01-01\ng,relation,r,a,a,91,,u,2026-01-01\n",
            "line 3, column 'count': relation r: 91 edges, more than the 90",
        ),
        (
            "g,node,a,,,10,8,u,2026-01-01\ng,node,b,,,3,8,u,2026-01-01\n"
            "g,relation,r,a,b,31,,u,2026-01-01\n",
            "line 4, column 'count'",
        ),
        # QA 37 G #16: a repeated node type was blamed on the graph's last row (line 4)
        (
            "g,node,a,,,10,8,u,2026-01-01\ng,node,a,,,3,8,u,2026-01-01\n"
            "g,relation,r,a,a,5,,u,2026-01-01\n",
            "line 3, column 'name': node type 'a' appears twice (first on line 2); one row per "
            "node type",
        ),
        (
            "g,node,a,,,10,8,u,2026-01-01\ng,relation,r,a,a,5,,u,2026-01-01\n"
            "g,relation,r,a,a,6,,u,2026-01-01\ng,relation,s,a,a,6,,u,2026-01-01\n",
            "line 4, column 'name': relation 'r' appears twice (first on line 3)",
        ),
    ],
)
def test_malformed_rows_name_file_and_line(body: str, where: str) -> None:
    with pytest.raises(DataFormatError) as caught:
        parse_graphs(HEADER + body, "graphs.csv")
    assert "graphs.csv" in str(caught.value) and where in str(caught.value)


def test_a_relation_may_have_every_edge_its_nodes_allow() -> None:
    body = "g,node,a,,,10,8,u,2026-01-01\ng,node,b,,,3,8,u,2026-01-01\n"
    body += "g,relation,r,a,a,90,,u,2026-01-01\ng,relation,s,a,b,30,,u,2026-01-01\n"
    graph = parse_graphs(HEADER + body, "graphs.csv")["g"]
    assert [r.edges for r in graph.relations] == [90, 30]

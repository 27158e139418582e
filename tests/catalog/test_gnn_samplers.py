"""CPU neighbour-sampler rates (``catalog/data/gnn_samplers.csv``)."""

from __future__ import annotations

import pytest

from gpucast.catalog.gnn_samplers import gnn_sampler, parse_gnn_samplers
from gpucast.domain.errors import DataFormatError, InvalidSpecError

_HEAD = "name,edges_per_s_per_worker,source_url,as_of\n"


def test_shipped_row_names_its_source() -> None:
    pyg = gnn_sampler()
    assert pyg.name == "pyg-cpu" and pyg.edges_per_s == pytest.approx(1.84e6)
    assert "gnn_samplers.csv" in pyg.source and "torch-quiver" in pyg.source
    with pytest.raises(InvalidSpecError, match="unknown 'dgl'"):
        gnn_sampler("dgl")


def test_malformed_rows() -> None:
    with pytest.raises(DataFormatError, match=r"line 2.*edges_per_s_per_worker"):
        parse_gnn_samplers(_HEAD + "s,-5,https://x,2026-12-06\n", "s.csv")
    with pytest.raises(DataFormatError, match="as_of"):
        parse_gnn_samplers(_HEAD + "s,5,https://x,someday\n", "s.csv")
    with pytest.raises(DataFormatError, match="appears twice"):
        row = "s,5,https://x,2026-12-06\n"
        parse_gnn_samplers(_HEAD + row + row, "s.csv")

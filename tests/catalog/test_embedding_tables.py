"""The shipped recommendation models and the tables-file parser."""

from __future__ import annotations

import pytest

from gpucast.catalog.embeddings import TABLE_COLUMNS, parse_rec_models, rec_model
from gpucast.domain.errors import DataFormatError, UnknownModelError


def test_dlrm_dcnv2_has_the_published_criteo_tables() -> None:
    model = rec_model("DLRM-DCNv2")
    assert len(model.tables) == 26
    rows = [t.rows for t in model.tables]
    assert rows.count(40_000_000) == 5 and rows[1] == 39060 and rows[-1] == 36
    assert sum(t.pooling for t in model.tables) == 214  # the multi-hot sizes
    assert {t.dim for t in model.tables} == {128}
    assert model.global_batch == 65536 and model.dense_params == 16_045_569
    assert "mlcommons/training" in model.source_url


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(UnknownModelError, match="dlrm-dcnv2"):
        rec_model("dlrm-v3")


def test_user_tables_and_their_errors() -> None:
    text = "table,rows,dim,pooling\nusers,1000000,64,1\nitems,500000,64,20\n"
    (model,) = parse_rec_models(text, "t.csv", required=TABLE_COLUMNS, default_model="mine")
    assert model.name == "mine" and [t.rows for t in model.tables] == [1000000, 500000]
    with pytest.raises(DataFormatError, match=r"t.csv, line 2, column 'rows'"):
        parse_rec_models(
            "table,rows,dim,pooling\nu,-5,64,1\n",
            "t.csv",
            required=TABLE_COLUMNS,
            default_model="m",
        )
    with pytest.raises(DataFormatError, match="missing column"):
        parse_rec_models("table,rows\nu,5\n", "t.csv", required=TABLE_COLUMNS)
    with pytest.raises(DataFormatError, match="second row for table"):
        parse_rec_models(
            "table,rows,dim,pooling\nu,5,4,1\nu,6,4,1\n",
            "t.csv",
            required=TABLE_COLUMNS,
            default_model="m",
        )

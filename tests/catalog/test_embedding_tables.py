"""The shipped recommendation models and the tables-file parser."""

from __future__ import annotations

import pytest

from gpucast.catalog.embeddings import TABLE_COLUMNS, parse_rec_models, rec_model
from gpucast.domain.embeddings import AccessLocality
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
    # QA 39: the line named no fix
    with pytest.raises(DataFormatError, match="second row for table 'u'; give each table one row"):
        parse_rec_models(
            "table,rows,dim,pooling\nu,5,4,1\nu,6,4,1\n",
            "t.csv",
            required=TABLE_COLUMNS,
            default_model="m",
        )


def test_wide_deep_has_nvidia_s_outbrain_tables() -> None:
    """NVIDIA DeepLearningExamples TF2 Wide & Deep: 13 one-hot and 3 multi-hot (hotness 3)
    deep tables, and one dim-1 wide table per categorical feature."""
    model = rec_model("wide-deep")
    deep = [t for t in model.tables if not t.name.startswith("wide_")]
    wide = [t for t in model.tables if t.name.startswith("wide_")]
    assert len(deep) == 16 and len(wide) == 16
    by_name = {t.name: t for t in model.tables}
    assert (by_name["document_id"].rows, by_name["document_id"].dim) == (300_000, 128)
    assert (by_name["platform"].rows, by_name["platform"].dim) == (4, 19)
    assert by_name["entity_id_list"].pooling == 3 and by_name["ad_id"].pooling == 1
    assert {t.dim for t in wide} == {1}
    assert [t.rows for t in wide] == [t.rows for t in deep]
    # deep MLP (1235 embedding values + 13 numeric) - 5 x 1024 - 1, plus the wide numerics
    assert model.dense_params == 5_478_415 and model.global_batch == 131_072
    assert model.dense_train_flops_per_sample == 6 * model.dense_params
    # the README's "~90M" parameters in all
    assert 88e6 < model.embedding_params + model.dense_params < 92e6
    assert "NVIDIA/DeepLearningExamples" in model.source_url


def test_two_tower_has_torchrec_s_retrieval_example() -> None:
    model = rec_model("two-tower")
    assert [(t.name, t.rows, t.dim, t.pooling) for t in model.tables] == [
        ("t_userId", 1024**2, 64, 1.0),
        ("t_movieId", 1024**2, 64, 1.0),
    ]
    assert model.dense_params == 2 * (64 * 128 + 128 + 128 * 64 + 64)  # two MLPs 64-128-64
    assert model.global_batch == 256 and "pytorch/torchrec" in model.source_url


def test_every_shipped_row_has_a_source_and_a_date() -> None:
    import csv
    import re
    from importlib import resources

    text = resources.files("gpucast.catalog").joinpath("data", "embedding_tables.csv")
    rows = list(csv.DictReader(text.read_text(encoding="utf-8").splitlines()))
    assert {r["model"] for r in rows} == {"dlrm-dcnv2", "wide-deep", "two-tower"}
    for row in rows:
        assert row["source_url"].startswith("https://github.com/"), row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["as_of"]), row


def test_an_optional_locality_column_gives_tables_their_own_access_pattern() -> None:
    text = (
        "table,rows,dim,pooling,locality\n"
        "users,1000000,64,1,1.05\nitems,500000,64,20,2021\n"
        "ads,100000,64,2,2022/fbgemm_t788_bs131072_3.pt\nsmall,10,64,1,\n"
    )
    (model,) = parse_rec_models(text, "t.csv", required=TABLE_COLUMNS, default_model="m")
    loc = {t.name: t.locality for t in model.tables}
    assert loc["users"] == AccessLocality(zipf_exponent=1.05)
    assert loc["items"] == AccessLocality(window="2021")
    assert loc["ads"] == AccessLocality(window="2022", trace="fbgemm_t788_bs131072_3")
    assert loc["small"] is None
    assert all(t.locality is None for t in rec_model("dlrm-dcnv2").tables)  # no column: global


@pytest.mark.parametrize(
    ("cell", "text"),
    [
        ("zipfy", "must be a dlrm_datasets window or a Zipf exponent"),
        ("2023", "Zipf exponent must be in [0, 10] (got 2023.0)"),
        ("-0.5", "Zipf exponent must be in [0, 10]"),
        ("nan", "Zipf exponent must be in [0, 10]"),
        ("2020/fbgemm", "window must be 2021 or 2022"),
    ],
)
def test_a_bad_locality_names_the_file_line_and_column(cell: str, text: str) -> None:
    with pytest.raises(DataFormatError) as error:
        parse_rec_models(
            f"table,rows,dim,pooling,locality\nu,5,4,1,{cell}\n",
            "t.csv",
            required=TABLE_COLUMNS,
            default_model="m",
        )
    message = str(error.value)
    assert message.startswith("t.csv, line 2, column 'locality': ") and text in message
    assert "e.g. 2022" in message

"""DLRM embedding-lookup locality statistics: totals, reuse histograms, hot-row coverage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets.dlrm_locality import hot_row_coverage, read_dlrm_locality


def _block(
    name: str = "fbgemm_t8_bs1000_0.pt",
    *,
    lookups: int = 3000,
    unique: int = 1000,
    mean: str = "3.0",
    rows: tuple[str, str, str] = ("0.500", "0.300", "0.200"),
    rows_cum: str = "['0.000', '0.500', '0.800', '1.000']",
    edges: str = "[0, 1, 2]",
) -> str:
    batch = name.split("_bs")[1].split("_")[0].split(".")[0]
    return (
        f"{name}\n"
        f"Locality stats after processing 1 batches of size {batch}\n"
        f"Avg # of indices: {lookups}\n"
        f"Avg # of unique cols: {unique}\n"
        f"Avg col size: {mean}\n"
        "Histogram of col sizes:\n"
        f"(0, 1]: {rows[0]}\n(1, 2]: {rows[1]}\n(2+: {rows[2]}\n"
        f"{edges}\n{rows_cum}\n"
        "Ratio of index distribution at different column sizes:\n"
        "(0, 1]: 0.167\n(1, 2]: 0.200\n(2+: 0.633\n"
        "[0, 1, 2]\n['0.000', '0.167', '0.367', '1.000']\n"
        "\n"
    )


def _file(tmp_path: Path, text: str, name: str = "embedding_bag_2021_locality_stats.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_totals_and_histogram(tmp_path: Path) -> None:
    text = _block("fbgemm_t8_bs1000.pt") + _block()
    result = read_dlrm_locality(_file(tmp_path, text))
    totals = result.totals
    assert list(totals.trace) == ["fbgemm_t8_bs1000", "fbgemm_t8_bs1000_0"]
    assert totals.part.isna().tolist() == [True, False] and totals.part.iloc[1] == 0
    first = totals.iloc[0]
    assert (first.dataset, first.tables, first.batches, first.batch_size) == ("2021", 8, 1, 1000)
    assert (first.lookups, first.unique_rows, first.mean_reuse) == (3000, 1000, 3.0)
    assert first.lookups_per_sample == pytest.approx(3.0)
    assert first.unique_share == pytest.approx(1 / 3)

    hist = result.histogram
    assert len(hist) == 6
    one = hist[hist.trace == "fbgemm_t8_bs1000_0"].reset_index(drop=True)
    assert list(one.bucket) == ["(0, 1]", "(1, 2]", "(2+"]
    assert list(one.reuse_min) == [0, 1, 2]
    assert one.reuse_max.tolist()[:2] == [1.0, 2.0] and np.isinf(one.reuse_max.iloc[2])
    assert one.rows.tolist() == pytest.approx([500.0, 300.0, 200.0])
    assert one.lookups_share.tolist() == pytest.approx([0.167, 0.2, 0.633])
    assert one.rows_share_cum.tolist() == pytest.approx([0.5, 0.8, 1.0])
    assert one.lookups_share_cum.tolist() == pytest.approx([0.167, 0.367, 1.0])


def test_hot_row_coverage(tmp_path: Path) -> None:
    hist = read_dlrm_locality(_file(tmp_path, _block())).histogram
    cover = hot_row_coverage(hist)
    assert list(cover.reuse_min) == [2, 1, 0]  # hottest first
    # the 20% of rows used more than twice serve 63.3% of the lookups
    assert cover.hot_rows_share.tolist() == pytest.approx([0.2, 0.5, 1.0])
    assert cover.hot_rows.tolist() == pytest.approx([200.0, 500.0, 1000.0])
    assert cover.hot_lookups_share.tolist() == pytest.approx([0.633, 0.833, 1.0])


def test_dataset_label(tmp_path: Path) -> None:
    upstream = tmp_path / "2022"
    upstream.mkdir()
    path = _file(upstream, _block(), name="locality_stats.txt")
    assert read_dlrm_locality(path).totals.dataset.iloc[0] == "2022"  # from the folder
    assert read_dlrm_locality(path, dataset="ads").histogram.dataset.iloc[0] == "ads"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_block().replace("Avg col size: 3.0", "Avg col size: 9.0"), r"line 5.*disagrees"),
        (_block().replace("of size 1000", "of size 999"), r"line 2.*differs from the file"),
        (_block(rows=("0.500", "0.300", "0.500")), r"line 6: the bucket shares below sum to 1\.3"),
        (_block(rows=("0.500", "0.300", "1.200")), r"line 9: share 1\.200 is not between"),
        (_block(edges="[0, 1, 4]"), r"line 10: the edge list does not match"),
        (_block(rows_cum="['0.000', '0.500', '1.000']"), r"line 11: 3 cumulative shares"),
        (_block(rows_cum="['0.000', '0.800', '0.500', '1.000']"), r"line 11.*never decrease"),
        (_block(unique=5000), r"line 4: 5000 unique rows for 3000 lookups"),
        (_block().replace("(1, 2]: 0.300", "(1, 3]: 0.300"), r"line 9.*starts at 2.*ends at 3"),
        (_block().replace("Avg # of indices: 3000", "Avg # of indices: many"), r"line 3: expected"),
        (_block().split("Ratio of index")[0], "ends where 'Ratio of index distribution"),
        ("model.pt\n", r"line 1: expected a trace file name"),
        ("\n\n", "has no locality block"),
    ],
)
def test_malformed_blocks_name_the_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(DataFormatError, match=expected) as info:
        read_dlrm_locality(_file(tmp_path, text))
    assert "locality_stats.txt" in str(info.value) and info.value.fix


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="file not found"):
        read_dlrm_locality(tmp_path / "none.txt")


def test_a_folder_where_the_file_should_be(tmp_path: Path) -> None:
    """A folder named like the stats file read 'file not found' (QA 35 R #16)."""
    folder = tmp_path / "embedding_bag_2022_locality_stats.txt"
    folder.mkdir()
    with pytest.raises(DataFormatError, match="is a folder, not a file; move it aside"):
        read_dlrm_locality(folder)


@pytest.mark.shared_data
def test_published_stats(shared_data: Path) -> None:
    folder = shared_data / "dlrm_datasets"
    y2021 = read_dlrm_locality(folder / "embedding_bag_2021_locality_stats.txt")
    y2022 = read_dlrm_locality(folder / "embedding_bag_2022_locality_stats.txt")
    assert len(y2021.totals) == 17 and len(y2022.totals) == 16
    assert set(y2021.totals.batch_size) == {65536} and set(y2021.totals.tables) == {856}
    assert set(y2022.totals.batch_size) == {131072} and set(y2022.totals.tables) == {788}
    first = y2021.totals.iloc[0]
    assert (first.trace, first.lookups, first.unique_rows) == (
        "fbgemm_t856_bs65536", 887_017_990, 128_435_723,
    )  # fmt: skip
    assert len(y2022.histogram) == 16 * 17
    hot = hot_row_coverage(y2022.histogram)
    top = hot[(hot.trace == "fbgemm_t788_bs131072_0") & (hot.reuse_min == 8)].iloc[0]
    # 22.7% of the distinct rows (reused > 8 times) serve 84.3% of the lookups
    assert (top.hot_rows_share, top.hot_lookups_share) == pytest.approx((0.227, 0.843))

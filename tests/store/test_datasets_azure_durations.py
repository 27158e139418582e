"""The Azure Functions 2019 duration-percentile file parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets.azure_functions import read_function_durations

HEADER = "HashOwner,HashApp,HashFunction,Average,Count,Minimum,Maximum\n"


def test_reads_averages_and_skips_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "function_durations_percentiles.anon.d01.csv"
    path.write_text(HEADER + "o,a,f,120.5,10,1,300\no,a,g,abc,1,1,1\no,a,h,3,1\n,a,i,1,1,1,1\n")
    frame, skipped = read_function_durations(path)
    assert list(frame["function"]) == ["f"]
    assert frame["average_ms"].iloc[0] == pytest.approx(120.5)
    assert len(skipped) == 3 and "line 3" in skipped[0]


def test_a_file_without_the_columns_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(DataFormatError, match="Average"):
        read_function_durations(path)


def test_an_infinite_count_or_average_is_a_skipped_row(tmp_path: Path) -> None:
    """QA 37 V #3: Count 'inf' raised OverflowError (a traceback); NaN/inf averages are
    named as such, not as 'empty id or Average < 0'."""
    path = tmp_path / "function_durations_percentiles.anon.d01.csv"
    path.write_text(HEADER + "o,a,f,120,10,1,3\no,a,g,5,inf,1,1\no,a,h,nan,1,1,1\n,a,i,1,1,1,1\n")
    frame, skipped = read_function_durations(path)
    assert list(frame["function"]) == ["f"]
    assert skipped == (
        "function_durations_percentiles.anon.d01.csv, line 3: Count 'inf' is not finite",
        "function_durations_percentiles.anon.d01.csv, line 4: Average 'nan' is not a finite "
        "number >= 0",
        "function_durations_percentiles.anon.d01.csv, line 5: empty id",
    )


def test_a_function_given_twice_keeps_its_first_row(tmp_path: Path) -> None:
    """QA 37 V #16: the last of two rows of one function silently won; now the first is kept
    and the second reported, as the memory file does for an app given twice."""
    path = tmp_path / "function_durations_percentiles.anon.d01.csv"
    path.write_text(HEADER + "o,a,f,100,10,1,3\no,a,f,9000,10,1,3\n")
    frame, skipped = read_function_durations(path)
    assert frame["average_ms"].tolist() == [100.0]
    assert skipped == (
        "function_durations_percentiles.anon.d01.csv, line 3: function o/a/f given again (its "
        "first row kept)",
    )

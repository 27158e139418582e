"""The Azure Functions 2019 app memory file parser (``app_memory_percentiles.anon.dNN.csv``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets.azure_functions import MEMORY_COLUMNS, read_app_memory

HEADER = ",".join(MEMORY_COLUMNS) + "\n"
#: owner, app, samples, average, then its percentiles 1, 5, 25, 50, 75, 95, 99, 100 (MB)
GOOD = "o1,a1,1000,150,100,110,120,140,160,200,250,300\n"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app_memory_percentiles.anon.d01.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_each_apps_average_and_percentiles(tmp_path: Path) -> None:
    memory = read_app_memory(
        _write(tmp_path, HEADER + GOOD + "o2,a2,12,80.5,80,80,80,80,81,81,82,90\n")
    )
    assert memory.skipped == ()
    apps = memory.apps
    assert list(apps["app"]) == ["a1", "a2"] and list(apps["sample_count"]) == [1000, 12]
    assert list(apps["average_mb"]) == [150.0, 80.5]
    assert [apps[f"pct{p}_mb"].iloc[0] for p in (1, 5, 25, 50, 75, 95, 99, 100)] == [
        100, 110, 120, 140, 160, 200, 250, 300,
    ]  # fmt: skip


def test_malformed_rows_are_skipped_and_counted_with_file_and_line(tmp_path: Path) -> None:
    rows = [
        GOOD,
        "o2,a2,12,80\n",  # line 3: too few fields
        "o3,a3,x,80,80,80,80,80,81,81,82,90\n",  # line 4: not a number
        "o4,a4,12,-1,80,80,80,80,81,81,82,90\n",  # line 5: negative
        "o5,a5,12,80,80,80,80,70,81,81,82,90\n",  # line 6: pct50 < pct25
        ",a6,12,80,80,80,80,80,81,81,82,90\n",  # line 7: no owner
        "o7,a7,1.5,80,80,80,80,80,81,81,82,90\n",  # line 8: a fractional count
        "o1,a1,5,1,1,1,1,1,1,1,1,1\n",  # line 9: a1 again
    ]
    memory = read_app_memory(_write(tmp_path, HEADER + "".join(rows)))
    assert list(memory.apps["app"]) == ["a1"] and memory.apps["average_mb"].iloc[0] == 150
    name = "app_memory_percentiles.anon.d01.csv"
    assert memory.skipped == (
        f"{name}, line 3: 4 fields, expected 12",
        f"{name}, line 4: SampleCount or an AverageAllocatedMb column is not a number",
        f"{name}, line 5: an AverageAllocatedMb column is negative or not finite",
        f"{name}, line 6: the AverageAllocatedMb percentiles decrease",
        f"{name}, line 7: empty owner or app",
        f"{name}, line 8: SampleCount '1.5' is not an integer >= 0",
        f"{name}, line 9: app o1/a1 given again (its first row kept)",
    )


@pytest.mark.parametrize(
    ("header", "match"),
    [
        ("HashOwner,HashApp,SampleCount,AverageAllocatedMb\n", "AverageAllocatedMb_pct1"),
        ("HashOwner,HashApp,HashFunction,Average,Count\n", "SampleCount"),
        ("", "is empty"),
    ],
)
def test_a_wrong_header_is_one_error(tmp_path: Path, header: str, match: str) -> None:
    with pytest.raises(DataFormatError, match=match) as info:
        read_app_memory(_write(tmp_path, header + GOOD if header else ""))
    assert "\n" not in str(info.value)

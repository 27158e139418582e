"""The Azure Functions 2019 per-minute invocation-count parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.store.datasets.azure_functions import read_invocation_counts

MINUTES = 6


def _write(tmp_path: Path, rows: list[str], minutes: int = MINUTES) -> Path:
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(
        str(i) for i in range(1, minutes + 1)
    )
    path = tmp_path / "invocations_per_function_md.anon.d01.csv"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


GOOD = [
    "o1,a1,f1,http,1,0,3,0,0,2",
    "o1,a1,f2,timer,1,1,1,1,1,1",
    "o2,a2,f3,queue,0,0,0,0,0,10",
]


def test_reads_counts_and_totals(tmp_path: Path) -> None:
    parsed = read_invocation_counts(_write(tmp_path, GOOD))
    assert parsed.minutes == MINUTES
    assert parsed.counts.shape == (3, MINUTES)
    assert list(parsed.functions["invocations"]) == [6, 6, 10]
    assert list(parsed.total_per_minute()) == [2, 1, 4, 1, 1, 13]
    assert parsed.skipped == ()
    assert list(parsed.select(trigger="timer")) == [1]
    assert list(parsed.select(app="a1")) == [0, 1]


def test_malformed_rows_are_reported_and_skipped(tmp_path: Path) -> None:
    rows = [
        *GOOD,
        "o3,a3,f4,http,1,2,3",  # too few fields
        "o3,a3,f5,http,1,x,0,0,0,0",  # not an integer
        "o3,a3,f6,http,1,-1,0,0,0,0",  # negative
        ",a3,f7,http,1,1,0,0,0,0",  # empty owner
    ]
    parsed = read_invocation_counts(_write(tmp_path, rows))
    assert len(parsed.functions) == 3
    assert len(parsed.skipped) == 4
    assert "line 5" in parsed.skipped[0] and "expected 10" in parsed.skipped[0]
    assert "'x'" in parsed.skipped[1]
    assert "negative count in minute 2" in parsed.skipped[2]
    assert "empty" in parsed.skipped[3]


def test_bad_header_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("owner,app,function,trigger,1,2\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="HashOwner"):
        read_invocation_counts(path)
    path.write_text("HashOwner,HashApp,HashFunction,Trigger,1,3\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="minute columns"):
        read_invocation_counts(path)


def test_no_valid_rows_and_unknown_trigger(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="no valid function row"):
        read_invocation_counts(_write(tmp_path, ["o,a,f,http,1"]))
    parsed = read_invocation_counts(_write(tmp_path, GOOD))
    with pytest.raises(InvalidSpecError, match="trigger"):
        parsed.select(trigger="cron")


def test_a_count_beyond_int64_or_too_large_to_sum_is_skipped(tmp_path: Path) -> None:
    """QA 37 V #1-2: a count past int64 raised OverflowError (a traceback), and one that fits
    int64 wrapped the day's totals around to negative invocations; both rows are malformed."""
    rows = [
        *GOOD,
        "o3,a3,f4,http,99999999999999999999,0,0,0,0,0",
        "o3,a3,f5,http,0,9000000000000000000,9000000000000000000,0,0,0",
    ]
    parsed = read_invocation_counts(_write(tmp_path, rows))
    assert list(parsed.functions["function"]) == ["f1", "f2", "f3"]
    assert int(parsed.counts.sum()) == 22
    assert len(parsed.skipped) == 2
    assert "line 5" in parsed.skipped[0] and "minute 1 is above 1,000,000,000" in parsed.skipped[0]
    assert "line 6" in parsed.skipped[1] and "minute 2" in parsed.skipped[1]


def test_a_header_cut_short_says_where_the_minutes_break(tmp_path: Path) -> None:
    # QA 39 S #3: a file cut inside its header (minutes 1..69 then "7") read "column '7': names
    # the column twice; rename or drop one of them", pointing at a rename, not at the cut
    path = tmp_path / "cut.csv"
    minutes = [str(i) for i in range(1, 70)] + ["7"]
    path.write_text("HashOwner,HashApp,HashFunction,Trigger," + ",".join(minutes))
    with pytest.raises(DataFormatError) as caught:
        read_invocation_counts(path)
    said = str(caught.value)
    assert "column 74 is '7', not '70'" in said and "cut short" in said and "twice" not in said

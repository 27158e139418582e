"""PERSEUS log and arrival-trace parsers: malformed rows are skipped and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets.azure_traces import read_arrival_trace
from gpucast.store.datasets.perseus import read_perseus_output

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"

PASS = """Pass {k}: started
Pass {k}: total batches 5394
Pass {k}: elapsed time 27.1 s
Pass {k}: desired throughput {q} qps
Pass {k}: actual throughput 199.0 qps
Pass {k}: 25th-percentile 0.045 s
Pass {k}: 50th-percentile {p50} s
Pass {k}: 75th-percentile 0.052 s
Pass {k}: 95th-percentile 0.056 s
Pass {k}: completed
"""


def test_perseus_log_skips_malformed_passes(tmp_path: Path) -> None:
    text = (
        PASS.format(k=1, q=203.0, p50=0.049)
        + PASS.format(k=2, q=203.1, p50="oops")
        + PASS.format(k=3, q=203.2, p50=0.048).replace("Pass 3: elapsed time 27.1 s\n", "")
    )
    path = tmp_path / "out.txt"
    path.write_text(text)
    res = read_perseus_output(path)
    assert list(res.frame["pass"]) == [1]
    assert len(res.skipped) == 2
    assert "not a number" in res.skipped[0] and "missing elapsed_s" in res.skipped[1]
    empty = tmp_path / "empty.txt"
    empty.write_text("nothing\n")
    with pytest.raises(DataFormatError, match="no complete PERSEUS pass"):
        read_perseus_output(empty)


def test_real_perseus_logs() -> None:
    folder = DATA / "perseus"
    if not folder.is_dir():
        pytest.skip("../shared/data/perseus not present")
    t1 = read_perseus_output(folder / "test_1" / "test_1_output.txt")
    t2 = read_perseus_output(folder / "test_2" / "test_2_output.txt")
    assert len(t1.frame) == 54 and len(t2.frame) == 27 and not t1.skipped
    assert t2.frame["desired_qps"].min() == pytest.approx(203.0)
    assert t2.frame["desired_qps"].max() == pytest.approx(204.0)


def test_arrival_trace_skips_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "not a time,1,1\n"
        "2023-11-16 18:17:04.5000000,-3,8\n"
        "2023-11-16 18:17:05.0000000,110,27\n"
    )
    res = read_arrival_trace(path)
    assert len(res.skipped) == 2
    assert list(res.frame["arrival_s"]) == pytest.approx([0.0, 1.02004])
    plain = tmp_path / "plain.csv"
    plain.write_text("arrival_s\n0.5\nx\n0.1\n")
    res2 = read_arrival_trace(plain)
    assert list(res2.frame["arrival_s"]) == pytest.approx([0.0, 0.4]) and len(res2.skipped) == 1
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(DataFormatError, match="arrival_s"):
        read_arrival_trace(bad)


def test_real_azure_llm_trace() -> None:
    path = DATA / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv"
    if not path.is_file():
        pytest.skip("../shared/data/azure_llm_2023 not present")
    res = read_arrival_trace(path)
    assert len(res.frame) + len(res.skipped) == 8819
    assert 3000 < res.frame["arrival_s"].iloc[-1] < 3700  # about one hour

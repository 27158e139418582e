"""LLM-Inference-Bench: throughput and TTFT rows, malformed rows skipped and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets.llm_bench import read_llm_throughput, read_llm_ttft

THROUGHPUT_HEADER = (
    "Hardware,Num of Hardware,Framework,Model,Input Output Length,Batch Size,Latency,Throughput\n"
)
GOOD = [
    "Nvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,16,2.0,2048.0",
    "AMD MI250 GPU,2,vLLM,meta-llama/Llama-2-70b-hf,256,1,10.0,51.2",
    "Nvidia A100 GPU,1,llama.cpp,meta-llama/Llama-2-7b-hf,128,32,4.0,64.0",
    "Intel Max1550,1,vLLM,meta-llama/Llama-2-7b-hf,128,1,2.0,128.0",
]
BAD = [
    "Nvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,16,fast,2048.0",  # not a number
    "Nvidia A100 GPU,1,vLLM,,128,16,2.0,2048.0",  # empty model
    "Nvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,16,2.0",  # a field short
    "Nvidia A100 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,128,0,2.0,2048.0",  # zero batch
    "Nvidia A100 GPU,1.5,vLLM,meta-llama/Llama-2-7b-hf,128,16,2.0,2048.0",  # half a GPU
]


def _csv(tmp_path: Path, header: str, rows: list[str]) -> Path:
    path = tmp_path / "results.csv"
    path.write_text(header + "\n".join(rows) + "\n")
    return path


def test_throughput_rows_and_units(tmp_path: Path) -> None:
    frame = read_llm_throughput(_csv(tmp_path, THROUGHPUT_HEADER, GOOD))
    assert list(frame.columns) == [
        "hardware", "gpu", "gpus", "framework", "model", "input_len", "output_len",
        "batch_size", "sequences", "latency_s", "tokens_per_s", "output_tokens_per_s",
    ]  # fmt: skip
    assert list(frame.gpu) == ["A100-40GB", "MI250", "A100-40GB", ""]  # unknown kept, unnamed
    vllm = frame.iloc[0]
    assert (vllm.input_len, vllm.output_len, vllm.sequences) == (128, 128, 16)
    # published throughput counts prompt + generated tokens: 16 x 256 / 2 s
    assert vllm.tokens_per_s == pytest.approx(16 * 256 / 2.0)
    assert vllm.output_tokens_per_s == pytest.approx(16 * 128 / 2.0)
    llama = frame.iloc[2]
    assert (llama.batch_size, llama.sequences) == (32, 1)  # llama-bench's -b is not sequences
    assert frame.attrs["skipped_rows"] == 0 and frame.attrs["skipped"] == ()


def test_malformed_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    rows = [GOOD[0], *BAD, "", GOOD[1]]  # a blank line is not a row
    frame = read_llm_throughput(_csv(tmp_path, THROUGHPUT_HEADER, rows))
    assert len(frame) == 2
    assert frame.attrs["skipped_rows"] == len(BAD)
    reasons = frame.attrs["skipped"]
    assert reasons[0] == "results.csv, line 3: column 'Latency': not a number ('fast')"
    assert "column 'Model': empty cell" in reasons[1]
    assert "7 fields, the header has 8" in reasons[2]
    assert "'Batch Size': must be > 0" in reasons[3]
    assert "'Num of Hardware': must be a whole number" in reasons[4]


def test_every_row_bad_gives_an_empty_typed_frame(tmp_path: Path) -> None:
    frame = read_llm_throughput(_csv(tmp_path, THROUGHPUT_HEADER, BAD))
    assert frame.empty and frame.attrs["skipped_rows"] == len(BAD)
    assert str(frame.latency_s.dtype) == "float64" and str(frame.gpus.dtype) == "int64"


def test_ttft_header_with_or_without_the_trailing_space(tmp_path: Path) -> None:
    header = (
        "Hardware,Num of Hardware,Framework,Model,Input Length,Output Length,Batch Size,"
        "TTFT Latency,end_latency{space}\n"
    )
    row = "AMD MI250 GPU,1,vLLM,meta-llama/Llama-2-7b-hf,1024,1,16,2.16,22.86"
    for space in (" ", ""):
        frame = read_llm_ttft(_csv(tmp_path, header.format(space=space), [row, "x,1"]))
        assert list(frame.columns) == [
            "hardware", "gpu", "gpus", "framework", "model", "input_len", "output_len",
            "batch_size", "ttft_s", "end_latency_s",
        ]  # fmt: skip
        assert frame.iloc[0].end_latency_s == pytest.approx(22.86)
        assert frame.iloc[0].gpu == "MI250" and frame.attrs["skipped_rows"] == 1


def test_file_level_problems_raise(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="file not found"):
        read_llm_throughput(tmp_path / "none.csv")
    with pytest.raises(DataFormatError, match="is empty"):
        read_llm_throughput(_csv(tmp_path, "", []))
    header = "Hardware,Num of Hardware,Framework,Model,Batch Size,Latency,Throughput\n"
    with pytest.raises(DataFormatError, match="line 1, column 'Input Output Length'"):
        read_llm_throughput(_csv(tmp_path, header, []))


@pytest.mark.shared_data
def test_published_results(shared_data: Path) -> None:
    folder = shared_data / "llm_inference_bench"
    frame = read_llm_throughput(folder / "throughput_all_results.csv")
    assert len(frame) == 1630 and frame.attrs["skipped_rows"] == 0
    assert frame.groupby("gpu").size().to_dict() == {"A100-40GB": 878, "MI250": 752}
    batched = frame[frame.framework != "llama.cpp"]
    tokens = batched.sequences * (batched.input_len + batched.output_len)
    assert (batched.tokens_per_s * batched.latency_s / tokens).round(6).eq(1.0).all()
    llama = frame[frame.framework == "llama.cpp"]
    per_sequence = llama.input_len + llama.output_len
    assert (llama.tokens_per_s * llama.latency_s / per_sequence).round(6).eq(1.0).all()
    big = frame[(frame.gpu == "A100-40GB") & (frame.model == "meta-llama/Llama-2-70b-hf")]
    assert set(big.gpus) == {4}  # 140 GB of FP16 weights need 4 x 40 GB
    ttft = read_llm_ttft(folder / "ttft_itl_all_results.csv")
    assert len(ttft) == 12 and ttft.attrs["skipped_rows"] == 0
    assert (ttft.end_latency_s > ttft.ttft_s).all()

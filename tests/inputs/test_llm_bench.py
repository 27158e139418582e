"""LLM-Inference-Bench as the LLM inference model's rows (needs ../shared/data)."""

from __future__ import annotations

from pathlib import Path

from gpucast.inputs.llm_bench import bench_data
from gpucast.predict.llm_infer import ROW_COLUMNS, TTFT_COLUMNS


def test_rows_name_catalog_models_and_gpus(shared_data: Path) -> None:
    bench = bench_data(shared_data)
    rows, ttft = bench.throughput, bench.ttft
    assert set(ROW_COLUMNS) <= set(rows.columns) and set(TTFT_COLUMNS) <= set(ttft.columns)
    assert set(rows["model"]) <= set(bench.specs) and "llama-2-7b" in bench.specs
    assert set(rows["gpu"]) == {"A100-40GB", "MI250"} == set(bench.gpus)
    assert bench.skipped == ("Deci/DeciLM-7B: 4 rows (not in llm_models.csv)",)
    cpp = rows[rows["framework"] == "llama.cpp"]
    assert (cpp["sequences"] == 1).all()
    assert (cpp["prompt_chunk_tokens"] == cpp["batch_size"]).all()
    others = rows[rows["framework"] != "llama.cpp"]
    assert (others["prompt_chunk_tokens"] == 0).all()
    assert (others["sequences"] == others["batch_size"]).all()
    assert len(ttft) == 12 and set(ttft["model"]) == {"llama-2-7b", "llama-3-8b", "mistral-7b"}

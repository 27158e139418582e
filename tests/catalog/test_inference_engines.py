"""The inference engines of catalog/data/inference_engines.csv: parsed, sourced, and fitted
(the shipped parameters are what a refit on LLM-Inference-Bench's A100 rows gives)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.catalog.engines import (
    ENGINE_COLUMNS,
    inference_engine,
    load_inference_engines,
    parse_inference_engines,
)
from gpucast.domain.errors import DataFormatError, UnknownEngineError
from gpucast.domain.llm_infer import ENGINE_PARAMS

BENCH_FRAMEWORKS = {"vLLM", "TensorRT-LLM", "Deepspeed-MII", "llama.cpp"}


def test_every_engine_has_a_source_a_date_and_says_what_is_fitted() -> None:
    engines = load_inference_engines()
    assert {e.name for e in engines} == {
        "vllm", "tensorrt-llm", "deepspeed-mii", "llama.cpp", "eager-pytorch",
    }  # fmt: skip
    for engine in engines:
        assert engine.source_url.startswith("https://") and engine.as_of is not None
        assert engine.default_precision == "fp16"  # as the benchmark ran them
        if engine.bench_framework:
            assert engine.fitted_params and "A100-40GB" in engine.fitted_on
        else:  # eager PyTorch: no rows, priors marked as such
            assert not engine.fitted_params and "PRIORS, NOT FITTED" in engine.note
    assert {e.bench_framework for e in engines if e.bench_framework} == BENCH_FRAMEWORKS
    llama_cpp = inference_engine("llama.cpp")
    assert llama_cpp.multi_gpu == "layer"
    assert "sequence_overhead_s" not in llama_cpp.fitted_params  # one sequence pins none


def test_lookup_by_alias_and_unknown_names() -> None:
    assert inference_engine("TRT-LLM").name == "tensorrt-llm"
    assert inference_engine("Deepspeed-MII").name == "deepspeed-mii"
    assert inference_engine("HF").name == "eager-pytorch"
    with pytest.raises(UnknownEngineError, match="unknown framework 'vlm': did you mean vllm"):
        inference_engine("vlm")


def _csv(**overrides: str) -> str:
    row = dict.fromkeys(ENGINE_COLUMNS, "")
    row.update(
        name="x", display_name="X", default_precision="fp16", multi_gpu="tensor",
        max_sequences="8", memory_fraction="0.9", memory_share="total",
        prompt_chunk_tokens="0", bench_identical_prompts="false",
        source_url="https://example.org", as_of="2026-12-03",
    )  # fmt: skip
    row.update(dict.fromkeys(ENGINE_PARAMS, "0.5"))
    row.update(overrides)
    return ",".join(ENGINE_COLUMNS) + "\n" + ",".join(row[c] for c in ENGINE_COLUMNS) + "\n"


def test_parse_errors_name_the_line_and_column() -> None:
    assert parse_inference_engines(_csv())[0].compute_efficiency == 0.5
    with pytest.raises(DataFormatError, match="line 2, column 'bench_identical_prompts'"):
        parse_inference_engines(_csv(bench_identical_prompts="maybe"))
    with pytest.raises(DataFormatError, match="compute_efficiency: must be in"):
        parse_inference_engines(_csv(compute_efficiency="1.5"))
    with pytest.raises(DataFormatError, match="multi_gpu"):
        parse_inference_engines(_csv(multi_gpu="pipeline"))
    text = _csv() + _csv(name="y", aliases="x").splitlines()[1] + "\n"
    with pytest.raises(DataFormatError, match="already on line 2"):
        parse_inference_engines(text)


def test_shipped_parameters_are_a_refit_on_the_a100_rows(shared_data: Path) -> None:
    from gpucast.inputs.llm_bench import bench_data
    from gpucast.predict.llm_infer import LlmInferenceModel

    bench = bench_data(shared_data)
    rows = bench.throughput[bench.throughput["gpu"] == "A100-40GB"]
    ttft = bench.ttft[bench.ttft["gpu"] == "A100-40GB"]
    model = LlmInferenceModel().fit(
        rows, specs=bench.specs, gpus=bench.gpus, engines=bench.engines, ttft=ttft,
        fitted_on=bench.fitted_on(rows),
    )  # fmt: skip
    for engine in load_inference_engines():
        if not engine.bench_framework:
            continue
        refit = model.profile(engine.name)
        assert refit.fitted_params == engine.fitted_params, engine.name
        assert refit.fitted_on == engine.fitted_on, engine.name
        for name in ENGINE_PARAMS:
            assert getattr(engine, name) == pytest.approx(getattr(refit, name), rel=2e-3), (
                f"{engine.name}.{name}: rerun python benchmarks/llm_inference_accuracy.py "
                "--profiles and update inference_engines.csv"
            )


def test_a_gpu_factor_scales_every_term_of_a_batch_on_that_gpu() -> None:
    """vLLM's MI250 factor (llm_infer_gpu_factors.csv): its parameters there are the
    efficiencies divided by it and the times multiplied; a one-GPU batch (no collectives)
    takes exactly that many times the factor-free engine's time, on that GPU only."""
    import dataclasses

    from gpucast.catalog import load_catalog
    from gpucast.catalog.llm import llm_model
    from gpucast.predict.llm_infer import predict_inference

    vllm = inference_engine("vllm")
    factor = vllm.gpu_factors["MI250"]
    assert 1.5 < factor < 2.5 and "MI250 rows" in vllm.gpu_factor_sources["MI250"]
    there, plain = vllm.params("MI250"), vllm.params()
    assert there["compute_efficiency"] == pytest.approx(plain["compute_efficiency"] / factor)
    assert there["step_overhead_s"] == pytest.approx(plain["step_overhead_s"] * factor)
    assert there["memory_reserve_gib"] == plain["memory_reserve_gib"]
    assert vllm.params("A100-40GB") == plain
    bare = dataclasses.replace(vllm, gpu_factors={}, gpu_factor_sources={})
    spec, cat = llm_model("llama-3-8b"), load_catalog()
    shape = {"batch_size": 8, "input_len": 512, "output_len": 64}
    mi250 = cat.gpu("MI250")
    ratio = (
        predict_inference(spec, mi250, vllm, **shape).latency_s
        / predict_inference(spec, mi250, bare, **shape).latency_s
    )
    assert ratio == pytest.approx(factor, rel=1e-9)
    a100 = cat.gpu("A100-40GB")
    assert predict_inference(spec, a100, vllm, **shape).latency_s == pytest.approx(
        predict_inference(spec, a100, bare, **shape).latency_s
    )
    assert type(vllm).from_dict(vllm.to_dict()).gpu_factors == vllm.gpu_factors


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("nope,MI250,1.5,3,a,src,2026-12-06", "engine 'nope' is not in inference_engines.csv"),
        ("vllm,MI250,-1,3,a,src,2026-12-06", "latency_factor"),
        ("vllm,MI250,1.5,0,a,src,2026-12-06", "rows"),
        ("vllm,MI250,1.5,3,a,src,yesterday", "as_of"),
    ],
)
def test_gpu_factor_rows_are_parsed_strictly(row: str, message: str) -> None:
    from gpucast.catalog.engines import GPU_FACTOR_COLUMNS, parse_gpu_factors

    text = ",".join(GPU_FACTOR_COLUMNS) + "\n" + row + "\n"
    with pytest.raises(DataFormatError, match=message):
        parse_gpu_factors(text, load_inference_engines())
    twice = ",".join(GPU_FACTOR_COLUMNS) + "\n" + ("vllm,MI250,1.5,3,a,src,2026-12-06\n" * 2)
    with pytest.raises(DataFormatError, match="listed twice"):
        parse_gpu_factors(twice, load_inference_engines())


def test_an_engines_kv_cache_precisions_carry_their_source() -> None:
    # QA 38 N #7: which KV-cache formats an engine keeps is a catalog fact with a page
    for engine in load_inference_engines():
        assert bool(engine.kv_precisions) == engine.kv_source_url.startswith("https://")
    assert inference_engine("vllm").kv_precisions == ("fp16", "bf16", "fp8")
    with pytest.raises(DataFormatError, match="kv_source_url: is required with kv_precisions"):
        parse_inference_engines(_csv(kv_precisions="fp16|fp8"))


def test_an_engines_weight_precisions_carry_their_source() -> None:
    # which weight precisions an engine serves is a catalog fact with a page (empty: unchecked)
    for engine in load_inference_engines():
        assert bool(engine.weight_precisions) == engine.weight_source_url.startswith("https://")
    assert inference_engine("deepspeed-mii").weight_precisions == ("fp16", "bf16")
    assert inference_engine("vllm").weight_precisions == ()
    with pytest.raises(DataFormatError, match="weight_source_url: is required with weight_prec"):
        parse_inference_engines(_csv(weight_precisions="fp16"))
    with pytest.raises(DataFormatError, match="weight_precisions"):
        parse_inference_engines(_csv(weight_precisions="fp7", weight_source_url="https://x"))

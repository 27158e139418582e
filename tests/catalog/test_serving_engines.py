"""Request-level inference engines (serving_engines.csv) and the INT8 peaks of gpus.csv."""

from __future__ import annotations

import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.engines import inference_engine
from gpucast.catalog.serving_engines import (
    load_serving_engines,
    parse_serving_engines,
    serving_engine,
)
from gpucast.catalog.steptime import shipped_step_time_model
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownServingEngineError
from gpucast.domain.serving import SERVING_PRECISIONS

HEADER = "name,display_name,aliases,precisions,default_precision,gemm_efficiency_from,stack,"
HEADER += "source_url,as_of,note\n"
ROW = "x,X,xx,fp16|int8,fp16,steptime,tuned,https://example.org,2026-12-06,n\n"


def test_every_row_has_a_source_date_and_resolvable_references() -> None:
    engines = load_serving_engines()
    assert {e.name for e in engines} >= {"eager-pytorch", "tensorrt"}
    model = shipped_step_time_model()
    assert model is not None
    for e in engines:
        assert e.source_url.startswith("https://") and e.as_of.year >= 2026
        assert set(e.precisions) <= set(SERVING_PRECISIONS)
        assert e.stack in model.overhead_s_  # a fitted step-time stack
        if e.gemm_efficiency_from.startswith("inference_engines:"):
            inference_engine(e.gemm_efficiency_from.partition(":")[2])  # resolves


def test_tensorrt_runs_on_nvidia_gpus_only() -> None:
    # QA 40 V #12: the engine row names its vendors; eager PyTorch (no vendors) runs anywhere
    trt, eager = serving_engine("tensorrt"), serving_engine("eager-pytorch")
    assert trt.vendors == ("nvidia",) and trt.runs_on("NVIDIA") and not trt.runs_on("amd")
    assert eager.vendors == () and eager.runs_on("intel")
    assert parse_serving_engines(HEADER + ROW)[0].vendors == ()  # the column is optional


def test_lookup_by_alias_and_unknown_engine() -> None:
    assert serving_engine("TRT").name == "tensorrt"
    assert serving_engine("PyTorch").name == "eager-pytorch"
    with pytest.raises(UnknownServingEngineError, match="unknown engine 'onnx'"):
        serving_engine("onnx")


def test_eager_pytorch_has_no_int8() -> None:
    eager = serving_engine("eager-pytorch")
    assert "int8" not in eager.precisions and "fp8" not in eager.precisions
    with pytest.raises(InvalidSpecError, match="int8 is not run by eager PyTorch"):
        eager.check_precision("int8")
    serving_engine("tensorrt").check_precision("int8")


@pytest.mark.parametrize(
    "row, text",
    [
        (ROW.replace("fp16|int8", "fp16|int4"), "precisions: must be among"),
        (ROW.replace("int8,fp16,", "int8,fp32,"), "default_precision: must be one of"),
        (ROW.replace("steptime,tuned", "magic,tuned"), "gemm_efficiency_from: must be"),
        (ROW.replace("2026-12-06", "yesterday"), "as_of"),
        (ROW.replace(",tuned,", ",,"), "stack"),
    ],
)
def test_bad_rows_name_file_line_and_field(row: str, text: str) -> None:
    with pytest.raises(DataFormatError, match=text) as info:
        parse_serving_engines(HEADER + row, "engines.csv")
    assert "engines.csv" in str(info.value) and "line 2" in str(info.value)


def test_duplicate_alias_and_missing_column() -> None:
    with pytest.raises(DataFormatError, match="already on line 2"):
        parse_serving_engines(HEADER + ROW + ROW.replace("x,X,xx", "y,Y,xx"), "e.csv")
    with pytest.raises(DataFormatError, match="missing column"):
        parse_serving_engines(HEADER.replace("stack,", ""), "e.csv")


def test_int8_peaks_are_dense_datasheet_figures() -> None:
    gpus = {g.name: g for g in load_catalog().gpus}
    assert gpus["P4"].peak_tflops("int8") == 22.0  # DP4A: 4x its 5.5 FP32 TFLOPS
    assert gpus["T4"].peak_tflops("int8") == 2 * gpus["T4"].peak_tflops("fp16")
    assert gpus["H100-SXM"].peak_tflops("int8") == gpus["H100-SXM"].fp8_tflops
    assert gpus["A100-80GB"].peak_tflops("int8") == 2 * gpus["A100-80GB"].peak_tflops("fp16")
    for g in gpus.values():
        if g.int8_tops is not None and g.name != "B300":  # Blackwell Ultra cut its INT8 rate
            assert g.int8_tops >= (g.fp16_tflops or g.fp32_tflops)
    assert gpus["B300"].peak_tflops("int8") < 0.1 * gpus["B300"].peak_tflops("fp16")
    # no INT8 figure: the fastest mode it has below it
    assert gpus["V100-16GB"].int8_tops is None
    assert gpus["V100-16GB"].peak_tflops("int8") == gpus["V100-16GB"].fp16_tflops
    assert gpus["K80"].peak_tflops("int8") == gpus["K80"].peak_tflops("fp32")

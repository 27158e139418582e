"""The step-time fit's features: a row the fit cannot price as its predictions do is refused."""

from __future__ import annotations

import pandas as pd
import pytest

from gpucast.catalog import load_catalog
from gpucast.domain.errors import InvalidSpecError
from gpucast.inputs.steptime import with_features


def _row(gpu: str, precision: str) -> pd.DataFrame:
    row = {"workload": "resnet18", "options": "{}", "precision": precision}
    return pd.DataFrame([{**row, "optimizer": "sgd", "batch": 16, "gpu": gpu}])


def test_fp32_convolutions_on_a_tf32_gpu_are_not_a_fit_row() -> None:
    """The fit prices fp32 on the FP32 units only; predictions put an A100's fp32
    convolutions on TF32 (cuDNN's default), so such a row is one clear error, not a silent
    mismatch; the same row on a V100 (no TF32) or in bf16 has its features."""
    catalog = load_catalog()
    with pytest.raises(InvalidSpecError, match="TF32 by default there") as err:
        with_features(_row("A100-80GB", "fp32"), catalog)
    assert err.value.field == "precision"
    for gpu, precision in (("V100-16GB", "fp32"), ("A100-80GB", "bf16")):
        out = with_features(_row(gpu, precision), catalog)
        assert out["conv_flops"].iloc[0] > 0 and out["peak_tflops"].iloc[0] > 0

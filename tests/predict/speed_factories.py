"""Synthetic CM-DARE-format rows with known coefficients, and GPU specs for the speed tests."""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pandas as pd

from gpucast.domain.catalog import GpuSpec
from gpucast.predict.speed import (
    FLOPS_COL,
    GPU_COL,
    MODEL_COL,
    PARAMS_COL,
    STEP_TIME_COL,
    TENSORS_COL,
    TFLOPS_COL,
)


def gpu_spec(name: str, fp32: float, *, fp16: float | None = None, aliases: tuple[str, ...] = ()):
    return GpuSpec(
        name=name,
        vendor="nvidia",
        architecture="test",
        fp32_tflops=fp32,
        tf32_tflops=None,
        fp16_tflops=fp16,
        bf16_tflops=None,
        fp8_tflops=None,
        memory_gib=16,
        memory_bandwidth_gbps=500,
        interconnect_gbps=None,
        pcie_generation=3,
        tdp_w=250,
        sm_count=40,
        aliases=aliases,
        source_url="https://example.org",
        as_of=date(2024, 1, 1),
    )


SLOW = gpu_spec("SLOW", 4.0)
FAST = gpu_spec("FAST", 10.0, fp16=40.0, aliases=("FAST-16GB",))
NEW = gpu_spec("NEW", 20.0, fp16=80.0)

# Ground truth: per-GPU fixed, per-tensor and compute; compute scales with 1/peak.
TRUTH = {"SLOW": (0.025, 0.0009, 5.0e-11), "FAST": (0.010, 0.00036, 2.0e-11)}


def synthetic_rows(noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(12):
        flops = 5e8 * (1.35**m)
        params = flops / 880.0 * (1 + 0.05 * math.sin(m))
        tensors = 40 + 17 * ((m * 7) % 12)
        for gpu, (fixed, per_tensor, compute) in TRUTH.items():
            peak = 4.0 if gpu == "SLOW" else 10.0
            for _ in range(3):
                t = fixed + per_tensor * tensors + compute * flops
                t *= 1 + noise * rng.standard_normal()
                rows.append(
                    {
                        GPU_COL: gpu,
                        MODEL_COL: f"m{m}",
                        TFLOPS_COL: peak,
                        FLOPS_COL: flops,
                        PARAMS_COL: params,
                        TENSORS_COL: tensors,
                        STEP_TIME_COL: t,
                        "extra column": "ignored",
                    }
                )
    return pd.DataFrame(rows)

"""Tiny synthetic LLMs, GPUs and engines, and batches timed by a known engine profile."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile
from gpucast.predict.llm_infer import predict_inference

DAY = date(2026, 12, 3)


def gpu(name: str = "G", *, memory_gib: float = 40.0, bandwidth: float = 1500.0) -> GpuSpec:
    return GpuSpec(
        name=name, vendor="nvidia", architecture="Test", fp32_tflops=20.0, tf32_tflops=150.0,
        fp16_tflops=300.0, bf16_tflops=300.0, fp8_tflops=None, memory_gib=memory_gib,
        memory_bandwidth_gbps=bandwidth, interconnect_gbps=600.0, pcie_generation=4,
        tdp_w=400.0, sm_count=100, source_url="https://example.org/gpu", as_of=DAY,
    )  # fmt: skip


def model(
    name: str = "tiny",
    *,
    layers: int = 16,
    hidden: int = 2048,
    heads: int = 16,
    kv_heads: int = 16,
    experts: int = 1,
    top_k: int = 1,
    context: int = 8192,
) -> TransformerSpec:
    return TransformerSpec(
        name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=hidden // heads, ffn_hidden=4 * hidden, vocab=32000, max_context=context,
        n_experts=experts, experts_per_token=top_k, source_url="https://example.org/m",
        as_of=DAY,
    )  # fmt: skip


#: The "true" engine the synthetic rows are timed with.
TRUE = EngineProfile(
    name="eng", display_name="Engine", bench_framework="Eng",
    weight_bandwidth_efficiency=0.85, kv_bandwidth_efficiency=0.7, compute_efficiency=0.65,
    step_overhead_s=2e-3, sequence_overhead_s=6e-5, memory_reserve_gib=2.0,
    collective_latency_s=2e-5,
)  # fmt: skip
#: The same engine before fitting (the defaults are the priors).
UNFITTED = EngineProfile(name="eng", display_name="Engine", bench_framework="Eng")

SPECS = {
    "small": model("small"),
    "gqa": model("gqa", layers=24, hidden=3072, heads=24, kv_heads=4),
    "big": model("big", layers=40, hidden=5120, heads=40, kv_heads=8),
}
GPUS = {"G": gpu()}


def synthetic_rows(*, noise: float = 0.0, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Throughput rows (every model x 1/2 GPUs x 3 lengths x 4 batches) and TTFT rows."""
    rng = np.random.default_rng(seed)
    rows, ttft = [], []
    for name, spec in SPECS.items():
        for gpus in (1, 2):
            for length in (128, 512, 2048):
                for batch in (1, 8, 32, 64):
                    p = predict_inference(
                        spec, GPUS["G"], TRUE, batch_size=batch, input_len=length,
                        output_len=length, tp=gpus,
                    )  # fmt: skip
                    rows.append(
                        {
                            "framework": "Eng", "model": name, "gpu": "G", "gpus": gpus,
                            "input_len": length, "output_len": length, "batch_size": batch,
                            "sequences": batch, "prompt_chunk_tokens": 0,
                            "latency_s": p.latency_s * float(np.exp(rng.normal(0, noise))),
                        }
                    )  # fmt: skip
        p = predict_inference(
            spec, GPUS["G"], TRUE, batch_size=16, input_len=1024, output_len=1, tp=1
        )
        ttft.append(
            {
                "framework": "Eng", "model": name, "gpu": "G", "gpus": 1, "input_len": 1024,
                "batch_size": 16, "ttft_s": p.ttft_s,
            }
        )  # fmt: skip
    return pd.DataFrame(rows), pd.DataFrame(ttft)

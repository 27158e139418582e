"""Synthetic step times drawn from a known fitted roofline (for the step-time model's tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: name -> (peak fp32 TFLOP/s, peak bf16 TFLOP/s, bandwidth GB/s, true GPU factor)
GPUS = {
    "A": (10.0, 40.0, 500.0, 1.10),
    "B": (20.0, 120.0, 900.0, 0.95),
    "C": (15.0, 60.0, 700.0, 1.00),
    "D": (40.0, 300.0, 2000.0, 1.05),
}
#: name -> (matmul GFLOPs per sample, memory MB per sample, kernels, true workload factor)
WORKLOADS = {
    "w1": (3.0, 40.0, 300, 1.0),
    "w2": (10.0, 60.0, 900, 1.2),
    "w3": (1.0, 80.0, 150, 0.85),
    "w4": (20.0, 20.0, 600, 1.0),
    "w5": (5.0, 120.0, 450, 0.9),
}
TRUE = {"fp32": 0.6, "tensor16": 0.35, "memory": 0.7, "overhead_pytorch": 8e-6}
#: workloads whose matmul FLOPs are convolutions (with ``conv_ratio``)
CONV_WORKLOADS = ("w1", "w2")


#: a GPU whose bf16 peak is only 2x its FP32 one (as A10G's): its convolutions run faster on
#: the FP32 units than on tensor cores at a low ``conv_ratio``
LOW_RATIO_GPU = {"E": (30.0, 60.0, 600.0, 1.0)}


def synthetic_steps(
    *, noise: float = 0.0, seed: int = 0, conv_ratio: float | None = None, low_ratio: bool = False
) -> pd.DataFrame:
    """Every workload on every GPU at 4 batches, fp32 on A-C, bf16 on D (one stack). With
    ``conv_ratio``, the FLOPs of :data:`CONV_WORKLOADS` are convolutions that reach that
    share of the matmul efficiency on tensor cores (a ``conv_flops`` column is added). Every
    bf16 step's matrix work takes the faster of the tensor-core and the FP32 path; with
    ``low_ratio``, GPU E (:data:`LOW_RATIO_GPU`, bf16) is added, where the FP32 path wins."""
    rng = np.random.default_rng(seed)
    rows = []
    gpus = GPUS | (LOW_RATIO_GPU if low_ratio else {})
    for gpu, (fp32, bf16, bw, kg) in gpus.items():
        precision = "bf16" if gpu in ("D", "E") else "fp32"
        peak = bf16 if precision == "bf16" else fp32
        eta = TRUE["tensor16"] if precision == "bf16" else TRUE["fp32"]
        for work, (gf, mb, kernels, kw) in WORKLOADS.items():
            for batch in (8, 32, 128, 256):
                f, m = gf * 1e9 * batch, mb * 1e6 * batch
                conv = f if conv_ratio is not None and work in CONV_WORKLOADS else 0.0
                ratio = conv_ratio if conv_ratio is not None and precision == "bf16" else 1.0
                matrix = (f - conv + conv / ratio) / (eta * peak * 1e12)
                matrix = min(matrix, f / (TRUE["fp32"] * fp32 * 1e12))
                t = (
                    kg
                    * kw
                    * (
                        matrix
                        + m / (TRUE["memory"] * bw * 1e9)
                        + kernels * TRUE["overhead_pytorch"]
                    )
                )
                extra = {"conv_flops": conv} if conv_ratio is not None else {}
                rows.append(
                    {
                        **extra,
                        "source": "synthetic",
                        "workload_key": work,
                        "gpu": gpu,
                        "precision": precision,
                        "stack": "pytorch",
                        "batch": float(batch),
                        "matmul_flops": f,
                        "memory_bytes": m,
                        "n_kernels": float(kernels),
                        "peak_tflops": peak,
                        "fp32_peak_tflops": fp32,
                        "bandwidth_gbps": bw,
                        "step_time_s": t * float(np.exp(rng.normal(0.0, noise))),
                    }
                )
    return pd.DataFrame(rows)

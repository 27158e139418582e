"""Synthetic power-limit sweeps drawn from the power model itself (known constants)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpucast.predict.power import PowerConstants, PowerModel

#: The constants the synthetic sweeps are drawn with (inside every fitted bound).
TRUE = PowerConstants(
    static_fraction=0.2,
    activity_compute=1.1,
    activity_memory=0.5,
    activity_kernel=0.4,
    activity_host=0.0005,
    voltage_floor=0.75,
    voltage_slope=1.1,
    memory_dram_energy=0.6,
    memory_clock_share=0.4,
    kernel_clock_share=0.3,
    cap_margin=0.08,
    cap_margin_floor=0.3,
)
#: (compute, memory, kernel, host) seconds of the synthetic workloads at default clocks.
WORKLOADS = {
    "convnet": (0.60, 0.25, 0.02, 0.03),
    "bert": (0.45, 0.30, 0.05, 0.02),
    "tiny": (0.01, 0.03, 0.02, 0.10),
    "rnn": (0.20, 0.20, 0.25, 0.05),
}
BOARDS = {"G1": 250.0, "G2": 300.0}


def true_model(factors: dict[str, float] | None = None) -> PowerModel:
    """A model holding :data:`TRUE` (as if fitted), for drawing data."""
    return PowerModel.from_dict(
        {
            "kind": "power",
            "schema_version": 1,
            "state": {
                "gpu_prior_sd": 0.3,
                "reference_weight": 1.0,
                "constants": TRUE.to_dict(),
                "gpu_factors": dict(factors or {}),
            },
        }
    )


def sweep_rows(noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Every workload on every board at limits from 40% of the maximum up, in 25 W steps."""
    rng = np.random.default_rng(seed)
    rows = []
    for gpu, top in BOARDS.items():
        for name, (c, m, k, h) in WORKLOADS.items():
            for limit in [*np.arange(0.4 * top, top, 25.0), top]:
                rows.append(
                    {
                        "group": f"{gpu}/{name}",
                        "gpu": gpu,
                        "workload": name,
                        "compute_s": c,
                        "memory_s": m,
                        "kernel_s": k,
                        "host_s": h,
                        "max_power_limit_w": top,
                        "power_limit_w": float(limit),
                        "reference_step_time_s": c + m + k + h,
                    }
                )
    frame = pd.DataFrame(rows)
    out = true_model().predict(frame)
    frame["step_time_s"] = out["step_time_s"] * np.exp(noise * rng.standard_normal(len(frame)))
    frame["avg_power_w"] = out["avg_power_w"] * np.exp(noise * rng.standard_normal(len(frame)))
    return frame.drop(columns=["reference_step_time_s"])

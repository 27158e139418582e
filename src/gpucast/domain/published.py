"""How published benchmarks are expressed as gpucast workloads (facts the importers and the
step-time fit share).

Each entry names the built-in workload (and options) that rebuilds the benchmark's model, the
precision it ran at, and its optimizer, with the reference it follows. Where the published
setup is not known exactly, the entry says what was assumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedWorkload:
    """The gpucast workload a published benchmark is expressed as."""

    workload: str
    options: Mapping[str, object] = field(default_factory=dict)
    precision: str = "fp32"
    optimizer: str = "sgd"
    note: str = ""


#: MLPerf Training v4.0 benchmarks gpucast can express. Submissions train in mixed precision
#: (FP16/BF16 tensor cores; FP8 for the LLM benchmarks on Hopper); the profile is taken at
#: bf16 (same tensor-core peak as fp16 on every catalog GPU).
MLPERF_WORKLOADS: dict[str, PublishedWorkload] = {
    "resnet": PublishedWorkload(
        workload="resnet50",
        precision="bf16",
        note="ResNet-50 v1.5, ImageNet 224x224, LARS (profiled with SGD: same per-step work)",
    ),
}

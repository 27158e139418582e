"""Measured CPU optimizer steps (``gpucast measure optimizer``): the input of the offload model.

One :class:`OptimizerStepMeasurement` is the time of ``torch.optim.AdamW.step()`` on this
machine's CPU for ``n_params`` fp32 parameters in ``n_tensors`` tensors (fp32 master weights,
gradients, and the two moments, as ZeRO-Offload keeps them in host memory), with the raw step
times kept.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import date
from typing import Any

from gpucast.domain.errors import InvalidSpecError

OPTIMIZER_STEP_SCHEMA_VERSION = 1
#: Bytes AdamW streams per fp32 parameter and step: reads the weight, gradient and two
#: moments (16 B), writes the weight and two moments (12 B).
ADAM_BYTES_PER_PARAM = 28.0


def streamed_bytes_per_param(
    optimizer_bytes_per_param: float, weights_bytes_per_param: float = 4.0
) -> float:
    """Bytes an optimizer step streams per parameter: reads the fp32 (master) weight and
    gradient, writes the weight, reads and writes its state (``12 + 2 x state``: AdamW's two
    moments, 28; SGD with momentum, 20; plain SGD, 12). Under mixed precision (weights of
    fewer than 4 bytes) the optimizer bytes hold the fp32 master weights too: not state."""
    master = 4.0 if weights_bytes_per_param < 4.0 else 0.0
    return 12.0 + 2.0 * max(0.0, float(optimizer_bytes_per_param) - master)


#: Host bytes AdamW holds per fp32 parameter: weight, gradient, two moments.
ADAM_HOST_BYTES_PER_PARAM = 16.0

#: The optimizers a workload is profiled with (``gpucast profile --optimizer``) and the state
#: each keeps per fp32 parameter.
_OPTIMIZER_STATE = {"sgd": "SGD with momentum (4 B a parameter)", "adam": "Adam (8 B a parameter)"}


def optimizer_state_note(optimizer: str, workload: str) -> str:
    """What the training verbs price a profile's optimizer state as, and (for the profiler's
    default, SGD with momentum) how to price Adam's instead -- said, since it moves the memory
    need by 4 B a parameter and an offloaded host step by 8 B streamed (QA 39: a user's 1.6B
    model's host state was 18 GiB under "the Adam step on the host CPU", Adam's is 24)."""
    said = f"optimizer state priced as {_OPTIMIZER_STATE.get(optimizer, optimizer)}"
    if optimizer != "sgd":
        return said
    return (
        f"{said}, the profile's default; for Adam: gpucast profile {workload} --optimizer adam, "
        "then --workload run:ID (predict train, plan train)"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OptimizerStepMeasurement:
    """AdamW step times on this CPU for one size (raw samples, statistics from them)."""

    optimizer: str  # "adamw"
    implementation: str  # "foreach" | "fused" | "for-loop"
    n_params: int
    n_tensors: int
    threads: int
    step_times_s: tuple[float, ...]
    host: str
    created_at: str
    warnings: tuple[str, ...] = ()
    timer: str = "wall"  # "wall": wall clock; "cpu": this process's CPU time per step
    schema_version: int = OPTIMIZER_STEP_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.n_params < 1 or self.n_tensors < 1 or self.n_tensors > self.n_params:
            raise InvalidSpecError(
                "n_params / n_tensors",
                "must satisfy 1 <= n_tensors <= n_params",
                got=(self.n_params, self.n_tensors),
            )
        if not self.step_times_s or any(not t > 0 for t in self.step_times_s):
            raise InvalidSpecError("step_times_s", "must be a non-empty list of times > 0")
        object.__setattr__(self, "step_times_s", tuple(float(t) for t in self.step_times_s))
        object.__setattr__(self, "warnings", tuple(self.warnings))

    @property
    def median_s(self) -> float:
        return float(statistics.median(self.step_times_s))

    @property
    def fastest_s(self) -> float:
        """The least disturbed step (a shared machine's other processes only slow steps
        down): what the CPU Adam model is fitted on and checked against."""
        return min(self.step_times_s)

    @property
    def bytes_streamed(self) -> float:
        return ADAM_BYTES_PER_PARAM * self.n_params

    @property
    def bandwidth_gbps(self) -> float:
        """Effective memory bandwidth of the fastest step (GB/s of streamed state)."""
        return self.bytes_streamed / self.fastest_s / 1e9

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "optimizer": self.optimizer,
            "implementation": self.implementation,
            "n_params": self.n_params,
            "n_tensors": self.n_tensors,
            "threads": self.threads,
            "step_times_s": list(self.step_times_s),
            "median_s": self.median_s,
            "fastest_s": self.fastest_s,
            "streamed_bytes_per_s": self.bandwidth_gbps * 1e9,
            "host": self.host,
            "created_at": self.created_at,
            "warnings": list(self.warnings),
            "timer": self.timer,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OptimizerStepMeasurement:
        if data.get("schema_version") != OPTIMIZER_STEP_SCHEMA_VERSION:
            raise InvalidSpecError(
                "optimizer schema_version",
                f"must be {OPTIMIZER_STEP_SCHEMA_VERSION}",
                got=data.get("schema_version"),
            )
        keep = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        keep["step_times_s"] = tuple(float(t) for t in keep.get("step_times_s", ()))
        keep["warnings"] = tuple(str(w) for w in keep.get("warnings", ()))
        return cls(**keep)


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuAdamFact:
    """A CPU Adam speed from ``catalog/data/cpu_adam.csv``: the offload model's default."""

    name: str
    fixed_s: float
    per_tensor_s: float
    bandwidth_gbps: float
    source_url: str
    as_of: date
    note: str = ""

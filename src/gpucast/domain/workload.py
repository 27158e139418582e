"""What a workload is, as data: a name, a batch size and a precision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from gpucast.domain.errors import InvalidSpecError

Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
Mode = Literal["train", "infer"]
#: Software stacks a training step is predicted for: eager PyTorch, TensorFlow 1.x (as the
#: 2018-19 CM-DARE runs), vendor-tuned MLPerf-class code (fused kernels, CUDA graphs).
SOFTWARE_STACKS: tuple[str, ...] = ("pytorch", "tf1", "tuned")
SOFTWARE_HELP = (
    "Software stack the step time is predicted for: pytorch (eager, default), tuned "
    "(MLPerf-class: fused kernels, CUDA graphs) or tf1 (TensorFlow 1.x)."
)


def check_software(value: str) -> None:
    """One clear error for an unknown software stack."""
    if value not in SOFTWARE_STACKS:
        raise InvalidSpecError(
            "software",
            f"must be one of {', '.join(SOFTWARE_STACKS)}",
            got=value,
            fix="e.g. --software tuned for MLPerf-class code",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSpec:
    """A workload to profile or measure.

    ``name`` is a built-in name (``resnet50``, ``cifar-resnet32``...) or ``module:factory``.
    """

    name: str
    batch_size: int
    precision: Precision = "fp32"

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpecError("workload", "must not be empty", fix="e.g. --workload resnet50")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise InvalidSpecError("batch_size", "must be an integer", got=self.batch_size)
        if self.batch_size < 1:
            raise InvalidSpecError("batch_size", "must be >= 1", got=self.batch_size)
        if self.precision not in PRECISIONS:
            raise InvalidSpecError(
                "precision", f"must be one of {', '.join(PRECISIONS)}", got=self.precision
            )

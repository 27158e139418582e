"""The step-time frame :mod:`gpucast.predict.steptime` reads: the precision classes and
software stacks and where each borrows from, the columns (:data:`FEATURES`,
:data:`TARGET`) and their checks, the optional columns (``conv_flops``,
``fp32_peak_tflops``, ``eval_runs``, ``eval_work``, ``extra_s``) and the per-source
weights (:func:`source_weights`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.evaluation import EVAL_FORWARD_SHARE
from gpucast.domain.workload import SOFTWARE_STACKS

if TYPE_CHECKING:  # pandas loads where a frame is built (fits), not to predict
    import pandas as pd

FloatArray = npt.NDArray[np.float64]

#: Training precision -> the class whose compute efficiency it uses.
PRECISION_CLASS: dict[str, str] = {
    "fp32": "fp32",
    "tf32": "tf32",
    "fp16": "tensor16",
    "bf16": "tensor16",
    "fp8": "fp8",
}
#: Where a class without data borrows its efficiency from, in order of preference.
BORROW: dict[str, tuple[str, ...]] = {
    "fp32": ("tensor16", "tf32"),
    "tf32": ("tensor16", "fp32"),
    "tensor16": ("tf32", "fp8", "fp32"),
    "fp8": ("tensor16", "tf32", "fp32"),
}
#: Software stacks: PyTorch eager, TensorFlow 1.x (CM-DARE), vendor-tuned MLPerf-class code.
STACKS: tuple[str, ...] = SOFTWARE_STACKS
REFERENCE_STACK = "pytorch"
#: Where a stack without data borrows its overhead / traffic from.
STACK_BORROW: dict[str, tuple[str, ...]] = {
    "pytorch": ("tf1", "tuned"),
    "tf1": ("pytorch", "tuned"),
    "tuned": ("pytorch", "tf1"),
}
#: Columns :meth:`StepTimeModel.fit` / ``predict`` read.
FEATURES: tuple[str, ...] = (
    "matmul_flops",
    "memory_bytes",
    "n_kernels",
    "peak_tflops",
    "bandwidth_gbps",
    "precision",
    "stack",
    "gpu",
    "workload_key",
)
TARGET = "step_time_s"


def source_weights(sources: pd.Series) -> FloatArray:
    """Weights that give every source the same total (each row ``1 / rows of its source``,
    scaled so the weights average 1)."""
    counts = sources.map(sources.value_counts())
    w = 1.0 / counts.to_numpy(dtype=np.float64)
    return np.asarray(w * len(w) / w.sum(), dtype=np.float64)


def _check_frame(frame: pd.DataFrame, *, need_target: bool) -> None:
    need = [*FEATURES, TARGET] if need_target else list(FEATURES)
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"step-time frame lacks column(s) {', '.join(missing)}",
            fix="build it with gpucast.inputs.steptime.step_time_observations",
        )
    if not len(frame):
        raise InvalidInputError("step-time frame has no rows", fix="give at least one row")
    numeric = ["matmul_flops", "memory_bytes", "n_kernels", "peak_tflops", "bandwidth_gbps"]
    if need_target:
        numeric.append(TARGET)
    for column in numeric:
        values = frame[column].to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise InvalidSpecError(column, "must be finite and >= 0 in every row")
    if need_target and np.any(frame[TARGET].to_numpy(dtype=np.float64) <= 0):
        raise InvalidSpecError(TARGET, "must be > 0 in every row")
    unknown = set(frame["precision"]) - set(PRECISION_CLASS)
    if unknown:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(PRECISION_CLASS)}", got=sorted(unknown)
        )
    stacks = set(frame["stack"]) - set(STACKS)
    if stacks:
        raise InvalidSpecError("stack", f"must be one of {', '.join(STACKS)}", got=sorted(stacks))


def _workload_names(frame: pd.DataFrame) -> frozenset[str]:
    """The built-in workload names of ``frame``'s rows (``workload``; none without it)."""
    if "workload" not in frame.columns:
        return frozenset()
    return frozenset(str(w) for w in frame["workload"].dropna().unique())


def _conv_flops(frame: pd.DataFrame) -> FloatArray:
    """The optional ``conv_flops`` column (0 without it), checked against ``matmul_flops``."""
    if "conv_flops" not in frame.columns:
        return np.zeros(len(frame))
    conv = frame["conv_flops"].to_numpy(dtype=np.float64)
    matmul = frame["matmul_flops"].to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(conv)) or np.any(conv < 0) or np.any(conv > matmul * (1 + 1e-9)):
        raise InvalidSpecError("conv_flops", "must be finite, >= 0 and <= matmul_flops")
    return conv


def _fp32_flops_per_s(frame: pd.DataFrame, eta_fp32: float) -> FloatArray:
    """Per row, what the GPU's FP32 units sustain on reduced-precision matrix work (the path
    :func:`~gpucast.predict.roofline.matrix_seconds` falls back to): the optional
    ``fp32_peak_tflops`` column at ``eta_fp32``; inf on FP32 rows and without the column."""
    tensor = frame["precision"].map(PRECISION_CLASS).to_numpy() != "fp32"
    peak = _column(frame, "fp32_peak_tflops", 0.0) * 1e12 * eta_fp32
    return np.asarray(np.where(tensor & (peak > 0), peak, math.inf), dtype=np.float64)


def _column(frame: pd.DataFrame, name: str, missing: float) -> FloatArray:
    """An optional numeric column (``missing`` without it or where NaN), finite and >= 0."""
    if name not in frame.columns:
        return np.full(len(frame), missing)
    values = frame[name].to_numpy(dtype=np.float64)
    values = np.where(np.isnan(values), missing, values)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise InvalidSpecError(name, "must be finite and >= 0 in every row")
    return np.asarray(values, dtype=np.float64)


def _evaluation_s(frame: pd.DataFrame, work_s: FloatArray, latency_s: float) -> FloatArray:
    """Seconds of evaluation per training step: ``eval_runs`` evaluations of ``latency_s``
    each, plus their forward passes (``eval_work`` samples per trained one, each
    :data:`EVAL_FORWARD_SHARE` of ``work_s``, the step's compute and memory time)."""
    runs = _column(frame, "eval_runs", 0.0)
    work = _column(frame, "eval_work", 0.0)
    return np.asarray(runs * latency_s + work * EVAL_FORWARD_SHARE * work_s, dtype=np.float64)


def _extra(frame: pd.DataFrame) -> FloatArray:
    if "extra_s" not in frame.columns:
        return np.zeros(len(frame))
    extra = frame["extra_s"].to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(extra)) or np.any(extra < 0):
        raise InvalidSpecError("extra_s", "must be finite and >= 0 in every row")
    return extra


def _single_batch_stacks(frame: pd.DataFrame) -> set[str]:
    """Software stacks whose every workload was measured at one batch size only."""
    batches = frame.groupby(["stack", "workload_key"])["batch"].nunique()
    per_stack = batches.groupby(level="stack").max()
    return {str(s) for s, n in per_stack.items() if n <= 1}

"""The least-squares problem behind :meth:`gpucast.predict.steptime.StepTimeModel.fit`:
where each parameter sits in the fit's vector, its start and bounds (:class:`_Layout`),
and the frame as arrays with the prediction and its analytic Jacobian (:class:`_Arrays`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.evaluation import EVAL_FORWARD_SHARE
from gpucast.predict._steptime_columns import (
    PRECISION_CLASS,
    REFERENCE_STACK,
    FloatArray,
    _column,
    _conv_flops,
    _fp32_flops_per_s,
)
from gpucast.predict.roofline import matrix_seconds

if TYPE_CHECKING:  # pandas loads where a frame is built (fits), not to predict
    import pandas as pd

_ETA_BOUNDS = (math.log(0.01), 0.0)
_OVERHEAD_BOUNDS = (math.log(1e-8), math.log(5e-3))
_TRAFFIC_BOUNDS = (math.log(0.02), math.log(10.0))
_STEP_BOUNDS = (math.log(1e-7), math.log(1.0))
_FACTOR_BOUNDS = (math.log(0.1), math.log(10.0))
_CONV_BOUNDS = (math.log(0.1), math.log(2.0))
_EVAL_BOUNDS = (math.log(1e-4), math.log(30.0))


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each parameter sits in the fit's vector (all in log space)."""

    classes: list[str]
    stacks: list[str]
    traffic_stacks: list[str]
    gpus: list[str]
    works: list[str]
    tensor_conv: bool = False  # whether a tensor-core convolution ratio is fitted
    evaluation: bool = False  # whether an evaluation latency is fitted
    eta_index: dict[str, int] = field(init=False)
    eta_memory_index: int = field(init=False)
    overhead_index: dict[str, int] = field(init=False)
    step_index: dict[str, int] = field(init=False)
    traffic_index: dict[str, int] = field(init=False)
    gpu_index: dict[str, int] = field(init=False)
    work_index: dict[str, int] = field(init=False)
    conv_index: int | None = field(init=False)
    eval_index: int | None = field(init=False)
    size: int = field(init=False)

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _Layout:
        """The parameters a fit on ``frame`` has: what its rows hold."""
        stacks = sorted(set(frame["stack"]))
        tensor = frame["precision"].map(PRECISION_CLASS).to_numpy() != "fp32"
        return cls(
            sorted({PRECISION_CLASS[p] for p in frame["precision"]}),
            stacks,
            [s for s in stacks if s != REFERENCE_STACK],
            sorted(set(frame["gpu"])),
            sorted(set(frame["workload_key"])),
            bool(np.any((_conv_flops(frame) > 0) & tensor)),
            bool(np.any(_column(frame, "eval_runs", 0.0) > 0)),
        )

    def __post_init__(self) -> None:
        i = 0

        def take(names: list[str]) -> dict[str, int]:
            nonlocal i
            out = {n: i + j for j, n in enumerate(names)}
            i += len(names)
            return out

        object.__setattr__(self, "eta_index", take(self.classes))
        object.__setattr__(self, "eta_memory_index", i)
        i += 1
        object.__setattr__(self, "overhead_index", take(self.stacks))
        object.__setattr__(self, "step_index", take(self.stacks))
        object.__setattr__(self, "traffic_index", take(self.traffic_stacks))
        object.__setattr__(self, "gpu_index", take(self.gpus))
        object.__setattr__(self, "work_index", take(self.works))
        object.__setattr__(self, "conv_index", i if self.tensor_conv else None)
        i += 1 if self.tensor_conv else 0
        object.__setattr__(self, "eval_index", i if self.evaluation else None)
        i += 1 if self.evaluation else 0
        object.__setattr__(self, "size", i)

    @property
    def gpu_slice(self) -> slice:
        start = len(self.classes) + 1 + 2 * len(self.stacks) + len(self.traffic_stacks)
        return slice(start, start + len(self.gpus))

    @property
    def work_slice(self) -> slice:
        start = self.gpu_slice.stop
        return slice(start, start + len(self.works))

    def start_and_bounds(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        x0 = np.zeros(self.size)
        lo = np.zeros(self.size)
        hi = np.zeros(self.size)

        def put(index: Iterable[int], start: float, bounds: tuple[float, float]) -> None:
            for i in index:
                x0[i], lo[i], hi[i] = start, bounds[0], bounds[1]

        put(self.eta_index.values(), math.log(0.5), _ETA_BOUNDS)
        put([self.eta_memory_index], math.log(0.7), _ETA_BOUNDS)
        put(self.overhead_index.values(), math.log(1e-5), _OVERHEAD_BOUNDS)
        put(self.step_index.values(), math.log(1e-3), _STEP_BOUNDS)
        put(self.traffic_index.values(), 0.0, _TRAFFIC_BOUNDS)
        put(self.gpu_index.values(), 0.0, _FACTOR_BOUNDS)
        put(self.work_index.values(), 0.0, _FACTOR_BOUNDS)
        if self.conv_index is not None:
            put([self.conv_index], 0.0, _CONV_BOUNDS)
        if self.eval_index is not None:
            put([self.eval_index], math.log(0.05), _EVAL_BOUNDS)
        return x0, lo, hi


@dataclass(frozen=True, slots=True)
class _Arrays:
    """The frame as arrays and index vectors into the parameter vector."""

    flops_over_peak: FloatArray
    conv_over_peak: FloatArray  # tensor-core convolution FLOPs / peak (0 for fp32 rows)
    flops: FloatArray  # matmul FLOPs
    #: the FP32 units' peak FLOP/s on reduced-precision rows (the FP32 path; inf elsewhere)
    fp32_peak: FloatArray
    bytes_over_bw: FloatArray
    kernels: FloatArray
    eta: npt.NDArray[np.int64]
    overhead: npt.NDArray[np.int64]
    step: npt.NDArray[np.int64]
    traffic: npt.NDArray[np.int64]  # -1: the reference stack (traffic 1)
    gpu: npt.NDArray[np.int64]
    work: npt.NDArray[np.int64]
    eval_runs: FloatArray
    eval_work: FloatArray

    @classmethod
    def of(cls, frame: pd.DataFrame, layout: _Layout) -> _Arrays:
        def idx(values: pd.Series, index: Mapping[str, int], missing: int = -1) -> Any:
            return np.array([index.get(v, missing) for v in values], dtype=np.int64)

        peak = frame["peak_tflops"].to_numpy(dtype=np.float64) * 1e12
        tensor = frame["precision"].map(PRECISION_CLASS).to_numpy() != "fp32"
        return cls(
            flops_over_peak=frame["matmul_flops"].to_numpy(dtype=np.float64) / peak,
            conv_over_peak=np.where(tensor, _conv_flops(frame), 0.0) / peak,
            flops=frame["matmul_flops"].to_numpy(dtype=np.float64),
            fp32_peak=_fp32_flops_per_s(frame, 1.0),
            bytes_over_bw=frame["memory_bytes"].to_numpy(dtype=np.float64)
            / (frame["bandwidth_gbps"].to_numpy(dtype=np.float64) * 1e9),
            kernels=frame["n_kernels"].to_numpy(dtype=np.float64),
            eta=idx(frame["precision"].map(PRECISION_CLASS), layout.eta_index),
            overhead=idx(frame["stack"], layout.overhead_index),
            step=idx(frame["stack"], layout.step_index),
            traffic=idx(frame["stack"], layout.traffic_index),
            gpu=idx(frame["gpu"], layout.gpu_index),
            work=idx(frame["workload_key"], layout.work_index),
            eval_runs=_column(frame, "eval_runs", 0.0),
            eval_work=_column(frame, "eval_work", 0.0),
        )

    def _parts(self, theta: FloatArray, layout: _Layout) -> _Parts:
        eta_c = np.exp(theta[self.eta])
        eta_m = math.exp(theta[layout.eta_memory_index])
        traffic = np.where(self.traffic >= 0, np.exp(theta[np.maximum(self.traffic, 0)]), 1.0)
        fop = self.flops_over_peak
        conv = np.zeros_like(fop)  # d fop / d theta_conv
        if layout.conv_index is not None:
            conv = -self.conv_over_peak * math.exp(-theta[layout.conv_index])
            fop = fop + self.conv_over_peak * (math.exp(-theta[layout.conv_index]) - 1.0)
        fp32 = layout.eta_index.get("fp32")
        fp32_rate = math.inf if fp32 is None else self.fp32_peak * math.exp(theta[fp32])
        tensor_s = fop / eta_c
        matrix = matrix_seconds(tensor_s, self.flops, fp32_rate)
        return _Parts(
            scale=np.exp(theta[self.gpu] + theta[self.work]),
            eta_c=eta_c,
            tensor_s=tensor_s,
            conv=conv,
            matrix=matrix,
            on_fp32=matrix < tensor_s,
            memory=traffic * self.bytes_over_bw / eta_m,
            eval_share=1.0 + EVAL_FORWARD_SHARE * self.eval_work,
            launches=self.kernels * np.exp(theta[self.overhead]),
            step=np.exp(theta[self.step]),
            evaluations=(
                self.eval_runs * math.exp(theta[layout.eval_index])
                if layout.eval_index is not None
                else np.zeros_like(fop)
            ),
        )

    def predict(self, theta: FloatArray, layout: _Layout, extra: FloatArray) -> FloatArray:
        p = self._parts(theta, layout)
        return np.asarray(p.scale * p.core + extra + p.evaluations, dtype=np.float64)

    def jacobian(self, theta: FloatArray, layout: _Layout, extra: FloatArray) -> FloatArray:
        """d :meth:`predict` / d theta (rows x parameters), analytic: every term is an
        exponential of the parameters, and the FP32 path's ``min`` follows its active branch."""
        p = self._parts(theta, layout)
        rows = np.arange(len(p.scale))
        jac = np.zeros((len(p.scale), layout.size))

        def add(columns: npt.NDArray[np.int64], values: FloatArray) -> None:
            np.add.at(jac, (rows, columns), values)

        add(self.gpu, p.scale * p.core)
        add(self.work, p.scale * p.core)
        work = p.scale * p.eval_share
        add(self.eta, np.where(p.on_fp32, 0.0, -work * p.tensor_s))
        fp32 = layout.eta_index.get("fp32")
        if fp32 is not None:
            jac[:, fp32] += np.where(p.on_fp32, -work * p.matrix, 0.0)
        if layout.conv_index is not None:
            jac[:, layout.conv_index] += np.where(p.on_fp32, 0.0, work * p.conv / p.eta_c)
        jac[:, layout.eta_memory_index] -= work * p.memory
        add(np.maximum(self.traffic, 0), np.where(self.traffic >= 0, work * p.memory, 0.0))
        add(self.overhead, p.scale * p.launches)
        add(self.step, p.scale * p.step)
        if layout.eval_index is not None:
            jac[:, layout.eval_index] += p.evaluations
        return jac


@dataclass(frozen=True, slots=True)
class _Parts:
    """What :meth:`_Arrays.predict` sums, per row, kept for its Jacobian."""

    scale: FloatArray  # GPU x workload factor
    eta_c: FloatArray
    tensor_s: FloatArray  # matrix work on the precision's own units
    conv: FloatArray  # d (FLOPs / peak) / d theta_conv
    matrix: FloatArray  # the faster of that and the FP32 path
    on_fp32: npt.NDArray[np.bool_]
    memory: FloatArray
    eval_share: FloatArray
    launches: FloatArray
    step: FloatArray
    evaluations: FloatArray  # not scaled: fixed latency per evaluation

    @property
    def core(self) -> FloatArray:
        return np.asarray(
            (self.matrix + self.memory) * self.eval_share + self.launches + self.step,
            dtype=np.float64,
        )

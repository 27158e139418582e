"""Roofline step time of a profiled workload on any catalog GPU, calibrated by measurements.

Per operator class the time is bounded by the GPU's peak (``compute``: matmul / convolution
FLOPs at the training precision) or by its memory bandwidth (``memory_bandwidth``: bytes read
and written by element-wise, normalisation, reduction and copy kernels), plus a fixed launch
and dispatch cost per kernel (``overhead``)::

    step_time_s = matmul_flops / (compute_efficiency * peak_flops(precision))
                  (convolutions on tensor cores weighted by 1 / tensor_core_conv_ratio)
                + memory_bytes / (bandwidth_efficiency * memory_bandwidth)
                + n_kernels * kernel_overhead_s

Default efficiencies (:class:`RooflineEfficiency`):

* ``compute_efficiency_fp32`` 0.62 -- **derived from data**: the CM-DARE single-GPU fit
  (:class:`gpucast.predict.speed.SpeedModel` on ``cmdare/speed/single_gpu_speed.csv``, 14 CNNs,
  TensorFlow 1.10 / cuDNN 7, batch 128) has a marginal compute cost per FLOP that is 51% of
  the catalog's FP32 datasheet peak on K80 (2.2 of 4.37 TFLOP/s) and 76% on P100 (7.1 of
  9.3); 0.62 is their geometric mean. It counts every FLOP TFProf reports (convolutions
  dominate) and excludes the fixed and per-tensor costs, which the roofline models
  separately. ``benchmarks/speed_accuracy.py`` section 6 recomputes it, and a test checks the
  constant against the data. The two GPUs differ by 1.5x, so +-25% is its honest spread.
* ``compute_efficiency_tensor_core`` 0.40 -- a **prior**, not a fit: no published data here
  has tensor-core runs. Tensor-core peaks are harder to approach than FP32 ones (smaller
  tiles, layout conversions), so it is set below the FP32 figure.
* ``bandwidth_efficiency`` 0.70 -- a **prior**: the CM-DARE data has no byte counts, so it
  cannot be fitted there; element-wise kernels typically stream at 60-80% of datasheet
  bandwidth.
* ``kernel_overhead_s`` 10 us -- a **prior**: CUDA launch plus PyTorch eager dispatch per
  kernel. CM-DARE's per-tensor cost (~0.5-0.9 ms per parameter tensor per step) is not
  comparable: it is dominated by TensorFlow's per-variable exchange with the parameter server.

Calibration (:func:`calibrate`): a measured step time of the *same* workload on a GPU (this
GPU or another) gives one scale factor ``measured / predicted_on_that_device`` applied to
every term. With one measurement only one factor is identifiable; with two on the GPU itself,
at a smaller and a larger batch, the batches between them get the per-sample (compute +
memory) and fixed (overhead) parts each scaled to both (:func:`two_part_scale`, regime
``same_gpu/calibrated/bracketed``). The interval then narrows: +-10% on the same device,
+-25% across GPUs, against +-50% uncalibrated (the priors; a fitted set states the band
cross-validation earned in the prediction's regime). A measurement on a CPU (a
:class:`DeviceRoofline` of kind ``cpu``) calibrates no GPU prediction: a CPU's step time does
not tell a GPU's per-kernel, per-step or per-FLOP costs, and no held-out data validates such a
transfer; :func:`predict_step_time` then prices the GPU as without it, in the uncalibrated
regime the GPU and workload fall in, and says so.

A measurement on **another GPU** (regimes ``gpu_seen/calibrated`` and
``gpu_unseen/calibrated``; :func:`carried_fixed_ratio`): the scale applies to the target's
compute and memory terms as above, but the fixed part (kernel launches and the per-step
cost) is carried from the measured GPU -- its fixed seconds there (with that GPU's fitted
factor) times the datasheet ratio ``sqrt(peak_h / peak_g * bandwidth_h / bandwidth_g)`` --
instead of the target's own fixed seconds. The published servers show that per-step cost is
not a constant of the software: Zeus's CIFAR-100 at batch 8, overhead-bound, takes 37 ms a
step on its V100 server and 64 ms on the P100 and RTX 6000 ones. Held out one GPU at a time
and calibrated by one measurement on another GPU within 2x of the batch, carrying it moves
the error from 36.3% to 26.6% MAPE (a GPU with data, its workload held out: 29.8 -> 23.5%;
``benchmarks/steptime_transfer.py``, ``gpucast fit steptime``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.prediction import Estimate
from gpucast.domain.profile import WorkloadProfile
from gpucast.predict.intervals import (
    BATCH_DISTANCE,
    BRACKETED,
    CROSS_GPU,
    NEW_SOURCE,
    NOVEL,
    SAME_GPU,
    UNVALIDATED_PRECISION,
    IntervalTable,
    batch_regime,
    distance_regimes,
    percentile_words,
)

if TYPE_CHECKING:
    import numpy.typing as npt

_TERA = 1e12
#: The prior per-kernel launch and dispatch cost (module docstring: ``kernel_overhead_s``),
#: also the launch floor of the GNN steps priced outside the roofline
#: (:mod:`gpucast.predict.gnn`, :mod:`gpucast.predict.gat`).
KERNEL_OVERHEAD_S = 10e-6
_F = TypeVar("_F", float, "npt.NDArray[np.float64]")
_GIGA = 1e9


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise InvalidSpecError(name, "must be >= 0" if allow_zero else "must be > 0", got=value)


def conv_weighted_flops(flops: _F, conv_flops: _F, ratio: _F) -> _F:
    """Matmul FLOPs with the ``conv_flops`` among them counted ``1 / ratio`` times: what they
    cost at the matmul efficiency when convolutions reach ``ratio`` of it (scalars or arrays)."""
    return flops - conv_flops + conv_flops / ratio


def matrix_seconds(
    tensor_s: float | npt.NDArray[np.float64],
    flops: float | npt.NDArray[np.float64],
    fp32_flops_per_s: float | npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Time of a step's matrix work at a reduced precision: on the precision's own units
    (``tensor_s``, convolutions weighted as :func:`conv_weighted_flops` says), or on the GPU's
    FP32 units (``flops`` at ``fp32_flops_per_s``, the FP32 efficiency times its peak) where
    those are faster -- cuDNN and cuBLAS time their algorithms and keep the fastest, and
    TensorRT picks each layer's precision the same way, so mixed precision is never priced
    slower than FP32. It binds on GPUs whose half-precision peak is a small multiple of their
    FP32 one (A10G 2.2x, L4 and L40S 4x) for convolution-heavy steps; ``inf`` FP32 throughput
    (no such path, e.g. FP32 itself): ``tensor_s``. Scalars or arrays."""
    fp32_s = np.divide(flops, fp32_flops_per_s)
    chosen = np.where(np.isinf(fp32_flops_per_s), tensor_s, np.minimum(tensor_s, fp32_s))
    return np.asarray(chosen, dtype=np.float64)


def fp32_matrix_seconds(
    flops: float, conv_flops: float, fp32_flops_per_s: float, conv_flops_per_s: float
) -> float:
    """Time of fp32 matrix work (``flops``, ``conv_flops`` of them convolutions) on a GPU's
    FP32 units at ``fp32_flops_per_s``, except that convolutions run on TF32 tensor cores at
    ``conv_flops_per_s`` where that is faster -- cuDNN's default on NVIDIA GPUs with TF32
    (:meth:`~gpucast.domain.catalog.GpuSpec.fp32_convolution_tflops`; cuDNN times its
    algorithms and keeps the fastest)."""
    conv_s = min(conv_flops / fp32_flops_per_s, conv_flops / conv_flops_per_s)
    return (flops - conv_flops) / fp32_flops_per_s + conv_s


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineWorkload:
    """Per-step totals of one training step (forward + backward + optimizer)."""

    name: str
    batch_size: int
    matmul_flops: float  # FLOPs of matmul / convolution kernels
    memory_bytes: float  # bytes moved by memory-bound kernels
    n_kernels: int  # kernels launched per step
    #: the part of ``matmul_flops`` done by convolutions (0: price them all as matmuls)
    conv_flops: float = 0.0

    def __post_init__(self) -> None:
        _positive("matmul_flops", self.matmul_flops, allow_zero=True)
        _positive("conv_flops", self.conv_flops, allow_zero=True)
        if self.conv_flops > self.matmul_flops * (1.0 + 1e-9):
            raise InvalidSpecError("conv_flops", "must be <= matmul_flops", got=self.conv_flops)
        _positive("memory_bytes", self.memory_bytes, allow_zero=True)
        if self.batch_size < 1:
            raise InvalidSpecError("batch_size", "must be >= 1", got=self.batch_size)
        if self.n_kernels < 0:
            raise InvalidSpecError("n_kernels", "must be >= 0", got=self.n_kernels)

    @classmethod
    def from_profile(cls, profile: WorkloadProfile) -> RooflineWorkload:
        """Train-step totals of a profile: ``matmul_conv`` FLOPs are compute-bound; the bytes
        of every other class (element-wise, normalisation, reduction, embedding, other) are
        memory-bound; every operator call is one kernel."""
        by_class = profile.train_step_by_class()
        return cls(
            name=profile.workload,
            batch_size=profile.batch_size,
            matmul_flops=float(sum(c.flops for c in by_class if c.op_class == "matmul_conv")),
            memory_bytes=float(sum(c.bytes_moved for c in by_class if c.op_class != "matmul_conv")),
            n_kernels=int(sum(c.calls for c in by_class)),
            conv_flops=float(sum(c.conv_flops for c in by_class if c.op_class == "matmul_conv")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineEfficiency:
    """Achieved fractions of peak and the per-kernel cost, for one software stack.

    The defaults are the priors of the module docstring. A fitted set
    (:meth:`gpucast.predict.steptime.StepTimeModel.efficiency`) also carries per-GPU factors
    (what a GPU type sustains relative to its datasheet, for GPUs with data), the interval
    table its cross-validation earned, and where it came from.
    """

    compute_efficiency_fp32: float = 0.62
    compute_efficiency_tensor_core: float = 0.40
    #: TF32 and FP8 tensor-core efficiencies; ``None``: the fp16/bf16 figure
    compute_efficiency_tf32: float | None = None
    compute_efficiency_fp8: float | None = None
    #: what convolutions reach on tensor cores (tf32, fp16/bf16, fp8) relative to matrix
    #: multiplications; 1 for the priors, fitted in a fitted set. FP32 (SIMT) convolutions
    #: and matmuls share one efficiency.
    tensor_core_conv_ratio: float = 1.0
    bandwidth_efficiency: float = 0.70
    kernel_overhead_s: float = KERNEL_OVERHEAD_S
    #: fixed cost of one training step beyond its kernels (Python loop, data hand-off); the
    #: priors leave it out, a fitted set carries it
    step_overhead_s: float = 0.0
    gpu_factors: Mapping[str, float] = field(default_factory=dict)
    #: GPUs whose factor is a sibling board's (same silicon), and that board
    #: (:func:`gpucast.inputs.calibration.with_sibling_factors`)
    sibling_factors: Mapping[str, str] = field(default_factory=dict)
    #: workloads (built-in names) the fit has rows of: an uncalibrated prediction of one of
    #: them states the ``gpu_seen/measured_elsewhere`` band on a GPU with data, of any other
    #: on a GPU without data the ``gpu_unseen/novel_workload`` envelope
    measured_workloads: frozenset[str] = frozenset()
    intervals: IntervalTable = field(default_factory=IntervalTable)
    stack: str = "pytorch"
    source: str = "priors (module docstring of gpucast.predict.roofline)"
    #: seconds the host takes to issue one transformer layer's forward and backward of one
    #: micro-batch without CUDA graphs (the 3D-parallel model's default pacing; 0: none
    #: fitted) and where that figure comes from
    host_layer_s: float = 0.0
    host_source: str = ""
    #: a run's one-off warm-up after its clock starts -- the first steps' lazy set-up
    #: (communicators, autotuning, allocator growth) -- fitted with ``host_layer_s`` on whole
    #: LLM runs (0: none fitted); added once to a job's time
    warmup_s: float = 0.0
    #: where ``compute_efficiency_fp8`` comes from where it was fitted apart (on whole MLPerf
    #: fp8 LLM runs: :meth:`gpucast.predict.steptime.StepTimeModel.with_fp8`); "": the prior
    #: or borrowed from the 16-bit figure
    fp8_source: str = ""

    def __post_init__(self) -> None:
        for name in (
            "compute_efficiency_fp32",
            "compute_efficiency_tensor_core",
            "compute_efficiency_tf32",
            "compute_efficiency_fp8",
            "bandwidth_efficiency",
        ):
            value = getattr(self, name)
            if value is None:
                continue
            if not (math.isfinite(value) and 0 < value <= 1):
                raise InvalidSpecError(name, "must be in (0, 1]", got=value)
        if not (math.isfinite(self.tensor_core_conv_ratio) and self.tensor_core_conv_ratio > 0):
            raise InvalidSpecError(
                "tensor_core_conv_ratio", "must be > 0", got=self.tensor_core_conv_ratio
            )
        _positive("kernel_overhead_s", self.kernel_overhead_s, allow_zero=True)
        _positive("step_overhead_s", self.step_overhead_s, allow_zero=True)
        _positive("host_layer_s", self.host_layer_s, allow_zero=True)
        _positive("warmup_s", self.warmup_s, allow_zero=True)
        for gpu, factor in self.gpu_factors.items():
            _positive(f"gpu_factors[{gpu}]", factor)
        object.__setattr__(self, "gpu_factors", MappingProxyType(dict(self.gpu_factors)))
        object.__setattr__(self, "sibling_factors", MappingProxyType(dict(self.sibling_factors)))

    @property
    def fitted(self) -> bool:
        """Whether these figures come with validated intervals (a fitted set)."""
        return bool(self.intervals)

    def compute_efficiency(self, precision: str) -> float:
        if precision == "fp32":
            return self.compute_efficiency_fp32
        if precision == "tf32" and self.compute_efficiency_tf32 is not None:
            return self.compute_efficiency_tf32
        if precision == "fp8" and self.compute_efficiency_fp8 is not None:
            return self.compute_efficiency_fp8
        return self.compute_efficiency_tensor_core

    def compute_flops(self, workload: RooflineWorkload, precision: str) -> float:
        """``workload``'s matmul FLOPs weighted for the kernels that run them: tensor-core
        convolutions count ``1 / tensor_core_conv_ratio`` times (FP32 ones once)."""
        ratio = 1.0 if precision == "fp32" else self.tensor_core_conv_ratio
        return float(conv_weighted_flops(workload.matmul_flops, workload.conv_flops, ratio))

    def gpu_factor(self, name: str) -> float:
        """The fitted factor of GPU ``name`` (1: no data for it, specs only)."""
        return float(self.gpu_factors.get(name, 1.0))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceRoofline:
    """A device that is not a catalog GPU (e.g. the host CPU): peak FLOP/s and bandwidth."""

    name: str
    kind: str  # "cpu" | "gpu"
    peak_tflops: float
    memory_bandwidth_gbps: float
    #: the FP32 units' peak where ``peak_tflops`` is another precision's (a GPU at a reduced
    #: precision: the path :func:`matrix_seconds` falls back to); None: no other path
    fp32_peak_tflops: float | None = None
    #: fp32 work only: the TF32 peak its convolutions may run at
    #: (:meth:`~gpucast.domain.catalog.GpuSpec.fp32_convolution_tflops`); None: none
    conv_tf32_peak_tflops: float | None = None

    def __post_init__(self) -> None:
        _positive("peak_tflops", self.peak_tflops)
        _positive("memory_bandwidth_gbps", self.memory_bandwidth_gbps)
        if self.fp32_peak_tflops is not None:
            _positive("fp32_peak_tflops", self.fp32_peak_tflops)
        if self.conv_tf32_peak_tflops is not None:
            _positive("conv_tf32_peak_tflops", self.conv_tf32_peak_tflops)

    @classmethod
    def of_gpu(cls, gpu: GpuSpec, precision: str) -> DeviceRoofline:
        """``gpu``'s roofline at ``precision``; a precision it has no units for (fp16, bf16,
        fp8: :meth:`GpuSpec.runs`) is refused, never priced at the mode
        :meth:`GpuSpec.peak_tflops` falls back to (every verb refuses it first, naming a fix)."""
        if not gpu.runs(precision):
            raise InvalidSpecError(
                "precision",
                f"{precision} needs {precision} units, which the {gpu.name} has not",
                got=precision,
                fix="use a precision it has units for (gpucast catalog gpus lists them)",
            )
        return cls(
            name=gpu.name,
            kind="gpu",
            peak_tflops=gpu.matrix_tflops(precision),
            memory_bandwidth_gbps=gpu.memory_bandwidth_gbps,
            fp32_peak_tflops=None if precision == "fp32" else gpu.fp32_path_tflops(),
            conv_tf32_peak_tflops=gpu.fp32_convolution_tflops() if precision == "fp32" else None,
        )

    def fp32_flops_per_s(self, efficiency_fp32: float) -> float:
        """What the FP32 path sustains (inf: none, see :attr:`fp32_peak_tflops`)."""
        if self.fp32_peak_tflops is None:
            return math.inf
        return efficiency_fp32 * self.fp32_peak_tflops * _TERA

    def fp32_seconds(
        self, flops: float, conv_flops: float, efficiency_fp32: float, conv_tf32: float
    ) -> float | None:
        """fp32 matrix work on a GPU whose convolutions may run on TF32
        (:func:`fp32_matrix_seconds`; ``conv_tf32``: the efficiency convolutions reach of the
        TF32 peak); None on any other device (the caller prices it as it does)."""
        if self.kind != "gpu" or self.conv_tf32_peak_tflops is None:
            return None
        return fp32_matrix_seconds(
            flops,
            conv_flops,
            efficiency_fp32 * self.peak_tflops * _TERA,
            conv_tf32 * self.conv_tf32_peak_tflops * _TERA,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """One scale factor from a measurement: ``measured / roofline`` on ``device``."""

    scale: float
    device: str
    device_kind: str
    measured_step_time_s: float
    #: the batch the measurement ran at (None: not known; the interval then pools every
    #: distance from it, :data:`~gpucast.predict.intervals.SAME_GPU`)
    batch_size: int | None = None
    #: the uncalibrated roofline's seconds at ``batch_size`` on ``device``: the part that
    #: grows with the batch (compute + memory) and the fixed part (kernel and step
    #: overheads); None where not known
    work_s: float | None = None
    fixed_s: float | None = None
    #: other measurements of the workload on ``device`` at other batches: a prediction takes
    #: the one whose batch is nearest its own (:meth:`at`), as the error of a calibration
    #: grows with the distance between the batches, or, between two of them, both
    #: (:meth:`split_at`)
    others: tuple[Calibration, ...] = ()
    #: the measured device's matrix peak (TFLOP/s, at ``precision``) and memory bandwidth
    #: (GB/s), for carrying its fixed part to a GPU without step-time data
    #: (:func:`carried_fixed_ratio`); None where not known
    device_peak_tflops: float | None = None
    device_bandwidth_gbps: float | None = None
    precision: str | None = None

    def __post_init__(self) -> None:
        _positive("scale", self.scale)
        for other in self.others:
            if other.batch_size is None or other.others:
                raise InvalidSpecError(
                    "others", "must be measurements at a known batch, without others of their own"
                )

    def at(self, batch: int) -> Calibration:
        """This calibration as the measurement whose batch is nearest ``batch`` gives it
        (itself when it has no others or its own batch is nearest; ties: itself)."""
        if not self.others or self.batch_size is None or batch <= 0:
            return self
        every = (replace(self, others=()), *self.others)
        best = min(every, key=lambda c: abs(math.log2((c.batch_size or batch) / batch)))
        if best is every[0]:
            return self
        return replace(best, others=tuple(c for c in every if c is not best))

    def split_at(self, batch: int) -> TwoPartScale | None:
        """Between two measurements (the nearest below ``batch`` and the nearest above), the
        scales of the roofline's batch-dependent and fixed parts that make both exact
        (:func:`two_part_scale`); None outside them, at one of them, or where the two give no
        positive pair."""
        if self.batch_size is None or batch <= 0:
            return None
        every = [c for c in (replace(self, others=()), *self.others) if c.batch_size]
        below = [c for c in every if (c.batch_size or 0) < batch]
        above = [c for c in every if (c.batch_size or 0) > batch]
        if not below or not above:
            return None
        low = max(below, key=lambda c: c.batch_size or 0)
        high = min(above, key=lambda c: c.batch_size or 0)
        return two_part_scale(low, high)


@dataclass(frozen=True, slots=True, kw_only=True)
class TwoPartScale:
    """Scales of the roofline's batch-dependent part (``work``: compute + memory) and fixed
    part (``fixed``: overheads) fitted to two measurements at batches ``low`` < ``high``."""

    work: float
    fixed: float
    low: Calibration
    high: Calibration


def two_part_scale(low: Calibration, high: Calibration) -> TwoPartScale | None:
    """:func:`two_part_solution` of two measurements (``W``/``F``: their uncalibrated
    batch-dependent and fixed seconds, ``T`` measured) -- a step's fixed cost and its cost per
    sample measured apart, where one measurement scales both alike. None where a measurement
    lacks its parts or the pair is not positive."""
    if any(c.work_s is None or c.fixed_s is None for c in (low, high)):
        return None
    solved = two_part_solution(
        (float(low.work_s or 0), float(low.fixed_s or 0), low.measured_step_time_s),
        (float(high.work_s or 0), float(high.fixed_s or 0), high.measured_step_time_s),
    )
    if solved is None:
        return None
    return TwoPartScale(work=solved[0], fixed=solved[1], low=low, high=high)


def two_part_solution(
    first: tuple[float, float, float], second: tuple[float, float, float]
) -> tuple[float, float] | None:
    """The ``(work, fixed)`` scales with ``work * W_i + fixed * F_i = T_i`` for two
    ``(W_i, F_i, T_i)``; None where a part is not positive, the two are not independent or
    a scale comes out not positive (noise between two close batches)."""
    (w1, f1, t1), (w2, f2, t2) = first, second
    det = w1 * f2 - w2 * f1
    if min(w1, f1, w2, f2) <= 0 or det == 0:
        return None
    work = (t1 * f2 - t2 * f1) / det
    fixed = (w1 * t2 - w2 * t1) / det
    return (work, fixed) if work > 0 and fixed > 0 else None


def compute_term_s(
    workload: RooflineWorkload, device: DeviceRoofline, precision: str, eff: RooflineEfficiency
) -> float:
    """The uncalibrated ``compute`` term of ``workload`` on ``device`` (s): its matrix work
    alone, as :func:`predict_step_time` prices it. The other two terms are never negative, so
    an uncalibrated step time is at least this (a layout search's lower bound)."""
    if device.kind == "gpu":
        compute_eff, factor = eff.compute_efficiency(precision), eff.gpu_factor(device.name)
        flops = eff.compute_flops(workload, precision)
    else:
        compute_eff, factor = eff.compute_efficiency_fp32, 1.0
        flops = workload.matmul_flops
    compute: float = float(
        matrix_seconds(
            flops / (compute_eff * device.peak_tflops * _TERA),
            workload.matmul_flops,
            device.fp32_flops_per_s(eff.compute_efficiency_fp32),
        )
    )
    if precision == "fp32":
        tf32_conv = device.fp32_seconds(
            workload.matmul_flops,
            workload.conv_flops,
            eff.compute_efficiency_fp32,
            eff.compute_efficiency("tf32") * eff.tensor_core_conv_ratio,
        )
        compute = compute if tf32_conv is None else tf32_conv
    return factor * float(compute)


def memory_term_s(memory_bytes: _F, device: DeviceRoofline, eff: RooflineEfficiency) -> _F:
    """The uncalibrated ``memory_bandwidth`` term of ``memory_bytes`` (a float, or an array of
    them) on ``device`` (s), as :func:`predict_step_time` prices it."""
    factor = eff.gpu_factor(device.name) if device.kind == "gpu" else 1.0
    return factor * memory_bytes / (eff.bandwidth_efficiency * device.memory_bandwidth_gbps * _GIGA)


def overhead_term_s(n_kernels: _F, device: DeviceRoofline, eff: RooflineEfficiency) -> _F:
    """The uncalibrated ``overhead`` term of ``n_kernels`` kernels (or an array of counts) on
    ``device`` (s): their launches and the step's fixed overhead."""
    factor = eff.gpu_factor(device.name) if device.kind == "gpu" else 1.0
    return factor * (n_kernels * eff.kernel_overhead_s + eff.step_overhead_s)


def _terms(
    workload: RooflineWorkload, device: DeviceRoofline, precision: str, eff: RooflineEfficiency
) -> dict[str, float]:
    return {
        "compute": compute_term_s(workload, device, precision, eff),
        "memory_bandwidth": memory_term_s(workload.memory_bytes, device, eff),
        "overhead": overhead_term_s(float(workload.n_kernels), device, eff),
    }


def calibrate(
    workload: RooflineWorkload,
    measured_step_time_s: float,
    device: GpuSpec | DeviceRoofline,
    precision: str = "fp32",
    *,
    efficiency: RooflineEfficiency | None = None,
) -> Calibration:
    """Scale factor that makes the roofline match a measured step time on ``device``."""
    _positive("measured_step_time_s", measured_step_time_s)
    eff = efficiency or RooflineEfficiency()
    dev = DeviceRoofline.of_gpu(device, precision) if isinstance(device, GpuSpec) else device
    terms = _terms(workload, dev, precision, eff)
    predicted = sum(terms.values())
    if predicted <= 0:
        raise InvalidSpecError("workload", "has no FLOPs, bytes or kernels to calibrate")
    return Calibration(
        scale=measured_step_time_s / predicted,
        device=dev.name,
        device_kind=dev.kind,
        measured_step_time_s=measured_step_time_s,
        batch_size=workload.batch_size,
        work_s=terms["compute"] + terms["memory_bandwidth"],
        fixed_s=terms["overhead"],
        device_peak_tflops=dev.peak_tflops,
        device_bandwidth_gbps=dev.memory_bandwidth_gbps,
        precision=precision,
    )


#: The widest datasheet ratio ``sqrt(peak x bandwidth)`` between two GPUs of one source in the
#: step-time data (MLPerf Training v4.0: H200 over L40S at bf16, 3.90; CM-DARE's P100 over
#: K80 3.2, Zeus within 1.5), i.e. the span over which carrying the fixed part at the
#: datasheet ratio was validated; beyond it the ratio is held at the edge
#: (:func:`carried_fixed_ratio`; ``tests/predict/test_steptime_data.py`` recomputes it).
CARRIED_RATIO_SPAN = 3.9


def carried_fixed_ratio(
    gpu: GpuSpec, calibration: Calibration, precision: str, eff: RooflineEfficiency
) -> float | None:
    """How many times its own fixed part (kernel and step overheads, with its fitted factor)
    ``gpu`` takes when ``calibration`` was measured on another GPU: the measured GPU's fitted
    factor over ``gpu``'s, times ``sqrt(peak_h / peak_g * bandwidth_h / bandwidth_g)`` at the
    measurement's precision (module docstring), held within :data:`CARRIED_RATIO_SPAN` either
    way (the span the data validates: a 12x datasheet gap, H100 to T4, is not carried 12x).
    None where the measurement does not say its device's peak and bandwidth."""
    ratio = datasheet_ratio(gpu, calibration, precision)
    if ratio is None:
        return None
    return eff.gpu_factor(calibration.device) / eff.gpu_factor(gpu.name) * held_ratio(ratio)


def held_ratio(ratio: _F) -> _F:
    """A datasheet ratio (a float, or an array of them) held within
    :data:`CARRIED_RATIO_SPAN` either way."""
    return np.clip(ratio, 1.0 / CARRIED_RATIO_SPAN, CARRIED_RATIO_SPAN)  # type: ignore[no-any-return]


def datasheet_ratio(gpu: GpuSpec, calibration: Calibration, precision: str) -> float | None:
    """``sqrt(peak_h / peak_g * bandwidth_h / bandwidth_g)``: the measured GPU ``h`` over
    ``gpu`` at the measurement's precision (None: the measurement does not say its device's
    peak and bandwidth)."""
    if calibration.device_peak_tflops is None or calibration.device_bandwidth_gbps is None:
        return None
    peak_g = gpu.matrix_tflops(calibration.precision or precision)
    return math.sqrt(
        calibration.device_peak_tflops / peak_g
        * calibration.device_bandwidth_gbps / gpu.memory_bandwidth_gbps
    )  # fmt: skip


#: Precisions no profiled single step in the step-time data ran: fp8, whose efficiency is
#: fitted apart on whole MLPerf LLM runs through the 3D-parallel model (which validates it
#: there). A step priced at one (``predict train --precision fp8`` on a CNN or BERT) states
#: the widest band of any uncalibrated regime (:data:`UNVALIDATED_PRECISION`).
STEP_UNVALIDATED_PRECISIONS: frozenset[str] = frozenset({"fp8"})


def predict_step_time(
    workload: RooflineWorkload,
    gpu: GpuSpec,
    precision: str = "fp32",
    *,
    calibration: Calibration | None = None,
    efficiency: RooflineEfficiency | None = None,
    intervals: dict[str, tuple[float, float, str, str]] | None = None,
    precision_validated: bool | None = None,
) -> Estimate:
    """Roofline step time (s) of ``workload`` on ``gpu``; see the module docstring.

    ``intervals``: a memo the caller owns for many uncalibrated predictions with one
    ``efficiency`` (a layout search's stages): each regime's interval is worked out once.
    ``precision_validated``: whether held-out steps at ``precision`` validate this step (None:
    unless it is one of :data:`STEP_UNVALIDATED_PRECISIONS`); False states the widest band
    (:data:`UNVALIDATED_PRECISION`) and says what the precision's efficiency rests on."""
    eff = efficiency or RooflineEfficiency()
    if precision_validated is None:
        precision_validated = precision not in STEP_UNVALIDATED_PRECISIONS
    device = DeviceRoofline.of_gpu(gpu, precision)
    terms = _terms(workload, device, precision, eff)
    scale, regime, notes = 1.0, "", []
    not_a_gpu = None
    if calibration is not None and calibration.device_kind != "gpu":
        not_a_gpu, calibration = calibration, None  # calibrates no GPU (module docstring)
    if calibration is None:
        regime = uncalibrated_regime(
            gpu.name in eff.gpu_factors, workload.name in eff.measured_workloads
        )
        donor = eff.sibling_factors.get(gpu.name)
        factor = (
            f" and the factor fitted on {donor} (the same silicon)"
            if donor is not None
            else " and its fitted factor"
            if gpu.name in eff.gpu_factors
            else ""
        )
        notes.append(
            f"{'fitted' if eff.fitted else 'uncalibrated'} roofline from {gpu.name} specs"
            f"{factor} ({eff.source}; no measurement of this workload)"
        )
        if not_a_gpu is not None:
            notes.append(not_a_gpu_note(not_a_gpu, regime))
    else:
        split = calibration.split_at(workload.batch_size)
        calibration = calibration.at(workload.batch_size)
        scale = calibration.scale
        regime = calibrated_regime(gpu, calibration, eff)
        if split is not None and regime == SAME_GPU:
            regime = BRACKETED
            for name in ("compute", "memory_bandwidth"):
                terms[name] *= split.work / scale
            terms["overhead"] *= split.fixed / scale
            notes.append(
                f"calibrated by two measurements on {calibration.device}, at batches "
                f"{split.low.batch_size} and {split.high.batch_size} "
                f"({split.low.measured_step_time_s:.4g} and "
                f"{split.high.measured_step_time_s:.4g} s/step): the per-sample part "
                f"x{split.work:.3g}, the fixed part x{split.fixed:.3g}"
            )
        else:
            carried = (
                carried_fixed_ratio(gpu, calibration, precision, eff)
                if regime in CROSS_GPU
                else None
            )
            if carried is not None:
                terms["overhead"] *= carried
                raw = datasheet_ratio(gpu, calibration, precision) or 1.0
                held = (
                    f" (the datasheets differ {raw:.3g}x; held at the {CARRIED_RATIO_SPAN:g}x "
                    "the data validates)"
                    if held_ratio(raw) != raw
                    else ""
                )
                notes.append(
                    f"the fixed part (kernel launches and the per-step cost) carried from "
                    f"{calibration.device}: its fitted factor times the datasheet ratio, "
                    f"x{carried:.3g} of {gpu.name}'s own{held} (benchmarks/steptime_transfer.py)"
                )
            if regime:
                regime = batch_regime(regime, calibration.batch_size, workload.batch_size)
            at = "" if calibration.batch_size is None else f" at batch {calibration.batch_size}"
            notes.append(
                f"calibrated by a measurement on {calibration.device}{at} "
                f"({calibration.measured_step_time_s:.4g} s/step, scale x{scale:.3g})"
            )
    if calibration is None or calibration.device != gpu.name:
        notes += _precision_notes(workload, gpu, precision, eff)
    base = regime
    if not precision_validated:
        notes.append(unvalidated_precision_note(gpu, precision, eff, regime))
        regime = UNVALIDATED_PRECISION
    if gpu.clock_share < 1.0:
        notes.append(
            f"{gpu.name} peaks at its sustained {gpu.sustained_clock_mhz:g} MHz clock, "
            f"x{gpu.clock_share:.2f} of the datasheet's {gpu.boost_clock_mhz:g} MHz figures "
            "(catalog gpus.csv sustained_clock_mhz)"
        )
    if calibration is None and intervals is not None:
        if regime not in intervals:
            intervals[regime] = _interval(eff, regime, None)
        low, high, source, interval_note = intervals[regime]
    else:
        low, high, source, interval_note = _interval(eff, regime, calibration)
    if regime != base:
        source = _regime_source(base)
    notes.append(interval_note)
    breakdown = {k: v * scale for k, v in terms.items()}
    value = sum(breakdown.values())
    if value <= 0:
        raise InvalidSpecError("workload", "has no FLOPs, bytes or kernels to predict")
    bottleneck = max(breakdown, key=lambda k: breakdown[k])
    return Estimate(
        value=value,
        lower=min(value, value * low),
        upper=max(value, value * high),
        unit="s",
        bottleneck=bottleneck,
        source=source,
        breakdown=breakdown,
        notes=tuple(notes),
    )


def unvalidated_precision_note(
    gpu: GpuSpec, precision: str, eff: RooflineEfficiency, regime: str
) -> str:
    """What a step at a precision no held-out step ran rests on
    (:data:`STEP_UNVALIDATED_PRECISIONS`), and the band it states instead of ``regime``'s."""
    where = (
        f"fitted on {eff.fp8_source}"
        if precision == "fp8" and eff.fp8_source
        else "borrowed from the 16-bit tensor-core figure (no fp8 fit)"
    )
    return (
        f"{precision} matrix work at {gpu.name}'s {gpu.matrix_tflops(precision):.4g} TFLOP/s "
        f"{precision} peak x {eff.compute_efficiency(precision):.2f}, the {precision} "
        f"efficiency {where}; no step of a profiled workload (CNN, BERT, ...) at {precision} is "
        "in the step-time data, so no held-out error exists for it: the band is the widest of "
        f"any uncalibrated regime, not {regime or 'the priors'}'s"
    )


#: the catalog column of each precision's own units
_NATIVE = {"bf16": "bf16_tflops", "fp16": "fp16_tflops", "tf32": "tf32_tflops",
           "fp8": "fp8_tflops", "int8": "int8_tops"}  # fmt: skip


#: a tensor-core path slower than this times the FP32 units' is named (the FP32 path priced)
SLOWER_THAN_FP32 = 1.05


def half_over_fp32(
    workload: RooflineWorkload, gpu: GpuSpec, precision: str, eff: RooflineEfficiency
) -> float | None:
    """How many times the time of ``gpu``'s FP32 units the fitted tensor-core path would take
    for ``workload``'s matrix work at ``precision`` (None: fp32 itself, a precision the GPU has
    no units for, or no matrix work). Above 1, :func:`matrix_seconds` prices the FP32 path."""
    column = _NATIVE.get(precision)
    if column is None or getattr(gpu, column) is None or workload.matmul_flops <= 0:
        return None
    tensor = eff.compute_flops(workload, precision) / (
        eff.compute_efficiency(precision) * gpu.peak_tflops(precision)
    )
    return tensor * eff.compute_efficiency_fp32 * gpu.fp32_path_tflops() / workload.matmul_flops


def fp32_path_priced(
    workload: RooflineWorkload, gpu: GpuSpec, precision: str, eff: RooflineEfficiency
) -> float | None:
    """:func:`half_over_fp32` where it is worth saying: above :data:`SLOWER_THAN_FP32`, so the
    step's matrix work is priced on the FP32 units; None elsewhere."""
    ratio = half_over_fp32(workload, gpu, precision, eff)
    return ratio if ratio is not None and ratio > SLOWER_THAN_FP32 else None


def _precision_notes(
    workload: RooflineWorkload, gpu: GpuSpec, precision: str, eff: RooflineEfficiency
) -> list[str]:
    """What a user should know about pricing ``precision`` on ``gpu``: a precision the GPU has
    no units for (priced at the mode it falls back to), and matrix work priced on the FP32
    units because the fitted tensor-core path would be slower there (:func:`matrix_seconds`;
    the tensor-core efficiencies come from systems whose half-precision peak is 4-15x the FP32
    one)."""
    if precision == "fp32":
        return [
            *([_dedicated_note(gpu)] if gpu.fp32_dedicated_tflops is not None else []),
            *_tf32_convolution_note(workload, gpu, eff),
        ]
    column = _NATIVE.get(precision)
    if column is None:
        return []
    if getattr(gpu, column) is None:  # tf32 or int8 (fp16, bf16 and fp8 are refused)
        return [
            f"{gpu.name} has no {precision} units: priced at the "
            f"{gpu.peak_tflops(precision):.3g} TFLOP/s of the mode it falls back to (catalog "
            f"gpus.csv {column} is empty)"
        ]
    notes: list[str] = []
    ratio = fp32_path_priced(workload, gpu, precision, eff)
    if ratio is not None and gpu.fp32_dedicated_tflops is not None:
        notes.append(_dedicated_note(gpu))
    if ratio is not None:
        conv = workload.conv_flops > 0 and eff.tensor_core_conv_ratio != 1.0
        notes.append(
            f"this step's {precision} matrix work is priced on {gpu.name}'s FP32 units: the "
            f"fitted tensor-core path would take {ratio:.2f}x as long (tensor cores at "
            f"{eff.compute_efficiency(precision):.2f} of peak"
            + (f", convolutions {eff.tensor_core_conv_ratio:.2f} of that" if conv else "")
            + f", FP32 at {eff.compute_efficiency_fp32:.2f}; {gpu.name}'s {precision} peak is "
            f"{gpu.peak_tflops(precision) / gpu.fp32_path_tflops():.1f}x its FP32 units') and "
            "cuDNN/cuBLAS keep the faster kernel; a measurement (gpucast measure train "
            f"--precision {precision}) calibrates it"
        )
    return notes


def _tf32_convolution_note(
    workload: RooflineWorkload, gpu: GpuSpec, eff: RooflineEfficiency
) -> list[str]:
    """fp32 on a GPU whose convolutions may run on TF32 (:func:`fp32_matrix_seconds`): which
    path its convolutions are priced on, and how to price the matmuls there too."""
    peak = gpu.fp32_convolution_tflops()
    if peak is None or workload.conv_flops <= 0:
        return []
    tf32 = eff.compute_efficiency("tf32") * eff.tensor_core_conv_ratio * peak
    fp32 = eff.compute_efficiency_fp32 * gpu.fp32_path_tflops()
    where = (
        f"on its TF32 tensor cores ({tf32:.3g} TFLOP/s sustained vs {fp32:.3g} on the FP32 units)"
        if tf32 > fp32
        else f"on its FP32 units (the fitted TF32 path sustains {tf32:.3g} TFLOP/s, they "
        f"{fp32:.3g})"
    )
    return [
        f"fp32 as PyTorch runs it on {gpu.name}: convolutions {where}, as cuDNN does by default "
        "(torch.backends.cudnn.allow_tf32 = True), other matmuls on the FP32 units "
        "(torch.backends.cuda.matmul.allow_tf32 = False); --precision tf32 prices those on "
        "TF32 too"
    ]


def _dedicated_note(gpu: GpuSpec) -> str:
    return (
        f"{gpu.name}'s FP32 units priced at their dedicated {gpu.fp32_dedicated_tflops:g} "
        f"TFLOP/s, not the datasheet's {gpu.fp32_tflops:g} that counts lanes shared with INT32 "
        "or dual-issued (catalog gpus.csv fp32_dedicated_tflops; no published data here has "
        "FP32 runs on such a GPU)"
    )


#: Interval half-widths of the priors (no validated residuals): same device, another GPU,
#: nothing measured on a GPU.
_PRIOR_HALFWIDTH = {"same": 0.10, "gpu": 0.25, "none": 0.50}


def not_a_gpu_note(calibration: Calibration, regime: str) -> str:
    """Why a measurement on a device that is not a GPU (a CPU) left a GPU prediction as it
    was, and the regime whose band the prediction keeps."""
    at = "" if calibration.batch_size is None else f" at batch {calibration.batch_size}"
    return (
        f"the measurement on {calibration.device}{at} "
        f"({calibration.measured_step_time_s:.4g} s/step) calibrates no GPU: a "
        f"{calibration.device_kind.upper()}'s step time does not tell a GPU's per-kernel, "
        "per-step or per-FLOP costs, so the step is priced as without it, with the band of "
        f"regime {regime or 'uncalibrated'} (gpucast measure train on a GPU calibrates it)"
    )


def calibrated_regime(gpu: GpuSpec, calibration: Calibration, eff: RooflineEfficiency) -> str:
    """The interval regime ``calibration`` puts a prediction for ``gpu`` in, before its batch
    distance splits it: the same GPU, another GPU type the fit has or lacks ("" for a
    measurement on a CPU, which calibrates no GPU: :func:`predict_step_time` prices it
    uncalibrated)."""
    if calibration.device == gpu.name:
        return SAME_GPU
    if calibration.device_kind == "gpu":
        return "gpu_seen/calibrated" if gpu.name in eff.gpu_factors else "gpu_unseen/calibrated"
    return ""


def batch_bands(
    eff: RooflineEfficiency, regime: str, calibration: Calibration
) -> tuple[tuple[float, float], ...]:
    """(lower, upper) ratios of a prediction in calibrated ``regime``, one per
    :data:`~gpucast.predict.intervals.BATCH_DISTANCE` bucket (for callers that price many
    batches at once, as the planner does)."""
    return tuple(regime_band(eff, name, calibration) for name in distance_regimes(regime))


def regime_band(
    eff: RooflineEfficiency, regime: str, calibration: Calibration | None
) -> tuple[float, float]:
    """(lower, upper) ratios of a prediction in ``regime`` (what :func:`predict_step_time`
    states), for callers that price many batches at once."""
    return _interval(eff, regime, calibration)[:2]


def _distance_words(regime: str) -> str:
    """``regime``'s batch distance in words (empty for other regimes)."""
    if regime == BRACKETED:
        return " (a batch between two measured ones)"
    for i, (limit, suffix) in enumerate(BATCH_DISTANCE):
        if regime.endswith("/" + suffix):
            if math.isinf(limit):
                far = 2 ** int(BATCH_DISTANCE[i - 1][0])
                return f" (a batch more than {far}x from the measured one)"
            return f" (a batch within {2 ** int(limit)}x of the measured one)"
    return ""


def uncalibrated_regime(gpu_seen: bool, workload_seen: bool) -> str:
    """The interval regime of a prediction no measurement of its workload calibrates: by
    whether the fit has the GPU type and the workload (its built-in name)."""
    if gpu_seen:
        return "gpu_seen/measured_elsewhere" if workload_seen else "gpu_seen/uncalibrated"
    return "gpu_unseen/uncalibrated" if workload_seen else NOVEL


def _regime_source(regime: str) -> str:
    """:attr:`Estimate.source` of a prediction in ``regime``."""
    if regime.startswith(SAME_GPU):
        return "measured"
    return "fitted" if regime.startswith("gpu_seen") else "catalog"


def _interval(
    eff: RooflineEfficiency, regime: str, calibration: Calibration | None
) -> tuple[float, float, str, str]:
    """(lower ratio, upper ratio, Estimate.source, a note saying what the interval rests on)."""
    source = _regime_source(regime)
    if regime and eff.fitted:
        used = eff.intervals.resolved(regime)
        if used is not None:
            low, high = eff.intervals.ratios(regime)
            n = eff.intervals.n.get(used, 0)
            mape = eff.intervals.mape_pct.get(used, math.nan)
            borrowed = "" if used == regime else f", borrowed from {used}"
            if regime == NOVEL:
                borrowed = (
                    f", the wider of {used} and gpu_unseen/uncalibrated: no held-out fold is "
                    "both a new GPU type and a new workload"
                )
            elif regime == UNVALIDATED_PRECISION:
                borrowed = (
                    f", the envelope of {used} and every other uncalibrated regime: no "
                    "held-out step ran at this precision"
                )
            note = (
                f"80% interval from {n} cross-validated predictions in regime {regime}"
                f"{_distance_words(regime)}{borrowed} "
                f"(their {percentile_words(eff.intervals.level.get(used, 0.9))}; "
                f"their MAPE {mape:.1f}%)"
            )
            if eff.intervals.widened(regime):
                new = eff.intervals
                lo, hi = new.ratios(NEW_SOURCE)
                note += (
                    f", widened to what a code base no source ran needs: x{lo:.2f}-{hi:.2f} "
                    f"from {new.n[NEW_SOURCE]} predictions of sources left out "
                    f"(their MAPE {new.mape_pct[NEW_SOURCE]:.1f}%); a stored measurement of your "
                    "own workload on a GPU (gpucast measure train) narrows it"
                )
            return low, high, source, note
    if calibration is None or calibration.device_kind != "gpu":
        kind = "none"
    else:
        kind = "same" if regime.startswith(SAME_GPU) else "gpu"
    h = _PRIOR_HALFWIDTH[kind]
    return 1.0 / (1.0 + h), 1.0 + h, source, f"+-{h:.0%} interval: not validated (priors)"

"""Per-batch inference latency: fitted from a short measurement, or predicted from the catalog.

Three ways to a :class:`~gpucast.domain.serving.LatencyCurve` (seconds per batch of ``b``):

* **fit** (:class:`BatchLatencyModel`): ``latency = fixed_s + per_sample_s * b`` by
  non-negative least squares on a short latency-vs-batch measurement (e.g. batches 1, 2, 4, 8
  from ``gpucast measure infer-curve``), with the relative residuals as the interval.
* **predict** (:func:`predict_latency_curve`): the roofline of the inference forward pass of a
  profiled workload on a catalog GPU (or a MIG slice of it, or a CPU)::

      latency(b) = n_kernels * kernel_overhead_s                       # launch / dispatch
                 + matmul_flops(b) / (compute_efficiency * peak_flops)  # convolutions, GEMMs
                 + other_bytes(b) / (bandwidth_efficiency * bandwidth)  # element-wise, norms

  with the efficiencies of an inference engine (:class:`ServingEfficiency`: eager PyTorch or
  TensorRT-class, resolved from fitted sets by :mod:`gpucast.inputs.serving`; the bytes are
  scaled by the engine's traffic factor, and a per-batch cost joins the launch term) or of
  :class:`gpucast.predict.roofline.RooflineEfficiency` (documented priors), and FLOPs and
  bytes linear in ``b`` (taken from two profiles). The precision picks the peak
  (``GpuSpec.peak_tflops``: fp32, the fp16/bf16 tensor cores, fp8, int8) and the bytes per
  element (:meth:`InferenceWork.at_precision`: int8/fp8 move half the bytes of fp16).
  ``calibration_scale`` (from :func:`calibration_scale`: a measured curve on any device over
  the roofline's prediction for that device) multiplies every term; ``device_scale``
  multiplies only the compute and bandwidth terms (the same as dividing both roofline
  efficiencies by it), leaving the launch term and ``host_s`` alone.
* **MIG**: a slice runs the compute term ``1 / SM share`` and the bandwidth term ``1 /
  memory-slice share`` times slower (:func:`gpucast.predict.mig.mig_share`: an A100
  ``1g.5gb`` owns 14 of 108 SMs and 1 of 8 memory slices); the launch overhead is unchanged.

Co-location: batches that run at once on one device share its compute and bandwidth; the
launch overheads overlap. The predicted curve's ``host_s`` is the launch term, so the
simulator shares only the compute and bandwidth terms between co-located batches;
:func:`colocation_slowdown` turns measured co-located step times into the table the
simulator uses instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
from scipy.optimize import nnls

from gpucast.domain.catalog import GpuSpec, MigProfile, Offer
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.prediction import Estimate
from gpucast.domain.profile import WorkloadProfile
from gpucast.domain.serving import LatencyCurve
from gpucast.predict.base import Estimator, register
from gpucast.predict.mig import mig_share, placeable_profiles
from gpucast.predict.roofline import (
    DeviceRoofline,
    RooflineEfficiency,
    conv_weighted_flops,
    matrix_seconds,
)

_TERA = 1e12
_GIGA = 1e9

#: Assumed FP32 peak per vCPU (one hyperthread of an AVX2/AVX-512 server core at ~2.5 GHz
#: with two FMA units: 32 FLOP/cycle per core, halved per hyperthread) — a prior, not a fit.
CPU_GFLOPS_PER_VCPU = 40.0
#: Assumed memory bandwidth per vCPU of a cloud server (GB/s), capped at a socket's ~100 GB/s.
CPU_BANDWIDTH_GBPS_PER_VCPU = 4.0
CPU_BANDWIDTH_CAP_GBPS = 100.0
#: Bytes per element of each serving precision.
ELEMENT_BYTES: dict[str, float] = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0}


def profile_precision(precision: str) -> str:
    """The precision a model is profiled at for ``precision`` (the profiler runs fp32 or
    16-bit autocast; int8/fp8 are a 16-bit profile with half the bytes)."""
    if precision not in ELEMENT_BYTES:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(ELEMENT_BYTES)}", got=precision
        )
    return precision if precision in ("fp32", "bf16") else "fp16"


#: Round trip inside one cloud zone (s), added to the input's transfer time.
ZONE_RTT_S = 0.0002


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceWork:
    """FLOPs, bytes and kernels of one inference forward pass, linear in the batch size."""

    name: str
    matmul_flops_per_sample: float
    other_bytes_fixed: float
    other_bytes_per_sample: float
    n_kernels: int
    weights_bytes: float
    input_bytes_per_sample: float
    activation_bytes_per_sample: float
    #: share of ``matmul_flops_per_sample`` done by convolutions (priced apart on tensor
    #: cores where the efficiency says so; 0: all matmuls)
    conv_share: float = 0.0
    #: elements of the floating-point inputs a request carries, sent at the serving
    #: precision (:data:`ELEMENT_BYTES` each); the rest of ``input_bytes_per_sample`` (token
    #: ids, indices) keeps its size. None: unknown (a profile that did not record them), every
    #: input byte follows the precision
    input_float_elements_per_sample: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.conv_share) and 0.0 <= self.conv_share <= 1.0):
            raise InvalidSpecError("conv_share", "must be in [0, 1]", got=self.conv_share)
        for attr in (
            "matmul_flops_per_sample",
            "other_bytes_fixed",
            "other_bytes_per_sample",
            "weights_bytes",
            "input_bytes_per_sample",
            "activation_bytes_per_sample",
        ):
            value = getattr(self, attr)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(attr, "must be >= 0", got=value)
        elements = self.input_float_elements_per_sample
        smallest = min(ELEMENT_BYTES.values())
        if elements is not None and not (
            math.isfinite(elements)
            and 0 <= elements * smallest <= self.input_bytes_per_sample * (1 + 1e-9)
        ):
            raise InvalidSpecError(
                "input_float_elements_per_sample",
                "must be >= 0 and fit in input_bytes_per_sample at 1 byte each",
                got=elements,
            )

    @classmethod
    def from_profiles(cls, one: WorkloadProfile, two: WorkloadProfile) -> InferenceWork:
        """From profiles of the same workload at two batch sizes (e.g. 1 and 2)."""
        if one.workload != two.workload or one.batch_size == two.batch_size:
            raise InvalidSpecError("profiles", "need one workload at two different batch sizes")

        def totals(p: WorkloadProfile) -> tuple[float, float, int]:
            phase = p.phase("inference")
            flops = sum(c.flops for c in phase.by_class if c.op_class == "matmul_conv")
            other = sum(c.bytes_moved for c in phase.by_class if c.op_class != "matmul_conv")
            calls = sum(c.calls for c in phase.by_class)
            return float(flops), float(other), int(calls)

        mm = two.phase("inference").cost("matmul_conv")

        f1, b1, k1 = totals(one)
        f2, b2, _k2 = totals(two)
        db = two.batch_size - one.batch_size
        bytes_per = max((b2 - b1) / db, 0.0)
        act1 = one.memory.inference_working_bytes
        act2 = two.memory.inference_working_bytes
        floats, others = one.memory.model_input_float_elements, one.memory.model_input_other_bytes
        if floats is None or others is None or one.precision not in ELEMENT_BYTES:
            input_bytes, elements = one.memory.inputs_bytes / one.batch_size, None
        else:  # the model's inputs, floating-point ones at the profile's precision
            elements = floats / one.batch_size
            input_bytes = elements * ELEMENT_BYTES[one.precision] + others / one.batch_size
        return cls(
            name=one.workload,
            matmul_flops_per_sample=max((f2 - f1) / db, f1 / one.batch_size if f2 == f1 else 0.0),
            other_bytes_fixed=max(b1 - bytes_per * one.batch_size, 0.0),
            other_bytes_per_sample=bytes_per,
            n_kernels=k1,
            weights_bytes=float(one.memory.weights_bytes),
            input_bytes_per_sample=input_bytes,
            activation_bytes_per_sample=max((act2 - act1) / db, act1 / one.batch_size),
            conv_share=min(1.0, mm.conv_flops / mm.flops) if mm.flops else 0.0,
            input_float_elements_per_sample=elements,
        )

    def at_precision(self, precision: str, profiled_at: str) -> InferenceWork:
        """This pass (profiled at ``profiled_at``) run at ``precision``: the same FLOPs, every
        byte count scaled by the element sizes (:data:`ELEMENT_BYTES`) -- of the request's
        input, its floating-point elements only (token ids keep their size)."""
        for p in (precision, profiled_at):
            if p not in ELEMENT_BYTES:
                raise InvalidSpecError(
                    "precision", f"must be one of {', '.join(ELEMENT_BYTES)}", got=p
                )
        k = ELEMENT_BYTES[precision] / ELEMENT_BYTES[profiled_at]
        if k == 1.0:
            return self
        elements = self.input_float_elements_per_sample
        if elements is None:
            input_bytes = self.input_bytes_per_sample * k
        else:
            fixed = self.input_bytes_per_sample - elements * ELEMENT_BYTES[profiled_at]
            input_bytes = fixed + elements * ELEMENT_BYTES[precision]
        return dataclasses.replace(
            self,
            other_bytes_fixed=self.other_bytes_fixed * k,
            other_bytes_per_sample=self.other_bytes_per_sample * k,
            weights_bytes=self.weights_bytes * k,
            input_bytes_per_sample=input_bytes,
            activation_bytes_per_sample=self.activation_bytes_per_sample * k,
        )

    def memory_gib(self, max_batch: int) -> float:
        """GiB one instance needs: weights plus inputs and working set of its largest batch,
        with 20% for framework workspace."""
        need = self.weights_bytes + max_batch * (
            self.input_bytes_per_sample + self.activation_bytes_per_sample
        )
        return 1.2 * need / 2**30


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingEfficiency:
    """What one inference engine achieves on a forward pass (:mod:`gpucast.inputs.serving`
    resolves it from the fitted sets ``catalog/data/serving_engines.csv`` names).

    ``compute_efficiency_tensor`` applies to every tensor-core precision (fp16, bf16, fp8,
    int8) as a fraction of that precision's peak; ``bandwidth_efficiency`` is the fraction of
    datasheet bandwidth the memory-bound kernels stream at and ``traffic_factor`` the bytes
    they move relative to the eager, unfused pass the profiler counts; ``kernel_overhead_s``
    is paid per profiled kernel and ``batch_overhead_s`` once per batch (host side).
    """

    engine: str
    compute_efficiency_fp32: float
    compute_efficiency_tensor: float
    bandwidth_efficiency: float
    traffic_factor: float = 1.0
    kernel_overhead_s: float = 10e-6
    batch_overhead_s: float = 0.0
    source: str = ""
    #: what convolutions reach on tensor cores relative to ``compute_efficiency_tensor``
    #: (the step-time model's fitted ratio where that efficiency comes from it; 1 otherwise)
    tensor_core_conv_ratio: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tensor_core_conv_ratio) and self.tensor_core_conv_ratio > 0):
            raise InvalidSpecError(
                "tensor_core_conv_ratio", "must be > 0", got=self.tensor_core_conv_ratio
            )
        for name in ("compute_efficiency_fp32", "compute_efficiency_tensor",
                     "bandwidth_efficiency"):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= 1):
                raise InvalidSpecError(name, "must be in (0, 1]", got=value)
        if not (math.isfinite(self.traffic_factor) and self.traffic_factor > 0):
            raise InvalidSpecError("traffic_factor", "must be > 0", got=self.traffic_factor)
        for name in ("kernel_overhead_s", "batch_overhead_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(name, "must be >= 0", got=value)

    def compute_efficiency(self, precision: str) -> float:
        return (
            self.compute_efficiency_fp32
            if precision == "fp32"
            else (self.compute_efficiency_tensor)
        )

    @classmethod
    def from_roofline(cls, eff: RooflineEfficiency) -> ServingEfficiency:
        """The roofline priors (or a fitted set) as a serving efficiency, no fusion."""
        return cls(
            engine=eff.stack,
            compute_efficiency_fp32=eff.compute_efficiency_fp32,
            compute_efficiency_tensor=eff.compute_efficiency_tensor_core,
            bandwidth_efficiency=eff.bandwidth_efficiency,
            kernel_overhead_s=eff.kernel_overhead_s,
            source=eff.source,
            tensor_core_conv_ratio=eff.tensor_core_conv_ratio,
        )


def cpu_device(offer: Offer) -> DeviceRoofline:
    """A CPU server as a roofline device (assumed per-vCPU peak and bandwidth, see above)."""
    return DeviceRoofline(
        name=f"{offer.instance_type} ({offer.vcpus} vCPU)",
        kind="cpu",
        peak_tflops=offer.vcpus * CPU_GFLOPS_PER_VCPU / 1000.0,
        memory_bandwidth_gbps=min(
            offer.vcpus * CPU_BANDWIDTH_GBPS_PER_VCPU, CPU_BANDWIDTH_CAP_GBPS
        ),
    )


def mig_profile(
    gpu: GpuSpec,
    name: str,
    mig_gpus: Sequence[str] = (),
    *,
    field: str = "mig profile",
    example: str | None = None,
) -> MigProfile:
    """The MIG profile ``name`` of ``gpu``; one clear error when it has no such profile, or no
    MIG profile with published placements (refused as ``catalog mig`` refuses it, by
    :func:`gpucast.predict.mig.placeable_profiles`, whose fix names ``mig_gpus`` and
    ``example`` under the flag ``field``)."""
    usable = placeable_profiles(gpu, mig_gpus, field=field, example=example)
    for p in usable:
        if p.name == name:
            return p
    raise InvalidSpecError(
        "mig profile",
        f"{name!r} does not exist on {gpu.name} (it has {', '.join(p.name for p in usable)})",
        fix=f"pick one of its profiles (`gpucast catalog mig --gpu {gpu.name}` lists them)",
    )


def _terms(
    work: InferenceWork,
    batch_size: int,
    device: DeviceRoofline,
    precision: str,
    eff: ServingEfficiency,
    compute_slowdown: float,
    bandwidth_slowdown: float,
) -> dict[str, float]:
    compute_eff = (
        eff.compute_efficiency(precision) if device.kind == "gpu" else eff.compute_efficiency_fp32
    )
    tensor = device.kind == "gpu" and precision != "fp32"
    ratio = eff.tensor_core_conv_ratio if tensor else 1.0
    flops = work.matmul_flops_per_sample * batch_size
    weighted = conv_weighted_flops(1.0, work.conv_share, ratio) * flops
    compute: float = float(
        matrix_seconds(
            weighted / (compute_eff * device.peak_tflops * _TERA),
            flops,
            device.fp32_flops_per_s(eff.compute_efficiency_fp32),
        )
    )
    if precision == "fp32":
        tf32_conv = device.fp32_seconds(
            flops,
            work.conv_share * flops,
            eff.compute_efficiency_fp32,
            eff.compute_efficiency("tf32") * eff.tensor_core_conv_ratio,
        )
        compute = compute if tf32_conv is None else tf32_conv
    return {
        "overhead": work.n_kernels * eff.kernel_overhead_s + eff.batch_overhead_s,
        "compute": float(compute) * compute_slowdown,
        "memory_bandwidth": (work.other_bytes_fixed + work.other_bytes_per_sample * batch_size)
        * eff.traffic_factor
        * bandwidth_slowdown
        / (eff.bandwidth_efficiency * device.memory_bandwidth_gbps * _GIGA),
    }


def predict_latency_curve(
    work: InferenceWork,
    device: GpuSpec | DeviceRoofline,
    precision: str = "fp32",
    *,
    max_batch: int = 64,
    mig: MigProfile | None = None,
    efficiency: RooflineEfficiency | ServingEfficiency | None = None,
    calibration_scale: float = 1.0,
    device_scale: float = 1.0,
    source: str | None = None,
) -> LatencyCurve:
    """Roofline latency of batches 1..``max_batch`` on ``device`` (see the module docstring)."""
    if max_batch < 1:
        raise InvalidSpecError("max_batch", "must be >= 1", got=max_batch)
    if not (math.isfinite(calibration_scale) and calibration_scale > 0):
        raise InvalidSpecError("calibration_scale", "must be > 0", got=calibration_scale)
    if not (math.isfinite(device_scale) and device_scale > 0):
        raise InvalidSpecError("device_scale", "must be > 0", got=device_scale)
    eff = (
        efficiency
        if isinstance(efficiency, ServingEfficiency)
        else ServingEfficiency.from_roofline(efficiency or RooflineEfficiency())
    )
    dev = DeviceRoofline.of_gpu(device, precision) if isinstance(device, GpuSpec) else device
    c_slow = b_slow = 1.0
    label = dev.name
    mode = device.priced_as(precision) if isinstance(device, GpuSpec) else precision
    priced = (
        ""
        if mode == precision or precision in ("fp32", "tf32")
        else f"; {precision} priced at the {dev.name}'s {mode} peak (the catalog has no "
        f"{precision} figure for it)"
    )
    if mig is not None:
        if not isinstance(device, GpuSpec):
            raise InvalidSpecError("mig", "needs a GPU, not a CPU")
        share = mig_share(device, mig)
        c_slow = 1.0 / share.compute_share
        b_slow = 1.0 / share.bandwidth_share
        label = f"{device.name}/{mig.name}"
    sizes = tuple(
        sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, max_batch} & set(range(1, max_batch + 1)))
    )
    lat = []
    for b in sizes:
        t = _terms(work, b, dev, precision, eff, c_slow, b_slow)
        on_device = t["compute"] + t["memory_bandwidth"]
        lat.append((t["overhead"] + device_scale * on_device) * calibration_scale)
    host = _terms(work, 1, dev, precision, eff, c_slow, b_slow)["overhead"] * calibration_scale
    return LatencyCurve(
        batch_sizes=sizes,
        latency_s=tuple(lat),
        host_s=host,
        source=source
        or (
            f"roofline {work.name} on {label} ({precision}{priced})"
            + ("" if calibration_scale == 1.0 else f", calibrated x{calibration_scale:.3g}")
            + ("" if device_scale == 1.0 else f", device time x{device_scale:.3g}")
        ),
    )


def curve_estimate(curve: LatencyCurve, batch_size: int, *, rel_halfwidth: float) -> Estimate:
    """One point of a curve as an :class:`Estimate` with a relative interval."""
    value = curve.latency(batch_size)
    return Estimate(
        value=value,
        lower=value / (1.0 + rel_halfwidth),
        upper=value * (1.0 + rel_halfwidth),
        unit="s",
        bottleneck="batch_latency",
        source="measured" if curve.source.startswith("measured") else "catalog",
        notes=(curve.source,),
    )


def calibration_scale(measured: LatencyCurve, predicted: LatencyCurve) -> float:
    """Median of measured / predicted over the measured batch sizes (one scale factor)."""
    ratios = [
        t / predicted.latency(b)
        for b, t in zip(measured.batch_sizes, measured.latency_s, strict=True)
    ]
    return float(np.median(ratios))


def request_overhead_s(
    input_bytes: float, network_gbps: float, *, rtt_s: float = ZONE_RTT_S
) -> float:
    """Time to ship one request's input over a ``network_gbps`` (Gbit/s) link, plus an RTT."""
    if not (math.isfinite(network_gbps) and network_gbps > 0):
        raise InvalidSpecError("network_gbps", "must be > 0", got=network_gbps)
    return input_bytes * 8.0 / (network_gbps * 1e9) + rtt_s


def colocation_slowdown(alone_s: float, together_s: Sequence[float]) -> tuple[float, ...]:
    """Slowdown table from measured step times: ``together_s[n-2]`` is the step time with
    ``n`` copies running at once (n = 2, 3, ...); entry ``n-1`` of the result is its ratio to
    ``alone_s``, at least 1 and non-decreasing."""
    if not (math.isfinite(alone_s) and alone_s > 0):
        raise InvalidSpecError("alone_s", "must be > 0", got=alone_s)
    out = [1.0]
    for t in together_s:
        if not (math.isfinite(t) and t > 0):
            raise InvalidSpecError("together_s", "must be > 0", got=t)
        out.append(max(out[-1], t / alone_s, 1.0))
    return tuple(out)


@register
class BatchLatencyModel(Estimator):
    """``latency = fixed_s + per_sample_s * batch`` fitted by NNLS on relative errors."""

    kind = "batch-latency"
    schema_version = 1

    def __init__(self, *, host_fraction: float = 0.0) -> None:
        self.host_fraction = host_fraction
        self._coef: tuple[float, float] | None = None
        self._rel_halfwidth = 0.0
        self._source = ""
        self._max_batch = 1

    @property
    def is_fitted(self) -> bool:
        return self._coef is not None

    def fit(
        self, batch_sizes: Sequence[int], latency_s: Sequence[float], *, source: str = "measured"
    ) -> Self:
        b = np.asarray(batch_sizes, dtype=np.float64)
        t = np.asarray(latency_s, dtype=np.float64)
        if b.size == 0 or b.size != t.size:
            raise InvalidSpecError("latency table", "needs one latency per batch size")
        if np.any(b < 1) or np.any(~np.isfinite(t)) or np.any(t <= 0):
            raise InvalidSpecError("latency table", "needs batch sizes >= 1 and latencies > 0")
        if np.unique(b).size == 1:
            coef = np.array([0.0, float(np.mean(t / b))])
        else:
            w = 1.0 / t
            coef, _ = nnls(np.column_stack([np.ones_like(b), b]) * w[:, None], t * w)
        pred = coef[0] + coef[1] * b
        rel = np.abs(t / pred - 1.0)
        self._coef = (float(coef[0]), float(coef[1]))
        self._rel_halfwidth = float(max(np.max(rel), 0.05))
        self._source = source
        self._max_batch = int(b.max())
        return self

    @property
    def coefficients(self) -> tuple[float, float]:
        """(fixed_s, per_sample_s)."""
        self._require_fitted()
        assert self._coef is not None
        return self._coef

    def predict(self, batch_size: int) -> Estimate:
        fixed, per = self.coefficients
        value = fixed + per * batch_size
        h = self._rel_halfwidth * (1.0 if batch_size <= self._max_batch else 2.0)
        return Estimate(
            value=value,
            lower=value / (1 + h),
            upper=value * (1 + h),
            unit="s",
            bottleneck="batch_latency",
            source="measured",
            breakdown={"fixed": fixed, "per_sample": per * batch_size},
            notes=(f"fitted a + b*batch on {self._source}",),
        )

    def curve(self, max_batch: int = 128) -> LatencyCurve:
        fixed, per = self.coefficients
        return LatencyCurve.affine(
            fixed,
            per,
            max_batch=max_batch,
            host_s=self.host_fraction * fixed,
            source=f"measured: {self._source} (a + b*batch fit)",
        )

    def _state(self) -> dict[str, Any]:
        fixed, per = self.coefficients
        return {
            "fixed_s": fixed,
            "per_sample_s": per,
            "rel_halfwidth": self._rel_halfwidth,
            "host_fraction": self.host_fraction,
            "source": self._source,
            "max_batch": self._max_batch,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(host_fraction=float(state["host_fraction"]))
            model._coef = (float(state["fixed_s"]), float(state["per_sample_s"]))
            model._rel_halfwidth = float(state["rel_halfwidth"])
            model._source = str(state["source"])
            model._max_batch = int(state["max_batch"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"batch-latency model state is malformed ({type(exc).__name__}: {exc})",
                fix="refit it with `gpucast measure infer-curve`",
            ) from exc
        return model

"""What the planner needs besides the request: workload facts, per-GPU speed, model constants.

* :class:`WorkloadFacts` -- the profiler's static features split into a per-sample part and a
  fixed part, so any per-worker batch is priced without profiling again (forward and backward
  FLOPs, bytes and activations scale with the batch; the optimizer step and the weights do
  not).
* :class:`GpuTable` -- for each GPU type, the roofline step time's terms as ``a + c * batch``.
  The roofline (:func:`gpucast.predict.roofline.predict_step_time`) is linear in the batch, so
  two calls per GPU (batch 1 and 2) give the exact coefficients; its interval ratios and any
  calibration come along.
* :class:`PerfParams` -- constants of the communication and PS models, with their sources.
* :class:`RiskInputs` -- what the spot Monte Carlo needs: lifetimes, start-up, restart.

Pure: numbers in, numbers out (the CLI reads files and the store).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S, GpuSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.profile import WorkloadProfile
from gpucast.domain.units import MIB
from gpucast.predict import comm
from gpucast.predict.cluster import ClusterModel
from gpucast.predict.collective import RDMA, TCP_DEFAULT, CollectiveConstants
from gpucast.predict.intervals import BATCH_DISTANCE, BRACKETED, SAME_GPU, batch_distance_index
from gpucast.predict.memory import MemoryNeeds, usable_bytes
from gpucast.predict.offload import CpuAdamModel
from gpucast.predict.revocation import LifetimeDistribution
from gpucast.predict.roofline import (
    Calibration,
    RooflineEfficiency,
    RooflineWorkload,
    batch_bands,
    calibrated_regime,
    predict_step_time,
    regime_band,
    two_part_scale,
)
from gpucast.predict.variability import SpeedVariability, rented_nodes
from gpucast.simulate.transient import Delay

if TYPE_CHECKING:
    from gpucast.plan.energy import PowerSetting

FloatArray = npt.NDArray[np.float64]

#: Compute slow-down of activation checkpointing: one extra forward pass (see predict.memory).
CHECKPOINTING_SLOWDOWN = 1.33


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadFacts:
    """Per-sample and fixed costs of one training step of a workload."""

    name: str
    precision: str
    profile_batch: int
    matmul_flops_per_sample: float
    matmul_flops_fixed: float
    memory_bytes_per_sample: float
    memory_bytes_fixed: float
    n_kernels: int
    gradient_bytes: float
    n_tensors: int
    max_tensor_bytes: float
    weights_bytes: float
    optimizer_bytes: float
    activation_bytes_per_sample: float
    n_layers: int
    #: share of the per-sample matmul FLOPs done by convolutions (the roofline prices
    #: tensor-core convolutions apart)
    conv_share: float = 0.0

    def __post_init__(self) -> None:
        for name in ("gradient_bytes", "weights_bytes"):
            if not getattr(self, name) > 0:
                raise InvalidSpecError(f"workload {self.name}.{name}", "must be > 0")
        if self.n_tensors < 1:
            raise InvalidSpecError(f"workload {self.name}.n_tensors", "must be >= 1")

    @classmethod
    def from_profile(cls, profile: WorkloadProfile) -> WorkloadFacts:
        """Split a profile: forward + backward scale with the batch, the optimizer is fixed."""
        b = float(profile.batch_size)
        per_sample_flops = 0.0
        per_sample_conv = 0.0
        per_sample_bytes = 0.0
        fixed_flops = 0.0
        fixed_bytes = 0.0
        for phase in profile.phases:
            if phase.phase == "inference":
                continue
            mm = float(sum(c.flops for c in phase.by_class if c.op_class == "matmul_conv"))
            mem = float(sum(c.bytes_moved for c in phase.by_class if c.op_class != "matmul_conv"))
            if phase.phase == "optimizer":
                fixed_flops += mm
                fixed_bytes += mem
            else:
                per_sample_flops += mm / b
                per_sample_conv += float(phase.cost("matmul_conv").conv_flops) / b
                per_sample_bytes += mem / b
        whole = RooflineWorkload.from_profile(profile)
        memory = profile.memory
        return cls(
            name=profile.workload,
            precision=profile.precision,
            profile_batch=profile.batch_size,
            matmul_flops_per_sample=per_sample_flops,
            matmul_flops_fixed=fixed_flops,
            memory_bytes_per_sample=per_sample_bytes,
            memory_bytes_fixed=fixed_bytes,
            n_kernels=whole.n_kernels,
            gradient_bytes=float(profile.gradient_bytes),
            n_tensors=max(1, profile.parameter_tensors),
            max_tensor_bytes=float(profile.parameter_tensor_max_mib * MIB),
            weights_bytes=float(memory.weights_bytes),
            optimizer_bytes=float(memory.optimizer_state_bytes),
            activation_bytes_per_sample=float(memory.activations_bytes + memory.inputs_bytes) / b,
            n_layers=max(1, profile.parameter_tensors // 2),
            conv_share=min(1.0, per_sample_conv / per_sample_flops) if per_sample_flops else 0.0,
        )

    def roofline_workload(self, batch: int) -> RooflineWorkload:
        return RooflineWorkload(
            name=self.name,
            batch_size=batch,
            matmul_flops=self.matmul_flops_fixed + self.matmul_flops_per_sample * batch,
            memory_bytes=self.memory_bytes_fixed + self.memory_bytes_per_sample * batch,
            n_kernels=self.n_kernels,
            conv_flops=self.conv_share * self.matmul_flops_per_sample * batch,
        )

    @property
    def checkpoint_fraction(self) -> float:
        """Share of activations kept with sqrt(L) checkpointing (as in predict.memory)."""
        return min(1.0, 2.0 / math.sqrt(self.n_layers))

    def memory_needs(self, batch: int, *, optimizer_on_gpu: bool = True) -> MemoryNeeds:
        """What one GPU training ``batch`` samples with the whole model holds
        (:func:`gpucast.predict.memory.fit_memory`'s input); ``optimizer_on_gpu`` False: a
        parameter-server worker's, whose optimizer state is the PS's (as :mod:`evaluate`
        counts it)."""
        return MemoryNeeds(
            weights_bytes=self.weights_bytes,
            gradients_bytes=self.gradient_bytes,
            optimizer_bytes=self.optimizer_bytes if optimizer_on_gpu else 0.0,
            activations_bytes=self.activation_bytes_per_sample * batch,
            n_layers=self.n_layers,
            largest_layer_bytes=self.max_tensor_bytes,
        )


def intra_node_gbps(gpu: GpuSpec) -> float:
    """Bandwidth (Gbit/s) between GPUs of one node: NVLink per GPU, else PCIe x16."""
    if gpu.interconnect_gbps is not None:
        return float(gpu.interconnect_gbps) * 8.0  # GB/s per GPU -> Gbit/s
    return PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPrecision:
    """What one GPU type trains in: the roofline's compute ``precision`` (``bf16``, ``fp16``,
    ``tf32``: fp32 with TF32 matmuls, ``fp32``), the workload's ``facts`` profiled at it (a
    tf32 GPU uses the fp32 profile) and the ``calibration`` a stored measurement at that
    precision gives (None: none)."""

    precision: str
    facts: WorkloadFacts
    calibration: Calibration | None = None


#: Roofline terms, in the order of the GpuTable's coefficient columns.
TERMS: tuple[str, ...] = ("compute", "memory_bandwidth", "overhead")


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadSetting:
    """How :mod:`gpucast.plan.evaluate` prices the optimizer on the host (ZeRO-Offload): the
    CPU Adam model (:class:`~gpucast.predict.offload.CpuAdamModel`), whether the delayed
    parameter update is used, where the model came from, and the node's local NVMe
    bandwidth for ZeRO-Infinity (GB/s; None: no NVMe tier)."""

    cpu_adam: CpuAdamModel
    delayed_update: bool = False
    source: str = ""
    nvme_gbps: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuTable:
    """Per GPU type (rows, in ``names`` order): step-time coefficients and hardware facts.

    ``fixed_s[g, t] + per_sample_s[g, t] * batch`` is term ``t`` (:data:`TERMS`) of one
    worker's step; ``lower_ratio`` / ``upper_ratio`` turn the step time into its interval.
    ``precision`` is what each GPU trains in (:class:`GpuPrecision`) and
    ``activation_bytes_per_sample`` its activations at that precision (weights, gradients
    and optimizer state stay fp32 under autocast mixed precision, so they are the
    workload's, one figure for every GPU).
    """

    names: tuple[str, ...]
    precision: tuple[str, ...]
    activation_bytes_per_sample: FloatArray
    fixed_s: FloatArray
    per_sample_s: FloatArray
    lower_ratio: FloatArray
    upper_ratio: FloatArray
    usable_bytes: FloatArray
    intra_node_gbps: FloatArray
    nvlink: npt.NDArray[np.bool_]
    source: tuple[str, ...]
    #: host-to-GPU PCIe x16 bandwidth, GB/s each way (None: not known; no offload priced)
    pcie_gbytes_per_s: FloatArray | None = None
    #: per GPU, the batches of the GPU measurements that calibrate it (NaN-padded, shape
    #: (GPUs, k); all NaN: none) and each one's scale relative to the coefficients above: a
    #: batch is priced by the measurement nearest it (:meth:`anchor_at`) and its interval
    #: depends on how far it is from that one (``batch_bands``)
    anchor_batch: FloatArray | None = None
    anchor_scale: FloatArray | None = None
    #: per GPU, (lower, upper) ratios per :data:`~gpucast.predict.intervals.BATCH_DISTANCE`
    #: bucket, shape (GPUs, buckets, 2)
    batch_bands: FloatArray | None = None
    #: per GPU calibrated on itself by measurements at several batches, per pair of
    #: neighbouring ones (NaN-padded, shape (GPUs, k - 1)): the two batches and the scales of
    #: the per-sample (compute, memory) and fixed (overhead) terms relative to the
    #: coefficients that make both exact (:func:`gpucast.predict.roofline.two_part_scale`),
    #: used between them; ``bracket_band`` (GPUs, 2) is their interval
    bracket_low: FloatArray | None = None
    bracket_high: FloatArray | None = None
    bracket_work: FloatArray | None = None
    bracket_fixed: FloatArray | None = None
    bracket_band: FloatArray | None = None

    def index(self, name: str) -> int:
        return self.names.index(name)

    def interval_ratios(
        self, gpu: npt.NDArray[np.int64], batch: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray]:
        """(lower, upper) ratios of the step at per-worker ``batch`` on GPU indices ``gpu``
        (same shapes): the GPU's own, or -- calibrated on that GPU -- the band of the batch's
        distance from the measured one."""
        lo = np.asarray(self.lower_ratio[gpu], dtype=np.float64)
        hi = np.asarray(self.upper_ratio[gpu], dtype=np.float64)
        if self.batch_bands is None:
            return lo, hi
        measured, _ = self.anchor_at(gpu, batch)
        own = ~np.isnan(measured)
        if not own.any():
            return lo, hi
        b = np.broadcast_to(np.maximum(np.asarray(batch, dtype=np.float64), 1.0), lo.shape)
        bucket = batch_distance_index(np.where(own, measured, 1.0), b)
        bands = self.batch_bands[gpu, bucket]
        lo, hi = np.where(own, bands[..., 0], lo), np.where(own, bands[..., 1], hi)
        inside, _ = self._bracket(gpu, b)
        if self.bracket_band is not None and inside.any():
            lo = np.where(inside, self.bracket_band[gpu, 0], lo)
            hi = np.where(inside, self.bracket_band[gpu, 1], hi)
        return lo, hi

    def step_terms(self, gpu: npt.NDArray[np.int64], batch: FloatArray) -> FloatArray:
        """(rows, 3) roofline terms for GPU indices and per-worker batches (each scaled by the
        measurement nearest its batch, or by the two around it, where several calibrate the
        GPU: :meth:`term_scales`)."""
        terms = self.fixed_s[gpu] + self.per_sample_s[gpu] * np.asarray(batch)[:, None]
        return np.asarray(terms * self.term_scales(gpu, batch), dtype=np.float64)

    def term_scales(self, gpu: npt.NDArray[np.int64], batch: npt.ArrayLike) -> FloatArray:
        """Per (GPU, batch) of the same shape, the scale of each of the :data:`TERMS` relative
        to the coefficients (shape + (3,)): the nearest measurement's for all three, or,
        between two measurements of the GPU itself, the per-sample and fixed parts' own
        (:func:`gpucast.predict.roofline.two_part_scale`), as
        :func:`~gpucast.predict.roofline.predict_step_time` prices them."""
        shape = np.shape(gpu)
        b = np.broadcast_to(np.maximum(np.asarray(batch, dtype=np.float64), 1.0), shape)
        _, scale = self.anchor_at(gpu, b)
        out = np.repeat(scale[..., None], len(TERMS), axis=-1)
        inside, k = self._bracket(gpu, b)
        if inside.any():
            assert self.bracket_work is not None and self.bracket_fixed is not None
            work = np.take_along_axis(self.bracket_work[gpu], k, axis=-1)[..., 0]
            fixed = np.take_along_axis(self.bracket_fixed[gpu], k, axis=-1)[..., 0]
            for t, part in enumerate((work, work, fixed)):  # compute, memory, overhead
                out[..., t] = np.where(inside, part, out[..., t])
        return np.asarray(out, dtype=np.float64)

    def _bracket(
        self, gpu: npt.NDArray[np.int64], batch: FloatArray
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """(whether a pair of measurements brackets each batch, the pair's index [..., None])."""
        if self.bracket_low is None or self.bracket_high is None:
            return np.zeros(np.shape(gpu), dtype=bool), np.zeros((*np.shape(gpu), 1), np.int64)
        b = batch[..., None]
        hits = (self.bracket_low[gpu] < b) & (b < self.bracket_high[gpu])  # NaN: False
        inside = np.asarray(hits.any(axis=-1), dtype=bool)
        return inside, np.asarray(np.argmax(hits, axis=-1)[..., None], dtype=np.int64)

    def anchor_at(
        self, gpu: npt.NDArray[np.int64], batch: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray]:
        """Per (GPU, batch) of the same shape: the batch of the measurement nearest it (NaN:
        the GPU has none) and that measurement's scale relative to the coefficients (1
        without one)."""
        shape = np.shape(gpu)
        b = np.broadcast_to(np.maximum(np.asarray(batch, dtype=np.float64), 1.0), shape)
        if self.anchor_batch is None or self.anchor_scale is None:
            return np.full(shape, np.nan), np.ones(shape)
        anchors = self.anchor_batch[gpu]  # (..., k)
        far = np.abs(np.log2(b[..., None] / np.where(np.isnan(anchors), 1.0, anchors)))
        k = np.argmin(np.where(np.isnan(anchors), np.inf, far), axis=-1)[..., None]
        nearest = np.take_along_axis(anchors, k, axis=-1)[..., 0]
        scale = np.take_along_axis(self.anchor_scale[gpu], k, axis=-1)[..., 0]
        return nearest, np.where(np.isnan(nearest), 1.0, scale)


def build_gpu_table(
    facts: WorkloadFacts,
    gpus: list[GpuSpec],
    *,
    calibration: Calibration | None = None,
    efficiency: RooflineEfficiency | None = None,
    per_gpu: Mapping[str, GpuPrecision] | None = None,
) -> GpuTable:
    """Two roofline predictions per GPU (batch 1 and 2) give each term's ``a + c * b``.

    A GPU in ``per_gpu`` is priced at its own precision, facts and calibration; the others
    at ``facts.precision`` with ``facts`` and ``calibration``."""
    n = len(gpus)
    same = GpuPrecision(precision=facts.precision, facts=facts, calibration=calibration)
    choices = [(per_gpu or {}).get(g.name, same) for g in gpus]
    fixed = np.zeros((n, len(TERMS)))
    per = np.zeros((n, len(TERMS)))
    lower = np.ones(n)
    upper = np.ones(n)
    usable = np.zeros(n)
    intra = np.zeros(n)
    nvlink = np.zeros(n, dtype=bool)
    pcie = np.zeros(n)
    anchors: list[list[tuple[float, float]]] = []
    eff = efficiency or RooflineEfficiency()
    bands = np.ones((n, len(BATCH_DISTANCE), 2))
    brackets: list[list[tuple[Any, ...]]] = [[] for _ in gpus]
    bracket_band = np.ones((n, 2))
    sources: list[str] = []
    for i, (gpu, choice) in enumerate(zip(gpus, choices, strict=True)):
        # the coefficients at the primary measurement's scale (the others: ``anchor_scale``)
        primary = None if choice.calibration is None else replace(choice.calibration, others=())
        one, two = (
            predict_step_time(
                choice.facts.roofline_workload(b),
                gpu,
                choice.precision,
                calibration=primary,
                efficiency=efficiency,
            )
            for b in (1, 2)
        )
        for t, term in enumerate(TERMS):
            c = two.breakdown.get(term, 0.0) - one.breakdown.get(term, 0.0)
            per[i, t] = max(c, 0.0)
            fixed[i, t] = max(one.breakdown.get(term, 0.0) - c, 0.0)
        lower[i] = one.lower / one.value
        upper[i] = one.upper / one.value
        cal = choice.calibration
        base = "" if cal is None else calibrated_regime(gpu, cal, eff)
        if cal is not None and base and cal.batch_size is not None:
            points = [replace(cal, others=()), *cal.others]
            anchors.append([(float(c.batch_size or 0), c.scale / cal.scale) for c in points])
            bands[i] = batch_bands(eff, base, cal)
            if base == SAME_GPU:
                ordered = sorted(points, key=lambda c: c.batch_size or 0)
                for low, high in itertools.pairwise(ordered):
                    split = two_part_scale(low, high)
                    if split is not None:
                        brackets[i].append(
                            (low.batch_size, high.batch_size, split.work / cal.scale,
                             split.fixed / cal.scale)
                        )  # fmt: skip
                bracket_band[i] = regime_band(eff, BRACKETED, cal)
        else:
            anchors.append([])
        usable[i] = usable_bytes(gpu)
        intra[i] = intra_node_gbps(gpu)
        nvlink[i] = gpu.interconnect_gbps is not None
        pcie[i] = PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0) / 8.0
        sources.append(one.source)
    width = max((len(a) for a in anchors), default=0) or 1
    anchor_batch = np.full((n, width), np.nan)
    anchor_scale = np.ones((n, width))
    for i, row in enumerate(anchors):
        for k, (b, c) in enumerate(row):
            anchor_batch[i, k], anchor_scale[i, k] = b, c
    pairs = max((len(b) for b in brackets), default=0) or 1
    bracket = np.full((4, n, pairs), np.nan)
    for i, pairs_of_gpu in enumerate(brackets):
        for k, pair in enumerate(pairs_of_gpu):
            bracket[:, i, k] = pair
    return GpuTable(
        names=tuple(g.name for g in gpus),
        precision=tuple(c.precision for c in choices),
        activation_bytes_per_sample=np.array(
            [c.facts.activation_bytes_per_sample for c in choices], dtype=np.float64
        ),
        fixed_s=fixed,
        per_sample_s=per,
        lower_ratio=lower,
        upper_ratio=upper,
        usable_bytes=usable,
        intra_node_gbps=intra,
        nvlink=nvlink,
        source=tuple(sources),
        pcie_gbytes_per_s=pcie,
        anchor_batch=anchor_batch,
        anchor_scale=anchor_scale,
        batch_bands=bands,
        bracket_low=bracket[0],
        bracket_high=bracket[1],
        bracket_work=bracket[2],
        bracket_fixed=bracket[3],
        bracket_band=bracket_band,
    )


def nominal_collective(
    rdma: npt.ArrayLike, nvlink: npt.ArrayLike, one_node: npt.ArrayLike
) -> npt.NDArray[np.bool_]:
    """Where an all-reduce takes the RDMA (nominal) constants (scalars or arrays): over RDMA
    NICs, or on one node of NVLink GPUs, which never reaches its NICs whatever they are
    (QA 39 R #8: 8 GPUs of one NVSwitch node paid the TCP fit's 4.79 ms a step, none of it
    hidden, where InfiniBand NICs gave 0.2 ms). The one rule of :meth:`PerfParams.
    collective_for` and :meth:`PerfParams.sync_collective`."""
    both = np.asarray(nvlink, dtype=bool) & np.asarray(one_node, dtype=bool)
    return np.asarray(np.asarray(rdma, dtype=bool) | both, dtype=np.bool_)


@dataclass(frozen=True, slots=True, kw_only=True)
class PerfParams:
    """Constants of the communication and PS models.

    PS defaults are :class:`gpucast.predict.cluster.ClusterModel` fitted on CM-DARE's
    cluster_scaling runs (K80/P100, ResNet-15 / Shake-Shake small and big, 1-8 workers, 1 PS)
    as of this build (a push and a pull station per shard, schema 2): achieved NIC share
    0.911, CPU cost 96.5 us per tensor per update, leave-one-model-out MAPE 4.96%,
    log-residual 10th/90th percentiles -0.075 / +0.081. The CLI refits them
    (:meth:`from_cluster_model`) whenever the published data is at hand.
    Collective constants are the cluster model's defaults (25 us per ring hop, 70% of
    communication can hide under backward, ``comm.DEFAULT_OVERLAP_FRACTION``), not validated
    on measured data.
    """

    ps_network_efficiency: float = 0.911
    ps_per_tensor_cost_s: float = 9.65e-5
    ps_log_residual_q10: float = -0.075
    ps_log_residual_q90: float = 0.081
    ps_cv_mape_pct: float | None = 4.96
    ps_bottleneck_utilization: float = 0.8
    hop_latency_s: float = 25e-6
    overlap_fraction: float = comm.DEFAULT_OVERLAP_FRACTION
    backward_fraction: float = comm.DEFAULT_BACKWARD_FRACTION
    collective_uncertainty: float = 0.25
    #: how all-reduce runs on RDMA-class networks and on TCP ones (gpucast.predict.collective),
    #: and which instance types have RDMA (the rest are priced as TCP)
    collective_rdma: CollectiveConstants = RDMA
    collective_tcp: CollectiveConstants = TCP_DEFAULT
    rdma_instances: frozenset[str] = frozenset()
    source: str = "built-in constants: ClusterModel fitted on CM-DARE cluster_scaling"
    #: GPU-to-GPU speed spread (None: the step times as fitted) and straggler-aware placement
    variability: SpeedVariability | None = None
    exclude_slowest: float = 0.0
    #: synchronous batches split by each GPU's speed: the job runs at the mean speed
    balance_batches: bool = False
    #: GPU power and the power limit (None: no power figures, every GPU at its default)
    power: PowerSetting | None = None
    #: ZeRO-Offload for rows that fit no GPU memory otherwise (None: such rows are dropped)
    offload: OffloadSetting | None = None

    def gpu_slowdown(
        self, n_gpus: npt.ArrayLike, sync: npt.ArrayLike, gpus_per_node: npt.ArrayLike = 1
    ) -> FloatArray:
        """The step-time multiplier of jobs of ``n_gpus`` GPUs on nodes of ``gpus_per_node``
        from their speed spread: the expected slowest GPU where ``sync``, the mean worker
        speed elsewhere (1 without a variability profile); ``exclude_slowest`` drops whole
        nodes (:meth:`SpeedVariability.slowdown`)."""
        n = np.asarray(n_gpus, dtype=np.float64)
        if self.variability is None:
            return np.ones(n.shape)
        gpn = np.broadcast_to(np.asarray(gpus_per_node, dtype=np.float64), n.shape)
        sync_b = np.asarray(sync, dtype=bool) & (not self.balance_batches)
        flat, keys = np.unique(
            np.stack([n.ravel(), sync_b.ravel() * 1.0, gpn.ravel()], axis=1),
            axis=0,
            return_inverse=True,
        )
        values = np.empty(len(flat))
        for per_node in np.unique(flat[:, 2]):
            at = flat[:, 2] == per_node
            values[at] = self.variability.slowdown(
                flat[at, 0],
                sync=flat[at, 1] > 0,
                exclude=self.exclude_slowest,
                gpus_per_node=int(per_node),
            )
        return np.asarray(values[keys.reshape(-1)].reshape(n.shape), dtype=np.float64)

    def gpu_busy_share(self, slowdown: FloatArray, sync: npt.ArrayLike) -> FloatArray:
        """The share of a step's compute, at ``slowdown`` (:meth:`gpu_slowdown`'s pace), the
        mean GPU spends computing: where the slowest GPU paces a synchronous job the others
        finish their part early and wait on the all-reduce at their idle draw, so the mean
        GPU computes for ``E[f] / slowdown`` of it (1 elsewhere: asynchronous or balanced
        workers compute the whole step)."""
        slow = np.asarray(slowdown, dtype=np.float64)
        if self.variability is None or self.balance_batches:
            return np.ones(slow.shape)
        share = np.where(np.asarray(sync, dtype=bool), self.variability.busy_share(slow), 1.0)
        return np.asarray(share, dtype=np.float64)

    def probe_nodes(self, nodes: npt.ArrayLike, sync: npt.ArrayLike) -> FloatArray:
        """Nodes started beside a job's ``nodes`` to find and release the slowest
        (``exclude_slowest`` on a synchronous job with a spread; 0 elsewhere)."""
        na = np.asarray(nodes, dtype=np.float64)
        if self.variability is None or self.exclude_slowest <= 0 or self.balance_batches:
            return np.zeros(na.shape)
        extra = rented_nodes(na, self.exclude_slowest) - na
        return np.asarray(np.where(np.asarray(sync, dtype=bool), extra, 0.0), dtype=np.float64)

    def collective_for(
        self, *, rdma: bool, nvlink: bool, one_node: bool = False
    ) -> CollectiveConstants:
        """The collective constants of one network: RDMA nominal; TCP as fitted, whose
        intra-node share was fitted on PCIe GPUs and so does not apply to NVLink ones; RDMA
        also for a job on ``one_node`` of NVLink GPUs (:func:`nominal_collective`)."""
        import dataclasses

        if bool(nominal_collective(rdma, nvlink, one_node)):
            return self.collective_rdma
        if nvlink:
            return dataclasses.replace(self.collective_tcp, intra_efficiency=1.0)
        return self.collective_tcp

    def sync_collective(
        self,
        data_bytes: npt.ArrayLike,
        workers: npt.ArrayLike,
        gpus_per_node: npt.ArrayLike,
        intra_node_gbps: npt.ArrayLike,
        node_network_gbps: npt.ArrayLike,
        compute_s: npt.ArrayLike,
        *,
        rdma: npt.ArrayLike,
        nvlink: npt.ArrayLike,
        passes: npt.ArrayLike = 2.0,
    ) -> tuple[FloatArray, FloatArray]:
        """(whole collective, exposed part) per row, each with :meth:`collective_for` its
        network."""
        args = (data_bytes, workers, gpus_per_node, intra_node_gbps, node_network_gbps)
        kinds = (
            self.collective_for(rdma=True, nvlink=True),
            self.collective_for(rdma=False, nvlink=True),
            self.collective_for(rdma=False, nvlink=False),
        )
        rows = np.broadcast(*(np.asarray(a) for a in (*args, compute_s, rdma, nvlink))).shape
        total = np.zeros(rows)
        exposed = np.zeros(rows)
        one_node = np.asarray(workers) <= np.asarray(gpus_per_node)
        nominal = nominal_collective(rdma, nvlink, one_node)
        choice = np.where(nominal, 0, np.where(np.asarray(nvlink, dtype=bool), 1, 2))
        for k, c in enumerate(kinds):
            t = np.broadcast_to(c.total_s(*args, passes=passes), rows)
            e = np.broadcast_to(c.exposed_s(t, compute_s), rows)
            total = np.where(choice == k, t, total)
            exposed = np.where(choice == k, e, exposed)
        return np.asarray(total, dtype=np.float64), np.asarray(exposed, dtype=np.float64)

    @classmethod
    def from_cluster_model(cls, model: ClusterModel, *, fitted_on: str) -> PerfParams:
        """The PS constants of a fitted :class:`ClusterModel` (the rest stay the defaults)."""
        if model.network_efficiency_ is None or model.per_tensor_cost_s_ is None:
            raise InvalidSpecError("cluster model", "is not fitted", fix="fit it first")
        return cls(
            ps_network_efficiency=model.network_efficiency_,
            ps_per_tensor_cost_s=model.per_tensor_cost_s_,
            ps_log_residual_q10=model.log_residual_q10_,
            ps_log_residual_q90=model.log_residual_q90_,
            ps_cv_mape_pct=model.cv_mape_pct_,
            ps_bottleneck_utilization=model.bottleneck_utilization,
            hop_latency_s=model.hop_latency_s,
            overlap_fraction=model.overlap_fraction,
            source=f"ClusterModel fitted on {fitted_on}",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RiskInputs:
    """What the spot Monte Carlo needs (derived by :mod:`gpucast.inputs.spot`).

    ``lifetime(gpu, region, provider)`` returns a node's lifetime distribution (fitted data or
    a hazard band, its ``source`` says which); ``startup(gpu, market, region)`` a VM's start-up
    delay (seconds or a sampler; without it ``startup_spot_s`` / ``startup_on_demand_s``);
    ``startup_mean_s`` is used where one number is needed (on-demand time, pruning).
    ``checkpoint(bytes)`` is the seconds one checkpoint of that size takes (without it
    ``checkpoint_fixed_s + bytes / checkpoint_gbps``).
    """

    lifetime: Callable[[str, str, str], LifetimeDistribution]
    startup: Callable[[str, str, str], Delay] | None = None
    startup_spot_s: Delay = 120.0
    startup_on_demand_s: Delay = 120.0
    startup_mean_s: float = 120.0
    restart_penalty_s: float = 100.0
    checkpoint: Callable[[float], float] | None = None
    checkpoint_fixed_s: float = 3.0
    checkpoint_gbps: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict)
    #: where no data covers a (gpu, region, provider), lifetimes come from a documented
    #: scenario: ``scenario`` names the one the plan ranks by, ``alternative`` is the other
    #: (name, lifetime function) whose outcome is shown beside it, ``on_scenario`` says
    #: whether a node rests on the scenario
    scenario: str = ""
    alternative: tuple[str, Callable[[str, str, str], LifetimeDistribution]] | None = None
    on_scenario: Callable[[str, str, str], bool] | None = None
    #: how long a spot replacement waits for capacity, by (gpu, region, provider); a spot
    #: replacement that waited ``fallback_after_s`` is launched on demand (None: never)
    capacity_gap: Callable[[str, str, str], Delay] | None = None
    fallback_after_s: float | None = None
    #: managed recovery: for (provider, instance type, home region) the region a replacement
    #: that waited ``move_after_s`` is launched in and that region's spot and on-demand US$/h
    #: per node (None: it stays); None: nothing moves
    move_to: Callable[[str, str, str], tuple[str, float, float] | None] | None = None
    move_after_s: float = 900.0

    def gap(self, gpu: str, region: str, provider: str) -> Delay:
        return 0.0 if self.capacity_gap is None else self.capacity_gap(gpu, region, provider)

    def checkpoint_s(self, facts: WorkloadFacts) -> float:
        size = facts.weights_bytes + facts.optimizer_bytes
        if self.checkpoint is not None:
            return float(self.checkpoint(size))
        return self.checkpoint_fixed_s + size * 8.0 / (self.checkpoint_gbps * 1e9)

    def startup_delay(self, gpu: str, market: str, region: str) -> Delay:
        """One VM's start-up delay for ``gpu`` in ``market`` ("spot" or "on-demand")."""
        if self.startup is not None:
            return self.startup(gpu, market, region)
        return self.startup_spot_s if market == "spot" else self.startup_on_demand_s

"""Will a training job fit in GPU memory, and with what?

For one GPU type and ``workers`` GPUs, each strategy's per-GPU bytes are computed from the
workload's memory needs (:class:`MemoryNeeds`):

==============================  ==========================================================
``data-parallel``               weights + gradients + optimizer state + activations
``data-parallel+checkpointing`` activations cut to ``checkpoint_fraction`` (below)
``fsdp``                        (weights + gradients + optimizer) / N, plus the gathered
                                parameters of the largest layer (twice: prefetch), plus
                                activations (ZeRO-3 / PyTorch FSDP ``FULL_SHARD``)
``fsdp+checkpointing``          both
``cpu-offload``                 ZeRO-Offload: weights + gradients + activations on the
                                GPU; fp32 master weights, gradients and optimizer state
                                (w + g + o) / N in host memory; its time from
                                :mod:`gpucast.predict.offload` (PCIe and the CPU Adam step)
``fsdp+checkpointing+cpu-offload``  (weights + gradients) / N + gather buffer + checkpointed
                                activations; host as ``cpu-offload``
==============================  ==========================================================

Activation checkpointing keeps the activations at segment boundaries and recomputes one
segment at a time in backward. With ``L`` layers cut into ``sqrt(L)`` segments (Chen et al.
2016, "Training deep nets with sublinear memory cost"), the peak is about ``2 / sqrt(L)`` of
the full activations (boundaries plus one live segment), never more than all of them; it costs
one extra forward pass (~ +33% compute).

Every GPU loses ``reserved_bytes`` to the CUDA context, cuDNN/cuBLAS workspaces and allocator
fragmentation (1 GiB plus 5%: every verb's rule, gpucast.domain.gpu_memory). Strategies are tried
in order of expected
slow-down and the first that fits is ``best``. The slow-downs of the strategies without offload
are documented priors, not measurements; the two offload strategies are priced by the offload
step-time model (:func:`gpucast.predict.offload.plan_at`: PCIe transfers, the CPU Adam step
measured on a host, max-plus overlap with the GPU's step) when ``offload`` gives the step's
forward/backward times, the PCIe bandwidth and a fitted CPU Adam model -- without it they are
listed unpriced (slow-down ``inf``: chosen only when nothing else fits). FSDP needs
``workers >= 2``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gpucast.domain import gpu_memory
from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gpu_memory import RESERVED_FRACTION, RESERVED_GIB
from gpucast.domain.limits import format_bytes
from gpucast.domain.profile import WorkloadProfile
from gpucast.domain.units import GIB, MIB
from gpucast.predict.offload import CpuAdamModel, OffloadInputs, plan_at

#: Bytes per parameter of weights / gradients / optimizer state for common setups.
#: fp32 + Adam: 4 / 4 / 8 (m and v). Mixed precision (bf16/fp16) + Adam: 2 / 2 / 12
#: (fp32 master weights, m and v), as in the ZeRO paper's 16 bytes per parameter.
BYTES_PER_PARAM: Mapping[str, tuple[float, float, float]] = MappingProxyType(
    {
        "fp32-adam": (4.0, 4.0, 8.0),
        "fp32-sgd-momentum": (4.0, 4.0, 4.0),
        "fp32-sgd": (4.0, 4.0, 0.0),
        "mixed-adam": (2.0, 2.0, 12.0),
        "mixed-sgd-momentum": (2.0, 2.0, 8.0),
    }
)

#: Expected slow-down of each strategy without offload relative to plain data parallel
#: (priors, in order); the offload strategies are priced by :mod:`gpucast.predict.offload`.
SLOWDOWN: Mapping[str, float] = MappingProxyType(
    {
        "data-parallel": 1.0,
        "data-parallel+checkpointing": 1.33,  # one extra forward pass
        "fsdp": 1.15,  # all-gathers / reduce-scatter partly hidden under compute
        "fsdp+checkpointing": 1.5,
    }
)
OFFLOAD_STRATEGIES = (
    "cpu-offload",
    "fsdp+checkpointing+cpu-offload",
    "cpu-offload+params",
    "checkpointing+cpu-offload+params",
)  # the last two: PARAMS_OFFLOAD_PLANS
#: The parameters in host memory too, on one GPU (``params_offload`` of :func:`fit_memory`)
PARAMS_OFFLOAD_PLANS = ("cpu-offload+params", "checkpointing+cpu-offload+params")
#: ZeRO-3 / ZeRO-Infinity offload of the parameters too: the GPU keeps this many of the
#: largest layer's weights (the layer running and the next one uploading), as plan train
PARAM_BUFFER_LAYERS = 2.0
#: The strategies of a data-parallel (DDP) job -- each GPU holds the whole model state or
#: offloads the optimizer -- and of an FSDP one (``plans`` of :func:`fit_memory`).
DATA_PARALLEL_PLANS = ("data-parallel", "data-parallel+checkpointing", "cpu-offload")
FSDP_PLANS = ("fsdp", "fsdp+checkpointing", "fsdp+checkpointing+cpu-offload")


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadCosts:
    """What pricing an offload strategy needs: the GPU's step without offload, the model's
    size, the PCIe link and a fitted :class:`~gpucast.predict.offload.CpuAdamModel`."""

    forward_s: float
    backward_s: float
    n_params: float
    n_tensors: int
    pcie_gbps: float
    cpu_adam: CpuAdamModel
    delayed_update: bool = False


def offload_slowdown(strategy: str, needs: MemoryNeeds, costs: OffloadCosts, workers: int) -> float:
    """Step time of an offload strategy over the plain data-parallel step (forward +
    backward), from :func:`gpucast.predict.offload.plan_at`."""
    ckpt = "checkpointing" in strategy
    inputs = OffloadInputs(
        n_params=costs.n_params,
        n_tensors=costs.n_tensors,
        n_layers=needs.n_layers,
        activations_bytes=needs.activations_bytes,
        forward_s=costs.forward_s,
        backward_s=costs.backward_s,
        gpu_bytes=1.0,  # bytes are counted by fit_memory; plan_at prices the time only
        host_bytes=1.0,
        pcie_gbps=costs.pcie_gbps,
        shards=workers,
        delayed_update=costs.delayed_update,
        transfer_bytes_per_param=needs.gradients_bytes / costs.n_params,
        optimizer_bytes_per_param=needs.optimizer_bytes / costs.n_params,
    )
    plan = plan_at(
        inputs,
        costs.cpu_adam,
        optimizer_on="cpu",
        params_on="cpu" if strategy.endswith("+params") else "gpu",
        recompute_layers=needs.n_layers if ckpt else 0,
    )
    base = costs.forward_s + costs.backward_s
    return plan.step_s / base if base > 0 else math.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryNeeds:
    """Bytes a training step holds, for one GPU with the whole model and its micro-batch."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    n_layers: int  # layers whose activations are kept (for checkpointing); >= 1
    largest_layer_bytes: float = 0.0  # weights of the largest layer (FSDP gathers it whole)

    def __post_init__(self) -> None:
        for name in (
            "weights_bytes",
            "gradients_bytes",
            "optimizer_bytes",
            "activations_bytes",
            "largest_layer_bytes",
        ):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value < 0:
                raise InvalidSpecError(name, "must be a finite number >= 0", got=value)
        if isinstance(self.n_layers, bool) or int(self.n_layers) < 1:
            raise InvalidSpecError("n_layers", "must be an integer >= 1", got=self.n_layers)

    @classmethod
    def from_parameters(
        cls,
        *,
        n_params: float,
        activations_bytes: float,
        n_layers: int,
        setup: str = "fp32-adam",
        largest_layer_params: float | None = None,
    ) -> MemoryNeeds:
        """Needs of a model of ``n_params`` parameters trained with ``setup`` (a key of
        :data:`BYTES_PER_PARAM`)."""
        if setup not in BYTES_PER_PARAM:
            raise InvalidSpecError(
                "setup", f"must be one of {', '.join(BYTES_PER_PARAM)}", got=setup
            )
        w, g, o = BYTES_PER_PARAM[setup]
        largest = n_params / n_layers if largest_layer_params is None else largest_layer_params
        return cls(
            weights_bytes=n_params * w,
            gradients_bytes=n_params * g,
            optimizer_bytes=n_params * o,
            activations_bytes=activations_bytes,
            n_layers=n_layers,
            largest_layer_bytes=largest * w,
        )

    @classmethod
    def from_profile(cls, profile: WorkloadProfile, *, n_layers: int | None = None) -> MemoryNeeds:
        """Needs from the profiler's memory estimate. ``n_layers`` defaults to half the
        parameter tensors (a weight and a bias or norm scale per layer), at least 1."""
        mem = profile.memory
        layers = n_layers if n_layers is not None else max(1, profile.parameter_tensors // 2)
        return cls(
            weights_bytes=float(mem.weights_bytes),
            gradients_bytes=float(mem.gradients_bytes),
            optimizer_bytes=float(mem.optimizer_state_bytes),
            activations_bytes=float(mem.activations_bytes + mem.inputs_bytes),
            n_layers=layers,
            largest_layer_bytes=profile.parameter_tensor_max_mib * MIB,
        )

    @property
    def checkpoint_fraction(self) -> float:
        """Share of activations kept with sqrt(L) checkpointing: ``min(1, 2 / sqrt(L))``."""
        return min(1.0, 2.0 / math.sqrt(self.n_layers))


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOption:
    """One strategy: bytes it needs per GPU, by component, and whether that fits."""

    strategy: str
    bytes_needed: float
    bytes_available: float
    fits: bool
    slowdown: float
    components: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    host_bytes: float = 0.0  # bytes moved to CPU memory (offload), per GPU

    def __post_init__(self) -> None:
        object.__setattr__(self, "components", MappingProxyType(dict(self.components)))

    @property
    def headroom_bytes(self) -> float:
        return self.bytes_available - self.bytes_needed


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFit:
    """Every strategy for one GPU type and worker count; ``best`` is the fastest that fits."""

    gpu: str
    workers: int
    bytes_available: float
    options: tuple[MemoryOption, ...]
    best: MemoryOption | None
    reason: str  # why ``best`` was chosen, or why nothing fits (ready for NoFeasiblePlanError)

    @property
    def fits(self) -> bool:
        return self.best is not None

    def largest_batch(self, batch: int) -> tuple[int, str | None]:
        """The largest batch that fits, and the strategy it fits with, where this fit was
        counted at ``batch`` samples per GPU: activations grow with the batch, the rest does
        not (``(0, None)``: not even one sample fits)."""
        if batch < 1:
            raise InvalidSpecError("batch", "must be >= 1", got=batch)
        best: float = 0.0
        how = None
        for opt in self.options:
            acts = opt.components.get("activations", 0.0)
            room = opt.bytes_available - (opt.bytes_needed - acts)
            if room < 0:
                continue
            most = math.inf if acts <= 0 else math.floor(room / (acts / batch))
            if most > best:
                best, how = most, opt.strategy
        return (int(min(best, 2**62)), how)


def zero_state_bytes(needs: MemoryNeeds, *, stage: int, ranks: int) -> dict[str, float]:
    """Model-state bytes one of ``ranks`` data-parallel ranks holds at rest under ZeRO
    ``stage`` (Rajbhandari et al. 2020, section 5): stage 1 partitions the optimizer state,
    2 also the gradients, 3 also the weights (the rule :mod:`gpucast.predict.parallel` applies
    per pipeline stage); the gather buffer of stage 3 is live only inside a step."""
    if stage not in (0, 1, 2, 3):
        raise InvalidSpecError("stage", "must be a ZeRO stage 0-3", got=stage)
    if isinstance(ranks, bool) or ranks < 1:
        raise InvalidSpecError("ranks", "must be an integer >= 1", got=ranks)
    return {
        "weights": needs.weights_bytes / (ranks if stage >= 3 else 1),
        "gradients": needs.gradients_bytes / (ranks if stage >= 2 else 1),
        "optimizer": needs.optimizer_bytes / (ranks if stage >= 1 else 1),
    }


def _slowdown(name: str, needs: MemoryNeeds, offload: OffloadCosts | None, n: int) -> float:
    if name not in OFFLOAD_STRATEGIES:
        return SLOWDOWN[name]
    if offload is None:
        return math.inf
    return offload_slowdown(name, needs, offload, n)


def usable_bytes(
    gpu: GpuSpec,
    *,
    reserved_gib: float = RESERVED_GIB,
    reserved_fraction: float = RESERVED_FRACTION,
) -> float:
    """GPU memory a job can fill: :func:`gpucast.domain.gpu_memory.usable_bytes`, the one rule
    (the catalog's memory less the CUDA context, library workspaces and fragmentation)."""
    return gpu_memory.usable_bytes(
        gpu.memory_gib, reserved_gib=reserved_gib, reserved_fraction=reserved_fraction
    )


def _needed(n_bytes: float) -> str:
    """GiB with one decimal, as the usable memory beside it; below 0.1 GiB in the unit that
    shows it (a small model "needed 0.0 GiB")."""
    return f"{n_bytes / GIB:.1f} GiB" if n_bytes >= 0.1 * GIB else format_bytes(n_bytes)


def fit_memory(
    needs: MemoryNeeds,
    gpu: GpuSpec,
    workers: int = 1,
    *,
    reserved_gib: float = RESERVED_GIB,
    reserved_fraction: float = RESERVED_FRACTION,
    offload: OffloadCosts | None = None,
    plans: Collection[str] | None = None,
    params_offload: bool = False,
) -> MemoryFit:
    """Per-GPU memory of each strategy on ``workers`` GPUs of type ``gpu``; see module doc.
    ``plans``: only these strategies (e.g. :data:`DATA_PARALLEL_PLANS` for a job that runs
    DDP); ``None``: every one. ``params_offload``: on one GPU whose weights and gradients
    do not fit, also the parameters in host memory (ZeRO-3 / ZeRO-Infinity offload, as
    ``plan train`` prices a one-GPU row: its host memory is the instance's to check)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidSpecError("workers", "must be an integer >= 1", got=workers)
    available = usable_bytes(gpu, reserved_gib=reserved_gib, reserved_fraction=reserved_fraction)
    n = workers
    acts = needs.activations_bytes
    acts_ckpt = acts * needs.checkpoint_fraction
    w, g, o = needs.weights_bytes, needs.gradients_bytes, needs.optimizer_bytes
    gather = 2.0 * needs.largest_layer_bytes if n > 1 else 0.0
    candidates: list[tuple[str, dict[str, float], float]] = [
        ("data-parallel", {"weights": w, "gradients": g, "optimizer": o, "activations": acts}, 0),
        (
            "data-parallel+checkpointing",
            {"weights": w, "gradients": g, "optimizer": o, "activations": acts_ckpt},
            0,
        ),
    ]
    if n > 1:
        candidates += [
            (
                "fsdp",
                {
                    "weights": w / n,
                    "gradients": g / n,
                    "optimizer": o / n,
                    "gather_buffer": gather,
                    "activations": acts,
                },
                0,
            ),
            (
                "fsdp+checkpointing",
                {
                    "weights": w / n,
                    "gradients": g / n,
                    "optimizer": o / n,
                    "gather_buffer": gather,
                    "activations": acts_ckpt,
                },
                0,
            ),
        ]
    # ZeRO-Offload: fp32 master weights, gradients and optimizer state in host memory,
    # partitioned over the data-parallel ranks (w + g + o: 16 B/param for Adam, fp32 or mixed)
    host_state = (w + g + o) / n
    candidates.append(
        ("cpu-offload", {"weights": w, "gradients": g, "activations": acts}, host_state)
    )
    if params_offload and n == 1 and w + g + acts_ckpt > available:
        # the parameters too (ZeRO-3 / ZeRO-Infinity offload, uploaded layer by layer), where
        # even the weights and gradients do not fit: plan train's one-GPU rows
        buffer = PARAM_BUFFER_LAYERS * needs.largest_layer_bytes
        candidates += [
            (name, {"parameter_buffer": buffer, "activations": a}, host_state + w)
            for name, a in zip(PARAMS_OFFLOAD_PLANS, (acts, acts_ckpt), strict=True)
        ]
    if n > 1:
        candidates.append(
            (
                "fsdp+checkpointing+cpu-offload",
                {
                    "weights": w / n,
                    "gradients": g / n,
                    "gather_buffer": gather,
                    "activations": acts_ckpt,
                },
                host_state,
            )
        )
    options = tuple(
        MemoryOption(
            strategy=name,
            bytes_needed=sum(parts.values()),
            bytes_available=available,
            fits=sum(parts.values()) <= available,
            slowdown=_slowdown(name, needs, offload, n),
            components=parts,
            host_bytes=host,
        )
        for name, parts, host in candidates
        if plans is None or name in plans
    )
    if not options:
        raise InvalidSpecError(
            "plans", f"name none of the strategies on {n} GPU(s)", got=tuple(plans or ())
        )
    feasible = sorted((opt for opt in options if opt.fits), key=lambda opt: opt.slowdown)
    best = feasible[0] if feasible else None
    avail_gib = available / GIB
    if best is not None:
        reason = (
            f"{best.strategy} needs {_needed(best.bytes_needed)} of {avail_gib:.1f} GiB "
            f"usable per {gpu.name} (x{n}); "
            + (
                f"expected slow-down x{best.slowdown:.3g}"
                if math.isfinite(best.slowdown)
                else "slow-down not priced (no offload costs given)"
            )
        )
    else:
        smallest = min(options, key=lambda opt: opt.bytes_needed)
        more = "" if n > 1 or plans is not None else " (FSDP needs 2 or more GPUs)"
        reason = (
            f"no strategy fits {n} x {gpu.name} ({avail_gib:.1f} GiB usable each): the smallest, "
            f"{smallest.strategy}, needs {smallest.bytes_needed / GIB:.1f} GiB per GPU{more}"
        )
    return MemoryFit(
        gpu=gpu.name,
        workers=n,
        bytes_available=available,
        options=options,
        best=best,
        reason=reason,
    )

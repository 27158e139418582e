"""Training beyond GPU memory: CPU Adam speed, offload step time, the per-layer memory plan.

**CPU Adam** (:class:`CpuAdamModel`): one AdamW step over ``N`` fp32 parameters in ``T``
tensors takes ``fixed_s + per_tensor_s * T + 28 N / bandwidth`` -- it streams 28 bytes per
parameter (reads weight, gradient and two moments, writes weight and moments;
:data:`~gpucast.domain.offload.ADAM_BYTES_PER_PARAM`), so past the caches it runs at the
host's memory bandwidth, plus a cost per tensor (kernel launch, per-tensor bookkeeping). The
three constants are fitted by non-negative least squares on relative error from steps measured
here (``gpucast measure optimizer``).

**Offload step time** (:func:`plan_offload`): per step, max-plus over the GPU (forward ``F``,
backward ``B``, recomputed forwards ``R``), the PCIe link (gradients down and parameters up,
``transfer_bytes_per_param`` each: 2 at bf16/fp16, 4 in fp32; full duplex), the host CPU (the
Adam step ``C`` from :class:`CpuAdamModel`) and the NVMe drive (ZeRO-Infinity); the bytes held
per tier below are mixed precision's:

* optimizer on the GPU: ``F + R + B`` (no transfer);
* optimizer on the CPU (ZeRO-Offload): gradients stream down during backward (only the excess
  ``max(0, G - B)`` is exposed), then the CPU step and the parameter upload, pipelined in
  chunks (``max(C, U)``), before the next forward: ``F + R + max(B, G) + max(C, U)``. With
  ``delayed_update`` (ZeRO-Offload's delayed parameter update, DPU: step ``i`` runs on
  parameters one update old, so the CPU step overlaps the next forward and backward) the
  step is ``max(F + R + B, max(0, G - B) + max(C, U))``;
* optimizer on NVMe: the CPU step also reads and writes the 12 bytes per parameter of fp32
  master weights and moments (``24 N / nvme``), chunked so it overlaps the CPU's work:
  ``C' = max(C, 24 N / nvme)``;
* parameters on the CPU (ZeRO-3 offload of parameters): each layer's bf16 weights are
  uploaded before its forward and again before its backward, overlapped with compute:
  ``F' = max(F, 2N / pcie)``, ``B' = max(B, 2N / pcie)`` (and gradients already stream
  down); on NVMe the upload runs at ``min(pcie, nvme)``.

**Memory plan per layer**: with ``L`` equal layers, each layer either keeps its activations or
recomputes them in backward (keeps only what the next one needs); recomputing ``r`` layers
holds ``(L - r) / L`` of the activations plus one live layer, and costs ``r / L`` of a
forward. Each state (parameters, gradients, optimizer) lives on the GPU, the CPU or NVMe. On
the GPU: bf16 weights and gradients ``4 N`` where the parameters live there (else a 2-layer
gather buffer), fp32 master weights and moments ``12 N`` where the optimizer does; on the
host: fp32 master weights, moments and gradients ``16 N`` for a CPU optimizer, the fp32
gradients ``4 N`` for an NVMe one, bf16 parameters ``2 N`` when they live there. The optimizer
state is sharded over ``shards`` data-parallel ranks (ZeRO stage 1-2 partitioning). The
fastest plan that fits the GPU's usable memory and the host memory per GPU is chosen;
recomputing fewer layers is always faster, so per placement the plan recomputes the fewest
layers that fit.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.offload import ADAM_BYTES_PER_PARAM, streamed_bytes_per_param
from gpucast.predict.base import Estimator, register

FloatArray = npt.NDArray[np.float64]
Tier = Literal["gpu", "cpu", "nvme"]
TIERS: tuple[Tier, ...] = ("gpu", "cpu", "nvme")
_CPU_ADAM_TERMS = ("fixed_s", "per_tensor_s", "per_byte_s")


@register
class CpuAdamModel(Estimator):
    """CPU AdamW step time: ``fixed_s + per_tensor_s * tensors + 28 * params * per_byte_s``
    (module docstring). ``fit(params, tensors, step_s)`` from measured steps."""

    kind = "cpu_adam"
    schema_version = 1

    def __init__(self) -> None:
        self.coef_: dict[str, float] | None = None
        self.n_rows_: int = 0
        #: the smallest and largest measured run fitted on (0: constants, not a fit)
        self.min_params_: float = 0.0
        self.max_params_: float = 0.0

    @property
    def is_fitted(self) -> bool:
        return self.coef_ is not None

    def _coefficients(self) -> dict[str, float]:
        self._require_fitted()
        assert self.coef_ is not None
        return self.coef_

    @property
    def bandwidth_gbps(self) -> float:
        """The fitted streaming bandwidth (GB/s)."""
        per_byte = self._coefficients()["per_byte_s"]
        return math.inf if per_byte <= 0 else 1e-9 / per_byte

    @classmethod
    def from_coefficients(
        cls, *, fixed_s: float, per_tensor_s: float, bandwidth_gbps: float
    ) -> CpuAdamModel:
        """A model with given constants (a catalog row, not a fit)."""
        values = (fixed_s, per_tensor_s, bandwidth_gbps)
        if not all(math.isfinite(v) and v >= 0 for v in values) or bandwidth_gbps <= 0:
            raise InvalidSpecError(
                "cpu adam", "needs finite constants >= 0 and a bandwidth > 0", got=values
            )
        model = cls()
        model.coef_ = {
            "fixed_s": float(fixed_s),
            "per_tensor_s": float(per_tensor_s),
            "per_byte_s": 1e-9 / bandwidth_gbps,
        }
        return model

    def _state(self) -> dict[str, Any]:
        return {
            "coef": dict(self._coefficients()),
            "n_rows": self.n_rows_,
            "min_params": self.min_params_,
            "max_params": self.max_params_,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            coef = {k: float(state["coef"][k]) for k in _CPU_ADAM_TERMS}
            n_rows = int(state["n_rows"])
            max_params = float(state["max_params"])
            min_params = float(state.get("min_params", max_params))  # (saved before it was)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"cpu_adam state is malformed ({exc})", fix="refit it") from exc
        if not all(math.isfinite(v) and v >= 0 for v in coef.values()):
            raise InvalidInputError("cpu_adam coefficients must be finite and >= 0", fix="refit")
        model = cls()
        model.coef_ = coef
        model.n_rows_ = n_rows
        model.min_params_ = min_params
        model.max_params_ = max_params
        return model

    def fit(
        self, params: Sequence[float], tensors: Sequence[float], step_s: Sequence[float]
    ) -> Self:
        """Non-negative least squares on relative error (each row weighted by 1 / its time)."""
        from scipy.optimize import nnls

        n = np.asarray(params, dtype=np.float64)
        t = np.asarray(tensors, dtype=np.float64)
        y = np.asarray(step_s, dtype=np.float64)
        if not (n.shape == t.shape == y.shape and n.ndim == 1):
            raise InvalidSpecError("params / tensors / step_s", "must be 1-D of one length")
        if len(y) < 3:
            raise InvalidSpecError("step_s", "needs at least 3 measured sizes", got=len(y))
        for name, arr in (("params", n), ("tensors", t), ("step_s", y)):
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise InvalidSpecError(name, "must be finite numbers > 0")
        design = np.column_stack([np.ones_like(n), t, ADAM_BYTES_PER_PARAM * n]) / y[:, None]
        scale = design.max(axis=0)
        coef, _ = nnls(design / scale, np.ones_like(y))
        coef = coef / scale
        self.coef_ = dict(zip(_CPU_ADAM_TERMS, (float(c) for c in coef), strict=True))
        self.n_rows_ = len(y)
        self.min_params_ = float(n.min())
        self.max_params_ = float(n.max())
        return self

    def extrapolation(self, n_params: float) -> float:
        """How many times its largest fitted run ``n_params`` is (0: a model of constants,
        fitted on no run)."""
        return 0.0 if self.max_params_ <= 0 else float(n_params) / self.max_params_

    def predict_s(
        self,
        params: npt.ArrayLike,
        tensors: npt.ArrayLike,
        bytes_per_param: npt.ArrayLike = ADAM_BYTES_PER_PARAM,
    ) -> FloatArray:
        """Predicted step seconds for each (params, tensors); ``bytes_per_param`` streamed
        (AdamW's 28 by default; another optimizer's from
        :func:`gpucast.domain.offload.streamed_bytes_per_param`, at the same bandwidth)."""
        c = self._coefficients()
        n = np.asarray(params, dtype=np.float64)
        t = np.asarray(tensors, dtype=np.float64)
        per = np.asarray(bytes_per_param, dtype=np.float64)
        return np.asarray(
            c["fixed_s"] + c["per_tensor_s"] * t + c["per_byte_s"] * per * n,
            dtype=np.float64,
        )


def zero_offload_step_s(
    forward_s: npt.ArrayLike,
    backward_s: npt.ArrayLike,
    grads_down_s: npt.ArrayLike,
    params_up_s: npt.ArrayLike,
    cpu_step_s: npt.ArrayLike,
    *,
    delayed_update: bool,
) -> FloatArray:
    """One step with the optimizer on the host (module docstring), element-wise:
    ``F + max(B, G) + max(C, U)``, or with the delayed parameter update
    ``max(F + B, max(0, G - B) + max(C, U))``."""
    f = np.asarray(forward_s, dtype=np.float64)
    b = np.asarray(backward_s, dtype=np.float64)
    g = np.asarray(grads_down_s, dtype=np.float64)
    update = np.maximum(np.asarray(cpu_step_s, dtype=np.float64), params_up_s)
    if delayed_update:
        return np.asarray(np.maximum(f + b, np.maximum(0.0, g - b) + update), dtype=np.float64)
    return np.asarray(f + np.maximum(b, g) + update, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadInputs:
    """One GPU's share of a training step and the hardware around it (module docstring)."""

    n_params: float
    n_tensors: int
    n_layers: int
    activations_bytes: float  # one GPU's micro-batch, all layers kept
    forward_s: float
    backward_s: float
    gpu_bytes: float  # usable GPU memory
    host_bytes: float  # host memory per GPU (instance memory / GPUs per instance)
    pcie_gbps: float  # GB/s each way
    nvme_gbps: float | None = None  # GB/s; None: no NVMe tier
    shards: int = 1  # data-parallel ranks the optimizer state is partitioned over
    delayed_update: bool = False
    #: bytes per parameter of the gradients sent down and the weights sent up (2: bf16/fp16
    #: mixed precision, 4: fp32 training)
    transfer_bytes_per_param: float = 2.0
    #: the optimizer's bytes per parameter on the GPU side of the model (AdamW in fp32: its two
    #: moments, 8; mixed precision: the fp32 master weights too, 12), for its CPU step; None:
    #: AdamW
    optimizer_bytes_per_param: float | None = None

    def __post_init__(self) -> None:
        for name in ("n_params", "activations_bytes", "forward_s", "backward_s"):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v < 0:
                raise InvalidSpecError(name, "must be a finite number >= 0", got=v)
        for name in ("gpu_bytes", "host_bytes", "pcie_gbps", "transfer_bytes_per_param"):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v <= 0:
                raise InvalidSpecError(name, "must be a finite number > 0", got=v)
        if self.nvme_gbps is not None and not (
            math.isfinite(self.nvme_gbps) and self.nvme_gbps > 0
        ):
            raise InvalidSpecError("nvme_gbps", "must be > 0 GB/s", got=self.nvme_gbps)
        for name in ("n_tensors", "n_layers", "shards"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidSpecError(name, "must be an integer >= 1", got=v)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadPlan:
    """Where each state lives, how many layers recompute, and what a step costs."""

    optimizer_on: Tier
    params_on: Tier
    recompute_layers: int
    n_layers: int
    gpu_bytes: float
    host_bytes: float
    nvme_bytes: float
    fits: bool
    step_s: float
    compute_s: float  # forward + backward + recomputation on the GPU
    pcie_s: float  # gradients down + parameters up (each direction's bytes / bandwidth)
    cpu_step_s: float  # the CPU optimizer step (0 on the GPU)
    nvme_s: float  # optimizer state / parameters through NVMe
    bottleneck: str  # gpu | pcie | cpu | nvme

    @property
    def name(self) -> str:
        """e.g. ``optimizer:cpu params:gpu recompute 12/48``."""
        return (
            f"optimizer:{self.optimizer_on} params:{self.params_on} "
            f"recompute {self.recompute_layers}/{self.n_layers}"
        )

    @property
    def offloaded(self) -> bool:
        return self.optimizer_on != "gpu" or self.params_on != "gpu"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "optimizer_on": self.optimizer_on,
            "params_on": self.params_on,
            "recompute_layers": self.recompute_layers,
            "n_layers": self.n_layers,
            "gpu_bytes": self.gpu_bytes,
            "host_bytes": self.host_bytes,
            "nvme_bytes": self.nvme_bytes,
            "fits": self.fits,
            "step_s": self.step_s,
            "compute_s": self.compute_s,
            "pcie_s": self.pcie_s,
            "cpu_step_s": self.cpu_step_s,
            "nvme_s": self.nvme_s,
            "bottleneck": self.bottleneck,
        }


#: (optimizer, parameters) placements: parameters never live on a faster tier than the
#: optimizer state (ZeRO-Offload / ZeRO-Infinity's configurations).
PLACEMENTS: tuple[tuple[Tier, Tier], ...] = (
    ("gpu", "gpu"),
    ("cpu", "gpu"),
    ("cpu", "cpu"),
    ("nvme", "gpu"),
    ("nvme", "cpu"),
    ("nvme", "nvme"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Arrays:
    """One placement over r = 0..L recomputed layers."""

    gpu: FloatArray
    host: float
    nvme_bytes: float
    step: FloatArray
    compute: FloatArray
    pcie_s: float
    cpu_s: float
    nvme_s: float


def _arrays(x: OffloadInputs, cpu_adam: CpuAdamModel, opt: Tier, par: Tier) -> _Arrays:
    n, layers = x.n_params, x.n_layers
    n_shard = n / x.shards
    r = np.arange(layers + 1, dtype=np.float64)
    layer_params = n / layers
    # -- bytes --------------------------------------------------------------------------------
    acts = x.activations_bytes * (layers - r) / layers + np.where(
        r > 0, x.activations_bytes / layers, 0.0
    )
    states_gpu = 4.0 * n if par == "gpu" else 2.0 * 2.0 * layer_params * 2.0
    opt_gpu = 12.0 * n_shard if opt == "gpu" else 0.0
    gpu = states_gpu + opt_gpu + acts
    host = {"gpu": 0.0, "cpu": 16.0 * n_shard, "nvme": 4.0 * n_shard}[opt]
    host += 2.0 * n if par == "cpu" else 0.0
    nvme_bytes = (12.0 * n_shard if opt == "nvme" else 0.0) + (2.0 * n if par == "nvme" else 0.0)
    # -- time ---------------------------------------------------------------------------------
    pcie = x.pcie_gbps * 1e9
    nvme = math.inf if x.nvme_gbps is None else x.nvme_gbps * 1e9
    f = x.forward_s + x.forward_s * r / layers
    b = np.full_like(r, x.backward_s)
    nvme_s = 0.0
    if par != "gpu":
        link = pcie if par == "cpu" else min(pcie, nvme)
        upload = x.transfer_bytes_per_param * n / link
        f = np.maximum(f, upload)
        b = np.maximum(b, upload)
        nvme_s += 0.0 if par == "cpu" else 2.0 * x.transfer_bytes_per_param * n / nvme
    compute = x.forward_s * (1.0 + r / layers) + x.backward_s
    if opt == "gpu":
        step = f + b
        pcie_s = 0.0 if par == "gpu" else 2.0 * x.transfer_bytes_per_param * n / pcie
        cpu_s = 0.0
    else:
        grads_down = x.transfer_bytes_per_param * n / pcie
        # offloaded parameters are uploaded per layer (above), not after the step
        params_up = 0.0 if par != "gpu" else x.transfer_bytes_per_param * n / pcie
        cpu_s = float(
            cpu_adam.predict_s(
                n_shard,
                max(1, round(x.n_tensors / x.shards)),
                ADAM_BYTES_PER_PARAM
                if x.optimizer_bytes_per_param is None
                else streamed_bytes_per_param(
                    x.optimizer_bytes_per_param, x.transfer_bytes_per_param
                ),
            )
        )
        if opt == "nvme":
            state_io = 24.0 * n_shard / nvme
            nvme_s += state_io
            cpu_phase = max(cpu_s, state_io)
        else:
            cpu_phase = cpu_s
        step = zero_offload_step_s(
            f, b, grads_down, params_up, cpu_phase, delayed_update=x.delayed_update
        )
        pcie_s = grads_down + params_up
    return _Arrays(
        gpu=np.asarray(gpu, dtype=np.float64) * np.ones_like(r),
        host=host,
        nvme_bytes=nvme_bytes,
        step=np.asarray(step, dtype=np.float64) * np.ones_like(r),
        compute=compute,
        pcie_s=pcie_s,
        cpu_s=cpu_s,
        nvme_s=nvme_s,
    )


def _plan_at(x: OffloadInputs, a: _Arrays, opt: Tier, par: Tier, i: int) -> OffloadPlan:
    fits = bool(a.gpu[i] <= x.gpu_bytes and a.host <= x.host_bytes)
    loads = {"gpu": float(a.compute[i]), "pcie": a.pcie_s, "cpu": a.cpu_s, "nvme": a.nvme_s}
    return OffloadPlan(
        optimizer_on=opt,
        params_on=par,
        recompute_layers=i,
        n_layers=x.n_layers,
        gpu_bytes=float(a.gpu[i]),
        host_bytes=a.host,
        nvme_bytes=a.nvme_bytes,
        fits=fits,
        step_s=float(a.step[i]),
        compute_s=float(a.compute[i]),
        pcie_s=a.pcie_s,
        cpu_step_s=a.cpu_s,
        nvme_s=a.nvme_s,
        bottleneck=max(loads, key=loads.__getitem__),
    )


def plan_at(
    x: OffloadInputs,
    cpu_adam: CpuAdamModel,
    *,
    optimizer_on: Tier,
    params_on: Tier,
    recompute_layers: int,
) -> OffloadPlan:
    """One given plan (placement and recomputed layers), priced."""
    if (optimizer_on, params_on) not in PLACEMENTS:
        raise InvalidSpecError(
            "placement", f"must be one of {PLACEMENTS}", got=(optimizer_on, params_on)
        )
    if not 0 <= recompute_layers <= x.n_layers:
        raise InvalidSpecError(
            "recompute_layers", f"must be in [0, {x.n_layers}]", got=recompute_layers
        )
    a = _arrays(x, cpu_adam, optimizer_on, params_on)
    return _plan_at(x, a, optimizer_on, params_on, recompute_layers)


def _placement(x: OffloadInputs, cpu_adam: CpuAdamModel, opt: Tier, par: Tier) -> OffloadPlan:
    """One placement's fastest plan that fits (the fewest recomputed layers, vectorised over
    r = 0..L), else its smallest (every layer recomputed)."""
    a = _arrays(x, cpu_adam, opt, par)
    fits = (a.gpu <= x.gpu_bytes) & (a.host <= x.host_bytes)
    # recomputing fewer layers is faster: the first r that fits, else all (least GPU memory)
    i = int(np.argmax(fits)) if fits.any() else x.n_layers
    return _plan_at(x, a, opt, par, i)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadChoice:
    """The fastest plan that fits (``best``; None when none does) and every placement's
    fastest plan that fits, else its smallest (``per_placement``)."""

    best: OffloadPlan | None
    per_placement: tuple[OffloadPlan, ...]
    reason: str


def plan_offload(x: OffloadInputs, cpu_adam: CpuAdamModel) -> OffloadChoice:
    """The fastest memory plan that fits GPU and host memory (module docstring)."""
    per: list[OffloadPlan] = []
    for opt, par in PLACEMENTS:
        if x.nvme_gbps is None and "nvme" in (opt, par):
            continue
        per.append(_placement(x, cpu_adam, opt, par))
    fitting = [p for p in per if p.fits]
    best = min(fitting, key=lambda p: (p.step_s, p.offloaded)) if fitting else None
    if best is not None:
        reason = (
            f"{best.name}: {best.gpu_bytes / 2**30:.1f} of {x.gpu_bytes / 2**30:.1f} GiB GPU, "
            f"{best.host_bytes / 2**30:.1f} of {x.host_bytes / 2**30:.1f} GiB host; step "
            f"{best.step_s:.3g} s (bound by {best.bottleneck})"
        )
    else:
        small = min(per, key=lambda p: p.gpu_bytes)
        why = "GPU" if small.gpu_bytes > x.gpu_bytes else "host"
        reason = (
            f"no memory plan fits: the smallest on the GPU, {small.name}, needs "
            f"{small.gpu_bytes / 2**30:.1f} GiB GPU ({x.gpu_bytes / 2**30:.1f} usable) and "
            f"{small.host_bytes / 2**30:.1f} GiB host ({x.host_bytes / 2**30:.1f} per GPU); "
            f"the {why} memory is too small"
        )
    return OffloadChoice(best=best, per_placement=tuple(per), reason=reason)

"""One training or inference step of a workload, as a zero-argument callable.

``make_step`` builds the model, the optimizer and one synthetic batch on the device, once;
each call of the returned :class:`StepRunner` then runs exactly one step on that same batch:

* ``train``: forward, loss, backward, optimizer step (SGD with momentum 0.9 by default, or
  Adam), with gradients set to ``None`` before each step;
* ``infer``: forward in evaluation mode under ``torch.inference_mode``.

Precision: ``fp32`` runs as is; ``bf16`` and ``fp16`` run under ``torch.autocast`` for the
device (mixed precision: fp32 weights, lower-precision matmuls and convolutions); ``fp16``
training scales the loss with a ``GradScaler``. The runner does not synchronise the device:
timing (events, synchronisation) is the harness's job.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Literal

import torch
from torch import nn

from gpucast.domain.errors import DeviceUnavailableError, InvalidSpecError
from gpucast.domain.workload import WorkloadSpec
from gpucast.workloads.base import Workload

OPTIMIZERS = ("sgd", "adam")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
SEED = 0


def check_device(device: torch.device) -> None:
    """Raise DeviceUnavailableError if ``device`` does not exist on this machine."""
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                "device cuda: no CUDA GPU is visible on this machine",
                fix="use --device cpu, or check CUDA_VISIBLE_DEVICES and the driver",
            )
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise DeviceUnavailableError(
                f"device {device}: only {torch.cuda.device_count()} CUDA device(s) are visible",
                fix=f"use cuda:0 to cuda:{torch.cuda.device_count() - 1}",
            )
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise DeviceUnavailableError("device mps: MPS is not available", fix="use --device cpu")


def autocast_for(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    """The autocast context for ``precision`` on ``device`` (a no-op for fp32).

    Raises InvalidSpecError when the device cannot autocast to that precision.
    """
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = _DTYPES[precision]
    unsupported = InvalidSpecError(
        "precision",
        f"{precision} autocast is not supported on {device.type}",
        fix="use --precision fp32 (or bf16 on CPU), or a device that supports it",
    )
    if not torch.amp.is_autocast_available(device.type):
        raise unsupported
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns and disables autocast when unsupported
        probe = torch.autocast(device.type, dtype=dtype)
        with probe:
            enabled = torch.is_autocast_enabled(device.type)
    if not enabled:
        raise unsupported
    return torch.autocast(device.type, dtype=dtype)


def make_optimizer(name: str, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """SGD with momentum 0.9 (``sgd``) or Adam (``adam``) over ``params``."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    raise InvalidSpecError("optimizer", f"must be one of {', '.join(OPTIMIZERS)}", got=name)


class StepRunner:
    """Runs one step per call on a batch that stays on the device.

    ``samples_per_step`` is the batch size; ``model`` the module (for parameter counts).
    """

    def __init__(
        self,
        *,
        workload: Workload,
        spec: WorkloadSpec,
        mode: Literal["train", "infer"],
        device: torch.device,
        optimizer: str,
    ) -> None:
        self.workload = workload
        self.spec = spec
        self.mode = mode
        self.device = device
        self.samples_per_step = spec.batch_size
        self._autocast_device = device
        autocast_for(device, spec.precision)  # fail now, not in the first step
        cuda_devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda_devices):
            torch.manual_seed(SEED)
            self.model: nn.Module = workload.build_model(device).to(device)
            self.inputs, self.target = workload.make_batch(spec.batch_size, device)
        self.optimizer: torch.optim.Optimizer | None = None
        #: the last training step's loss, kept on the device (read once, by loss_warning)
        self.last_loss: torch.Tensor | None = None
        self.scaler: torch.amp.GradScaler | None = None
        if mode == "train":
            self.model.train()
            trainable = [p for p in self.model.parameters() if p.requires_grad]
            if not trainable:
                raise InvalidSpecError(
                    "workload",
                    f"{workload.name} has no trainable parameters, so a training step has "
                    "nothing to update",
                    fix=f"time its inference instead: gpucast measure infer {workload.name}",
                )
            self.optimizer = make_optimizer(optimizer, trainable)
            if spec.precision == "fp16":
                self.scaler = torch.amp.GradScaler(device.type)
        else:
            self.model.eval()

    @property
    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def __call__(self) -> None:
        if self.mode == "train":
            self._train_step()
        else:
            self._infer_step()

    def _train_step(self) -> None:
        assert self.optimizer is not None
        self.optimizer.zero_grad(set_to_none=True)
        with autocast_for(self.device, self.spec.precision):
            output = self.model(*self.inputs)
            loss = self.workload.loss(output, self.target)
        self.last_loss = loss.detach()
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()

    def loss_warning(self) -> str | None:
        """A line where the last training step's loss is NaN or inf (``None`` where it is
        finite, or no training step ran). Read after timing: it waits for the device."""
        if self.last_loss is None or bool(torch.isfinite(self.last_loss).all()):
            return None
        return (
            f"the training loss is {self.last_loss.float().mean().item()} (not finite): the "
            "model's numbers are broken (NaN/inf weights, inputs or loss), and such a step may "
            "take a different path than a real one's; the time is kept as measured"
        )

    def _infer_step(self) -> None:
        with torch.inference_mode(), autocast_for(self.device, self.spec.precision):
            self.model(*self.inputs)


def make_step(
    workload: Workload,
    spec: WorkloadSpec,
    mode: Literal["train", "infer"],
    device: torch.device,
    *,
    optimizer: str = "sgd",
) -> StepRunner:
    """Build ``workload`` at ``spec``'s batch size and precision on ``device``; see module doc.

    Raises DeviceUnavailableError for a device this machine lacks and InvalidSpecError for a
    mode, precision or optimizer that cannot run.
    """
    if mode not in ("train", "infer"):
        raise InvalidSpecError("mode", "must be train or infer", got=mode)
    if optimizer not in OPTIMIZERS:
        raise InvalidSpecError(
            "optimizer", f"must be one of {', '.join(OPTIMIZERS)}", got=optimizer
        )
    device = torch.device(device)
    check_device(device)
    return StepRunner(workload=workload, spec=spec, mode=mode, device=device, optimizer=optimizer)

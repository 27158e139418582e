"""What every rank knows about itself, and the step pieces the strategies share."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from gpucast.domain.distributed import DistributedConfig, RankResult
from gpucast.domain.workload import WorkloadSpec
from gpucast.measure.devices import device_label, synchronize
from gpucast.workloads.steps import StepRunner, autocast_for


@dataclass(frozen=True, slots=True, kw_only=True)
class RankContext:
    """One rank's place in the job (from torchrun's environment) and its job description."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    config: DistributedConfig
    spec: WorkloadSpec  # the spec of *this* rank (its own batch size)
    optimizer: str
    device: torch.device
    host: str
    control: Any  # a gloo process group for barriers, object gathers and PS traffic

    @property
    def label(self) -> str:
        return device_label(self.device)

    @property
    def total_steps(self) -> int:
        return self.config.warmup_steps + self.config.steps


def now(device: torch.device) -> float:
    """``perf_counter`` after every queued kernel on ``device`` has finished."""
    synchronize(device)
    return time.perf_counter()


def forward_backward(model: nn.Module, runner: StepRunner, *, scale: bool = True) -> None:
    """Forward, loss and backward of ``runner``'s batch through ``model`` (maybe wrapped)."""
    with autocast_for(runner.device, runner.spec.precision):
        output = model(*runner.inputs)
        loss = runner.workload.loss(output, runner.target)
    if scale and runner.scaler is not None:
        runner.scaler.scale(loss).backward()
    else:
        loss.backward()


def optimizer_step(runner: StepRunner, optimizer: torch.optim.Optimizer | None = None) -> None:
    opt = optimizer or runner.optimizer
    assert opt is not None
    if runner.scaler is not None:
        runner.scaler.step(opt)
        runner.scaler.update()
    else:
        opt.step()


def barrier(ctx: RankContext) -> None:
    dist.barrier(group=ctx.control)


def trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def worker_result(
    ctx: RankContext, steps: list[float], compute: list[float], comm: list[float], *,
    bytes_per_step: float, n_parameters: int,
) -> RankResult:  # fmt: skip
    """A worker rank's result: its measured steps' times, and the bytes it sends per step
    (as many as it receives)."""
    return RankResult(
        rank=ctx.rank,
        role="worker",
        device=ctx.label,
        host=ctx.host,
        batch_size=ctx.spec.batch_size,
        step_times_s=tuple(steps),
        compute_times_s=tuple(compute),
        comm_times_s=tuple(comm),
        bytes_sent_per_step=bytes_per_step,
        bytes_received_per_step=bytes_per_step,
        n_parameters=n_parameters,
    )

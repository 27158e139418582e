"""DDP and FSDP ranks: time each step with and without communication, and the collectives alone.

Per step a rank runs (after warm-up, every step is recorded):

1. the *compute-only* step: DDP -- forward and backward under ``no_sync()`` (no gradient
   all-reduce); FSDP -- forward and backward of an unsharded local replica of the model;
2. a barrier, then the *real* step: forward, backward (with its communication) and the
   optimizer step; the step time runs from the barrier to the end of the optimizer step, so
   it includes waiting for the slowest rank, as training does;
3. a barrier, then the step's collectives *alone*: DDP -- an all-reduce of a gradient-sized
   buffer in ``bucket_cap_mb`` chunks; FSDP -- two all-gathers of the parameters and one
   reduce-scatter of the gradients.

``compute = compute-only forward/backward + optimizer step``; exposed communication is what
the real step adds to it. Bytes: DDP counts the bytes of the gradient buckets its comm hook
reduces per step (ring all-reduce sends ``2 (n-1)/n`` of them per rank); FSDP counts its local
shard bytes (each all-gather sends ``(n-1)`` shards; the reduce-scatter as many).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from gpucast.domain.distributed import RankResult
from gpucast.measure.distributed._context import (
    RankContext,
    barrier,
    forward_backward,
    now,
    optimizer_step,
    trainable,
    worker_result,
)
from gpucast.workloads.steps import StepRunner, make_optimizer


def _chunks(total_numel: int, chunk_numel: int, device: torch.device) -> list[torch.Tensor]:
    sizes = [chunk_numel] * (total_numel // chunk_numel)
    if total_numel % chunk_numel:
        sizes.append(total_numel % chunk_numel)
    return [torch.ones(n, device=device, dtype=torch.float32) for n in sizes]


def run_ddp(ctx: RankContext, runner: StepRunner) -> RankResult:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = ctx.device
    ddp = DDP(
        runner.model,
        device_ids=[device] if device.type == "cuda" else None,
        bucket_cap_mb=ctx.config.bucket_cap_mb,
    )
    reduced_bytes = [0]

    def counting_hook(state: Any, bucket: Any) -> torch.futures.Future[torch.Tensor]:
        buffer = bucket.buffer()
        reduced_bytes[0] += buffer.numel() * buffer.element_size()
        return default_hooks.allreduce_hook(state, bucket)

    # DDP inspects the hook's annotations, which `from __future__ import annotations` made
    # strings; give it the real types.
    counting_hook.__annotations__ = {
        "state": object,
        "bucket": dist.GradBucket,
        "return": torch.futures.Future[torch.Tensor],
    }
    ddp.register_comm_hook(None, counting_hook)
    opt = runner.optimizer
    assert opt is not None
    grad_numel = sum(p.numel() for p in trainable(runner.model))
    chunk_numel = max(int(ctx.config.bucket_cap_mb * 1024 * 1024 // 4), 1)
    buffers = _chunks(grad_numel, chunk_numel, device)

    steps: list[float] = []
    compute: list[float] = []
    comm: list[float] = []
    for i in range(ctx.total_steps):
        if i == ctx.config.warmup_steps:
            reduced_bytes[0] = 0
        opt.zero_grad(set_to_none=True)
        t0 = now(device)
        with ddp.no_sync():
            forward_backward(ddp, runner)
        local_fb = now(device) - t0
        opt.zero_grad(set_to_none=True)
        barrier(ctx)
        t1 = now(device)
        forward_backward(ddp, runner)
        t2 = now(device)
        optimizer_step(runner)
        t3 = now(device)
        barrier(ctx)
        t4 = now(device)
        for buf in buffers:
            dist.all_reduce(buf)
        t5 = now(device)
        if i >= ctx.config.warmup_steps:
            steps.append(t3 - t1)
            compute.append(local_fb + (t3 - t2))
            comm.append(t5 - t4)
    payload = reduced_bytes[0] / ctx.config.steps
    n = ctx.world_size
    wire = 2.0 * (n - 1) / n * payload
    return worker_result(ctx, steps, compute, comm, bytes_per_step=wire, n_parameters=grad_numel)


def _shard_children(model: nn.Module, fully_shard: Any) -> None:
    """FSDP2 wrapping as a user would: each direct child holding parameters, then the root."""
    for child in model.children():
        if any(p.requires_grad for p in child.parameters()):
            fully_shard(child)
    fully_shard(model)


def run_fsdp(ctx: RankContext, runner: StepRunner) -> RankResult:
    from torch.distributed.fsdp import fully_shard

    device = ctx.device
    local = runner.model  # the unsharded replica times compute alone
    sharded = copy.deepcopy(local)
    _shard_children(sharded, fully_shard)
    sharded_opt = make_optimizer(ctx.optimizer, trainable(sharded))
    local_opt = runner.optimizer
    assert local_opt is not None

    n = ctx.world_size
    full_numel = sum(p.numel() for p in trainable(local))
    shard_numel = sum(math.ceil(p.numel() / n) for p in trainable(local))
    shard = torch.ones(shard_numel, device=device)
    gathered = torch.empty(shard_numel * n, device=device)
    scattered = torch.empty(shard_numel, device=device)
    reduce_scatter_ok = _probe_reduce_scatter(ctx, gathered, scattered)

    steps: list[float] = []
    compute: list[float] = []
    comm: list[float] = []
    for i in range(ctx.total_steps):
        local_opt.zero_grad(set_to_none=True)
        t0 = now(device)
        forward_backward(local, runner)
        optimizer_step(runner, local_opt)
        local_s = now(device) - t0
        sharded_opt.zero_grad(set_to_none=True)
        barrier(ctx)
        t1 = now(device)
        forward_backward(sharded, runner)
        optimizer_step(runner, sharded_opt)
        t2 = now(device)
        barrier(ctx)
        t3 = now(device)
        dist.all_gather_into_tensor(gathered, shard)  # forward
        dist.all_gather_into_tensor(gathered, shard)  # backward
        if reduce_scatter_ok:
            dist.reduce_scatter_tensor(scattered, gathered)
        else:  # gloo builds without reduce-scatter: all-reduce moves twice the bytes
            dist.all_reduce(gathered)
        t4 = now(device)
        if i >= ctx.config.warmup_steps:
            steps.append(t2 - t1)
            compute.append(local_s)
            comm.append(t4 - t3)
    shard_bytes = shard_numel * 4.0
    wire = 3.0 * (n - 1) * shard_bytes
    return worker_result(ctx, steps, compute, comm, bytes_per_step=wire, n_parameters=full_numel)


def _probe_reduce_scatter(ctx: RankContext, full: torch.Tensor, out: torch.Tensor) -> bool:
    """Whether this backend has reduce-scatter; every rank must agree, so agree by all-reduce."""
    try:
        dist.reduce_scatter_tensor(out, full)
        ok = 1.0
    except (RuntimeError, NotImplementedError):
        ok = 0.0
    flag = torch.tensor([ok])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=ctx.control)
    return bool(flag.item() == 1.0)

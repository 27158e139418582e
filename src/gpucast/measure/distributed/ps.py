"""A real parameter server over torch.distributed point-to-point messages (gloo).

Ranks ``0 .. k-1`` are PS shards; the other ranks are workers. Parameter tensors are placed
whole on shards, largest first onto the least-loaded shard (:func:`assign_shards`, as
TensorFlow's greedy load balancer does). Each shard keeps its tensors as one flat fp32 buffer
with its own optimizer (the workload's optimizer: SGD with momentum by default).

Worker step: forward and backward on its own device (compute), then for every shard it
flattens that shard's gradients to the CPU and ``isend``s them (push), ``irecv``s the shard's
current parameters (pull), and copies them into the model (communication).

* **Synchronous**: a shard waits for all workers' gradients, averages them, applies one
  optimizer step and sends the new parameters to every worker.
* **Asynchronous**: a shard receives from any worker (``recv`` with no source), applies that
  worker's gradient at once and replies to it with the current parameters.

A shard records its busy time per update (apply + reply), so its utilisation -- busy over
wall time -- shows when the PS is the bottleneck, as in the CM-DARE measurements. The PS
always runs on the CPU and talks gloo, as PS servers do; workers on GPUs copy across.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import torch.distributed as dist

from gpucast.domain.distributed import RankResult
from gpucast.domain.errors import InvalidSpecError
from gpucast.measure.distributed._context import (
    RankContext,
    forward_backward,
    now,
    trainable,
    worker_result,
)
from gpucast.workloads.base import Workload
from gpucast.workloads.steps import SEED, StepRunner, make_optimizer

_PUSH_TAG = 1
_PULL_TAG = 2


def assign_shards(numels: Sequence[int], shards: int) -> list[int]:
    """The shard of each tensor: largest first onto the shard holding the fewest elements.

    Ties go to the lowest shard, so every rank computes the same placement. A shard may stay
    empty when there are fewer tensors than shards (it then serves no bytes).
    """
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise InvalidSpecError("ps_shards", "must be an integer >= 1", got=shards)
    load = [0] * shards
    placement = [0] * len(numels)
    for index in sorted(range(len(numels)), key=lambda i: (-numels[i], i)):
        target = min(range(shards), key=lambda s: (load[s], s))
        placement[index] = target
        load[target] += int(numels[index])
    return placement


def _layout(numels: Sequence[int], shards: int) -> list[list[int]]:
    placement = assign_shards(numels, shards)
    return [[i for i, s in enumerate(placement) if s == shard] for shard in range(shards)]


def run_ps_worker(ctx: RankContext, runner: StepRunner) -> RankResult:
    device = ctx.device
    params = trainable(runner.model)
    layout = _layout([p.numel() for p in params], ctx.config.ps_shards)
    live = [s for s in range(len(layout)) if layout[s]]
    push = {s: torch.empty(sum(params[i].numel() for i in layout[s])) for s in live}
    pull = {s: torch.empty_like(push[s]) for s in live}
    sent = float(sum(b.numel() * b.element_size() for b in push.values()))

    steps: list[float] = []
    compute: list[float] = []
    comm: list[float] = []
    for i in range(ctx.total_steps):
        for p in params:
            p.grad = None
        t0 = now(device)
        forward_backward(runner.model, runner, scale=False)
        t1 = now(device)
        requests = []
        for s in live:
            grads = [
                params[j].grad if params[j].grad is not None else torch.zeros_like(params[j])
                for j in layout[s]
            ]
            push[s].copy_(torch.cat([g.detach().reshape(-1).float() for g in grads]))
            requests.append(dist.isend(push[s], dst=s, group=ctx.control, tag=_PUSH_TAG))
            requests.append(dist.irecv(pull[s], src=s, group=ctx.control, tag=_PULL_TAG))
        for request in requests:
            request.wait()
        with torch.no_grad():
            for s in live:
                offset = 0
                for j in layout[s]:
                    n = params[j].numel()
                    params[j].copy_(pull[s][offset : offset + n].view_as(params[j]))
                    offset += n
        t2 = now(device)
        if i >= ctx.config.warmup_steps:
            steps.append(t2 - t0)
            compute.append(t1 - t0)
            comm.append(t2 - t1)
    return worker_result(
        ctx, steps, compute, comm, bytes_per_step=sent, n_parameters=sum(p.numel() for p in params)
    )


def run_ps_shard(ctx: RankContext, workload: Workload) -> RankResult:
    """Serve shard ``ctx.rank`` until every worker has done every step."""
    cpu = torch.device("cpu")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)  # the same initial values the workers build
        model = workload.build_model(cpu)
    params = trainable(model)
    layout = _layout([p.numel() for p in params], ctx.config.ps_shards)
    mine = layout[ctx.rank]
    workers = list(range(ctx.config.n_ps, ctx.world_size))
    if not mine:
        return RankResult(rank=ctx.rank, role="ps", device="cpu", host=ctx.host)
    flat = torch.nn.Parameter(torch.cat([params[j].detach().reshape(-1) for j in mine]))
    optimizer = make_optimizer(ctx.optimizer, [flat])
    total = ctx.total_steps
    spans: list[tuple[float, float]] = []
    if ctx.config.sync:
        grads = {w: torch.empty_like(flat) for w in workers}
        for _ in range(total):
            receives = [
                dist.irecv(grads[w], src=w, group=ctx.control, tag=_PUSH_TAG) for w in workers
            ]
            for request in receives:
                request.wait()
            start = time.perf_counter()
            flat.grad = torch.stack(list(grads.values())).mean(dim=0)
            optimizer.step()
            reply = flat.detach().clone()
            sends = [dist.isend(reply, dst=w, group=ctx.control, tag=_PULL_TAG) for w in workers]
            for request in sends:
                request.wait()
            spans.append((start, time.perf_counter()))
        skip = ctx.config.warmup_steps
    else:
        grad = torch.empty_like(flat)
        for _ in range(total * len(workers)):
            sender = dist.recv(grad, src=None, group=ctx.control, tag=_PUSH_TAG)
            start = time.perf_counter()
            flat.grad = grad
            optimizer.step()
            dist.send(flat.detach(), dst=int(sender), group=ctx.control, tag=_PULL_TAG)
            spans.append((start, time.perf_counter()))
        skip = ctx.config.warmup_steps * len(workers)
    kept = spans[skip:] if len(spans) > skip else spans
    return RankResult(
        rank=ctx.rank,
        role="ps",
        device="cpu",
        host=ctx.host,
        service_times_s=tuple(end - begin for begin, end in kept),
        wall_time_s=kept[-1][1] - kept[0][0],
        n_parameters=int(flat.numel()),
    )

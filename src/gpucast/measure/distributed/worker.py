"""One rank of a distributed measurement: ``python -m gpucast.measure.distributed.worker``.

Reads torchrun's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so it runs the same under
:func:`gpucast.measure.distributed.launch` and under ``torchrun``::

    torchrun --nproc-per-node 4 -m gpucast.measure.distributed.worker --job job.json \
        --out result.json

``job.json`` holds ``{"spec": {...}, "config": DistributedConfig.to_dict(), "optimizer":
"sgd"}``. Rank 0 gathers every rank's :class:`RankResult` over a gloo group and writes the
result JSON to ``--out``; a rank that fails writes its error to ``--out`` + ``.rank<N>.error``
and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gpucast.domain.distributed import DistributedConfig, RankResult
from gpucast.domain.errors import InvalidInputError
from gpucast.domain.workload import WorkloadSpec
from gpucast.measure.devices import resolve_device
from gpucast.measure.distributed._context import RankContext


def _env_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise InvalidInputError(
                f"${name} is not set", fix="run under gpucast's launcher or torchrun"
            )
        return default
    return int(value)


def pick_backend(config: DistributedConfig) -> str:
    """NCCL when every worker is on a CUDA device and the strategy is collective; else gloo.

    Decided from the config alone so that every rank picks the same backend.
    """
    if config.backend != "auto":
        return config.backend
    if config.strategy == "ps":
        return "gloo"

    def on_cuda(device: str) -> bool:
        return device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())

    return "nccl" if all(on_cuda(d) for d in config.devices) else "gloo"


def device_for(config: DistributedConfig, rank: int, local_rank: int) -> torch.device:
    """The device ``rank`` (``local_rank`` on its node) runs on: a PS shard on the CPU, a
    worker on its ``--devices`` entry (``auto``: ``cuda:LOCAL_RANK`` where CUDA is, else cpu)."""
    if config.role_of(rank) == "ps":
        return torch.device("cpu")
    text = config.device_of(rank)
    if text == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank % torch.cuda.device_count())
        return torch.device("cpu")
    if text == "cuda":
        return resolve_device(f"cuda:{local_rank % max(torch.cuda.device_count(), 1)}")
    return resolve_device(text)


def run_rank(job: dict[str, Any]) -> tuple[RankContext, RankResult, dict[str, Any]]:
    """Join the job, measure this rank, and return its result (every rank)."""
    from gpucast.measure.distributed.collective import run_ddp, run_fsdp
    from gpucast.measure.distributed.ps import run_ps_shard, run_ps_worker
    from gpucast.measure.environment import fingerprint
    from gpucast.workloads import get_workload
    from gpucast.workloads.steps import make_step

    config = DistributedConfig.from_dict(job["config"])
    base = job["spec"]
    rank = _env_int("RANK")
    world = _env_int("WORLD_SIZE")
    local_rank = _env_int("LOCAL_RANK", 0)
    local_world = _env_int("LOCAL_WORLD_SIZE", config.nproc_per_node)
    if world != config.world_size:
        raise InvalidInputError(
            f"WORLD_SIZE is {world} but the job has {config.world_size} processes",
            fix="launch nproc x nnodes processes",
        )
    device = device_for(config, rank, local_rank)
    if device.type == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(local_world, 1)))
    backend = pick_backend(config)
    if backend == "nccl":
        torch.cuda.set_device(device)
    timeout = timedelta(seconds=config.timeout_s)
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
    control = dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo")

    role = config.role_of(rank)
    batch = config.batch_size_of(rank) if role == "worker" else int(base["batch_size"])
    spec = WorkloadSpec(
        name=base["name"],
        batch_size=batch,
        precision=base["precision"],
        options=base.get("options", ()),
    )
    ctx = RankContext(
        rank=rank,
        world_size=world,
        local_rank=local_rank,
        local_world_size=local_world,
        config=config,
        spec=spec,
        optimizer=str(job.get("optimizer", "sgd")),
        device=device,
        host=socket.gethostname(),
        control=control,
    )
    workload = get_workload(spec.name, **dict(spec.options))
    extra: dict[str, Any] = {}
    if role == "ps":
        result = run_ps_shard(ctx, workload)
    else:
        runner = make_step(workload, spec, "train", device, optimizer=ctx.optimizer)
        params = [p for p in runner.model.parameters() if p.requires_grad]
        extra = {
            "n_parameters": sum(p.numel() for p in params),
            "n_tensors": len(params),
            "environment": fingerprint(device).to_dict(),
        }
        if config.strategy == "ddp":
            result = run_ddp(ctx, runner)
        elif config.strategy == "fsdp":
            result = run_fsdp(ctx, runner)
        else:
            result = run_ps_worker(ctx, runner)
    return ctx, result, extra


def gather(ctx: RankContext, result: RankResult, extra: dict[str, Any]) -> dict[str, Any] | None:
    """Rank 0 gets every rank's result and the first worker's model facts; others get None."""
    payload = {"rank": result.to_dict(), "extra": extra}
    objects: list[Any] | None = [None] * ctx.world_size if ctx.rank == 0 else None
    dist.gather_object(payload, objects, dst=0, group=ctx.control)
    if objects is None:
        return None
    first_worker = objects[ctx.config.n_ps]["extra"]
    return {
        "spec": None,
        "config": ctx.config.to_dict(),
        "ranks": [o["rank"] for o in objects],
        "created_at": datetime.now(UTC).isoformat(),
        **first_worker,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpucast.measure.distributed.worker")
    parser.add_argument("--job", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    job = json.loads(args.job.read_text())
    rank = int(os.environ.get("RANK", "0"))
    try:
        ctx, result, extra = run_rank(job)
        gathered = gather(ctx, result, extra)
        if gathered is not None:
            gathered["spec"] = job["spec"]
            tmp = args.out.with_suffix(args.out.suffix + ".tmp")
            tmp.write_text(json.dumps(gathered))
            os.replace(tmp, args.out)
        dist.barrier(group=ctx.control)
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        message = f"{type(exc).__name__}: {lines[0] if lines else ''}"
        error_file = args.out.with_name(f"{args.out.name}.rank{rank}.error")
        error_file.write_text(message + "\n\n" + traceback.format_exc())
        print(f"rank {rank}: {message}", file=sys.stderr)
        return 1
    return 0


def _exit_now(code: int) -> None:
    """Leave without interpreter teardown. Every rank has passed the final barrier (or written
    its error file), so nothing is lost; tearing down DDP's reducer and gloo's threads after
    that can abort the process ("terminate called without an active exception", exit -6) when
    a peer has already gone, which would fail a run that succeeded."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())

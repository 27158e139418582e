"""Bytes each rank really holds under ZeRO, counted in a real torch.distributed run (gloo, CPU).

:func:`measure_zero_memory` starts ``nproc`` processes (``torch.multiprocessing``, gloo over a
file rendezvous: no port), builds the same small transformer in each (an embedding, ``layers``
``nn.TransformerEncoderLayer`` blocks, a linear head; fp32), and trains ``steps`` steps with
Adam under ZeRO ``stage``:

* stage 1: ``DistributedDataParallel`` with ``ZeroRedundancyOptimizer`` (each rank keeps the
  Adam state of its share of the parameter tensors);
* stage 3: FSDP2 (``torch.distributed.fsdp.fully_shard`` on each block and the root: weights,
  gradients and Adam state sharded).

After the last step each rank counts the bytes of the tensors it holds: its parameters (the
local shard of a DTensor), their gradients, and its optimizer state (every tensor in
``optimizer.state``, the step counters included). Nothing is estimated: these are the tensors.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from gpucast.domain.errors import InvalidSpecError, MeasurementError

STAGES = (1, 3)


def _model(vocab: int, hidden: int, layers: int) -> nn.Module:
    torch.manual_seed(0)
    blocks = [
        nn.TransformerEncoderLayer(hidden, 4, 4 * hidden, dropout=0.0, batch_first=True)
        for _ in range(layers)
    ]
    return nn.Sequential(nn.Embedding(vocab, hidden), *blocks, nn.Linear(hidden, vocab))


def _local(t: torch.Tensor) -> torch.Tensor:
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _bytes(tensors: Any) -> int:
    return sum(_local(t).numel() * _local(t).element_size() for t in tensors)


def _worker(rank: int, world: int, init: str, cfg: dict[str, Any], out: str) -> None:
    # FSDP2 warns that a wrapped module returns a view; nothing here modifies one in place
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        model = _model(cfg["vocab"], cfg["hidden"], cfg["layers"])
        n_params = sum(p.numel() for p in model.parameters())
        if cfg["stage"] == 1:
            from torch.distributed.optim import ZeroRedundancyOptimizer
            from torch.nn.parallel import DistributedDataParallel

            net: nn.Module = DistributedDataParallel(model)
            opt: Any = ZeroRedundancyOptimizer(
                net.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3
            )
            state = opt.optim.state
        else:
            from torch.distributed.fsdp import fully_shard

            for block in list(model.children()):
                fully_shard(block)
            fully_shard(model)
            net = model
            opt = torch.optim.Adam(net.parameters(), lr=1e-3)
            state = opt.state
        gen = torch.Generator().manual_seed(rank)
        for _ in range(cfg["steps"]):
            tokens = torch.randint(0, cfg["vocab"], (2, cfg["seq_len"]), generator=gen)
            logits = net(tokens)
            loss = nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab"]), tokens.reshape(-1))
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        params = list(net.parameters())
        held = {
            "rank": rank,
            "n_params": n_params,
            "n_tensors": len(params),
            "weights_bytes": _bytes(params),
            "gradients_bytes": _bytes(p.grad for p in params if p.grad is not None),
            "optimizer_bytes": _bytes(
                v for s in state.values() for v in s.values() if isinstance(v, torch.Tensor)
            ),
        }
        Path(out, f"rank{rank}.txt").write_text(repr(held))
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    # Leave without interpreter teardown, as gpucast.measure.distributed.worker does: every
    # rank has passed the barrier with its file written, and tearing down DDP's reducer and
    # gloo's threads after a peer has gone can abort the process ("terminate called without an
    # active exception"), which would fail a run that succeeded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def measure_zero_memory(
    stage: int,
    *,
    nproc: int = 2,
    hidden: int = 128,
    layers: int = 4,
    vocab: int = 1000,
    seq_len: int = 16,
    steps: int = 2,
) -> list[dict[str, int]]:
    """Per rank: parameters, parameter tensors, and the bytes of weights, gradients and
    optimizer state it holds after ``steps`` Adam steps under ZeRO ``stage`` (module doc)."""
    import ast

    import torch.multiprocessing as mp

    if stage not in STAGES:
        raise InvalidSpecError(
            "stage", "must be 1 (ZeroRedundancyOptimizer) or 3 (FSDP2)", got=stage
        )
    if isinstance(nproc, bool) or not 2 <= nproc <= 8:
        raise InvalidSpecError("nproc", "must be an integer in [2, 8]", got=nproc)
    if hidden % 4 or hidden < 8:
        raise InvalidSpecError("hidden", "must be a multiple of 4 heads, >= 8", got=hidden)
    cfg = {
        "stage": stage,
        "hidden": hidden,
        "layers": layers,
        "vocab": vocab,
        "seq_len": seq_len,
        "steps": steps,
    }
    with tempfile.TemporaryDirectory(prefix="gpucast-zero-") as tmp:
        init = f"file://{os.path.join(tmp, 'rendezvous')}"
        try:
            mp.spawn(_worker, args=(nproc, init, cfg, tmp), nprocs=nproc, join=True)
        except Exception as exc:  # a rank's failure arrives as ProcessRaisedException
            raise MeasurementError(f"ZeRO stage {stage} run failed: {exc}") from None
        return [ast.literal_eval(Path(tmp, f"rank{r}.txt").read_text()) for r in range(nproc)]

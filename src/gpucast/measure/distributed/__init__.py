"""Distributed measurement: DDP, FSDP and parameter-server training over torch.distributed.

:func:`launch` starts the ranks of this node as ``python -m gpucast.measure.distributed.worker``
processes with torchrun's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``), so the worker module also runs under ``torchrun`` itself.
Rank 0 gathers every rank's samples over torch.distributed and writes one result.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucast.measure.distributed.launcher import launch, measure_distributed
    from gpucast.measure.distributed.ps import assign_shards
    from gpucast.measure.distributed.scaling import cluster_frame, fit_cluster_model

#: Where each public name lives (loaded on first use: ``._proc`` needs no torch).
_HOME = {
    "assign_shards": "ps",
    "cluster_frame": "scaling",
    "fit_cluster_model": "scaling",
    "launch": "launcher",
    "measure_distributed": "launcher",
}

__all__ = ["assign_shards", "cluster_frame", "fit_cluster_model", "launch", "measure_distributed"]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"gpucast.measure.distributed.{_HOME[name]}"), name)
    raise AttributeError(f"module 'gpucast.measure.distributed' has no attribute {name!r}")

"""A user workload whose rank 1 crashes while building it (for failure tests)."""

from __future__ import annotations

import os

import torch
from torch import nn


def factory() -> tuple[nn.Module, torch.Tensor]:
    if os.environ.get("RANK") == "1":
        raise RuntimeError("rank 1 cannot build its model")
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(4, 8)

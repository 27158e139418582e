"""A user workload that kills its campaign point's process (for crash-isolation tests).

It exits only inside a campaign point's child (``$GPUCAST_CAMPAIGN_POINT``) while
``$GPUCAST_TEST_CRASH`` is set, so loading the sweep and retrying without it work.
"""

from __future__ import annotations

import os

import torch
from torch import nn


def factory() -> tuple[nn.Module, torch.Tensor]:
    if os.environ.get("GPUCAST_CAMPAIGN_POINT") and os.environ.get("GPUCAST_TEST_CRASH"):
        os._exit(7)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(4, 8)

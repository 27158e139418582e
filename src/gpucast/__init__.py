"""gpucast: measure, model, predict and plan deep-learning workloads on GPU clusters."""

from __future__ import annotations

__version__ = "0.1.0"

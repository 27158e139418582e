"""gpucast: measure, model, predict and plan deep-learning workloads on GPU clusters.

Python API (the CLI is a thin shell over it)::

    import gpucast
    prof = gpucast.profile("resnet50", batch_size=64)          # WorkloadProfile
    meas = gpucast.measure("mlp", batch_size=64, device="cpu")  # Measurement
    cat = gpucast.catalog.load_catalog()                        # GPU specs and offers

Subpackages are imported lazily, so ``import gpucast`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = frozenset(
    {
        "catalog",
        "profile",
        "measure",
        "store",
        "predict",
        "simulate",
        "plan",
        "report",
        "workloads",
        "domain",
        "api",
    }
)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"gpucast.{name}")
    raise AttributeError(f"module 'gpucast' has no attribute {name!r}")

"""Fast simulators: Monte Carlo of training on transient clusters (:mod:`.transient`), the
serving discrete-event simulator (:mod:`.serving`) and arrival processes (:mod:`.arrivals`).

The names below load :mod:`.transient` on first use, so ``import gpucast.simulate.serving``
does not pay for the training Monte Carlo (and pandas) it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucast.simulate.transient import (
        Sampler,
        SpeedFunction,
        SpeedTable,
        empirical_sampler,
        simulate_runs,
        simulate_scenario,
    )

__all__ = [
    "Sampler",
    "SpeedFunction",
    "SpeedTable",
    "empirical_sampler",
    "simulate_runs",
    "simulate_scenario",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("gpucast.simulate.transient"), name)
    raise AttributeError(f"module 'gpucast.simulate' has no attribute {name!r}")

"""gpucast: measure, model, predict and plan deep-learning workloads on GPU clusters.

The Python API is one function per CLI verb (:mod:`gpucast.app`), re-exported here::

    import gpucast
    prof = gpucast.profile_workload("resnet50", batch_size=64)      # WorkloadProfile
    plan = gpucast.plan_train(workload="resnet50", epochs=90, dataset_size=1281167)
    sim = gpucast.simulate_train(gpu="K80", workers=4, region="us-east1", spot=True,
                                 workload="cifar-resnet32", steps=64000)

Requests, results and errors are typed; a bad option raises one
:class:`gpucast.domain.errors.InvalidInputError` naming the field, the constraint and a fix
(the same line the CLI prints). Everything loads lazily, so ``import gpucast`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from gpucast._version import __version__

_SUBPACKAGES = frozenset(
    {
        "app",
        "catalog",
        "domain",
        "inputs",
        "measure",
        "plan",
        "predict",
        "profile",
        "report",
        "simulate",
        "store",
        "workloads",
    }
)


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"gpucast.{name}")
    app = importlib.import_module("gpucast.app")
    if name in app.VERBS:
        return getattr(app, name)
    raise AttributeError(f"module 'gpucast' has no attribute {name!r}")


def __dir__() -> list[str]:
    app = importlib.import_module("gpucast.app")
    return sorted([*globals(), *_SUBPACKAGES, *app.VERBS])


__all__ = ["__version__"]

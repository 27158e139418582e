"""The application layer: one function per verb, the Python API the CLI is a shell over.

Every verb takes a typed request (or the same options as keyword arguments, flag or field
names, or a ``config=`` file) and returns a typed result with ``to_dict()`` (what ``--json``
prints) and, where tabular, ``to_frame()``. ``import gpucast`` re-exports them::

    import gpucast
    plan = gpucast.plan_train(workload="resnet50", epochs=90, dataset_size=1281167)
    sim = gpucast.simulate_train(gpu="K80", workers=4, region="us-east1", spot=True,
                                 workload="cifar-resnet32", steps=64000)

Verbs load lazily (``import gpucast`` stays cheap).
"""

from __future__ import annotations

import importlib
from typing import Any

#: verb -> module of gpucast.app that defines it (the one list of Python verbs)
VERBS: dict[str, str] = {
    "plan_train": "planning",
    "plan_serve": "serve",
    "plan_llm_train": "llm_plan",
    "plan_embeddings": "embeddings",
    "predict_embedding_cache": "embeddings",
    "simulate_train": "simulation",
    "simulate_serve": "serve",
    "simulate_llm_serve": "llm_serve",
    "plan_llm_serve": "llm_serve",
    "predict_train": "predict",
    "predict_speed": "predict",
    "predict_cluster": "predict",
    "predict_checkpoint": "predict",
    "predict_llm_train": "llm",
    "predict_infer": "infer",
    "predict_gnn": "gnn",
    "predict_energy": "energy",
    "fit_speed": "fit",
    "fit_cluster": "fit",
    "fit_checkpoint": "fit",
    "fit_lifetimes": "lifetimes",
    "fit_steptime": "steptime",
    "fit_power": "energy",
    "fit_variability": "variability",
    "validate": "validation",
    "profile_workload": "profile",
    "measure_train": "measure",
    "measure_infer": "measure",
    "measure_infer_curve": "curves",
    "measure_cmd": "program",
    "predict_cmd": "program",
    "catalog_gpus": "catalog",
    "catalog_offers": "catalog",
    "catalog_spot": "catalog",
    "catalog_systems": "catalog",
    "import_skypilot": "catalog",
    "catalog_mig": "catalog",
    "plan_placement": "placement",
    "runs_list": "runs",
    "runs_show": "runs",
    "runs_export": "runs",
    "campaign_run": "campaign",
    "campaign_status": "campaign",
    "write_report": "reports",
    "save_plan": "reports",
    "load_plan": "reports",
    "write_plan_report": "reports",
    "save_serve_plan": "reports",
    "write_serve_plan_report": "reports",
    # serverless inference (issue #19)
    "measure_coldstart": "coldstart",
    "predict_coldstart": "coldstart",
    "simulate_serverless": "serverless",
    "plan_serverless": "serverless",
    "simulate_kaas": "kaas",
    # training beyond GPU memory (issue #16, offload)
    "measure_optimizer": "offload",
    # per-operator / per-kernel prediction (issue #20, item 4)
    "predict_kernels": "kernels",
}

__all__ = sorted(VERBS)


def __getattr__(name: str) -> Any:
    module = VERBS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpucast.app' has no attribute {name!r}")
    return getattr(importlib.import_module(f"gpucast.app.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *VERBS])

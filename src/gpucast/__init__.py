"""gpucast: measure, model, predict and plan deep-learning workloads on GPU clusters.

The Python API is one function per CLI verb (:mod:`gpucast.app`), re-exported here::

    import gpucast
    prof = gpucast.profile_workload("resnet50", batch_size=64)  # ProfileResult (.profile)
    plan = gpucast.plan_train(workload="resnet50", epochs=90, dataset_size=1281167)
    sim = gpucast.simulate_train(gpu="K80", workers=4, region="us-east1", spot=True,
                                 workload="cifar-resnet32", steps=64000)

Requests, results and errors are typed; a bad option raises one
:class:`gpucast.InvalidInputError` naming the field, the constraint and a fix (the same line
the CLI prints); a run that fails raises :class:`gpucast.GpucastError`, the base of both.
Everything loads lazily, so ``import gpucast`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpucast._version import __version__

if TYPE_CHECKING:  # each verb's own signature for mypy and IDEs (QA 38 A #4); lazy at run time
    from gpucast.app import campaign_run as campaign_run
    from gpucast.app import campaign_status as campaign_status
    from gpucast.app import catalog_gpus as catalog_gpus
    from gpucast.app import catalog_mig as catalog_mig
    from gpucast.app import catalog_offers as catalog_offers
    from gpucast.app import catalog_spot as catalog_spot
    from gpucast.app import catalog_systems as catalog_systems
    from gpucast.app import fit_checkpoint as fit_checkpoint
    from gpucast.app import fit_cluster as fit_cluster
    from gpucast.app import fit_lifetimes as fit_lifetimes
    from gpucast.app import fit_power as fit_power
    from gpucast.app import fit_speed as fit_speed
    from gpucast.app import fit_steptime as fit_steptime
    from gpucast.app import fit_variability as fit_variability
    from gpucast.app import import_skypilot as import_skypilot
    from gpucast.app import load_plan as load_plan
    from gpucast.app import measure_cmd as measure_cmd
    from gpucast.app import measure_coldstart as measure_coldstart
    from gpucast.app import measure_infer as measure_infer
    from gpucast.app import measure_infer_curve as measure_infer_curve
    from gpucast.app import measure_optimizer as measure_optimizer
    from gpucast.app import measure_train as measure_train
    from gpucast.app import plan_embeddings as plan_embeddings
    from gpucast.app import plan_llm_serve as plan_llm_serve
    from gpucast.app import plan_llm_train as plan_llm_train
    from gpucast.app import plan_placement as plan_placement
    from gpucast.app import plan_serve as plan_serve
    from gpucast.app import plan_serverless as plan_serverless
    from gpucast.app import plan_train as plan_train
    from gpucast.app import predict_checkpoint as predict_checkpoint
    from gpucast.app import predict_cluster as predict_cluster
    from gpucast.app import predict_cmd as predict_cmd
    from gpucast.app import predict_coldstart as predict_coldstart
    from gpucast.app import predict_embedding_cache as predict_embedding_cache
    from gpucast.app import predict_energy as predict_energy
    from gpucast.app import predict_gnn as predict_gnn
    from gpucast.app import predict_infer as predict_infer
    from gpucast.app import predict_kernels as predict_kernels
    from gpucast.app import predict_llm_train as predict_llm_train
    from gpucast.app import predict_speed as predict_speed
    from gpucast.app import predict_train as predict_train
    from gpucast.app import profile_workload as profile_workload
    from gpucast.app import runs_delete as runs_delete
    from gpucast.app import runs_export as runs_export
    from gpucast.app import runs_import as runs_import
    from gpucast.app import runs_list as runs_list
    from gpucast.app import runs_show as runs_show
    from gpucast.app import save_plan as save_plan
    from gpucast.app import save_serve_plan as save_serve_plan
    from gpucast.app import simulate_kaas as simulate_kaas
    from gpucast.app import simulate_llm_serve as simulate_llm_serve
    from gpucast.app import simulate_serve as simulate_serve
    from gpucast.app import simulate_serverless as simulate_serverless
    from gpucast.app import simulate_train as simulate_train
    from gpucast.app import validate as validate
    from gpucast.app import write_plan_report as write_plan_report
    from gpucast.app import write_report as write_report
    from gpucast.app import write_serve_plan_report as write_serve_plan_report
    from gpucast.domain.errors import DataFormatError as DataFormatError
    from gpucast.domain.errors import GpucastError as GpucastError
    from gpucast.domain.errors import InvalidInputError as InvalidInputError
    from gpucast.domain.errors import InvalidSpecError as InvalidSpecError
    from gpucast.domain.errors import NoFeasiblePlanError as NoFeasiblePlanError
    from gpucast.domain.jsonable import json_text as json_text

#: What the README's Python API has a caller catch or call besides the verbs (name ->
#: module): the error family's base and bad-input classes, and the JSON ``--json`` prints.
#: Loaded on first use, as the verbs are.
NAMES: dict[str, str] = {
    "DataFormatError": "gpucast.domain.errors",
    "GpucastError": "gpucast.domain.errors",
    "InvalidInputError": "gpucast.domain.errors",
    "InvalidSpecError": "gpucast.domain.errors",
    "NoFeasiblePlanError": "gpucast.domain.errors",
    "json_text": "gpucast.domain.jsonable",
}

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
    if name in NAMES:
        return getattr(importlib.import_module(NAMES[name]), name)
    app = importlib.import_module("gpucast.app")
    if name in app.VERBS:
        return getattr(app, name)
    raise AttributeError(f"module 'gpucast' has no attribute {name!r}")


def __dir__() -> list[str]:
    app = importlib.import_module("gpucast.app")
    return sorted([*globals(), *_SUBPACKAGES, *app.VERBS, *NAMES])


__all__ = [
    "DataFormatError",
    "GpucastError",
    "InvalidInputError",
    "InvalidSpecError",
    "NoFeasiblePlanError",
    "__version__",
    "json_text",
]

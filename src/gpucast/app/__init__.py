"""The application layer: one function per verb, the Python API the CLI is a shell over.

Every verb takes a typed request (or the same options as keyword arguments, flag or field
names; a verb whose command takes ``--config`` also a ``config=`` file) and returns a typed
result with ``to_dict()`` (what ``--json`` prints) and, where tabular, ``to_frame()``.
``import gpucast`` re-exports them::

    import gpucast
    plan = gpucast.plan_train(workload="resnet50", epochs=90, dataset_size=1281167)
    sim = gpucast.simulate_train(gpu="K80", workers=4, region="us-east1", spot=True,
                                 workload="cifar-resnet32", steps=64000)

Verbs load lazily (``import gpucast`` stays cheap).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

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
    "runs_delete": "runs_edit",
    "runs_import": "runs_edit",
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

if TYPE_CHECKING:  # what mypy and IDEs see; at run time __getattr__ loads each verb lazily
    from gpucast.app.campaign import campaign_run as campaign_run
    from gpucast.app.campaign import campaign_status as campaign_status
    from gpucast.app.catalog import catalog_gpus as catalog_gpus
    from gpucast.app.catalog import catalog_mig as catalog_mig
    from gpucast.app.catalog import catalog_offers as catalog_offers
    from gpucast.app.catalog import catalog_spot as catalog_spot
    from gpucast.app.catalog import catalog_systems as catalog_systems
    from gpucast.app.catalog import import_skypilot as import_skypilot
    from gpucast.app.coldstart import measure_coldstart as measure_coldstart
    from gpucast.app.coldstart import predict_coldstart as predict_coldstart
    from gpucast.app.curves import measure_infer_curve as measure_infer_curve
    from gpucast.app.embeddings import plan_embeddings as plan_embeddings
    from gpucast.app.embeddings import predict_embedding_cache as predict_embedding_cache
    from gpucast.app.energy import fit_power as fit_power
    from gpucast.app.energy import predict_energy as predict_energy
    from gpucast.app.fit import fit_checkpoint as fit_checkpoint
    from gpucast.app.fit import fit_cluster as fit_cluster
    from gpucast.app.fit import fit_speed as fit_speed
    from gpucast.app.gnn import predict_gnn as predict_gnn
    from gpucast.app.infer import predict_infer as predict_infer
    from gpucast.app.kaas import simulate_kaas as simulate_kaas
    from gpucast.app.kernels import predict_kernels as predict_kernels
    from gpucast.app.lifetimes import fit_lifetimes as fit_lifetimes
    from gpucast.app.llm import predict_llm_train as predict_llm_train
    from gpucast.app.llm_plan import plan_llm_train as plan_llm_train
    from gpucast.app.llm_serve import plan_llm_serve as plan_llm_serve
    from gpucast.app.llm_serve import simulate_llm_serve as simulate_llm_serve
    from gpucast.app.measure import measure_infer as measure_infer
    from gpucast.app.measure import measure_train as measure_train
    from gpucast.app.offload import measure_optimizer as measure_optimizer
    from gpucast.app.placement import plan_placement as plan_placement
    from gpucast.app.planning import plan_train as plan_train
    from gpucast.app.predict import predict_checkpoint as predict_checkpoint
    from gpucast.app.predict import predict_cluster as predict_cluster
    from gpucast.app.predict import predict_speed as predict_speed
    from gpucast.app.predict import predict_train as predict_train
    from gpucast.app.profile import profile_workload as profile_workload
    from gpucast.app.program import measure_cmd as measure_cmd
    from gpucast.app.program import predict_cmd as predict_cmd
    from gpucast.app.reports import load_plan as load_plan
    from gpucast.app.reports import save_plan as save_plan
    from gpucast.app.reports import save_serve_plan as save_serve_plan
    from gpucast.app.reports import write_plan_report as write_plan_report
    from gpucast.app.reports import write_report as write_report
    from gpucast.app.reports import write_serve_plan_report as write_serve_plan_report
    from gpucast.app.runs import runs_export as runs_export
    from gpucast.app.runs import runs_list as runs_list
    from gpucast.app.runs import runs_show as runs_show
    from gpucast.app.runs_edit import runs_delete as runs_delete
    from gpucast.app.runs_edit import runs_import as runs_import
    from gpucast.app.serve import plan_serve as plan_serve
    from gpucast.app.serve import simulate_serve as simulate_serve
    from gpucast.app.serverless import plan_serverless as plan_serverless
    from gpucast.app.serverless import simulate_serverless as simulate_serverless
    from gpucast.app.simulation import simulate_train as simulate_train
    from gpucast.app.steptime import fit_steptime as fit_steptime
    from gpucast.app.validation import validate as validate
    from gpucast.app.variability import fit_variability as fit_variability


def __getattr__(name: str) -> Any:
    module = VERBS.get(name)
    if module is None:
        # a module of the package (``gpucast.app.predict.PredictTrainRequest``, as README writes)
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module 'gpucast.app' has no attribute {name!r}")
    return getattr(importlib.import_module(f"gpucast.app.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *VERBS])

"""The distributed-scaling model: fitted on CM-DARE's cluster runs, or the built-in constants.

:func:`cluster_model` is the one derivation: ``simulate train`` predicts with the
:class:`~gpucast.predict.cluster.ClusterModel` it returns, ``plan train`` takes its constants
through :func:`perf_params` (the vectorised planner needs numbers, not a model object).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.provenance import Sourced
from gpucast.inputs.data import data_path

if TYPE_CHECKING:
    from gpucast.plan.inputs import PerfParams
    from gpucast.predict.cluster import ClusterModel

_CLUSTER_PARAMS = (
    "ps_network_gbps",
    "bytes_per_parameter",
    "efficiency_prior_weight",
    "network_gbps",
    "gpus_per_node",
    "intra_node_gbps",
)


def fitted_cluster_model(folder: Path) -> tuple[ClusterModel, dict[str, Any]]:
    """:class:`ClusterModel` fitted on CM-DARE's ``cluster_scaling`` folder, through the fit
    cache; the facts say how many runs it was fitted on (``runs``)."""
    from gpucast.predict.cluster import ClusterModel
    from gpucast.store.cache import cached_fit

    def fit() -> tuple[ClusterModel, dict[str, Any]]:
        from gpucast.store.datasets.cmdare_cluster import cluster_fit_table

        table = cluster_fit_table(folder)
        return ClusterModel().fit(table.frame), {"runs": len(table.frame)}

    return cached_fit(
        "cluster",
        fit,
        model_type=ClusterModel,
        files=[folder],
        code=("gpucast.predict.comm", "gpucast.store.datasets.cmdare_cluster"),
    )


def _default_model() -> ClusterModel:
    """A :class:`ClusterModel` carrying the planner's built-in constants (no data at hand)."""
    from gpucast.plan.inputs import PerfParams
    from gpucast.predict.cluster import ClusterModel

    perf = PerfParams()
    defaults = ClusterModel()
    state = {
        "params": {
            **{k: getattr(defaults, k) for k in _CLUSTER_PARAMS},
            "bottleneck_utilization": perf.ps_bottleneck_utilization,
            "hop_latency_s": perf.hop_latency_s,
            "overlap_fraction": perf.overlap_fraction,
        },
        "network_efficiency": perf.ps_network_efficiency,
        "per_tensor_cost_s": perf.ps_per_tensor_cost_s,
        "log_residual_q10": perf.ps_log_residual_q10,
        "log_residual_q90": perf.ps_log_residual_q90,
        "cv_mape_pct": perf.ps_cv_mape_pct,
        "train_mape_pct": None,
        "single_worker_step_time_s": {},
        "models": [],
    }
    return ClusterModel.from_dict(
        {"kind": ClusterModel.kind, "schema_version": ClusterModel.schema_version, "state": state}
    )


def cluster_model(data_dir: Path | None) -> Sourced[ClusterModel]:
    """Fitted on ``cmdare/cluster_scaling`` under ``data_dir`` when it is there, else the
    built-in constants (:class:`gpucast.plan.inputs.PerfParams`)."""
    folder = data_path(data_dir, "cmdare", "cluster_scaling")
    if folder is not None and folder.is_dir():
        model, facts = fitted_cluster_model(folder)
        cv = "n/a" if model.cv_mape_pct_ is None else f"{model.cv_mape_pct_:.1f}%"
        return Sourced(
            model,
            f"ClusterModel fitted on {folder} ({facts['runs']} runs; NIC share "
            f"{model.network_efficiency_:.3f}, {1e6 * (model.per_tensor_cost_s_ or 0):.1f} us "
            f"per tensor; leave-one-model-out MAPE {cv})",
        )
    from gpucast.plan.inputs import PerfParams

    return Sourced(
        _default_model(),
        f"ClusterModel with {PerfParams().source} (no cmdare/cluster_scaling data given)",
    )


def perf_params(data_dir: Path | None) -> Sourced[PerfParams]:
    """The planner's communication and PS constants, from :func:`cluster_model`."""
    from gpucast.plan.inputs import PerfParams

    folder = data_path(data_dir, "cmdare", "cluster_scaling")
    if folder is None or not folder.is_dir():
        perf = with_collectives(PerfParams())
        return Sourced(perf, perf.source)
    model, facts = fitted_cluster_model(folder)
    perf = PerfParams.from_cluster_model(model, fitted_on=f"{folder} ({facts['runs']} rows)")
    perf = with_collectives(perf)
    return Sourced(perf, perf.source)


def with_collectives(perf: PerfParams) -> PerfParams:
    """``perf`` with the all-reduce constants of the shipped step-time model (TCP fitted on the
    Pollux traces; RDMA nominal) and the instance types whose network is RDMA-class
    (InfiniBand, RoCE or EFA in ``catalog/data/systems.csv``)."""
    import dataclasses

    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.catalog.systems import load_systems

    rdma = frozenset(s.name for s in load_systems() if s.rdma)
    shipped = shipped_step_time_model()
    if shipped is None:
        return dataclasses.replace(perf, rdma_instances=rdma)
    return dataclasses.replace(
        perf,
        collective_rdma=shipped.collective("rdma"),
        collective_tcp=shipped.collective("tcp"),
        rdma_instances=rdma,
        source=f"{perf.source}; all-reduce over TCP {shipped.collective('tcp').source}",
    )

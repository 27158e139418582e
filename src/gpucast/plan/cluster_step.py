"""One synchronous data-parallel step on a user's cluster, priced as ``plan train`` prices it.

``predict train --cluster`` asks for the step of one layout rather than a search: ``gpus``
GPUs of the cluster at a per-GPU batch. The layout is one of the planner's
(:func:`~gpucast.plan.space.cluster_offers`: 1..k GPUs of one node, or whole nodes) and the
row is evaluated by :func:`~gpucast.plan.evaluate.evaluate` with the planner's GPU table and
collective constants -- the roofline step of one GPU, the gradient all-reduce of
:func:`gpucast.predict.comm.hierarchical_collective_s`, the share hidden under the backward
pass -- so the two verbs cannot disagree. The work is one step (the global batch), so the
evaluation's training time is that step.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.plan.evaluate import Evaluation, Work, evaluate
from gpucast.plan.inputs import GpuPrecision, build_gpu_table
from gpucast.plan.space import DDP, OfferTable, Space, cluster_offers

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.systems import ClusterSpec
    from gpucast.plan.inputs import PerfParams
    from gpucast.predict.roofline import RooflineEfficiency


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterLayout:
    """Where ``gpus`` GPUs of a cluster sit: ``nodes`` nodes of ``gpus_per_node`` GPUs each,
    the planner's offer ``offer`` of :func:`~gpucast.plan.space.cluster_offers` (its label:
    ``instance_type``)."""

    gpus: int
    nodes: int
    gpus_per_node: int
    offer: int
    instance_type: str


def cluster_layout(cluster: ClusterSpec, gpus: int, offers: OfferTable) -> ClusterLayout:
    """``gpus`` GPUs laid out as the planner lays a cluster out: ``c`` GPUs of one node
    (``c`` <= its ``k``), or whole nodes; any other count is refused (the hierarchical
    all-reduce prices nodes of equal GPU counts)."""
    k = cluster.gpus_per_node
    if isinstance(gpus, bool) or not 1 <= gpus <= cluster.max_gpus:
        raise InvalidSpecError(
            "gpus",
            f"must be 1..{cluster.max_gpus}, the GPUs of the cluster {cluster.name}",
            got=gpus,
            fix=f"use --gpus {cluster.max_gpus} or fewer, or more nodes: --nodes N",
        )
    if gpus > k and gpus % k:
        lower, upper = gpus // k * k, min(-(-gpus // k) * k, cluster.max_gpus)
        raise InvalidSpecError(
            "gpus",
            f"is not a whole number of {k}-GPU nodes (plan train lays a cluster out as 1..{k} "
            "GPUs of one node or whole nodes)",
            got=gpus,
            fix=f"use --gpus {lower}" + (f" or {upper}" if upper != lower else ""),
        )
    per_node = min(gpus, k)
    offer = int(np.flatnonzero(offers.gpus_per_node == per_node)[0])
    return ClusterLayout(
        gpus=gpus,
        nodes=gpus // per_node,
        gpus_per_node=per_node,
        offer=offer,
        instance_type=offers.instance_type[offer],
    )


def cluster_perf(perf: PerfParams, cluster: ClusterSpec, offers: OfferTable) -> PerfParams:
    """``perf`` whose collective constants know the cluster's network: an RDMA-class one
    (InfiniBand, RoCE, EFA) joins ``rdma_instances`` under its offers' names, as the
    catalog's RDMA instance types do (unchanged otherwise, and when applied twice)."""
    names = frozenset(offers.instance_type)
    if not cluster.shape.rdma or names <= perf.rdma_instances:
        return perf
    return replace(perf, rdma_instances=perf.rdma_instances | names)


def data_parallel_step(
    cluster: ClusterSpec,
    gpu: GpuSpec,
    *,
    gpus: int,
    batch: int,
    choice: GpuPrecision,
    perf: PerfParams,
    efficiency: RooflineEfficiency | None = None,
    node_link_gbps: Mapping[tuple[str, int], float] | None = None,
) -> tuple[ClusterLayout, Evaluation]:
    """The DDP step of ``gpus`` GPUs of ``cluster`` at ``batch`` samples per GPU (a one-row
    :class:`~gpucast.plan.evaluate.Evaluation`), the GPU at ``choice``'s precision, facts and
    calibration; ``node_link_gbps`` as ``plan train``'s
    (:attr:`gpucast.plan.train.PlanContext.node_link_gbps`)."""
    offers = cluster_offers(cluster, gpu, 0, node_link_gbps)
    layout = cluster_layout(cluster, gpus, offers)
    table = build_gpu_table(
        choice.facts,
        [gpu],
        calibration=choice.calibration,
        efficiency=efficiency,
        per_gpu={gpu.name: choice},
    )
    row = Space(
        offers=offers,
        offer=np.array([layout.offer], dtype=np.int64),
        nodes=np.array([layout.nodes], dtype=np.int64),
        spot=np.zeros(1, dtype=bool),
        strategy=np.array([DDP], dtype=np.int64),
        shards=np.zeros(1, dtype=np.int64),
        batch=np.array([batch], dtype=np.int64),
    )
    step = float(gpus * batch)  # the work of one step: its global batch
    work = Work(
        samples_at_reference=step, reference_batch=step, critical_batch=step, dataset_size=None
    )
    ev = evaluate(
        row,
        facts=choice.facts,
        gpus=table,
        params=cluster_perf(perf, cluster, offers),
        work=work,
        startup_s=0.0,
    )
    return layout, ev

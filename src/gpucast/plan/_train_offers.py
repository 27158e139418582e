"""The offers a training search covers: the catalog's that a request's filters keep
(unknown names fail with close matches), or a user's cluster and the request within it.
Split from :mod:`gpucast.plan.train`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from gpucast.domain.catalog import Catalog, Offer
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError, UnknownRegionError
from gpucast.domain.options import is_default
from gpucast.domain.plan import TrainRequest
from gpucast.domain.spot import SPOT_ONLY_OPTIONS, check_spot_only
from gpucast.domain.systems import ClusterSpec
from gpucast.plan._train_context import PlanContext
from gpucast.plan.cluster_step import cluster_perf
from gpucast.plan.space import OfferTable, cluster_offers


class OfferFilters(Protocol):
    """The catalog filters of a planning request (``--provider --region --gpu --exclude-gpu``
    of ``plan train`` and ``plan llm-train``)."""

    @property
    def providers(self) -> tuple[str, ...]: ...
    @property
    def regions(self) -> tuple[str, ...]: ...
    @property
    def gpus(self) -> tuple[str, ...]: ...
    @property
    def exclude_gpus(self) -> tuple[str, ...]: ...


def _resolve_names(
    request: OfferFilters, catalog: Catalog
) -> tuple[set[str], set[str], set[str], set[str]]:
    """Canonical (providers, regions, wanted GPUs, excluded GPUs); unknown names raise."""
    providers = {p.lower() for p in request.providers}
    for p in providers:
        catalog.find_offers(provider=p)  # raises UnknownProviderError with close matches
    known_regions = set(catalog.regions())
    lowered = {k.lower(): k for k in known_regions}
    regions = set()
    for r in request.regions:
        if r.lower() not in lowered:
            raise UnknownRegionError(r, known_regions, fix="see `gpucast catalog offers`")
        regions.add(lowered[r.lower()])
    wanted = {catalog.gpu(g).name for g in request.gpus}
    excluded = {catalog.gpu(g).name for g in request.exclude_gpus}
    if wanted & excluded:
        raise InvalidSpecError(
            "gpu/exclude-gpu",
            f"{sorted(wanted & excluded)[0]} is both required and excluded",
            fix="drop it from --gpu or from --exclude-gpu",
        )
    return providers, regions, wanted, excluded


def filtered_offers(request: OfferFilters, catalog: Catalog) -> tuple[list[Offer], list[Offer]]:
    """The catalog's (GPU offers, CPU-only offers) that ``request``'s filters keep; unknown
    names raise, and no GPU offer left is :class:`NoFeasiblePlanError` naming the filters."""
    providers, regions, wanted, excluded = _resolve_names(request, catalog)
    gpu_offers = []
    cpu_offers = []
    for o in catalog.offers:
        if providers and o.provider not in providers:
            continue
        if regions and o.region not in regions:
            continue
        if o.gpu is None:
            cpu_offers.append(o)
            continue
        if (wanted and o.gpu not in wanted) or o.gpu in excluded:
            continue
        gpu_offers.append(o)
    if not gpu_offers:
        what = []
        if providers:
            what.append(f"--provider {','.join(sorted(providers))}")
        if regions:
            what.append(f"--region {','.join(sorted(regions))}")
        if wanted:
            what.append(f"--gpu {','.join(sorted(wanted))}")
        if excluded:
            what.append(f"--exclude-gpu {','.join(sorted(excluded))}")
        raise NoFeasiblePlanError(
            f"no GPU offer in the catalog matches {' '.join(what) or 'the filters'}",
            fix="relax the filters; see `gpucast catalog offers` for what is offered where",
        )
    return gpu_offers, cpu_offers


def _offers(
    request: OfferFilters,
    catalog: Catalog,
    node_link_gbps: Mapping[tuple[str, int], float] | None = None,
) -> OfferTable:
    gpu_offers, cpu_offers = filtered_offers(request, catalog)
    names = sorted({str(o.gpu) for o in gpu_offers})
    index = {n: i for i, n in enumerate(names)}
    return OfferTable.build(gpu_offers, cpu_offers, index, node_link_gbps)


def planned_gpus(
    request: OfferFilters, catalog: Catalog, cluster: ClusterSpec | None = None
) -> tuple[str, ...]:
    """The GPU types a search of ``request`` evaluates: the cluster's, or those of the
    catalog offers its filters keep (unknown names and an empty selection raise as in
    :func:`search`)."""
    if cluster is not None:
        return (catalog.gpu(cluster.gpu).name,)
    return tuple(sorted(set(_offers(request, catalog).gpu_name)))


def _cluster_table(ctx: PlanContext) -> OfferTable:
    assert ctx.cluster is not None
    return cluster_offers(ctx.cluster, ctx.catalog.gpu(ctx.cluster.gpu), 0, ctx.node_link_gbps)


def with_cluster(ctx: PlanContext) -> PlanContext:
    """``ctx`` whose collective constants know the cluster's network: an RDMA-class one
    (InfiniBand, RoCE, EFA) joins ``rdma_instances`` under its offers' names, as the
    catalog's RDMA instance types do. Unchanged without a cluster (and when applied twice)."""
    if ctx.cluster is None:
        return ctx
    perf = cluster_perf(ctx.perf, ctx.cluster, _cluster_table(ctx))
    return ctx if perf is ctx.perf else replace(ctx, perf=perf)


def within_cluster(request: TrainRequest, cluster: ClusterSpec) -> TrainRequest:
    """The request the cluster's space is built from: its whole size unless ``--max-gpus``
    says less, and on demand only unless the cluster has a spot price. A budget needs a
    price: without one every plan costs $0 and ``--budget`` would hold whatever it is."""
    cluster.check_budget(request.budget_usd)
    check_spot_only(  # before the request turns on demand below, in the cluster's words
        request,
        spot=cluster.has_spot,
        names=(*SPOT_ONLY_OPTIONS, "elastic"),
        market=f"the cluster {cluster.name} has no spot price",
        fix="give the cluster a spot price (--cluster-set spot_usd_per_gpu_hour=...)",
    )
    max_gpus = cluster.max_gpus if is_default(request, "max_gpus") else request.max_gpus
    return replace(request, max_gpus=max_gpus, allow_spot=request.allow_spot and cluster.has_spot)

"""``--precision fp8`` in the planning verbs (``plan train``, ``plan llm-train``): the search
keeps the GPU types with fp8 tensor cores and says how many it skipped; refused in one line
where none is left."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Assumption
from gpucast.domain.workload import FP8, check_precision_units, fp8_fix

if TYPE_CHECKING:
    from gpucast.domain.systems import ClusterSpec
    from gpucast.plan.train import OfferFilters

#: A planning request with the catalog filters (``--provider --region --gpu --exclude-gpu``)
R = TypeVar("R", bound="OfferFilters")


def fp8_gpus(request: R, catalog: Any, cluster: ClusterSpec | None) -> tuple[R, tuple[str, ...]]:
    """``--precision fp8``: ``request`` searching only the GPU types with fp8 units, and the
    ones it skips; refused where none is left (a cluster's GPU without fp8: its one line)."""
    from gpucast.plan.train import planned_gpus

    if cluster is not None:
        check_precision_units(FP8, catalog.gpu(cluster.gpu), catalog)
        return request, ()
    planned = planned_gpus(request, catalog, cluster)
    skipped = tuple(g for g in planned if not catalog.gpu(g).has_units(FP8))
    if not skipped:
        return request, ()
    kept = tuple(g for g in planned if g not in skipped)
    if not kept:
        if len(skipped) == 1:
            check_precision_units(FP8, catalog.gpu(skipped[0]), catalog)
        raise InvalidSpecError(
            "precision",
            f"fp8 needs fp8 tensor cores, which none of the {len(skipped)} GPU types the "
            f"filters keep has ({', '.join(skipped[:6])}{', ...' if len(skipped) > 6 else ''})",
            got=FP8,
            fix=fp8_fix([catalog.gpu(g) for g in skipped], catalog),
        )
    if request.gpus:  # named by --gpu: keep those with fp8
        return dataclasses.replace(request, gpus=kept), skipped  # type: ignore[type-var]
    excluded = (*request.exclude_gpus, *skipped)
    return dataclasses.replace(request, exclude_gpus=excluded), skipped  # type: ignore[type-var]


def fp8_skipped_assumption(skipped: tuple[str, ...]) -> Assumption:
    """What ``--precision fp8`` left out of the search."""
    n = len(skipped)
    return Assumption(
        name="fp8 GPUs",
        value=f"{n} GPU type{'s' if n != 1 else ''} without fp8 units skipped: "
        + ", ".join(skipped[:8])
        + (f" and {n - 8} more" if n > 8 else ""),
        source="catalog gpus.csv fp8_tflops (empty: no fp8 tensor cores)",
        override="--precision bf16|auto plans them",
    )

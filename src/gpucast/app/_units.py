"""A precision only some GPUs have units for (``fp16``, ``bf16``, ``fp8``:
:meth:`gpucast.domain.catalog.GpuSpec.runs`) in the planning verbs (``plan train``,
``plan llm-train``): the search keeps the GPU types with the units and says which it skipped;
refused in one line where none is left."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Assumption
from gpucast.domain.workload import check_precision_units, units_fix

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpucast.domain.systems import ClusterSpec
    from gpucast.plan.train import OfferFilters

#: A planning request with the catalog filters (``--provider --region --gpu --exclude-gpu``)
R = TypeVar("R", bound="OfferFilters")


class _OnGpu(Protocol):
    @property
    def gpu(self) -> str | None: ...


#: A serving option on a GPU type (``gpu``: its catalog name; None: a CPU)
S = TypeVar("S", bound=_OnGpu)


def gpus_with_units(
    request: R,
    catalog: Any,
    cluster: ClusterSpec | None,
    precision: str,
    *,
    choices: Sequence[str] = (),
) -> tuple[R, tuple[str, ...]]:
    """``request`` searching only the GPU types that run ``precision``, and the ones it skips;
    refused where none is left (a cluster's GPU without the units: its one line). ``choices``:
    the precisions the verb accepts, for the fix."""
    from gpucast.plan.train import planned_gpus

    if cluster is not None:
        check_precision_units(
            precision, catalog.gpu(cluster.gpu), catalog, choices=choices,
            or_else=_or_else(choices),
        )  # fmt: skip
        return request, ()
    planned = planned_gpus(request, catalog, cluster)
    skipped = tuple(g for g in planned if not catalog.gpu(g).runs(precision))
    if not skipped:
        return request, ()
    kept = tuple(g for g in planned if g not in skipped)
    if not kept:
        _refuse(precision, skipped, catalog, choices)
    if request.gpus:  # named by --gpu: keep those with the units
        return dataclasses.replace(request, gpus=kept), skipped  # type: ignore[type-var]
    excluded = (*request.exclude_gpus, *skipped)
    return dataclasses.replace(request, exclude_gpus=excluded), skipped  # type: ignore[type-var]


def _refuse(
    precision: str,
    skipped: Sequence[str],
    catalog: Any,
    choices: Sequence[str],
    *,
    runs: str = "trains in",
) -> NoReturn:
    """No GPU type the filters keep runs ``precision``: one GPU's own line, or all of them."""
    if len(skipped) == 1:
        check_precision_units(
            precision, catalog.gpu(skipped[0]), catalog, runs=runs, choices=choices,
            or_else=_or_else(choices),
        )  # fmt: skip
    units = "fp8 tensor cores" if precision == "fp8" else f"{precision} units"
    raise InvalidSpecError(
        "precision",
        f"{precision} needs {units}, which none of the {len(skipped)} GPU types the "
        f"filters keep has ({', '.join(skipped[:6])}{', ...' if len(skipped) > 6 else ''})",
        got=precision,
        fix=units_fix(
            [catalog.gpu(g) for g in skipped], catalog, precision, choices=choices,
            or_else=_or_else(choices),
        ),
    )  # fmt: skip


def _or_else(choices: Sequence[str]) -> str:
    """``auto`` where the verb takes it (no ``choices``: every training precision)."""
    return "auto" if not choices or "auto" in choices else ""


def skipped_assumption(precision: str, skipped: Sequence[str], *, auto: bool = True) -> Assumption:
    """What a ``precision`` only some GPUs run left out of the search (or a serving plan);
    ``auto``: the verb takes ``--precision auto``."""
    n = len(skipped)
    instead = _INSTEAD.get(precision, "fp32") + ("|auto" if auto else "")
    return Assumption(
        name=f"{precision} GPUs",
        value=f"{n} GPU type{'s' if n != 1 else ''} without {precision} units skipped: "
        + ", ".join(skipped[:8])
        + (f" and {n - 8} more" if n > 8 else ""),
        source=f"catalog gpus.csv {precision}_tflops (empty: no {precision} units)",
        override=f"--precision {instead} plans them",
    )


#: The precision that plans (most of) the GPU types a precision skips
_INSTEAD = {"fp8": "bf16", "bf16": "fp16", "fp16": "fp32"}


def servers_with_units(
    servers: Sequence[S], catalog: Any, precision: str, *, choices: Sequence[str] = ()
) -> tuple[list[S], tuple[str, ...]]:
    """``servers`` (plan serve's options: ``gpu`` a catalog name, None on a CPU) less those on
    GPU types that do not run ``precision``, and those types; refused as :func:`gpus_with_units`
    refuses where no GPU server is left."""
    skipped = tuple(
        sorted({s.gpu for s in servers if s.gpu and not catalog.gpu(s.gpu).runs(precision)})
    )
    kept = [s for s in servers if s.gpu not in skipped]
    if skipped and not any(s.gpu for s in kept):
        _refuse(precision, skipped, catalog, choices, runs="has units for")
    return kept, skipped


def half_units(catalog: Any, gpus: Sequence[str], *, every: bool) -> tuple[str, ...]:
    """The half precisions (bf16, fp16) of ``gpus`` (catalog names) that a precision
    override may offer: those every GPU has units for (``every``: a one-GPU verb or a
    cluster, which refuse a GPU without them), else those any has (a plan, which skips the
    GPU types without them)."""
    held = all if every else any
    return tuple(p for p in ("bf16", "fp16") if held(catalog.gpu(g).has_units(p) for g in gpus))

"""The GPU-variability options shared by ``plan train`` and ``simulate train`` (one definition).

``--gpu-variability`` names a per-GPU speed-factor distribution: a published profile of
``catalog/data/gpu_variability.csv`` (``typical``, ``worst``), a fleet measured with
``gpucast fit variability --name NAME`` and stored, or ``none`` (the default: the published
step times the models are fitted on were measured on real clusters and so already include
their spread). ``--exclude-slowest`` is straggler-aware placement: rent enough GPUs to drop
the slowest share of them.
"""

from __future__ import annotations

import math
from typing import Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import option

NO_VARIABILITY = "none"
#: The named-model kind a measured fleet is stored under.
VARIABILITY_KIND = "gpu-variability"


def gpu_variability_option() -> Any:
    return option(
        NO_VARIABILITY,
        help="GPU-to-GPU speed spread: typical | worst (published fleets, Sinha et al. SC'22), "
        "a fleet stored by `gpucast fit variability --name NAME`, or none (step times as "
        "measured on real clusters already include theirs).",
        example="typical",
    )


def exclude_slowest_option() -> Any:
    return option(
        0.0,
        help="Straggler-aware placement of synchronous jobs: rent enough GPUs to drop this "
        "share of the slowest (0-0.5, e.g. 0.1 = 10%); needs --gpu-variability, not with "
        "--balance-batches.",
        example="0.1",
    )


def balance_batches_option() -> Any:
    return option(
        False,
        help="Synchronous jobs: split the global batch in proportion to each GPU's measured "
        "speed (adaptive SGD), so a job runs at its GPUs' mean speed instead of its slowest; "
        "needs --gpu-variability.",
    )


def check_variability_options(
    gpu_variability: str, exclude_slowest: float, balance_batches: bool = False
) -> None:
    """Edge checks of the options (the name itself is resolved by ``gpucast.inputs``)."""
    if balance_batches and gpu_variability == NO_VARIABILITY:
        raise InvalidSpecError(
            "balance-batches",
            "needs a GPU-variability profile (without one every GPU is as fast)",
            fix="add --gpu-variability typical (or a measured fleet)",
        )
    if not isinstance(gpu_variability, str) or not gpu_variability.strip():
        raise InvalidSpecError(
            "gpu-variability",
            "must name a profile",
            got=gpu_variability,
            fix="e.g. --gpu-variability typical",
        )
    if isinstance(exclude_slowest, bool) or not (
        math.isfinite(exclude_slowest) and 0.0 <= exclude_slowest <= 0.5
    ):
        raise InvalidSpecError(
            "exclude-slowest",
            "must be a share in [0, 0.5]",
            got=exclude_slowest,
            fix="e.g. --exclude-slowest 0.1",
        )
    if exclude_slowest > 0 and gpu_variability == NO_VARIABILITY:
        raise InvalidSpecError(
            "exclude-slowest",
            "needs a GPU-variability profile to know who the stragglers are",
            fix="add --gpu-variability typical (or a measured fleet)",
        )
    if exclude_slowest > 0 and balance_batches:
        raise InvalidSpecError(
            "exclude-slowest",
            "has no straggler to drop with --balance-batches (a balanced job runs at its "
            "GPUs' mean speed, not its slowest's)",
            got=exclude_slowest,
            fix="drop --exclude-slowest or --balance-batches",
        )


def check_synchronous_only(
    exclude_slowest: float, balance_batches: bool, *, strategy: str, fix: str
) -> None:
    """``--exclude-slowest`` and ``--balance-batches`` act where the slowest GPU paces a
    synchronous job: refused for a job of asynchronous PS workers (``strategy``), which run at
    their mean speed -- rather than ignored (simulate train billed the probe nodes of one)."""
    for flag, used in (
        ("exclude-slowest", exclude_slowest > 0),
        ("balance-batches", balance_batches),
    ):
        if used:
            raise InvalidSpecError(
                flag,
                "acts where the slowest GPU paces a synchronous job; asynchronous PS workers "
                "run at their mean speed",
                got=f"--strategy {strategy}",
                fix=fix,
            )

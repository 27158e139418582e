"""The GPU-variability profile a plan or a simulation uses, with its source.

``none`` (the default), a published profile (``catalog/data/gpu_variability.csv``) or a fleet
measured on the user's GPUs and stored by ``gpucast fit variability --name NAME``.
"""

from __future__ import annotations

from pathlib import Path

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Assumption, Sourced
from gpucast.domain.variability import NO_VARIABILITY, VARIABILITY_KIND
from gpucast.predict.variability import SpeedVariability


def gpu_variability(name: str, db: Path) -> Sourced[SpeedVariability | None]:
    """The profile ``name``: a published one, else a stored fleet, else an error listing both."""
    from gpucast.catalog.variability import variability_profiles

    if name == NO_VARIABILITY:
        return Sourced(
            None,
            "none: every GPU at the fitted step time (published step times were measured on "
            "real clusters and include their spread)",
        )
    profiles = variability_profiles()
    if name in profiles:
        profile = profiles[name]
        return Sourced(profile, profile.source)
    stored: list[str] = []
    if Path(db).exists():
        from gpucast.store.db import Store

        with Store(db).open(create=False) as store:
            stored = [n for n, _ in store.named_models(VARIABILITY_KIND)]
            if name in stored:
                model, _meta = store.named_model(VARIABILITY_KIND, name)
                fleet = SpeedVariability.from_dict(model)
                return Sourced(fleet, f"fleet {name!r} measured and stored: {fleet.source}")
    # each name once: a store written before built-in names were refused may hold "typical"
    known = ", ".join(dict.fromkeys([NO_VARIABILITY, *sorted(profiles), *stored]))
    raise InvalidSpecError(
        "gpu-variability",
        f"unknown profile {name!r} (known: {known})",  # the name once: no got=
        fix="e.g. --gpu-variability typical, or store your fleet: gpucast fit variability "
        "--name NAME",
    )


def variability_assumption(
    profile: Sourced[SpeedVariability | None], exclude_slowest: float, balance: bool = False
) -> Assumption:
    """How a result treats GPU-to-GPU variability (an assumption every plan lists)."""
    v = profile.value
    if v is None:
        value = "none"
    else:
        value = (
            f"per-GPU speed spread sigma {v.sigma_log:.3f} (log), {v.outlier_share:.1%} "
            f"outliers up to {v.outlier_max_factor:.2f}x; "
            + (
                "batches split by each GPU's measured speed (adaptive SGD): a synchronous job "
                "runs at its GPUs' mean speed (1 / mean(1 / f); the split follows the steps' own "
                "timings and moves no state at a step boundary: nothing priced)"
                if balance
                else "a synchronous job runs at its slowest GPU"
            )
        )
        if exclude_slowest > 0:
            value += (
                f"; the slowest {exclude_slowest:.0%} dropped by whole nodes (synchronous "
                "jobs: asynchronous workers run at their mean speed): ceil(nodes / "
                f"{1 - exclude_slowest:.2g}) are started, a minute of steps ranks them (a node "
                "is as fast as its slowest GPU) and the slowest are released, billed for "
                "their start-up and that minute"
            )
    return Assumption(
        name="GPU variability",
        value=value,
        source=profile.source,
        override="--gpu-variability typical|worst|NAME, --exclude-slowest SHARE, --balance-batches",
    )

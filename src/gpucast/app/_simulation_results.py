"""What ``simulate train`` reports beside its runs: one scenario's outcome (time, p90, cost,
P(meet deadline) and revocations, for the optimistic/pessimistic pair where lifetimes rest on
a scenario) and the validated errors of the models behind it, in its regime. Used by
:mod:`gpucast.app._simulation_run`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy: loaded when a simulation runs
    from gpucast.app.simulation import SimulateTrainRequest
    from gpucast.domain.simulation import SimulationResult


def _outcome(result: SimulationResult) -> dict[str, float | None]:
    """The transient runs' time, cost and revocations at the central step time (as plan
    train's scenarios state them), p90 time and P(meet deadline) over every stratum (``inf``
    where runs never end, without numpy's inf - inf warning)."""
    from gpucast.domain.simulation import Summary

    runs = result.transient
    miss = runs.p_miss_deadline
    return {
        "time_s": runs.central(runs.duration_s),
        "time_p90_s": Summary.of(runs.duration_s).p90,
        "cost_usd": runs.central(runs.final_cost_usd),
        "p_meet_deadline": None if miss is None else 1.0 - miss,
        "revocations": runs.central(runs.revocations),
    }


def _validation(
    request: SimulateTrainRequest,
    gpus: list[str],
    workers: int,
    modelled: bool,
    precision: str,
    few_revocations: str | None = None,
    not_published: str | None = None,
) -> dict[str, str]:
    """Validated errors of the models behind this scenario, in its regime; the Monte Carlo's
    says where its lifetimes rest on few revocations (``few_revocations``) and, where it is
    validated, that it was on the published lifetimes when this run drew others
    (``not_published``)."""
    from gpucast.catalog.validation import validation_for

    scaling = {"ps-async": "ps-cluster", "ps-sync": "ps-cluster"}.get(request.strategy, "allreduce")
    monte_carlo = validation_for("spot-training", gpus, precision, workers)
    caveats = [few_revocations, not_published if monte_carlo.validated else None]
    out = {
        f"scaling ({request.strategy})": validation_for(scaling, gpus, precision, workers).text(),
        "transient Monte Carlo": "; ".join([monte_carlo.text(), *filter(None, caveats)]),
    }
    if modelled:
        out["step time (roofline)"] = validation_for("roofline-step", gpus, precision, 1).text()
    return out

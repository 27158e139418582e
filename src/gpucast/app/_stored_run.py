"""``--workload run:ID`` in the training verbs (``plan train``, ``predict train``): the request
names the run's workload (and, with ``--precision`` left at its default, its precision; with
no batch given, its batch), and the run's profile or training measurement is what the verb
prices or calibrates from."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import is_default

if TYPE_CHECKING:
    from gpucast.domain.profile import WorkloadProfile
    from gpucast.inputs.workload import StoredWorkload

R = TypeVar("R")


def with_stored_run(request: R, store: Path) -> tuple[R, StoredWorkload | None, bool]:
    """The request with ``run:ID`` read from ``store`` (unchanged for any other workload), the
    run, and whether the precision is the run's (none given)."""
    from gpucast.inputs.workload import load_stored_workload, stored_run_id

    workload: Any = getattr(request, "workload")  # noqa: B009 -- any request with a workload
    run_id = stored_run_id(workload)
    if run_id is None:
        return request, None, False
    stored = load_stored_workload(
        store, run_id, trust_workload=bool(getattr(request, "trust_workload", False))
    )
    changes: dict[str, Any] = {"workload": stored.workload}
    if getattr(request, "batch_size", 0) is None:  # not given: the run's (predict train)
        changes["batch_size"] = stored.batch_size
    run_precision = is_default(request, "precision")
    if run_precision:
        changes["precision"] = stored.precision
    return dataclasses.replace(request, **changes), stored, run_precision  # type: ignore[type-var]


def stored_profile(stored: StoredWorkload, profiled_at: str, precision: str) -> WorkloadProfile:
    """The run's profile, which must be at the precision the verb prices (``profiled_at``:
    the profiled precision of ``precision``)."""
    prof: WorkloadProfile = stored.profile
    if prof.precision != profiled_at:
        raise InvalidSpecError(
            "precision",
            f"run {stored.run_id} was profiled at {prof.precision}",
            got=precision,
            fix=f"drop --precision or profile again with --precision {precision}",
        )
    return prof

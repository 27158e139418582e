"""``gpucast.profile_workload``: static features of a workload, saved in the store.

Runs :func:`gpucast.profile.profile` (fake tensors: nothing real is allocated) and saves the
:class:`~gpucast.domain.profile.WorkloadProfile` in the measurement store unless
``save=False``; the run id it gets is what ``plan_train(workload="run:ID")`` plans from.
Every input is checked before the store is touched: an unknown workload creates no file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import MAX_PROFILE_BATCH
from gpucast.domain.options import as_flags, documented, lower_text, option
from gpucast.domain.profile import WorkloadProfile
from gpucast.domain.workload import (
    AUTO_PRECISION,
    PRECISIONS,
    Precision,
    WorkloadOptions,
    WorkloadSpec,
    workload_options_field,
)

if TYPE_CHECKING:
    import pandas as pd

#: Optimizers a training step can use (``gpucast.workloads.steps.OPTIMIZERS``, which imports
#: torch; a test keeps the two equal).
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileRequest:
    """A workload to profile (``gpucast profile``)."""

    VERB: ClassVar[str] = "profile"

    workload: str = option(
        help="A built-in name (e.g. resnet50, cifar-resnet20, bert-large, gpt2-small, dlrm, "
        "retinanet, stable-diffusion; README lists them all) or a user model as "
        "module:factory.",
        argument=True,
        example="resnet50",
    )
    batch_size: int = option(32, short="-b", help="Samples per step.", example="32")
    precision: str = option(
        "fp32",
        parse=lower_text,
        help="fp32, bf16, fp16, or auto: fp32 here (a profile runs on no GPU; auto picks bf16 "
        "on GPUs with bf16 units only).",
        example="bf16",
    )
    optimizer: str = option("sgd", help="sgd (momentum) or adam.", example="adam")
    workload_options: WorkloadOptions = workload_options_field()
    save: bool = option(
        True, negative="no-save", help="Write the profile to the store (--no-save: do not)."
    )

    def __post_init__(self) -> None:
        with as_flags(type(self)):  # a domain check's field as the flag typed, with a fix
            self._check()

    def _check(self) -> None:
        if self.precision not in (*PRECISIONS, AUTO_PRECISION):  # QA 39: auto was left out
            raise InvalidSpecError(
                "precision",
                f"must be one of {', '.join((*PRECISIONS, AUTO_PRECISION))}",
                got=self.precision,
                fix="e.g. --precision bf16 (the training verbs' fp8 runs on a bf16 profile, "
                "tf32 on an fp32 one)",
            )
        _ = self.spec  # WorkloadSpec checks the name, the batch size and the precision
        if self.batch_size > MAX_PROFILE_BATCH:
            raise InvalidSpecError(
                "batch-size", f"must be <= {MAX_PROFILE_BATCH:,} samples per step",
                got=self.batch_size, fix="e.g. --batch-size 64",
            )  # fmt: skip
        if self.optimizer not in OPTIMIZERS:
            raise InvalidSpecError(
                "optimizer",
                f"must be one of {', '.join(OPTIMIZERS)}",
                got=self.optimizer,
                fix="e.g. --optimizer adam",
            )

    @property
    def profiled_precision(self) -> str:
        """The precision profiled: as given, or for ``auto`` fp32 (what auto picks off a GPU,
        as ``measure train --precision auto`` does on the CPU)."""
        return "fp32" if self.precision == AUTO_PRECISION else self.precision

    @property
    def precision_note(self) -> str | None:
        """What chose the precision where ``auto`` did (``None`` where it was given)."""
        if self.precision != AUTO_PRECISION:
            return None
        return (
            "fp32 by auto: a profile runs on no GPU (auto picks bf16 on GPUs with bf16 units only)"
        )

    @property
    def spec(self) -> WorkloadSpec:
        return WorkloadSpec(
            name=self.workload,
            batch_size=self.batch_size,
            precision=cast(Precision, self.profiled_precision),
            options=self.workload_options,
        )

    @property
    def options(self) -> dict[str, Any]:
        """The workload options as keyword arguments of the workload's factory."""
        return dict(self.workload_options)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileResult:
    """The profile and, when saved, its run id and store."""

    profile: WorkloadProfile
    run_id: int | None
    db: Path | None
    #: what chose the precision where ``--precision auto`` did (``None`` where it was given)
    precision_note: str | None = None
    #: the store whose missing folder this write created (its ``parent``), else ``None``
    new_store: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {**self.profile.to_dict(), "run_id": self.run_id}
        if self.precision_note is not None:
            out["precision_note"] = self.precision_note
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per operator class of the training step (forward + backward + optimizer)."""
        import pandas as pd

        return pd.DataFrame([c.to_dict() for c in self.profile.train_step_by_class()])


def profile_workload(
    request: ProfileRequest | str | Path | int | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> ProfileResult:
    """Profile a workload (see :class:`ProfileRequest`) and save it in the store at ``db``
    (default: ``$GPUCAST_DB`` or the user store) unless ``save=False``.

    The profile comes from the profile cache when the workload, options, batch, precision,
    optimizer and torch (and, for a user model, its code) are those of a cached profile
    (:func:`gpucast.inputs.workload.workload_profile`; a user model's notes say so)."""

    request = resolve(ProfileRequest, request, options)
    return _profile_then_save(request, db)


def _profile_then_save(request: ProfileRequest, db: Path | str | None) -> ProfileResult:
    """A workload's profile from the cache (a built-in keyed on gpucast's profiler and
    workload code, a user model on a hash of its own) or the profiler, then saved: profiled
    first, so that an unknown name, bad options, a module or factory that fails create no
    store."""
    from gpucast.inputs.workload import check_workload_name, workload_profile
    from gpucast.measure.api import canonical_spec
    from gpucast.store import Store, default_db_path
    from gpucast.store.db import new_store

    check_workload_name(request.workload)  # close matches, without importing torch
    result = workload_profile(
        request.workload,
        request.profiled_precision,
        batch_size=request.batch_size,
        options=request.options,
        optimizer=request.optimizer,
    )
    note = request.precision_note
    if not request.save:
        return ProfileResult(profile=result, run_id=None, db=None, precision_note=note)
    db_path = Path(db) if db is not None else default_db_path()
    with Store(db_path).open() as store:
        run_id = store.save_profile(canonical_spec(request.spec), result.to_dict())
    return ProfileResult(
        profile=result,
        run_id=run_id,
        db=db_path,
        precision_note=note,
        new_store=new_store(store),
    )

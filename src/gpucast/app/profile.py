"""``gpucast.profile_workload``: static features of a workload, saved in the store.

Runs :func:`gpucast.profile.profile` (fake tensors: nothing real is allocated) and saves the
:class:`~gpucast.domain.profile.WorkloadProfile` in the measurement store unless
``save=False``; the run id it gets is what ``plan_train(workload="run:ID")`` plans from.
Every input is checked before the store is touched: an unknown workload creates no file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import option
from gpucast.domain.profile import WorkloadProfile
from gpucast.domain.workload import Precision, WorkloadSpec

if TYPE_CHECKING:
    import pandas as pd

#: Optimizers a training step can use (``gpucast.workloads.steps.OPTIMIZERS``, which imports
#: torch; a test keeps the two equal).
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")

WorkloadOptions = tuple[tuple[str, Any], ...]


def _option_value(raw: str) -> Any:
    """A workload option's value: an int, a float, a tuple of ints, else the text."""
    raw = raw.strip()
    for number in (int, float):
        try:
            return number(raw)
        except ValueError:
            pass
    if "," in raw:
        try:
            return tuple(int(part) for part in raw.split(",") if part.strip())
        except ValueError:
            return raw
    return raw


def _bad_option(text: object) -> InvalidSpecError:
    return InvalidSpecError(
        "option", "must be KEY=VALUE", got=text, fix="e.g. --option seq_len=128"
    )


def _option_key(key: object, text: object) -> str:
    name = str(key).strip().replace("-", "_")
    if not name.isidentifier():
        raise _bad_option(text)
    return name


def parse_workload_options(value: Any) -> WorkloadOptions:
    """Workload options from a mapping, ``(key, value)`` pairs or ``KEY=VALUE`` texts.

    Texts may be repeated or comma-separated; a piece without ``=`` continues the value
    before it, so ``hidden=16,8,seq_len=4`` is ``hidden=(16, 8)`` and ``seq_len=4``.
    """
    if isinstance(value, Mapping):
        return tuple((_option_key(k, k), v) for k, v in value.items())
    pairs: list[tuple[str, Any]] = []
    texts: list[str] = []
    for item in value if isinstance(value, list | tuple) else [value]:
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
            pairs.append((_option_key(item[0], item), item[1]))  # already parsed (to_options)
            continue
        if not isinstance(item, str):
            raise _bad_option(item)
        texts += [piece for piece in item.split(",") if piece.strip()]
    raw: list[list[str]] = []
    for piece in texts:
        if "=" in piece:
            key, _, first = piece.partition("=")
            raw.append([_option_key(key, piece), first])
        elif raw:
            raw[-1][1] += "," + piece
        else:
            raise _bad_option(piece.strip())
    return (*pairs, *((key, _option_value(text)) for key, text in raw))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileRequest:
    """A workload to profile (``gpucast profile``)."""

    VERB: ClassVar[str] = "profile"

    workload: str = option(
        help="resnet50, cifar-resnetN (N = 15 or 6n+2), shake-shake, bert-base, gpt2-small, "
        "dlrm, gcn, mlp, or a user model as module:factory.",
        argument=True,
        example="resnet50",
    )
    batch_size: int = option(32, short="-b", help="Samples per step.", example="32")
    precision: str = option("fp32", help="fp32, bf16 or fp16.", example="bf16")
    optimizer: str = option("sgd", help="sgd (momentum) or adam.", example="adam")
    workload_options: WorkloadOptions = option(
        (),
        flag="option",
        short="-o",
        kind="list",
        parse=parse_workload_options,
        metavar="KEY=VALUE",
        help="Workload option KEY=VALUE, e.g. seq_len=128 (a value may hold commas: hidden=16,8).",
        example="seq_len=128",
    )
    save: bool = option(
        True, negative="no-save", help="Write the profile to the store (--no-save: do not)."
    )

    def __post_init__(self) -> None:
        _ = self.spec  # WorkloadSpec checks the name, the batch size and the precision
        if self.optimizer not in OPTIMIZERS:
            raise InvalidSpecError(
                "optimizer",
                f"must be one of {', '.join(OPTIMIZERS)}",
                got=self.optimizer,
                fix="e.g. --optimizer adam",
            )

    @property
    def spec(self) -> WorkloadSpec:
        return WorkloadSpec(
            name=self.workload,
            batch_size=self.batch_size,
            precision=cast(Precision, self.precision),
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

    def to_dict(self) -> dict[str, Any]:
        return {**self.profile.to_dict(), "run_id": self.run_id}

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
    (default: ``$GPUCAST_DB`` or the user store) unless ``save=False``."""
    from gpucast.profile import profile
    from gpucast.store import Store, default_db_path
    from gpucast.workloads import get_workload

    request = resolve(ProfileRequest, request, options)
    # every input is checked before the store is touched (an unknown name creates no file)
    chosen = get_workload(request.workload, **request.options)
    db_path = Path(db) if db is not None else default_db_path()
    store = Store(db_path).open() if request.save else None  # a bad db fails before profiling
    try:
        result = profile(chosen, request.spec, optimizer=request.optimizer)
        run_id = None if store is None else store.save_profile(request.spec, result.to_dict())
    finally:
        if store is not None:
            store.close()
    return ProfileResult(profile=result, run_id=run_id, db=None if store is None else db_path)

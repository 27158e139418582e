"""``gpucast.campaign_run`` and ``campaign_status``: resumable measurement sweeps.

A campaign is a sweep YAML (see :mod:`gpucast.measure.campaign`) expanded into points, each
stored as it completes, so a campaign killed at any moment (even with SIGKILL) resumes where
it stopped. ``campaign_run`` takes a ``should_stop`` callable (the CLI sets it from SIGTERM and
SIGINT) and an ``on_progress`` callback; the sweep is checked in full before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.campaign import CampaignProgress, PointStatus
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.options import documented, option

if TYPE_CHECKING:
    import pandas as pd

#: Where points run: ``local`` (one at a time, here) or ``ray`` (one Ray task per point).
BACKENDS: tuple[str, ...] = ("local", "ray")


def _backend(value: Any) -> str:
    return str(value).strip().lower()


def _check_workload(name: str) -> None:
    """A sweep's workload name, checked as its points will build it: a listed built-in against
    the cached names (this driver only starts the points' processes and need not import
    torch); anything else (``module:factory``, another cifar-resnet depth, a typo) by building
    it, so its error comes now and not from every point."""
    from gpucast.domain.workload import split_configured_name
    from gpucast.inputs.workload import builtin_workloads

    plain, options = split_configured_name(name)  # a configuration: "bert-base -o seq_len=512"
    if plain.strip().lower() in builtin_workloads() and not options:
        return
    from gpucast.profile.profiler import workload_without_weights

    workload_without_weights(plain, dict(options))  # a user's model on meta (QA 41)


def _check_device(device: str) -> None:
    """A sweep's ``cuda``/``cuda:N`` checked on this machine, where the local backend runs
    its points (torch is imported only for such a device)."""
    if not device.strip().lower().startswith("cuda"):
        return
    from gpucast.domain.errors import DeviceUnavailableError
    from gpucast.measure.devices import resolve_device

    try:
        resolve_device(device)
    except DeviceUnavailableError as exc:
        raise DeviceUnavailableError(
            exc.message, fix="use devices: [cpu] here, or --backend ray on a cluster with GPUs"
        ) from None


def _check_nprocs(nproc: int) -> None:
    """A distributed point's ranks, all on this host with the local backend: refused before
    the sweep starts when its memory cannot hold them (each point checks again as it runs)."""
    from gpucast.measure.distributed.launcher import check_ranks_fit

    check_ranks_fit(nproc, flag="nprocs")


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignRunRequest:
    """A sweep to run or resume (``gpucast campaign run``)."""

    VERB: ClassVar[str] = "campaign run"

    sweep_file: Path = option(
        help="The sweep YAML: workloads and batch_sizes (required), precisions, devices, "
        "strategies, nprocs, ps_shards, sync, repeats, name and settings (README: 'Campaign "
        "sweep file').",
        argument=True,
        example="sweep.yaml",
    )
    backend: str = option(
        "local", parse=_backend, help="local, or ray (one task per point).", example="ray"
    )
    address: str | None = option(
        None, help="Ray cluster address (ray://host:10001 or auto); ray only.", example="auto"
    )
    retry_failed: bool = option(False, help="Run the points that failed before again.")

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InvalidSpecError(
                "backend",
                f"must be one of {', '.join(BACKENDS)}",
                got=self.backend,
                fix="e.g. --backend ray",
            )
        if self.address is not None and self.backend != "ray":
            raise InvalidSpecError(
                "address", "only applies to --backend ray", fix="add --backend ray"
            )


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignStatusRequest:
    """Which campaign to report on (``gpucast campaign status``): a sweep file or an id."""

    VERB: ClassVar[str] = "campaign status"

    sweep_file: Path | None = option(
        None, help="The sweep YAML (or use --campaign).", argument=True, example="sweep.yaml"
    )
    campaign: str | None = option(None, help="A campaign id (its name).", example="p100-scaling")

    def __post_init__(self) -> None:
        if (self.sweep_file is None) == (self.campaign is None):
            raise InvalidSpecError(
                "campaign",
                "give a sweep file or --campaign ID (one of them)",
                fix="e.g. gpucast campaign status sweep.yaml",
            )


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignStatus:
    """A campaign and the state of each of its points.

    ``status`` is ``running``, ``done``, ``incomplete`` (some points failed),
    ``interrupted`` (stopped or its driver died; resumable) or ``not started`` (a sweep file
    no store holds yet: every point pending; ``created_at`` and ``updated_at`` ``None``).
    ``points`` are plain JSON dicts (``key``, ``status``, ``attempts``, ``error``, ``run_id``,
    ...).
    """

    campaign: str
    status: str
    resumable: bool
    sweep_path: str | None
    created_at: str | None
    updated_at: str | None
    total: int
    pending: int
    running: int
    done: int
    failed: int
    points: tuple[dict[str, Any], ...]
    #: One line when the sweep file's points differ from the stored campaign of its name.
    note: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CampaignStatus:
        return cls(
            campaign=str(data["campaign"]),
            status=str(data["status"]),
            resumable=bool(data["resumable"]),
            sweep_path=data["sweep_path"],
            created_at=_text_or_none(data["created_at"]),
            updated_at=_text_or_none(data["updated_at"]),
            total=int(data["total"]),
            pending=int(data["pending"]),
            running=int(data["running"]),
            done=int(data["done"]),
            failed=int(data["failed"]),
            points=tuple(dict(p) for p in data["points"]),
            note=data.get("note"),
        )

    @property
    def failed_points(self) -> tuple[dict[str, Any], ...]:
        return tuple(p for p in self.points if p["status"] == PointStatus.FAILED.value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "status": self.status,
            "resumable": self.resumable,
            "sweep_path": self.sweep_path,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "total": self.total,
            "pending": self.pending,
            "running": self.running,
            "done": self.done,
            "failed": self.failed,
            "points": [dict(p) for p in self.points],
            "note": self.note,
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per point."""
        import pandas as pd

        return pd.DataFrame([dict(p) for p in self.points])


@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignRunResult:
    """How a run of a campaign ended: the campaign's status afterwards and the last progress."""

    campaign: CampaignStatus
    progress: CampaignProgress
    #: the store whose missing folder this run created (its ``parent``), else ``None``
    new_store: Path | None = None

    @property
    def status(self) -> str:
        """``done``, ``incomplete`` (some points failed) or ``interrupted`` (resumable)."""
        return self.campaign.status

    def to_dict(self) -> dict[str, Any]:
        return self.campaign.to_dict()

    def to_frame(self) -> pd.DataFrame:
        return self.campaign.to_frame()


def _db_path(db: Path | str | None) -> Path:
    from gpucast.store import default_db_path

    return Path(db) if db is not None else default_db_path()


def _never() -> bool:
    return False


def campaign_run(
    request: CampaignRunRequest | str | Path | int | None = None,
    /,
    *,
    db: Path | str | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_progress: Callable[[CampaignProgress], None] | None = None,
    **options: Any,
) -> CampaignRunResult:
    """Run every point of a sweep not done yet, storing each result as it completes.

    ``should_stop`` is polled several times a second: once it returns true the running point
    is abandoned (back to pending) and the campaign is left ``interrupted``, to be resumed by
    running it again. ``on_progress`` gets a :class:`~gpucast.domain.campaign.CampaignProgress`
    at the start, as points start and end, and at the end.
    """
    from gpucast.measure.campaign import PointRunner, load_sweep, run_campaign

    request = resolve(CampaignRunRequest, request, options)
    local = request.backend == "local"
    sweep = load_sweep(  # every check first; a local run's CUDA devices and ranks on this host
        request.sweep_file,
        check_workload=_check_workload,
        check_device=_check_device if local else None,
        check_nprocs=_check_nprocs if local else None,
    )
    runner: PointRunner | None = None
    if request.backend == "ray":
        from gpucast.measure.campaign_ray import RayRunner

        runner = RayRunner(address=request.address)  # fails now if Ray is missing
    path = _db_path(db)
    result = run_campaign(
        sweep,
        path,
        sweep_path=request.sweep_file,
        runner=runner,
        retry_failed=request.retry_failed,
        should_stop=should_stop or _never,
        on_progress=on_progress,
    )
    keys = [p.key for p in sweep.points()]
    return CampaignRunResult(
        campaign=_status(path, result.campaign_id, keys=keys, merged=True),
        progress=result.progress,
        new_store=result.new_store,
    )


def campaign_status(
    request: CampaignStatusRequest | str | Path | int | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> CampaignStatus:
    """A campaign's done / running / failed / pending points and the errors of failures; of a
    sweep file, that file's points (matched by their parameters; not run yet: pending)."""
    from gpucast.measure.campaign import load_sweep

    request = resolve(CampaignStatusRequest, request, options)
    if request.campaign is not None:
        return _status(_db_path(db), request.campaign)
    assert request.sweep_file is not None  # the request holds exactly one
    sweep = load_sweep(request.sweep_file, check_workload=_check_workload)
    return _status(
        _db_path(db),
        sweep.name,
        keys=[p.key for p in sweep.points()],
        sweep_path=str(request.sweep_file.resolve()),
    )


def _status(
    path: Path,
    campaign_id: str,
    *,
    keys: list[str] | None = None,
    merged: bool = False,
    sweep_path: str | None = None,
) -> CampaignStatus:
    from gpucast.measure.campaign import campaign_status as status_of
    from gpucast.measure.campaign import not_started_status
    from gpucast.store.db import no_store_yet

    if no_store_yet(path) and keys is not None:  # a sweep file never run: every point pending
        return CampaignStatus.from_dict(
            not_started_status(path, campaign_id, keys, sweep_path=sweep_path)
        )
    if no_store_yet(path):  # say so without creating (or writing into) a store
        raise InvalidInputError(
            f"campaign: no campaign {campaign_id!r}: no store at {path} yet",
            fix="run it with `gpucast campaign run SWEEP.yaml` first",
        )
    return CampaignStatus.from_dict(
        status_of(path, campaign_id, keys=keys, merged=merged, sweep_path=sweep_path)
    )

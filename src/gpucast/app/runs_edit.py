"""``gpucast.runs_delete``, ``runs_import``: delete stored runs, import exported ones.

``runs_delete(ids=[3, 4])`` deletes those runs in one transaction (an unknown id deletes
nothing), with their operator traces; a campaign point that measured one goes back to pending
(:mod:`gpucast.store.transfer`). ``runs_import(path="runs.csv")`` adds the runs a ``runs
export`` file holds (CSV or Parquet) under new ids, skipping those already stored; a damaged
file adds nothing and names its file, row and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app.runs import RUN_KINDS, _db_path
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.options import documented, option

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.store.transfer import DeletedRun


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class RunsDeleteRequest:
    """Stored runs to delete (``gpucast runs delete ID...``)."""

    VERB: ClassVar[str] = "runs delete"

    ids: tuple[int, ...] = option(
        help="Run ids from `gpucast runs list`; all are deleted or, if one is unknown, none.",
        argument=True,
        metavar="ID...",
        example="3",
    )

    def __post_init__(self) -> None:
        if not self.ids:
            raise InvalidSpecError(
                "ids", "name at least one run", fix="e.g. gpucast runs delete 3 (see runs list)"
            )
        bad = [i for i in self.ids if i < 1]
        if bad:
            raise InvalidSpecError(
                "ids", "must be >= 1", got=bad[0], fix="see `gpucast runs list` for the ids"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunsDeleteResult:
    """The runs deleted (with what referenced them) and the store."""

    deleted: tuple[DeletedRun, ...]
    store: str

    def to_dict(self) -> dict[str, Any]:
        return {"deleted": [d.to_dict() for d in self.deleted], "store": self.store}


def runs_delete(
    request: RunsDeleteRequest | int | str | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> RunsDeleteResult:
    """Delete stored runs in one transaction (a bad run, e.g. one measured on a busy host,
    would calibrate every prediction of its workload)."""
    from gpucast.store import Store
    from gpucast.store.transfer import delete_runs

    request = resolve(RunsDeleteRequest, request, options)
    path = _db_path(db)
    with Store(path).open(create=False) as store:
        deleted = delete_runs(store, request.ids)
    return RunsDeleteResult(deleted=tuple(deleted), store=str(path))


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class RunsImportRequest:
    """A ``gpucast runs export`` file to add to this store (``gpucast runs import FILE``)."""

    VERB: ClassVar[str] = "runs import"

    path: Path = option(
        help="A CSV or Parquet file written by `gpucast runs export` (on this or another machine).",
        argument=True,
        metavar="FILE",
        example="runs.csv",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunsImportResult:
    """What an import added: each exported id's new id here (``None``: already stored)."""

    path: Path
    store: str
    mapping: tuple[tuple[int, int | None], ...]
    notes: tuple[str, ...] = field(default=())
    #: the store, where this import created its missing folder (the CLI says so)
    new_store: Path | None = None

    @property
    def imported(self) -> int:
        return sum(new is not None for _, new in self.mapping)

    @property
    def skipped(self) -> int:
        return len(self.mapping) - self.imported

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "store": self.store,
            "imported": self.imported,
            "skipped": self.skipped,
            "mapping": [{"old_id": old, "new_id": new} for old, new in self.mapping],
            "notes": list(self.notes),
        }


def _read_frame(path: Path) -> tuple[pd.DataFrame, bool]:
    """The export file as a frame of raw cells, and whether it is CSV (rows then have lines)."""
    import pandas as pd

    from gpucast.store.files import input_file, read_csv_input

    fix = "pass a file written by `gpucast runs export`"
    path = input_file(path, "path", fix=fix)
    from gpucast.store.db import SQLITE_MAGIC

    with path.open("rb") as handle:
        head = handle.read(len(SQLITE_MAGIC))
    if head == SQLITE_MAGIC:  # a store itself, not its export
        raise DataFormatError(
            str(path),
            "is an SQLite store, not a runs export",
            fix=f"export it first: gpucast --db {path} runs export --out runs.csv",
        )
    parquet = head.startswith(b"PAR1") or path.suffix.lower() in (".parquet", ".pq")
    if not parquet:
        frame = read_csv_input(path, "path", fix=fix, dtype=str, keep_default_na=False)
        return frame, True
    try:
        return pd.read_parquet(path, engine="pyarrow"), False
    except Exception as exc:  # pyarrow raises its own types for a truncated or foreign file
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataFormatError(
            str(path), f"is not a readable Parquet file ({problem})", fix=fix
        ) from None


def read_export(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``runs export`` file, each cell checked (one line naming the file, row
    and column of the first bad one)."""
    from gpucast.store.db import RUN_COLUMNS
    from gpucast.store.transfer import cell_value

    frame, is_csv = _read_frame(path)
    missing = [c for c in RUN_COLUMNS if c not in frame.columns]
    if missing:
        raise DataFormatError(
            str(path),
            f"has no column {', '.join(missing)}, which every runs export has",
            line=1 if is_csv else None,
            column=missing[0],
            fix="pass a file written by `gpucast runs export`, unedited",
        )
    rows: list[dict[str, Any]] = []
    for i, record in enumerate(frame[list(RUN_COLUMNS)].to_dict("records")):
        row: dict[str, Any] = {}
        for column in RUN_COLUMNS:
            try:
                row[column] = cell_value(column, record[column])
                if column == "kind" and row[column] not in RUN_KINDS:
                    raise ValueError(f"{row[column]!r} is not one of {', '.join(RUN_KINDS)}")
            except (TypeError, ValueError) as exc:
                raise DataFormatError(
                    str(path),
                    f"row {i + 1}: {exc}; nothing was imported",
                    line=i + 2 if is_csv else None,
                    column=column,
                    fix="re-export it (gpucast runs export) or drop that row",
                ) from None
        rows.append(row)
    return rows


def runs_import(
    request: RunsImportRequest | str | Path | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> RunsImportResult:
    """Add the runs of a ``runs export`` file to the store in one transaction: new ids here,
    runs already stored skipped (importing twice adds nothing)."""
    from gpucast.store import Store
    from gpucast.store.db import new_store
    from gpucast.store.transfer import import_rows

    request = resolve(RunsImportRequest, request, options)
    rows = read_export(Path(request.path))
    path = _db_path(db)
    with Store(path) as store:
        mapping = import_rows(store, rows)
        created = new_store(store)
    notes: tuple[str, ...] = ()
    if any(new is not None for _, new in mapping):
        notes = ("operator traces (--kernels) and campaign links are not exported, so the "
                 "imported runs have none",)  # fmt: skip
    return RunsImportResult(
        path=Path(request.path),
        store=str(path),
        mapping=tuple(mapping),
        notes=notes,
        new_store=created,
    )

"""``gpucast.runs_list``, ``runs_show``, ``runs_export``: browse and export the store.

Each takes the store as ``db`` (default: ``$GPUCAST_DB`` or the user store). Listing a store
that does not exist yet lists nothing and creates nothing; showing or exporting from one is an
error that says how to fill it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.options import documented, option
from gpucast.domain.units import count_of
from gpucast.inputs.workload import measured_name_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from gpucast.store.db import Store
    from gpucast.store.records import RunSummary, StoredRun


#: What a stored run is (the ``kind`` column of the store's runs table): the store writes
#: measurements, profiles and programs (:mod:`gpucast.store.db`), cold starts
#: (:data:`gpucast.store.coldstart.COLDSTART_KIND`), optimizer steps
#: (:data:`gpucast.store.optimizer.OPTIMIZER_KIND`) and distributed campaign points
#: (:data:`gpucast.store.campaigns.DISTRIBUTED_KIND`).
RUN_KINDS: tuple[str, ...] = (
    "measurement", "profile", "program", "coldstart", "optimizer", "distributed",
)  # fmt: skip


def _db_path(db: Path | str | None) -> Path:
    from gpucast.store import default_db_path

    return Path(db) if db is not None else default_db_path()


def _check_kind(kind: str | None) -> None:
    if kind is not None and kind not in RUN_KINDS:
        raise InvalidSpecError(
            "kind", f"must be one of {', '.join(RUN_KINDS)}", got=kind, fix="e.g. --kind profile"
        )


def workload_filter(store: Store, text: str | None) -> tuple[str | None, bool]:
    """A ``--workload`` filter of stored runs (``runs list``, ``runs export``, ``report
    --runs``): the stored name to match (``None``: any) and whether that name's ``-o``
    configurations match too -- for a plain name only: ``'mlp -o hidden=1024,1024'`` is that
    configuration alone (the plain ``mlp`` runs; QA 38 M F2: it listed every ``mlp -o ...``)."""
    if text is None:
        return None, True
    return store.stored_workload(measured_name_of(text)), " -o " not in text


def _store_folder_exists(path: Path) -> None:
    """A store path whose folder does not exist is a typo, not an empty store."""
    folder = path.expanduser().parent
    if not folder.is_dir():
        raise InvalidSpecError(
            "db",
            f"folder {folder} does not exist, so no store can be there",
            got=str(path),
            fix="check the --db path (or $GPUCAST_DB)",
        )


#: ``--workload`` of the verbs that list or export stored runs
WORKLOAD_HELP = (
    "Only this workload, its -o configurations too ('mlp -o hidden=64' in quotes: that "
    "configuration only)."
)


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class RunsListRequest:
    """Which stored runs to list (``gpucast runs list``), newest first."""

    VERB: ClassVar[str] = "runs list"

    kind: str | None = option(
        None,
        help=f"Only runs of this kind: {', '.join(RUN_KINDS)}.",
        example="measurement",
    )
    workload: str | None = option(None, help=WORKLOAD_HELP, example="resnet50")
    limit: int = option(50, help="At most this many runs, newest first.", example="50")

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise InvalidSpecError("limit", "must be >= 1", got=self.limit, fix="e.g. --limit 50")
        _check_kind(self.kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunsListResult:
    """The runs listed (newest first) and how many match in all."""

    runs: tuple[RunSummary, ...]
    total: int
    #: the store listed, and whether it exists yet (a missing store lists nothing)
    store: str = ""
    store_exists: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": [r.to_dict() for r in self.runs],
            "total": self.total,
            "store": self.store,
            "store_exists": self.store_exists,
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per run: the summary columns."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.runs])


def runs_list(
    request: RunsListRequest | None = None, /, *, db: Path | str | None = None, **options: Any
) -> RunsListResult:
    """Stored runs, newest first; a store that does not exist yet (or an empty file) has none
    (nothing is created or written)."""
    from gpucast.store import Store
    from gpucast.store.db import no_store_yet

    request = resolve(RunsListRequest, request, options)
    path = _db_path(db)
    if no_store_yet(path):
        if db is not None or os.environ.get("GPUCAST_DB"):
            _store_folder_exists(path)
        return RunsListResult(runs=(), total=0, store=str(path), store_exists=False)
    with Store(path) as store:
        workload, configurations = workload_filter(store, request.workload)
        runs = store.list_runs(
            kind=request.kind, workload=workload, limit=request.limit, configurations=configurations
        )
        total = store.count_runs(
            kind=request.kind, workload=workload, configurations=configurations
        )
    return RunsListResult(runs=tuple(runs), total=total, store=str(path))


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class RunsShowRequest:
    """One stored run to show in full (``gpucast runs show``)."""

    VERB: ClassVar[str] = "runs show"

    run_id: int = option(help="A run id from `gpucast runs list`.", argument=True, example="1")

    def __post_init__(self) -> None:
        if self.run_id < 1:
            raise InvalidSpecError(
                "run-id", "must be >= 1", got=self.run_id, fix="see `gpucast runs list` for the ids"
            )


def runs_show(
    request: RunsShowRequest | str | Path | int | None = None,
    /,
    *,
    db: Path | str | None = None,
    **options: Any,
) -> StoredRun:
    """One stored run: its summary, spec and result (``to_dict()`` is what ``--json`` prints)."""
    from gpucast.store import Store

    request = resolve(RunsShowRequest, request, options)
    with Store(_db_path(db)).open(create=False) as store:
        try:
            return store.get_run(request.run_id)
        except InvalidInputError as exc:  # an unknown id (a damaged row is a StoreError)
            # an InvalidSpecError: the line names its field, and so does .field (QA 40 P #10)
            raise InvalidSpecError("run-id", exc.message, fix=exc.fix) from None


def _export_format(value: Any) -> str:
    return str(value).strip().lower()


#: ``--out`` suffixes of formats runs export does not write: refused without ``--format``
OTHER_FORMATS = (
    ".xlsx", ".xls", ".xlsm", ".ods", ".json", ".jsonl", ".ndjson", ".feather", ".arrow",
    ".h5", ".hdf5", ".db", ".sqlite", ".tsv", ".html", ".pkl", ".pickle", ".orc", ".avro",
)  # fmt: skip


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class RunsExportRequest:
    """Where and what to export (``gpucast runs export``)."""

    VERB: ClassVar[str] = "runs export"

    out: Path = option(help="File to write (replaced atomically).", example="runs.csv")
    format: str | None = option(
        None,
        parse=_export_format,
        help="csv or parquet (default: from the --out suffix, else csv).",
        example="parquet",
    )
    kind: str | None = option(None, help="Only runs of this kind.", example="measurement")
    workload: str | None = option(None, help=WORKLOAD_HELP, example="resnet50")

    @staticmethod
    def missing_fix(name: str, given: Mapping[str, Any]) -> str | None:
        """A missing ``--out``'s example has the suffix of ``--format`` (QA 38 C #8: it said
        ``e.g. --out runs.csv`` with ``--format parquet``)."""
        from gpucast.store.db import EXPORT_FORMATS

        chosen = given.get("format")
        if name != "out" or chosen not in EXPORT_FORMATS:
            return None
        return f"e.g. --out runs.{chosen}"

    def __post_init__(self) -> None:
        from gpucast.store.db import EXPORT_FORMATS

        if self.format is not None and self.format not in EXPORT_FORMATS:
            raise InvalidSpecError(
                "format",
                f"must be one of {', '.join(EXPORT_FORMATS)}",
                got=self.format,
                fix="e.g. --format parquet",
            )
        _check_kind(self.kind)

    @property
    def chosen_format(self) -> str:
        """``format``, else ``parquet`` for a ``.parquet``/``.pq`` file, else ``csv``; a suffix
        of another format (``.xlsx``, ``.json``: :data:`OTHER_FORMATS`) is refused."""
        if self.format is not None:
            return self.format
        suffix = Path(self.out).suffix.lower()
        if suffix in OTHER_FORMATS:
            raise InvalidSpecError(  # an .xlsx of CSV text was written without a word
                "out",
                f"a {suffix} file is neither CSV nor Parquet, the formats runs export writes",
                got=str(self.out),
                fix=f"name it {Path(self.out).stem}.csv or .parquet, or pass --format csv",
            )
        return "parquet" if suffix in (".parquet", ".pq") else "csv"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportResult:
    out: Path
    format: str
    count: int
    #: e.g. that no run matched the filters (the file then holds the header alone)
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "format": self.format,
            "count": self.count,
            "warnings": list(self.warnings),
        }


def runs_export(
    request: RunsExportRequest | None = None, /, *, db: Path | str | None = None, **options: Any
) -> ExportResult:
    """Write the runs table (summary columns and the full JSON) to CSV or Parquet."""
    from gpucast.store import Store
    from gpucast.store.files import refuse_overwriting_inputs

    request = resolve(RunsExportRequest, request, options)
    refuse_overwriting_inputs(request.out, [_db_path(db)], field="out")  # the store it reads
    chosen = request.chosen_format
    with Store(_db_path(db)).open(create=False) as store:
        workload, configurations = workload_filter(store, request.workload)
        count = store.export(
            request.out, chosen, kind=request.kind, workload=workload, configurations=configurations
        )
        held = store.count_runs() if count == 0 else count
    warnings: tuple[str, ...] = ()
    implied = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(
        Path(request.out).suffix.lower(), chosen
    )
    if implied != chosen:  # --format parquet --out runs.csv: parquet bytes in a .csv
        warnings += (
            f"out: {request.out} holds {chosen} (--format {chosen}) though its name says "
            f"{implied}; name it {Path(request.out).stem}.{chosen} to open it as what it is",
        )
    if count == 0:  # as report --runs says it: the file holds the header alone
        which = " and ".join(
            f"{flag} {value}"
            for flag, value in (("--kind", request.kind), ("--workload", request.workload))
            if value is not None
        )
        warnings += (
            f"no run matches {which or 'any filter'} in {_db_path(db)}; it holds "
            f"{count_of(held, 'run')}: see gpucast runs list ({request.out} holds the header "
            "alone)",
        )
    return ExportResult(out=request.out, format=chosen, count=count, warnings=warnings)

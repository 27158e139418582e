"""The embedded measurement store: one SQLite file in WAL mode with a versioned schema.

Crash safety and concurrency
    * WAL journal, ``synchronous=NORMAL``: a committed transaction survives the writer being
      killed (SIGKILL) at any point; on power loss the last few commits may roll back, but the
      file is never corrupted.
    * Every write is one ``BEGIN IMMEDIATE`` transaction: it takes the write lock up front, so
      concurrent writers queue on ``busy_timeout`` instead of failing with "database is locked".
    * Opening never overwrites: a file that is not an SQLite database, or an SQLite database
      that is not a gpucast store, is refused with :class:`InvalidInputError`.

Nothing happens at import or in the constructor; :meth:`Store.open` (or ``with Store(path)``)
creates the parent folder, connects and migrates.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from gpucast._version import __version__
from gpucast.domain.errors import InvalidInputError, InvalidSpecError, StoreError
from gpucast.domain.kernels import KernelTrace
from gpucast.domain.limits import check_db_text
from gpucast.domain.measurement import Measurement
from gpucast.domain.program import ProgramMeasurement
from gpucast.domain.workload import WorkloadSpec
from gpucast.store.records import RunSummary, StoredRun
from gpucast.store.schema import apply_migrations, latest_version

SQLITE_MAGIC = b"SQLite format 3\x00"
DEFAULT_BUSY_TIMEOUT_S = 60.0
ExportFormat = Literal["csv", "parquet"]
EXPORT_FORMATS: tuple[str, ...] = ("csv", "parquet")

_SUMMARY_COLUMNS = (
    "id, kind, workload, batch_size, precision, mode, device, created_at, median_s, mean_s, "
    "p5_s, p95_s, ci_halfwidth_rel, samples_per_s, n_samples, stop_reason, host, gpu_name, "
    "gpucast_version"
)
#: the runs table's columns: the summary's, then the spec and the result as JSON text
RUN_COLUMNS: tuple[str, ...] = (
    *(c.strip() for c in _SUMMARY_COLUMNS.split(",")),
    "spec_json",
    "result_json",
)
_NOT_A_STORE_FIX = (
    "pass --db with a new file or an existing gpucast store; the file was not changed"
)


def _json_safe(value: Any) -> Any:
    """Plain JSON types only: NaN/inf become null, tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    try:
        return json.dumps(_json_safe(value), allow_nan=False, separators=(",", ":"))
    except TypeError as exc:
        raise InvalidInputError(
            f"cannot store a result that is not plain JSON data ({exc})",
            fix="pass the output of to_dict()",
        ) from None


def measurement_row(m: Measurement) -> dict[str, Any]:
    """The ``runs`` row of a measurement (``kind`` "measurement")."""
    return {
        "kind": "measurement",
        "workload": m.spec.label,  # ``mlp -o hidden=4096`` for a configured run
        "batch_size": m.spec.batch_size,
        "precision": m.spec.precision,
        "mode": m.mode,
        "device": m.device,
        "created_at": m.created_at.astimezone(UTC).isoformat(),
        "spec_json": _dumps(m.spec.to_dict()),
        "result_json": _dumps(m.to_dict()),
        "median_s": m.median_s,
        "mean_s": m.mean_s,
        "p5_s": m.p5_s,
        "p95_s": m.p95_s,
        "ci_halfwidth_rel": m.ci_halfwidth_rel,
        "samples_per_s": m.samples_per_s,
        "n_samples": m.n_samples,
        "stop_reason": m.stop_reason,
        "host": m.environment.host,
        "gpu_name": m.environment.gpu_name,
        "gpucast_version": __version__,
    }


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Store:
    """The measurement store at ``path`` (see the module docstring).

    Use as ``with Store(path) as store: ...`` or call :meth:`open` / :meth:`close`. One
    ``Store`` belongs to one thread; open another in each process or thread that writes.
    """

    def __init__(self, path: Path | str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S):
        self.path = Path(path).expanduser()
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        #: the folder :meth:`open` created because it did not exist, else ``None``; a write
        #: verb carries it on its result, where the CLI says so (QA 38 C #6)
        self.created_folder: Path | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def open(self, *, create: bool = True) -> Store:
        """Create the folder, connect, and bring the schema up to date. Returns ``self``.

        With ``create=False`` a missing or empty file is an error instead of a new, empty
        store (:func:`no_store_yet`): nothing is written.
        """
        if self._conn is not None:
            return self
        if not create and no_store_yet(self.path):
            empty = " (the file is empty)" if self.path.exists() else ""
            raise InvalidInputError(
                f"--db {self.path}: no store there yet{empty}",
                fix="measure something first (gpucast measure train WORKLOAD) or pass --db",
            )
        self._check_file()
        missing = not self.path.parent.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if missing:
                self.created_folder = self.path.parent
        except OSError as exc:
            raise StoreError(
                f"cannot create the store's folder {self.path.parent}: {exc.strerror}",
                fix="pass --db with a writable path",
            ) from None
        try:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the store {self.path}: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            # Read-only, in one snapshot (another process may be migrating right now): refuse a
            # foreign or newer file before changing a byte of it.
            conn.execute("BEGIN")
            try:
                self._inspect(conn)
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            self._configure(conn)
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and _is_locked(exc):
                raise self._locked_error() from None
            raise InvalidInputError(
                f"--db {self.path}: not a readable gpucast store ({exc})", fix=_NOT_A_STORE_FIX
            ) from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return self

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Store:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_file(self) -> None:
        path = self.path
        if path.is_dir():
            raise InvalidInputError(
                f"--db {path}: is a folder, not a file", fix="pass a file path such as runs.db"
            )
        if not path.exists():
            return
        try:
            with path.open("rb") as handle:
                header = handle.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise StoreError(f"cannot read the store {path}: {exc.strerror}") from None
        # An empty file (or one being created right now by another process) is fine.
        if header and not SQLITE_MAGIC.startswith(header):
            raise InvalidInputError(f"--db {path}: is not an SQLite database", fix=_NOT_A_STORE_FIX)

    def _inspect(self, conn: sqlite3.Connection) -> None:
        """Refuse, without writing a byte, a database that is not a gpucast store we can read."""
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if current > latest_version():
            raise StoreError(
                f"the store {self.path} has schema version {current}; this gpucast reads up to "
                f"{latest_version()}",
                fix="upgrade gpucast, or pass --db with another file",
            )
        if current == 0:
            foreign = [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_schema WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%'"
                )
            ]
            if foreign:
                raise InvalidInputError(
                    f"--db {self.path}: is an SQLite database but not a gpucast store "
                    f"(it has tables {', '.join(sorted(foreign)[:5])})",
                    fix=_NOT_A_STORE_FIX,
                )

    def _configure(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL needs a brief exclusive lock; when many processes open a new store
        # at once, SQLite may report "locked" without consulting busy_timeout, so retry.
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.005
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
        if str(mode).lower() != "wal":
            raise StoreError(
                f"the store {self.path} cannot use write-ahead logging (journal mode {mode})",
                fix="put --db on a local file system",
            )
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")

    def _migrate(self, conn: sqlite3.Connection) -> None:
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) == latest_version():
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated (or a foreign writer created tables) meanwhile.
            self._inspect(conn)
            current = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if current < latest_version():
                apply_migrations(conn, current)
            conn.execute("COMMIT")
        except BaseException:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _locked_error(self) -> StoreError:
        return StoreError(
            f"the store {self.path} stayed locked by another process for over "
            f"{self.busy_timeout_s:g} s",
            fix="wait for the other gpucast process to finish, or pass another --db",
        )

    @property
    def connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(
                f"the store {self.path} is not open", fix="use `with Store(path) as store:`"
            )
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``); rolls back on error."""
        conn = self.connection
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_locked(exc):
                raise self._locked_error() from None
            raise StoreError(f"cannot write the store {self.path}: {exc}") from None
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot write the store {self.path}: {exc}") from None
            raise

    @property
    def schema_version(self) -> int:
        return int(self.connection.execute("PRAGMA user_version").fetchone()[0])

    def integrity_check(self) -> list[str]:
        """SQLite's integrity check: ``[]`` when the file is sound, else the problems."""
        rows = [str(row[0]) for row in self.connection.execute("PRAGMA integrity_check")]
        return [] if rows == ["ok"] else rows

    # -- writes ----------------------------------------------------------------------------
    def insert_run(self, row: dict[str, Any], *, kernels: KernelTrace | None = None) -> int:
        """Insert one row of the ``runs`` table (column -> value), and its kernel trace when
        given, in one transaction; its run id."""
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self.transaction() as conn:
            cursor = conn.execute(
                f"INSERT INTO runs ({columns}) VALUES ({marks})", tuple(row.values())
            )
            run_id = cursor.lastrowid
            assert run_id is not None
            if kernels is not None:
                conn.execute(
                    "INSERT INTO kernel_traces (run_id, activity, steps, n_operators, "
                    "operator_time_s, trace_json) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        int(run_id),
                        kernels.activity,
                        kernels.steps,
                        len(kernels.operators),
                        kernels.operator_time_s_per_step,
                        _dumps(kernels.to_dict()),
                    ),
                )
        return int(run_id)

    def save_measurement(
        self, measurement: Measurement, *, kernels: KernelTrace | None = None
    ) -> int:
        """Store a measurement and, from ``--kernels``, its operator trace (one transaction);
        returns its run id."""
        return self.insert_run(measurement_row(measurement), kernels=kernels)

    def save_program(self, measurement: ProgramMeasurement, result: Mapping[str, Any]) -> int:
        """Store a program measurement (``gpucast measure cmd``), failed or not, with
        ``result`` (its ``to_dict()`` and profile) as the run's JSON; returns its run id."""
        m = measurement
        env = m.environment
        ci = m.ci_halfwidth_rel
        return self.insert_run(
            {
                "kind": "program",
                "workload": m.name,
                "batch_size": 1,
                "precision": "-",
                "mode": "cmd",
                "device": f"cpu x{m.n_cores}",
                "created_at": m.created_at.astimezone(UTC).isoformat(),
                "spec_json": _dumps({"name": m.name, "command": list(m.command)}),
                "result_json": _dumps(dict(result)),
                "median_s": m.median_s,
                "mean_s": m.mean_s,
                "p5_s": m.p5_s,
                "p95_s": m.p95_s,
                "ci_halfwidth_rel": ci if ci is not None and math.isfinite(ci) else None,
                "samples_per_s": m.work_per_s,
                "n_samples": m.n_samples,
                "stop_reason": m.stop_reason,
                "host": env.host,
                "gpu_name": env.gpu_name,
                "gpucast_version": __version__,
            }
        )

    def save_profile(
        self, spec: WorkloadSpec, profile: Mapping[str, Any], *, created_at: datetime | None = None
    ) -> int:
        """Store a workload profile (``WorkloadProfile.to_dict()``); returns its run id."""
        if not isinstance(profile, Mapping):
            raise InvalidInputError("profile must be a dict", fix="pass WorkloadProfile.to_dict()")
        when = created_at or datetime.now(UTC)
        return self.insert_run(
            {
                "kind": "profile",
                "workload": spec.label,
                "batch_size": spec.batch_size,
                "precision": spec.precision,
                "mode": None,
                "device": None,
                "created_at": when.astimezone(UTC).isoformat(),
                "spec_json": _dumps(spec.to_dict()),
                "result_json": _dumps(dict(profile)),
                "host": socket.gethostname(),
                "gpucast_version": __version__,
            }
        )

    # -- reads -----------------------------------------------------------------------------
    @staticmethod
    def _filters(
        kind: str | None, workload: str | None, configurations: bool = False
    ) -> tuple[str, list[Any]]:
        """``configurations``: ``workload`` also matches its ``-o`` configurations' runs
        (``mlp`` lists ``mlp -o hidden=64``); without it only the runs of exactly that
        configuration (what calibrates a prediction of it)."""
        clauses: list[str] = []
        params: list[Any] = []
        if kind is not None:
            clauses.append("kind = ?")
            params.append(kind)
        if workload is not None and configurations:
            escaped = workload.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            clauses.append("(workload = ? OR workload LIKE ? ESCAPE '\\')")
            params += [workload, escaped + " -o %"]
        elif workload is not None:
            clauses.append("workload = ?")
            params.append(workload)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    @staticmethod
    def _summary(row: tuple[Any, ...]) -> RunSummary:
        (run_id, kind, workload, batch_size, precision, mode, device, created_at, median_s,
         mean_s, p5_s, p95_s, ci_rel, samples_per_s, n_samples, stop_reason, host, gpu_name,
         version) = row  # fmt: skip
        return RunSummary(
            id=int(run_id),
            kind=kind,
            workload=workload,
            batch_size=int(batch_size),
            precision=precision,
            mode=mode,
            device=device,
            created_at=datetime.fromisoformat(created_at),
            median_s=median_s,
            mean_s=mean_s,
            p5_s=p5_s,
            p95_s=p95_s,
            ci_halfwidth_rel=ci_rel,
            samples_per_s=samples_per_s,
            n_samples=n_samples,
            stop_reason=stop_reason,
            host=host,
            gpu_name=gpu_name,
            gpucast_version=version,
        )

    def list_runs(
        self,
        *,
        kind: str | None = None,
        workload: str | None = None,
        limit: int | None = 100,
        configurations: bool = False,
    ) -> list[RunSummary]:
        """Runs, newest first, optionally of one kind and/or workload (with
        ``configurations``, its ``-o`` configurations' too); ``limit=None``: all."""
        if limit is not None and (isinstance(limit, bool) or limit < 1):
            raise InvalidSpecError("limit", "must be >= 1", got=limit)
        where, params = self._filters(kind, workload, configurations)
        sql = f"SELECT {_SUMMARY_COLUMNS} FROM runs{where} ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [self._summary(row) for row in self.connection.execute(sql, params)]

    def stored_workload(self, name: str) -> str:
        """The stored workload name a user's ``name`` means: itself where stored, else the one
        stored name equal to it with case and surrounding spaces ignored (``measure train MLP``
        stores ``mlp``), else ``name`` as given."""
        name = name.strip()
        found = [
            str(row[0])
            for row in self.connection.execute(
                "SELECT DISTINCT workload FROM runs WHERE workload = ? COLLATE NOCASE", (name,)
            )
        ]
        return found[0] if len(found) == 1 and name not in found else name

    def count_runs(
        self,
        *,
        kind: str | None = None,
        workload: str | None = None,
        configurations: bool = False,
    ) -> int:
        where, params = self._filters(kind, workload, configurations)
        return int(
            self.connection.execute(f"SELECT COUNT(*) FROM runs{where}", params).fetchone()[0]
        )

    def get_run(self, run_id: int) -> StoredRun:
        """One run in full; an unknown id raises :class:`InvalidInputError`."""
        row = self.connection.execute(
            f"SELECT {_SUMMARY_COLUMNS}, spec_json, result_json FROM runs WHERE id = ?",
            (int(run_id),),
        ).fetchone()
        if row is None:
            newest = self.connection.execute("SELECT MAX(id) FROM runs").fetchone()[0]
            hint = "the store is empty" if newest is None else f"ids go up to {newest}"
            raise InvalidInputError(
                f"no run with id {run_id} in {self.path} ({hint})",
                fix="see `gpucast runs list` for the ids",
            )
        what = f"run {run_id}"
        return StoredRun(
            summary=self._summary(row[:-2]),
            spec=self._loads(row[-2], what),
            result=self._loads(row[-1], what),
        )

    def _loads(self, text: str, what: str) -> Any:
        """A stored JSON column; a damaged one (edited by hand, a broken disk) is one
        :class:`StoreError` naming the row, not a traceback."""
        try:
            return json.loads(text)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"{what} in {self.path} is damaged: its stored JSON does not parse ({exc})",
                fix="the other runs read as before; leave this one out",
            ) from None

    def get_measurement(self, run_id: int) -> Measurement:
        return self.get_run(run_id).measurement()

    def kernel_trace(self, run_id: int) -> KernelTrace | None:
        """The operator trace stored with run ``run_id`` (``None``: measured without
        ``--kernels``)."""
        row = self.connection.execute(
            "SELECT trace_json FROM kernel_traces WHERE run_id = ?", (int(run_id),)
        ).fetchone()
        if row is None:
            return None
        return KernelTrace.from_dict(self._loads(row[0], f"the operator trace of run {run_id}"))

    def kernel_run_ids(self) -> list[int]:
        """Ids of the runs stored with an operator trace, oldest first."""
        rows = self.connection.execute("SELECT run_id FROM kernel_traces ORDER BY run_id")
        return [int(r[0]) for r in rows]

    # -- named models --------------------------------------------------------------------------
    def save_named_model(
        self, kind: str, name: str, model: Mapping[str, Any], meta: Mapping[str, Any]
    ) -> None:
        """Store a fitted model (``Estimator.to_dict()``) under ``name``; the same name again
        replaces it, in one transaction."""
        if not name or not name.strip():
            raise InvalidSpecError("name", "must not be empty", fix="e.g. --name aws-v100")
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO named_models (kind, name, created_at, model_json, "
                "meta_json, gpucast_version) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    name.strip(),
                    datetime.now(UTC).isoformat(),
                    _dumps(dict(model)),
                    _dumps(dict(meta)),
                    __version__,
                ),
            )

    def named_model(
        self, kind: str, name: str, *, field: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(model dict, meta dict) stored under ``name``; unknown names list the known ones,
        the line starting with ``field`` (the flag that named it, e.g. ``lifetimes``)."""
        row = self.connection.execute(
            "SELECT model_json, meta_json FROM named_models WHERE kind = ? AND name = ?",
            (kind, name.strip()),
        ).fetchone()
        if row is None:
            from gpucast.domain.errors import UnknownNameError

            raise UnknownNameError(
                name,
                [n for n, _ in self.named_models(kind)],
                fix=f"fit one first: gpucast fit {kind} --name {name} ... (store {self.path})",
                field=field,
                kind=f"{kind} model",
            )
        what = f"{kind} model {name.strip()!r}"
        return self._loads(row[0], what), self._loads(row[1], what)

    def named_models(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """(name, meta) of every model of ``kind``, newest first."""
        rows = self.connection.execute(
            "SELECT name, meta_json FROM named_models WHERE kind = ? ORDER BY created_at DESC",
            (kind,),
        ).fetchall()
        return [(str(r[0]), self._loads(r[1], f"{kind} model {r[0]!r}")) for r in rows]

    # -- export ----------------------------------------------------------------------------
    def export(
        self,
        path: Path | str,
        format: str = "csv",
        *,
        kind: str | None = None,
        workload: str | None = None,
        configurations: bool = False,
    ) -> int:
        """Write the runs table (every column, JSON kept as text) to CSV or Parquet.

        Written to a temporary file in the same folder and renamed into place, so a failed
        export never leaves a half-written file. Returns the number of rows written.
        """
        import pandas as pd

        if format not in EXPORT_FORMATS:
            raise InvalidSpecError(
                "format", f"must be one of {', '.join(EXPORT_FORMATS)}", got=format
            )
        from gpucast.store.files import replacing

        where, params = self._filters(kind, workload, configurations)
        with replacing(path, field="out") as tmp:
            frame = pd.read_sql_query(
                f"SELECT * FROM runs{where} ORDER BY id", self.connection, params=params
            )
            if format == "csv":
                frame.to_csv(tmp, index=False)
            else:
                frame.to_parquet(tmp, index=False, engine="pyarrow")
        return len(frame)


def new_store(store: Store | None) -> Path | None:
    """``store``'s path where opening it created its missing folder, else ``None``: what a
    write verb's result carries as ``new_store`` for the CLI to say (QA 38 C #6)."""
    return None if store is None or store.created_folder is None else store.path


def default_db_path() -> Path:
    """``$GPUCAST_DB``, else ``$XDG_DATA_HOME/gpucast/gpucast.db``, else
    ``~/.local/share/gpucast/gpucast.db``. Creates nothing."""
    explicit = os.environ.get("GPUCAST_DB")
    if explicit:
        return Path(check_db_text(explicit)).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME")
    base = Path(data_home).expanduser() if data_home else Path.home() / ".local" / "share"
    return base / "gpucast" / "gpucast.db"


def no_store_yet(path: Path) -> bool:
    """Whether ``path`` holds no store yet: no file, or an empty one (a touched file, or one
    another process is creating). A read verb treats both alike and writes neither (QA 38 C
    #5: ``runs list`` on a 0-byte file wrote a 61 KB schema into it); a folder is not
    "no store yet" (opening it says it is a folder)."""
    return not path.exists() or (path.is_file() and path.stat().st_size == 0)


def open_store(path: Path | str | None = None) -> Store:
    """Open the store at ``path`` (default :func:`default_db_path`); close it when done."""
    return Store(path if path is not None else default_db_path()).open()

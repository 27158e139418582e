from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from store_factories import make_measurement

from gpucast.domain.errors import InvalidInputError, InvalidSpecError, StoreError
from gpucast.domain.workload import WorkloadSpec
from gpucast.store import Store, default_db_path, open_store
from gpucast.store import schema as schema_module
from gpucast.store.db import new_store
from gpucast.store.schema import latest_version, split_statements


def test_import_does_no_work(tmp_path: Path) -> None:
    code = "import gpucast.store, gpucast.measure, gpucast.app.runs, gpucast.app.measure"
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home"), "PATH": ""}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_the_store_says_whether_it_created_its_folder(tmp_path: Path) -> None:
    """QA 38 C #6 without a side channel: the opened store carries it, nothing module-wide."""
    path = tmp_path / "a" / "b" / "runs.db"
    with Store(path) as first:
        assert first.created_folder == path.parent
        assert new_store(first) == path
    with Store(path) as again:
        assert again.created_folder is None and new_store(again) is None
    assert new_store(None) is None


def test_default_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCAST_DB", str(tmp_path / "explicit.db"))
    assert default_db_path() == tmp_path / "explicit.db"
    monkeypatch.delenv("GPUCAST_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "gpucast" / "gpucast.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / ".local" / "share" / "gpucast" / "gpucast.db"
    assert not (tmp_path / "home").exists()  # nothing is created until open


def test_open_creates_folders_wal_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "runs.db"
    with Store(path) as store:
        assert path.exists()
        conn = store.connection
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
        assert store.schema_version == latest_version()
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
        assert versions == list(range(1, latest_version() + 1))
        assert store.integrity_check() == []
    with pytest.raises(StoreError, match="not open"):
        store.list_runs()


def test_measurement_round_trip_and_listing(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        ids = [store.save_measurement(make_measurement(i)) for i in range(5)]
        assert ids == sorted(ids) and len(set(ids)) == 5
        for i, run_id in enumerate(ids):
            assert store.get_measurement(run_id) == make_measurement(i)
        runs = store.list_runs()
        assert [r.id for r in runs] == ids[::-1]  # newest first
        first = store.get_run(ids[0])
        m = make_measurement(0)
        assert first.summary.median_s == m.median_s
        assert first.summary.samples_per_s == m.samples_per_s
        assert first.summary.host == "test-host" and first.summary.device == "cpu"
        assert first.spec == {"name": "mlp", "batch_size": 8, "precision": "fp32", "options": []}
        assert [r.workload for r in store.list_runs(workload="resnet50")] == ["resnet50"] * 2
        # QA session 36: `measure train MLP` measures mlp, but `runs list --workload MLP` and
        # `report --runs --workload MLP` matched nothing
        assert store.stored_workload("ResNet50 ") == store.stored_workload("resnet50") == "resnet50"
        assert store.stored_workload("nope") == "nope"
        assert len(store.list_runs(limit=2)) == 2
        assert store.count_runs(kind="measurement") == 5
        assert store.list_runs(kind="profile") == []
        with pytest.raises(InvalidSpecError, match="limit"):
            store.list_runs(limit=0)


def test_profiles_are_stored_as_given(tmp_path: Path) -> None:
    profile = {"parameters": 1234, "flops_forward": 5.5e9, "per_class": {"conv": 0.7}, "x": None}
    with open_store(tmp_path / "s.db") as store:
        run_id = store.save_profile(WorkloadSpec(name="resnet50", batch_size=32), profile)
        run = store.get_run(run_id)
        assert run.kind == "profile" and run.result == profile
        assert run.summary.mode is None and run.summary.median_s is None
        with pytest.raises(InvalidInputError, match="is a profile, not a measurement"):
            run.measurement()
        with pytest.raises(InvalidInputError, match="not plain JSON"):
            store.save_profile(WorkloadSpec(name="x", batch_size=1), {"bad": object()})
        assert store.count_runs() == 1  # the failed write left nothing behind


def test_unknown_id_says_how_to_fix(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        with pytest.raises(InvalidInputError, match="store is empty"):
            store.get_run(1)
        store.save_measurement(make_measurement())
        with pytest.raises(
            InvalidInputError, match=r"no run with id 42 .*ids go up to 1.*runs list"
        ):
            store.get_run(42)


def test_a_failed_transaction_rolls_back(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        with pytest.raises(RuntimeError), store.transaction() as conn:
            conn.execute(
                "INSERT INTO runs (kind, workload, batch_size, precision, created_at, spec_json, "
                "result_json, gpucast_version) VALUES ('measurement', 'w', 1, 'fp32', 'now', "
                "'{}', '{}', '0')"
            )
            raise RuntimeError("boom")
        assert store.count_runs() == 0


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_round_trip(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"runs.{fmt}"
    with open_store(tmp_path / "s.db") as store:
        for i in range(4):
            store.save_measurement(make_measurement(i))
        store.save_profile(WorkloadSpec(name="mlp", batch_size=1), {"parameters": 10})
        assert store.export(out, fmt) == 5
        assert store.export(tmp_path / f"m.{fmt}", fmt, kind="measurement", workload="mlp") == 2
    frame = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    assert len(frame) == 5
    assert list(frame["kind"]) == ["measurement"] * 4 + ["profile"]
    assert frame["median_s"].iloc[0] == pytest.approx(make_measurement(0).median_s)
    from gpucast.domain.measurement import Measurement

    back = Measurement.from_dict(json.loads(frame["result_json"].iloc[3]))
    assert back == make_measurement(3)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_export_rejects_bad_targets(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        with pytest.raises(InvalidSpecError, match="format"):
            store.export(tmp_path / "x.xlsx", "xlsx")
        with pytest.raises(InvalidInputError, match="does not exist"):
            store.export(tmp_path / "missing" / "x.csv")
        with pytest.raises(InvalidInputError, match="is a folder"):
            store.export(tmp_path)


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    content = b"these are my notes, not a database\n" * 100
    path.write_bytes(content)
    with pytest.raises(InvalidInputError, match="not an SQLite database") as info:
        Store(path).open()
    assert info.value.exit_code == 2
    assert path.read_bytes() == content
    assert not Path(str(path) + "-wal").exists()


def test_a_corrupt_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    with open_store(path) as store:
        store.save_measurement(make_measurement())
    raw = bytearray(path.read_bytes())
    raw[100:4096] = b"\xff" * (4096 - 100)  # trash the rest of page 1 (the schema root)
    path.write_bytes(bytes(raw))
    with pytest.raises(InvalidInputError, match="not a readable gpucast store"):
        Store(path).open()
    assert path.read_bytes() == bytes(raw)


def test_another_apps_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(InvalidInputError, match=r"not a gpucast store .*invoices"):
        Store(path).open()
    assert path.read_bytes() == before


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with open_store(path) as store:
        store.connection.execute(f"PRAGMA user_version = {latest_version() + 1}")
    with pytest.raises(StoreError, match="upgrade gpucast"):
        Store(path).open()


def test_folder_and_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="is a folder"):
        Store(tmp_path).open()
    with pytest.raises(InvalidInputError, match="no store there yet"):
        Store(tmp_path / "absent.db").open(create=False)
    assert not (tmp_path / "absent.db").exists()


def test_appending_a_migration_upgrades_an_existing_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    with open_store(path) as store:
        run_id = store.save_measurement(make_measurement())
    extra = """
        CREATE TABLE notes (run_id INTEGER REFERENCES runs(id), text TEXT NOT NULL);
        CREATE TRIGGER notes_no_empty BEFORE INSERT ON notes
        WHEN NEW.text = '' BEGIN SELECT RAISE(ABORT, 'empty note'); END;
    """
    before = len(schema_module.MIGRATIONS)
    monkeypatch.setattr(schema_module, "MIGRATIONS", [*schema_module.MIGRATIONS, extra])
    with open_store(path) as store:
        assert store.schema_version == latest_version() == before + 1
        assert store.get_measurement(run_id) == make_measurement()
        store.connection.execute("INSERT INTO notes VALUES (?, 'ok')", (run_id,))
        with pytest.raises(sqlite3.IntegrityError, match="empty note"):
            store.connection.execute("INSERT INTO notes VALUES (?, '')", (run_id,))


def test_split_statements_keeps_trigger_bodies_whole() -> None:
    script = """
        -- a comment; with a semicolon
        CREATE TABLE t (x TEXT DEFAULT 'a;b');
        CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = 'y'; DELETE FROM t; END;
    """
    statements = split_statements(script)
    assert len(statements) == 2
    assert statements[1].endswith("END;")
    with pytest.raises(ValueError, match="incomplete"):
        split_statements("CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t;")


def test_a_damaged_row_is_one_store_error_and_the_others_still_read(tmp_path: Path) -> None:
    """QA session 36: a run whose stored JSON did not parse (edited by hand, a broken disk)
    was a JSONDecodeError traceback in `runs show` and `fit variability --runs`."""
    path = tmp_path / "s.db"
    with open_store(path) as store:
        ids = [store.save_measurement(make_measurement(i)) for i in range(2)]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runs SET result_json = '{not json' WHERE id = ?", (ids[0],))
    with open_store(path) as store:
        with pytest.raises(StoreError, match=rf"run {ids[0]} in .* is damaged") as info:
            store.get_measurement(ids[0])
        assert info.value.exit_code == 1 and "leave this one out" in str(info.value)
        assert store.get_measurement(ids[1]) == make_measurement(1)
        assert len(store.list_runs()) == 2


def test_a_blank_store_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """QA session 36: GPUCAST_DB='   ' stored runs in a file named by three spaces in the
    current folder (`saved as run 1 in    `)."""
    from typer.testing import CliRunner

    from gpucast.cli.app import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUCAST_DB", "   ")
    with pytest.raises(InvalidSpecError, match=r"^db: is blank"):
        default_db_path()
    for args in (["runs", "list"], ["--db", "  ", "runs", "list"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and result.stderr.startswith("error: db: is blank")
    assert list(tmp_path.iterdir()) == []

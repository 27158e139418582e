"""`gpucast runs delete|import` on real SQLite stores and real `runs export` files."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_runs_cli import make_measurement
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidInputError
from gpucast.domain.kernels import KernelTrace, OperatorRecord
from gpucast.domain.workload import WorkloadSpec
from gpucast.store import open_store
from gpucast.store.campaigns import (
    complete_point,
    finish_campaign,
    get_campaign,
    point_states,
    start_campaign,
)

runner = CliRunner()


def _trace() -> KernelTrace:
    op = OperatorRecord(
        name="aten.addmm", op_class="matmul", input_shapes="8,8x4,4x8", dtype="float32",
        calls_per_step=2.0, time_s_per_call=1e-4, flops=512, bytes_read=416, bytes_written=256,
    )  # fmt: skip
    return KernelTrace(device="cpu", activity="cpu", steps=3, profiled_step_s=5e-4, operators=(op,))


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """Runs 1-3 measurements (2 with an operator trace), 4 a profile, 5 a campaign's point."""
    path = tmp_path / "source.db"
    with open_store(path) as store:
        store.save_measurement(make_measurement(0))
        store.save_measurement(make_measurement(1), kernels=_trace())
        store.save_measurement(make_measurement(2))
        store.save_profile(WorkloadSpec(name="resnet50", batch_size=32), {"parameters": 25557032})
        start_campaign(
            store, campaign_id="c1", name="c1", sweep_path=None, sweep={"workload": "mlp"},
            points=[("p0", {"batch_size": 8})],
        )  # fmt: skip
        complete_point(store, "c1", "p0", "measurement", make_measurement(4).to_dict())
        assert finish_campaign(store, "c1", interrupted=False) == "done"
    return path


def _cli(db: Path, *argv: str) -> Any:
    result = runner.invoke(app, ["--db", str(db), "runs", *argv, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _error(db: Path, *argv: str) -> str:
    result = runner.invoke(app, ["--db", str(db), "runs", *argv])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def _runs(db: Path) -> list[dict[str, Any]]:
    """Every column of every run but its id, in id order (what an import must carry over),
    and each run as the store reads it back."""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY id")]
    with open_store(db) as store:
        for row in rows:
            read = store.get_run(row.pop("id")).to_dict()
            row["read"] = {k: v for k, v in read.items() if k != "id"}
    return rows


def _count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_export_import_round_trip_then_reimport_adds_nothing(
    source: Path, tmp_path: Path, suffix: str
) -> None:
    out = tmp_path / f"runs.{suffix}"
    _cli(source, "export", "--out", str(out))
    target = tmp_path / "target.db"
    first = _cli(target, "import", str(out))
    assert first["imported"] == 5 and first["skipped"] == 0
    assert [m["old_id"] for m in first["mapping"]] == [1, 2, 3, 4, 5]
    assert _runs(target) == _runs(source)  # every column, the spec and the result: equal
    assert first["notes"]  # traces and campaign links do not travel: said
    again = _cli(target, "import", str(out))
    assert again["imported"] == 0 and again["skipped"] == 5
    assert all(m["new_id"] is None for m in again["mapping"]) and not again["notes"]
    assert _count(target) == 5


def test_import_maps_old_ids_to_new_and_skips_what_is_already_there(
    source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs.csv"
    gpucast.runs_export(out=out, db=source)
    target = tmp_path / "target.db"
    with open_store(target) as store:  # two runs of its own first, one of them the source's 3
        store.save_measurement(make_measurement(9))
        store.save_measurement(make_measurement(2))
    result = gpucast.runs_import(out, db=target)
    assert result.mapping == ((1, 3), (2, 4), (3, None), (4, 5), (5, 6))
    assert (result.imported, result.skipped) == (4, 1)


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        ("result_json", '{"median_s": ', "line 4, column 'result_json': row 3: is not JSON"),
        ("spec_json", "[1, 2]", "line 4, column 'spec_json': row 3: is JSON but not an object"),
        ("batch_size", "eight", "line 4, column 'batch_size': row 3: 'eight' is not a number"),
        ("kind", "", "line 4, column 'kind': row 3: is empty"),
        ("created_at", "yesterday", "line 4, column 'created_at': row 3: 'yesterday' is not"),
    ],
)
def test_a_corrupt_cell_refuses_the_whole_file_naming_row_and_column(
    source: Path, tmp_path: Path, column: str, value: str, expected: str
) -> None:
    out = tmp_path / "runs.csv"
    gpucast.runs_export(out=out, db=source)
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    frame.loc[2, column] = value
    bad = tmp_path / "bad.csv"
    frame.to_csv(bad, index=False)
    target = tmp_path / "target.db"
    shutil.copy(source, target)  # a store with runs: none may be added
    line = _error(target, "import", str(bad))
    assert f"bad.csv, {expected}" in line and "nothing was imported" in line
    assert _count(target) == 5
    with pytest.raises(InvalidInputError, match=expected.split(": ")[0]):
        gpucast.runs_import(bad, db=target)
    assert _count(target) == 5


def test_a_missing_column_or_a_truncated_parquet_is_refused(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    gpucast.runs_export(out=out, db=source)
    pd.read_csv(out).drop(columns=["host"]).to_csv(tmp_path / "nohost.csv", index=False)
    target = tmp_path / "target.db"
    line = _error(target, "import", str(tmp_path / "nohost.csv"))
    assert "nohost.csv, line 1, column 'host': has no column host" in line
    parquet = tmp_path / "runs.parquet"
    gpucast.runs_export(out=parquet, db=source)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(parquet.read_bytes()[: parquet.stat().st_size // 2])
    assert "cut.parquet: is not a readable Parquet file" in _error(target, "import", str(cut))
    line = _error(target, "import", str(source))  # the store, not its export
    assert "is an SQLite store, not a runs export" in line and "runs export --out" in line
    assert not target.exists()  # a refused file opens no store


def test_delete_of_an_unknown_id_deletes_nothing(source: Path) -> None:
    line = _error(source, "delete", "2", "9", "7")
    assert line.startswith("error: ids: no run with id 7, 9 in ") and "nothing was deleted" in line
    assert _count(source) == 5
    with pytest.raises(InvalidInputError, match="no run with id 7, 9"):
        gpucast.runs_delete(ids=[2, 9, 7], db=source)
    assert _count(source) == 5


def test_delete_takes_the_trace_and_reopens_the_campaign_point(source: Path) -> None:
    result = _cli(source, "delete", "2", "5", "3")
    assert [(d["id"], d["kind"], d["workload"]) for d in result["deleted"]] == [
        (2, "measurement", "resnet50"),
        (3, "measurement", "mlp"),
        (5, "measurement", "mlp"),
    ]
    assert [d["kernel_trace"] for d in result["deleted"]] == [True, False, False]
    assert result["deleted"][2]["campaign_point"] == {"campaign": "c1", "point": "p0"}
    with open_store(source) as store:
        assert sorted(r.id for r in store.list_runs(limit=None)) == [1, 4]
        assert store.kernel_run_ids() == []
        (point,) = point_states(store, "c1")
        assert (point.status, point.run_id) == ("pending", None)
        campaign = get_campaign(store, "c1")
        assert campaign is not None and campaign.status == "interrupted"


def test_the_cli_says_what_it_deleted_and_imported(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    gpucast.runs_export(out=out, db=source)
    target = tmp_path / "new" / "target.db"
    shown = runner.invoke(app, ["--db", str(target), "runs", "import", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "imported 5 runs" in shown.stdout and "exported run 5 -> run 5 here" in shown.stdout
    assert "created its folder" in shown.stderr  # the store's folder was new
    shown = runner.invoke(app, ["--db", str(target), "runs", "delete", "2"])
    assert shown.exit_code == 0, shown.output
    assert "run 2: measurement of resnet50" in shown.stdout


def test_cli_and_python_agree(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs.parquet"
    gpucast.runs_export(out=out, db=source)
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    assert _cli(one, "import", str(out)) == {
        **gpucast.runs_import(path=out, db=two).to_dict(),
        "store": str(one),
    }
    assert _cli(one, "delete", "1", "5") == {
        **gpucast.runs_delete(ids=[1, 5], db=two).to_dict(),
        "store": str(one),
    }
    assert _runs(one) == _runs(two)

"""`gpucast runs list|show|export` through Typer's CliRunner, on a store filled directly."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app
from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
from gpucast.domain.units import format_seconds
from gpucast.domain.workload import WorkloadSpec
from gpucast.store import open_store

runner = CliRunner()
ENV = EnvironmentFingerprint(
    host="test-host", os="Linux", python_version="3.11", cpu_model="Test CPU", cpu_cores=4,
    torch_threads=2, torch_version="2.13.0",
)  # fmt: skip


def make_measurement(i: int) -> Measurement:
    """A distinct, valid measurement per ``i`` (as tests/store/store_factories.py builds)."""
    base = 0.01 * (1 + i % 7)
    return Measurement(
        spec=WorkloadSpec(name="mlp" if i % 2 == 0 else "resnet50", batch_size=8 + i),
        mode="train",
        device="cpu",
        step_times_s=tuple(base * (1 + 0.01 * k) for k in range(12)),
        warmup_step_times_s=(base * 3,),
        samples_per_step=8 + i,
        stop_reason="ci_reached",
        target_ci=0.02,
        environment=ENV,
        created_at=datetime(2025, 6, 1, tzinfo=UTC) + timedelta(seconds=i),
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    with open_store(path) as store:
        for i in range(3):
            store.save_measurement(make_measurement(i))
        store.save_profile(WorkloadSpec(name="resnet50", batch_size=32), {"parameters": 25557032})
    return path


def test_list_json_newest_first_with_filters(db: Path) -> None:
    result = runner.invoke(app, ["--db", str(db), "runs", "list", "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["id"] for r in data["runs"]] == [4, 3, 2, 1] and data["total"] == 4
    args = ["--db", str(db), "runs", "list", "--kind", "measurement", "--workload", "mlp", "--json"]
    data = json.loads(runner.invoke(app, args).stdout)
    assert [r["id"] for r in data["runs"]] == [3, 1]
    limited = runner.invoke(app, ["--db", str(db), "runs", "list", "--limit", "1", "--json"])
    assert [r["id"] for r in json.loads(limited.stdout)["runs"]] == [4]


def test_list_table(db: Path) -> None:
    result = runner.invoke(app, ["--db", str(db), "runs", "list"])
    assert result.exit_code == 0
    assert "4 of 4 runs" in result.stdout
    assert "resnet50" in result.stdout and "profile" in result.stdout


def test_list_on_a_missing_store_is_empty_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    result = runner.invoke(app, ["--db", str(db), "runs", "list", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "runs": [], "total": 0, "store": str(db), "store_exists": False
    }  # fmt: skip
    assert not db.exists()
    assert runner.invoke(app, ["--db", str(db), "runs", "list", "--limit", "0"]).exit_code == 2
    text = runner.invoke(app, ["--db", str(db), "runs", "list"])
    assert text.exit_code == 0 and f"no store at {db}" in text.stderr.replace("\n", "")


def test_list_in_a_folder_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    db = tmp_path / "no" / "such" / "dir" / "x.db"
    result = runner.invoke(app, ["--db", str(db), "runs", "list"])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr and "--db" in result.stderr
    assert not (tmp_path / "no").exists()


def test_a_write_in_a_folder_that_does_not_exist_says_it_created_it(tmp_path: Path) -> None:
    """QA 38 C #6: `runs list` refuses a --db in a missing folder, and a write verb created
    it silently; the first write now says so, once (a later write in it says nothing)."""
    db = tmp_path / "no" / "such" / "x.db"
    first = runner.invoke(app, ["--db", str(db), "profile", "mlp"])
    assert first.exit_code == 0, first.output
    said = [line for line in first.stderr.splitlines() if "created its folder" in line]
    assert said == [f"new store {db}: created its folder {db.parent} (it did not exist)"]
    again = runner.invoke(app, ["--db", str(db), "profile", "mlp"])
    assert again.exit_code == 0 and "created its folder" not in again.stderr
    other = tmp_path / "json" / "x.db"  # --json too: the line is on stderr, stdout stays JSON
    as_json = runner.invoke(app, ["--db", str(other), "profile", "mlp", "--json"])
    assert as_json.exit_code == 0, as_json.output
    said = [line for line in as_json.stderr.splitlines() if "created its folder" in line]
    assert said == [f"new store {other}: created its folder {other.parent} (it did not exist)"]
    assert json.loads(as_json.stdout)["run_id"] >= 1


def test_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--db", str(tmp_path / "x.db"), "runs", "list", "--kind", "x"])
    assert result.exit_code == 2 and "measurement, profile" in result.stderr


def test_show_round_trips_the_measurement(db: Path) -> None:
    result = runner.invoke(app, ["--db", str(db), "runs", "show", "2", "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["id"] == 2 and data["kind"] == "measurement"
    assert Measurement.from_dict(data["result"]) == make_measurement(1)
    table = runner.invoke(app, ["--db", str(db), "runs", "show", "2"])
    assert table.exit_code == 0
    # what was measured, as measure train's title says it (QA 38 C: batch, precision, device)
    assert "run 2: train resnet50 · batch 9 · fp32 · cpu" in table.stdout
    assert "median step" in table.stdout
    profile = runner.invoke(app, ["--db", str(db), "runs", "show", "4"])
    assert profile.exit_code == 0 and "25557032" in profile.stdout
    # piped (not a terminal): the stored JSON as is, no line padded to the console width
    body = profile.stdout.split("\n", 1)[1]
    assert json.loads(body) == {"parameters": 25557032} and not any(
        line.endswith(" ") for line in body.splitlines()
    )


@pytest.mark.parametrize("run_id", ["99", "0", "abc"])
def test_unknown_or_malformed_id_exits_2(db: Path, run_id: str) -> None:
    result = runner.invoke(app, ["--db", str(db), "runs", "show", run_id])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1


def test_unknown_id_names_the_fix(db: Path) -> None:
    result = runner.invoke(app, ["--db", str(db), "runs", "show", "99"])
    assert result.stderr.startswith("error: run-id: no run with id 99")  # the field (QA 38 C)
    assert "gpucast runs list" in result.stderr and result.exit_code == 2


@pytest.mark.parametrize(("fmt", "suffix"), [("csv", ".csv"), ("parquet", ".parquet")])
def test_export_round_trip(db: Path, tmp_path: Path, fmt: str, suffix: str) -> None:
    out = tmp_path / f"export{suffix}"
    result = runner.invoke(
        app, ["--db", str(db), "runs", "export", "--format", fmt, "--out", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    assert f"wrote 4 runs to {out}" in result.stderr.replace("\n", "")
    frame = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    assert list(frame["id"]) == [1, 2, 3, 4]
    assert Measurement.from_dict(json.loads(frame["result_json"][0])) == make_measurement(0)


def test_export_format_from_suffix_and_bad_format(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs.parquet"
    assert runner.invoke(app, ["--db", str(db), "runs", "export", "--out", str(out)]).exit_code == 0
    assert len(pd.read_parquet(out)) == 4
    bad = runner.invoke(
        app, ["--db", str(db), "runs", "export", "--format", "xlsx", "--out", str(tmp_path / "x")]
    )
    assert bad.exit_code == 2 and "format" in bad.stderr
    # a suffix of neither format is refused (an .xlsx of CSV text was written, exit 0) ...
    xlsx = tmp_path / "runs.xlsx"
    refused = runner.invoke(app, ["--db", str(db), "runs", "export", "--out", str(xlsx)])
    assert refused.exit_code == 2 and not xlsx.exists()
    assert "a .xlsx file is neither CSV nor Parquet" in refused.stderr
    assert "runs.csv" in refused.stderr and "--format csv" in refused.stderr
    # ... unless the format is named
    named = ["--format", "csv", "--out", str(xlsx)]
    assert runner.invoke(app, ["--db", str(db), "runs", "export", *named]).exit_code == 0
    assert len(pd.read_csv(xlsx)) == 4


@pytest.mark.parametrize(
    "verb", [["runs", "export", "--out"], ["report", "--runs", "--out"]], ids=["export", "report"]
)
def test_writing_over_the_store_it_reads_is_refused(db: Path, verb: list[str]) -> None:
    """QA session 35: `runs export --out $GPUCAST_DB` and `report --runs --out $GPUCAST_DB`
    replaced the measurement store with a CSV / an HTML page (exit 0)."""
    before = db.read_bytes()
    result = runner.invoke(app, ["--db", str(db), *verb, str(db)])
    assert result.exit_code == 2, result.stdout
    assert result.stderr.startswith("error: out: is the input file") and "--out" in result.stderr
    assert db.read_bytes() == before


def test_show_and_export_on_a_missing_store(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    result = runner.invoke(app, ["--db", str(db), "runs", "show", "1"])
    assert result.exit_code == 2 and "no store there yet" in result.stderr
    assert not db.exists()


def test_export_json_is_the_result(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs.csv"
    result = runner.invoke(app, ["--db", str(db), "runs", "export", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "out": str(out),
        "format": "csv",
        "count": 4,
        "warnings": [],
    }


def test_an_export_that_matches_nothing_says_so(db: Path, tmp_path: Path) -> None:
    """QA session 36: `runs export --workload nope` wrote a header-only CSV and said `wrote 0
    runs`, where `report --runs --workload nope` warns that the report is empty."""
    out = tmp_path / "none.csv"
    args = ["--db", str(db), "runs", "export", "--out", str(out), "--workload", "nope"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert "wrote 0 runs" in result.stderr
    assert "warning: no run matches --workload nope in" in result.stderr
    assert "it holds 4 runs" in result.stderr


def test_importing_the_cli_verbs_does_no_work(tmp_path: Path) -> None:
    code = "import gpucast.cli.app, gpucast.cli.runs, gpucast.cli.measure, gpucast.cli.campaign"
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home"), "PATH": ""}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_every_kind_the_store_writes_can_be_listed(tmp_path: Path) -> None:
    from gpucast.app.runs import RUN_KINDS
    from gpucast.store.campaigns import DISTRIBUTED_KIND, MEASUREMENT_KIND
    from gpucast.store.coldstart import COLDSTART_KIND
    from gpucast.store.optimizer import OPTIMIZER_KIND

    written = {MEASUREMENT_KIND, DISTRIBUTED_KIND, COLDSTART_KIND, OPTIMIZER_KIND}
    assert written | {"profile", "program"} <= set(RUN_KINDS)
    db = str(tmp_path / "x.db")
    result = runner.invoke(app, ["--db", db, "runs", "list", "--kind", "coldstart", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"] == []


def test_a_cold_start_run_lists_its_total_as_a_total(tmp_path: Path) -> None:
    """QA 35 S #21: a cold-start run's total sat under `median` as if it were one."""
    import gpucast

    db = tmp_path / "s.db"
    total_s = gpucast.measure_coldstart("mlp", steady_runs=2, db=db).measurement.total_s
    result = runner.invoke(app, ["--db", str(db), "runs", "list"], terminal_width=250)
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.stdout.splitlines() if "coldstart" in line]
    assert f"{format_seconds(total_s)} total" in row

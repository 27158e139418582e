"""``gpucast.runs_list``, ``runs_show``, ``runs_export`` on a store filled directly."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import gpucast
from gpucast.app.runs import RunsExportRequest, RunsListRequest, RunsShowRequest
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.workload import WorkloadSpec
from gpucast.store import open_store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    with open_store(path) as store:
        for i, name in enumerate(("mlp", "resnet50", "mlp")):
            store.save_profile(WorkloadSpec(name=name, batch_size=8 + i), {"parameters": i})
    return path


def test_list_with_keyword_options_and_a_request(db: Path) -> None:
    result = gpucast.runs_list(db=db)
    assert [r.id for r in result.runs] == [3, 2, 1] and result.total == 3
    assert result.to_dict() == {
        "runs": [r.to_dict() for r in result.runs], "total": 3, "store": str(db),
        "store_exists": True,
    }  # fmt: skip
    assert list(result.to_frame()["id"]) == [3, 2, 1]
    some = gpucast.runs_list(RunsListRequest(workload="mlp", limit=1), db=db)
    assert [r.id for r in some.runs] == [3] and some.total == 2
    assert gpucast.runs_list(kind="measurement", db=db).total == 0


def test_list_on_a_missing_store_is_empty_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    assert gpucast.runs_list(db=db).to_dict() == {
        "runs": [], "total": 0, "store": str(db), "store_exists": False
    }  # fmt: skip
    assert not db.exists()


def test_show(db: Path) -> None:
    run = gpucast.runs_show(run_id=2, db=db)
    assert run.kind == "profile" and run.result == {"parameters": 1}
    assert run.to_dict()["spec"]["name"] == "resnet50"
    assert gpucast.runs_show(RunsShowRequest(run_id=1), db=db).id == 1
    assert gpucast.runs_show(run_id="3", db=db).id == 3


def test_export(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs.parquet"
    result = gpucast.runs_export(out=out, db=db)
    assert result.to_dict() == {"out": str(out), "format": "parquet", "count": 3, "warnings": []}
    assert list(pd.read_parquet(out)["id"]) == [1, 2, 3]
    csv = gpucast.runs_export(RunsExportRequest(out=tmp_path / "x.data", workload="mlp"), db=db)
    assert (csv.format, csv.count) == ("csv", 2)
    frame = pd.read_csv(tmp_path / "x.data")
    assert json.loads(frame["result_json"][0]) == {"parameters": 0}


@pytest.mark.parametrize(
    ("verb", "options", "text"),
    [
        ("runs_list", {"limit": 0}, "limit"),
        ("runs_show", {"run_id": "abc"}, "run-id"),
        ("runs_show", {"run_id": 0}, "run-id"),
        ("runs_show", {}, "run-id: is required"),
        ("runs_export", {"out": "x.csv", "format": "xlsx"}, "format"),
        ("runs_export", {"format": "csv"}, "out: is required"),
    ],
)
def test_bad_options_are_typed_errors(
    tmp_path: Path, verb: str, options: dict[str, object], text: str
) -> None:
    db = tmp_path / "none.db"
    with pytest.raises(InvalidSpecError, match=text):
        getattr(gpucast, verb)(db=db, **options)
    assert not db.exists()


def test_show_and_export_on_a_missing_store_create_nothing(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    with pytest.raises(InvalidInputError, match="no store there yet"):
        gpucast.runs_show(run_id=1, db=db)
    with pytest.raises(InvalidInputError, match="no store there yet"):
        gpucast.runs_export(out=tmp_path / "x.csv", db=db)
    assert not db.exists()


def test_read_verbs_on_an_empty_file_write_nothing_into_it(tmp_path: Path) -> None:
    """QA 38 C #5: runs list / show / export and report on a 0-byte file turned it into a
    61 KB store (the schema written by a read). An empty file is read as no store yet, as a
    missing one is for each verb, and stays 0 bytes."""
    db = tmp_path / "empty.db"
    db.touch()
    listed = gpucast.runs_list(db=db)
    assert listed.total == 0 and listed.to_dict()["store_exists"] is False
    with pytest.raises(InvalidInputError, match=r"no store there yet \(the file is empty\)"):
        gpucast.runs_show(run_id=1, db=db)
    with pytest.raises(InvalidInputError, match=r"no store there yet \(the file is empty\)"):
        gpucast.runs_export(out=tmp_path / "x.csv", db=db)
    with pytest.raises(InvalidSpecError, match=r"^db: no measurement store there"):
        gpucast.write_report(runs=True, out=tmp_path / "r.html", db=db)
    with pytest.raises(InvalidInputError, match=r"^campaign: no campaign 'c': no store at"):
        gpucast.campaign_status(campaign="c", db=db)
    assert db.stat().st_size == 0 and not (tmp_path / "x.csv").exists()


def test_unknown_id_names_the_fix(db: Path) -> None:
    with pytest.raises(
        InvalidInputError, match=r"^run-id: no run with id 99.*gpucast runs list"
    ) as e:
        gpucast.runs_show(run_id=99, db=db)
    assert getattr(e.value, "field", None) == "run-id"  # as the line says (QA 40 P #10)


def test_a_workload_filter_reads_the_name_as_the_measure_verbs_do(db: Path, tmp_path: Path) -> None:
    """QA session 36: `measure train MLP` measures mlp, but `runs list --workload MLP`,
    `runs export --workload MLP` and `report --runs --workload MLP` found nothing."""
    exact = gpucast.runs_list(workload="mlp", db=db)
    assert exact.total > 0
    assert gpucast.runs_list(workload=" MLP", db=db).to_dict()["runs"] == exact.to_dict()["runs"]
    assert gpucast.runs_export(out=tmp_path / "x.csv", workload="Mlp", db=db).count == exact.total
    report = gpucast.write_report(runs=True, workload="MLP", db=db)
    assert len(report.data["runs"]) == exact.total and not report.warnings


def test_a_report_of_one_run_says_one_run(db: Path, tmp_path: Path) -> None:
    """QA session 38: `report --runs --limit 1` said "1 runs" (page and result)."""
    out = tmp_path / "one.html"
    report = gpucast.write_report(runs=True, limit=1, out=out, db=db)
    assert report.what.startswith("1 run from ")
    assert ": 1 run.</p>" in out.read_text()


def test_a_format_its_file_name_contradicts_is_said(db: Path, tmp_path: Path) -> None:
    """QA session 38: `runs export --format parquet --out runs.csv` wrote Parquet bytes into a
    .csv without a word."""
    parquet_in_csv = gpucast.runs_export(out=tmp_path / "runs.csv", format="parquet", db=db)
    assert parquet_in_csv.format == "parquet"
    assert parquet_in_csv.warnings[0].startswith("out: ")
    assert "holds parquet (--format parquet) though its name says csv" in parquet_in_csv.warnings[0]
    assert "name it runs.parquet" in parquet_in_csv.warnings[0]
    assert gpucast.runs_export(out=tmp_path / "r.pq", format="parquet", db=db).warnings == ()
    assert gpucast.runs_export(out=tmp_path / "r.txt", format="parquet", db=db).warnings == ()

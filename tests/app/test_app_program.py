"""gpucast.measure_cmd: a program measured, profiled and stored; failures stored, never lost."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import gpucast
from gpucast.app.program import (
    MeasureCmdRequest,
    ProgramFailedError,
    ProgramPartlyFailedError,
)
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.store import open_store

PY = sys.executable
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")
WORK = "s = sum(i*i for i in range(100000)); print('items=42')"


def test_measure_cmd_stores_the_runs_and_the_profile(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    result = gpucast.measure_cmd(
        command=[PY, "-c", WORK], repeats=2, warmup=1, metric=r"items=(\d+)", cores=1,
        sample_interval_s=0.02, target_ci=1.0, db=db,
    )  # fmt: skip
    m = result.measurement
    assert m.status == "ok" and m.n_samples >= 2 and m.n_cores == 1
    assert m.metric_median == 42.0 and not m.metric_is_rate
    assert result.profile is not None and set(result.profile["shares"]) >= {"cpu", "io"}
    assert result.run_id is not None
    run = gpucast.runs_show(result.run_id, db=db)
    assert run.kind == "program" and run.summary.workload == Path(PY).name
    assert run.program() == m
    assert run.result["profile"] == result.profile
    assert gpucast.runs_list(kind="program", db=db).total == 1


def test_a_failing_program_is_stored_as_failed_and_exits_2(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with pytest.raises(ProgramFailedError, match=r"exited with code 5 \(stderr: nope\).*run 1"):
        gpucast.measure_cmd(
            command=[PY, "-c", "import sys; print('nope', file=sys.stderr); sys.exit(5)"], db=db
        )
    run = gpucast.runs_show(1, db=db)
    assert run.result["status"] == "failed"
    assert run.result["runs"][-1]["stderr_tail"] == ["nope"]
    assert ProgramFailedError.exit_code == 2


def test_a_run_failing_after_good_runs_exits_1_and_keeps_them(tmp_path: Path) -> None:
    flag = tmp_path / "count"
    code = (
        f"import pathlib, sys; p = pathlib.Path({str(flag)!r}); "
        "n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); "
        "sys.exit(1 if n >= 3 else 0)"
    )
    with pytest.raises(ProgramPartlyFailedError, match="after 2 good measured run"):
        gpucast.measure_cmd(
            command=[PY, "-c", code], repeats=5, target_ci=1.0, db=tmp_path / "r.db"
        )
    assert ProgramPartlyFailedError.exit_code == 1
    m = gpucast.runs_show(1, db=tmp_path / "r.db").program()
    assert m.n_samples == 2 and m.stop_reason == "failed"


def test_a_missing_program_fails_before_a_store_is_created(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with pytest.raises(InvalidSpecError, match="not found on PATH"):
        gpucast.measure_cmd(command=["no-such-program-xyz"], db=db)
    with pytest.raises(InvalidSpecError, match="not an executable"):
        gpucast.measure_cmd(command=[str(tmp_path / "nothing.sh")], db=db)
    assert not db.exists()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"command": []}, "command"),
        ({"command": ["x"], "metric": r"x=\d+"}, "metric"),
        ({"command": ["x"], "repeats": 0}, "repeats"),
        ({"command": ["x"], "warmup": -1}, "warmup"),
        ({"command": ["x"], "timeout": "soon"}, "timeout"),
        ({"command": ["x"], "timeout": -1}, "timeout"),
        ({"command": ["x"], "cores": 0}, "cores"),
        ({"command": ["x"], "cores": "two"}, "cores"),
        ({"command": ["x"], "sample_interval": 0}, "sample-interval"),
        ({"command": ["x"], "target_ci": float("nan")}, "target-ci"),
    ],
)
def test_bad_input_names_the_field(options: dict, field: str) -> None:
    from gpucast.domain.options import build

    with pytest.raises(InvalidInputError, match=field):
        build(MeasureCmdRequest, options)


@pytest.mark.parametrize(
    ("request_type", "options", "match"),
    [
        ("measure", {"command": ["x"], "repeats": 0}, r"^repeats: .*; e\.g\. --repeats 5"),
        ("measure", {"command": ["x"], "cores": 0}, r"^cores: .*; e\.g\. --cores 2"),
        ("measure", {"command": ["x"], "target_ci": 0.0}, r"^target-ci: .*; e\.g\. --target"),
        # QA session 36 #43: these named no fix
        ("measure", {"command": ["x"], "metric": "bad("}, r"^metric: .*; e\.g\. --metric 'tx/s="),
        ("measure", {"command": ["x"], "repeats": 10**9}, r"^repeats: .*<= 10000.*; e\.g\. --rep"),
        ("measure", {"command": ["x"], "warmup": 5000}, r"^warmup: .*; e\.g\. --warmup 1"),
        ("measure", {"command": ["x"], "max_time_s": 0}, r"^max-time-s: .*; e\.g\. --max-time"),
        ("measure", {"command": ["x"], "sample_interval": 99}, r"^sample-interval: .*; e\.g\."),
        ("predict", {"runs": [2], "arch": "riscv"}, r"^arch: .*; e\.g\. --arch arm64"),
        # RUN_ID is positional: the fix read "e.g. --runs 3" (QA 35 R #19)
        ("predict", {"runs": "abc"}, r"^runs: .*; e\.g\. 3 \(RUN_ID\.\.\., an argument, no"),
    ],
)
def test_bad_input_names_a_fix(request_type: str, options: dict, match: str) -> None:
    """These errors named no fix (QA 35 R #17)."""
    from gpucast.app.program import PredictCmdRequest
    from gpucast.domain.options import build

    kind = MeasureCmdRequest if request_type == "measure" else PredictCmdRequest
    with pytest.raises(InvalidInputError, match=match):
        build(kind, options)


def test_more_cores_than_allowed_is_refused(tmp_path: Path) -> None:
    import os

    with pytest.raises(InvalidSpecError, match="cores"):
        gpucast.measure_cmd(
            command=[PY, "-c", "pass"], cores=len(os.sched_getaffinity(0)) + 1, db=tmp_path / "d"
        )


def test_arguments_are_kept_word_for_word() -> None:
    request = MeasureCmdRequest(command=("echo", "a,b", "c d"))
    from gpucast.domain.options import build

    assert build(MeasureCmdRequest, {"command": ["echo", "a,b", "c d"]}) == request
    assert request.label == "echo"


def test_no_save_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    result = gpucast.measure_cmd(command=[PY, "-c", "pass"], repeats=1, save=False, db=db)
    assert result.run_id is None and not db.exists()
    with open_store(tmp_path / "other.db") as store:
        assert store.count_runs() == 0


def test_predict_cmd_prices_the_program_on_catalog_instances(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    measured = gpucast.measure_cmd(
        command=[PY, "-c", WORK], repeats=2, metric=r"items=(\d+)", target_ci=1.0,
        sample_interval_s=0.02, db=db,
    )  # fmt: skip
    result = gpucast.predict_cmd(runs=[measured.run_id], arch="arm64", db=db)
    assert result.program == Path(PY).name and result.work_unit == "items"
    assert result.predictions and all(p.instance["arch"] == "arm64" for p in result.predictions)
    costs = [p.usd_per_unit for p in result.predictions]
    assert costs == sorted(costs)
    for p in result.predictions:
        assert p.work_per_s == pytest.approx(42.0 / p.run_time_s)
        assert p.usd_per_run == pytest.approx(
            p.instance["on_demand_usd_per_hour"] * p.run_time_s / 3600
        )
    names = {a.name for a in result.assumptions}
    assert {"host memory bandwidth", "thread demand", "SMT", "prices"} <= names
    prices = next(a for a in result.assumptions if a.name == "prices").text()
    assert "catalog/data/cpu_instances.csv" in prices and " as of 20" in prices  # QA 37 V
    assert result.validation["model"] == "program-model"
    assert result.to_frame().shape[0] == len(result.predictions)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"host_memory_bandwidth_gbs": "1e7"}, r"host-memory-bandwidth-gbs: must be a number in "
         r"\(0, 10,000\] GB/s .*e\.g\. --host-memory-bandwidth-gbs 100"),
        ({"host_disk_mb_per_s": "1e7"}, r"host-disk-mb-per-s: must be a number in "
         r"\(0, 1,000,000\] MB/s .*e\.g\. --host-disk-mb-per-s 500"),
    ],
)  # fmt: skip
def test_predict_cmd_host_figures_beyond_any_machine(options: dict, match: str) -> None:
    """10 PB/s of host memory bandwidth was accepted (QA 35 R #26)."""
    from gpucast.app.program import PredictCmdRequest
    from gpucast.domain.options import build

    with pytest.raises(InvalidInputError, match=match):
        build(PredictCmdRequest, {"runs": [1], **options})
    fine = build(PredictCmdRequest, {"runs": [1], "host_memory_bandwidth_gbs": "10000"})
    assert fine.host_memory_bandwidth_gbs == 10_000.0


def test_predict_cmd_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    a = gpucast.measure_cmd(command=[PY, "-c", "pass"], repeats=2, target_ci=1.0, db=db)
    b = gpucast.measure_cmd(command=[PY, "-c", "pass;"], repeats=2, target_ci=1.0, db=db)
    with pytest.raises(InvalidSpecError, match="one command"):
        gpucast.predict_cmd(runs=[a.run_id, b.run_id], db=db)
    with pytest.raises(InvalidInputError, match=r"unknown CPU instance type 'c7g\.lage'"):
        gpucast.predict_cmd(runs=[a.run_id], instances=["c7g.lage"], db=db)
    with pytest.raises(InvalidInputError, match="no run with id 99"):
        gpucast.predict_cmd(runs=[99], db=db)
    with pytest.raises(ProgramFailedError):
        gpucast.measure_cmd(command=[PY, "-c", "raise SystemExit(2)"], db=db)
    with pytest.raises(InvalidSpecError, match="no successful measured run"):
        gpucast.predict_cmd(runs=[3], db=db)

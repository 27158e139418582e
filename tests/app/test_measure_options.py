"""The measure verbs build a configured workload (``-o KEY=VALUE``) and store the run under
the configuration's name, which calibrates predictions of that configuration only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import GpucastError
from gpucast.domain.measurement import Measurement
from gpucast.store import open_store

QUICK = {"device": "cpu", "batch_size": 4, "max_time_s": 0.5, "min_samples": 3}


def _parameters(hidden: tuple[int, ...]) -> int:
    import torch

    from gpucast.workloads import get_workload

    model = get_workload("mlp", hidden=hidden).build_model(torch.device("cpu"))
    return sum(p.numel() for p in model.parameters())


def test_measure_train_runs_and_stores_the_configuration(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result = gpucast.measure_train("mlp", db=db, workload_options=["hidden=16,8"], **QUICK)
    m = result.measurement
    assert isinstance(m, Measurement) and m.spec.options == (("hidden", (16, 8)),)
    assert m.spec.label == "mlp -o hidden=16,8"
    with open_store(db) as store:
        (run,) = store.list_runs()
        assert run.workload == "mlp -o hidden=16,8"
        back = store.get_run(run.id).measurement()
        assert back.spec == m.spec  # the options survive the store, as hashable pairs
        # listing by the plain name shows its configurations; exactly, only its own runs
        assert len(store.list_runs(workload="mlp", configurations=True)) == 1
        assert store.list_runs(workload="mlp") == []
        assert store.list_runs(workload="m_p", configurations=True) == []  # LIKE escaped
    assert result.to_dict()["workload_options"] == [["hidden", [16, 8]]]


def test_measure_infer_refuses_an_option_the_workload_lacks_before_storing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    with pytest.raises(GpucastError, match="bogus"):
        gpucast.measure_infer("mlp", db=db, workload_options=["bogus=1"], **QUICK)
    assert not db.exists()


def test_the_cli_takes_o_and_names_the_configuration(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    args = ["--db", str(db), "measure", "infer", "mlp", "-o", "hidden=8", "--device", "cpu"]
    out = CliRunner().invoke(app, [*args, "--max-time-s", "0.5", "--min-samples", "3"])
    assert out.exit_code == 0, out.output
    assert "infer mlp -o hidden=8" in out.output
    listed = CliRunner().invoke(app, ["--db", str(db), "runs", "list", "--workload", "mlp"])
    assert "mlp -o hidden=8" in listed.output
    bad = CliRunner().invoke(app, [*args[:5], "-o", "hidden", "--device", "cpu"])
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.output
    assert len(json.loads(CliRunner().invoke(app, ["--db", str(db), "runs", "list",
                                                    "--json"]).output)["runs"]) == 1  # fmt: skip


def test_a_distributed_run_builds_the_configured_model(tmp_path: Path) -> None:
    """Every rank builds ``mlp -o hidden=8`` (its parameter count), and the run is stored
    under that name (gloo, two real processes)."""
    db = tmp_path / "s.db"
    result = gpucast.measure_train(
        "mlp", db=db, workload_options=(("hidden", 8),), distributed="ddp", nproc=2,
        device="cpu", batch_size=4, steps=3, warmup_steps=1,
    )  # fmt: skip
    m = result.measurement
    assert m is not None and m.n_parameters == _parameters((8,)) != _parameters((512, 512))
    with open_store(db) as store:
        (run,) = store.list_runs()
        assert run.workload == "mlp -o hidden=8"
        assert store.get_run(run.id).to_dict()["spec"]["options"] == [["hidden", [8]]]


def test_a_measurement_stored_before_options_reads_back_as_the_built_in_one() -> None:
    from gpucast.domain.workload import WorkloadSpec

    data = {
        "workload": "mlp", "batch_size": 4, "precision": "fp32", "mode": "train",
        "device": "cpu", "created_at": "2026-01-01T00:00:00+00:00", "stop_reason": "ci_reached",
        "target_ci": 0.02, "samples_per_step": 4, "step_times_s": [0.1, 0.1, 0.1],
        "environment": {"host": "h", "os": "linux", "python_version": "3.11",
                        "cpu_model": "c", "cpu_cores": 2, "torch_threads": 1,
                        "torch_version": "2"},
    }  # fmt: skip
    from gpucast.domain.measurement import MEASUREMENT_SCHEMA_VERSION

    m = Measurement.from_dict({**data, "schema_version": MEASUREMENT_SCHEMA_VERSION})
    assert m.spec == WorkloadSpec(name="mlp", batch_size=4) and m.spec.label == "mlp"


def test_infer_curve_measures_the_configuration_and_refuses_it_with_colocate(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    quick = {"device": "cpu", "batch_sizes": (1, 2), "max_time_s": 0.5, "min_samples": 3}
    result = gpucast.measure_infer_curve("mlp", db=db, workload_options=["hidden=8"], **quick)
    assert result.workload == "mlp -o hidden=8"
    with open_store(db) as store:
        assert {r.workload for r in store.list_runs()} == {"mlp -o hidden=8"}
    with pytest.raises(GpucastError, match="--colocate"):
        gpucast.measure_infer_curve(
            "mlp", db=db, workload_options=["hidden=8"], colocate=("mlp",), **quick
        )


def test_a_profile_of_a_configuration_is_stored_under_its_name(tmp_path: Path) -> None:
    """``profile mlp -o hidden=32`` was stored as ``mlp`` (its spec left the options out)."""
    db = tmp_path / "s.db"
    gpucast.profile_workload("mlp", batch_size=4, workload_options=["hidden=32"], db=db)
    with open_store(db) as store:
        (run,) = store.list_runs(kind="profile")
    assert run.workload == "mlp -o hidden=32"


def test_a_built_in_name_in_any_case_is_stored_and_looked_up_as_one(tmp_path: Path) -> None:
    """``measure train MLP`` stored ``MLP``, which ``predict train --workload mlp`` did not
    find (built-in names are case-insensitive; a user model ``module:factory`` is as given)."""
    from gpucast.domain.workload import WorkloadSpec, configured_name

    db = tmp_path / "s.db"
    gpucast.measure_train(" MLP ", db=db, workload_options=["hidden=8"], **QUICK)
    with open_store(db) as store:
        (run,) = store.list_runs()
    assert run.workload == "mlp -o hidden=8" == configured_name("Mlp", (("hidden", 8),))
    assert WorkloadSpec(name="My_Model.py:Build", batch_size=1).name == "My_Model.py:Build"


def test_an_option_at_its_built_in_value_is_the_built_in_workload(tmp_path: Path) -> None:
    """``measure train mlp -o hidden=1024,1024`` (mlp's own hidden layers) was stored as a
    configuration of its own, which calibrated no prediction of plain ``mlp``; now it is
    ``mlp``, and a prediction of the configuration finds it too."""
    db = tmp_path / "s.db"
    result = gpucast.measure_train(
        "mlp", db=db, workload_options=["hidden=1024,1024", "num_classes=10"], **QUICK
    )
    assert result.measurement.spec.options == () and result.measurement.spec.label == "mlp"
    note = result.to_dict()["options_note"]
    assert note.startswith("-o hidden=1024,1024 -o num_classes=10 are mlp's built-in values"), note
    configured = gpucast.measure_infer(
        "mlp", db=db, save=False, workload_options=["hidden=8", "num_classes=10"], **QUICK
    )
    assert configured.options_note == (
        "-o num_classes=10 is mlp's built-in value: stored as 'mlp -o hidden=8', which "
        "calibrates predictions of that configuration"
    )
    assert gpucast.measure_infer("mlp", save=False, **QUICK).options_note is None
    with open_store(db) as store:
        (run,) = store.list_runs()
    assert run.workload == "mlp"
    for options in ((), ("in_features=784",)):
        predicted = gpucast.predict_train(
            workload="mlp", gpu="T4", batch_size=4, db=db, workload_options=list(options)
        )
        # the CPU run is found (a CPU calibrates no GPU prediction, and says so by run id)
        assert "store run #1 (cpu" in predicted.calibration_source, options
    other = gpucast.predict_train(
        workload="mlp", gpu="T4", batch_size=4, db=db, workload_options=["hidden=64"]
    )
    assert "store run #1" not in other.calibration_source


def test_runs_list_finds_a_configuration_typed_at_its_built_in_values(tmp_path: Path) -> None:
    from gpucast.app.runs import runs_list

    db = tmp_path / "s.db"
    gpucast.measure_infer("mlp", db=db, workload_options=["hidden=8"], **QUICK)
    for typed in ("mlp -o hidden=8", "mlp -o hidden=8 -o num_classes=10", "MLP -o hidden=8.0"):
        assert len(runs_list(db=db, workload=typed).runs) == 1, typed
    assert runs_list(db=db, workload="mlp -o hidden=16").runs == ()


def test_a_configuration_at_built_in_values_lists_the_plain_runs_only(tmp_path: Path) -> None:
    """QA session 38 (M F2): `runs list --workload 'mlp -o hidden=1024,1024'` (that
    configuration only, as the help says) canonicalised to `mlp` and then listed every mlp
    configuration too; `runs export` and `report --runs` wrote them likewise. A plain name
    still takes its configurations."""
    from gpucast.app.reports import write_report
    from gpucast.app.runs import runs_export, runs_list

    db = tmp_path / "s.db"
    gpucast.measure_infer("mlp", db=db, workload_options=["hidden=8"], **QUICK)
    gpucast.measure_infer("mlp", db=db, **QUICK)
    typed = "mlp -o hidden=1024,1024"
    assert [r.workload for r in runs_list(db=db, workload=typed).runs] == ["mlp"]
    assert len(runs_list(db=db, workload="mlp").runs) == 2
    out = tmp_path / "runs.csv"
    assert runs_export(db=db, workload=typed, out=out).count == 1
    page = write_report(runs=True, db=db, workload=typed, out=tmp_path / "r.html")
    assert page.what.startswith("1 run")


def test_a_user_model_too_big_for_the_host_is_refused_before_its_factory_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 41: `measure train` built a user's model for real (a 128 GiB MLP: the OS kills it
    while its weights are initialised) before the step was checked against host memory."""
    from gpucast.domain.errors import InvalidSpecError
    from gpucast.measure import devices

    factory = Path(__file__).resolve().parents[1] / "profile" / "user_models.py"
    built_on = tmp_path / "built_on"
    monkeypatch.setenv("BUILT_ON", str(built_on))
    monkeypatch.setattr(devices, "device_memory_bytes", lambda device: 64.0)  # bytes
    with pytest.raises(InvalidSpecError, match=r"^batch-size: .*needs about"):
        gpucast.measure_train(
            f"{factory}:records_device", db=tmp_path / "s.db", **{**QUICK, "batch_size": 2}
        )
    assert built_on.read_text().split() == ["meta"]

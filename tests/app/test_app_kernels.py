"""measure train --kernels stores a trace; predict kernels prices it from other runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.store import open_store

QUICK = {"device": "cpu", "batch_size": 4, "max_time_s": 0.5, "min_samples": 3, "target_ci": 0.9}
runner = CliRunner()


@pytest.fixture(scope="module")
def kernel_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    db = tmp_path_factory.mktemp("kernels") / "s.db"
    ids = {
        name: gpucast.measure_train(name, db=db, kernels=True, **QUICK).run_id
        for name in ("ncf", "gcn", "mlp")
    }
    ids["plain"] = gpucast.measure_train("mlp", db=db, **QUICK).run_id
    return db, {k: int(v) for k, v in ids.items() if v is not None}


def test_measure_kernels_stores_the_trace_with_the_run(
    kernel_store: tuple[Path, dict[str, int]],
) -> None:
    db, ids = kernel_store
    with open_store(db) as store:
        trace = store.kernel_trace(ids["mlp"])
        assert trace is not None and trace.activity == "cpu" and trace.steps == 3
        assert {op.op_class for op in trace.operators} >= {"matmul", "elementwise"}
        assert store.kernel_trace(ids["plain"]) is None
        assert store.get_run(ids["mlp"]).summary.workload == "mlp"


def test_predict_kernels_fits_on_the_other_workloads(
    kernel_store: tuple[Path, dict[str, int]],
) -> None:
    db, ids = kernel_store
    result = gpucast.predict_kernels(ids["mlp"], db=db)
    assert result.train_runs == (ids["ncf"], ids["gcn"])
    assert result.train_workloads == ("gcn", "ncf")
    assert result.measured_step_s is not None and result.step_time_s > 0
    assert result.operator_time_s == pytest.approx(sum(c.predicted_s for c in result.classes))
    assert {c.op_class for c in result.classes} >= {"matmul"}
    assert result.roofline_step_s > 0
    assert result.validation["model"] == "kernel-forest" and result.validation["error"]
    other = gpucast.predict_kernels(ids["mlp"], db=db, cpu_instance="c7i.large")
    assert other.measured_step_s is None and other.device.startswith("c7i.large")
    assert any(a.name == "another CPU" for a in other.assumptions)
    same = gpucast.predict_kernels(ids["mlp"], db=db, train_runs=[ids["ncf"], ids["gcn"]])
    assert same.to_dict() == result.to_dict()


def test_a_run_without_kernel_data_names_the_flag(
    kernel_store: tuple[Path, dict[str, int]],
) -> None:
    db, ids = kernel_store
    with pytest.raises(InvalidInputError, match=r"has no kernel data.*--kernels"):
        gpucast.predict_kernels(ids["plain"], db=db)
    result = runner.invoke(app, ["--db", str(db), "predict", "kernels", str(ids["plain"])])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "--kernels" in line
    with pytest.raises(InvalidInputError, match="--kernels"):
        gpucast.predict_kernels(ids["mlp"], db=db, train_runs=[ids["plain"]])
    with pytest.raises(InvalidInputError, match="CPU operator times only"):
        gpucast.predict_kernels(ids["mlp"], db=db, gpu="A100-40GB")


def test_the_cli_prints_the_class_table_and_what_it_rests_on(
    kernel_store: tuple[Path, dict[str, int]],
) -> None:
    db, ids = kernel_store
    result = runner.invoke(app, ["--db", str(db), "predict", "kernels", str(ids["mlp"])])
    assert result.exit_code == 0, result.output
    for text in ("matmul", "step overhead", "roofline", "trained on", "validated error"):
        assert text in result.stdout


def test_kernels_refuses_distributed_and_power_sweeps() -> None:
    with pytest.raises(InvalidSpecError, match="kernels"):
        gpucast.measure_train("mlp", kernels=True, power_limits=[150])


def test_the_cpu_timer_is_for_cpu_steps_only() -> None:
    with pytest.raises(InvalidSpecError, match="timer"):
        gpucast.measure_train("mlp", timer="cpu", device="auto")
    with pytest.raises(InvalidSpecError, match="wall or cpu"):
        gpucast.measure_infer("mlp", timer="gpu", device="cpu")


def test_measure_infer_kernels_on_the_command_line(tmp_path: Path) -> None:
    argv = ["--db", str(tmp_path / "s.db"), "measure", "infer", "mlp", "--kernels",
            "--device", "cpu", "--max-time-s", "0.5", "--min-samples", "3", "--target-ci",
            "0.9", "--timer", "cpu"]  # fmt: skip
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "kernels:" in result.stderr and "distinct operators" in result.stderr
    assert "CPU time (--timer cpu)" in result.stdout
    with open_store(tmp_path / "s.db") as store:
        (run_id,) = store.kernel_run_ids()
        trace = store.kernel_trace(run_id)
    assert trace is not None and trace.timer == "cpu"
    assert not any("backward" in op.name for op in trace.operators)  # inference: no backward

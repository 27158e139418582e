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
    if result.energy_j is None:  # no RAPL here: time only, and it says why
        assert "no energy readings" in result.energy_note
    other = gpucast.predict_kernels(ids["mlp"], db=db, cpu_instance="c7i.large")
    assert other.measured_step_s is None and other.device.startswith("c7i.large")
    assert any(a.name == "another CPU" for a in other.assumptions)
    # QA 41: the training machine's specs were labelled "CPU specs" beside the target, whose
    # own figures were not given
    names = {a.name for a in other.assumptions}
    assert "CPU specs" not in names and "training runs' CPU specs" in names
    assert "GFLOP/s" in other.device_source and "GB/s" in other.device_source
    same = gpucast.predict_kernels(ids["mlp"], db=db, train_runs=[ids["ncf"], ids["gcn"]])
    assert same.to_dict() == result.to_dict()
    # QA session 36: a forest of one or two workloads printed the six-model validated error
    # as its own, with nothing to say it rests on far less
    # (on a loaded machine a capped overhead's warning may come first: any position)
    assert any(w.startswith("the forest is fitted on 2 workloads") for w in result.warnings)
    assert result.to_dict()["warnings"] == list(result.warnings)


def test_an_inference_run_says_the_forests_validation_is_for_training_steps(
    kernel_store: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """QA session 36: an inference run predicted from training runs' operators (-77%) printed
    the training-step validation as its footing, without a word."""
    import shutil

    db = tmp_path / "s.db"
    shutil.copy(kernel_store[0], db)
    infer = gpucast.measure_infer("mlp", db=db, kernels=True, **QUICK).run_id
    result = gpucast.predict_kernels(infer, db=db)
    assert any(
        w.startswith(f"run {infer} times infer steps; the forest was fitted on train steps")
        for w in result.warnings
    )
    trained = gpucast.predict_kernels(kernel_store[1]["mlp"], db=kernel_store[0])
    assert not any("times infer steps" in w for w in trained.warnings)


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
    # QA session 36 #34: these two started with the message, not the flag as `field:`
    with pytest.raises(InvalidInputError, match=r"^gpu: .*CPU operator times only"):
        gpucast.predict_kernels(ids["mlp"], db=db, gpu="A100-40GB")
    with pytest.raises(InvalidInputError, match=r"^cpu-instance: unknown CPU instance type 'nope'"):
        gpucast.predict_kernels(ids["mlp"], db=db, cpu_instance="nope")


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


#: the synthetic GPU's power per class while a kernel runs (W)
GPU_WATTS = {"conv": 350.0, "matmul": 300.0, "elementwise": 180.0}


def _gpu_run(store: object, name: str, scale: float, *, energy: bool = False) -> int:
    """A stored cuda run with a synthetic kernel trace (no GPU needed to store one)."""
    from datetime import UTC, datetime

    from gpucast.domain.kernels import KernelTrace, OperatorRecord
    from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
    from gpucast.domain.workload import WorkloadSpec

    ops = tuple(
        OperatorRecord(
            name=f"aten.op{i}",
            op_class=op_class,
            input_shapes=f"{i}",
            dtype="float32",
            calls_per_step=2.0,
            time_s_per_call=(flops / 1e13 + moved / 1e12 + 5e-6),
            flops=flops,
            bytes_read=moved // 2,
            bytes_written=moved - moved // 2,
            kernels=(f"kernel{i}",),
            energy_j_per_call=GPU_WATTS[op_class] * (flops / 1e13 + moved / 1e12 + 5e-6)
            if energy
            else None,
        )
        for i, (op_class, flops, moved) in enumerate(
            (("conv", int(4e9 * scale), int(4e7 * scale)),
             ("matmul", int(1e9 * scale), int(1e7 * scale)),
             ("elementwise", int(1e7 * scale), int(8e7 * scale)))
        )
    )  # fmt: skip
    trace = KernelTrace(
        device="cuda:0", activity="cuda", steps=3, profiled_step_s=1.0, operators=ops,
        energy_source="nvml" if energy else "",
    )  # fmt: skip
    step = trace.operator_time_s_per_step * 1.1
    env = EnvironmentFingerprint(
        host="gpu-host", os="Linux", python_version="3.11", cpu_model="x", cpu_cores=8,
        torch_threads=8, torch_version="2.13.0", gpu_name="A100-40GB",
    )  # fmt: skip
    m = Measurement(
        spec=WorkloadSpec(name=name, batch_size=8),
        mode="train",
        device="cuda:0",
        step_times_s=tuple(step * (1 + 0.001 * k) for k in range(5)),
        warmup_step_times_s=(step,),
        samples_per_step=8,
        stop_reason="ci_reached",
        target_ci=0.02,
        environment=env,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    return int(store.save_measurement(m, kernels=trace))  # type: ignore[attr-defined]


def test_gpu_runs_predict_another_gpu_through_the_same_code_path(tmp_path: Path) -> None:
    db = tmp_path / "gpu.db"
    with open_store(db) as store:
        train = [_gpu_run(store, f"m{i}", s) for i, s in enumerate((0.5, 1.0, 2.0))]
        target = _gpu_run(store, "held-out", 1.5)
    own = gpucast.predict_kernels(target, db=db)
    assert own.device == "A100-40GB" and own.measured_step_s is not None
    assert own.train_runs == tuple(train)
    h100 = gpucast.predict_kernels(target, db=db, gpu="H100-SXM")
    assert h100.device == "H100-SXM" and h100.measured_step_s is None
    assert h100.step_time_s < own.step_time_s  # more FLOP/s and bandwidth
    assert h100.validation["error"] is None  # only this CPU is validated
    with pytest.raises(InvalidInputError, match="timed as"):
        plain_cpu = gpucast.measure_train("mlp", db=db, kernels=True, **QUICK).run_id
        gpucast.predict_kernels(target, db=db, train_runs=[plain_cpu])


def test_threads_are_set_for_the_run_and_restored() -> None:
    import torch

    before = torch.get_num_threads()
    quick = {**QUICK, "save": False, "timer": "cpu"}
    one = gpucast.measure_infer("mlp", threads=1, **quick)
    assert torch.get_num_threads() == before
    assert one.measurement is not None
    notes = " ".join(one.measurement.warnings)
    assert "CPU time (--timer cpu)" in notes and "summed over" not in notes
    with pytest.raises(InvalidSpecError, match="threads"):
        gpucast.measure_infer("mlp", threads=0, **quick)
    with pytest.raises(InvalidSpecError, match="single-process"):
        gpucast.measure_train("mlp", threads=1, distributed="ddp")


def test_gpu_runs_with_energy_readings_predict_the_steps_energy(tmp_path: Path) -> None:
    db = tmp_path / "gpu.db"
    with open_store(db) as store:
        for i, s in enumerate((0.5, 1.0, 2.0, 4.0)):
            _gpu_run(store, f"m{i}", s, energy=True)
        target = _gpu_run(store, "held-out", 1.5, energy=True)
    own = gpucast.predict_kernels(target, db=db)
    assert own.energy_j is not None and own.measured_operator_energy_j is not None
    assert own.operator_energy_j == pytest.approx(own.measured_operator_energy_j, rel=0.25)
    assert own.energy_note == ""
    assert any(a.name == "power per call" and "not validated" in a.text() for a in own.assumptions)
    out = runner.invoke(app, ["--db", str(db), "predict", "kernels", str(target)])
    assert out.exit_code == 0, out.output
    assert "energy:" in out.stdout and " J per step" in out.stdout


def test_the_same_model_at_other_options_is_not_another_workload(
    kernel_store: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """QA 39: `predict kernels` of mymodels:cnn fitted by default on mymodels:cnn -o
    width=32 -- the same model -- while its validated error is leave-one-model-out."""
    import shutil

    db = tmp_path / "s.db"
    shutil.copy(kernel_store[0], db)
    wider = gpucast.measure_train("mlp", option=["hidden=64"], db=db, kernels=True, **QUICK)
    assert wider.run_id is not None
    _, ids = kernel_store
    result = gpucast.predict_kernels(ids["mlp"], db=db)
    assert result.train_runs == (ids["ncf"], ids["gcn"])
    back = gpucast.predict_kernels(wider.run_id, db=db)
    assert ids["mlp"] not in back.train_runs
